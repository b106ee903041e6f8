"""Train/test and K-fold splits of a MultiTaskData, stratified by task.

Every split cuts each task's rows separately, so every task appears on both sides.  The
``MultiTaskData`` methods ``train_test_split``, ``kfold_indices`` and ``kfold`` call these.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    from .core import MultiTaskData


def take(data: MultiTaskData, rows: Sequence[np.ndarray]) -> MultiTaskData:
    """Return a new data set keeping, for each task k, the rows ``rows[k]``."""
    return type(data)(
        [X[r] for X, r in zip(data.Xs, rows)],
        [y[r] for y, r in zip(data.ys, rows)],
        data.task_names,
        data.feature_names,
    )


def split(data: MultiTaskData,
          test_rows: Sequence[np.ndarray]) -> tuple[MultiTaskData, MultiTaskData]:
    """Return ``(train, test)`` where test keeps ``test_rows[k]`` of task k, train the rest."""
    train_rows = [np.setdiff1d(np.arange(n), r) for n, r in zip(data.n_samples, test_rows)]
    return take(data, train_rows), take(data, test_rows)


def _require_rows(data: MultiTaskData, minimum: int, why: str, hint: str = "") -> None:
    """Raise if some task has fewer than ``minimum`` rows; ``hint`` extends the way out."""
    small = [f"'{t}' ({n} rows)" for t, n in zip(data.task_names, data.n_samples)
             if n < minimum]
    if small:
        raise InvalidDataError(
            f"{why} needs at least {minimum} rows in every task; got task(s) "
            f"{', '.join(small)}. Drop those tasks with subset_tasks{hint}."
        )


def train_test_split(data: MultiTaskData, test_size=0.25,
                     seed=None) -> tuple[MultiTaskData, MultiTaskData]:
    """``MultiTaskData.train_test_split``: ``ceil(test_size * n_k)`` test rows per task."""
    if (isinstance(test_size, bool) or not isinstance(test_size, numbers.Real)
            or not 0.0 < test_size < 1.0):
        raise InvalidParameterError(f"test_size must be a float in (0, 1); got {test_size!r}.")
    _require_rows(data, 2, "train_test_split")
    rng = np.random.default_rng(seed)
    test_rows = []
    for n in data.n_samples:
        n_test = min(max(math.ceil(test_size * n), 1), n - 1)
        test_rows.append(np.sort(rng.permutation(n)[:n_test]))
    return split(data, test_rows)


def kfold_indices(data: MultiTaskData, n_splits=5, seed=None) -> list[list[np.ndarray]]:
    """``MultiTaskData.kfold_indices``: ``folds[f][k]``, the sorted test rows of task k in fold f."""
    if (isinstance(n_splits, bool) or not isinstance(n_splits, numbers.Integral)
            or n_splits < 2):
        raise InvalidParameterError(f"n_splits must be an int >= 2; got {n_splits!r}.")
    _require_rows(data, int(n_splits), f"kfold with n_splits={n_splits}", " or lower n_splits")
    rng = np.random.default_rng(seed)
    per_task = [np.array_split(rng.permutation(n), n_splits) for n in data.n_samples]
    return [[np.sort(folds[f]) for folds in per_task] for f in range(n_splits)]


def kfold(data: MultiTaskData, n_splits=5,
          seed=None) -> Iterator[tuple[MultiTaskData, MultiTaskData]]:
    """``MultiTaskData.kfold``: ``(train, test)`` per fold; arguments checked when called."""
    folds = kfold_indices(data, n_splits, seed)
    return (split(data, test_rows) for test_rows in folds)
