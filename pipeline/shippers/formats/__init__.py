"""One shipper per drop format, behind one interface (:class:`~.base.Shipper`).

``drops[].type`` names the format; :func:`build_shippers` makes one shipper of each. Adding a
format: a module here with a :class:`~.base.Shipper` subclass (and its tail), and a line in
:func:`build_shippers`.
"""

from __future__ import annotations

from pipeline.shippers.formats.base import ShipContext, Shipper
from pipeline.shippers.formats.darshan import DarshanShipper
from pipeline.shippers.formats.events import EventsShipper
from pipeline.shippers.formats.fio import FioShipper
from pipeline.shippers.formats.sysstat import SadcShipper, SadfShipper
from pipeline.shippers.formats.table import LmtShipper, SlurmShipper
from pipeline.shippers.registry import Registry
from pipeline.sink.documents import DocContext


def build_shippers(ctx: ShipContext, registry: Registry, doc_ctx: DocContext) -> dict[str, Shipper]:
    """The shipper of every drop type (``drops[].type`` -> shipper), in the order their idle
    work runs."""
    return {
        "fio-hist": FioShipper(ctx, registry),
        "sadf": SadfShipper(ctx),
        "sadc": SadcShipper(ctx),
        "darshan": DarshanShipper(ctx),
        "slurm": SlurmShipper(ctx),
        "lmt": LmtShipper(ctx),
        "events": EventsShipper(ctx, doc_ctx),
    }
