"""The MOLAR paper's regression baselines as estimators: per-task LASSO, RM (Xu & Bastani) and ML.

The algorithms, their penalty level and RM's trimming rule are in ``mtl_opt.solvers.molar.lasso_debias``;
here every task gets an unpenalized intercept (``CenteredEstimator``).
"""

from __future__ import annotations

import numpy as np
import sklearn

from ..data import MultiTaskData
from ..result import FitResult, Status
from ..solvers.molar.lasso_debias import C_LAMBDA_LASSO, C_LAMBDA_RM, TRIMMING, lasso_coefs, ml_coefs, rm_coefs
from ..solvers.least_squares import fitted_columns
from ..solvers.method import NO_BOUND, SolverRun
from ..solvers.options import SolveOptions
from .base import BOOLEAN, Interval, MTLEstimator, OneOf

__all__ = ["CenteredEstimator", "MedianLasso", "PerTaskLasso", "RobustMultitask"]


class CenteredEstimator(MTLEstimator):
    """Shared fit of the LASSO-based estimators: center each task when fitting intercepts
    (``MultiTaskData.standardize`` without scaling; its ``Scaler`` maps the coefficients back,
    so intercepts are per task and unpenalized), call ``_core(Xs, ys, fitted) -> (coef, global or
    None)`` with ``fitted`` = the pairs the estimator's rule identifies (``_unidentified_mask``
    on the uncentred data, so the intercept counts)."""

    #: The one algorithm it runs (``FitResult.algorithm``; no ``algorithm=`` choice).
    algorithm: str

    def _fit(self, data: MultiTaskData) -> FitResult:
        fitted = ~self._unidentified_mask(data)
        centred, scaler = data.standardize(how="task", center=self.fit_intercept, scale=False)
        coef, global_coef = self._core(centred.Xs, centred.ys, fitted)
        coef, intercept = scaler.coef_to_original(coef, np.zeros(data.n_tasks))
        extra = {}
        if global_coef is not None:
            self.global_coef_ = extra["global_coef"] = global_coef
        resid = [y - X @ b - b0 for X, y, b, b0 in zip(data.Xs, data.ys, coef, intercept)]
        objective = float(sum(r @ r / (2 * len(r)) for r in resid))
        run = SolverRun(coef, objective, None, Status.CONVERGED, native={
            "solver": "scikit-learn Lasso", "solver_version": sklearn.__version__,
            "bound": f"{NO_BOUND}: the LASSO-based estimators have no certificate"})
        return self._result_of(
            data, run, coef=coef, intercept=intercept, rel_gap=SolveOptions().rel_gap,
            objective_name="sum of per-task mean squared errors / 2 (no certificate)",
            algorithm=self.algorithm, backend=None, extra=extra)


class PerTaskLasso(CenteredEstimator):
    """Independent LASSO in every task, lambda_m = c_lambda sqrt(ln(d) / n_m) (MOLAR paper, J.1).

    Objective per task::

        1/(2 n_k) ||y_k - b_k - X_k beta_k||^2 + lambda_k ||beta_k||_1     (b_k unpenalized)

    Notes
    -----
    Solved by scikit-learn's coordinate descent; no certificate (``heuristic``).
    ``result_.objective`` is the sum of the per-task mean squared errors / 2.

    Examples
    --------
    >>> from mtl_opt import PerTaskLasso
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=10, M=3, n=30, s=1, seed=0).data
    >>> print(PerTaskLasso().fit(data).result_.status)
    heuristic
    """

    method = "lasso"
    algorithm = "lasso"
    param_constraints = {"c_lambda": [Interval(0.0, None, open_low=True)], "fit_intercept": [BOOLEAN]}

    def __init__(self, *, c_lambda=C_LAMBDA_LASSO, fit_intercept=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.c_lambda = c_lambda
        self.fit_intercept = fit_intercept

    def _core(self, Xs, ys, fitted):
        return lasso_coefs(Xs, ys, c_lambda=self.c_lambda), None


class RobustMultitask(CenteredEstimator):
    """RM (Xu & Bastani): OLS, coordinate-wise trimmed mean, LASSO debiasing toward it.

    See ``mtl_opt.solvers.molar.lasso_debias`` for the trimming rule (an
    assumption) and the penalty.  Intercepts are per task and unpenalized.

    Attributes
    ----------
    global_coef_ : ndarray (p,)
        The trimmed-mean global estimate.

    Examples
    --------
    >>> from mtl_opt import RobustMultitask
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=10, M=4, n=40, s=1, seed=0).data
    >>> RobustMultitask().fit(data).coef_.shape
    (4, 10)
    """

    method = "rm"
    algorithm = "lasso_debias"
    identification = "collinear"
    param_constraints = {"c_lambda": [Interval(0.0, None, open_low=True)], **TRIMMING,
                         "fit_intercept": [BOOLEAN]}

    def __init__(self, *, c_lambda=C_LAMBDA_RM, zeta=0.1, eta=0.1, fit_intercept=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.c_lambda = c_lambda
        self.zeta = zeta
        self.eta = eta
        self.fit_intercept = fit_intercept

    def _core(self, Xs, ys, fitted):
        return rm_coefs(Xs, ys, c_lambda=self.c_lambda, zeta=self.zeta, eta=self.eta,
                        return_global=True, fitted=fitted)


class MedianLasso(CenteredEstimator):
    """ML (MOLAR paper, J.3.3): OLS, weighted median as in MOLAR, LASSO debiasing toward it.

    Attributes
    ----------
    global_coef_ : ndarray (p,)
        The weighted-median global estimate.

    Examples
    --------
    >>> from mtl_opt import MedianLasso
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=10, M=4, n=40, s=1, seed=0).data
    >>> MedianLasso().fit(data).coef_.shape
    (4, 10)
    """

    method = "ml"
    algorithm = "lasso_debias"
    identification = "collinear"
    param_constraints = {"c_lambda": [Interval(0.0, None, open_low=True)],
                         "sigma": [OneOf((None,)), Interval(0.0, None, open_low=True)],
                         "fit_intercept": [BOOLEAN]}

    def __init__(self, *, c_lambda=C_LAMBDA_RM, sigma=None, fit_intercept=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.c_lambda = c_lambda
        self.sigma = sigma
        self.fit_intercept = fit_intercept

    def _unidentified_mask(self, data: MultiTaskData) -> np.ndarray:
        return ~fitted_columns(data, self.fit_intercept, residual_dof=int(self.sigma is None))

    def _core(self, Xs, ys, fitted):
        return ml_coefs(Xs, ys, c_lambda=self.c_lambda, sigma=self.sigma, return_global=True,
                        fitted=fitted)
