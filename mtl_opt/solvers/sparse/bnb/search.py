"""The tree search: ``solve_bnb`` runs best-first branch and bound over supports, with
perspective-dual node bounds (the L0BnB / OKRidge design), until the gap is closed or time is up.

Independent tasks get a tree each (``tree.SupportTree``, on the package's engine); a common
support, a Zbar or a Bbar term share one.  Each tree's nodes are bounded by one bound family,
chosen from the problem (``family``): ``greedy`` (neither term), ``zbar`` (a Zbar term on more
than ``sets.ENUMERATED_TASKS`` tasks) or ``sets`` (a Bbar term, or a Zbar term on few tasks).
A step's children are bounded at once by the fit's workers (``engine.workers``: this machine's
cores, or a Dask cluster under ``joblib.parallel_config(backend="dask")``).  The search stops
at ``rel_gap``, ``abs_gap`` or the time limit.

Scope (``scope.refusal``): lambda_ridge > 0, every variant (with a Bbar term on per-task
supports, K <= ``scope.MAX_BBAR_TASKS``); includes, excludes, and boxes (``coef_bound``, signs,
bounds) but with a Bbar term.  The bound uses the penalties' curvature alone, not the
curvature outer approximation borrows when n_k > p; it is built for n_k <= p, where that
curvature is 0 anyway.
"""

from __future__ import annotations

import numpy as np

from .... import __version__
from ....errors import InvalidParameterError
from ....formulations.sparse import SparseProblem
from ....result import Status, relative_gap
from ....deadline import Deadline
from ....resources import one_blas_thread
from ...method import SolverRun
from ...options import SolveOptions
from ...progress import Progress
from ...engine import workers_for
from .greedy import GreedyBound
from .node import NODE_ITERATIONS
from .scope import refusal
from .sets import ENUMERATED_TASKS, SetBound
from .tree import BATCH, SupportTree
from .zbar import ZbarBound

#: A tree closes a node whose bound is within this share of ``rel_gap`` below its incumbent
#: (``Engine.prune_gap``), and its climb stops there: climbing past the level the search stops
#: at proves nothing it reports.  Half, so that the safe bound's rounding (a hair below the
#: climbed value) still leaves the summed gap within ``rel_gap``.
PRUNE_SHARE = 0.5


def family(problem: SparseProblem) -> type:
    """The bound family of ``problem``'s trees (module docstring); the recursion, not the
    enumeration, for a Zbar term in a box (only ``greedy``'s weights know the box)."""
    few_tasks = problem.n_tasks <= ENUMERATED_TASKS and not problem.side.bounded
    if problem.lambda_bbar or (problem.lambda_zbar and few_tasks):
        return SetBound
    return ZbarBound if problem.lambda_zbar else GreedyBound


@one_blas_thread
def solve_bnb(problem: SparseProblem, options: SolveOptions, incumbent: np.ndarray, *,
              node_iterations: int = NODE_ITERATIONS, deadline: Deadline,
              screening: bool = True, progress: Progress | None = None) -> SolverRun:
    """Best-first branch and bound from ``incumbent`` (e.g. the BCD solution).

    Without a common support or a Zbar term the tasks share nothing, so each
    gets its own tree: one joint tree would branch over the product of theirs.
    Bounds and objectives add up; each step splits ``tree.BATCH`` nodes (or half as many as there
    are workers, if more) of the task with the widest gap, until the summed gap is within ``rel_gap`` or ``abs_gap``, or
    ``deadline`` (the fit's) passes; a node bounded
    when it passes keeps the best dual value found so far (valid for every r).
    ``screening=False`` splits nodes without fixing entries by their children's bounds.
    The log (``progress``, default a new one) has a row after the first step, then one a
    ``progress.EVERY`` seconds, and a final one; a row's ``open_nodes`` are the trees' open nodes.
    A step's children are bounded at once by the workers (``engine.workers_for``: every core unless
    ``options.threads`` is 1, or a Dask cluster); the result is the same either way.
    """
    reason = refusal(problem)
    if reason is not None:
        raise InvalidParameterError(reason)
    if not problem.feasible(np.zeros(incumbent.shape)):   # in scope: more includes than s allows
        return SolverRun(incumbent, problem.objective(incumbent), None, Status.INFEASIBLE,
                         [], {"solver": "mtl_opt", "solver_version": __version__,
                              "why": "the included features exceed s",
                              "bound": "none: infeasible"})
    progress = progress or Progress(options.verbose)
    progress.update(problem.objective(incumbent), None, 0, force=True)   # before the roots' bounds
    if problem.common_support or problem.lambda_zbar or problem.lambda_bbar:
        parts = [(problem, incumbent)]
    else:
        parts = [(problem.task(k), incumbent[k:k + 1]) for k in range(problem.n_tasks)]
    bound_family = family(problem)
    workers = workers_for(options.threads, deadline)
    stop, explored, trees = Status.CONVERGED, 0, []

    def record(force=False):
        progress.update(sum(t.upper for t in trees), sum(t.lower() for t in trees), explored,
                        force=force, open_nodes=sum(len(t.engine.open) for t in trees))
    try:
        batch = max(BATCH, -(-workers.size // 2))
        trees += [SupportTree(part, bound_family(part, node_iterations, deadline), start_from, workers,
                              screening, batch, PRUNE_SHARE * options.rel_gap) for part, start_from in parts]
        while True:
            lower, upper = sum(t.lower() for t in trees), sum(t.upper for t in trees)
            if relative_gap(upper, lower) <= options.rel_gap or upper - lower <= options.abs_gap:
                break
            if deadline.expired():
                stop = Status.TIME_LIMIT
                break
            explored += max(trees, key=lambda t: t.upper - t.lower()).engine.step()
            if progress.due():
                record()
    finally:
        workers.close()
    record(force=True)
    row = progress.rows[-1]
    B, z = (np.vstack(parts) for parts in zip(*(t.best for t in trees)))
    return SolverRun(B, problem.objective(B, z), sum(t.lower() for t in trees), stop, progress.rows,
                      {"solver": "mtl_opt", "solver_version": __version__,
                       "nodes": explored, "open_nodes": row["open_nodes"],
                       "screened": sum(t.screened for t in trees), "pool_bounds": workers.jobs}, z)
