"""One shipper per drop format, behind one interface (:class:`~.base.Shipper`).

``drops[].type`` names the format; :data:`SHIPPERS` maps it to the shipper's class, made once per
job by :func:`build_shippers`. Adding a format: a module here with a :class:`~.base.Shipper`
subclass (and its tail), and its entry in :data:`SHIPPERS` (and in
:data:`pipeline.settings.DropType`).
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.formats.darshan.shipper import DarshanShipper
from pipeline.formats.events.shipper import EventsShipper
from pipeline.formats.fio.shipper import FioShipper
from pipeline.formats.lmt.shipper import LmtShipper
from pipeline.formats.slurm.shipper import SlurmShipper
from pipeline.formats.sysstat.shipper import SadcShipper, SadfShipper
from pipeline.shippers.interface import ShipContext, Shipper

SHIPPERS: dict[str, Callable[[ShipContext], Shipper]] = {
    "fio-hist": FioShipper,
    "sadf": SadfShipper,
    "sadc": SadcShipper,
    "darshan": DarshanShipper,
    "slurm": SlurmShipper,
    "lmt": LmtShipper,
    "events": EventsShipper,
}
"""Drop type -> shipper factory, in the order their idle work runs."""


def build_shippers(ctx: ShipContext) -> dict[str, Shipper]:
    """The shipper of every drop type (``drops[].type`` -> shipper)."""
    return {kind: make(ctx) for kind, make in SHIPPERS.items()}
