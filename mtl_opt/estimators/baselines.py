"""Baselines: independent per-task OLS and pooled OLS, with exact least-squares certificates."""

from __future__ import annotations

import numpy as np

from ..data import MultiTaskData
from ..formulations.least_squares import build_least_squares_model, ols, with_intercept
from ..rounding import rounding_factor
from ..identifiability import identified_columns
from ..reductions import ObjectiveScale, Standardization
from ..result import FitResult
from ..solvers.least_squares import fitted_columns, per_task_ols, split_intercept, stacked_mask, unfitted_warnings
from ..solvers.method import NO_BOUND, SolverRun
from ..solvers.user_model import ModelSpec, indexed_values
from .base import BOOLEAN, MTLEstimator, SampleWeighted

#: Least-squares certificates are exact up to rounding; this is the tolerance for "optimal".
LS_REL_GAP = 1e-9


class PerTaskOLS(SampleWeighted, MTLEstimator):
    """Independent ordinary least squares in every task (no sharing).

    Objective::

        sum_k 1/(2 n_k) ||y_k - b_k - X_k beta_k||^2

    Each task is fitted on the columns it identifies (``identifiability.identified_columns``);
    a coefficient it cannot identify (a column constant or collinear with earlier ones in the
    task, or beyond n_k - 1 features) is 0, and ``result_.unidentified`` lists it.  A task with
    n_k <= p is fitted exactly on its first identified columns.

    Notes
    -----
    The lower bound is the proven least-squares bound of
    ``mtl_opt.formulations.least_squares.ols`` per task over the columns fitted
    (tight at the optimum), so ``status`` is ``optimal`` whenever the linear
    algebra is accurate.

    Examples
    --------
    >>> from mtl_opt import PerTaskOLS
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=4, M=3, n=30, s=1, seed=0).data
    >>> print(PerTaskOLS().fit(data).result_.status)
    optimal
    """

    method = "ols"
    identification = "collinear"
    param_constraints = {"fit_intercept": [BOOLEAN]}

    def __init__(self, *, fit_intercept: bool = True, task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.fit_intercept = fit_intercept

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        return _least_squares_spec(self, data, fitted_columns(data, self.fit_intercept),
                                   1.0 / data.n_samples, pooled=False)

    def _fit(self, data: MultiTaskData) -> FitResult:
        fits = per_task_ols(data, self.fit_intercept)
        coef, intercept = split_intercept(fits.coef, self.fit_intercept)
        return _least_squares_result(
            self, data, coef, intercept, sum(f.objective for f in fits.fits),
            sum(f.lower_bound for f in fits.fits) * (1 - rounding_factor(len(fits.fits))),
            "sum of per-task mean squared errors / 2")


class PooledOLS(SampleWeighted, MTLEstimator):
    """One least-squares fit on all tasks' data stacked: the same coefficients for every task.

    Objective::

        1/(2 n_total) sum_k ||y_k - b - X_k beta||^2

    A feature constant or collinear with earlier ones in the pooled data has coefficient 0
    (a warning names it, ``result_.unidentified`` lists it for every task); the certificate
    is over the columns fitted.

    Examples
    --------
    >>> from mtl_opt import PooledOLS
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=4, M=3, n=30, s=1, seed=0).data
    >>> print(PooledOLS().fit(data).result_.status)
    optimal
    """

    method = "pooled_ols"
    identification = None
    param_constraints = {"fit_intercept": [BOOLEAN]}

    def __init__(self, *, fit_intercept: bool = True, task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.fit_intercept = fit_intercept

    def _fitted(self, data: MultiTaskData) -> np.ndarray:
        """(p,) bool: the features identified in the pooled data."""
        return identified_columns(data.pooled()[0], self.fit_intercept)

    def _unidentified_mask(self, data: MultiTaskData) -> np.ndarray:
        return np.tile(~self._fitted(data), (data.n_tasks, 1))

    def _has_global_model(self) -> bool:
        return True

    def _global_model(self):
        return self.coef_[0], float(self.intercept_[0])   # every task's model is the pooled one

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        return _least_squares_spec(self, data, np.tile(self._fitted(data), (data.n_tasks, 1)),
                                   np.full(data.n_tasks, 1.0 / data.n_total), pooled=True)

    def _fit(self, data: MultiTaskData) -> FitResult:
        fitted = self._fitted(data)
        X, y = data.pooled()
        fit = ols(with_intercept(X[:, fitted]) if self.fit_intercept else X[:, fitted], y,
                  name="pooled data")
        stacked = np.zeros(data.n_features + self.fit_intercept)
        stacked[stacked_mask(fitted[None, :], self.fit_intercept)[0]] = fit.coef
        coef, intercept = split_intercept(np.tile(stacked, (data.n_tasks, 1)), self.fit_intercept)
        return _least_squares_result(
            self, data, coef, intercept, fit.objective, fit.lower_bound,
            "pooled mean squared error / 2",
            warnings=unfitted_warnings(~fitted, data.feature_names, "in the pooled data"))


def _least_squares_result(estimator, data, coef, intercept, objective, lower, objective_name,
                          warnings=()):
    source = "least-squares distance bound, safe in float64" if lower is not None else f"{NO_BOUND}: none given"
    run = SolverRun(coef, objective, lower, native={"bound": source, "solver": "numpy/scipy",
                                                    "solver_version": np.__version__})
    return estimator._result_of(data, run, coef=coef, intercept=intercept, rel_gap=LS_REL_GAP,
                                objective_name=objective_name, algorithm="ols", backend=None,
                                warnings=warnings)


def _least_squares_spec(estimator, data, fitted, weights, pooled) -> ModelSpec:
    """The least-squares QP of ``estimator`` on ``data`` (``build_least_squares_model``) with y
    divided by y_scale, the power of 2 that puts the objective at the estimator's own fit near 1."""
    inverse = ObjectiveScale.near(estimator._fit(data).objective).inverse
    root = inverse.scale
    levels = (np.full(data.n_tasks, np.concatenate(data.ys).mean()) if pooled
              else np.array([y.mean() for y in data.ys])) if estimator.fit_intercept \
        else np.zeros(data.n_tasks)
    model = build_least_squares_model(data.Xs, [(y - c) / root for y, c in zip(data.ys, levels)],
                                      weights, fitted, estimator.fit_intercept, pooled)
    K, p = data.n_tasks, data.n_features

    def decode(solved):   # the levels come back through the intercepts
        return Standardization(y_level=levels).coefficients(
            inverse.estimate(indexed_values(solved, "beta", K, p)),
            inverse.estimate(indexed_values(solved, "intercept", K)))

    def objective(estimate):
        coef, intercept = estimate
        return float(sum(w / 2 * np.sum((y - b - X @ c) ** 2)
                         for w, X, y, c, b in zip(weights, data.Xs, data.ys, coef, intercept)))

    def finish(run, options):
        return _least_squares_result(estimator, data, *run.estimate, run.objective,
                                     run.lower_bound, "")

    return ModelSpec(model, "highs", "qp", *estimator._spec_key(data), decode=decode,
                     objective=objective, finish=finish, inverse=inverse,
                     notes=f"tasks 0..{K - 1}: {', '.join(map(str, data.task_names))}; features "
                           f"0..{p - 1}: {', '.join(map(str, data.feature_names))}.  "
                           f"y_scale = {root:g} (a power of 2: the objective at the unconstrained fit is "
                           f"near 1, "
                           f"solver tolerances are absolute); y_level = {levels.tolist()} (the "
                           f"mean of y{' over all tasks' if pooled else ' per task'}, or 0 without "
                           f"an intercept).")
