"""Clustered ARMUL certified by enumerating the partitions of the tasks (squared loss).

With the labels fixed, clustered ARMUL separates into one vanilla ARMUL per cluster (its center
free), so its optimum is the least, over partitions of the tasks into at most K groups, of the
sum of the groups' vanilla optima.  Every group's vanilla problem is solved by FISTA, which gives
a feasible point and a safe dual bound (``ArmulProblem.dual_bound``: a dual feasible point, its
rounding covered), so

- the least sum of the groups' bounds over partitions is a proven bound on the clustered optimum
  (SCIP's own dual bound for the MIQCP is not: its spatial branch and bound works with absolute
  tolerances), and
- the partition with the least sum of the groups' objectives is a feasible estimate, accurate to
  the FISTA tolerance (SCIP's point meets its cones only to about sqrt(feastol)).

A dynamic program over subsets finds both least sums in 3^m K steps, from one vanilla solve per
group of at most m - K + 1 tasks; it runs for up to ``MAX_TASKS`` tasks (255 groups at most).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..deadline import Deadline
from ..formulations.armul import ArmulProblem
from ..formulations.least_squares import rounding_factor
from . import prox

#: Largest number of tasks whose partitions are enumerated (2^m - 1 vanilla solves at most).
MAX_TASKS = 8


@dataclass
class Enumerated:
    """The best partition found: per-task labels, coefficients (m, d) and cluster centers
    (K, d); ``bound`` is a proven lower bound on the clustered optimum."""

    labels: np.ndarray
    theta: np.ndarray
    centers: np.ndarray
    bound: float


def enumerate_partitions(problem: ArmulProblem, n_clusters: int, deadline: Deadline,
                         rel_gap: float = 1e-9, beat=lambda: None) -> Enumerated | None:
    """Clustered ARMUL over every partition of the tasks (module docstring), or None when there
    are more than ``MAX_TASKS`` tasks or ``deadline`` passes first.

    ``rel_gap``: the tolerance of each group's vanilla solve (the bound is valid for any; a
    smaller one makes it and the estimate tighter).  ``beat()`` is called before each group's
    solve (the live log's heartbeat, ``solvers.progress``)."""
    m = problem.m
    if m > MAX_TASKS:
        return None
    k = min(n_clusters, m)
    runs, bounds = {}, {}
    for group in range(1, 1 << m):
        if bin(group).count("1") > m - k + 1:
            continue   # some other group would be empty: a partition into k groups never uses it
        if deadline.expired():
            return None
        beat()
        # a group cut by the deadline keeps its best dual bound so far: still a valid one
        sub = problem.subset(_tasks(group, m))
        runs[group] = prox.fista(sub, rel_gap=rel_gap, deadline=deadline)
        bounds[group] = _safe_bound(sub, runs[group])
    lower, _ = _least_cover(bounds, m, k)
    _, groups = _least_cover({group: run.objective for group, run in runs.items()}, m, k)
    labels, theta = np.zeros(m, dtype=int), np.zeros((m, problem.d))
    centers = np.zeros((n_clusters, problem.d))
    for label, group in enumerate(groups):
        tasks = _tasks(group, m)
        labels[tasks], theta[tasks], centers[label] = label, runs[group].theta, runs[group].centers[0]
    # a sum of at most k non-negative floats: each addition rounds up by at most eps relative
    return Enumerated(labels, theta, centers, max(0.0, lower * (1 - rounding_factor(k + 1))))


def _tasks(group: int, m: int) -> list[int]:
    return [j for j in range(m) if group >> j & 1]


def _safe_bound(group: ArmulProblem, run: prox.ProxRun) -> float:
    """A proven lower bound on the vanilla optimum of ``group``: FISTA's best dual bound, the
    independent-tasks bound at its point (lambda >= 0), or 0 (the squared loss is >= 0)."""
    candidates = [run.lower_bound, group.dual_bound(run.theta, "independent"), 0.0]
    return max(b for b in candidates if b is not None and math.isfinite(b))


def _least_cover(values: dict[int, float], m: int, k: int) -> tuple[float, list[int]]:
    """The least sum of ``values`` over partitions of all m tasks into at most k groups, and
    the groups of one such partition.

    After round r, best[S] is the least sum covering the task set S with at most r groups; each
    round adds the group holding S's lowest task, so every partition is counted once."""
    full = (1 << m) - 1
    best, choice = np.full(1 << m, np.inf), [[] for _ in range(1 << m)]
    best[0] = 0.0
    for _ in range(k):
        step, step_choice = best.copy(), list(choice)
        for covered in range(1, full + 1):
            low = covered & -covered
            rest = sub = covered ^ low
            while True:     # every subset of ``rest``, with the lowest task added
                group = sub | low
                if group in values and values[group] + best[covered ^ group] < step[covered]:
                    step[covered] = values[group] + best[covered ^ group]
                    step_choice[covered] = [group, *choice[covered ^ group]]
                if sub == 0:
                    break
                sub = (sub - 1) & rest
        best, choice = step, step_choice
    return float(best[full]), choice[full]
