"""The bounded drain of ``iolens run``: asked to stop, it delivers what it holds and commits the
offsets for at most ``sink.drain_timeout_s`` seconds, then exits anyway.

The first SIGTERM or SIGINT sets the stop event (reading ends at the next chunk, what was read
is delivered and its offsets committed, :meth:`MainJob.run_forever
<pipeline.jobs.main_job.MainJob.run_forever>`) and arms a deadline. When the deadline passes
before the drain is over, or a second SIGTERM or SIGINT comes during it, one ERROR line says
so and the process exits at once with status 75 (``EX_TEMPFAIL``, sysexits.h).

Cutting the drain short loses nothing and indexes nothing twice: a file's offset advances only
after Elasticsearch acknowledged every document derived from its lines
(:mod:`pipeline.delivery.commit`), so the lines whose documents were not acknowledged are read
again on the next start, and the documents in the on-disk spool are delivered then (the same
as after SIGKILL, which ``tests/reliability/test_crash.py`` checks). The exit is
:func:`os._exit`: threads may be blocked in a network call (a bulk request against a cluster
answering 429, with all its retries) that neither an exception in the main thread nor a normal
interpreter exit would interrupt.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Protocol

log = logging.getLogger(__name__)

EX_TEMPFAIL = 75
"""Exit status (sysexits.h) of a run that left lines or documents for the next run."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

GIVE_UP = (
    "%s: exiting now with status 75; the lines whose documents were not acknowledged are read "
    "again on the next start, and spooled documents are delivered then"
)


class Cancellable(Protocol):
    """What a started timer offers: cancelling it (``threading.Timer.cancel``)."""

    def cancel(self) -> None: ...


StartTimer = Callable[[float, Callable[[], None]], Cancellable]
"""``start_timer(interval_s, fire)``: call ``fire`` in ``interval_s`` seconds unless cancelled."""


def start_timer(interval_s: float, fire: Callable[[], None]) -> threading.Timer:
    """A started daemon ``threading.Timer`` (it never keeps the process alive)."""
    timer = threading.Timer(interval_s, fire)
    timer.daemon = True
    timer.name = "iolens-drain-deadline"
    timer.start()
    return timer


def exit_now(status: int) -> None:
    """Flush the logging handlers and the standard streams, then ``os._exit(status)``: no
    cleanup, no waiting for threads."""
    for flushable in (*logging.getLogger().handlers, sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a broken pipe
            flushable.flush()
    os._exit(status)


class BoundedDrain:
    """Stop on the first SIGTERM or SIGINT; exit with status 75 when the drain outlasts
    ``timeout_s`` or a second signal comes. A context manager around the whole run: entering
    installs the signal handlers, leaving ends the drain (cancels the deadline) and puts the
    previous handlers back.

    Args:
        timeout_s: ``sink.drain_timeout_s``, seconds from the first signal.
        start_timer: starts the deadline (:func:`start_timer`; tests pass a fake they fire).
        exit: ends the process (:func:`exit_now`; tests pass a fake that records the status).
        signals: the signals that ask for a stop.
        set_handler: installs a handler and returns the previous one (``signal.signal``).
    """

    def __init__(
        self,
        timeout_s: float,
        *,
        start_timer: StartTimer = start_timer,
        exit: Callable[[int], None] = exit_now,
        signals: Sequence[int] = STOP_SIGNALS,
        set_handler: Callable[[int, Any], Any] = signal.signal,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        self.timeout_s = timeout_s
        self.stop = threading.Event()
        """Set by the first signal: what the run watches (``MainJob.run_forever(stop)``)."""
        self._start_timer, self._exit = start_timer, exit
        self._signals, self._set_handler = tuple(signals), set_handler
        self._previous: dict[int, Any] = {}
        self._deadline: Cancellable | None = None
        self._seen = itertools.count()  # signals asking for a stop, so far
        self._over = False
        self._lock = threading.RLock()  # re-entrant: a signal handler may interrupt its holder

    def __enter__(self) -> BoundedDrain:
        for sig in self._signals:
            self._previous[sig] = self._set_handler(sig, self.request)
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished()
        for sig, previous in self._previous.items():
            if previous is not None:  # None: a handler not installed from Python
                self._set_handler(sig, previous)
        self._previous.clear()

    @property
    def draining(self) -> bool:
        """A stop was asked for and the drain is not over."""
        return self._deadline is not None and not self._over

    def request(self, signum: int, frame: FrameType | None = None) -> None:
        """The signal handler: the first signal sets :attr:`stop` and arms the deadline; one
        during the drain exits at once (:meth:`give_up`); one after it is ignored.

        Which signal is the first is decided by one call to ``next`` on a counter, which no
        handler can interrupt: Python runs a handler between two bytecodes of the main thread,
        possibly inside this one, and that nested call counts as the second signal.
        """
        name = signal.Signals(signum).name
        if self._over:
            return
        if next(self._seen) > 0:
            self.give_up(f"a second {name} during the drain")
            return
        self.stop.set()
        self._deadline = self._start_timer(self.timeout_s, self._expired)
        log.info(
            "%s: stopping; what was read is delivered and committed for at most %g s "
            "(sink.drain_timeout_s)",
            name,
            self.timeout_s,
        )

    def _expired(self) -> None:
        self.give_up(f"the drain took longer than sink.drain_timeout_s ({self.timeout_s:g} s)")

    def give_up(self, why: str) -> None:
        """Log ``why`` and what happens to the rest (one ERROR line), then exit with status 75;
        nothing when the drain is already over."""
        with self._lock:
            if self._over:
                return
            self._over = True
            log.error(GIVE_UP, why)
            self._exit(EX_TEMPFAIL)

    def finished(self) -> None:
        """The drain (or the run) is over: the deadline is cancelled, later signals ignored."""
        with self._lock:
            self._over = True
            if self._deadline is not None:
                self._deadline.cancel()
