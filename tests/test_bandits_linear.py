"""MOLAR's multitask linear bandits: Model-C / Model-P environments, MOLARB and its baselines."""

import re
from types import SimpleNamespace

import numpy as np
import pytest

from mtl_opt.bandits import Policy, Round, run_bandit, run_policy
from mtl_opt.bandits.linear_envs import ModelC, ModelP
from mtl_opt.bandits.linear_policies import LassoBandit, OLSBandit, RMBandit, is_batch_end
from mtl_opt.bandits.molarb import MOLARB
from mtl_opt.cli import main
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators.molar import MOLAR

EXAMPLE = "instances/molarb_model_c.toml"
SMALL = dict(d=5, s=1, M=4, K=3, sigma=0.5)


def all_policies():
    return [MOLARB(sigma=0.5), OLSBandit(), LassoBandit(), RMBandit()]


# ---------------------------------------------------------------- environments

@pytest.mark.parametrize("Env", [ModelC, ModelP])
def test_expected_rewards_are_x_beta_and_parameters_are_sparse_deviations(Env):
    env = Env()                                        # the paper's d, s, M, K = 30, 2, 20, 3
    rng = np.random.default_rng(1)
    env.reset(rng)
    round_ = env.next_round(rng)
    assert len(round_.users) > 0 and round_.contexts.shape == (len(round_.users), 3, 30)
    expected = env.expected_rewards(round_)
    for i, m in enumerate(round_.users):
        for a in range(3):
            if Env is ModelC:
                truth = round_.contexts[i, a] @ env.beta[m]
            else:
                assert np.array_equal(round_.contexts[i, a], round_.contexts[i, 0])   # one context
                truth = round_.contexts[i, 0] @ env.beta[m, a]
            assert expected[i, a] == pytest.approx(truth, abs=1e-12)
    families = [env.beta] if Env is ModelC else [env.beta[:, a] for a in range(3)]
    for beta in families:                              # (M, d): unit norm, <= s coordinates off beta*
        assert np.allclose(np.linalg.norm(beta, axis=1), 1.0)
        values, counts = zip(*(np.unique(col, return_counts=True) for col in beta.T))
        global_coef = np.array([v[np.argmax(c)] for v, c in zip(values, counts)])   # majority value
        assert np.all((beta != global_coef).sum(axis=1) <= 2)


def test_rewards_are_expected_plus_gaussian_noise():
    env = ModelC(**SMALL, activation=[1.0] * 4)
    rng = np.random.default_rng(2)
    env.reset(rng)
    round_ = env.next_round(rng)
    arms = np.array([0, 1, 2, 0])
    draws = np.array([env.rewards(round_, arms, rng) for _ in range(4000)])
    mean = env.expected_rewards(round_)[np.arange(4), arms]
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * 0.5 / np.sqrt(4000))
    assert np.allclose(draws.std(axis=0), 0.5, atol=0.03)


def test_activation_frequencies_match_p():
    p = np.array([0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
    env = ModelP(d=3, s=1, M=6, K=2, activation=p.tolist())
    rng = np.random.default_rng(3)
    env.reset(rng)
    n = 5000
    hits = np.zeros(6)
    for _ in range(n):
        hits[env.next_round(rng).users] += 1
    assert np.all(np.abs(hits / n - p) <= 4.5 * np.sqrt(p * (1 - p) / n))   # exact at p = 0 and 1
    assert env.info() == {"activation": p.tolist()}
    free = ModelC(**SMALL)                             # p_m ~ U[0, 1], redrawn at every reset
    free.reset(np.random.default_rng(4))
    first = free.info()["activation"]
    free.reset(np.random.default_rng(5))
    assert len(first) == 4 and all(0 <= q <= 1 for q in first) and first != free.info()["activation"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(d=5, s=6), "s \\(heterogeneous"), (dict(K=1), "'K' parameter"),
    (dict(M=2, activation=[0.5]), "M = 2 probabilities"), (dict(M=1, activation=[1.5]), "in \\[0, 1\\]"),
    (dict(sigma=-1.0), "'sigma' parameter")])
def test_environment_arguments_are_checked(kwargs, message):
    with pytest.raises(InvalidParameterError, match=message):
        ModelC(**kwargs)


# ---------------------------------------------------------------- batching and eligibility

def test_batch_ends_double_from_h0():
    for h0 in (1, 3):
        ends = [t for t in range(1, 200) if is_batch_end(t, h0)]
        assert ends == [h0 * 2**q for q in range(8) if h0 * 2**q < 200]


def drive(policy, served, *, n_arms=2, dim=2, per_arm=False, seed=0):
    """Run ``policy`` on rounds serving ``served[t]``; record every pulled (user, arm, x, y, t)."""
    env = SimpleNamespace(n_users=1 + max(max(s) for s in served if s), n_arms=n_arms, dim=dim,
                          per_arm=per_arm)
    rng = np.random.default_rng(seed)
    policy.reset(env, len(served), np.random.default_rng(seed + 1))
    beta = rng.standard_normal((env.n_users, n_arms, dim))
    log = []
    for t, users in enumerate(served, start=1):
        users = np.array(users)
        x = rng.standard_normal((len(users), 1 if per_arm else n_arms, dim))
        round_ = Round(users, np.repeat(x, n_arms, axis=1) if per_arm else x)
        arms = policy.select(round_)
        pulled = round_.contexts[np.arange(len(users)), arms]
        mean = np.einsum("bd,bd->b", pulled, beta[users, arms if per_arm else 0])
        y = mean + 0.5 * rng.standard_normal(len(users))
        policy.update(round_, arms, y)
        log += [(u, a, xi, yi, t) for u, a, xi, yi in zip(users, arms, pulled, y)]
    return log


def rows(log, user, t_from, t_to, arm=None):
    """(X, y) of ``user``'s pulls in rounds t_from..t_to (only ``arm``'s, if given)."""
    picked = [(x, y) for u, a, x, y, t in log if u == user and t_from <= t <= t_to and arm in (None, a)]
    return np.array([x for x, _ in picked]), np.array([y for _, y in picked])


def lstsq(X, y):
    return np.linalg.lstsq(X, y, rcond=None)[0]


def test_eligibility_rule_carries_and_empties_buffers():
    # user 0 every round, user 1 in even rounds, user 2 only in round 1; min_samples = 3
    served = [[0, 2] if t == 1 else ([0, 1] if t % 2 == 0 else [0]) for t in range(1, 17)]
    policy = OLSBandit(min_samples=3)
    log = drive(policy, served)
    assert [(t, units.tolist()) for t, units in policy.refits_] == [
        (1, []), (2, []), (4, [0]), (8, [0, 1]), (16, [0, 1])]
    # at t = 16: user 0 from its buffer (rounds 9-16), user 1 from rounds 9-16; user 2 never fitted
    np.testing.assert_allclose(policy.coef_[0], lstsq(*rows(log, 0, 9, 16)), atol=1e-10)
    np.testing.assert_allclose(policy.coef_[1], lstsq(*rows(log, 1, 9, 16)), atol=1e-10)
    assert np.all(policy.coef_[2] == 0)
    history = OLSBandit(min_samples=3, keep_history=True)
    log = drive(history, served)
    np.testing.assert_allclose(history.coef_[1], lstsq(*rows(log, 1, 1, 16)), atol=1e-10)


def test_carried_observations_enter_the_next_estimate():
    # user 1 has 2 pulls by t = 4 (not eligible) and 4 by t = 8: its first fit uses all four
    served = [[0, 1] if t % 2 == 0 else [0] for t in range(1, 9)]
    policy = OLSBandit(min_samples=3)
    log = drive(policy, served)
    assert policy.refits_[-1][1].tolist() == [0, 1]
    np.testing.assert_allclose(policy.coef_[1], lstsq(*rows(log, 1, 1, 8)), atol=1e-10)


def test_molarb_step_is_molar_on_the_batch_model_c():
    policy = MOLARB(sigma=0.5, min_samples=8)
    log = drive(policy, [[0, 1, 2, 3, 4]] * 16, n_arms=3, dim=3)
    assert [units.tolist() for _, units in policy.refits_] == [[], [], [], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]
    batch = MultiTaskData(*zip(*(rows(log, m, 9, 16) for m in range(5))))
    reference = MOLAR(sigma=0.5, c_gamma=1.0, threshold="hard", fit_intercept=False).fit(batch)
    np.testing.assert_allclose(policy.coef_, reference.coef_, atol=1e-10)


def test_molarb_use_hist_takes_the_median_from_the_batch_and_shrinks_all_data():
    policy = MOLARB(sigma=0.5, min_samples=5, keep_history=True, c_gamma=3.0)
    log = drive(policy, [[0, 1, 2]] * 16, n_arms=2, dim=3, seed=0)
    assert [units.tolist() for _, units in policy.refits_][-2:] == [[0, 1, 2], [0, 1, 2]]
    batch = np.array([lstsq(*rows(log, m, 9, 16)) for m in range(3)])
    center = np.median(batch, axis=0)                # equal weights, 3 instances: the plain median
    expected = []
    for m in range(3):
        X, y = rows(log, m, 1, 16)
        local = lstsq(X, y)
        cut = 3.0 * np.sqrt(np.log(3)) * 0.5 * np.sqrt(np.diag(np.linalg.inv(X.T @ X)))
        expected.append(np.where(np.abs(local - center) <= cut, center, local))
    np.testing.assert_allclose(policy.coef_, expected, atol=1e-10)
    distance = np.abs(policy.coef_ - center)
    assert 0 < np.sum(distance <= 1e-10) < 9            # both branches of the thresholding occur,
    assert np.all((distance <= 1e-10) | (distance > 1e-3))  # told apart far beyond rounding


def test_molarb_model_p_pools_each_arm_over_instances():
    policy = MOLARB(sigma=0.5, min_samples=4, threshold="soft")
    log = drive(policy, [list(range(6))] * 32, n_arms=2, dim=2, per_arm=True, seed=7)
    t, units = policy.refits_[-1]
    assert t == 32
    for arm in range(2):
        # eligible (instance, arm) pairs: >= 4 pulls of that arm in rounds 17-32 (plus any carried)
        carried = {m: max([end for end, fitted in policy.refits_[:-1] if m * 2 + arm in fitted], default=0)
                   for m in range(6)}
        pairs = [(m, rows(log, m, carried[m] + 1, 32, arm)) for m in range(6)]
        eligible = [(m, X, y) for m, (X, y) in pairs if len(y) >= 4]
        assert sorted(m * 2 + arm for m, _, _ in eligible) == sorted(u for u in units if u % 2 == arm)
        if len(eligible) > 1:
            reference = MOLAR(sigma=0.5, threshold="soft", fit_intercept=False).fit(
                MultiTaskData([X for _, X, _ in eligible], [y for _, _, y in eligible]))
            np.testing.assert_allclose(policy.coef_[[m * 2 + arm for m, _, _ in eligible]],
                                       reference.coef_, atol=1e-10)


def test_policy_arguments_are_checked():
    with pytest.raises(InvalidParameterError, match="'threshold' parameter of MOLARB"):
        MOLARB(threshold="medium")
    with pytest.raises(InvalidParameterError, match="'h0' parameter of LassoBandit"):
        LassoBandit(h0=0)
    with pytest.raises(InvalidParameterError, match="least squares in dimension 5 needs at least 6"):
        run_policy(ModelC(**SMALL), RMBandit(min_samples=5), 10, seed=0)


# ---------------------------------------------------------------- runs

class Oracle(Policy):
    """Knows the environment's parameters: pulls the best arm."""

    name = "oracle"

    def reset(self, env, horizon, rng):
        self.env = env

    def select(self, round_):
        return self.env.expected_rewards(round_).argmax(axis=1)

    def update(self, round_, arms, rewards):
        pass


@pytest.mark.parametrize("Env", [ModelC, ModelP])
def test_same_seed_same_regret_and_oracle_has_none(Env):
    env = Env(**SMALL)
    first = run_bandit(env, all_policies() + [Oracle()], 120, seed=3, trials=2, progress=False)
    again = run_bandit(env, all_policies() + [Oracle()], 120, seed=3, trials=2, progress=False)
    other = run_bandit(env, all_policies(), 120, seed=4, trials=2, progress=False)
    np.testing.assert_array_equal(first.regret, again.regret)
    for k in range(4):
        assert not np.array_equal(first.regret[k], other.regret[k])
        assert first.regret[k].sum() > 0
    assert np.all(first.regret[4] == 0) and first.regret.shape == (5, 2, 120)


def test_ols_bandit_regret_grows_sublinearly():
    env = ModelC(d=5, s=1, M=3, K=3, sigma=0.5, activation=[1.0, 1.0, 1.0])
    result = run_bandit(env, OLSBandit(), 1600, seed=0, trials=3, progress=False)
    cumulative = result.cumulative()[0].mean(axis=0)
    first, last = cumulative[399], cumulative[-1] - cumulative[1199]       # rounds 1-400 vs 1201-1600
    assert last < 0.25 * first


# ---------------------------------------------------------------- experiment files and the runner

def test_example_file_runs_end_to_end(tmp_path, capsys):
    plot = tmp_path / "regret.png"
    assert main(["bandit", EXAMPLE, "--quiet", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "ModelC: 20 users, 3 arms, dim 30; 3 trials x 1000 rounds" in out
    regret = {row.split("|")[1].strip(): float(row.split("|")[2]) for row in out.splitlines()
              if row.startswith("| ") and row.split("|")[1].strip() in ("molarb", "ols", "lasso", "rm")}
    # the README's sentence, at the shipped settings: MOLARB beats OLSB and LASSOB but not RMB
    assert regret["rm"] < regret["molarb"] < min(regret["lasso"], regret["ols"]), regret
    assert plot.stat().st_size > 0


def test_model_p_file_runs(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text('[environment]\nkind = "model_p"\nd = 4\nM = 5\n\n'
                    '[policies]\nmolarb = { keep_history = true }\nrm = { min_samples = 8 }\n\n'
                    '[run]\nhorizon = 150\n')
    assert main(["bandit", str(path), "--quiet"]) == 0
    assert "ModelP: 5 users, 3 arms, dim 4; 1 trials x 150 rounds" in capsys.readouterr().out


@pytest.mark.parametrize("policies, message", [
    ("molarbb = {}", "unknown policy 'molarbb'"),
    ("molarb = { c_gama = 1.0 }", "has no parameter\\(s\\) 'c_gama'"),
    ("ols = { min_samples = 0 }", "'min_samples' parameter of OLSBandit")])
def test_bad_experiment_files_exit_with_code_2(tmp_path, capsys, policies, message):
    path = tmp_path / "bad.toml"
    path.write_text(f'[environment]\nkind = "model_c"\n\n[policies]\n{policies}\n\n[run]\nhorizon = 10\n')
    assert main(["bandit", str(path), "--quiet"]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_runner_refuses_out_of_range_arms():
    class Greedy(Oracle):
        def select(self, round_):
            return np.full(len(round_.users), self.env.n_arms)   # one past the last arm

    with pytest.raises(InvalidParameterError, match="invalid arms"):
        run_bandit(ModelC(**SMALL), Greedy(), 5, progress=False)
