"""The bandit runner's accounting and the experiment-file reader, on a toy environment."""

import numpy as np
import pytest

from mtl_opt.bandits import Environment, Policy, Round, run_bandit
from mtl_opt.bandits.config import load_bandit_experiment
from mtl_opt.bandits.registry import POLICIES, build
from mtl_opt.errors import InstanceFileError, InvalidParameterError


class TwoUsers(Environment):
    """Users 0 and 1 are served every round; arm a of user u pays u + a (+ noise)."""

    n_users, n_arms, dim, sigma = 2, 3, 1, 1.0

    def reset(self, rng):
        self.shift = rng.normal()

    def next_round(self, rng):
        users = np.array([0, 1])
        return Round(users, rng.normal(size=(2, self.n_arms, self.dim)))

    def expected_rewards(self, round_):
        return self.shift + round_.users[:, None] + np.arange(self.n_arms)[None, :].astype(float)


class Fixed(Policy):
    """Always pulls ``arm``; records the rewards it saw."""

    def __init__(self, arm):
        self.arm, self.name = arm, f"arm{arm}"

    def reset(self, env, horizon, rng):
        self.seen = []

    def select(self, round_):
        return np.full(len(round_.users), self.arm)

    def update(self, round_, arms, rewards):
        self.seen.append(rewards.copy())


def test_regret_accounting_matches_hand_computation():
    result = run_bandit(TwoUsers(), [Fixed(2), Fixed(0), Fixed(1)], horizon=7, trials=2, progress=False)
    # the best arm is 2 for both users: pulling arm a loses 2 - a per user per round
    np.testing.assert_allclose(result.regret[0], 0.0)
    np.testing.assert_allclose(result.regret[1], 4.0)
    np.testing.assert_allclose(result.regret[2], 2.0)
    np.testing.assert_allclose(result.user_regret[1], 14.0)
    np.testing.assert_allclose(result.cumulative()[2, :, -1], 14.0)
    mean, sd, _ = result.final()["arm0"]
    assert (mean, sd) == (28.0, 0.0)


def test_policies_see_common_random_numbers_and_seeds_matter():
    a, b = Fixed(0), Fixed(0)
    b.name = "again"
    run_bandit(TwoUsers(), [a, b], horizon=5, seed=3, progress=False)
    np.testing.assert_array_equal(np.array(a.seen), np.array(b.seen))
    c = Fixed(0)
    run_bandit(TwoUsers(), c, horizon=5, seed=4, progress=False)
    assert not np.array_equal(np.array(a.seen), np.array(c.seen))


def test_invalid_arms_and_arguments_are_refused():
    with pytest.raises(InvalidParameterError, match="invalid arms"):
        run_bandit(TwoUsers(), Fixed(3), horizon=2, progress=False)
    with pytest.raises(InvalidParameterError, match="horizon"):
        run_bandit(TwoUsers(), Fixed(0), horizon=0, progress=False)
    with pytest.raises(InvalidParameterError, match="distinct"):
        run_bandit(TwoUsers(), [Fixed(0), Fixed(0)], horizon=2, progress=False)


def test_registry_names_unknown_policy_and_parameter():
    with pytest.raises(InvalidParameterError, match="unknown policy 'nope'"):
        build(POLICIES, "policy", "nope", {})


@pytest.mark.parametrize("text, message", [
    ("[policies]\nx = {}\n[run]\nhorizon = 3\n", "missing \\[environment\\]"),
    ("[environment]\nkind = 'nope'\n[policies]\nx = {}\n[run]\nhorizon = 3\n", "unknown environment"),
    ("[environment]\nkind = 'model_c'\n[policies]\n[run]\nhorizon = 3\n", "is empty"),
    ("[environment]\nkind = 'model_c'\n[policies]\nols = 1\n[run]\nhorizon = 3\n", "table of hyperparameters"),
    ("[environment]\nkind = 'model_c'\n[policies]\nols = {}\n[run]\nhorizn = 3\n", "unknown key"),
])
def test_experiment_file_errors_name_the_problem(tmp_path, text, message):
    path = tmp_path / "e.toml"
    path.write_text(text)
    with pytest.raises(InstanceFileError, match=message):
        load_bandit_experiment(path)


class RandomArm(Policy):
    """Pulls a uniformly random arm from its own stream: its regret shows which stream it got."""

    def __init__(self, name):
        self.name = name

    def reset(self, env, horizon, rng):
        self.rng, self.n_arms = rng, env.n_arms

    def select(self, round_):
        return self.rng.integers(self.n_arms, size=len(round_.users))

    def update(self, round_, arms, rewards):
        pass


def test_a_policys_stream_is_keyed_by_its_name_not_its_place_in_the_list():
    """Reordering (or shortening) the list leaves every policy's regret identical, bit for bit;
    two names get different streams."""
    from mtl_opt.bandits.linear_envs import ModelC
    from mtl_opt.bandits.linear_policies import OLSBandit, RMBandit

    def regrets(order):
        policies = {"rmb": RMBandit(), "ols": OLSBandit(), "random": RandomArm("random"),
                    "random2": RandomArm("random2")}
        for name, policy in policies.items():
            policy.name = name
        result = run_bandit(ModelC(d=5, s=1, M=4, K=3, sigma=0.5), [policies[n] for n in order],
                            horizon=60, seed=7, trials=2, progress=False)
        return dict(zip(result.policies, result.regret))

    forward = regrets(["rmb", "ols", "random", "random2"])
    backward = regrets(["random2", "random", "ols", "rmb"])
    alone = regrets(["random"])
    for name, regret in forward.items():
        np.testing.assert_array_equal(regret, backward[name])
    np.testing.assert_array_equal(forward["random"], alone["random"])
    assert not np.array_equal(forward["random"], forward["random2"])
