"""MOLAR variants: LASSO debiasing for d > n_m (Appendix E) and MOLAR-GLM for logistic regression (Appendix G).

* ``MOLARHighDim``: when d > n_m the OLS estimates and the thresholds of
  Algorithm 1 do not exist.  Appendix E replaces the covariate-wise shrinkage by
  LASSO debiasing toward a global estimate,

      beta_m = argmin 1/(2 n_m) ||y_m - X_m beta||^2 + lambda_m ||beta - beta_global||_1,

  and gets the global estimate from transGLM's constrained l1 minimization
  (Algorithm 3).  Here the global estimate is instead the covariate-wise
  weighted median (w_m = n_m) of per-task LASSO estimates: MOLAR's collaboration
  step with LASSO in place of OLS.  This is our substitution, not the paper's
  Algorithm 3 (which needs a bound b on ||delta_m||_2 and a large LP/SOCP);
  like Algorithm 3 it relies on a sparse global parameter (Condition 11).
* ``MOLARLogistic``: Algorithm 4 with psi(u) = ln(1 + e^u): per-task logistic
  MLE, the weighted median (w_m = n_m), and thresholds
  gamma_m sqrt([(X_m^T D_m X_m)^{-1}]_kk) with D_m = diag(p_i (1 - p_i)) at the
  MLE and gamma_m = c_gamma sqrt(ln(min(n_total / n_m, d))) (Theorem 7's
  sqrt(ln(M ^ d)) for equal n_m).  Labels: any two classes, coded 0 / 1 (``classes_``).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.special
import sklearn
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from ..data import MultiTaskData
from ..errors import InvalidDataError
from ..formulations.molar import THRESHOLDS
from ..identifiability import constant_columns
from ..params import POSITIVE, validate_params
from ..result import FitResult
from ..solvers.molar.lasso_debias import ARRAY_OPTIONS, check_tasks, lasso_coefs, median_lasso_debias
from ..solvers.least_squares import (
    TaskFits,
    fitted_columns,
    split_intercept,
    stacked_mask,
    task_designs,
    unfitted_warnings,
)
from ..solvers.molar.estimate import molar_fit
from ..solvers.options import SolveOptions
from .base import BOOLEAN, Interval, MTLEstimator, OneOf
from .molar_baselines import CenteredEstimator

#: Per-task MLE settings: a tight tolerance, and enough iterations to tell non-convergence (separation).
MLE_TOL, MLE_MAX_ITER = 1e-10, 5_000


@validate_params({"c_lambda_local": POSITIVE, "c_lambda": POSITIVE} | ARRAY_OPTIONS)  # "|": Sphinx cannot parse "**" here
def molar_hd_coefs(Xs, ys, *, c_lambda_local: float = 0.07, c_lambda: float = 0.1,
                   return_global: bool = False, fitted=None):
    """High-dimensional MOLAR: per-task LASSO, weighted median (w_m = n_m), LASSO debiasing.

    Both penalties are lambda_m = c sqrt(ln(d) / n_m) (c_lambda_local for the
    per-task LASSO, c_lambda for the debiasing).  Works for any n_m, d.  A task
    gets weight 0 in the median of a coordinate it does not identify (``fitted``
    (M, d) bool, default: the columns not identically 0): its LASSO estimate
    there is 0 by construction, not evidence.  The debiasing then leaves that
    coefficient at the global value (a zero column costs nothing to leave).
    """
    data = check_tasks(Xs, ys, "molar_hd_coefs")
    if fitted is None:
        fitted = ~np.array([constant_columns(X, center=False) for X in data.Xs])
    local = lasso_coefs(data.Xs, data.ys, c_lambda=c_lambda_local)
    weights = np.where(fitted, data.n_samples[:, None].astype(float), 0.0)
    return median_lasso_debias(data, local, weights, c_lambda, return_global=return_global)


class MOLARHighDim(CenteredEstimator):
    """MOLAR for d > n_m: per-task LASSO, weighted median, LASSO debiasing toward it (Appendix E).

    See ``mtl_opt.estimators.molar_variants`` for what differs from the paper
    (the global estimate).  Intercepts are per task and unpenalized; the
    defaults (0.7 sigma and sigma on J.1's grid for sigma = 0.1) suit noise levels
    near 0.1: scale them with sigma.

    Attributes
    ----------
    global_coef_ : ndarray (p,)
        The weighted median of the per-task LASSO estimates.

    Examples
    --------
    >>> from mtl_opt import MOLARHighDim
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=30, M=4, n=20, s=2, seed=0).data   # d > n_m
    >>> model = MOLARHighDim().fit(data)
    >>> print(model.result_.status, model.coef_.shape)
    heuristic (4, 30)
    """

    method = "molar_hd"
    algorithm = "lasso_debias"
    param_constraints = {"c_lambda_local": [Interval(0.0, None, open_low=True)],
                         "c_lambda": [Interval(0.0, None, open_low=True)], "fit_intercept": [BOOLEAN]}

    def __init__(self, *, c_lambda_local=0.07, c_lambda=0.1, fit_intercept=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.c_lambda_local = c_lambda_local
        self.c_lambda = c_lambda
        self.fit_intercept = fit_intercept

    def _core(self, Xs, ys, fitted):
        return molar_hd_coefs(Xs, ys, c_lambda_local=self.c_lambda_local, c_lambda=self.c_lambda,
                              return_global=True, fitted=fitted)


class _GLMFit(NamedTuple):
    """What ``molar_fit`` needs from a per-task fit: the estimate and diag of its inverse information."""

    coef: np.ndarray
    gram_inv_diag: np.ndarray


def logistic_mle(A: np.ndarray, y: np.ndarray, name: str) -> _GLMFit:
    """Unpenalized logistic MLE of y on A (no extra intercept) and diag((A^T D A)^{-1}), D = p(1 - p).

    Raises InvalidDataError when the MLE does not exist: lbfgs does not converge,
    or the fit separates the labels (the likelihood then increases without bound).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            model = LogisticRegression(C=np.inf, fit_intercept=False, tol=MLE_TOL,
                                       max_iter=MLE_MAX_ITER).fit(A, y)
            converged = True
        except ConvergenceWarning:
            converged = False
    coef = model.coef_[0] if converged else None
    if not converged or np.all((A @ coef > 0) == (y == 1)):
        raise InvalidDataError(
            f"{name}: the logistic MLE does not exist because the labels are (nearly) separable "
            f"by the features. Use more data or fewer features, or a penalized fit that exists "
            f"on separable tasks: ARMUL(loss='logistic').")
    p = scipy.special.expit(A @ coef)
    info = A.T @ (A * (p * (1 - p))[:, None])
    return _GLMFit(coef, np.diag(np.linalg.inv(info)))


class MOLARLogistic(MTLEstimator):
    """MOLAR-GLM (Algorithm 4) for logistic regression: per-task MLE, weighted median, thresholding.

    A binary classifier (``classes_``: the two labels of y, the second one coded 1).
    ``coef_``/``intercept_`` are on its log-odds scale, ``decision_function`` returns them,
    ``predict`` labels, ``predict_proba`` (n, 2) probabilities, ``score`` accuracy.  The
    intercept (``fit_intercept``) is a column of ones, pooled and thresholded
    like any covariate, as in ``MOLAR``.

    Notes
    -----
    The certificate is that of the weighted-median problem (as for ``MOLAR``);
    the per-task MLEs are solved by scikit-learn's lbfgs to a tight tolerance.
    Needs every task to contain both labels and not to be separable.
    Coordinates a task does not identify (constant or collinear columns) are
    handled as in ``MOLAR``: the MLE is over the identified ones, the task has
    weight 0 in the others' medians, which it takes, and its identified
    coefficients absorb the filled part so its linear predictor is unchanged.
    A task with n_m <= d is separable, so its MLE does not exist: refused,
    pointing to ``ARMUL(loss="logistic")``.

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt import MOLARLogistic
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=3, M=3, n=200, s=1, seed=0).data
    >>> rng = np.random.default_rng(0)
    >>> X, y = np.vstack(data.Xs), np.concatenate(data.ys)             # a long table
    >>> task = np.repeat(data.task_names, data.n_samples)
    >>> labels = np.where(rng.random(len(y)) < 1 / (1 + np.exp(-y / y.std())), "yes", "no")
    >>> clf = MOLARLogistic().fit(X, labels, task=task)
    >>> clf.classes_.tolist(), clf.predict_proba(X[:2], task=task[:2]).shape
    (['no', 'yes'], (2, 2))
    """

    method = "molar_logistic"
    global_model = ("global_coef_", "global_intercept_")
    algorithm = "closed_form"   # the weighted median of ``molar.methods`` it runs (no choice)
    identification = "collinear"
    param_constraints = {"threshold": [OneOf(THRESHOLDS)], "c_gamma": [Interval(0.0, None)],
                         "fit_intercept": [BOOLEAN]}

    def __init__(self, *, threshold="hard", c_gamma=1.0, fit_intercept=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.threshold = threshold
        self.c_gamma = c_gamma
        self.fit_intercept = fit_intercept

    def _fit(self, data: MultiTaskData) -> FitResult:
        for name, y in zip(data.task_names, data.ys):   # labels 0 / 1: ``classes_``
            if len(np.unique(y)) < 2:
                raise InvalidDataError(
                    f"task {name!r}: MOLARLogistic needs both classes in every task (its MLE "
                    f"does not exist otherwise); it holds only {self.classes_[int(y[0])]!r}. "
                    f"Drop the task, or use ARMUL(loss='logistic').")
        designs = task_designs(data, self.fit_intercept)
        used = stacked_mask(fitted_columns(data, self.fit_intercept), self.fit_intercept)
        fits = TaskFits(designs, used, [logistic_mle(A[:, u], y, f"task {name!r}") for name, A, u, y
                                        in zip(data.task_names, designs, used, data.ys)])
        fit = molar_fit(fits, data.n_samples, np.ones(data.n_tasks), c_gamma=self.c_gamma,
                        threshold=self.threshold)
        median = fit.median
        coef, intercept = split_intercept(fit.coef, self.fit_intercept)
        global_coef, global_intercept = split_intercept(median.estimate[None, :], self.fit_intercept)
        self.global_coef_, self.global_intercept_ = global_coef[0], float(global_intercept[0])
        self.mle_coef_ = split_intercept(fit.local, self.fit_intercept)[0]
        return self._result_of(
            data, median, coef=coef, intercept=intercept, rel_gap=SolveOptions().rel_gap,
            objective_name="weighted-median objective",
            solver=f"scikit-learn lbfgs + {median.native['solver']}", solver_version=sklearn.__version__,
            algorithm=self.algorithm, backend=None, log=fit.log,
            warnings=unfitted_warnings(~fit.used[:, int(self.fit_intercept):].any(axis=0),
                                       data.feature_names, "in every task"),
            extra={"global_coef": self.global_coef_, "global_intercept": self.global_intercept_,
                   "weights": fit.weights})

    def _is_classifier(self) -> bool:
        return True
