"""Ordinary least squares with an exact optimality certificate.

    f(beta) = 1/(2 n) ||y - A beta||^2        (A may contain a column of ones)

f* = dist(y, range A)^2 / (2n).  At the returned beta with residual r,
dist >= ||r|| - ||A^T r|| / sqrt(lambda_min(A^T A)) (the projection of r on
range A is A H^-1 A^T r / n); each quantity is bounded in the safe direction
for float64 rounding (``rounding_factor``), so the lower bound is proven, and
tight at the optimum, where A^T r ~ 0.  With a column of ones y's common level
is removed first (it moves only that coefficient), so the residual is computed
without cancellation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .._lazy import pyo
from ..errors import InvalidDataError
from ..rounding import EPS, rounding_factor, safe_min_eigenvalue

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


def check_design(A: np.ndarray, *, name: str = "data") -> np.ndarray:
    """A^T A, after refusing a design that least squares cannot fit (InvalidDataError naming
    ``name``): fewer rows than columns, or A^T A singular or ill-conditioned.  Estimators choose
    their columns first (``solvers.least_squares.fitted_columns``), so for them this is a numerical
    safeguard.  A square design of full rank is fitted exactly (its residual is 0)."""
    n, d = A.shape
    if n < d:
        raise InvalidDataError(
            f"{name}: {n} observations for {d} coefficients; ordinary least squares needs at "
            f"least as many observations as coefficients (n >= d). Use fewer features, or a "
            f"high-dimensional method (MOLARHighDim, MOLAR's LASSO-debiased variant).")
    gram = A.T @ A
    eig = np.linalg.eigvalsh(gram)
    if eig[0] <= RCOND * eig[-1]:
        raise InvalidDataError(
            f"{name}: X^T X is singular or nearly so (smallest/largest eigenvalue "
            f"{eig[0] / eig[-1]:.2e}); some features are collinear or constant within this "
            f"task. Drop them, or use a high-dimensional method.")
    return gram


def ols(A: np.ndarray, y: np.ndarray, *, name: str = "data") -> OLSFit:
    """Least squares of y on A through a Cholesky factor of A^T A.

    Raises InvalidDataError when A^T A is singular or ill-conditioned (fewer
    rows than columns, collinear or constant columns), naming ``name``.
    """
    n, d = A.shape
    check_design(A, name=name)
    ones = np.flatnonzero(np.all(A == 1.0, axis=0))
    # Columns scaled to about unit length by powers of two: exact, the same range (so the same
    # optimum and residual), and a far better conditioned Gram matrix, hence a tighter bound.
    scale = np.exp2(-np.round(np.log2(np.linalg.norm(A, axis=0))))
    A = A * scale
    gram = A.T @ A
    level = float(np.mean(y)) if ones.size else 0.0
    shifted = y - level  # rounding: within eps |y - level| (exact near the level, Sterbenz)
    factor = scipy.linalg.cho_factor(gram)
    coef = scipy.linalg.cho_solve(factor, A.T @ shifted)
    resid = shifted - A @ coef
    rss = float(resid @ resid)
    dist = (distance_lower_bound(A, shifted, coef, resid, safe_min_eigenvalue(gram, n))
            - EPS * float(np.linalg.norm(shifted)) * (level != 0.0))
    lower = max(dist, 0.0) ** 2 / (2 * n) * (1 - rounding_factor(4))
    gram_inv_diag = np.diag(scipy.linalg.cho_solve(factor, np.eye(d))) * scale ** 2
    coef = coef * scale
    if ones.size:
        coef[ones[0]] += level
    return OLSFit(coef=coef, objective=rss / (2 * n), lower_bound=lower, rss=rss,
                  gram_inv_diag=gram_inv_diag)


def distance_lower_bound(A, b, coef, resid, min_eig) -> float:
    """A proven lower bound on dist(b, range A) from the float residual ``resid`` = b - A coef.

    dist >= ||r|| - ||A^T r|| / sqrt(min_eig) for the exact r, whose distance to ``resid`` is
    at most gamma_(d+2) (|b| + |A| |coef|) entrywise; min_eig <= lambda_min(A^T A).
    """
    n, d = A.shape
    if min_eig <= 0:
        return 0.0
    resid_error = float(np.linalg.norm(rounding_factor(d + 2) * (np.abs(b) + np.abs(A) @ np.abs(coef))))
    resid_error *= 1 + rounding_factor(n + 2)
    norm_low = float(np.linalg.norm(resid)) * (1 - rounding_factor(n + 2)) - resid_error
    grad_up = (float(np.linalg.norm(A.T @ resid)) * (1 + rounding_factor(d + 2))
               + float(np.linalg.norm(np.abs(A).T @ np.abs(resid))) * rounding_factor(n + 3)
               + float(np.linalg.norm(A)) * resid_error) * (1 + rounding_factor(n + d + 4))
    return norm_low - grad_up / np.sqrt(min_eig) * (1 + rounding_factor(4))


def with_intercept(X: np.ndarray) -> np.ndarray:
    """Prepend a column of ones (the intercept is coefficient 0)."""
    return np.hstack([np.ones((X.shape[0], 1)), X])


def build_least_squares_model(Xs, ys, weights, fitted, fit_intercept: bool,
                              pooled: bool) -> pyo.ConcreteModel:
    """sum_k (weights_k / 2) ||y_k - b_k - X_k beta_k||^2 as a Pyomo QP, residuals as variables.

    Components: ``tasks``, ``features``, ``rows`` (k, i); ``beta[k, j]`` (fixed at 0 where
    ``fitted`` (K, p) is False), ``intercept[k]`` (fixed at 0 without ``fit_intercept``),
    ``resid[k, i]`` with rows ``fit[k, i]``; with ``pooled`` the rows ``shared_beta[k, j]`` and
    ``shared_intercept[k]`` tie every task to task 0; objective ``obj``.
    """
    K, p = len(Xs), Xs[0].shape[1]
    model = pyo.ConcreteModel(name="least_squares")
    model.tasks = pyo.RangeSet(0, K - 1, doc="task indices k (the data's task order)")
    model.features = pyo.RangeSet(0, p - 1, doc="feature indices j (the data's feature order)")
    model.rows = pyo.Set(initialize=[(k, i) for k in range(K) for i in range(len(ys[k]))], dimen=2,
                         doc="rows (k, i) of the residuals")
    model.beta = pyo.Var(model.tasks, model.features,
                         doc="beta[k, j]: task k's coefficient of feature j; fixed at 0 where not identified")
    model.intercept = pyo.Var(model.tasks, doc="intercept[k]: task k's intercept minus y's level"
                              + ("" if fit_intercept else " (fixed at 0: fit_intercept=False)"))
    for (k, j), var in model.beta.items():
        if not fitted[k, j]:
            var.fix(0.0)
    if not fit_intercept:
        model.intercept.fix(0.0)
    model.resid = pyo.Var(model.rows, doc="resid[k, i]: y_ki - b_k - x_ki . beta_k (rows fit[k, i])")
    model.fit = pyo.Constraint(model.rows, rule=lambda m, k, i: m.resid[k, i] == float(ys[k][i])
                               - m.intercept[k] - sum(float(Xs[k][i, j]) * m.beta[k, j]
                                                      for j in m.features if Xs[k][i, j] != 0),
                               doc="fit[k, i]: resid[k, i] == y_ki - b_k - x_ki . beta_k")
    if pooled:
        model.shared_beta = pyo.Constraint(model.tasks, model.features, rule=lambda m, k, j: (
            m.beta[k, j] == m.beta[0, j] if k else pyo.Constraint.Skip),
            doc="shared_beta[k, j]: task k's coefficient equals task 0's (pooled)")
        model.shared_intercept = pyo.Constraint(model.tasks, rule=lambda m, k: (
            m.intercept[k] == m.intercept[0] if k else pyo.Constraint.Skip),
            doc="shared_intercept[k]: task k's intercept equals task 0's (pooled)")
    model.obj = pyo.Objective(expr=sum(float(weights[k]) / 2 * model.resid[k, i] ** 2
                                       for k, i in model.rows),
                              doc="sum_k (weight_k / 2) ||resid_k||^2, the estimator's objective")
    # ``dual_bound_margin``: the rows' right-hand sides (a continuous QP: no derived rows)
    model.largest_bound = max(float(np.max(np.abs(y))) for y in ys)
    return model
