"""Ordinary least squares with an exact optimality certificate.

    f(beta) = 1/(2 n) ||y - A beta||^2        (A may contain a column of ones)

f is a convex quadratic with Hessian H = A^T A / n, so at any point
``f* = f(beta) - 1/2 g^T H^{-1} g`` with g the gradient: evaluating that at the
returned estimate gives a lower bound that is exact up to float64 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import InvalidDataError

#: Smallest allowed eigenvalue ratio of A^T A before we call a design singular.
RCOND = 1e-12


@dataclass(frozen=True)
class OLSFit:
    """One least-squares fit: coefficients, its certificate and the OLS variance factors."""

    coef: np.ndarray          # (d,)
    objective: float          # 1/(2n) ||y - A coef||^2
    lower_bound: float        # f(coef) - 1/2 g^T H^{-1} g
    rss: float                # ||y - A coef||^2
    gram_inv_diag: np.ndarray # diag((A^T A)^{-1}), the OLS variance factors


def ols(A: np.ndarray, y: np.ndarray, *, name: str = "data") -> OLSFit:
    """Least squares of y on A through a Cholesky factor of A^T A.

    Raises InvalidDataError when A^T A is singular or ill-conditioned (fewer
    rows than columns, collinear or constant columns), naming ``name``.
    """
    n, d = A.shape
    if n <= d:
        raise InvalidDataError(
            f"{name}: {n} observations for {d} coefficients; ordinary least squares needs more "
            f"observations than coefficients (n > d). Use fewer features, or a high-dimensional "
            f"method (MOLARHighDim, MOLAR's LASSO-debiased variant).")
    gram = A.T @ A
    eig = np.linalg.eigvalsh(gram)
    if eig[0] <= RCOND * eig[-1]:
        raise InvalidDataError(
            f"{name}: X^T X is singular or nearly so (smallest/largest eigenvalue "
            f"{eig[0] / eig[-1]:.2e}); some features are collinear or constant within this "
            f"task. Drop them, or use a high-dimensional method.")
    factor = scipy.linalg.cho_factor(gram)
    coef = scipy.linalg.cho_solve(factor, A.T @ y)
    resid = y - A @ coef
    rss = float(resid @ resid)
    grad = -(A.T @ resid) / n
    lower = rss / (2 * n) - 0.5 * n * float(grad @ scipy.linalg.cho_solve(factor, grad))
    gram_inv_diag = np.diag(scipy.linalg.cho_solve(factor, np.eye(d)))
    return OLSFit(coef=coef, objective=rss / (2 * n), lower_bound=lower, rss=rss,
                  gram_inv_diag=gram_inv_diag)


def with_intercept(X: np.ndarray) -> np.ndarray:
    """Prepend a column of ones (the intercept is coefficient 0)."""
    return np.hstack([np.ones((X.shape[0], 1)), X])
