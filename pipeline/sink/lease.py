"""A lease document in Elasticsearch, so a scheduled job runs on one instance at a time.

For jobs that must see everything from one place (DESIGN: peer comparison, persistence
rankings). The fio latency job needs none: every instance merges the intervals its own records
touched, from the records of all instances, and the most complete revision wins.

One document per job in the ``iolens-leases`` index: ``{holder, expires_ms}``. Taking or
renewing it is a conditional write (``create``, or ``index`` with ``if_seq_no`` /
``if_primary_term``: optimistic concurrency control), so of two instances racing for a free or
expired lease exactly one wins; the other sees a 409 and skips the run.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from elasticsearch import ConflictError, Elasticsearch, NotFoundError

from pipeline.sink.search import request_errors

log = logging.getLogger(__name__)

LEASE_INDEX = "iolens-leases"


def default_holder() -> str:
    """``host:pid:random``: unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Lease:
    """A named lease held for ``ttl_s`` seconds at a time and renewed by :meth:`acquire`.

    Args:
        client: the cluster.
        name: the job's name (document id).
        ttl_s: how long a holder that stops renewing keeps it (seconds).
        holder: who we are (see :func:`default_holder`).
        clock: wall-clock seconds.
    """

    client: Elasticsearch
    name: str
    ttl_s: float = 60.0
    holder: str = field(default_factory=default_holder)
    clock: Callable[[], float] = time.time
    held: bool = False

    def acquire(self) -> bool:
        """Take the lease if it is free, expired or ours (renewing it); False if another
        instance holds it.

        Raises:
            ClusterUnavailable: the cluster cannot answer now.
        """
        now_ms = int(self.clock() * 1000)
        body = {"holder": self.holder, "expires_ms": now_ms + int(self.ttl_s * 1000)}
        with request_errors(f"lease {self.name}"):
            try:
                doc = self.client.get(index=LEASE_INDEX, id=self.name)
            except NotFoundError:
                doc = None
            try:
                if not self._write(doc, body, now_ms):
                    return False
            except ConflictError:
                self._set(False, "another instance")
                return False
        self._set(True, self.holder)
        return True

    def _write(self, doc: Any, body: dict[str, Any], now_ms: int) -> bool:
        """Write ``body`` over the lease document ``doc`` (None: there is none) unless another
        holder's lease is still running at ``now_ms`` (then False).

        Raises:
            ConflictError: another instance wrote the lease first.
        """
        if doc is None:
            self.client.create(index=LEASE_INDEX, id=self.name, document=body, refresh=True)
            return True
        src = doc["_source"]
        if src.get("holder") != self.holder and int(src.get("expires_ms", 0)) > now_ms:
            self._set(False, src.get("holder"))
            return False
        self.client.index(
            index=LEASE_INDEX,
            id=self.name,
            document=body,
            if_seq_no=doc["_seq_no"],
            if_primary_term=doc["_primary_term"],
            refresh=True,
        )
        return True

    def release(self) -> None:
        """Give the lease up (expire it now) if we hold it; never raises."""
        if not self.held:
            return
        self.held = False
        try:
            doc = self.client.get(index=LEASE_INDEX, id=self.name)
            if doc["_source"].get("holder") == self.holder:
                self.client.index(
                    index=LEASE_INDEX,
                    id=self.name,
                    document={"holder": self.holder, "expires_ms": 0},
                    if_seq_no=doc["_seq_no"],
                    if_primary_term=doc["_primary_term"],
                    refresh=True,
                )
        except Exception as err:
            log.info("lease %s not released (%s); it expires in %ss", self.name, err, self.ttl_s)

    def _set(self, held: bool, by: object) -> None:
        if held != self.held:  # taking it is routine; another holder is worth saying
            if held:
                log.debug("lease %s taken", self.name)
            else:
                log.info("lease %s held by %s", self.name, by)
        self.held = held
