"""Durable state of scheduled jobs, kept in Elasticsearch (index ``iolens-state``).

A job that takes over from another instance (see :mod:`pipeline.sink.lease`) finds its state
there. One document per job: ``{"state": "<JSON text>", "updated_ms": ...}``; the state is stored
as text so that its shape never meets a mapping.

A save replaces exactly the version the last load saw (``if_seq_no`` / ``if_primary_term``, or
``create`` when there was none): an instance that lost its lease while it computed (cut off, or
paused) cannot roll back the state its successor saved meanwhile; its save fails with
:class:`~pipeline.sink.lease.LeaseLost`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from elasticsearch import ConflictError, Elasticsearch, NotFoundError

from pipeline.records.json import JsonObject
from pipeline.sink.lease import LeaseLost
from pipeline.sink.search import request_errors

STATE_INDEX = "iolens-state"


@dataclass
class JobState:
    """Load and save one job's state.

    Args:
        client: the cluster.
        name: the job's name (document id), e.g. ``peer.default``.
        clock: wall-clock seconds.
    """

    client: Elasticsearch
    name: str
    clock: Callable[[], float] = time.time
    _version: tuple[int, int] | bool | None = field(default=False, repr=False)
    """``(_seq_no, _primary_term)`` of the state last loaded, None when there was none, False
    before the first load (a save then replaces whatever is there)."""

    def load(self) -> JsonObject | None:
        """The saved state, or None when there is none yet.

        Raises:
            ClusterUnavailable: the cluster cannot answer now.
        """
        with request_errors(f"state {self.name}"):
            try:
                doc = self.client.get(index=STATE_INDEX, id=self.name)
            except NotFoundError:
                self._version = None
                return None
        self._version = (int(doc["_seq_no"]), int(doc["_primary_term"]))
        state: JsonObject = json.loads(doc["_source"]["state"])
        return state

    def save(self, state: Mapping[str, object]) -> None:
        """Replace the state the last :meth:`load` saw (refreshed, so the next load sees it).

        Raises:
            LeaseLost: another instance saved the state since (it holds the job now).
            ClusterUnavailable: the cluster cannot answer now.
        """
        body = {
            "state": json.dumps(state, separators=(",", ":")),
            "updated_ms": int(self.clock() * 1000),
        }
        seen, self._version = self._version, False
        with request_errors(f"state {self.name}"):
            try:
                if seen is None:
                    self.client.create(index=STATE_INDEX, id=self.name, document=body, refresh=True)
                elif isinstance(seen, tuple):
                    self.client.index(
                        index=STATE_INDEX,
                        id=self.name,
                        document=body,
                        if_seq_no=seen[0],
                        if_primary_term=seen[1],
                        refresh=True,
                    )
                else:
                    self.client.index(index=STATE_INDEX, id=self.name, document=body, refresh=True)
            except ConflictError:
                raise LeaseLost(f"state {self.name} was saved by another instance") from None
