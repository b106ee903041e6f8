"""LinUCB (Li et al. 2010) with one shared model or one model per user, and the ridge statistics CLUB reuses.

A model j keeps A_j = lam I + sum x x^T (and its inverse, by Sherman-Morrison)
and b_j = sum r x; it scores arm x by x' A^-1 b + alpha sqrt(x' A^-1 x).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..params import NONNEGATIVE, POSITIVE, validate_attributes
from ._support import ucb_argmax
from .base import Policy


class Ridge:
    """Ridge statistics of ``n`` linear models in R^dim: A (n, d, d), A_inv, b (n, d), pulls (n,)."""

    def __init__(self, n: int, dim: int, lam: float):
        self.lam = lam
        self.A = np.tile(lam * np.eye(dim), (n, 1, 1))
        self.A_inv = np.tile(np.eye(dim) / lam, (n, 1, 1))
        self.b = np.zeros((n, dim))
        self.pulls = np.zeros(n, dtype=int)

    def add(self, j: int, x: np.ndarray, reward: float) -> None:
        """Add one observation to model ``j``."""
        Ax = self.A_inv[j] @ x
        self.A_inv[j] -= np.outer(Ax, Ax) / (1.0 + x @ Ax)
        self.A[j] += np.outer(x, x)
        self.b[j] += reward * x
        self.pulls[j] += 1

    def assign(self, j: int, A: np.ndarray, b: np.ndarray, pulls: int) -> None:
        """Replace model ``j``'s statistics (used when clusters split or merge)."""
        self.A[j], self.A_inv[j], self.b[j], self.pulls[j] = A, np.linalg.inv(A), b, pulls

    def estimates(self, models) -> np.ndarray:
        """Ridge estimates A_j^-1 b_j of the ``models`` (an index array): (len, d)."""
        return np.einsum("nde,ne->nd", self.A_inv[models], self.b[models])

    def scores(self, models, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x' A^-1 b, sqrt(x' A^-1 x)) for each row x of ``X``, with the statistics of the
        ``models`` pooled into one (regularized once; a Cholesky solve when there are several)."""
        models = list(models)
        if len(models) == 1:
            A_inv, b = self.A_inv[models[0]], self.b[models[0]]
            return X @ (A_inv @ b), np.sqrt(np.maximum(((X @ A_inv) * X).sum(axis=1), 0.0))
        A = self.A[models].sum(axis=0) - (len(models) - 1) * self.lam * np.eye(self.A.shape[1])
        solved = cho_solve(cho_factor(A), np.column_stack([self.b[models].sum(axis=0), X.T]))
        return X @ solved[:, 0], np.sqrt(np.maximum((X.T * solved[:, 1:]).sum(axis=0), 0.0))


class LinUCBOne(Policy):
    """LinUCB with one model shared by all users (ignores who is served)."""

    name = "linucb_one"
    param_constraints = {"alpha": NONNEGATIVE, "lam": POSITIVE}

    def __init__(self, *, alpha=0.1, lam=1.0):
        self.alpha, self.lam = alpha, lam
        validate_attributes(self)

    def _model(self, user: int) -> int:
        return 0

    def _n_models(self, env) -> int:
        return 1

    def reset(self, env, horizon, rng):
        self.ridge = Ridge(self._n_models(env), env.dim, self.lam)

    def select(self, round_):
        j = self._model(int(round_.users[0]))
        mean, bonus = self.ridge.scores([j], round_.contexts[0])
        return np.array([ucb_argmax(mean, bonus, self.alpha)])

    def update(self, round_, arms, rewards):
        self.ridge.add(self._model(int(round_.users[0])), round_.contexts[0, arms[0]], float(rewards[0]))


class LinUCBInd(LinUCBOne):
    """LinUCB with an independent model per user."""

    name = "linucb_ind"

    def _model(self, user: int) -> int:
        return user

    def _n_models(self, env) -> int:
        return env.n_users
