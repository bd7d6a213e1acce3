"""Shipping event logs: requests joined from events, placed in the drop's workload model (see
:mod:`pipeline.formats.events.chain`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.formats.events.chain import EventsChain
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.records.event_schema import EventSchema, load_event_schema
from pipeline.settings import DropSettings
from pipeline.shippers.chunk_tail import ChunkChain, ChunkTail
from pipeline.shippers.hosts import host_for
from pipeline.shippers.interface import Idled, NewFile, ShipContext, Tail
from pipeline.shippers.line_tail import LineShipper
from pipeline.shippers.results import Released


class EventsShipper(LineShipper):
    """Event logs, one workload model per drop (kept under ``<state>/models/``).

    Args:
        ctx: what the job gives its shippers.
    """

    pattern = "*.jsonl"
    writes = ("logs-iolens.request", "metrics-iolens.workload_model")
    final_line = False
    tail_type = ChunkTail

    def __init__(self, ctx: ShipContext) -> None:
        super().__init__(ctx)
        self.doc_ctx = ctx.doc_ctx
        self._models: dict[str, tuple[EventSchema, WorkloadModel]] = {}

    def model_for(self, drop: DropSettings) -> tuple[EventSchema, WorkloadModel]:
        """The schema and workload model of an events drop (loaded once per drop).

        Raises:
            ConfigError: the schema cannot be loaded, or the saved model cannot be read.
        """
        root = str(Path(drop.path))
        if root not in self._models:
            assert drop.schema_file is not None  # the settings require it for events drops
            schema = load_event_schema(Path(drop.schema_file))
            name = Path(drop.schema_file).stem
            digest = hashlib.sha1(root.encode(), usedforsecurity=False).hexdigest()[:10]
            path = self.ctx.state_dir / "models" / f"{name}.{digest}.json"
            try:
                model = WorkloadModel(name, path, self.ctx.settings.requests)
            except ValueError as err:
                raise ConfigError(f"{err}; move it away to start a new model") from None
            self._models[root] = (schema, model)
        return self._models[root]

    def chain_for(self, file: NewFile) -> ChunkChain:
        """The chain of an event log, with its drop's schema and model.

        Raises:
            ConfigError: as :meth:`model_for`.
        """
        schema, model = self.model_for(file.drop)
        drop = file.drop
        host = host_for(file.named, Path(drop.path), drop.host, self.ctx.hostname)
        return EventsChain(file.path, host, schema, model, monotonic=self.ctx.monotonic)

    def idle(self, tails: Sequence[Tail], now_s: float, final: bool) -> Iterator[Idled]:
        """What quiet logs flush, then the snapshots of the workload models that are due
        (every one that changed, when ``final``; every one whose last snapshot went to another
        cluster)."""
        yield from super().idle(tails, now_s, final)
        cluster = self.ctx.registry.cluster
        for _schema, model in self._models.values():
            if model.due(now_s, final, cluster):
                docs = model.snapshot(self.doc_ctx, self.ctx.hostname, now_s, cluster)
                yield Idled(None, Released(tuple(docs)))

    def close(self) -> None:
        """Save the workload models."""
        for _schema, model in self._models.values():
            model.save()
