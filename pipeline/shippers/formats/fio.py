"""Shipping fio histogram logs (``*_clat_hist.<job>.log[.<host>][.gz]``).

Time stamps in a histogram log are ms since the job started; the wall-clock start of the run
(the *anchor*) is estimated once per file from its modification time and last record, snapped
to the anchors of the host's other logs (one fio run writes them all), unless
``fio.run_start`` gives it. The anchor is stored in the registry with the file.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pipeline.shippers.fio_tail import FioTail, fio_path_parts, last_time_ms
from pipeline.shippers.formats.base import NewFile, ShipContext, Shipper, Tail
from pipeline.shippers.hosts import host_for
from pipeline.sink.documents import FioSource

log = logging.getLogger(__name__)

ANCHOR_SNAP_MS = 5_000
"""Logs of one host whose estimated run starts lie this close share one start (one fio run)."""


class FioShipper(Shipper):
    """fio histogram logs, tailed line by line.

    Args:
        ctx: what the job gives its shippers; the anchors of the registry's files are known
            run starts.
    """

    def __init__(self, ctx: ShipContext) -> None:
        super().__init__(ctx)
        self._anchors: dict[str, list[int]] = {}
        for st in ctx.registry.all():
            if st.anchor_ms is not None and st.cursor:
                host = json.loads(st.cursor).get("host")
                if host:
                    self._anchors.setdefault(host, []).append(st.anchor_ms)

    def anchor_for(self, host: str, path: str) -> int:
        """Wall-clock ms of time 0 of a job-relative log (see ``fio.run_start``)."""
        run_start = self.ctx.settings.fio.run_start
        if run_start is not None:
            return int(run_start.timestamp() * 1000)
        mtime_ms = int(Path(path).stat().st_mtime * 1000)
        estimate = mtime_ms - (last_time_ms(path) or 0)
        for known in self._anchors.get(host, []):
            if abs(known - estimate) <= ANCHOR_SNAP_MS:
                return known
        self._anchors.setdefault(host, []).append(estimate)
        return estimate

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
        tail = FioTail(file.key, p, src, fio, anchor + offset_ms)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail
