"""ARMUL's exact path: the Pyomo models of ``formulations.armul`` solved by SCIP (or Gurobi).

Vanilla ARMUL is convex (a QCP, or an NLP with the logistic loss); clustered ARMUL with the
squared loss is a MIQCP.  The ``exact`` method of ``solvers.armul_methods`` refuses a structure
or loss without a model before calling ``solve_exact``.
"""

from __future__ import annotations

import numpy as np

from ..deadline import Deadline
from ..errors import SolverError
from ..formulations import armul as formulation
from ..formulations.armul import ArmulProblem
from . import prox
from .armul_partitions import MAX_TASKS, enumerate_partitions
from .backends import get_backend
from .method import SolverRun
from .options import SolveOptions
from .progress import Progress
from .prox import ArmulEstimate
from .user_model import indexed_values

#: Share of the time limit the backend gets on clustered ARMUL when the partitions are
#: enumerated after it (the rest certifies its answer).
SOLVER_SHARE = 0.7


def solve_exact(problem: ArmulProblem, structure: str, n_components: int | None,
                options: SolveOptions, deadline: Deadline,
                backend_name: str = "scip", progress: Progress | None = None,
                heuristic: ArmulEstimate | None = None) -> SolverRun:
    """The backend's (SCIP by default) solution (an ``ArmulEstimate``) and a
    bound, whose source is ``native["bound"]``.  Never the backend's own bound (its cone
    tolerances are absolute): vanilla (convex), our safe dual bound at its point, polished by
    FISTA (``polished``); clustered, the partitions of the tasks (``certified_clusters``), with
    ``heuristic`` (clustered: a prox answer) kept where the backend's is worse or missing.  The
    log (``solvers.progress``) has the backend's heartbeat during its solve (nodes only: its
    bound is not ours, and its incumbent is not a point we hold) and a final row (``progress``,
    default a new one)."""
    progress = progress or Progress(options.verbose)
    if structure == "vanilla":
        model = formulation.build_vanilla_model(problem)
        kind = "qcp" if problem.loss == "squared" else "nlp"
    else:
        model = formulation.build_clustered_model(problem, n_components)
        kind = "miqcp"
    backend = get_backend(backend_name)
    enumerable = structure == "clustered" and problem.m <= MAX_TASKS
    out = backend.solve(model, kind, options,
                        deadline=deadline.share(SOLVER_SHARE) if enumerable else deadline,
                        progress=progress.solver_callback())
    if not out.has_solution and heuristic is None:
        raise SolverError(f"{out.solver} found no solution for ARMUL (status {out.status}); "
                          f"raise time_limit or use algorithm='prox'.")
    if out.has_solution:
        theta, centers, extra = read_solution(model, problem, structure)
    if heuristic is not None and (not out.has_solution or problem.objective(heuristic.theta, heuristic.centers)
                                  < problem.objective(theta, centers)):
        theta, centers, extra = heuristic.theta, heuristic.centers, dict(heuristic.extra)
    objective = problem.objective(theta, centers)
    if structure == "vanilla":
        theta, centers, bound, source = polished(problem, theta, centers, out.solver, options, deadline)
        objective = problem.objective(theta, centers)
    else:
        theta, centers, extra, bound, source = certified_clusters(
            problem, n_components, theta, centers, extra, deadline, options.rel_gap, progress.update)
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


def certified_clusters(problem, n_components, theta, centers, extra, deadline, rel_gap,
                       beat=lambda: None):
    """Clustered ARMUL's estimate and a proven bound: over every partition of the tasks
    (``armul_partitions``; the better of its estimate and the backend's), or with more than
    ``MAX_TASKS`` tasks or no time left the independent-tasks bound (the penalty is >= 0)."""
    found = enumerate_partitions(problem, n_components, deadline, rel_gap=rel_gap / 100, beat=beat)
    if found is None:
        return (theta, centers, extra, problem.dual_bound(theta, "independent"),
                f"independent-tasks dual bound (partitions enumerated for at most {MAX_TASKS} "
                f"tasks, within the time limit)")
    if problem.objective(found.theta, found.centers[found.labels]) <= problem.objective(theta, centers):
        theta, centers = found.theta, found.centers[found.labels]
        extra = {"centers": found.centers, "labels": found.labels}
    return theta, centers, extra, found.bound, "least safe vanilla bound over all partitions of the tasks"
