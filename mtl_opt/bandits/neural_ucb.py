"""NeuralUCB (Zhou et al. 2020) with one network for all users (NeuUCB-ONE) or one per user (NeuUCB-IND).

Model j scores arm x by f(x; theta_j) + alpha sqrt(sum_p g_p(x)^2 / Z_jp), with
g the gradient features of ``mlp.MLP`` and Z_j = lam + sum of g^2 over its
pulls: the diagonal approximation of Z = lam I + sum g g' used by the authors'
code, since the full p x p matrix (p = 64,100 on digits) is too large.
After each pull the model takes ``steps`` mini-batch SGD steps (warm start) on
its last ``window`` observations.
"""

from __future__ import annotations

import numpy as np

from ..params import NONNEGATIVE, POSITIVE, POSITIVE_INT, validate_attributes
from ._support import History, ucb_argmax
from .base import Policy
from .mlp import MLP


class NeuUCBOne(Policy):
    """NeuralUCB with one network for all users."""

    name = "neuucb_one"
    param_constraints = {"alpha": NONNEGATIVE, "lam": POSITIVE, "width": POSITIVE_INT, "lr": POSITIVE,
                         "steps": POSITIVE_INT, "batch": POSITIVE_INT, "window": POSITIVE_INT}
    #: whether every user has its own network
    per_user = False

    def __init__(self, *, alpha=0.1, lam=1.0, width=100, lr=0.1, steps=10, batch=32, window=1000):
        self.alpha, self.lam, self.width = alpha, lam, width
        self.lr, self.steps, self.batch, self.window = lr, steps, batch, window
        validate_attributes(self)

    def reset(self, env, horizon, rng):
        self.rng, self.net = rng, MLP(env.dim, self.width)
        n = env.n_users if self.per_user else 1
        self.theta = self.net.init(rng, n)
        self.Z = np.full((n, self.net.size), float(self.lam))
        self.history = History(horizon, env.dim, env.n_users)

    def select(self, round_):
        j, X = self.per_user * int(round_.users[0]), round_.contexts[0]
        self._g = self.net.features(self.theta[j], X)
        bonus = np.sqrt((self._g ** 2 / self.Z[j]).sum(axis=1))
        return np.array([ucb_argmax(self.net.predict(self.theta[j], X), bonus, self.alpha)])

    def update(self, round_, arms, rewards):
        user, arm = int(round_.users[0]), int(arms[0])
        j = self.per_user * user
        self.Z[j] += self._g[arm] ** 2
        self.history.add(user, round_.contexts[0, arm], float(rewards[0]))
        X, r = self.history.recent(user if self.per_user else None, self.window)
        self.theta[j] = self.net.sgd(self.theta[j], X, r, steps=self.steps, lr=self.lr,
                                     batch=self.batch, rng=self.rng)


class NeuUCBInd(NeuUCBOne):
    """NeuralUCB with an independent network per user."""

    name = "neuucb_ind"
    per_user = True
