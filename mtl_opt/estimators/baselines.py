"""Baselines: independent per-task OLS and pooled OLS, with exact least-squares certificates."""

from __future__ import annotations

import numpy as np

from ..data import MultiTaskData
from ..formulations.least_squares import check_design, ols, rounding_factor, with_intercept
from ..result import FitResult, certified_status
from ._ols import check_task_designs, per_task_ols, split_intercept
from .base import BOOLEAN, MTLEstimator

#: Least-squares certificates are exact up to rounding; this is the tolerance for "optimal".
LS_REL_GAP = 1e-9


class PerTaskOLS(MTLEstimator):
    """Independent ordinary least squares in every task (no sharing).

    Objective::

        sum_k 1/(2 n_k) ||y_k - b_k - X_k beta_k||^2

    Notes
    -----
    The lower bound is the proven least-squares bound of
    ``mtl_opt.formulations.least_squares.ols`` per task (tight at the optimum), so
    ``status`` is ``optimal`` whenever the linear algebra is accurate.
    """

    method = "ols"
    param_constraints = {"fit_intercept": [BOOLEAN]}

    def __init__(self, *, fit_intercept: bool = True):
        self.fit_intercept = fit_intercept

    def _check_fit(self, data: MultiTaskData) -> None:
        check_task_designs(data, self.fit_intercept)

    def _fit(self, data: MultiTaskData) -> FitResult:
        fits = per_task_ols(data, self.fit_intercept)
        coef, intercept = split_intercept(np.array([f.coef for f in fits]), self.fit_intercept)
        return _least_squares_result(
            self.method, data, coef, intercept, sum(f.objective for f in fits),
            sum(f.lower_bound for f in fits) * (1 - rounding_factor(len(fits))),
            "sum of per-task mean squared errors / 2")


class PooledOLS(MTLEstimator):
    """One least-squares fit on all tasks' data stacked: the same coefficients for every task.

    Objective::

        1/(2 n_total) sum_k ||y_k - b - X_k beta||^2
    """

    method = "pooled_ols"
    param_constraints = {"fit_intercept": [BOOLEAN]}

    def __init__(self, *, fit_intercept: bool = True):
        self.fit_intercept = fit_intercept

    def _check_fit(self, data: MultiTaskData) -> None:
        check_design(self._design(data), name="pooled data")

    def _design(self, data: MultiTaskData) -> np.ndarray:
        X = np.vstack(data.Xs)
        return with_intercept(X) if self.fit_intercept else X

    def _fit(self, data: MultiTaskData) -> FitResult:
        fit = ols(self._design(data), np.concatenate(data.ys), name="pooled data")
        coef, intercept = split_intercept(np.tile(fit.coef, (data.n_tasks, 1)), self.fit_intercept)
        return _least_squares_result(self.method, data, coef, intercept, fit.objective,
                                     fit.lower_bound, "pooled mean squared error / 2")


def _least_squares_result(method, data, coef, intercept, objective, lower, objective_name):
    return FitResult(
        method=method, coef=coef, intercept=intercept, objective=objective, lower_bound=lower,
        status=certified_status(objective, lower, LS_REL_GAP), objective_name=objective_name,
        bound_source="least-squares distance bound, safe in float64", solver="numpy/scipy",
        solver_version=np.__version__, task_names=list(data.task_names),
        feature_names=list(data.feature_names))
