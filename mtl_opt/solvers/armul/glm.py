"""Smooth per-task and pooled fits (squared or logistic loss) for ARMUL's starts and baselines.

``newton_glm`` (damped Newton) and ``solve_psd`` (the minimum-norm solve of a PSD system) are
the exact blocks; ``group_fit`` and ``task_fits`` fit a group of tasks or each task on the
columns it identifies, on an ``ArmulProblem``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ...formulations.armul import ArmulProblem


def newton_glm(A, y, c, loss, x0=None, *, offset=0.0, tol=1e-13, max_iter=100) -> np.ndarray:
    """Damped Newton for min_x sum_i c_i l(a_i^T x + offset_i; y_i), l squared (1/2 (y - z)^2)
    or logistic; along directions A does not see, x keeps x0's component (min-norm from 0)."""
    x = np.zeros(A.shape[1]) if x0 is None else np.array(x0, dtype=float)

    def value(x):
        z = A @ x + offset
        per = 0.5 * (y - z) ** 2 if loss == "squared" else np.logaddexp(0.0, z) - y * z
        return float(c @ per)

    f = value(x)
    for _ in range(max_iter):
        z = A @ x + offset
        curv = c if loss == "squared" else c * expit(z) * (1 - expit(z))
        g = A.T @ (c * ((z if loss == "squared" else expit(z)) - y))
        H = A.T @ (curv[:, None] * A)
        step = solve_psd(H, g)
        decrement = float(g @ step)
        if decrement <= 2 * tol * max(1.0, abs(f)):
            break
        size = 1.0
        while size > 1e-10 and value(x - size * step) > f - 0.25 * size * decrement:
            size /= 2
        if value(x - size * step) >= f:
            break  # no descent along a step of (nearly) singular curvature: keep x
        x, f = x - size * step, value(x - size * step)
    return x


#: Eigenvalues of a PSD system below this times the largest are zero (``solve_psd``).
PSD_RCOND = 1e-12


def solve_psd(H, g) -> np.ndarray:
    """The minimum-norm solution H^+ g, eigenvalues below PSD_RCOND * the largest taken as 0.

    A singular H (a task with a constant column or fewer rows than coefficients) has many
    solutions; a Cholesky factor of it "succeeds" on rounding and returns an arbitrary huge
    one, the min-norm one puts nothing along directions the data do not see.
    """
    eig, vec = np.linalg.eigh(H)
    keep = eig > PSD_RCOND * max(eig[-1], 0.0)
    return vec[:, keep] @ ((vec[:, keep].T @ g) / eig[keep])


def task_rows(problem: ArmulProblem, tasks):
    """Stacked observations of ``tasks``: design, labels, per-row weights."""
    mask = problem.mask[tasks]
    return (problem.X[tasks][mask], problem.y[tasks][mask],
            np.repeat(problem.row_weight[tasks], mask.sum(axis=1)))


def group_fit(problem: ArmulProblem, tasks, x0=None) -> np.ndarray:
    """One coefficient vector minimizing sum_{j in tasks} w_j f_j(beta) (squared: normal equations)."""
    tasks = np.atleast_1d(tasks)
    if problem.loss == "squared":
        w = problem.w[tasks]
        return solve_psd(np.einsum("m,mik->ik", w, problem.gram[tasks]), w @ problem.xty[tasks])
    return newton_glm(*task_rows(problem, tasks), problem.loss, x0)


def task_fits(problem: ArmulProblem, columns: np.ndarray, base=None) -> np.ndarray:
    """Per task j, min f_j(theta_j) with theta_j = base + a correction on ``columns[j]`` only
    ((m, d) bool; ``base`` (d,) defaults to 0): the fit a task's own data make on the columns
    they identify, everything else left at ``base``; the min-norm correction (squared loss),
    so with every column allowed it is the minimizer nearest ``base``."""
    theta = np.zeros((problem.m, problem.d)) if base is None else np.tile(base, (problem.m, 1))
    for j, cols in enumerate(columns):
        if problem.loss == "squared":
            rhs = problem.xty[j, cols] - problem.gram[j, cols] @ theta[j]
            theta[j, cols] += solve_psd(problem.gram[j][np.ix_(cols, cols)], rhs)
        else:
            A, y, c = task_rows(problem, [j])
            theta[j, cols] += newton_glm(A[:, cols], y, c, problem.loss, offset=A @ theta[j])
    return theta
