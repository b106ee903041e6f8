"""One wall-clock budget for a whole fit, handed down to every step that spends it.

``time_limit`` bounds the whole fit: the warm start, the model builds and every
solver call.  The estimator creates one ``Deadline`` when the fit starts and
passes it down; each step checks it at a cheap granularity and stops with what
it has, and each solver call gets only the time that is left.  A stop asked by Ctrl-C
(``mtl_opt.interrupts``) ends every deadline at once, so an interrupted fit stops the way a
timed-out one does, with its incumbent and its proven bound.
"""

from __future__ import annotations

import math
import time

from . import interrupts


class DeadlineReached(Exception):
    """Raised where a step cannot return a partial answer (a model translation) once time is up."""


class Deadline:
    """The end of a time budget; ``Deadline(None)`` never ends.  Pickled, it travels as the time
    left (``remaining``): a worker process or another machine, whose clock is its own, gets the
    same budget from the moment it unpickles it."""

    def __init__(self, seconds: float | None = None):
        self.end = math.inf if seconds is None else time.perf_counter() + seconds

    def __reduce__(self):
        left = self.remaining()
        return Deadline, (None if math.isinf(left) else left,)

    def remaining(self) -> float:
        """Seconds left: inf without a limit, <= 0 once the deadline has passed or a stop was
        asked (``interrupts.requested``)."""
        if interrupts.requested():
            return 0.0
        return self.end - time.perf_counter()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def check(self) -> None:
        """Raise DeadlineReached once the deadline has passed."""
        if self.expired():
            raise DeadlineReached

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the time left from now (as unlimited as this one)."""
        part = Deadline()
        part.end = min(self.end, time.perf_counter() + fraction * self.remaining())
        return part
