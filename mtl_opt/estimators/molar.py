"""MOLAR: weighted-median-based multitask linear regression (Algorithm 1 of the MOLAR paper).

The estimator (parameters, checks, result, confidence intervals); the algorithm is
``mtl_opt.solvers.molar.estimate``.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import ndtr, ndtri, stdtrit   # Phi, its inverse, Student's t quantile

from ..data import MultiTaskData
from ..formulations import molar as formulation
from ..params import validate_params
from ..result import FitResult
from ..solvers.least_squares import fitted_columns, per_task_ols, split_intercept, unfitted_warnings
from ..deadline import Deadline
from ..solvers.molar.estimate import SIGMA, MolarFit, median_problem, molar_fit, noise_levels
from ..solvers.molar.methods import METHODS, resolve
from ..solvers.backends import BACKENDS
from ..solvers.options import SolveOptions
from ..solvers.user_model import ModelSpec, indexed_values
from .base import BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf, OneOfKeys, SampleWeighted


class MOLAR(SampleWeighted, MTLEstimator):
    """Per-task OLS, a covariate-wise weighted median, then thresholding toward it.

    1. beta_ind_m = OLS of task m on the coordinates it identifies; sigma_m from
       its residuals unless given.
    2. The global estimate beta* is the covariate-wise weighted median of the
       beta_ind_m with weights w_m = n_m / sigma_m^2, i.e. the solution of::

           minimize  sum_k sum_m w_mk |z_k - beta_ind_mk|     (the certified problem)

       with w_mk = w_m where task m identifies coordinate k, else 0.
    3. Each identified coordinate is set to beta*_k (hard) or shrunk toward it
       (soft) when ``|beta*_k - beta_ind_mk| <= gamma_m sqrt([(X_m^T X_m)^{-1}]_kk)``,
       with gamma_m = c_gamma sqrt(ln(min(n_total / n_m, d_m))) sigma_m (Theorem 1).

    Coordinates a task does not identify (real multi-site data: a covariate
    constant within a site, collinear columns, fewer rows than features):

    * which ones: ``identifiability.identified_columns`` (the intercept is always
      identified); when sigma is estimated, a task with n_m <= d also drops its
      last identified features in column order until n_m - d_m >= 1, so that
      sigma_m exists.  ``result_.unidentified`` lists exactly these pairs.
    * the task's data carry no information on such a coefficient, so it gets
      weight 0 in that coordinate's median, is not thresholded, and takes the
      pooled estimate beta*_k, the best guess the other tasks give.  The fill
      must not move the task's own fit: its identified coefficients are
      re-estimated by least squares with the filled part as an offset (they move
      by -(A_S^T A_S)^{-1} A_S^T A_N beta*_N), which leaves its fitted values on
      its rows unchanged when the column is constant or collinear (a constant
      column c just shifts the intercept by -beta*_k c); step 3 then compares
      these offset-corrected estimates with beta*.  The median itself uses the
      task's own estimates (no circularity).
    * d_m, the number of coefficients task m fits, replaces d in sigma_m^2 =
      RSS_m / (n_m - d_m) (the residual degrees of freedom of the fit actually
      made) and in gamma_m (the dimension of that task's estimate).
    * a coordinate no task identifies (e.g. a site-level variable constant in
      every site): no task's data separate it from the intercept and earlier
      features, so its global and task coefficients are 0 and
      ``result_.warnings`` names it.
    * refused (InvalidDataError naming the tasks): a task left with no feature,
      i.e. with estimated sigma n_m < 3 (n_m < 2 without intercept).  Pass
      ``sigma=`` or use ``MOLARHighDim`` there.

    Parameters
    ----------
    threshold : {"hard", "soft"}, default="hard"
    c_gamma : float, default=1.0
        Scale of the threshold; Theorem 1 needs c_gamma >= 1 for its guarantee.
    algorithm : {"closed_form", "lp"}, default="closed_form"
        Compute the weighted median by sorting, or as one LP over all
        covariates solved by ``backend`` (``mtl_opt.solvers.molar.methods``).
    backend : "highs", "scip", "gurobi" or None, default=None
        LP solver when ``algorithm="lp"`` (None: HiGHS).
    sigma : float, sequence of floats, or None, default=None
        Known noise standard deviation (one, or one per task); None estimates
        sigma_m^2 = RSS_m / (n_m - d_m).
    fit_intercept : bool, default=True
        Adds an intercept column that is pooled and thresholded like any covariate.
    solve_options : SolveOptions or None
        time_limit, rel_gap (the tolerance for status ``optimal``), threads, verbose...

    Attributes
    ----------
    coef_ : ndarray (K, p)
    intercept_ : ndarray (K,)
    global_coef_ : ndarray (p,)
        The weighted-median global estimate.
    global_intercept_ : float
        Its intercept.
    sigma_ : ndarray (K,)
        Noise levels used for the weights and thresholds.
    result_ : FitResult
        ``objective`` / ``lower_bound`` refer to the weighted-median problem.
    molar_fit_ : MolarFit
        Every stage (OLS estimates, variance factors, weights, median), used by ``conf_int``.

    Notes
    -----
    The certificate: ``lower_bound`` is the dual objective of a dual feasible
    point (``|u_mk| <= w_mk``, ``sum_m u_mk = 0``), built from the median itself (with
    ``algorithm="lp"`` also from the LP's duals; the higher bound is reported),
    evaluated on data centred at the median and lowered by a rigorous bound on
    its rounding error, so it holds at any common level of the data (e.g.
    intercepts ~1e9); it proves how far the reported global estimate is from
    the optimal weighted-median objective.  Entries of weight 0 are left out
    (no LP row, not in the ranges the bound uses) and coordinates no task
    identifies add 0 to both sides.  The LP is solved with each covariate
    centred and scaled to [-1, 1].
    Thresholding is a closed-form map and has no optimization gap.
    For d > n_m in most tasks use ``MOLARHighDim`` (LASSO debiasing, Appendix E),
    for binary labels ``MOLARLogistic`` (Appendix G, a classifier).
    ``conf_int(alpha)`` gives Appendix F's entry-wise confidence intervals.

    Examples
    --------
    >>> from mtl_opt import MOLAR, datasets
    >>> df = datasets.frame("molar_demo")                 # a long table: task, y, x0..x7
    >>> X, y, task = df.drop(columns=["task", "y"]), df["y"], df["task"]
    >>> model = MOLAR(threshold="soft").fit(X, y, task=task)
    >>> print(model.result_.status, model.coef_.shape, model.global_coef_.shape)
    optimal (6, 8) (8,)
    >>> model.predict(X.head(2), task=task.head(2)).shape
    (2,)
    """

    identification = "collinear"
    method = "molar"
    global_model = ("global_coef_", "global_intercept_")
    param_constraints = {
        "threshold": [OneOf(formulation.THRESHOLDS)],
        "c_gamma": [Interval(0.0, None)],
        "algorithm": [OneOf(tuple(METHODS))],
        "backend": [OneOfKeys(BACKENDS)],
        "sigma": SIGMA,
        "fit_intercept": [BOOLEAN],
        "solve_options": [OneOf((None,)), InstanceOf((SolveOptions,), "a SolveOptions")],
    }

    def __init__(self, *, threshold="hard", c_gamma=1.0, algorithm="closed_form", backend=None,
                 sigma=None, fit_intercept=True, solve_options=None,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.threshold = threshold
        self.c_gamma = c_gamma
        self.algorithm = algorithm
        self.backend = backend
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.solve_options = solve_options

    def _check_fit(self, data: MultiTaskData) -> None:
        resolve(self.algorithm, self.backend)
        self._unidentified_mask(data)   # the per-task OLS stage's refusals

    def _residual_dof(self) -> int:
        """Residual degrees of freedom each task keeps: 1 to estimate sigma_m, else 0."""
        return int(self.sigma is None)

    def _unidentified_mask(self, data: MultiTaskData) -> np.ndarray:
        return ~fitted_columns(data, self.fit_intercept, self._residual_dof())

    def _fit(self, data: MultiTaskData) -> FitResult:
        options = self.solve_options or SolveOptions()
        deadline = Deadline(options.time_limit)   # the whole fit's budget, passed down
        method = resolve(self.algorithm, self.backend)   # cheap, checked
        clock = time.perf_counter()
        fits, sigma = self._local_fits(data)
        ols_time = time.perf_counter() - clock
        fit = molar_fit(fits, data.counts, sigma, c_gamma=self.c_gamma, threshold=self.threshold,
                        method=method, backend=self.backend, options=options, deadline=deadline)
        return self._molar_result(data, fit, options, [{"stage": "ols", "time": ols_time}],
                                  method.name, method.backend_for(self.backend, None))

    def _local_fits(self, data: MultiTaskData):
        """The per-task OLS fits and the noise levels MOLAR uses."""
        fits = per_task_ols(data, self.fit_intercept, self._residual_dof())
        return fits, noise_levels(self.sigma, fits, data.counts, data.task_names,
                                  type(self).__name__)

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        """The weighted-median LP (``formulations.molar.build_median_lp``) of the per-task fits,
        in the frame ``algorithm="lp"`` solves in (``MedianFrame.of``: each covariate centred, so
        the solver's absolute tolerances act on the spread, not on a common level such as an
        intercept of 1e9), with one power-of-2 scale for all covariates (so a homogeneous row of
        differences needs no conversion): z[k] = (coefficient k - y_offset[k]) / y_scale."""
        fits, sigma = self._local_fits(data)
        problem = median_problem(fits, data.counts / sigma**2)
        frame = formulation.MedianFrame.of(*problem, uniform=True)
        twin, inverse = frame.apply(problem)
        scale = float(frame.scale[0])
        model = formulation.build_median_lp(*twin)
        names = (["intercept"] if self.fit_intercept else []) + list(map(str, data.feature_names))

        def finish(run, options):
            fit = molar_fit(fits, data.counts, sigma, c_gamma=self.c_gamma,
                            threshold=self.threshold, median=run)
            return self._molar_result(data, fit, options, [], "user_model", "highs")

        return ModelSpec(
            model, "highs", "lp", *self._spec_key(data),
            decode=lambda solved: inverse.estimate(indexed_values(solved, "z", len(names))),
            objective=problem.objective, finish=finish, inverse=inverse,
            notes=f"covariates 0..{len(names) - 1}: {', '.join(names)}; the weights w_mk are over "
                  f"{frame.weight_scale:g}.  "
                  f"b_mk (task m's OLS coefficient k) enters as (b_mk - y_offset[k]) / {scale:g}, "
                  f"y_offset = {np.array2string(frame.centre, precision=6)}: a bound c on "
                  f"coefficient k is z[k] <= (c - y_offset[k]) / y_scale; the thresholding "
                  f"toward the global coefficient follows the solve as in MOLAR.")

    def _molar_result(self, data, fit: MolarFit, options, log, algorithm, backend) -> FitResult:
        """The FitResult of ``fit``, whose median ran by ``algorithm`` on ``backend``."""
        median = fit.median
        log = [*log, *median.log, *fit.log]   # the median's progress rows (the LP's), then the stages
        coef, intercept = split_intercept(fit.coef, self.fit_intercept)
        global_split = split_intercept(median.estimate[None, :], self.fit_intercept)
        self.global_coef_, self.global_intercept_ = global_split[0][0], float(global_split[1][0])
        self.sigma_ = fit.sigma
        self.molar_fit_ = fit
        return self._result_of(
            data, median, coef=coef, intercept=intercept, rel_gap=options.rel_gap,
            objective_name="weighted-median objective", log=log, algorithm=algorithm, backend=backend,
            warnings=unfitted_warnings(~fit.used[:, int(self.fit_intercept):].any(axis=0),
                                       data.feature_names, "in every task"),
            extra={"global_coef": self.global_coef_, "global_intercept": self.global_intercept_,
                   "sigma": fit.sigma, "weights": fit.weights})

    @validate_params({"alpha": [Interval(0.0, 1.0, open_low=True, open_high=True)]})
    def conf_int(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Entry-wise (1 - alpha) confidence intervals for the task coefficients (Appendix F).

        Returns ``(lower, upper)``, each of shape (K, p), on the original scale
        (intercepts are not included); NaN where the task does not identify the
        coefficient (its data cannot tell whether it agrees with the global value,
        which is what the global interval assumes).  See ``molar_intervals`` for the
        construction and its assumptions: the intervals are asymptotic, and
        exact-level only with known noise (``sigma=`` given); with estimated
        sigma the OLS intervals use t quantiles and the others plug in sigma_hat.
        """
        self._check_is_fitted()
        fit = self.molar_fit_
        lower, upper = molar_intervals(fit, alpha, known_sigma=self.sigma is not None)
        return split_intercept(lower, self.fit_intercept)[0], split_intercept(upper, self.fit_intercept)[0]


def molar_intervals(fit: MolarFit, alpha: float, *, known_sigma: bool) -> tuple[np.ndarray, np.ndarray]:
    """Appendix F's entry-wise intervals: the global interval where a task agrees with the median.

    For task m and coordinate k, with tau_mk = sigma_m sqrt([(X_m^T X_m)^{-1}]_kk):

    * the task is taken as aligned with the global estimate when
      |b_mk - z_k| < gamma~_m sqrt([(X_m^T X_m)^{-1}]_kk), gamma~_m = sqrt(2) ln(max(2 n_m, 8/alpha)) sigma_m
      (Proposition 4); then I = z_k +- h_k, else the OLS interval b_mk +- q tau_mk;
    * both intervals have level 1 - alpha/2 as in the paper's union bound
      (q = z_{1-alpha/4}, or Student t with n_m - d_m degrees of freedom when sigma is estimated);
    * h_k = bias_k + z_{1-alpha/4} se_k replaces the paper's 1.25 C_0.45 alpha_{B,delta} sigma_bar_k,
      a worst-case constant that is longer than the OLS interval unless M is in the hundreds:
      se_k^2 = (pi/2) sum_m w_m^2 / (sum_m w_m / tau_mk)^2 is the asymptotic variance of a
      weighted median of independent normals with a common center, and bias_k = x solving
      sum_m w_m Phi(x / tau_mk) = (1/2 + a_k) W, Lemma 12's quantile shift, with
      a_k = W_B / (2 W_G) for the weight W_B of the tasks not aligned at k (outliers all on one side).
      Where a_k >= 1/2 no global interval exists and every task keeps its OLS interval.

    Sums run over the tasks that identify coordinate k; b_mk is the offset-corrected estimate
    (``MolarFit.own``), and a coordinate the task does not identify gets NaN.

    Assumptions: Gaussian noise, n_m > d_m, and coordinates where tasks differ are
    separated from the global value by more than the alignment threshold (the
    paper's condition for coverage); the global interval is asymptotic in M.
    """
    local, used, sigma, w = fit.own, fit.used, fit.sigma, fit.entry_weights
    K, d = local.shape
    n = np.asarray(fit.n_samples, dtype=float)
    v = np.where(used, fit.gram_inv_diag, 1.0)   # any positive value where w_mk = 0
    tau = sigma[:, None] * np.sqrt(v)
    level = 1 - alpha / 4
    q = (np.full(K, ndtri(level)) if known_sigma else stdtrit(n - fit.dims, level))
    own_half = q[:, None] * tau
    tilde_gamma = np.sqrt(2) * np.log(np.maximum(2 * n, 8 / alpha)) * sigma
    z = fit.median.estimate
    aligned = np.abs(local - z[None, :]) < tilde_gamma[:, None] * np.sqrt(v)
    W_bad = np.where(aligned, 0.0, w).sum(axis=0)
    W_good = w.sum(axis=0) - W_bad
    shift = np.divide(W_bad, 2 * W_good, out=np.full(d, np.inf), where=W_good > 0)
    precision = np.sum(w / tau, axis=0)   # 0 where no task identifies k: no global interval
    se = np.sqrt(np.pi / 2 * np.divide(np.sum(w**2, axis=0), precision**2,
                                       out=np.full(d, np.inf), where=precision > 0))
    half = _quantile_shift(w, tau, shift) + ndtri(level) * se
    use_global = aligned & np.isfinite(half)[None, :]
    center = np.where(use_global, z[None, :], local)
    radius = np.where(use_global, np.broadcast_to(half, (K, d)), own_half)
    return (np.where(used, center - radius, np.nan), np.where(used, center + radius, np.nan))


def _quantile_shift(w, tau, shift, iterations: int = 80) -> np.ndarray:
    """x_k >= 0 with sum_m w_mk Phi(x_k / tau_mk) = (1/2 + shift_k) sum_m w_mk, by bisection (inf when shift >= 1/2).

    ``w`` is one weight per task (M,) or per entry (M, d), as in ``formulations.molar``."""
    w = formulation.entry_weights(w, tau.shape)
    target = (0.5 + np.minimum(shift, 0.5)) * w.sum(axis=0)
    low = np.zeros(tau.shape[1])
    high = np.where(w > 0, tau, 0.0).max(axis=0)

    def cdf(x):
        return (w * ndtr(x[None, :] / tau)).sum(axis=0)

    while np.any(grow := (cdf(high) < target) & (shift < 0.5)):
        high = np.where(grow, 2 * high, high)
    for _ in range(iterations):
        mid = (low + high) / 2
        below = cdf(mid) < target
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return np.where(shift < 0.5, high, np.inf)
