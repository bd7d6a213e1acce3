"""sadc files of older sysstat releases, read by this host's sadf (Debian's 12.6.1).

``tests/data/sysstat/versions`` (README there): files written by the sadc of sysstat 10.2.0
(format 0x2171), 11.2.0, 11.6.1 (0x2173; both formats converted with ``sadf -c``) and 12.2.0
(0x2175, read directly), each with the CSV its own release's sadf printed. Every sample must
come out as the writer's sadf printed it (10.2.0's and 11.2.0's in 512-byte sectors, converted
here), and a sadc drop holding them must index every sample and dead-letter nothing.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadc_versions import SadcFormat, sadc_format
from pipeline.jobs.main_job import MainJob
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DISK_METRICS, DiskSample
from pipeline.reducers.downsample import Downsampler
from pipeline.settings import settings_from_mapping
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.search import refresh

VERSIONS = Path(__file__).resolve().parents[1] / "data" / "sysstat" / "versions"
FILES = {"10.2.0": 0x2171, "11.2.0": 0x2173, "11.6.1": 0x2173, "12.2.0": 0x2175}


def samples(csv: bytes, name: str) -> list[DiskSample]:
    recs = list(parse_sadf_csv(csv.splitlines(), name))
    assert not [r for r in recs if isinstance(r, ParseError)]
    return [r for r in recs if isinstance(r, DiskSample)]


@pytest.fixture(scope="module")
def sadf() -> str:
    path = shutil.which("sadf")
    if path is None:
        pytest.fail("sadf not found: run `make test` (installs sysstat)")
    return path


@pytest.mark.parametrize("version", list(FILES))
def test_every_sample_as_the_writers_own_sadf_printed_it(
    sadf: str, tmp_path: Path, version: str
) -> None:
    path = VERSIONS / f"sa_{version}"
    major, minor, patch = map(int, version.split("."))
    assert sadc_format(path) == SadcFormat((major, minor, patch), FILES[version])
    ours = samples(convert_sadc(path, sadf=sadf, local_host="vm", work_dir=tmp_path), "ours")
    own = samples((VERSIONS / f"sa_{version}_own_sadf_d_U.csv").read_bytes(), "own")
    assert len(ours) == len(own) == 5 * 13  # five samples of loop0..loop11 and vda
    for a, b in zip(ours, own, strict=True):
        assert (a.host, a.end_s, a.interval_s) == (b.host, b.end_s, b.interval_s)
        if b.device.startswith("loop"):  # 254:0 is named by the host that reads the file
            assert a.device == b.device
        for name in DISK_METRICS:
            if name == "discard_kb_per_s" and version < "12":
                continue  # not counted before sysstat 12.1.2: 0 here, as iolens reads it
            # both printed with 2 decimals; 10.2.0's and 11.2.0's in sectors (halved to kB here)
            assert getattr(a, name) == pytest.approx(getattr(b, name), abs=0.0051), (a, name)
    assert any(s.write_kb_per_s > 10_000 for s in ours)  # the dd during the recording
    assert list(tmp_path.iterdir()) == []  # sadf -c's copy deleted


def test_a_sadc_drop_of_older_releases_indexes_every_sample(
    sadf: str, es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    expected = 0
    for version in FILES:
        data = (VERSIONS / f"sa_{version}").read_bytes()
        (drop / f"sa_{version}").write_bytes(data)
        ds = Downsampler(15)
        own = samples((VERSIONS / f"sa_{version}_own_sadf_d_U.csv").read_bytes(), "own")
        expected += sum(len(ds.add(s)) for s in own) + len(ds.flush())
    ns = f"ver{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "embedded": {"enabled": False},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "sadc", "path": str(drop)}],
            "peer": {"downsample_s": 15},
        }
    )
    with MainJob(settings, client) as job:
        summary = job.run_once()
    assert (summary.files, summary.bad_lines, summary.bad_files) == (4, 0, 0)
    assert list(DeadLetters(tmp_path / "state" / "deadletter").iter_inputs()) == []
    index = f"metrics-sysstat.diskio-{ns}"
    refresh(client, index)
    # 13 disks x 15 s intervals: 10.2.0's samples end 1795819331..335 (one interval, to
    # ...335), 11.2.0's 239..243 (one, to ...245), 11.6.1's 244..248 (two: to ...245 and
    # ...260), 12.2.0's 249..253 (one)
    assert int(client.count(index=index)["count"]) == expected == 13 * (1 + 1 + 2 + 1)
