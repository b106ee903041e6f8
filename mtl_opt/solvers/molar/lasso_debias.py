"""The MOLAR paper's LASSO-debias algorithms: per-task LASSO, RM (Xu & Bastani) and ML.

Plain functions on per-task arrays (no intercept, as in the paper's model and
the bandits), each returning an (M, d) coefficient array; the estimators built
on them are in ``estimators.molar_baselines``.  All three use the paper's
penalty level (Appendix J.1)

    lambda_m = c_lambda * sqrt(ln(d) / n_m)

in the objective 1/(2 n_m) ||y_m - X_m beta||^2 + lambda_m ||.||_1.  scikit-learn's
``Lasso`` minimizes (1/(2 n)) ||y - X w||^2 + alpha ||w||_1, the same scaling, so
``alpha = lambda_m`` exactly (checked in the tests).  The defaults are the
paper's tuned values for sigma = 0.1 (c_lambda = 0.05 sigma for LASSO, 0.35 sigma
for RM); for another noise level scale them with sigma.

* LASSO: one LASSO per task.
* RM, the robust multitask estimator (Xu & Bastani, "Learning across bandits in
  high dimension via robust statistics"), as the MOLAR paper describes it
  (Remark 1, Appendix E, J.1, J.3.3): per-task OLS, a coordinate-wise trimmed
  mean as the global estimate, then LASSO debiasing of every task toward it,

      beta_m = argmin 1/(2 n_m) ||y_m - X_m beta||^2 + lambda_m ||beta - beta_global||_1.

  Assumed (the original paper was not available here): the trimmed mean drops
  the fraction eps = eta + sqrt(ln(2 / zeta) / (2 M)) of the M estimates from
  each tail (eta: the fraction of tasks that may differ at a coordinate;
  zeta: the confidence, through Hoeffding's bound), capped so that at least one
  value remains.  The defaults zeta = eta = 0.1 are those of J.1.  (Remark 1
  of the MOLAR paper says Xu & Bastani's Corollary 1 trims omega = sqrt(s/d).)
  In the MOLARB bandit benchmark the trimming fraction matters little: RMB's
  regret moves by at most about 4 (of 43-68) between omega = 0 (plain mean)
  and the median, far less than its lead over MOLARB (BENCHMARKS.md,
  "MOLARB bandits").
* ML (Appendix J.3.3): per-task OLS, the covariate-wise weighted median
  (weights n_m / sigma_m^2, as in MOLAR), then the same LASSO debiasing.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats
from sklearn.linear_model import Lasso

from ...data import MultiTaskData
from ...errors import InvalidParameterError
from ...formulations.molar import entry_weights, weighted_median
from ...params import BOOLEAN, NONE, POSITIVE, InstanceOf, Interval, validate_params
from ..least_squares import per_task_ols
from .estimate import SIGMA, noise_levels


#: Appendix J.1's tuned constants (sigma = 0.1 in the paper's regression experiments).
C_LAMBDA_LASSO = 0.005
C_LAMBDA_RM = 0.035
#: Coordinate-descent settings: tight enough that the LASSO error is far below the statistical error.
LASSO_TOL, LASSO_MAX_ITER = 1e-6, 10_000


def lasso_lambdas(c_lambda: float, n_features: int, n_samples) -> np.ndarray:
    """lambda_m = c_lambda sqrt(ln(d) / n_m), one per task (J.1); sklearn's alpha is the same number."""
    return c_lambda * np.sqrt(math.log(n_features) / np.asarray(n_samples, dtype=float))


def _lasso(X, y, lam) -> np.ndarray:
    """argmin 1/(2n) ||y - X b||^2 + lam ||b||_1 (sklearn Lasso, alpha = lam, no intercept)."""
    model = Lasso(alpha=float(lam), fit_intercept=False, precompute=X.shape[0] > X.shape[1],
                  tol=LASSO_TOL, max_iter=LASSO_MAX_ITER)
    return model.fit(X, y).coef_


def lasso_debias(Xs, ys, center, lambdas) -> np.ndarray:
    """LASSO debiasing toward ``center`` (d,): beta_m = center + LASSO of (y_m - X_m center) on X_m."""
    return np.array([center + _lasso(X, y - X @ center, lam) for X, y, lam in zip(Xs, ys, lambdas)])


def check_tasks(Xs, ys, owner) -> MultiTaskData:
    """Validate the arrays (MultiTaskData's checks) and that a penalty c sqrt(ln(d) / n_m) exists."""
    data = MultiTaskData(Xs, ys)
    if data.n_features < 2:
        raise InvalidParameterError(
            f"{owner}: lambda_m = c_lambda sqrt(ln(d) / n_m) is 0 for d = 1 feature (n_features = 1); use OLS instead.")
    return data


@validate_params({"c_lambda": POSITIVE})
def lasso_coefs(Xs, ys, *, c_lambda: float = C_LAMBDA_LASSO) -> np.ndarray:
    """Per-task LASSO with lambda_m = c_lambda sqrt(ln(d) / n_m): an (M, d) array."""
    data = check_tasks(Xs, ys, "lasso_coefs")
    lambdas = lasso_lambdas(c_lambda, data.n_features, data.n_samples)
    return np.array([_lasso(X, y, lam) for X, y, lam in zip(data.Xs, data.ys, lambdas)])


def rm_trim_fraction(n_tasks: int, zeta: float, eta: float) -> float:
    """Fraction trimmed from each tail: eta + sqrt(ln(2/zeta) / (2M)), below 1/2 so a value remains."""
    eps = eta + math.sqrt(math.log(2 / zeta) / (2 * n_tasks))
    return min(eps, (n_tasks - 1) / (2 * n_tasks))


#: The options of the array functions that estimators call with the pairs they identify.
ARRAY_OPTIONS = {"return_global": [BOOLEAN],
                 "fitted": [NONE, InstanceOf((np.ndarray,), "an (M, d) bool array")]}
#: RM's trimming parameters: zeta the confidence, eta the fraction of differing tasks.
TRIMMING = {"zeta": [Interval(0.0, 1.0, open_low=True, open_high=True, note="the confidence")],
            "eta": [Interval(0.0, 0.5, open_high=True, note="the fraction of differing tasks")]}


@validate_params({"c_lambda": POSITIVE, **TRIMMING, **ARRAY_OPTIONS})
def rm_coefs(Xs, ys, *, c_lambda: float = C_LAMBDA_RM, zeta: float = 0.1, eta: float = 0.1,
             return_global: bool = False, fitted=None):
    """RM: per-task OLS, coordinate-wise trimmed mean, LASSO debiasing (see the module notes).

    Returns the (M, d) task estimates, and the (d,) global estimate too with ``return_global``.
    The OLS stage fits each task on the features it identifies (``fitted`` (M, d) bool, default
    ``least_squares.fitted_columns``); coordinate k's trimmed mean is over the tasks that fit it (0 when
    none does).
    """
    data = check_tasks(Xs, ys, "rm_coefs")
    fits = per_task_ols(data, fit_intercept=False, fitted=fitted)
    local, used = fits.coef, fits.used
    center = np.array([
        scipy.stats.trim_mean(local[used[:, k], k], rm_trim_fraction(used[:, k].sum(), zeta, eta))
        if used[:, k].any() else 0.0 for k in range(data.n_features)])
    coef = lasso_debias(data.Xs, data.ys, center,
                        lasso_lambdas(c_lambda, data.n_features, data.n_samples))
    return (coef, center) if return_global else coef


@validate_params({"c_lambda": POSITIVE, "sigma": SIGMA, **ARRAY_OPTIONS})
def ml_coefs(Xs, ys, *, c_lambda: float = C_LAMBDA_RM, sigma=None, return_global: bool = False,
             fitted=None):
    """ML: per-task OLS, weighted median (w_m = n_m / sigma_m^2), LASSO debiasing (J.3.3).

    ``sigma`` as in MOLAR: known noise level(s), or None to estimate from the
    OLS residuals.  c_lambda defaults to RM's (J.3.3 gives no separate value).
    The OLS stage and the median treat coordinates a task does not identify as
    MOLAR does (``fitted`` (M, d) bool, default ``least_squares.fitted_columns``).
    """
    data = check_tasks(Xs, ys, "ml_coefs")
    fits = per_task_ols(data, fit_intercept=False, residual_dof=int(sigma is None), fitted=fitted)
    weights = data.n_samples / noise_levels(sigma, fits, data.n_samples, data.task_names, "ml_coefs") ** 2
    return median_lasso_debias(data, fits.coef, np.where(fits.used, weights[:, None], 0.0),
                               c_lambda, return_global=return_global)


def pooled_median(local, weights) -> np.ndarray:
    """Covariate-wise weighted median over the entries of positive weight (weights (M,) or
    (M, d)); 0 for a covariate no entry weighs."""
    weights = entry_weights(weights, np.shape(local))
    pooled = np.any(weights > 0, axis=0)
    center = np.zeros(np.shape(local)[1])
    center[pooled] = weighted_median(local[:, pooled], weights[:, pooled], axis=0)
    return center


def median_lasso_debias(data: MultiTaskData, local, weights, c_lambda, *, return_global=False):
    """Weighted median of the rows of ``local`` (``pooled_median``), then LASSO debiasing of every
    task toward it."""
    center = pooled_median(local, weights)
    coef = lasso_debias(data.Xs, data.ys, center,
                        lasso_lambdas(c_lambda, data.n_features, data.n_samples))
    return (coef, center) if return_global else coef
