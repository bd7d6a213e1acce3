"""The columnar ``sadf -d`` reader and downsampler equal the per-line path, sample for sample.

Inputs: the real recordings in ``../shared/data/sysstat/*.csv`` (provenance in
reference/sysstat.md 5.2; ``sadf_d_restart_comment.csv`` holds a LINUX-RESTART), recordings
made by the shared generator (``../shared/tools/synth_sadf.py``, 1 s), and seeded random
``sadf -d`` text with restarts, gaps, devices that stop and start, COM rows and interleaved
hosts, written here. Floats agree to 1e-9 relative (sums in another order).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.formats.sysstat.columns import FIELDS, Unsupported
from pipeline.formats.sysstat.downsample_columns import Downsampled, SampleColumns
from pipeline.jobs.peer_diagnosis import series
from pipeline.jobs.peer_fast import downsample_files as fast
from pipeline.jobs.peer_recording import load, load_lines, read_samples
from pipeline.records.core import DiskSample, RestartMark
from pipeline.reducers.downsample import downsample

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat"
REAL_CSV = sorted(DATA.glob("*.csv"))
HEADER = "# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util"
RTOL = 1e-9


def per_line(paths: Sequence[Path], interval_s: float) -> list[DiskSample]:
    """What the offline loader downsamples: every file's records, stably sorted by time."""
    records: list[DiskSample | RestartMark] = []
    for p in paths:
        good, bad = read_samples(p)
        assert not bad
        records += good
    records.sort(key=lambda r: r.end_s)
    return downsample(records, interval_s)


def assert_same(fast_out: Downsampled, slow: list[DiskSample]) -> None:
    """Same samples per LUN, in time order; floats to RTOL."""
    by_lun: dict[tuple[str, str], list[DiskSample]] = {}
    for s in slow:
        by_lun.setdefault((s.host, s.device), []).append(s)
    got: dict[tuple[str, str], list[int]] = {}
    for k, lun in enumerate(fast_out.lun):
        got.setdefault(fast_out.luns[int(lun)], []).append(k)
    assert sorted(got) == sorted(by_lun)
    for key, samples in by_lun.items():
        rows = got[key]
        assert len(rows) == len(samples), key
        expected = np.array(
            [[s.end_s, s.interval_s, *(getattr(s, f) for f in FIELDS)] for s in samples]
        )
        actual = np.column_stack(
            [fast_out.end_s[rows], fast_out.interval_s[rows], fast_out.values[rows]]
        )
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=1e-12, err_msg=str(key))


@pytest.mark.parametrize("path", REAL_CSV, ids=[p.name for p in REAL_CSV])
@pytest.mark.parametrize("block_bytes", [200, 1 << 20])
def test_real_recordings_equal_the_streaming_downsampler(path: Path, block_bytes: int) -> None:
    assert_same(fast([path], 15.0, block_bytes=block_bytes), per_line([path], 15.0))


def test_real_restart_splits_the_interval() -> None:
    path = DATA / "sadf_d_restart_comment.csv"
    out = fast([path], 15.0, block_bytes=100)
    # 04:28:48-49 before the restart, 04:28:50-51 after: two partial samples, not one
    assert list(out.interval_s) == [2.0, 2.0]
    assert list(out.end_s) == [1795321729.0, 1795321731.0]


def test_generated_1s_recordings(synth_sadf: Any, tmp_path: Path) -> None:
    layout = ["--hosts", "3", "--luns", "4", "--luns-per-group", "12", "--interval", "1"]
    synth_sadf.generate(tmp_path, 1, 7, ["fs001:dm-1:0.2:0.6:4:await"], layout)
    paths = sorted(tmp_path.glob("*.csv"))
    assert len(paths) == 3
    assert_same(fast(paths, 15.0, block_bytes=50_000), per_line(paths, 15.0))


def messy(rng: random.Random, hosts: int, devices: int, seconds: int, epoch: bool) -> list[str]:
    """``sadf -d`` lines with restarts, gaps, devices coming and going, comments, 1-3 s samples.

    Hosts are interleaved line by line (as a merged file could be); each host's times go up.
    """
    start = 1_795_320_000 + rng.randrange(15)
    per_host: list[list[str]] = []
    for h in range(hosts):
        lines: list[str] = []
        t, step = start, rng.choice([1, 1, 2, 3])
        present = {d for d in range(devices) if rng.random() < 0.9}
        while t < start + seconds:
            if rng.random() < 0.01:
                lines.append(f"h{h};-1;{stamp(t, epoch)};LINUX-RESTART\t(2 CPU)")
                lines.append(HEADER)
                step = rng.choice([1, 2, 3])
            if rng.random() < 0.005:
                lines.append(f"h{h};-1;{stamp(t, epoch)};COM a comment")
            if rng.random() < 0.02:
                t += rng.randrange(2, 40)  # a gap (short ones are not gaps)
            if rng.random() < 0.03:
                present ^= {rng.randrange(devices)}
            t += step
            for d in sorted(present):
                v = [rng.choice([0.0, rng.uniform(0, 500)]) for _ in range(8)]
                cells = ";".join(f"{x:.2f}" for x in v)
                lines.append(f"h{h};{step};{stamp(t, epoch)};dev{d};{cells}")
        per_host.append(lines)
    out, cursors = [HEADER], [0] * hosts
    while any(c < len(lines) for c, lines in zip(cursors, per_host, strict=True)):
        h = rng.choice([i for i in range(hosts) if cursors[i] < len(per_host[i])])
        take = rng.randrange(1, 20)
        out += per_host[h][cursors[h] : cursors[h] + take]
        cursors[h] += take
    return out


def stamp(t: int, epoch: bool) -> str:
    if epoch:
        return str(t)
    return np.datetime_as_string(np.datetime64(t, "s")).replace("T", " ") + " UTC"


@pytest.mark.parametrize("seed", range(12))
def test_messy_input_equals_the_streaming_downsampler(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    lines = messy(rng, hosts=3, devices=4, seconds=900, epoch=seed % 2 == 0)
    cut = len(lines) // 2  # two files, the second starting without a header: give it one
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("\n".join(lines[:cut]) + "\n")
    second.write_text("\n".join([HEADER, *lines[cut:]]) + "\n")
    paths = [first, second]
    interval = [15.0, 30.0, 6.0][seed % 3]
    block = rng.choice([300, 4096, 1 << 20])
    assert_same(fast(paths, interval, block_bytes=block), per_line(paths, interval))


@pytest.mark.parametrize(
    "text",
    [
        '{"sysstat": {"hosts": []}}\n',
        f"{HEADER}\nvm;1;1795320862;vda;1;1;1;1;1;1;1;1\nvm;1;1795320861;vda;1;1;1;1;1;1;1;1\n",
        f"{HEADER}\nvm;1;1795320862;vda;1;x;1;1;1;1;1;1\n",
        f"{HEADER}\nvm;1;1795320862;vda;1;-1;1;1;1;1;1;1\n",
        f"{HEADER}\nvm;1;2026-11-22 04:28:49;vda;1;1;1;1;1;1;1;1\n",
        f"{HEADER}\nvm;1;1795320862;vda;1;1;1;1;1;1;1;1;9\n",
        f"{HEADER}\nvm;30;1795320862;vda;1;1;1;1;1;1;1;1\n",
        "# hostname;interval;timestamp;DEV;tps;rd_sec/s;wr_sec/s;avgrq-sz;avgqu-sz;await;%util\n"
        f"vm;1;1795320862;vda;1;1;1;1;1;1;1\n{HEADER}\nvm;1;1795320863;vda;1;1;1;1;1;1;1;1\n",
    ],
    ids=[
        "json",
        "back-in-time",
        "not-a-number",
        "negative",
        "local-time",
        "extra-column",
        "longer-than-target",
        "second-header-differs",
    ],
)
def test_what_the_fast_reader_refuses(text: str, tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(text)
    with pytest.raises(Unsupported):
        fast([path], 15.0)


def test_load_falls_back_to_lines_and_gives_the_same_recording(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{HEADER}\nvm;1;1795320862;vda;1;x;1;1;1;1;1;1\n")
    paths = [*REAL_CSV, bad]
    rec, ref = load(paths, 15.0), load_lines(paths, 15.0)
    assert rec.bad_lines == ref.bad_lines == 1
    assert rec.samples.keys() == ref.samples.keys()


def test_load_uses_columns_and_series_is_unchanged(tmp_path: Path) -> None:
    rng = random.Random(99)
    path = tmp_path / "m.csv"
    path.write_text("\n".join(messy(rng, hosts=2, devices=5, seconds=1800, epoch=False)) + "\n")
    rec, ref = load([path], 15.0), load_lines([path], 15.0)
    assert all(isinstance(s, SampleColumns) for s in rec.samples.values())
    assert rec.samples.keys() == ref.samples.keys()
    for lun, samples in ref.samples.items():
        got = rec.samples[lun]
        assert len(got) == len(samples)
        assert got[0].host == samples[0].host and got[-1].end_s == samples[-1].end_s
    groups = {"h0:*": "a", "h1:*": "b"}
    for metric in ("await", "tps", "rd_sec"):
        for mine, theirs in zip(
            series(rec, metric, groups, since_s=1_795_320_300.0),
            series(ref, metric, groups, since_s=1_795_320_300.0),
            strict=True,
        ):
            assert (mine.group, mine.luns) == (theirs.group, theirs.luns)
            np.testing.assert_array_equal(mine.times_s, theirs.times_s)
            np.testing.assert_allclose(mine.values, theirs.values, rtol=RTOL, atol=1e-12)
