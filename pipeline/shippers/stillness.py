"""How long a file has stood unchanged, measured so that a stepped wall clock does not fool it.

A file's modification time is wall-clock time, and so is ``time.time()``; their difference is
the file's age only while nobody steps the clock. Set back by hours, every file written before
looks modified in the future (and a wait for it to be quiet lasts hours); set forward, a file
still being written looks hours old (and is taken as finished). So the wall-clock age is
believed once, when the file is first seen (a file found old at start-up is old), and only up
to the wait it is compared with; from then on, the time since a change this process saw is
counted on the monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stillness:
    """How long one file has been unchanged (see the module docstring).

    ``state`` is whatever tells a change (``(st_mtime, st_size)``); it is compared for
    equality only.
    """

    _seen: tuple[object, float] | None = None
    """The state last seen, and the monotonic time from which it counts as unchanged."""

    def still_s(
        self, state: object, mtime_s: float, limit_s: float, wall_s: float, mono_s: float
    ) -> float:
        """Seconds the file has been unchanged.

        Args:
            state: the file's state now (see the class docstring).
            mtime_s: its modification time (wall-clock seconds).
            limit_s: the wait this is compared with: a first-seen file's wall-clock age counts
                for at most this long (seconds, >= 0).
            wall_s: the wall clock now (seconds since the epoch).
            mono_s: the monotonic clock now (seconds).

        Returns:
            Seconds, >= 0: at most ``limit_s`` on first sight (0 for a file modified "in the
            future", after the clock was set back), then growing with the monotonic clock
            until the state changes (0 again).
        """
        if self._seen is None:
            credit_s = min(max(wall_s - mtime_s, 0.0), limit_s)
            self._seen = (state, mono_s - credit_s)
        elif self._seen[0] != state:
            self._seen = (state, mono_s)
        return max(mono_s - self._seen[1], 0.0)
