"""Evaluation metrics of the sparse multi-task experiments (Behdin et al., arXiv 2212.08697).

Prediction is scored per task and then averaged, so a task with many rows
does not dominate; coefficient metrics compare a ``(K, p)`` estimate with the
``(K, p)`` truth. A coefficient counts as selected ("in the support") when
its absolute value is larger than ``tol`` (default 0: exactly nonzero).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from .errors import InvalidDataError

__all__ = ["coef_rmse", "support_f1", "support_heterogeneity", "task_rmse"]


def _as_vector(values, what: str) -> np.ndarray:
    """A non-empty, finite 1-D float array, or a readable error."""
    a = np.asarray(values, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise InvalidDataError(f"{what} must be a non-empty 1-D array; got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise InvalidDataError(f"{what} has non-finite values (NaN or inf).")
    return a


def _as_coef(coef, what: str) -> np.ndarray:
    """A finite ``(K, p)`` float array, or a readable error."""
    a = np.asarray(coef, dtype=float)
    if a.ndim != 2 or a.size == 0:
        hint = " Use coef.reshape(1, -1) for a single task." if a.ndim == 1 else ""
        raise InvalidDataError(
            f"{what} must be a non-empty 2-D array of shape (K tasks, p features); "
            f"got shape {a.shape}.{hint}")
    if not np.all(np.isfinite(a)):
        raise InvalidDataError(f"{what} has non-finite values (NaN or inf).")
    return a


def _coef_pair(coef, true_coef) -> tuple[np.ndarray, np.ndarray]:
    """Validate an estimate and the truth, which must have the same (K, p) shape."""
    coef, true_coef = _as_coef(coef, "coef"), _as_coef(true_coef, "true_coef")
    if coef.shape != true_coef.shape:
        raise InvalidDataError(
            f"coef has shape {coef.shape} but true_coef has shape {true_coef.shape}; "
            "both must be (K tasks, p features).")
    return coef, true_coef


def _support(coef: np.ndarray, tol: float) -> np.ndarray:
    """Boolean (K, p) pattern of the selected coefficients, |coef| > tol."""
    return np.abs(coef) > tol


def task_rmse(y_true_list, y_pred_list) -> float:
    """Root mean squared prediction error of each task, averaged over tasks.

    ::

        (1/K) sum_k sqrt( (1/n_k) sum_i (y_ki - yhat_ki)^2 )

    Parameters
    ----------
    y_true_list, y_pred_list : list of array-like, each of shape (n_k,)
        Observed and predicted responses, one array per task, in the same order.

    Returns
    -------
    float
    """
    y_true_list, y_pred_list = list(y_true_list), list(y_pred_list)
    if not y_true_list or len(y_true_list) != len(y_pred_list):
        raise InvalidDataError(
            f"task_rmse needs one prediction array per task; got {len(y_true_list)} response "
            f"arrays and {len(y_pred_list)} prediction arrays.")
    rmses = []
    for k, (y, yhat) in enumerate(zip(y_true_list, y_pred_list)):
        y = _as_vector(y, f"task {k}: y_true")
        yhat = _as_vector(yhat, f"task {k}: y_pred")
        if y.shape != yhat.shape:
            raise InvalidDataError(
                f"task {k}: y_true has {y.size} entries but y_pred has {yhat.size}.")
        rmses.append(np.sqrt(np.mean((y - yhat) ** 2)))
    return float(np.mean(rmses))


def coef_rmse(coef, true_coef) -> float:
    """Root mean squared coefficient error over all K * p entries.

    Parameters
    ----------
    coef, true_coef : array-like of shape (K, p)

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt.metrics import coef_rmse
    >>> round(coef_rmse(np.array([[1.0, 0.0]]), np.array([[1.0, 2.0]])), 6)
    1.414214
    """
    coef, true_coef = _coef_pair(coef, true_coef)
    return float(np.sqrt(np.mean((coef - true_coef) ** 2)))


def support_f1(coef, true_coef, *, tol: float = 0.0) -> float:
    """F1 score of the selected coefficients against the true support, pooled over tasks.

    Every (task, feature) pair is one binary decision. With TP the pairs
    selected in both, ``F1 = 2 TP / (|selected| + |true support|)``, the
    harmonic mean of precision and recall.

    Parameters
    ----------
    coef, true_coef : array-like of shape (K, p)
    tol : float, default=0.0
        A coefficient is selected when its absolute value exceeds ``tol``
        (applied to ``coef`` only; the truth uses exact nonzeros).

    Returns
    -------
    float in [0, 1]
        1.0 when both supports are empty (0/0: nothing to find and nothing
        wrongly selected is a perfect recovery); 0.0 when exactly one is empty.

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt.metrics import support_f1
    >>> support_f1(np.array([[1.0, 0.0, 2.0]]), np.array([[1.0, 3.0, 0.0]]))
    0.5
    """
    coef, true_coef = _coef_pair(coef, true_coef)
    selected, true = _support(coef, tol), _support(true_coef, 0.0)
    denominator = selected.sum() + true.sum()
    if denominator == 0:
        return 1.0
    return float(2 * np.sum(selected & true) / denominator)


def support_heterogeneity(coef, *, tol: float = 0.0) -> float:
    """Mean pairwise Jaccard distance between the tasks' supports.

    ::

        (2 / (K (K-1))) sum_{k < l} (|S_k union S_l| - |S_k inter S_l|) / |S_k union S_l|

    with ``S_k = {j : |coef_kj| > tol}``; a pair of empty supports has distance 0.

    0 means every task selects the same features, 1 that no two tasks share
    one. Unlike a Hamming distance divided by p, it does not shrink towards 0
    as p grows with the support sizes fixed (for p = 250 and s = 10, two
    disjoint supports would score only 0.08); unlike one union/intersection
    ratio over all K tasks, a single odd task moves it by about 2/K, not to 1.

    Parameters
    ----------
    coef : array-like of shape (K, p)
    tol : float, default=0.0

    Returns
    -------
    float in [0, 1]
        0.0 when K = 1 (no pairs).
    """
    supports = _support(_as_coef(coef, "coef"), tol)
    distances = [_jaccard_distance(a, b) for a, b in combinations(supports, 2)]
    return float(np.mean(distances)) if distances else 0.0


def _jaccard_distance(a: np.ndarray, b: np.ndarray) -> float:
    """1 - |a & b| / |a | b| for boolean vectors; 0 when both are empty."""
    union = np.sum(a | b)
    return float(1.0 - np.sum(a & b) / union) if union else 0.0
