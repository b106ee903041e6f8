"""Sample weights: a weighted data set as the unweighted twin every solver already solves.

For the estimators whose objective is a sum over tasks of a per-task squared loss normalized by
its count, ``1/(2 n_k) ||y_k - b_k - X_k beta_k||^2`` (with or without the intercept b_k), plus
terms that do not depend on the data (SparseMTL's F, the OLS baselines, ARMUL's squared loss,
MOLAR's per-task least squares),
sample weights w_i >= 0 mean
``1/(2 W_k) sum_i w_i (y_i - b_k - x_i beta_k)^2`` with W_k = sum_i w_i: integer weights are
row duplication.  Such an objective depends on task k's data only through its weighted mean m
and weighted second moments ``(1/W) sum_i w_i z_i z_i^T`` of the rows z_i = (x_i, y_i), centred
or not, and so does its standardization.  ``weighted_twin`` builds, per task, n + 1 unweighted
rows with exactly those moments (normalized by n + 1), so every solver path (bcd, bnb, outer
approximation, the MIQP, least squares) solves the weighted problem, certificate included,
without knowing of weights:

    u_i = sqrt(w_i) (z_i - m),  S = sum_i u_i,  r = sqrt(n + 1),  c = r / sqrt(W)
    t_i = m + c (u_i - S / (r (r - 1))),  i = 1..n;   t_{n+1} = m + c S / r.

The t sum to (n + 1) m, and their centred Gram is c^2 sum_i u_i u_i^T (the S S^T terms cancel:
-2/(r(r-1)) + n/(r(r-1))^2 + 1/r^2 = 0 with n = r^2 - 1), i.e. (n + 1)/W times the weighted
centred Gram; so the twin's mean, centred and uncentred moments over n + 1 equal the weighted
ones over W.  Rows of weight 0 are dropped first (duplication zero times).  What weighs tasks
by their size reads the twin's ``counts`` (the W_k), and pooled statistics its ``pooled()``
rows.  As with centring (``reductions``), the problem certified is the one on the twin's floats,
which equals the weighted problem to rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidDataError

if TYPE_CHECKING:
    from .core import MultiTaskData


def task_weights(sample_weight, rows: list[np.ndarray], n: int, data: MultiTaskData,
                 owner: str) -> list[np.ndarray]:
    """``sample_weight`` (n,) checked (finite, >= 0, a positive total in every task) and split
    into per-task arrays by ``rows``, the indices of each task's rows in the caller's order."""
    try:
        weights = np.asarray(sample_weight, dtype=float)
    except (TypeError, ValueError):
        raise InvalidDataError(
            f"{owner}: sample_weight must be numbers, one per row; got {type(sample_weight).__name__}.") from None
    if weights.ndim == 0:   # a scalar weighs every row alike (scikit-learn's convention)
        weights = np.full(n, float(weights))
    if weights.shape != (n,):
        raise InvalidDataError(
            f"{owner}: sample_weight must have one entry per row, shape ({n},); got shape "
            f"{weights.shape}.")
    bad = ~np.isfinite(weights) | (weights < 0)
    if bad.any():
        raise InvalidDataError(
            f"{owner}: sample_weight must be finite and >= 0; row {int(np.flatnonzero(bad)[0])} "
            f"holds {weights[bad][0]!r}.")
    split = [weights[r] for r in rows]
    empty = [name for name, w in zip(data.task_names, split) if not w.sum() > 0]
    if empty:
        raise InvalidDataError(
            f"{owner}: every task needs a positive total sample_weight; task(s) {empty[:5]} have "
            f"zero weight on every row (drop their rows instead).")
    return split


def twin_rows(Z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The n + 1 unweighted rows whose mean and second moments over n + 1 are the weighted ones
    of the rows of ``Z`` (n, q) under weights ``w`` > 0 (module docstring)."""
    n, total = len(w), w.sum()
    mean = (w @ Z) / total
    u = np.sqrt(w)[:, None] * (Z - mean)
    S = u.sum(axis=0)
    r = np.sqrt(n + 1.0)
    twin = mean + (r / np.sqrt(total)) * np.vstack([u - S / (r * (r - 1.0)), S / r])
    constant = np.ptp(Z, axis=0) == 0   # a constant column stays exactly constant
    twin[:, constant] = Z[0, constant]
    return twin


def weighted_twin(data: MultiTaskData, weights: list[np.ndarray]) -> MultiTaskData:
    """The unweighted data set whose count-normalized per-task moments equal the weighted ones of
    ``data`` under per-task ``weights`` (module docstring): n_k + 1 rows per task, less the rows
    of weight 0; its ``counts`` are the tasks' total weights."""
    twins = [twin_rows(np.column_stack([X[w > 0], y[w > 0]]), w[w > 0])
             for X, y, w in zip(data.Xs, data.ys, weights)]
    twin = type(data)._derived([t[:, :-1] for t in twins], [t[:, -1] for t in twins],
                               data.task_names, data.feature_names)
    twin._counts = np.array([w.sum() for w in weights])
    return twin
