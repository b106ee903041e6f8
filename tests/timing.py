"""Timing assertions that hold on a machine under 4x CPU load; speed itself belongs in benchmarks."""


def deadline(limit: float) -> float:
    """Seconds a run with a ``limit``-second time limit may take before it counts as ignoring it.

    Work outside the solver's own clock (model build, bound checks, Python) slows down with the
    load, so the margin is max(3 * limit, 3 s): four times the limit, and never under 3 s for
    sub-second limits.
    """
    return limit + max(3 * limit, 3.0)
