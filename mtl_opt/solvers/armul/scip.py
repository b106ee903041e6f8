"""ARMUL's exact path for vanilla ARMUL: its Pyomo model (``formulations.armul``) solved by SCIP
(or Gurobi).

Vanilla ARMUL is convex (a QCP, or an NLP with the logistic loss).  Clustered ARMUL's exact path is
``solvers.armul.tree`` (its MIQCP, ``formulations.armul.build_clustered_model``, is left to the
modeling API: SCIP did not find a solution of it in a minute at 30 tasks).  ``read_solution`` reads
either model.
"""

from __future__ import annotations

import numpy as np

from ...deadline import Deadline
from ...errors import SolverError
from ...formulations import armul as formulation
from ...formulations.armul import ArmulProblem
from . import prox
from ..backends import get_backend
from ..method import SolverRun
from ..options import SolveOptions
from ..progress import Progress
from .prox import ArmulEstimate
from ..user_model import indexed_values


def solve_exact(problem: ArmulProblem, options: SolveOptions, deadline: Deadline,
                backend_name: str = "scip", progress: Progress | None = None) -> SolverRun:
    """Vanilla ARMUL: the backend's (SCIP by default) solution polished by FISTA (an
    ``ArmulEstimate`` as the run's estimate), and a bound whose source is ``native["bound"]``:
    never the backend's own (its cone tolerances are absolute), our safe dual bound
    (``polished``).  The log
    (``solvers.progress``) has the backend's heartbeat during its solve (nodes only: its bound is
    not ours) and a final row (``progress``, default a new one)."""
    progress = progress or Progress(options.verbose)
    model = formulation.build_vanilla_model(problem)
    kind = "qcp" if problem.loss == "squared" else "nlp"
    out = get_backend(backend_name).solve(model, kind, options, deadline=deadline,
                                          progress=progress.solver_callback())
    if not out.has_solution:
        raise SolverError(f"{out.solver} found no solution for ARMUL (status {out.status}); "
                          f"raise time_limit or use algorithm='prox'.")
    theta, centers, extra = read_solution(model, problem, "vanilla")
    theta, centers, bound, source = polished(problem, theta, centers, out.solver, options, deadline)
    objective = problem.objective(theta, centers)
    progress.update(objective, bound, out.native["nodes"], force=True)
    # the backend's gap is not ours: final_status measures ours
    return SolverRun(ArmulEstimate(theta, centers, extra), objective, bound, out.status, progress.rows,
                     {**out.native, "solver": out.solver, "solver_version": out.solver_version,
                      "bound": source})


def read_solution(model, problem: ArmulProblem, structure: str):
    """The solved ``model``'s (theta (m, d), the center of every task (m, d), extra): with
    ``clustered``, extra holds the ``centers`` table and the tasks' ``labels``."""
    theta = indexed_values(model, "theta", problem.m, problem.d)
    if structure == "vanilla":
        return theta, np.tile(indexed_values(model, "center", problem.d), (problem.m, 1)), {}
    table = indexed_values(model, "centers", len(model.G), problem.d)
    labels = np.argmax(indexed_values(model, "assign", problem.m, len(model.G)), axis=1)
    return theta, table[labels], {"centers": table, "labels": labels}


def polished(problem: ArmulProblem, theta, centers, solver: str, options: SolveOptions,
             deadline: Deadline):
    """Vanilla ARMUL from the backend's point: FISTA warm-started there (the backend meets its
    cones only to about its feasibility tolerance, ~1e-5 relative), the better point, and the
    higher of the two proven bounds (our dual bound at the backend's point, FISTA's best)."""
    bound = problem.dual_bound(theta, "vanilla")
    run = prox.fista(problem, theta, centers[0], rel_gap=options.rel_gap, deadline=deadline)
    if run.objective <= problem.objective(theta, centers):
        theta, centers = run.theta, run.centers
    bounds = [b for b in (bound, run.lower_bound) if b is not None]
    return (theta, centers, max(bounds) if bounds else None,
            f"dual feasible point from {solver}'s solution, polished by FISTA")
