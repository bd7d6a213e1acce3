"""Clock offsets between machines, bounded by the messages they exchanged (seed 002, section 4.2
"Cross-machine activity").

Each machine stamps its events with its own clock. A message sent on machine A at ``t_send`` and
received on machine B at ``t_recv`` bounds θ = clock_B − clock_A from above (``t_recv − t_send``
is the delay plus θ); a message B -> A bounds it from below. :func:`estimate_offset` takes the
tightest bounds of each way; :func:`offsets_from` composes pairwise offsets along a chain of
machines. Clock drift is not modelled: an offset is taken as constant over the trace, and
:attr:`ClockOffset.consistent` reports when the bounds cross.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """How far machine B's clock is ahead of machine A's: θ = clock_B − clock_A, ns.

    Attributes:
        offset_ns: the estimate: the middle of ``[lower_ns, upper_ns]``, or the one bound.
        lower_ns: θ is at least this (messages B -> A); None without such messages.
        upper_ns: θ is at most this (messages A -> B); None without such messages.
        messages: how many messages the bounds come from.
    """

    offset_ns: int
    lower_ns: int | None
    upper_ns: int | None
    messages: int

    @property
    def consistent(self) -> bool:
        """False when the bounds cross: the clocks drifted apart during the trace by more than
        the fastest messages' delays, or a pair of events was not one message."""
        return self.lower_ns is None or self.upper_ns is None or self.lower_ns <= self.upper_ns

    def inverse(self) -> ClockOffset:
        """clock_A − clock_B."""
        return ClockOffset(
            -self.offset_ns,
            None if self.upper_ns is None else -self.upper_ns,
            None if self.lower_ns is None else -self.lower_ns,
            self.messages,
        )

    def then(self, other: ClockOffset) -> ClockOffset:
        """clock_C − clock_A, ``other`` being clock_C − clock_B (bounds add up; a bound is
        None when either lacks it; messages add up)."""
        return ClockOffset(
            self.offset_ns + other.offset_ns,
            _add(self.lower_ns, other.lower_ns),
            _add(self.upper_ns, other.upper_ns),
            self.messages + other.messages,
        )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def estimate_offset(
    forward: Iterable[tuple[int, int]], backward: Iterable[tuple[int, int]]
) -> ClockOffset:
    """θ = clock_B − clock_A of two machines, from the messages between them.

    A message is received after it was sent, so (with ``d`` its delay) a message A -> B gives
    ``t_recv_B − t_send_A = d + θ ≥ θ`` and a message B -> A gives ``t_send_B − t_recv_A =
    θ − d ≤ θ``. The bounds are the tightest of each kind; the estimate is their middle, off by
    at most half the sum of the fastest delay each way, or the one bound there is when messages
    went one way only (off by the fastest delay).

    Args:
        forward: ``(t_send, t_recv)`` of messages A -> B, ns: sent on A's clock, received on B's.
        backward: ``(t_send, t_recv)`` of messages B -> A, ns: sent on B's clock, received on A's.

    Raises:
        ValueError: no message either way.
    """
    ups = [r - s for s, r in forward]
    lows = [s - r for s, r in backward]
    n = len(ups) + len(lows)
    if not ups and not lows:
        raise ValueError("no message between the two machines: their offset is unknown")
    if not ups:
        return ClockOffset(max(lows), max(lows), None, n)
    if not lows:
        return ClockOffset(min(ups), None, min(ups), n)
    lower, upper = max(lows), min(ups)
    return ClockOffset((lower + upper) // 2, lower, upper, n)


def offsets_from(
    origin: str, clocks: Mapping[tuple[str, str], ClockOffset]
) -> dict[str, ClockOffset]:
    """Every machine's clock minus ``origin``'s, along the shortest chain of machine pairs
    that exchanged messages (``clocks[(a, b)]`` is clock_b − clock_a); ``origin`` itself and
    machines no chain reaches are left out."""
    links: dict[str, list[tuple[str, ClockOffset]]] = {}
    for (a, b), c in clocks.items():
        links.setdefault(a, []).append((b, c))
        links.setdefault(b, []).append((a, c.inverse()))
    out: dict[str, ClockOffset] = {}
    todo: deque[str] = deque([origin])
    while todo:
        m = todo.popleft()
        for n, c in links.get(m, []):
            if n == origin or n in out:
                continue
            out[n] = c if m == origin else out[m].then(c)
            todo.append(n)
    return out
