"""The bounded drain (:mod:`pipeline.jobs.drain`) with a fake timer and a fake exit: the first
signal stops and arms the deadline, the deadline or a second signal exits with 75 and says so
once, a drain that ends first exits nothing."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pipeline.jobs.drain import EX_TEMPFAIL, BoundedDrain, start_timer


@dataclass
class FakeTimer:
    """A deadline the test fires by hand (:meth:`fire`), as ``threading.Timer`` would."""

    interval_s: float
    fire_fn: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        """What the timer thread does when the interval is over (a cancelled timer: nothing)."""
        if not self.cancelled:
            self.fire_fn()


@dataclass
class Fakes:
    timers: list[FakeTimer] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    handlers: dict[int, Any] = field(default_factory=dict)

    def start_timer(self, interval_s: float, fire: Callable[[], None]) -> FakeTimer:
        self.timers.append(FakeTimer(interval_s, fire))
        return self.timers[-1]

    def set_handler(self, sig: int, handler: Any) -> Any:
        previous = self.handlers.get(sig, signal.SIG_DFL)
        self.handlers[sig] = handler
        return previous

    def drain(self, timeout_s: float = 120.0) -> BoundedDrain:
        return BoundedDrain(
            timeout_s,
            start_timer=self.start_timer,
            exit=self.exits.append,
            set_handler=self.set_handler,
        )


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_deadline_exits_with_75_and_says_what_becomes_of_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fakes = Fakes()
    with fakes.drain(120.0) as drain:
        assert fakes.handlers[signal.SIGTERM] == drain.request
        assert fakes.handlers[signal.SIGINT] == drain.request
        assert not drain.stop.is_set() and fakes.timers == []  # nothing armed before a signal
        drain.request(signal.SIGTERM)
        assert drain.stop.is_set() and drain.draining
        (deadline,) = fakes.timers
        assert deadline.interval_s == 120.0
        assert fakes.exits == [] and errors(caplog) == []
        deadline.fire()
        assert fakes.exits == [EX_TEMPFAIL] == [75]
        assert errors(caplog) == [
            "the drain took longer than sink.drain_timeout_s (120 s): exiting now with status "
            "75; the lines whose documents were not acknowledged are read again on the next "
            "start, and spooled documents are delivered then"
        ]
    assert fakes.exits == [75]  # once: leaving the block after a (fake) exit adds none


def test_a_drain_that_ends_before_the_deadline_exits_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fakes = Fakes()
    with fakes.drain(2.0) as drain:
        drain.request(signal.SIGINT)
        assert drain.stop.is_set()
    (deadline,) = fakes.timers
    assert deadline.cancelled
    deadline.fire_fn()  # a timer thread that had already begun to fire as the drain ended
    drain.request(signal.SIGTERM)  # a signal after the drain
    assert fakes.exits == [] and errors(caplog) == []
    assert not drain.draining
    assert fakes.handlers == {signal.SIGINT: signal.SIG_DFL, signal.SIGTERM: signal.SIG_DFL}


def test_a_second_signal_during_the_drain_exits_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fakes = Fakes()
    with fakes.drain(120.0) as drain:
        drain.request(signal.SIGTERM)
        assert fakes.exits == []
        drain.request(signal.SIGINT)
        assert fakes.exits == [75]
        (line,) = errors(caplog)
        assert line.startswith("a second SIGINT during the drain: exiting now with status 75;")
        assert "read again on the next start" in line
        fakes.timers[0].fire()  # the deadline after the exit: nothing more
    assert fakes.exits == [75] and len(errors(caplog)) == 1


def test_a_second_signal_inside_the_first_ones_handler_exits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Python runs a handler between two bytecodes of the main thread, so a second signal can
    # be handled while the first one's handler still runs (here: as it arms the deadline).
    fakes = Fakes()

    def start_timer(interval_s: float, fire: Callable[[], None]) -> FakeTimer:
        drain.request(signal.SIGTERM)
        return fakes.start_timer(interval_s, fire)

    drain = BoundedDrain(
        120.0, start_timer=start_timer, exit=fakes.exits.append, set_handler=fakes.set_handler
    )
    with drain:
        drain.request(signal.SIGTERM)
        assert fakes.exits == [75]
    (line,) = errors(caplog)
    assert line.startswith("a second SIGTERM during the drain: exiting now with status 75;")


def test_a_run_without_a_signal_arms_nothing() -> None:
    fakes = Fakes()
    with fakes.drain() as drain:
        pass
    assert fakes.timers == [] and fakes.exits == [] and not drain.stop.is_set()


def test_a_real_signal_reaches_the_installed_handler(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pipeline.jobs.drain")
    fakes = Fakes()
    before = signal.getsignal(signal.SIGTERM)
    drain = BoundedDrain(7.5, start_timer=fakes.start_timer, exit=fakes.exits.append)
    with drain:
        os.kill(os.getpid(), signal.SIGTERM)
        assert drain.stop.wait(timeout=30)
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    assert [t.interval_s for t in fakes.timers] == [7.5] and fakes.timers[0].cancelled
    assert fakes.exits == []
    assert "SIGTERM: stopping; what was read is delivered and committed for at most 7.5 s" in (
        caplog.text
    )


def test_the_real_deadline_is_a_daemon_thread() -> None:
    fired: list[bool] = []
    timer = start_timer(3600.0, lambda: fired.append(True))
    try:
        assert timer.daemon and timer.is_alive()  # it never keeps the process alive
    finally:
        timer.cancel()
        timer.join(timeout=30)
    assert fired == [] and not timer.is_alive()


@pytest.mark.parametrize("timeout_s", [0.0, -1.0])
def test_a_timeout_must_be_positive(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        BoundedDrain(timeout_s)
