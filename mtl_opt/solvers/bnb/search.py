"""The tree search: ``solve_bnb`` runs best-first branch and bound over supports, with
perspective-dual node bounds (the L0BnB / OKRidge design), until the gap is closed or time is up.

Independent tasks get a tree each (``tree.Tree``); a common support, a Zbar or a Bbar term share
one.  Each tree's nodes are bounded by one bound family, chosen from the problem: ``greedy``
(neither term), ``zbar`` (a Zbar term on more than ``sets.ENUMERATED_TASKS`` tasks) or ``sets``
(a Bbar term, or a Zbar term on few tasks).  A step's children are bounded at once, shared with
a worker process (``pool``).  The search stops at ``rel_gap``, ``abs_gap`` or the time limit.

Scope (``scope.refusal``): lambda_ridge > 0, every variant (with a Bbar term on per-task
supports, K <= ``scope.MAX_BBAR_TASKS``).  The bound uses the penalties' curvature alone, not the
curvature outer approximation borrows when n_k > p; it is built for n_k <= p, where that
curvature is 0 anyway.
"""

from __future__ import annotations

import numpy as np

from ... import __version__
from ...errors import InvalidParameterError
from ...formulations.sparse import SparseProblem
from ...result import relative_gap
from ...deadline import Deadline
from ...resources import one_blas_thread
from ..method import SolverRun
from ..options import SolveOptions
from ..progress import Progress
from .greedy import GreedySearch
from .node import NODE_ITERATIONS
from .pool import NodePool
from .scope import refusal
from .sets import ENUMERATED_TASKS, SetSearch
from .zbar import ZbarSearch


@one_blas_thread
def solve_bnb(problem: SparseProblem, options: SolveOptions, incumbent: np.ndarray, *,
              node_iterations: int = NODE_ITERATIONS, deadline: Deadline,
              screening: bool = True, progress: Progress | None = None) -> SolverRun:
    """Best-first branch and bound from ``incumbent`` (e.g. the BCD solution).

    Without a common support or a Zbar term the tasks share nothing, so each
    gets its own tree: one joint tree would branch over the product of theirs.
    Bounds and objectives add up; each step expands ``tree.BATCH`` nodes of the task with the
    widest gap, until the summed gap is within ``rel_gap`` or ``abs_gap``, or
    ``deadline`` (the fit's) passes; a node bounded
    when it passes keeps the best dual value found so far (valid for every r).
    ``screening=False`` splits nodes without fixing entries by their children's bounds.
    The log (``progress``, default a new one) has a row after the first step, then one a
    ``progress.EVERY`` seconds, and a final one; a row's ``open_nodes`` are the trees' open nodes.
    A step's children are bounded at once on two cores (``pool``) unless
    ``options.threads`` is 1; the result is the same either way.
    """
    reason = refusal(problem)
    if reason is not None:
        raise InvalidParameterError(reason)
    if not problem.feasible(np.zeros(incumbent.shape)):   # in scope: more includes than s allows
        return SolverRun(incumbent, problem.objective(incumbent), None, "infeasible",
                         [], {"solver": "mtl_opt", "solver_version": __version__,
                              "why": "the included features exceed s",
                              "bound": "none: infeasible"})
    progress = progress or Progress(options.verbose)
    progress.update(problem.objective(incumbent), None, 0, force=True)   # before the roots' bounds
    if problem.common_support or problem.lambda_zbar or problem.lambda_bbar:
        parts = [(problem, incumbent)]
    else:
        parts = [(problem.task(k), incumbent[k:k + 1]) for k in range(problem.n_tasks)]
    if problem.lambda_bbar or (problem.lambda_zbar and problem.n_tasks <= ENUMERATED_TASKS):
        search = SetSearch
    else:
        search = ZbarSearch if problem.lambda_zbar else GreedySearch
    searches = [search(part, node_iterations, start_from, deadline, screening) for part, start_from in parts]
    pool = NodePool(options.threads, deadline)
    for one in searches:
        one.pool = pool
    stop, explored = "converged", 0

    def record(force=False):
        progress.update(sum(s.upper for s in searches), sum(s.lower() for s in searches), explored,
                        force=force, open_nodes=sum(len(s.heap) for s in searches))
    try:
        while True:
            lower, upper = sum(s.lower() for s in searches), sum(s.upper for s in searches)
            if relative_gap(upper, lower) <= options.rel_gap or upper - lower <= options.abs_gap:
                break
            if deadline.expired():
                stop = "time_limit"
                break
            explored += max(searches, key=lambda s: s.upper - s.lower()).expand()
            if progress.due():
                record()
    finally:
        pool.close()
    record(force=True)
    row = progress.rows[-1]
    B, z = np.vstack([s.best for s in searches]), np.vstack([s.best_z for s in searches])
    return SolverRun(B, problem.objective(B, z), sum(s.lower() for s in searches), stop, progress.rows,
                      {"solver": "mtl_opt", "solver_version": __version__,
                       "nodes": explored, "open_nodes": row["open_nodes"],
                       "screened": sum(s.screened for s in searches), "pool_bounds": pool.jobs}, z)
