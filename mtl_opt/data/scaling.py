"""Standardization of a MultiTaskData, and the Scaler that undoes it.

``standardize`` is the one preprocessing path of every estimator: it centres (features and y)
and scales (features) per task or pooled over all rows, and returns the transformed data with
the ``Scaler`` that maps coefficients fitted on them back to the original scale, which is where
mtl_opt reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from ..identifiability import spread_is_constant
from ..reductions import Standardization, centre, centring

if TYPE_CHECKING:
    from .core import MultiTaskData


def standardize(data: MultiTaskData, how="task", center=True,
                scale=True) -> tuple[MultiTaskData, Scaler]:
    """``MultiTaskData.standardize``: the transformed data and the ``Scaler`` that undoes it."""
    scaler = fit_scaler(data, how, center, scale)
    return scaler.transform(data), scaler


def fit_scaler(data: MultiTaskData, how="task", center=True, scale=True) -> Scaler:
    """The ``Scaler`` of ``standardize`` alone, for a fit that applies it to the designs only
    (``Scaler.transform_designs``).

    A feature constant in a task ("task") or overall ("pooled") is left unscaled; when its
    values are all equal, centring makes it exactly 0 (not rounding noise a fit could pick up).
    The data are centred here, once (``reductions.centring``): no later step centres them again.
    """
    if how not in ("task", "pooled"):
        raise InvalidParameterError(f"how must be 'task' or 'pooled'; got {how!r}.")
    for flag, value in (("center", center), ("scale", scale)):
        if not isinstance(value, (bool, np.bool_)):
            raise InvalidParameterError(f"{flag} must be True or False; got {value!r}.")
    if how == "task":
        groups = list(zip(data.Xs, data.ys))
    else:
        groups = [data.pooled()]
    x_mean, x_shift, x_scale, y_mean, y_shift, constant = [], [], [], [], [], []
    for X, y in groups:
        (mean, shift), std = centring(X), X.std(axis=0)   # a constant column centres to exactly 0
        flat = spread_is_constant(std, mean)   # ``constant_columns``, from the figures at hand
        std[flat] = 1.0                        # left unscaled, as StandardScaler does
        x_mean.append(mean if center else np.zeros_like(mean))
        x_shift.append(shift if center else np.zeros_like(shift))
        x_scale.append(std if scale else np.ones_like(std))
        constant.append(flat)
        level, correction = centring(y) if center else (0.0, 0.0)
        y_mean.append(level)
        y_shift.append(correction)
    repeat = 1 if how == "task" else data.n_tasks
    return Scaler(
        how=how,
        task_names=tuple(data.task_names),
        feature_names=tuple(data.feature_names),
        x_mean=np.repeat(np.array(x_mean), repeat, axis=0),
        x_scale=np.repeat(np.array(x_scale), repeat, axis=0),
        y_mean=np.repeat(np.array(y_mean), repeat),
        x_shift=np.repeat(np.array(x_shift), repeat, axis=0),
        y_shift=np.repeat(np.array(y_shift), repeat),
        constant=np.repeat(np.array(constant), repeat, axis=0),
    )


@dataclass(frozen=True, eq=False)
class Scaler:
    """The affine map applied by :meth:`MultiTaskData.standardize`, and its inverse.

    For task k: ``X' = (X - x_mean[k] - x_shift[k]) / x_scale[k]`` and
    ``y' = y - y_mean[k] - y_shift[k]``: the mean held in two terms and subtracted in that order
    (``reductions.centring``), so the data centre to within rounding of their spread at any level.
    With ``how="pooled"`` all rows of the arrays are equal. Tasks are matched
    by name, so the scaler fitted on a training split also applies to its
    test split.

    Attributes
    ----------
    how : {"task", "pooled"}
    task_names, feature_names : tuple of str
        The tasks (row order of the arrays) and features it was fitted on.
    x_mean : ndarray of shape (K, p)
        Zero where ``center=False``.
    x_scale : ndarray of shape (K, p)
        Population standard deviations; one where ``scale=False``.
    y_mean : ndarray of shape (K,)
        Zero where ``center=False``.
    x_shift, y_shift : ndarrays of shapes (K, p) and (K,)
        The second pass's corrections of the means (zero by default).
    constant : bool ndarray of shape (K, p)
        The features constant in the task ("task") or overall ("pooled"), left unscaled
        (``identifiability.constant_columns``; all False by default).
    """

    how: str
    task_names: tuple[str, ...]
    feature_names: tuple[str, ...]
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray
    x_shift: np.ndarray | None = None
    y_shift: np.ndarray | None = None
    constant: np.ndarray | None = None

    def __post_init__(self):
        for field, like in (("x_shift", "x_mean"), ("y_shift", "y_mean"), ("constant", "x_mean")):
            if getattr(self, field) is None:
                object.__setattr__(self, field, np.zeros(np.shape(getattr(self, like))))
        for field, dtype in (("x_mean", float), ("x_scale", float), ("y_mean", float),
                             ("x_shift", float), ("y_shift", float), ("constant", bool)):
            value = np.array(getattr(self, field), dtype=dtype)
            value.flags.writeable = False
            object.__setattr__(self, field, value)

    def _rows(self, data: MultiTaskData) -> list[int]:
        """Row of the scaler's arrays for each task of ``data``, checking names."""
        if data.feature_names != list(self.feature_names):
            raise InvalidDataError(
                f"the data has features {data.feature_names} but the scaler was fitted on "
                f"{list(self.feature_names)}; transform data with the same features."
            )
        unknown = [t for t in data.task_names if t not in self.task_names]
        if unknown:
            raise InvalidDataError(
                f"task(s) {unknown} were not seen when the scaler was fitted; "
                f"known tasks: {list(self.task_names)}."
            )
        return [self.task_names.index(t) for t in data.task_names]

    def _apply(self, data: MultiTaskData, inverse: bool) -> MultiTaskData:
        """Apply the map (or its inverse) task by task; the result is not validated again
        (``MultiTaskData._derived``)."""
        rows = self._rows(data)
        if inverse:
            Xs = [X * self.x_scale[k] + self.x_shift[k] + self.x_mean[k]
                  for k, X in zip(rows, data.Xs)]
            ys = [y + self.y_shift[k] + self.y_mean[k] for k, y in zip(rows, data.ys)]
        else:
            Xs = self.transform_designs(data)
            ys = [centre(y, self.y_mean[k], self.y_shift[k]) for k, y in zip(rows, data.ys)]
        derived = type(data)._derived(Xs, ys, data.task_names, data.feature_names)
        derived._counts = data._counts   # a map of each task's rows: the same observations
        return derived

    def transform_designs(self, data: MultiTaskData) -> list[np.ndarray]:
        """The standardized designs X' of ``transform``, alone: no responses and no new data set
        (nor its check for non-finite values, which a fit of valid data with the scaler
        fitted on them does not need: every scale is positive and finite)."""
        return [centre(X, self.x_mean[k], self.x_shift[k]) / self.x_scale[k]
                for k, X in zip(self._rows(data), data.Xs)]

    def transform(self, data: MultiTaskData) -> MultiTaskData:
        """Standardize ``data`` (whose tasks must be among the fitted ones)."""
        return self._apply(data, inverse=False)

    def inverse_transform(self, data: MultiTaskData) -> MultiTaskData:
        """Map standardized data back to the original scale."""
        return self._apply(data, inverse=True)

    def coef_to_original(self, coef_std, intercept_std) -> tuple[np.ndarray, np.ndarray]:
        """Map coefficients fitted on standardized data back to the original scale.

        A fit ``y' = b' + X' c'`` on the standardized scale equals
        ``y = b + X c`` with::

            c_kj = c'_kj / x_scale_kj
            b_k  = y_mean_k + b'_k - sum_j c_kj * x_mean_kj   (means with their shifts)

        Parameters
        ----------
        coef_std : array-like of shape (K, p)
        intercept_std : array-like of shape (K,)
            Rows in the scaler's task order.

        Returns
        -------
        coef : ndarray of shape (K, p)
        intercept : ndarray of shape (K,)
        """
        coef_std = np.asarray(coef_std, dtype=float)
        intercept_std = np.asarray(intercept_std, dtype=float)
        if coef_std.shape != self.x_mean.shape or intercept_std.shape != self.y_mean.shape:
            raise InvalidParameterError(
                f"expected coef_std of shape {self.x_mean.shape} and intercept_std of shape "
                f"{self.y_mean.shape} (tasks x features); got {coef_std.shape} and "
                f"{intercept_std.shape}."
            )
        return self.reduction.coefficients(coef_std, intercept_std)

    @property
    def reduction(self) -> Standardization:
        """This scaler as a ``reductions.Standardization`` (levels: means with their shifts)."""
        return Standardization(self.x_mean + self.x_shift, self.x_scale, self.y_mean + self.y_shift)
