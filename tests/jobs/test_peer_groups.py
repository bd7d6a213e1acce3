"""Peer groups across servers (pattern, explicit list, storage map, per-host fallback) and the
derived ``svctm`` metric, on the real recordings of ``tests/data/sysstat`` (host ``vm``).

The two-server copy relabels the six loop devices of ``vm`` as the LUNs of two file servers,
one file per server: ``loop0..2 -> fs1/dm-0..2`` and ``loop3..5 -> fs2/dm-0..2`` (the slowed
``loop3`` becomes ``fs2/dm-0``); ``vda`` stays with ``fs1``. Samples and times are unchanged, and
the sorted LUN names keep the loops' order, so a cross-server group of the six must give exactly
the windows of the one-host group ``vm:loop[0-5]``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.jobs.peer_diagnosis import diagnose, series, train
from pipeline.jobs.peer_groups import PeerGroups, read_storage_map
from pipeline.jobs.peer_job import PeerJob
from pipeline.jobs.peer_recording import load, load_lines
from pipeline.records.core import Document
from pipeline.reducers.peer_flags import WindowResult
from pipeline.reducers.peer_params import PeerParams
from pipeline.settings import PeerSettings
from pipeline.sink.documents import DocContext

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
CLEAN = DATA / "peer_clean_sadf_d.csv"
FAULT = DATA / "peer_fault_sadf_d.csv"
PARAMS = PeerParams(15, 60, 30, 3, 1000)  # the seed's: ma 15, windows of 60 shifted by 30, 3 of 5
RENAME = {f"loop{i}": ("fs1" if i < 3 else "fs2", f"dm-{i % 3}") for i in range(6)}
LUNS = [f"{h}:{d}" for h, d in RENAME.values()]
MAP_HEADER = "# exported from the array's host mapping\nhost,device,array,lun,path\n"


def two_servers(src: Path, out: Path) -> list[Path]:
    """``src`` split into one ``sadf -d`` file per relabelled server (module docstring)."""
    lines = src.read_text().splitlines()
    files = {h: [lines[0]] for h in ("fs1", "fs2")}
    for line in lines[1:]:
        host, interval, ts, dev, rest = line.split(";", 4)
        new_host, new_dev = RENAME.get(dev, ("fs1", dev))
        files[new_host].append(";".join([new_host, interval, ts, new_dev, rest]))
    out.mkdir()
    for host, rows in files.items():
        (out / f"{host}.csv").write_text("\n".join(rows) + "\n")
    return [out / "fs1.csv", out / "fs2.csv"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    root = tmp_path_factory.mktemp("two")
    return {
        "clean": two_servers(CLEAN, root / "clean"),
        "fault": two_servers(FAULT, root / "fault"),
    }


def run(clean: Sequence[Path], fault: Sequence[Path], groups: PeerGroups) -> list[WindowResult]:
    """Train await thresholds on ``clean``, diagnose ``fault`` (1 s samples, seed parameters)."""
    thresholds = train(load(clean, 1.0), ["await"], groups, PARAMS)
    return diagnose(load(fault, 1.0), "await", groups, PARAMS, thresholds)


@pytest.fixture(scope="module")
def reference() -> list[WindowResult]:
    """The one-host group of the six loops: the recording as it was made."""
    return run([CLEAN], [FAULT], PeerGroups(patterns={"vm:loop[0-5]": "lun"}))


def storage_map(path: Path, rows: Sequence[str]) -> Path:
    path.write_text(MAP_HEADER + "".join(r + "\n" for r in rows))
    return path


@pytest.mark.parametrize("how", ["pattern", "list", "map"])
def test_a_group_across_two_servers_compares_as_the_same_luns_on_one(
    how: str,
    files: dict[str, list[Path]],
    reference: list[WindowResult],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if how == "pattern":
        peer = PeerSettings(groups={"fs[12]:dm-*": "ddn1"})
    elif how == "list":
        peer = PeerSettings(members={"ddn1": tuple(LUNS)})
    else:
        rows = [f"{h},{d},ddn1,L{i:03d}," for i, (h, d) in enumerate(RENAME.values())]
        peer = PeerSettings(storage_map=str(storage_map(tmp_path / "map.csv", rows)))
    with caplog.at_level(logging.WARNING):
        got = run(files["clean"], files["fault"], PeerGroups.from_settings(peer))
    lun_names = [lun.replace(":", "/") for lun in LUNS]
    assert [r.group for r in got] == ["ddn1"] * len(reference) == ["ddn1"] * 16
    for mine, ref in zip(got, reference, strict=True):
        assert list(mine.luns) == lun_names
        assert (mine.index, mine.end_s, mine.threshold, mine.bins) == (
            ref.index,
            ref.end_s,
            ref.threshold,
            ref.bins,
        )
        np.testing.assert_array_equal(mine.majority_distances, ref.majority_distances)
        rename = dict(zip(ref.luns, lun_names, strict=True))
        assert sorted(mine.anomalous) == sorted(rename[x] for x in ref.anomalous)
        assert sorted(mine.faulty) == sorted(rename[x] for x in ref.faulty)
    # the slowed LUN (loop3, now fs2/dm-0) is indicted from window 6 on, and nothing else
    assert [j for j, r in enumerate(got) if r.faulty] == list(range(6, 16))
    assert {x for r in got for x in r.faulty} == {"fs2/dm-0"}
    # vda (fs1) is in no group entry: it falls back to its server, said once
    fallback = [r.getMessage() for r in caplog.records if "peer groups: LUN" in r.getMessage()]
    assert len(fallback) == 1 and fallback[0].startswith("peer groups: LUN fs1/vda is in no")


def test_a_storage_map_with_paths_makes_one_group_per_array_and_path(
    files: dict[str, list[Path]], tmp_path: Path
) -> None:
    rows = [
        f"{h},{d},ddn1,L{i % 3:03d},{'primary' if h == 'fs1' else 'secondary'}"
        for i, (h, d) in enumerate(RENAME.values())
    ]
    path = storage_map(tmp_path / "map.csv", [*rows, "fs1,vda,boot,,"])
    assert read_storage_map(path) == {
        "fs1:dm-0": "ddn1/primary",
        "fs1:dm-1": "ddn1/primary",
        "fs1:dm-2": "ddn1/primary",
        "fs2:dm-0": "ddn1/secondary",
        "fs2:dm-1": "ddn1/secondary",
        "fs2:dm-2": "ddn1/secondary",
        "fs1:vda": "boot",
    }
    groups = PeerGroups.from_settings(PeerSettings(storage_map=str(path)))
    got = series(load(files["fault"], 1.0), "await", groups)
    assert {s.group: list(s.luns) for s in got} == {  # boot has one LUN: not compared
        "ddn1/primary": ["fs1/dm-0", "fs1/dm-1", "fs1/dm-2"],
        "ddn1/secondary": ["fs2/dm-0", "fs2/dm-1", "fs2/dm-2"],
    }


def test_the_explicit_list_wins_over_the_map_and_the_map_over_patterns(tmp_path: Path) -> None:
    path = storage_map(tmp_path / "map.csv", ["fs1,dm-0,ddn1,,", "fs1,dm-1,ddn1,,"])
    groups = PeerGroups.from_settings(
        PeerSettings(storage_map=str(path), members={"spare": ("fs1:dm-1",)}, groups={"*": "any"})
    )
    assert [groups.of("fs1", d) for d in ("dm-0", "dm-1", "dm-2")] == ["ddn1", "spare", "any"]


def test_per_host_fallback_warns_once_and_only_with_several_servers(
    files: dict[str, list[Path]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        one_host = PeerGroups()
        assert [s.group for s in series(load([FAULT], 1.0), "await", one_host)] == ["vm"]
        assert not [r for r in caplog.records if "peer groups" in r.getMessage()]
        groups = PeerGroups()
        rec = load(files["fault"], 1.0)
        for metric in ("await", "tps"):  # as train does for each metric
            assert {s.group: len(s.luns) for s in series(rec, metric, groups)} == {
                "fs1": 4,
                "fs2": 3,
            }
    (warning,) = [r for r in caplog.records if "peer groups" in r.getMessage()]
    first = next(iter(rec.samples))
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith(f"peer groups: LUN {first} is in no peer.members")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("host,device\nfs1,dm-0\n", "line 1: no column array"),
        ("host,device,array\nfs1,,ddn1\n", "line 2: empty device"),
        (
            "host,device,array,path\nfs1,dm-0,a:b,\n",
            "line 2: group name 'a:b' contains ':'; use names without ':'",
        ),
        (
            "host,device,array\nfs1,dm-0,ddn1\n# moved\nfs1,dm-0,ddn2\n",
            "line 4: fs1:dm-0 is already in group ddn1 (line 2); list each attachment once",
        ),
        (
            "host,device,array,lun\nfs1,dm-0,ddn1,L7\nfs2,dm-0,ddn2,L7\n",
            "line 3: LUN L7 is on array ddn1 at line 2; a LUN has one array",
        ),
    ],
)
def test_a_bad_storage_map_names_file_line_and_fix(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_storage_map(path)
    assert str(err.value).startswith(f"peer.storage_map {path} {message}")


def test_members_must_be_luns_in_one_group() -> None:
    with pytest.raises(ValueError, match="fs1:dm-0 is in groups a and b: keep one"):
        PeerSettings(members={"a": ("fs1:dm-0",), "b": ("fs1:dm-0",)})
    with pytest.raises(ValueError, match="'dm-0' is not 'host:device'"):
        PeerSettings(members={"a": ("dm-0",)})


# svctm = %util / 100 / tps * 1000 ms, by hand from rows of peer_fault_sadf_d.csv
# (# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util):
#   vm;1;2026-11-22 06:36:00 UTC;loop3;81.00;752.00;544.00;0.00;16.00;3.97;49.04;100.00
#       -> 100.00 / 100 / 81.00 * 1000 = 12.345679 ms (loop3 sleeps 12 ms per I/O then)
#   vm;1;2026-11-22 06:36:00 UTC;loop0;70.00;512.00;608.00;0.00;16.00;0.01;0.13;0.40
#       -> 0.40 / 100 / 70.00 * 1000 = 0.057143 ms
#   vm;1;2026-11-22 06:32:45 UTC;vda;0.00;...;0.00 -> tps 0: 0, as sysstat printed it
HAND = {
    ("loop3", 1795329360.0): 12.345679012345679,
    ("loop0", 1795329360.0): 0.05714285714285715,
    ("vda", 1795329165.0): 0.0,
}


@pytest.mark.parametrize("reader", [load, load_lines])
def test_svctm_is_derived_from_util_and_tps_of_the_same_sample(reader: object) -> None:
    assert callable(reader)
    rec = reader([FAULT], 1.0)
    (s,) = series(rec, "svctm", {"vm:*": "all"})
    for (device, end_s), want in HAND.items():
        row = list(s.luns).index(f"vm/{device}")
        col = int(np.searchsorted(s.times_s, end_s))
        assert s.times_s[col] == end_s
        assert s.values[row, col] == pytest.approx(want, rel=1e-12, abs=1e-15)
    util = series(rec, "%util", {"vm:*": "all"})[0].values
    tps = series(rec, "tps", {"vm:*": "all"})[0].values
    busy = tps > 0
    np.testing.assert_allclose(s.values[busy], util[busy] * 10 / tps[busy], rtol=1e-12)
    assert not s.values[~busy].any()


def test_svctm_of_a_downsampled_interval_is_its_busy_time_over_its_ios() -> None:
    raw = series(load([FAULT], 1.0), "svctm", {"vm:loop[0-5]": "lun"})[0]
    util = series(load([FAULT], 1.0), "%util", {"vm:loop[0-5]": "lun"})[0]
    tps = series(load([FAULT], 1.0), "tps", {"vm:loop[0-5]": "lun"})[0]
    (s,) = series(load([FAULT], 15.0), "svctm", {"vm:loop[0-5]": "lun"})
    assert raw.luns == s.luns and len(s.times_s) == 35  # 540 one-second records, whole 15 s
    for col, end in enumerate(s.times_s):
        inside = (util.times_s > end - 15) & (util.times_s <= end)
        assert inside.sum() == 15
        busy_ms = util.values[:, inside].sum(axis=1) * 10  # %util x 1 s -> ms busy
        ios = tps.values[:, inside].sum(axis=1)
        np.testing.assert_allclose(s.values[:, col], busy_ms / ios, rtol=1e-9)


def test_the_scheduled_job_groups_by_the_storage_map_and_derives_svctm(
    files: dict[str, list[Path]], tmp_path: Path
) -> None:
    rows = [f"{h},{d},ddn1,L{i:03d}," for i, (h, d) in enumerate(RENAME.values())]
    peer = PeerSettings(
        storage_map=str(storage_map(tmp_path / "map.csv", rows)),
        metrics=("svctm",),
        downsample_s=1.0,
        settle_s=0,
    )
    groups = PeerGroups.from_settings(peer)
    thresholds = train(load(files["clean"], 1.0), ["svctm"], groups, PARAMS)
    offline = diagnose(load(files["fault"], 1.0), "svctm", groups, PARAMS, thresholds)
    ctx = DocContext("t", "a")
    hits = [
        {"_source": diskio_document(ctx, s, (), 0.0).source}
        for samples in load_lines(files["fault"], 1.0).samples.values()
        for s in samples
    ]
    emitted: list[Document] = []
    state: dict[str, Any] = {}
    job = PeerJob(
        hits=lambda index, query, sort: hits,
        emit=emitted.append,
        settle=lambda: True,
        peer=peer,
        thresholds=thresholds,
        ctx=ctx,
        lease=lambda: True,
        load_state=lambda: state.get("s"),
        save_state=lambda s: state.update(s=dict(s)),
    )
    assert job.run(force=True) == len(offline) == 16
    verdicts = {
        (d.source["iolens"]["peer"]["lun"], d.source["iolens"]["peer"]["window"]["end_s"]): (
            d.source["iolens"]["peer"]["group"],
            d.source["iolens"]["faulty"],
        )
        for d in emitted
        if d.index.startswith("metrics-iolens.peer_anomaly")
    }
    assert verdicts == {
        (lun, r.end_s): ("ddn1", lun in r.faulty) for r in offline for lun in r.luns
    }
    assert {lun for (lun, _), (_, faulty) in verdicts.items() if faulty} == {"fs2/dm-0"}


def test_group_names_hold_no_colon() -> None:
    """Rankings name a LUN ``group:host/device`` and split that at the first ``:``."""
    with pytest.raises(ValueError, match="fs1:\\*: group name 'a:b': give a non-empty name"):
        PeerSettings(groups={"fs1:*": "a:b"})
    with pytest.raises(ValueError, match="group name 'a:b': give a non-empty name"):
        PeerSettings(members={"a:b": ("fs1:dm-0",)})
