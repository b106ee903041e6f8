"""Per-task least squares shared by MOLAR, its baselines and the OLS baseline."""

from __future__ import annotations

import numpy as np

from ..data import MultiTaskData
from ..formulations.least_squares import OLSFit, check_design, ols, with_intercept


def task_designs(data: MultiTaskData, fit_intercept: bool) -> list[tuple[str, np.ndarray]]:
    """(name, design) per task, intercept column first when ``fit_intercept``."""
    return [(f"task {name!r}", with_intercept(X) if fit_intercept else X)
            for name, X in zip(data.task_names, data.Xs)]


def check_task_designs(data: MultiTaskData, fit_intercept: bool) -> None:
    """Refuse, before any fit, a task whose design per-task least squares cannot fit."""
    for name, A in task_designs(data, fit_intercept):
        check_design(A, name=name)


def per_task_ols(data: MultiTaskData, fit_intercept: bool) -> list[OLSFit]:
    """One OLS fit per task (intercept first when ``fit_intercept``)."""
    return [ols(A, y, name=name) for (name, A), y in zip(task_designs(data, fit_intercept), data.ys)]


def split_intercept(stacked: np.ndarray, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    """(K, d) coefficients with the intercept in column 0 -> (coef (K, p), intercept (K,))."""
    if fit_intercept:
        return stacked[:, 1:], stacked[:, 0]
    return stacked, np.zeros(stacked.shape[0])


def centered(data: MultiTaskData) -> tuple[list, list, list, list]:
    """Per-task centered designs and responses, with the means to recover intercepts.

    Fitting slopes on centered data and setting b_k = mean(y_k) - mean(X_k) beta_k
    is the same as an unpenalized intercept in every task.
    """
    x_means = [X.mean(axis=0) for X in data.Xs]
    y_means = [float(y.mean()) for y in data.ys]
    Xs = [X - m for X, m in zip(data.Xs, x_means)]
    ys = [y - m for y, m in zip(data.ys, y_means)]
    return Xs, ys, x_means, y_means
