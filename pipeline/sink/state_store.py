"""Durable state of scheduled jobs, kept in Elasticsearch (index ``iolens-state``).

A job that takes over from another instance (see :mod:`pipeline.sink.lease`) finds its state
there. One document per job: ``{"state": "<JSON text>", "updated_ms": ...}``; the state is stored
as text so that its shape never meets a mapping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from elasticsearch import Elasticsearch, NotFoundError

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

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none yet.

        Raises:
            ClusterUnavailable: the cluster cannot answer now.
        """
        with request_errors(f"state {self.name}"):
            try:
                doc = self.client.get(index=STATE_INDEX, id=self.name)
            except NotFoundError:
                return None
        state: dict[str, Any] = json.loads(doc["_source"]["state"])
        return state

    def save(self, state: Mapping[str, Any]) -> None:
        """Replace the saved state (refreshed, so the next load sees it).

        Raises:
            ClusterUnavailable: the cluster cannot answer now.
        """
        body = {
            "state": json.dumps(state, separators=(",", ":")),
            "updated_ms": int(self.clock() * 1000),
        }
        with request_errors(f"state {self.name}"):
            self.client.index(index=STATE_INDEX, id=self.name, document=body, refresh=True)
