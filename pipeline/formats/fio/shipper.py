"""Shipping fio histogram logs (``*_clat_hist.<job>.log[.<host>][.gz]``).

Time stamps in a histogram log are ms since the job started; the wall-clock start of the run
(the *anchor*) is estimated once per file from its modification time and last record, snapped
to the anchors of the host's other logs (one fio run writes them all), unless
``fio.run_start`` gives it. The anchor is stored in the registry with the file. An estimated
start is said once per file, with a warning giving the value used (a copied log's modification
time is the copy's, so its start can be days off); an epoch-stamped log
(``log_unix_epoch=1``) needs none.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from pipeline.formats.fio.chain import fio_path_parts, fio_tail, last_time_ms
from pipeline.formats.fio.decode import is_epoch_ms
from pipeline.formats.fio.encode import FioSource
from pipeline.shippers.hosts import host_for
from pipeline.shippers.interface import NewFile, ShipContext, Shipper, Tail

log = logging.getLogger(__name__)

ANCHOR_SNAP_MS = 5_000
"""Logs of one host whose estimated run starts lie this close share one start (one fio run)."""


class FioShipper(Shipper):
    """fio histogram logs, tailed line by line.

    Args:
        ctx: what the job gives its shippers; the anchors of the registry's files are known
            run starts.
    """

    pattern = "*_clat_hist.*.log*"
    writes = ("metrics-fio.histogram",)

    def __init__(self, ctx: ShipContext) -> None:
        super().__init__(ctx)
        self._anchors: dict[str, list[int]] = {}
        for st in ctx.registry.all():
            if st.anchor_ms is not None and st.cursor:
                host = json.loads(st.cursor).get("host")
                if host:
                    self._anchors.setdefault(host, []).append(st.anchor_ms)

    def anchor_for(self, host: str, path: str) -> int:
        """Wall-clock ms (Unix epoch, UTC) of time 0 of a job-relative log.

        ``fio.run_start`` when set; else the file's modification time minus the time of its
        last record (ms since the job started), snapped to an anchor of the host's other logs
        within :data:`ANCHOR_SNAP_MS`. An estimate is logged as a warning naming the file, the
        value used and ``fio.run_start`` (not for an epoch-stamped log, whose anchor is unused).

        Raises:
            OSError: the file cannot be stat'ed or read.
        """
        run_start = self.ctx.settings.fio.run_start
        if run_start is not None:
            return int(run_start.timestamp() * 1000)
        mtime_ms = int(Path(path).stat().st_mtime * 1000)
        last_ms = last_time_ms(path)
        estimate = mtime_ms - (last_ms or 0)
        known = self._anchors.setdefault(host, [])
        snapped = next((k for k in known if abs(k - estimate) <= ANCHOR_SNAP_MS), None)
        if snapped is None:
            known.append(estimate)
        anchor = estimate if snapped is None else snapped
        if last_ms is None or not is_epoch_ms(last_ms):
            _warn_estimated(path, mtime_ms, last_ms, anchor, None if snapped is None else host)
        return anchor

    def open(self, file: NewFile) -> Tail | None:
        """A tail on a histogram log; None (with a warning) when its name is not one."""
        p, drop = file.path, file.drop
        try:
            prefix, job = fio_path_parts(file.named)
        except ValueError as err:
            log.warning("skipping %s: %s", p, err)
            return None
        host = host_for(file.named, Path(drop.path), drop.host, self.ctx.hostname)
        state = file.register(lambda: self.anchor_for(host, p))
        fio = self.ctx.settings.fio
        offset_ms = fio.host_offsets_ms.get(host, 0)
        anchor = state.anchor_ms if state.anchor_ms is not None else self.anchor_for(host, p)
        src = FioSource(host, job, prefix, p, file.key.rsplit(":", 1)[-1])
        tail = fio_tail(file.key, p, src, fio, anchor + offset_ms)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail


def _utc(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC with ms, as ``fio.run_start`` takes it: 2026-11-22T05:25:00.203Z."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _warn_estimated(
    path: str, mtime_ms: int, last_ms: int | None, used_ms: int, shared_with: str | None
) -> None:
    """Say that the start of the job-relative log ``path`` was estimated, the value used
    (``used_ms``, epoch ms; ``shared_with``: the host whose other logs' start it is) and how to
    set it instead."""
    if last_ms is None:
        how = f"modification time {_utc(mtime_ms)}; the file has no complete record yet"
    else:
        how = f"modification time {_utc(mtime_ms)} minus the last record's time, {last_ms} ms"
    if shared_with:
        how += f"; the start already estimated for host {shared_with}'s other logs"
    log.warning(
        "%s: the times in this fio log are ms since its job started; that start was estimated "
        "from the file's modification time as %s (UTC: %s). A copied or touched file's "
        "modification time is not when fio wrote it: if the run started at another time, set "
        "fio.run_start to it (ISO 8601, e.g. %s) before its logs are read (a log already read "
        "keeps the start recorded for it), or run fio with log_unix_epoch=1",
        path,
        _utc(used_ms),
        how,
        _utc(used_ms),
    )
