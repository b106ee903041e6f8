"""Per-task least squares shared by MOLAR, its baselines and the OLS baseline."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from .. import interrupts
from ..data import MultiTaskData
from ..deadline import DeadlineReached
from ..errors import InvalidDataError
from ..formulations.least_squares import OLSFit, ols, with_intercept


def fitted_columns(data: MultiTaskData, fit_intercept: bool, residual_dof: int = 0) -> np.ndarray:
    """(K, p) bool: the features per-task least squares fits in each task (the one rule).

    ``identifiability.identified_columns`` (kept by the data: ``MultiTaskData.unidentified``; a
    MOLAR fit asks in its check, its fit and its result), then, while a task would keep fewer
    than ``residual_dof`` residual degrees of freedom (n_k - intercept - features; with
    ``residual_dof``, n_k is its ``MultiTaskData.counts``: the whole weight of weighted data
    rounded down, as duplicated rows would count), its last kept features in column order are
    dropped: they count as not identified in that task (MOLAR asks for 1 when it estimates
    sigma_k).  Refuses a task left with no feature.
    """
    mask = ~data.unidentified(fit_intercept, collinear=True)
    # the noise level's degrees of freedom count observations (weights); identification, rows
    sizes = np.floor(data.counts + 1e-9).astype(int) if residual_dof else data.n_samples
    for row, size in zip(mask, sizes):
        row[np.flatnonzero(row)[max(size - fit_intercept - residual_dof, 0):]] = False
    empty = [name for name, row in zip(data.task_names, mask) if not row.any()]
    if empty:
        raise InvalidDataError(
            f"tasks {empty}: least squares can fit no feature in them: "
            + (f"{residual_dof} residual degree(s) of freedom for the noise level leave no room "
               f"after the intercept and one feature (each task needs n_k >= "
               f"{fit_intercept + residual_dof + 1} rows). Pass sigma= (the known noise level), "
               f"use MOLARHighDim (per-task LASSO, any n_k), or drop these tasks."
               if residual_dof else "no feature varies within them. Drop these tasks."))
    return mask


def stacked_mask(features: np.ndarray, fit_intercept: bool) -> np.ndarray:
    """A (K, p) per-feature array -> (K, d) on the stacked scale (the intercept column first, True)."""
    if not fit_intercept:
        return features
    return np.column_stack([np.ones(features.shape[0], dtype=features.dtype), features])


def unfitted_warnings(unfitted: np.ndarray, feature_names, where: str) -> list[str]:
    """The warning for features (a (p,) mask) least squares fits nowhere, whose coefficients are 0."""
    names = [str(feature_names[j]) for j in np.flatnonzero(unfitted)]
    if not names:
        return []
    return [f"features {names} are constant or collinear with earlier features {where}: their "
            f"coefficients are set to 0 and their effect is left to the intercept(s) and earlier "
            f"features. Drop them to silence this."]


class TaskFits(NamedTuple):
    """Per-task fits on each task's own columns, in the stacked coordinates (intercept first).

    ``coef`` is 0 and ``gram_inv_diag`` NaN where a task does not use a column; ``fits`` holds
    each task's fit on its used columns (an ``OLSFit``, or anything with ``coef`` and
    ``gram_inv_diag``).
    """

    designs: list              # (n_k, d) stacked design of every task, all columns
    used: np.ndarray           # (K, d) bool
    fits: list

    @property
    def coef(self) -> np.ndarray:
        return self._embed([f.coef for f in self.fits], 0.0)

    @property
    def gram_inv_diag(self) -> np.ndarray:
        return self._embed([f.gram_inv_diag for f in self.fits], np.nan)

    @property
    def dims(self) -> np.ndarray:
        """(K,) how many coefficients each task fits (its own d_k)."""
        return self.used.sum(axis=1)

    def _embed(self, rows, fill) -> np.ndarray:
        out = np.full(self.used.shape, fill)
        for row, used, values in zip(out, self.used, rows):
            row[used] = values
        return out

    def offset_correction(self, fill: np.ndarray) -> np.ndarray:
        """(K, d): the change of each task's used coefficients when its unused ones are ``fill``.

        Least squares of y_k - A_N fill_N on A_S (the filled part as an offset) moves the used
        coefficients by -(A_S^T A_S)^{-1} A_S^T A_N fill_N; the task's fitted values then stay
        as close as least squares allows, and exactly unchanged when the unused columns lie in
        the span of the used ones (constant or collinear columns).  0 where not used.
        """
        out = np.zeros(self.used.shape)
        for row, used, A in zip(out, self.used, self.designs):
            if not used.all():
                offset = A[:, ~used] @ fill[~used]
                row[used] = -np.linalg.lstsq(A[:, used], offset, rcond=None)[0]
        return out


def task_designs(data: MultiTaskData, fit_intercept: bool) -> list[np.ndarray]:
    """The stacked design per task, intercept column first when ``fit_intercept``."""
    return [with_intercept(X) if fit_intercept else X for X in data.Xs]


def per_task_ols(data: MultiTaskData, fit_intercept: bool, residual_dof: int = 0,
                 fitted: np.ndarray | None = None) -> TaskFits:
    """One OLS fit per task on its ``fitted_columns`` (and the intercept when ``fit_intercept``).

    ``fitted`` (K, p) overrides the rule, for callers that applied it to the uncentred data.  On
    the twin of weighted data (``mtl_opt.data.weights``: its moments over its rows are the
    weighted ones over the weights' total W_k), ``rss`` and ``gram_inv_diag`` are mapped to the
    weighted sample's (times and over W_k / rows), what duplicated rows would give.  A stop asked
    (``interrupts``) ends it between tasks (DeadlineReached): 100 tasks of 5,000 x 200 ran on
    5-8 s after Ctrl-C."""
    designs = task_designs(data, fit_intercept)
    if fitted is None:
        fitted = fitted_columns(data, fit_intercept, residual_dof)
    used = stacked_mask(fitted, fit_intercept)
    fits: list[OLSFit] = []
    for name, A, u, y in zip(data.task_names, designs, used, data.ys):
        if interrupts.requested():   # a stop (Ctrl-C): no estimate comes without every task's fit
            raise DeadlineReached
        fits.append(ols(A[:, u], y, name=f"task {name!r}"))
    if data.weighted:
        fits = [replace(f, rss=f.rss * r, gram_inv_diag=f.gram_inv_diag / r)
                for f, r in zip(fits, data.counts / data.n_samples)]
    return TaskFits(designs, used, fits)


def split_intercept(stacked: np.ndarray, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    """(K, d) coefficients with the intercept in column 0 -> (coef (K, p), intercept (K,))."""
    if fit_intercept:
        return stacked[:, 1:], stacked[:, 0]
    return stacked, np.zeros(stacked.shape[0])
