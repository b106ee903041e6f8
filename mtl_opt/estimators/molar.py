"""MOLAR: weighted-median-based multitask linear regression (Algorithm 1 of the MOLAR paper)."""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ..data import MultiTaskData
from ..errors import InvalidDataError, InvalidParameterError, SolverError
from ..formulations import molar as formulation
from ..result import STATUSES, FitResult, certified_status
from ..solvers.backends import pick_backend
from ..solvers.options import SolveOptions
from ._ols import per_task_ols, split_intercept
from .base import BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf


class MOLAR(MTLEstimator):
    """Per-task OLS, a covariate-wise weighted median, then thresholding toward it.

    1. beta_ind_m = OLS of task m; sigma_m from its residuals unless given.
    2. The global estimate beta* is the covariate-wise weighted median of the
       beta_ind_m with weights w_m = n_m / sigma_m^2, i.e. the solution of::

           minimize  sum_k sum_m w_m |z_k - beta_ind_mk|     (the certified problem)

    3. Each coordinate is set to beta*_k (hard) or shrunk toward it (soft) when
       |beta*_k - beta_ind_mk| <= gamma_m sqrt([(X_m^T X_m)^{-1}]_kk), with
       gamma_m = c_gamma sqrt(ln(min(n_total / n_m, d))) sigma_m (Theorem 1).

    Parameters
    ----------
    threshold : {"hard", "soft"}, default="hard"
    c_gamma : float, default=1.0
        Scale of the threshold; Theorem 1 needs c_gamma >= 1 for its guarantee.
    median : {"closed_form", "lp"}, default="closed_form"
        Compute the weighted median by sorting, or as one LP over all
        covariates solved by ``backend``.
    backend : {"highs", "scip"} or None, default=None
        LP solver when ``median="lp"`` (None picks HiGHS, else SCIP).
    sigma : float, sequence of floats, or None, default=None
        Known noise standard deviation (one, or one per task); None estimates
        sigma_m^2 = RSS_m / (n_m - d).
    fit_intercept : bool, default=True
        Adds an intercept column that is pooled and thresholded like any covariate.
    solve_options : SolveOptions or None
        time_limit, rel_gap (the tolerance for status ``optimal``), threads, verbose...

    Attributes
    ----------
    coef_ : ndarray (K, p)
    intercept_ : ndarray (K,)
    global_coef_ : ndarray (p,), global_intercept_ : float
        The weighted-median global estimate.
    sigma_ : ndarray (K,)
        Noise levels used for the weights and thresholds.
    result_ : FitResult
        ``objective`` / ``lower_bound`` refer to the weighted-median problem.

    Notes
    -----
    The certificate: ``lower_bound`` is the dual objective of a dual feasible
    point (|u_mk| <= w_m, sum_m u_mk = 0) evaluated in float64, built from the
    median itself (closed form) or from the LP's duals; it proves how far the
    reported global estimate is from the optimal weighted-median objective.
    Thresholding is a closed-form map and has no optimization gap.
    Requires n_m > d in every task (OLS); the high-dimensional variant is planned.
    """

    method = "molar"
    param_constraints = {
        "threshold": [OneOf(("hard", "soft"))],
        "c_gamma": [Interval(0.0, None)],
        "median": [OneOf(("closed_form", "lp"))],
        "backend": [OneOf(("highs", "scip", None))],
        "sigma": [OneOf((None,)), Interval(0.0, None, open_low=True),
                  InstanceOf((list, tuple, np.ndarray), "a sequence of positive floats, one per task")],
        "fit_intercept": [BOOLEAN],
        "solve_options": [OneOf((None,)), InstanceOf((SolveOptions,), "a SolveOptions")],
    }

    def __init__(self, *, threshold="hard", c_gamma=1.0, median="closed_form", backend=None,
                 sigma=None, fit_intercept=True, solve_options=None):
        self.threshold = threshold
        self.c_gamma = c_gamma
        self.median = median
        self.backend = backend
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.solve_options = solve_options

    def _fit(self, data: MultiTaskData) -> FitResult:
        if self.backend is not None and self.median != "lp":
            raise InvalidParameterError(
                f"backend={self.backend!r} is only used with median='lp'; set median='lp' "
                f"or leave backend unset.")
        options = self.solve_options or SolveOptions()
        log = []
        clock = time.perf_counter()
        fits = per_task_ols(data, self.fit_intercept)
        local = np.array([f.coef for f in fits])
        n = np.asarray(data.n_samples, dtype=float)
        sigma = self._noise_levels(data, fits, local.shape[1])
        weights = n / sigma**2
        log.append({"stage": "ols", "time": time.perf_counter() - clock})

        clock = time.perf_counter()
        median = (_median_by_lp(local, weights, self.backend, options) if self.median == "lp"
                  else _median_closed_form(local, weights))
        objective = formulation.median_objective(median.z, local, weights)
        log.append({"stage": "median", "time": time.perf_counter() - clock})

        clock = time.perf_counter()
        cut = formulation.thresholds(self.c_gamma, sigma, n, local.shape[1],
                                     np.array([f.gram_inv_diag for f in fits]))
        final = formulation.shrink(local, median.z, cut, self.threshold)
        log.append({"stage": "threshold", "time": time.perf_counter() - clock})

        coef, intercept = split_intercept(final, self.fit_intercept)
        global_split = split_intercept(median.z[None, :], self.fit_intercept)
        status = (certified_status(objective, median.lower_bound, options.rel_gap)
                  if median.status == "optimal" else median.status)
        self.global_coef_, self.global_intercept_ = global_split[0][0], float(global_split[1][0])
        self.sigma_ = sigma
        return FitResult(
            method=self.method, coef=coef, intercept=intercept, objective=objective,
            lower_bound=median.lower_bound, status=status,
            objective_name="weighted-median objective", bound_source=median.bound_source,
            solver=median.solver, solver_version=median.solver_version, log=log,
            native=median.native, task_names=list(data.task_names), feature_names=list(data.feature_names),
            extra={"global_coef": self.global_coef_, "global_intercept": self.global_intercept_,
                   "sigma": sigma, "weights": weights})

    def _noise_levels(self, data, fits, n_coef) -> np.ndarray:
        """sigma_m as given, or sqrt(RSS_m / (n_m - d)) from the OLS residuals."""
        K = data.n_tasks
        if self.sigma is None:
            sigma = np.array([np.sqrt(f.rss / (n_m - n_coef)) for f, n_m in zip(fits, data.n_samples)])
            exact = [name for name, s in zip(data.task_names, sigma) if s == 0]
            if exact:
                raise InvalidDataError(
                    f"tasks {exact} are fitted exactly by OLS (zero residual variance), so their "
                    f"weight n_m / sigma_m^2 is infinite; pass sigma= explicitly.")
            return sigma
        sigma = np.asarray(self.sigma, dtype=float)
        if sigma.ndim == 0:
            sigma = np.full(K, float(sigma))
        if sigma.shape != (K,) or not np.all(np.isfinite(sigma)) or np.any(sigma <= 0):
            raise InvalidParameterError(
                f"The 'sigma' parameter of MOLAR must be a positive float or {K} positive floats "
                f"(one per task); got {self.sigma!r}.")
        return sigma


class _Median(NamedTuple):
    """A weighted-median solve: the medians, a proven lower bound and where it came from."""

    z: np.ndarray
    lower_bound: float | None
    bound_source: str
    status: str
    solver: str
    solver_version: str
    native: dict


def _median_closed_form(local, weights) -> _Median:
    z = formulation.weighted_median(local, weights, axis=0)
    bound = formulation.dual_bound(formulation.median_dual_point(local, weights, z), local)
    return _Median(z, bound, "dual feasible point built from the median", "optimal",
                   "numpy", np.__version__, {})


def _median_by_lp(local, weights, backend_name, options) -> _Median:
    """Solve the weighted-median LP; the bound comes from its duals made feasible, else the solver."""
    backend = pick_backend("lp", backend_name)
    model = formulation.build_median_lp(local, weights)
    run = backend.solve(model, "lp", options)
    if not run.has_solution:
        raise SolverError(
            f"{run.solver} returned no solution for the weighted-median LP (status {run.status}); "
            f"try median='closed_form' or another backend.")
    M, d = local.shape
    z = np.array([model.z[k].value for k in range(d)], dtype=float)
    status = run.status if run.status in STATUSES else "error"
    try:
        duals = backend.load_duals(model, run)
    except SolverError:
        return _Median(z, run.bound, f"{run.solver} dual bound", status, run.solver,
                       run.solver_version, dict(run.native))
    u = np.array([[duals[model.upper[i, k]] - duals[model.lower[i, k]] for k in range(d)]
                  for i in range(M)])
    bound = formulation.dual_bound(formulation.project_dual(u, weights), local)
    return _Median(z, bound, f"{run.solver} LP duals made dual feasible", status, run.solver,
                   run.solver_version, dict(run.native))
