"""ARMUL's exact path: the Pyomo models of ``formulations.armul`` solved by SCIP (or Gurobi).

Vanilla ARMUL is convex (a QCP, or an NLP with the logistic loss); clustered ARMUL with the
squared loss is a MIQCP.  ``estimators.armul.ARMUL(solver="scip")`` checks that the model
exists for its structure and loss before calling ``solve_exact``.
"""

from __future__ import annotations

import numpy as np

from ..deadline import Deadline
from ..errors import SolverError
from ..formulations import armul as formulation
from ..formulations.armul import ArmulProblem
from .backends import get_backend
from .options import SolveOptions
from .prox import ProxRun


def solve_exact(problem: ArmulProblem, structure: str, n_components: int | None,
                options: SolveOptions, deadline: Deadline,
                backend_name: str = "scip") -> tuple[ProxRun, str, str, str]:
    """The backend's (SCIP by default) solution, its solver name and version, a bound and the
    bound's source.  Vanilla (convex): the bound is our
    safe dual bound at SCIP's point, never SCIP's own (its cone tolerances are absolute);
    clustered: SCIP's dual bound, as SCIP reports it."""
    if structure == "vanilla":
        model = formulation.build_vanilla_model(problem)
        kind = "qcp" if problem.loss == "squared" else "nlp"
    else:
        model = formulation.build_clustered_model(problem, n_components)
        kind = "miqcp"
    backend = get_backend(backend_name)
    out = backend.solve(model, kind, options, deadline=deadline)
    if not out.has_solution:
        raise SolverError(f"{out.solver} found no solution for ARMUL (status {out.status}); "
                          f"raise time_limit or use solver='prox'.")
    theta = np.array([[model.theta[j, k].value for k in model.K] for j in model.J])
    if structure == "vanilla":
        centers = np.tile([model.center[k].value for k in model.K], (problem.m, 1))
        extra = {}
    else:
        table = np.array([[model.centers[g, k].value for k in model.K] for g in model.G])
        labels = np.array([max(model.G, key=lambda g: model.assign[j, g].value) for j in model.J])
        centers, extra = table[labels], {"centers": table, "labels": labels}
    objective = problem.objective(theta, centers)
    if structure == "vanilla":
        bound, source = problem.dual_bound(theta, "vanilla"), f"dual feasible point from {out.solver}'s solution"
    else:
        bound, source = out.bound, f"{out.solver} dual bound"
    status = "converged" if out.status == "optimal" else out.status   # SCIP's gap is not ours
    run = ProxRun(theta, centers, objective, bound, status, 0, [],
                  {**extra, "native": dict(out.native)})
    return run, out.solver, out.solver_version, source
