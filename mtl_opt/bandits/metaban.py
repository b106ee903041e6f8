"""Meta-Ban (Ban, Qi, Wei and He 2022): per-user networks, a meta network, UCB on gradient features.

Each round serves one user u and k arms x_1..x_k.  With user networks theta^v
(all users, stacked into one (n, p) array):

    group (Eq. 4)    N_i = {v : |f(x_i; theta^v) - f(x_i; theta^u)| <= (nu - 1)/nu * gamma}
    meta (Eq. 5-6)   Theta_i = theta^u - meta_lr * mean_{v in N_i} [grad L_v(theta^v) + lam/sqrt(m) sign(theta^v)]
    UCB (Eq. 7-8)    pick i* = argmax_i f(x_i; Theta_i) + alpha * ||g(x_i; Theta_i) - g(x_i; Theta_0)||
    user (Alg. 3)    theta^u <- ``user_steps`` SGD steps from Theta_{i*} on u's last ``window`` pulls

L_v is user v's mean squared loss on its last ``window`` pulls, and Theta_0 the
common initialization of every network.  Departures from the paper:

- Algorithm 2 starts the meta-learner from Theta_0 or Theta_{t-1}.  Both were
  no better than one network for everybody (NeuUCB-ONE) in our runs: after one
  round's adaptation Theta_{t-1} belongs to whoever was served last.  We start
  from the served user's network, which Algorithm 3 derived from the meta
  network of that user's previous round (Theta_t, Alg. 1 line 13).
- Algorithm 2's J2 steps take the gradient at the *stored user parameters*,
  which do not change inside the loop; with T~ = T (Theorem 5.3's setting)
  they are one step of size J2 * eta2 = ``meta_lr``.  Each user's gradient term
  is cached when that user is updated, so all k arms' meta networks are one
  (k, n) x (n, p) product.
- The weighted sum over the group (w_u = 1) is a mean, so the step does not
  grow with the group; users never served yet are left out of groups.
- Algorithm 3 returns the latest parameters, not a uniform draw from the past
  ones (the draw serves the proof of Lemma 6.3), after a bounded number of
  mini-batch steps on a capped window.
- Z_1 and the user term U_bar of UCB_{t,i} are equal for every arm of the
  round, so they cannot change the argmax and are left out; beta_2 is folded
  into ``alpha``.
"""

from __future__ import annotations

import math

import numpy as np

from ..params import NONNEGATIVE, POSITIVE, POSITIVE_INT, Interval, validate_attributes
from ._support import History, ucb_argmax
from .base import Policy
from .mlp import MLP


def infer_groups(predictions: np.ndarray, user: int, nu: float, gamma: float,
                 eligible: np.ndarray | None = None) -> np.ndarray:
    """Eq. (4): (k, n) mask of users v whose prediction on arm i is within (nu-1)/nu*gamma of ``user``'s.

    ``predictions`` is (n, k): f(x_i; theta^v).  ``eligible`` (n,) drops users
    (the served user always stays in its own groups).
    """
    close = np.abs(predictions - predictions[user]) <= (nu - 1) / nu * gamma
    if eligible is not None:
        close &= eligible[:, None]
    close[user] = True
    return close.T


class MetaBan(Policy):
    """Meta-Ban (Algorithms 1-3 of the paper); see the module docstring for the exact schedule.

    The L1 part of a meta step moves every weight by up to meta_lr * lam / sqrt(width);
    keep that well below the initial weight scale sqrt(2 / width).  At the defaults it
    is 0.003; lam = 1 makes it 0.3, and training diverged on the synthetic groups.
    """

    name = "metaban"
    param_constraints = {"alpha": NONNEGATIVE, "nu": [Interval(1, None, open_low=True)],
                         "gamma": [Interval(0, 1)], "lam": NONNEGATIVE, "width": POSITIVE_INT,
                         "user_lr": POSITIVE, "meta_lr": NONNEGATIVE, "user_steps": POSITIVE_INT,
                         "batch": POSITIVE_INT, "window": POSITIVE_INT}

    def __init__(self, *, alpha=0.1, nu=5.0, gamma=0.4, lam=0.01, width=100, user_lr=0.1,
                 meta_lr=3.0, user_steps=10, batch=32, window=200):
        self.alpha, self.nu, self.gamma, self.lam, self.width = alpha, nu, gamma, lam, width
        self.user_lr, self.meta_lr, self.user_steps = user_lr, meta_lr, user_steps
        self.batch, self.window = batch, window
        validate_attributes(self)

    def reset(self, env, horizon, rng):
        self.rng, self.net = rng, MLP(env.dim, self.width)
        self.theta0 = self.net.init(rng)
        self.users = np.tile(self.theta0, (env.n_users, 1))
        self.direction = np.zeros_like(self.users)   # cached grad L_v(theta^v) + lam/sqrt(m) sign(theta^v)
        self.served = np.zeros(env.n_users, dtype=bool)
        self.history = History(horizon, env.dim, env.n_users)

    def _arm_networks(self, user: int, X: np.ndarray) -> np.ndarray:
        """Theta_{t,i} for every arm: (k, p)."""
        groups = infer_groups(self.net.predict(self.users, X), user, self.nu, self.gamma, self.served)
        weights = groups / groups.sum(axis=1, keepdims=True)
        return self.users[user] - self.meta_lr * (weights @ self.direction)

    def scores(self, user: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean f(x_i; Theta_i), bonus ||g(x_i; Theta_i) - g(x_i; Theta_0)||, Theta_i) for arms ``X`` (k, d)."""
        metas = self._arm_networks(user, X)
        Xi = X[:, None, :]
        mean = self.net.predict(metas, Xi)[:, 0]
        diff = self.net.features(metas, Xi)[:, 0] - self.net.features(self.theta0, Xi)[:, 0]
        return mean, np.linalg.norm(diff, axis=1), metas

    def select(self, round_):
        mean, bonus, self._metas = self.scores(int(round_.users[0]), round_.contexts[0])
        return np.array([ucb_argmax(mean, bonus, self.alpha)])

    def update(self, round_, arms, rewards):
        user, arm = int(round_.users[0]), int(arms[0])
        self.history.add(user, round_.contexts[0, arm], float(rewards[0]))
        self.served[user] = True
        X, r = self.history.recent(user, self.window)
        theta = self.net.sgd(self._metas[arm], X, r, steps=self.user_steps, lr=self.user_lr,
                             batch=self.batch, rng=self.rng)
        self.users[user] = theta
        self.direction[user] = (self.net.loss_gradient(theta, X, r)[1]
                                + self.lam / math.sqrt(self.width) * np.sign(theta))
