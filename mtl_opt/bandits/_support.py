"""Pieces shared by the bandit policies and environments (Meta-Ban family, MOLARB frame).

``ucb_argmax`` is the one UCB decision rule, and ``History`` keeps each user's
pulled arms and rewards.
"""

from __future__ import annotations

import numpy as np

from ..errors import DivergenceError


def ucb_argmax(mean: np.ndarray, bonus: np.ndarray, alpha: float) -> int:
    """Index of the largest ``mean + alpha * bonus`` (first one on ties).

    Non-finite scores mean the policy's training diverged; argmax would then
    quietly pick the first NaN, so this raises ``DivergenceError`` instead.
    """
    scores = np.asarray(mean) + alpha * np.asarray(bonus)
    if not np.isfinite(scores).all():
        raise DivergenceError("the UCB scores are not finite: the policy's training diverged. "
                              "Lower its step sizes (lr, user_lr, meta_lr) or its lam.")
    return int(np.argmax(scores))


class History:
    """Features and rewards of the arms pulled so far, in order, with the user who pulled each."""

    def __init__(self, horizon: int, dim: int, n_users: int):
        self.X = np.zeros((horizon, dim))
        self.r = np.zeros(horizon)
        self.count = 0
        self.rows: list[list[int]] = [[] for _ in range(n_users)]

    def add(self, user: int, x: np.ndarray, reward: float) -> None:
        """Record one pull."""
        self.X[self.count], self.r[self.count] = x, reward
        self.rows[user].append(self.count)
        self.count += 1

    def recent(self, user: int | None, window: int) -> tuple[np.ndarray, np.ndarray]:
        """The last ``window`` pulls of ``user`` (of everybody when None): (X, r)."""
        if user is None:
            rows = slice(max(0, self.count - window), self.count)
        else:
            rows = self.rows[user][-window:]
        return self.X[rows], self.r[rows]
