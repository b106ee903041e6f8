"""The one interface every bandit environment and policy speaks.

A round serves a batch of users (instances, in MOLAR's words): ``Round.users``
(b,) and their arm features ``Round.contexts`` (b, n_arms, dim).  Model-C and
Meta-Ban give each arm its own features; Model-P gives one context per user,
repeated over the arms, and its policies keep one parameter per arm.

The runner owns all randomness: it hands the environment and the policy their
own seeded ``numpy.random.Generator``; neither may use global random state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Round:
    """The users served this round and the features of their arms."""

    users: np.ndarray      # (b,) int user / instance indices, distinct
    contexts: np.ndarray   # (b, n_arms, dim) float features of each user's arms


class Environment(ABC):
    """A stochastic bandit: draws rounds, pays noisy rewards, knows the expected ones."""

    #: name -> accepted constraints (``mtl_opt.params``), checked in ``__init__``
    param_constraints: dict = {}

    #: users (instances) that can be served, arms per round, feature dimension
    n_users: int
    n_arms: int
    dim: int

    @abstractmethod
    def reset(self, rng: np.random.Generator) -> None:
        """Start a trial: draw whatever hidden truth is random (parameters, groups, data order)."""

    @abstractmethod
    def next_round(self, rng: np.random.Generator) -> Round:
        """The users served next and their arm features (may serve nobody: b = 0)."""

    @abstractmethod
    def expected_rewards(self, round_: Round) -> np.ndarray:
        """(b, n_arms) expected reward of every arm for every served user."""

    def rewards(self, round_: Round, arms: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(b,) observed rewards of the pulled ``arms``; default: expected + Gaussian noise ``sigma``."""
        mean = self.expected_rewards(round_)[np.arange(len(arms)), arms]
        return mean + getattr(self, "sigma", 0.0) * rng.standard_normal(len(arms))

    def info(self) -> dict:
        """Facts worth reporting next to the regret (e.g. activation probabilities); JSON-able."""
        return {}


class Policy(ABC):
    """Chooses one arm per served user and learns from the rewards."""

    #: name -> accepted constraints (``mtl_opt.params``), checked in ``__init__``
    param_constraints: dict = {}

    #: short name used in tables, plots and experiment files
    name: str = "policy"

    @abstractmethod
    def reset(self, env: Environment, horizon: int, rng: np.random.Generator) -> None:
        """Forget everything; size internal state for ``env`` over ``horizon`` rounds."""

    @abstractmethod
    def select(self, round_: Round) -> np.ndarray:
        """(b,) int arm index in [0, n_arms) for each served user."""

    @abstractmethod
    def update(self, round_: Round, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Learn from the rewards of the arms just pulled."""
