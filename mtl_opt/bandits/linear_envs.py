"""MOLAR's multitask linear contextual bandits: Model-C (Section 4) and Model-P (Appendix I).

M bandit instances with K arms each.  Every round each instance m is
activated independently with probability p_m; the activated ones are served
together (``Round.users``).

- Model-C: an activated instance sees K contexts x_a ~ N(0, I_d), one per
  arm; pulling arm a pays <x_a, beta_m> + N(0, sigma^2).
- Model-P: it sees one context x ~ N(0, I_d) (repeated over the arms in
  ``Round.contexts``); pulling arm a pays <x, beta_{m,a}> + N(0, sigma^2).

The hidden truth is drawn at every ``reset`` as in the paper's experiments
(Section 4.1): beta* uniform on the unit sphere, and each instance redraws s
random coordinates of it (``synthetic.sparse_deviation_coefs``), so
||beta_m - beta*||_0 <= s and ||beta_m||_2 = 1.  Model-P draws one such family
per arm (Condition 14: a global parameter per arm).  p_m ~ U[0, 1] unless
``activation`` fixes them.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from ..errors import InvalidParameterError
from ..params import Interval, OneOf, SequenceOf, validate_attributes
from ..synthetic import sparse_deviation_coefs
from .base import Environment, Round


class _MultitaskLinear(Environment):
    """What Model-C and Model-P share: sizes, activation, the round loop and ``info``."""

    #: whether policies should keep one parameter per (instance, arm) (Model-P)
    per_arm: bool = False

    param_constraints = {
        "d": [Interval(1, None, integer=True)],
        "s": [Interval(0, None, integer=True)],
        "M": [Interval(1, None, integer=True)],
        "K": [Interval(2, None, integer=True)],
        "sigma": [Interval(0.0, None)],
        "activation": [OneOf((None,)), SequenceOf(Interval(None, None))],  # length M, [0, 1]: __init__
    }

    def __init__(self, *, d=30, s=2, M=20, K=3, sigma=0.5, activation=None):
        self.d, self.s, self.M, self.K, self.sigma, self.activation = d, s, M, K, sigma, activation
        validate_attributes(self)
        if s > d:
            raise InvalidParameterError(f"{type(self).__name__}: s (heterogeneous coordinates) must be "
                                        f"<= d = {d}; got s = {s}.")
        if activation is not None:
            p = np.asarray(activation, dtype=float)
            if p.shape != (M,) or not np.all((p >= 0) & (p <= 1)):
                raise InvalidParameterError(
                    f"{type(self).__name__}: activation must hold M = {M} probabilities in [0, 1]; "
                    f"got {activation!r}. Leave it unset to draw p_m ~ U[0, 1] in every trial.")
        self.n_users, self.n_arms, self.dim = M, K, d

    def reset(self, rng: np.random.Generator) -> None:
        """Draw p (unless fixed) and the parameters ``beta``."""
        self.p = rng.uniform(size=self.M) if self.activation is None else np.asarray(self.activation, float)
        self.beta = self._draw_beta(rng)

    def next_round(self, rng: np.random.Generator) -> Round:
        users = np.flatnonzero(rng.random(self.M) < self.p)
        return Round(users, self._contexts(len(users), rng))

    def info(self) -> dict:
        """The activation probabilities p_m of this trial."""
        return {"activation": self.p.tolist()}

    @abstractmethod
    def _draw_beta(self, rng: np.random.Generator) -> np.ndarray:
        """The instances' parameters."""

    @abstractmethod
    def _contexts(self, b: int, rng: np.random.Generator) -> np.ndarray:
        """(b, K, d) contexts of b activated instances."""


class ModelC(_MultitaskLinear):
    """Model-C: K contexts per round, one parameter beta_m (``beta``: (M, d)) per instance.

    The defaults are the paper's bandit experiment.

    Parameters
    ----------
    d, s, M, K : int, default 30, 2, 20, 3
        Dimension, heterogeneous coordinates per instance, instances, arms.
    sigma : float, default 0.5
        Reward noise standard deviation.
    activation : list of M floats or None
        Fixed activation probabilities; None draws p_m ~ U[0, 1] at every reset.
    """

    def _draw_beta(self, rng):
        return sparse_deviation_coefs(self.d, self.M, self.s, rng)[0]

    def _contexts(self, b, rng):
        return rng.standard_normal((b, self.K, self.d))

    def expected_rewards(self, round_: Round) -> np.ndarray:
        return np.einsum("bkd,bd->bk", round_.contexts, self.beta[round_.users])


class ModelP(_MultitaskLinear):
    """Model-P: one context per round, one parameter per arm (``beta``: (M, K, d)).

    Parameters as ``ModelC``; s counts the heterogeneous coordinates of each
    (instance, arm) parameter against that arm's global parameter.
    """

    per_arm = True

    def _draw_beta(self, rng):
        return np.stack([sparse_deviation_coefs(self.d, self.M, self.s, rng)[0] for _ in range(self.K)],
                        axis=1)

    def _contexts(self, b, rng):
        return np.repeat(rng.standard_normal((b, 1, self.d)), self.K, axis=1)

    def expected_rewards(self, round_: Round) -> np.ndarray:
        return np.einsum("bd,bkd->bk", round_.contexts[:, 0], self.beta[round_.users])
