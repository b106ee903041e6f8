"""MOLAR: weighted-median-based multitask linear regression (Algorithm 1 of the MOLAR paper)."""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.stats

from ..data import MultiTaskData
from ..errors import InvalidDataError, InvalidParameterError, SolverError
from ..formulations import molar as formulation
from ..result import STATUSES, FitResult, certified_status
from ..solvers.backends import pick_backend
from ..solvers.options import SolveOptions
from ._ols import check_task_designs, per_task_ols, split_intercept
from .base import BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf, SequenceOf


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
    molar_fit_ : MolarFit
        Every stage (OLS estimates, variance factors, weights, median), used by ``conf_int``.

    Notes
    -----
    The certificate: ``lower_bound`` is the dual objective of a dual feasible
    point (|u_mk| <= w_m, sum_m u_mk = 0), built from the median itself (with
    ``median="lp"`` also from the LP's duals; the higher bound is reported),
    evaluated on data centred at the median and lowered by a rigorous bound on
    its rounding error, so it holds at any common level of the data (e.g.
    intercepts ~1e9); it proves how far the reported global estimate is from
    the optimal weighted-median objective.  The LP is solved with each
    covariate centred and scaled to [-1, 1].
    Thresholding is a closed-form map and has no optimization gap.
    Requires n_m > d in every task (OLS); for d > n_m use ``MOLARHighDim``
    (LASSO debiasing, Appendix E), for 0/1 labels ``MOLARLogistic`` (Appendix G).
    ``conf_int(alpha)`` gives Appendix F's entry-wise confidence intervals.
    """

    method = "molar"
    param_constraints = {
        "threshold": [OneOf(("hard", "soft"))],
        "c_gamma": [Interval(0.0, None)],
        "median": [OneOf(("closed_form", "lp"))],
        "backend": [OneOf(("highs", "scip", None))],
        "sigma": [OneOf((None,)), Interval(0.0, None, open_low=True),
                  SequenceOf(Interval(0.0, None, open_low=True))],
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

    def _check_fit(self, data: MultiTaskData) -> None:
        if self.backend is not None and self.median != "lp":
            raise InvalidParameterError(
                f"backend={self.backend!r} is only used with median='lp'; set median='lp' "
                f"or leave backend unset.")
        check_task_designs(data, self.fit_intercept)   # the per-task OLS stage's refusals

    def _fit(self, data: MultiTaskData) -> FitResult:
        options = self.solve_options or SolveOptions()
        clock = time.perf_counter()
        fits = per_task_ols(data, self.fit_intercept)
        ols_time = time.perf_counter() - clock
        sigma = noise_levels(self.sigma, fits, data.n_samples, data.task_names, type(self).__name__)
        fit = molar_fit(fits, data.n_samples, sigma, c_gamma=self.c_gamma, threshold=self.threshold,
                        median=self.median, backend=self.backend, options=options)
        log = [{"stage": "ols", "time": ols_time}, *fit.log]
        median = fit.median
        objective = formulation.median_objective(median.z, fit.local, fit.weights)
        coef, intercept = split_intercept(fit.coef, self.fit_intercept)
        global_split = split_intercept(median.z[None, :], self.fit_intercept)
        status = (certified_status(objective, median.lower_bound, options.rel_gap)
                  if median.status == "optimal" else median.status)
        self.global_coef_, self.global_intercept_ = global_split[0][0], float(global_split[1][0])
        self.sigma_ = sigma
        self.molar_fit_ = fit
        return FitResult(
            method=self.method, coef=coef, intercept=intercept, objective=objective,
            lower_bound=median.lower_bound, status=status,
            objective_name="weighted-median objective", bound_source=median.bound_source,
            solver=median.solver, solver_version=median.solver_version, log=log,
            native=median.native, task_names=list(data.task_names), feature_names=list(data.feature_names),
            extra={"global_coef": self.global_coef_, "global_intercept": self.global_intercept_,
                   "sigma": sigma, "weights": fit.weights})

    def conf_int(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Entry-wise (1 - alpha) confidence intervals for the task coefficients (Appendix F).

        Returns ``(lower, upper)``, each of shape (K, p), on the original scale
        (intercepts are not included).  See ``molar_intervals`` for the
        construction and its assumptions: the intervals are asymptotic, and
        exact-level only with known noise (``sigma=`` given); with estimated
        sigma the OLS intervals use t quantiles and the others plug in sigma_hat.
        """
        self._check_is_fitted()
        if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and 0 < alpha < 1):
            raise InvalidParameterError(f"conf_int: alpha must be a float in (0, 1); got {alpha!r}.")
        fit = self.molar_fit_
        lower, upper = molar_intervals(fit, alpha, known_sigma=self.sigma is not None)
        return split_intercept(lower, self.fit_intercept)[0], split_intercept(upper, self.fit_intercept)[0]


def noise_levels(sigma, fits, n_samples, task_names, owner: str = "MOLAR") -> np.ndarray:
    """sigma_m as given (one float or one per task), or sqrt(RSS_m / (n_m - d)) from the OLS residuals."""
    K = len(fits)
    if sigma is None:
        n_coef = len(fits[0].coef)
        estimate = np.array([np.sqrt(f.rss / (n_m - n_coef)) for f, n_m in zip(fits, n_samples)])
        exact = [name for name, s in zip(task_names, estimate) if s == 0]
        if exact:
            raise InvalidDataError(
                f"tasks {exact} are fitted exactly by OLS (zero residual variance), so their "
                f"weight n_m / sigma_m^2 is infinite; pass sigma= explicitly.")
        return estimate
    given = np.asarray(sigma, dtype=float)
    if given.ndim == 0:
        given = np.full(K, float(given))
    if given.shape != (K,) or not np.all(np.isfinite(given)) or np.any(given <= 0):
        raise InvalidParameterError(
            f"The 'sigma' parameter of {owner} must be a positive float or {K} positive floats "
            f"(one per task); got {sigma!r}.")
    return given


class MolarFit(NamedTuple):
    """Every stage of one MOLAR fit, on the stacked coefficient scale (intercept column included)."""

    local: np.ndarray          # (K, d) per-task OLS estimates
    gram_inv_diag: np.ndarray  # (K, d) diag((X_m^T X_m)^{-1})
    n_samples: np.ndarray      # (K,)
    sigma: np.ndarray          # (K,) noise levels used
    weights: np.ndarray        # (K,) n_m / sigma_m^2
    median: _Median            # the global estimate and its certificate
    coef: np.ndarray           # (K, d) after thresholding
    log: list


def molar_fit(fits, n_samples, sigma, *, c_gamma: float, threshold: str, median: str = "closed_form",
              backend=None, options: SolveOptions | None = None) -> MolarFit:
    """Algorithm 1 from per-task OLS fits: weighted median, then thresholding toward it.

    The one implementation behind ``MOLAR`` and ``molar_coefs``.
    """
    local = np.array([f.coef for f in fits])
    gram_inv_diag = np.array([f.gram_inv_diag for f in fits])
    n = np.asarray(n_samples, dtype=float)
    weights = n / sigma**2
    clock = time.perf_counter()
    result = (_median_by_lp(local, weights, backend, options or SolveOptions()) if median == "lp"
              else _median_closed_form(local, weights))
    log = [{"stage": "median", "time": time.perf_counter() - clock}]
    clock = time.perf_counter()
    cut = formulation.thresholds(c_gamma, sigma, n, local.shape[1], gram_inv_diag)
    final = formulation.shrink(local, result.z, cut, threshold)
    log.append({"stage": "threshold", "time": time.perf_counter() - clock})
    return MolarFit(local, gram_inv_diag, np.asarray(n_samples), sigma, weights, result, final, log)


def molar_coefs(Xs, ys, *, sigma=None, c_gamma: float = 1.0, threshold: str = "hard") -> np.ndarray:
    """MOLAR (Algorithm 1, closed-form median) on per-task arrays, no intercept: an (M, d) array.

    ``sigma`` is the known noise level (one float or one per task), or None to
    estimate it from the OLS residuals; gamma_m = c_gamma sqrt(ln(min(n_total/n_m, d))) sigma_m.
    Every task needs n_m > d.  Same code path as ``MOLAR(fit_intercept=False)``.
    """
    check_positive("molar_coefs", "c_gamma", c_gamma, allow_zero=True)
    if threshold not in ("hard", "soft"):
        raise InvalidParameterError(f"molar_coefs: threshold must be 'hard' or 'soft'; got {threshold!r}.")
    data = MultiTaskData(Xs, ys)
    fits = per_task_ols(data, fit_intercept=False)
    levels = noise_levels(sigma, fits, data.n_samples, data.task_names, "molar_coefs")
    return molar_fit(fits, data.n_samples, levels, c_gamma=c_gamma, threshold=threshold).coef


def check_positive(owner: str, name: str, value, *, allow_zero: bool = False) -> float:
    """A finite float > 0 (>= 0 with ``allow_zero``), or an InvalidParameterError naming it."""
    ok = (isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
          and np.isfinite(value) and (value >= 0 if allow_zero else value > 0))
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidParameterError(f"{owner}: {name} must be a finite float {bound}; got {value!r}.")
    return float(value)


def molar_intervals(fit: MolarFit, alpha: float, *, known_sigma: bool) -> tuple[np.ndarray, np.ndarray]:
    """Appendix F's entry-wise intervals: the global interval where a task agrees with the median.

    For task m and coordinate k, with tau_mk = sigma_m sqrt([(X_m^T X_m)^{-1}]_kk):

    * the task is taken as aligned with the global estimate when
      |b_mk - z_k| < gamma~_m sqrt([(X_m^T X_m)^{-1}]_kk), gamma~_m = sqrt(2) ln(max(2 n_m, 8/alpha)) sigma_m
      (Proposition 4); then I = z_k +- h_k, else the OLS interval b_mk +- q tau_mk;
    * both intervals have level 1 - alpha/2 as in the paper's union bound
      (q = z_{1-alpha/4}, or Student t with n_m - d degrees of freedom when sigma is estimated);
    * h_k = bias_k + z_{1-alpha/4} se_k replaces the paper's 1.25 C_0.45 alpha_{B,delta} sigma_bar_k,
      a worst-case constant that is longer than the OLS interval unless M is in the hundreds:
      se_k^2 = (pi/2) sum_m w_m^2 / (sum_m w_m / tau_mk)^2 is the asymptotic variance of a
      weighted median of independent normals with a common center, and bias_k = x solving
      sum_m w_m Phi(x / tau_mk) = (1/2 + a_k) W, Lemma 12's quantile shift, with
      a_k = W_B / (2 W_G) for the weight W_B of the tasks not aligned at k (outliers all on one side).
      Where a_k >= 1/2 no global interval exists and every task keeps its OLS interval.

    Assumptions: Gaussian noise, n_m > d, and coordinates where tasks differ are
    separated from the global value by more than the alignment threshold (the
    paper's condition for coverage); the global interval is asymptotic in M.
    """
    local, v, sigma, w = fit.local, fit.gram_inv_diag, fit.sigma, fit.weights
    K, d = local.shape
    n = np.asarray(fit.n_samples, dtype=float)
    tau = sigma[:, None] * np.sqrt(v)
    level = 1 - alpha / 4
    q = (np.full(K, scipy.stats.norm.ppf(level)) if known_sigma
         else scipy.stats.t.ppf(level, n - d))
    own_half = q[:, None] * tau
    tilde_gamma = np.sqrt(2) * np.log(np.maximum(2 * n, 8 / alpha)) * sigma
    z = fit.median.z
    aligned = np.abs(local - z[None, :]) < tilde_gamma[:, None] * np.sqrt(v)
    W_bad = np.where(aligned, 0.0, w[:, None]).sum(axis=0)
    W_good = w.sum() - W_bad
    shift = np.divide(W_bad, 2 * W_good, out=np.full(d, np.inf), where=W_good > 0)
    se = np.sqrt(np.pi / 2 * np.sum(w**2) / np.sum(w[:, None] / tau, axis=0) ** 2)
    half = _quantile_shift(w, tau, shift) + scipy.stats.norm.ppf(level) * se
    use_global = aligned & np.isfinite(half)[None, :]
    center = np.where(use_global, z[None, :], local)
    radius = np.where(use_global, np.broadcast_to(half, (K, d)), own_half)
    return center - radius, center + radius


def _quantile_shift(w, tau, shift, iterations: int = 80) -> np.ndarray:
    """x_k >= 0 with sum_m w_m Phi(x_k / tau_mk) = (1/2 + shift_k) sum_m w_m, by bisection (inf when shift >= 1/2)."""
    target = (0.5 + np.minimum(shift, 0.5)) * w.sum()
    low = np.zeros(tau.shape[1])
    high = tau.max(axis=0).copy()

    def cdf(x):
        return (w[:, None] * scipy.stats.norm.cdf(x[None, :] / tau)).sum(axis=0)

    while np.any(grow := (cdf(high) < target) & (shift < 0.5)):
        high = np.where(grow, 2 * high, high)
    for _ in range(iterations):
        mid = (low + high) / 2
        below = cdf(mid) < target
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return np.where(shift < 0.5, high, np.inf)


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
    return _Median(z, *_median_point_bound(local, weights, z), "optimal", "numpy", np.__version__, {})


def _median_point_bound(local, weights, z) -> tuple[float, str]:
    """The safe bound of the dual point built from the median z, and its source."""
    u = formulation.median_dual_point(local, weights, z)
    return formulation.dual_bound(u, local, weights, z), "dual feasible point built from the median"


def _median_by_lp(local, weights, backend_name, options) -> _Median:
    """Solve the weighted-median LP in its ``MedianFrame``; bound by the best of two dual points.

    The LP's duals (made feasible) and the dual point built from its median are
    both evaluated safely by ``dual_bound``; the better one is reported (the LP's
    duals are only as accurate as the solver's dual tolerance, which is absolute,
    and do not exist when the solve stopped early).  The solver's own bound is
    never reported.
    """
    backend = pick_backend("lp", backend_name)
    frame = formulation.MedianFrame.of(local, weights)
    model = formulation.build_median_lp(*frame.to_unit(local, weights))
    run = backend.solve(model, "lp", options)
    if not run.has_solution:
        raise SolverError(
            f"{run.solver} returned no solution for the weighted-median LP (status {run.status}); "
            f"try median='closed_form' or another backend.")
    M, d = local.shape
    z = frame.z_from_unit([model.z[k].value for k in range(d)])
    status = run.status if run.status in STATUSES else "error"
    bounds = [_median_point_bound(local, weights, z)]
    try:
        duals = backend.load_duals(model, run)
    except SolverError:
        pass
    else:
        u_unit = [[duals[model.upper[i, k]] - duals[model.lower[i, k]] for k in range(d)]
                  for i in range(M)]
        u = formulation.project_dual(frame.dual_from_unit(u_unit), weights)
        bounds.append((formulation.dual_bound(u, local, weights, z),
                       f"{run.solver} LP duals made dual feasible"))
    bound, source = max(bounds)
    return _Median(z, bound, source, status, run.solver, run.solver_version, dict(run.native))
