"""MOLAR's method table: the algorithms that solve the weighted-median problem, in one place.

``MOLAR`` (and ``molar_fit``, behind ``MOLARLogistic`` and ``molar_coefs``) looks an
``algorithm=`` name up here (``resolve``), which refuses before any work, and runs the
problem through ``Method.solve``, which returns a ``SolverRun`` on the weighted-median
objective with a proven lower bound (``formulations.molar``'s dual points).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...deadline import Deadline
from ...errors import SolverError
from ...formulations import molar as formulation
from ...result import Status
from ..backends import pick_backend
from ..method import Method, SolverRun, lookup
from ..options import SolveOptions
from ..progress import Progress


class MedianProblem(NamedTuple):
    """The weighted-median problem min_z sum_k sum_m w_mk |z_k - b_mk| over columns with some w_mk > 0."""

    values: np.ndarray    # (M, d) b_mk
    weights: np.ndarray   # (M, d) w_mk >= 0

    def objective(self, z) -> float:
        return formulation.median_objective(z, self.values, self.weights)


def _point_bound(problem: MedianProblem, z) -> tuple[float, str]:
    """The safe bound of the dual point built from the median z, and its source."""
    u = formulation.median_dual_point(problem.values, problem.weights, z)
    return (formulation.dual_bound(u, problem.values, problem.weights, z),
            "dual feasible point built from the median")


def _closed_form(problem: MedianProblem, incumbent, options, deadline, backend) -> SolverRun:
    z = formulation.weighted_median(problem.values, problem.weights, axis=0)
    bound, source = _point_bound(problem, z)
    return SolverRun(z, problem.objective(z), bound, Status.CONVERGED, [],
                     {"solver": "numpy", "solver_version": np.__version__, "bound": source, "nodes": 0})


def _lp(problem: MedianProblem, incumbent, options, deadline, backend_name) -> SolverRun:
    """Solve the weighted-median LP in its ``MedianFrame``; bound by the best of two dual points.

    The LP's duals (made feasible) and the dual point built from its median are
    both evaluated safely by ``dual_bound``; the better one is reported (the LP's
    duals are only as accurate as the solver's dual tolerance, which is absolute,
    and do not exist when the solve stopped early).  The solver's own bound is
    never reported.  The LP gets the time ``deadline`` leaves; stopped before a
    solution, the run keeps the closed-form median, unbounded, with stop ``time_limit``.
    The log (``solvers.progress``) has the backend's heartbeat during the LP and a final row.
    """
    local, weights = problem
    progress = Progress(options.verbose)
    backend = pick_backend("lp", backend_name)
    twin, inverse = formulation.MedianFrame.of(local, weights).apply(problem)
    model = formulation.build_median_lp(*twin)
    run = backend.solve(model, "lp", options, deadline=deadline, progress=progress.heartbeat)
    native = {**run.native, "solver": run.solver, "solver_version": run.solver_version}
    if not run.has_solution:
        if run.status is not Status.TIME_LIMIT:
            raise SolverError(
                f"{run.solver} returned no solution for the weighted-median LP (status {run.status}); "
                f"try algorithm='closed_form' or another backend.")
        z = formulation.weighted_median(local, weights, axis=0)
        progress.update(problem.objective(z), None, 0, force=True)
        return SolverRun(z, problem.objective(z), None, Status.TIME_LIMIT, progress.rows,
                         {**native, "bound": "none: the LP stopped before a solution; the estimate "
                                             "is the closed-form median"})
    M, d = local.shape
    z = inverse.estimate([model.z[k].value for k in range(d)])
    bounds = [_point_bound(problem, z)]
    try:
        duals = backend.load_duals(model, run)
    except SolverError:
        pass
    else:
        u_unit = np.zeros((M, d))
        for i, k in model.entries:
            u_unit[i, k] = duals[model.upper[i, k]] - duals[model.lower[i, k]]
        u = formulation.project_dual(inverse.dual(u_unit), weights)
        bounds.append((formulation.dual_bound(u, local, weights, z),
                       f"{run.solver} LP duals made dual feasible"))
    bound, source = max(bounds)
    progress.update(problem.objective(z), bound, 0, force=True)
    return SolverRun(z, problem.objective(z), bound, run.status, progress.rows,
                     {**native, "bound": source})


def _never(problem, backend) -> None:
    return None


#: Algorithm name -> Method; both solve the same problem and certify it.
METHODS: dict[str, Method] = {m.name: m for m in (
    Method("closed_form", None, True, _never, _closed_form,
           "covariate-wise weighted median by sorting", None,
           "dual feasible point built from the median"),
    Method("lp", None, True, _never, _lp,
           "one LP over all covariates, centred and scaled to [-1, 1]", "lp",
           "the better of the LP's duals made feasible and the median's dual point"),
)}


def resolve(algorithm: str, backend: str | None) -> Method:
    """The method ``algorithm`` names, once it has said it can run on ``backend`` (every
    refusal comes here, cheaply, before any work); an unknown name lists the valid ones."""
    return lookup(METHODS, algorithm, "MOLAR algorithm").check(None, backend)


def solve_median(found: Method, problem: MedianProblem, options: SolveOptions,
                 deadline: Deadline, backend: str | None) -> SolverRun:
    """Run ``found`` on the columns some task weighs; the others add 0 at any z and get z_k = 0."""
    pooled = np.any(problem.weights > 0, axis=0)
    run = found.solve(MedianProblem(problem.values[:, pooled], problem.weights[:, pooled]), None,
                      options, deadline, found.backend_for(backend, problem))
    z = np.zeros(problem.values.shape[1])
    z[pooled] = run.estimate
    run.estimate = z
    return run
