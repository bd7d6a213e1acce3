"""A lease document in Elasticsearch, so a scheduled job runs on one instance at a time.

For jobs that must see everything from one place (DESIGN: peer comparison, persistence
rankings). The fio latency job needs none: every instance merges the intervals its own records
touched, from the records of all instances, and the most complete revision wins.

One document per job in the ``iolens-leases`` index: ``{holder, expires_ms, generation}``.
Taking or renewing it is a conditional write (``create``, or ``index`` with ``if_seq_no`` /
``if_primary_term``: optimistic concurrency control), so of two instances racing for a free or
expired lease exactly one wins; the other sees a 409 and skips the run.

``generation`` grows by one each time the lease changes hands (a renewal keeps it): the fencing
token of the holder's writes. A holder checks it with :meth:`Lease.fence` (a conditional
renewal that fails with :class:`LeaseLost` once another instance took over) before each batch of
scheduled output, and stamps that output with :meth:`Lease.stamp`; a stored output of a higher
generation is never overwritten by a lower one (:mod:`pipeline.sink.fenced`), so an instance
that was cut off while leading and comes back cannot undo what its successor wrote.

``expires_ms`` is the holder's wall clock, which another machine's clock may disagree with by
hours (a clock set wrong, or stepped while iolens runs). So another holder's lease is judged by
what this instance saw of it, on its own monotonic clock, as in Kubernetes' leader election:
a version of the document (``_seq_no``, ``_primary_term``) first seen with between 0 and
``ttl_s`` seconds left by our wall clock runs for that long after it was first seen; one whose
time left is outside that range (written with a clock ahead, or behind, or left by a holder
that stopped long ago) runs for ``ttl_s`` after it was first seen. A lease written with a clock
hours ahead therefore blocks other instances for at most ``ttl_s`` once its holder stops
renewing it, and one written with a clock behind does not expire at once. A released lease
(``expires_ms`` 0) is free at once, and so is one whose holder was a process of this host that
is no longer running (a run killed on this machine does not hold the next one back).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from elasticsearch import ConflictError, Elasticsearch, NotFoundError

from pipeline.records.json import SourceFields
from pipeline.sink.search import request_errors

log = logging.getLogger(__name__)

LEASE_INDEX = "iolens-leases"


class LeaseStamp(TypedDict):
    """What a lease holder's scheduled documents carry under ``iolens.lease``.

    Keys:
        generation: the lease's generation when the documents were written (int, from 1; it
            grows by one each time the lease changes hands).
        holder: the writing holder (:func:`default_holder`, ``host:pid:random``).
    """

    generation: int
    holder: str


class LeaseLost(Exception):
    """The lease this instance held was taken over by another instance (or ran out): its
    scheduled writes stop, and the run is left to the new holder."""


def default_holder() -> str:
    """``host:pid:random``: unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _gone(holder: str) -> bool:
    """Whether ``holder`` (:func:`default_holder`) was a process of this host that is no longer
    running: its lease is free whatever its time says (a crashed run's, taken on restart)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # running, under another user
    return False


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
    generation: int = 0
    """The generation of the lease while held (see the module docstring)."""
    _seen: tuple[tuple[int, int], float] | None = field(default=None, repr=False)
    """The other holder's lease version last seen, and when it runs out (monotonic s)."""

    def acquire(self) -> bool:
        """Take the lease if it is free, expired or ours (renewing it); False if another
        instance holds it.

        Raises:
            ClusterUnavailable: the cluster cannot answer now.
        """
        now_ms = int(self.clock() * 1000)
        with request_errors(f"lease {self.name}"):
            try:
                doc = self.client.get(index=LEASE_INDEX, id=self.name)
            except NotFoundError:
                doc = None
            generation = self._next_generation(doc)
            body = {
                "holder": self.holder,
                "expires_ms": now_ms + int(self.ttl_s * 1000),
                "generation": generation,
            }
            try:
                if not self._write(doc, body, now_ms):
                    return False
            except ConflictError:
                self._set(False, "another instance")
                return False
        self.generation = generation
        self._set(True, self.holder)
        return True

    def _next_generation(self, doc: Any) -> int:
        """The generation a write over ``doc`` takes: the same for a renewal of our lease,
        one more when the lease changes hands (or was released)."""
        if doc is None:
            return 1
        src = doc["_source"]
        generation = int(src.get("generation", 0))
        renewal = self.held and src.get("holder") == self.holder and generation == self.generation
        return generation if renewal and int(src.get("expires_ms", 0)) > 0 else generation + 1

    def fence(self) -> LeaseStamp:
        """Check, by renewing it conditionally, that we still hold the lease at our generation,
        before a batch of scheduled writes; returns :meth:`stamp`.

        Raises:
            LeaseLost: another instance holds it now (or it was never ours).
            ClusterUnavailable: the cluster cannot answer now.
        """
        if not self.held:
            raise LeaseLost(f"lease {self.name} is not held")
        now_ms = int(self.clock() * 1000)
        with request_errors(f"lease {self.name}"):
            try:
                doc = self.client.get(index=LEASE_INDEX, id=self.name)
                src = doc["_source"]
                if src.get("holder") != self.holder or src.get("generation") != self.generation:
                    raise LeaseLost(f"lease {self.name} taken over by {src.get('holder')}")
                body = {**src, "expires_ms": now_ms + int(self.ttl_s * 1000)}
                self._replace(doc, body)
            except (NotFoundError, ConflictError, LeaseLost) as err:
                self._set(False, "another instance")
                raise LeaseLost(f"lease {self.name} lost ({err})") from None
        return self.stamp()

    def stamp(self) -> LeaseStamp:
        """``{"generation": ..., "holder": ...}``: what the holder's scheduled documents carry
        under ``iolens.lease``."""
        return {"generation": self.generation, "holder": self.holder}

    def _write(self, doc: Any, body: SourceFields, now_ms: int) -> bool:
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
        self._replace(doc, body)
        return True

    def _replace(self, doc: Any, body: SourceFields) -> None:
        """Write ``body`` over the lease document ``doc`` if it is still the version read.

        Raises:
            ConflictError: another instance wrote the lease since.
        """
        self.client.index(
            index=LEASE_INDEX,
            id=self.name,
            document=body,
            if_seq_no=doc["_seq_no"],
            if_primary_term=doc["_primary_term"],
            refresh=True,
        )

    def _running(self, doc: Any, now_ms: int) -> bool:
        """Whether another holder's lease ``doc`` still runs (see the module docstring)."""
        expires_ms = int(doc["_source"].get("expires_ms", 0))
        if expires_ms <= 0 or _gone(str(doc["_source"].get("holder", ""))):
            return False  # released, or left by a process of this host that is gone
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
                self._replace(doc, {**doc["_source"], "expires_ms": 0})
        except Exception as err:
            log.info("lease %s not released (%s); it expires in %ss", self.name, err, self.ttl_s)

    def _set(self, held: bool, by: object) -> None:
        if held != self.held:  # taking it is routine; another holder is worth saying
            if held:
                log.debug("lease %s taken", self.name)
            else:
                log.info("lease %s held by %s", self.name, by)
        self.held = held
