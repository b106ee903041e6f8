"""Per-task least squares shared by MOLAR and the OLS baseline."""

from __future__ import annotations

import numpy as np

from ..data import MultiTaskData
from ..formulations.least_squares import OLSFit, ols, with_intercept


def per_task_ols(data: MultiTaskData, fit_intercept: bool) -> list[OLSFit]:
    """One OLS fit per task (intercept first when ``fit_intercept``)."""
    fits = []
    for name, X, y in zip(data.task_names, data.Xs, data.ys):
        A = with_intercept(X) if fit_intercept else X
        fits.append(ols(A, y, name=f"task {name!r}"))
    return fits


def split_intercept(stacked: np.ndarray, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    """(K, d) coefficients with the intercept in column 0 -> (coef (K, p), intercept (K,))."""
    if fit_intercept:
        return stacked[:, 1:], stacked[:, 0]
    return stacked, np.zeros(stacked.shape[0])
