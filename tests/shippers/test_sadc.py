"""Converting real sadc binary files with the real sadf 12.6.1 (``make test`` installs sysstat).

``sa_test`` (29 one-second records of ``vda``) and ``sa_restart`` (six loop devices and
``vda``, a restart marker and a comment written into it by a second sadc) are in
``../shared/data/sysstat/``; reference/sysstat.md 1.1 and 1.5 describe how they were recorded.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadc_versions import SadcFormat, sadc_format
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample, RestartMark

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat"
SADC = "/usr/lib/sysstat/sadc"


@pytest.fixture
def sadf() -> str:
    path = shutil.which("sadf")
    if path is None:
        pytest.fail("sadf not found: run `make test` (installs sysstat) or apt-get install sysstat")
    return path


def parsed(csv: bytes, name: str) -> list[DiskSample | RestartMark | ParseError]:
    return list(parse_sadf_csv(csv.splitlines(), name, 1))


def test_sa_test_converts_to_the_recorded_csv(sadf: str) -> None:
    out = convert_sadc(DATA / "sa_test", sadf=sadf, local_host="vm")
    assert out.splitlines()[:2] == [
        b"# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util",
        b"vm;1;1795320862;vda;14.00;48.00;20.00;32.00;7.14;0.00;0.14;0.40",
    ]
    assert out == (DATA / "sadf_d_U_d.csv").read_bytes()


def test_sa_restart_rows_and_restart(sadf: str) -> None:
    recs = parsed(convert_sadc(DATA / "sa_restart", sadf=sadf, local_host="vm"), "sa_restart")
    assert not [r for r in recs if isinstance(r, ParseError)]
    assert len(recs) == 29  # 4 records x 7 devices + the restart
    assert recs[14] == RestartMark("vm", 1795321729.0)  # 2026-11-22 04:28:49 UTC
    # vm;1;2026-11-22 04:28:50 UTC;loop2;111.00;640.00;4496.00;0.00;46.27;0.02;0.14;1.60
    assert recs[17] == DiskSample(
        "vm", "loop2", 1795321730.0, 1.0, 111.0, 640.0, 4496.0, 0.0, 46.27, 0.02, 0.14, 1.6
    )
    devices = [r.device for r in recs[:7] if isinstance(r, DiskSample)]
    assert devices == ["loop0", "loop1", "loop2", "loop3", "loop4", "loop5", "vda"]


def test_a_fresh_recording_of_this_host(sadf: str, tmp_path: Path) -> None:
    if not os.access(SADC, os.X_OK):
        pytest.fail(f"{SADC} not found: run `make test` (installs sysstat)")
    target = tmp_path / "sa_fresh"
    subprocess.run([SADC, "-S", "DISK", "1", "2", str(target)], check=True, timeout=60)
    recs = parsed(convert_sadc(target, sadf=sadf), str(target))
    assert recs, "no device with I/O since boot"
    assert all(isinstance(r, DiskSample) for r in recs)
    assert {(r.host, r.interval_s) for r in recs if isinstance(r, DiskSample)} == {
        (os.uname().nodename, 1.0)
    }


def test_not_a_sadc_file_names_the_file_and_sadf_message(sadf: str, tmp_path: Path) -> None:
    bad = tmp_path / "sa_bad"
    bad.write_bytes(b"this is not a sadc file\n" * 100)
    with pytest.raises(ParseError) as info:
        convert_sadc(bad, sadf=sadf)
    assert info.value.path == str(bad)
    assert "sadf exited with status 3" in info.value.reason
    assert "Invalid system activity file" in info.value.reason


def test_missing_file(sadf: str, tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="No such file or directory"):
        convert_sadc(tmp_path / "absent", sadf=sadf)


def test_sadf_not_installed() -> None:
    with pytest.raises(ConfigError, match="install sysstat"):
        convert_sadc(DATA / "sa_test", sadf="/nonexistent/sadf")


def test_timeout_names_the_file() -> None:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        assert kwargs["timeout"] == 5.0
        assert kwargs["env"]["LC_ALL"] == "C"
        raise subprocess.TimeoutExpired(argv, 5.0)

    with pytest.raises(TimeoutError, match="sa_test"):
        convert_sadc(DATA / "sa_test", timeout_s=5.0, run=run)


def test_file_from_another_host_warns(sadf: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.formats.sysstat.sadc"):
        convert_sadc(DATA / "sa_test", sadf=sadf, local_host="fs001")
    assert len(caplog.records) == 1
    assert "recorded on vm but converted on fs001" in caplog.records[0].getMessage()
    caplog.clear()
    convert_sadc(DATA / "sa_test", sadf=sadf, local_host="vm")
    assert not caplog.records


CORPUS = DATA.parent / "sysstat-corpus"


def test_file_magic_of_every_sysstat_version() -> None:
    """The writer's version and format from the first 8 bytes (sysstat's ``file_magic``)."""
    assert sadc_format(DATA / "sa_test") == SadcFormat((12, 6, 1), 0x2175)
    assert sadc_format(CORPUS / "data-9.1.5") == SadcFormat((9, 1, 5), 0x2170)
    assert sadc_format(CORPUS / "data-10.3.1") == SadcFormat((10, 3, 1), 0x2173)
    assert sadc_format(CORPUS / "sim-data-new") == SadcFormat((99, 9, 9), 0x2175)
    assert sadc_format(DATA / "sadf_d_d.csv") is None
    swapped = (DATA / "sa_test").read_bytes()
    assert sadc_format_of(swapped[1::-1] + swapped[3:1:-1] + swapped[4:]) == SadcFormat(
        (12, 6, 1), 0x2175
    )  # written on a big-endian host


def sadc_format_of(data: bytes) -> SadcFormat | None:
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        return sadc_format(f.name)


def test_older_format_is_converted_with_sadf_c_then_read(sadf: str, tmp_path: Path) -> None:
    """The conversion path, end to end but for sadf -c itself: no file of a format Debian's sadf
    12.6.1 converts is available here (the corpus' 10.3.1 file crashes it), so ``sadf -c`` is
    stood in for by a copy of a real 12.6.1 file; sadf -d runs for real on both sides."""
    old = tmp_path / "sa_old"
    old.write_bytes((CORPUS / "data-10.3.1").read_bytes())
    calls: list[list[str]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        if argv[1] == "-c":
            return subprocess.CompletedProcess(argv, 0, (DATA / "sa_test").read_bytes(), b"")
        return subprocess.run(argv, **kwargs)

    work = tmp_path / "state" / "sadc-convert"
    out = convert_sadc(old, sadf=sadf, local_host="vm", run=run, work_dir=work)
    assert out == (DATA / "sadf_d_U_d.csv").read_bytes()
    assert [c[1:3] for c in calls] == [["-d", "-U"], ["-c", str(old)], ["-d", "-U"]]
    assert calls[2][3].startswith(str(work)) and calls[2][3].endswith("sa_old.sadf-c")
    assert list(work.iterdir()) == []  # the converted copy is deleted once read


def test_file_without_disk_statistics_says_how_to_record_them(sadf: str, tmp_path: Path) -> None:
    if not os.access(SADC, os.X_OK):
        pytest.fail(f"{SADC} not found: run `make test` (installs sysstat)")
    target = tmp_path / "sa_nodisk"
    subprocess.run([SADC, "1", "2", str(target)], check=True, timeout=60)  # no -S DISK
    with pytest.raises(ParseError) as info:
        convert_sadc(target, sadf=sadf)
    assert "Requested activities not available" in info.value.reason
    assert info.value.reason.endswith(
        "; sadc records disk statistics only with -S DISK (SADC_OPTIONS in sysstat's config)"
    )


def test_a_file_sadf_prints_nothing_for_is_refused(tmp_path: Path) -> None:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    with pytest.raises(ParseError, match="sadf printed nothing for it"):
        convert_sadc(DATA / "sa_test", run=run)
