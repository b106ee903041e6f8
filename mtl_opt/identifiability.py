"""Which (task, feature) coefficients a task's own data can determine: the one rule for all estimators.

Real multi-site data always contain covariates that do not vary inside some site (a school's
sex composition in a single-sex school, a site-level variable) and sites with fewer rows than
features.  In such a task some coefficients are not identified by its data: a constant column
is absorbed by the intercept, a column in the span of other columns can trade weight with them.
Estimators do not refuse such data; each handles an unidentified pair its own documented way
(penalized methods leave the column out of that task or let the shared part fill it, MOLAR fits
the task on its identified coordinates and fills the rest from the global estimate), and every
result lists the pairs in ``FitResult.unidentified``.

Two levels, one place:

* ``constant_columns``: the column has no spread in the task (after centring when the model has
  an intercept) — no method can learn that task's coefficient from its data.
* ``identified_columns``: additionally drops columns in the span of the intercept and of
  *earlier* columns of the same task (a greedy, order-preserving rank test), which is what
  least squares needs.  Earlier features win, so the choice is explainable and does not depend
  on ties broken inside LAPACK.
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidDataError

#: A column is constant when its standard deviation is at most this times (1 + |mean|).
CONSTANT_RTOL = 1e-12
#: A column is collinear with earlier ones when the part of it (centred, unit length) that they
#: do not explain is shorter than this: 1e-6 on singular values is 1e-12 on X^T X's eigenvalues,
#: the ratio least squares refuses (``formulations.least_squares.RCOND``).
COLLINEAR_RTOL = 1e-6


def constant_columns(X: np.ndarray, center: bool = True) -> np.ndarray:
    """Boolean (p,): columns of X that are constant (``center``) or identically zero (not)."""
    X = np.asarray(X, dtype=float)
    if not center:
        return ~np.any(X != 0.0, axis=0)
    mean = X.mean(axis=0)
    return spread_is_constant(X.std(axis=0), mean)


def spread_is_constant(std: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The rule of ``constant_columns`` (centred) from the columns' standard deviations and
    means, for a caller that has them already (``data.scaling``)."""
    return std <= CONSTANT_RTOL * (1.0 + np.abs(mean))


def identified_columns(X: np.ndarray, fit_intercept: bool = True) -> np.ndarray:
    """Boolean (p,): columns least squares can estimate in this task (greedy, in column order).

    A column is kept when, after centring (``fit_intercept``) and scaling to unit length, more
    than ``COLLINEAR_RTOL`` of it lies outside the span of the columns kept before it.  At most
    n - 1 (n without intercept) columns are kept, so the kept design has full column rank.

    Computed in blocks, not column by column.  The distance of each column from the span of the
    earlier ones is the diagonal of R in Z = QR, or of the Cholesky factor of Z^T Z: when all
    are above 1e-2 (the usual case: Z^T Z is then well conditioned, so its rounding moves them
    by far less than that), every column is kept.  Otherwise a QR factorization of the
    undecided columns (made orthogonal to the kept ones) keeps every column before the first
    diagonal at or below the tolerance, drops that one, and the rest go round again; a column
    already within the tolerance of the kept span is dropped at once (a larger span only
    brings it closer), so a wide task (n <= p) takes two rounds, not p.
    """
    X = np.asarray(X, dtype=float)
    keep = ~constant_columns(X, center=fit_intercept)
    Z = X[:, keep] - X[:, keep].mean(axis=0) if fit_intercept else X[:, keep]
    norms = np.linalg.norm(Z, axis=0)
    columns = np.flatnonzero(keep)[norms > 0.0]   # candidates, in order
    Z = Z[:, norms > 0.0] / norms[norms > 0.0]
    keep[:] = False
    if len(columns) <= len(Z) and _clearly_independent(Z):   # the usual case
        keep[columns] = True
        return keep
    basis = np.zeros((len(Z), 0))
    rest = np.arange(len(columns))               # the undecided columns of Z, in order
    while len(rest):
        V = Z[:, rest]
        for _ in range(2):                       # twice is enough (Kahan-Parlett)
            V = V - basis @ (basis.T @ V)
        far = np.linalg.norm(V, axis=0) > COLLINEAR_RTOL
        rest, V = rest[far], V[:, far]
        if not len(rest):
            break
        Q, R = np.linalg.qr(V)
        short = np.flatnonzero(np.abs(np.diag(R)) <= COLLINEAR_RTOL)
        first = short[0] if len(short) else R.shape[0]
        keep[columns[rest[:first]]] = True
        basis = np.column_stack([basis, Q[:, :first]])
        rest = rest[first + 1:] if len(short) else rest[first:]
    return keep


def _clearly_independent(Z: np.ndarray) -> bool:
    """Whether every column of Z (unit length) is more than 1e-2 away from the span of the
    earlier ones, by the Cholesky factor of Z^T Z (False when it fails).  Near that level the
    Gram matrix squares the conditioning and its pivots lose accuracy: the QR path decides."""
    try:
        return bool(np.diag(np.linalg.cholesky(Z.T @ Z)).min(initial=np.inf) > 1e-2)
    except np.linalg.LinAlgError:
        return False


def unidentified_mask(Xs, fit_intercept: bool = True, *, collinear: bool) -> np.ndarray:
    """Boolean (K, p): pairs a task cannot identify; ``collinear`` adds the rank test."""
    if collinear:
        return np.array([~identified_columns(X, fit_intercept) for X in Xs], dtype=bool)
    return np.array([constant_columns(X, center=fit_intercept) for X in Xs], dtype=bool)


def named_pairs(mask: np.ndarray, task_names, feature_names) -> list[list[str]]:
    """The True entries of a (K, p) mask as [task, feature] name pairs (JSON-ready, row order)."""
    return [[str(task_names[k]), str(feature_names[j])] for k, j in zip(*np.nonzero(mask))]


def check_some_signal(data, fit_intercept: bool = True) -> None:
    """Refuse a task no estimator can learn from: one row, or every feature constant in it."""
    constant = data.unidentified(fit_intercept, collinear=False)   # kept for the fit's result
    for name, X, flat in zip(data.task_names, data.Xs, constant):
        if X.shape[0] < 2:
            raise InvalidDataError(
                f"task {name!r} has {X.shape[0]} row(s); every task needs at least 2 to fit "
                f"anything. Drop the task or merge it with a similar one.")
        if X.shape[1] and flat.all():
            raise InvalidDataError(
                f"task {name!r}: every feature is constant within the task, so its data say "
                f"nothing about any coefficient. Drop the task, or check how it was extracted.")
