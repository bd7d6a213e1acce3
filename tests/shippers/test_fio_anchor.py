"""The start of a job-relative fio log estimated from its modification time is said, once per
file, with the value used and the setting that gives it (``fio.run_start``).

Input: ``tests/data/fio/samples/node01`` (fio 3.33 histogram logs of two jobs of one run; the
last record of ``randrw_clat_hist.1.log`` is at 4002 ms, of ``.2.log`` at 4003 ms; provenance
in its README), copied as an ``scp`` without ``-p`` leaves them: modification time the copy's.
"""

from __future__ import annotations

import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.formats.fio.chain import FioChain
from pipeline.formats.fio.shipper import FioShipper
from pipeline.reducers.io_diagnosis import NO_EVIDENCE
from pipeline.settings import DropSettings, settings_from_mapping
from pipeline.shippers.identity import identify
from pipeline.shippers.interface import NewFile, ShipContext
from pipeline.shippers.line_tail import LineTail
from pipeline.shippers.registry import Registry
from pipeline.sink.documents import DocContext

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"
COPIED_AT = datetime(2026, 11, 25, 5, 25, 4, 205_000, tzinfo=UTC).timestamp()
"""The copies' modification time: three days after the run (2026-11-22T05:25:00.203Z)."""


def shipper(tmp_path: Path, registry: Registry, **fio: Any) -> FioShipper:
    settings = settings_from_mapping({"state_dir": str(tmp_path / "state"), "fio": fio}, env={})
    ctx = ShipContext(
        settings,
        tmp_path / "state",
        "here",
        lambda: 0.0,
        lambda a: NO_EVIDENCE,
        registry,
        DocContext(),
    )
    return FioShipper(ctx)


def copied(tmp_path: Path, name: str, mtime_s: float, data: bytes | None = None) -> Path:
    """A copy of the sample ``name`` in the drop's ``node01`` directory, modified at
    ``mtime_s``."""
    dest = tmp_path / "drop" / "node01" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if data is None:
        shutil.copyfile(SAMPLES / name, dest)
    else:
        dest.write_bytes(data)
    os.utime(dest, (mtime_s, mtime_s))
    return dest


def open_log(ship: FioShipper, registry: Registry, path: Path, tmp_path: Path) -> FioChain:
    ident = identify(path, 1024)
    assert ident is not None
    drop = DropSettings(type="fio-hist", path=str(tmp_path / "drop"))
    tail = ship.open(NewFile(ident.key, str(path), path, drop, registry.get(ident.key), registry))
    assert isinstance(tail, LineTail) and isinstance(tail.chain, FioChain)
    return tail.chain


def test_an_estimated_start_is_said_once_per_file_with_the_value_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pipeline.formats.fio.shipper")
    registry = Registry(tmp_path / "state" / "registry.sqlite")
    try:
        ship = shipper(tmp_path, registry)
        first = copied(tmp_path, "randrw_clat_hist.1.log", COPIED_AT)
        second = copied(tmp_path, "randrw_clat_hist.2.log", COPIED_AT + 2.0)
        tails = [open_log(ship, registry, p, tmp_path) for p in (first, second)]
        # opened again (a later pass over the drop): the start recorded for it, said no more
        open_log(shipper(tmp_path, registry), registry, first, tmp_path)
    finally:
        registry.close()
    # 2026-11-25T05:25:04.205Z - 4002 ms; the second log's estimate (05:25:06.205Z - 4003 ms)
    # lies within 5 s of it, so it is the same run's start
    assert [t.origin_ms for t in tails] == [1_795_584_300_203, 1_795_584_300_203]
    messages = [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]
    tail_text = (
        "A copied or touched file's modification time is not when fio wrote it: if the run "
        "started at another time, set fio.run_start to it (ISO 8601, e.g. "
        "2026-11-25T05:25:00.203Z) before its logs are read (a log already read keeps the "
        "start recorded for it), or run fio with log_unix_epoch=1"
    )
    assert messages == [
        f"{first}: the times in this fio log are ms since its job started; that start was "
        "estimated from the file's modification time as 2026-11-25T05:25:00.203Z (UTC: "
        "modification time 2026-11-25T05:25:04.205Z minus the last record's time, 4002 ms). "
        + tail_text,
        f"{second}: the times in this fio log are ms since its job started; that start was "
        "estimated from the file's modification time as 2026-11-25T05:25:00.203Z (UTC: "
        "modification time 2026-11-25T05:25:06.205Z minus the last record's time, 4003 ms; "
        "the start already estimated for host node01's other logs). " + tail_text,
    ]


def test_no_estimate_is_said_when_run_start_is_set_or_the_log_has_epoch_times(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pipeline.formats.fio.shipper")
    epoch_ms = 1_795_584_300_203  # the same log written with log_unix_epoch=1
    lines = (SAMPLES / "randrw_clat_hist.2.log").read_bytes().splitlines(keepends=True)
    epoch = b"".join(
        b"%d," % (epoch_ms + int(x.split(b",", 1)[0])) + x.split(b",", 1)[1] for x in lines
    )
    registry = Registry(tmp_path / "state" / "registry.sqlite")
    try:
        ship = shipper(tmp_path, registry)
        open_log(
            ship, registry, copied(tmp_path, "randrw_clat_hist.2.log", COPIED_AT, epoch), tmp_path
        )
        given = shipper(tmp_path, registry, run_start="2026-11-22T05:25:00.203Z")
        tail = open_log(
            given, registry, copied(tmp_path, "randrw_clat_hist.1.log", COPIED_AT), tmp_path
        )
    finally:
        registry.close()
    assert tail.origin_ms == 1_795_325_100_203  # 2026-11-22T05:25:00.203Z
    assert caplog.records == []
