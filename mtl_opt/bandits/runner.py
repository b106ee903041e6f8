"""Run bandit policies on an environment over seeded trials; record regret and wall time.

Common random numbers: in trial r every policy sees the same hidden truth,
the same rounds and the same reward noise (the environment's stream is seeded
by (seed, r)); a policy's own randomness is seeded by (seed, r, policy name), so a policy's
regret does not depend on which other policies run beside it or in what order.
Regret of a round = sum over served users of best expected reward minus the
pulled arm's expected reward.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from ..errors import DivergenceError, InvalidParameterError
from ..params import BOOLEAN, HORIZON, NONNEGATIVE_INT, REPEATS, validate_params
from ..plotting import drawn, new_axes
from ..resources import require_memory
from .base import Environment, Policy


@dataclass
class BanditResult:
    """``regret[k, r, t]``: policy k, trial r, round t; ``user_regret[k, r, u]``: cumulative per user."""

    policies: list[str]
    regret: np.ndarray
    user_regret: np.ndarray
    seconds: np.ndarray            # (policies, trials) wall time of each run
    info: list[dict] = field(default_factory=list)   # env.info() of each trial

    def cumulative(self) -> np.ndarray:
        """(policies, trials, horizon) cumulative regret."""
        return self.regret.cumsum(axis=2)

    def final(self) -> dict[str, tuple[float, float, float]]:
        """policy -> (mean final cumulative regret, its sd over trials, median seconds per run)."""
        total = self.regret.sum(axis=2)
        return {p: (float(total[k].mean()), float(total[k].std(ddof=1)) if total.shape[1] > 1 else 0.0,
                    float(np.median(self.seconds[k]))) for k, p in enumerate(self.policies)}

    def table(self) -> str:
        """A markdown table of ``final()``."""
        lines = ["| policy | final cumulative regret (mean) | sd over trials | s per run (median) |",
                 "|---|---|---|---|"]
        lines += [f"| {p} | {m:.4g} | {s:.3g} | {sec:.3g} |" for p, (m, s, sec) in self.final().items()]
        return "\n".join(lines)


def policy_stream(seed: int, trial: int, name: str) -> np.random.Generator:
    """The random stream of the policy called ``name`` in ``trial``: keyed by its name (a stable
    digest, the same on every machine and Python), never by its place in a list."""
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, trial, key, 1])


def run_policy(env: Environment, policy: Policy, horizon: int, seed: int,
               trial: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """One trial of one policy: (per-round regret (horizon,), per-user cumulative regret, seconds)."""
    env_rng = np.random.default_rng([seed, trial])
    env.reset(env_rng)
    policy.reset(env, horizon, policy_stream(seed, trial, policy.name))
    regret, user_regret = np.zeros(horizon), np.zeros(env.n_users)
    start = time.perf_counter()
    for t in range(horizon):
        round_ = env.next_round(env_rng)
        if len(round_.users) == 0:
            continue
        try:
            arms = np.asarray(policy.select(round_), dtype=int)
        except DivergenceError as err:
            raise DivergenceError(f"policy {policy.name!r}, round {t + 1}: {err}") from None
        if arms.shape != round_.users.shape or arms.min() < 0 or arms.max() >= env.n_arms:
            raise InvalidParameterError(f"policy {policy.name!r} returned invalid arms {arms!r} "
                                        f"for {len(round_.users)} users and {env.n_arms} arms.")
        expected = env.expected_rewards(round_)
        lost = expected.max(axis=1) - expected[np.arange(len(arms)), arms]
        regret[t] = lost.sum()
        np.add.at(user_regret, round_.users, lost)
        policy.update(round_, arms, env.rewards(round_, arms, env_rng))
    return regret, user_regret, time.perf_counter() - start


@validate_params({"horizon": HORIZON, "trials": REPEATS, "seed": NONNEGATIVE_INT, "progress": [BOOLEAN]})
def run_bandit(env: Environment, policies: Policy | list[Policy], horizon: int, seed: int = 0, *,
               trials: int = 1, progress: bool = True) -> BanditResult:
    """Run each policy for ``trials`` seeded trials of ``horizon`` rounds on ``env``.

    Examples
    --------
    >>> from mtl_opt.bandits import run_bandit
    >>> from mtl_opt.bandits.linear_envs import ModelC
    >>> from mtl_opt.bandits.linear_policies import OLSBandit, RMBandit
    >>> result = run_bandit(ModelC(d=5, s=1, M=4, K=3), [OLSBandit(), RMBandit()], horizon=100,
    ...                     seed=0, progress=False)
    >>> result.regret.shape              # (policies, trials, rounds)
    (2, 1, 100)
    """
    policies = [policies] if isinstance(policies, Policy) else list(policies)
    if not policies:
        raise InvalidParameterError("give at least one policy to run.")
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"policy names must be distinct; got {names}.")
    require_memory(8 * (horizon + env.n_users) * (len(policies) * trials + 1),
                   f"{len(policies)} policies x {trials} trials x ({horizon} rounds + "
                   f"{env.n_users} users) of regret", "lower the horizon or the number of trials")
    # the environment's parameters and one round's arm features when every user is served
    require_memory(8 * env.n_users * env.dim * (env.n_arms + 1),
                   f"a round of {env.n_users} users x {env.n_arms} arms x {env.dim} features",
                   "lower the number of users or the dimension")
    regret = np.zeros((len(policies), trials, horizon))
    user_regret = np.zeros((len(policies), trials, env.n_users))
    seconds = np.zeros((len(policies), trials))
    info = []
    bar = tqdm(total=trials * len(policies), unit="run", disable=not progress,
               desc=f"{len(policies)} policies x {horizon} rounds")
    for r in range(trials):
        for k, policy in enumerate(policies):
            bar.set_postfix_str(policy.name)
            regret[k, r], user_regret[k, r], seconds[k, r] = run_policy(env, policy, horizon, seed, r)
            bar.update()
        info.append(env.info())
    bar.close()
    return BanditResult(names, regret, user_regret, seconds, info)


def plot_regret(result: BanditResult, path=None, *, title: str = "", ax=None):
    """Mean cumulative regret curves (band: +- one sd over trials) on ``ax`` (a new Figure's
    when None), written to the image ``path`` when given; returns the Axes."""
    ax = new_axes() if ax is None else ax
    cumulative = result.cumulative()
    rounds = np.arange(1, cumulative.shape[2] + 1)
    for k, name in enumerate(result.policies):
        mean, sd = cumulative[k].mean(axis=0), cumulative[k].std(axis=0)
        ax.plot(rounds, mean, label=name, lw=1.2)
        ax.fill_between(rounds, mean - sd, mean + sd, alpha=0.15)
    ax.set(xlabel="round", ylabel="cumulative regret", title=title)
    ax.legend(fontsize=7)
    return drawn(ax, path)
