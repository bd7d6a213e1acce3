"""A lease document in Elasticsearch, so a scheduled job runs on one instance at a time.

For jobs that must see everything from one place (DESIGN: peer comparison, persistence
rankings). The fio latency job needs none: every instance merges the intervals its own records
touched, from the records of all instances, and the most complete revision wins.

One document per job in the ``iolens-leases`` index: ``{holder, expires_ms}``. Taking or
renewing it is a conditional write (``create``, or ``index`` with ``if_seq_no`` /
``if_primary_term``: optimistic concurrency control), so of two instances racing for a free or
expired lease exactly one wins; the other sees a 409 and skips the run.

``expires_ms`` is the holder's wall clock, which another machine's clock may disagree with by
hours (a clock set wrong, or stepped while iolens runs). So another holder's lease is judged by
what this instance saw of it, on its own monotonic clock, as in Kubernetes' leader election:
a version of the document (``_seq_no``, ``_primary_term``) first seen with between 0 and
``ttl_s`` seconds left by our wall clock runs for that long after it was first seen; one whose
time left is outside that range (written with a clock ahead, or behind, or left by a holder
that stopped long ago) runs for ``ttl_s`` after it was first seen. A lease written with a clock
hours ahead therefore blocks other instances for at most ``ttl_s`` once its holder stops
renewing it, and one written with a clock behind does not expire at once. A released lease
(``expires_ms`` 0) is free at once.
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
        clock: wall-clock seconds (what ``expires_ms`` is written with).
        monotonic: monotonic seconds, for how long another holder's lease was seen unchanged.
    """

    client: Elasticsearch
    name: str
    ttl_s: float = 60.0
    holder: str = field(default_factory=default_holder)
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    held: bool = False
    _seen: tuple[tuple[int, int], float] | None = field(default=None, repr=False)
    """The other holder's lease version last seen, and when it runs out (monotonic s)."""

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
        if src.get("holder") != self.holder and self._running(doc, now_ms):
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

    def _running(self, doc: Any, now_ms: int) -> bool:
        """Whether another holder's lease ``doc`` still runs (see the module docstring)."""
        expires_ms = int(doc["_source"].get("expires_ms", 0))
        if expires_ms <= 0:
            return False  # released
        version = (int(doc["_seq_no"]), int(doc["_primary_term"]))
        now = self.monotonic()
        if self._seen is None or self._seen[0] != version:
            left_s = (expires_ms - now_ms) / 1000
            if not 0 <= left_s <= self.ttl_s:  # the holder's clock disagrees with ours
                left_s = self.ttl_s
            self._seen = (version, now + left_s)
        return now < self._seen[1]

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
