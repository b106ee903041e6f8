"""Metrics against hand-computed values; the sMTL simulation's promised structure."""

import numpy as np
import pytest

from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.metrics import coef_rmse, support_f1, support_heterogeneity, task_rmse
from mtl_opt.synthetic import smtl_simulation

# ------------------------------------------------------------------ metrics


def test_task_rmse_averages_per_task_rmse():
    # task 0: errors (0, 2) -> sqrt(2); task 1: errors (1, 1, 1) -> 1
    got = task_rmse([[1.0, 2.0], [0.0, 0.0, 0.0]], [[1.0, 4.0], [1.0, 1.0, 1.0]])
    assert got == pytest.approx((np.sqrt(2.0) + 1.0) / 2)


def test_coef_rmse_over_all_entries():
    assert coef_rmse([[1.0, 0.0], [0.0, 2.0]], np.zeros((2, 2))) == pytest.approx(np.sqrt(1.25))


def test_support_f1_pools_tasks():
    # selected {(0,0), (0,2), (1,2)}, true {(0,0), (0,1), (1,2)}: TP = 2 -> F1 = 4 / 6
    coef = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]
    true = [[1.0, 1.0, 0.0], [0.0, 0.0, 5.0]]
    assert support_f1(coef, true) == pytest.approx(2 / 3)
    assert support_f1(true, true) == 1.0


def test_support_f1_empty_supports_and_tolerance():
    zeros = np.zeros((2, 3))
    assert support_f1(zeros, zeros) == 1.0
    assert support_f1(zeros, np.eye(2, 3)) == 0.0
    assert support_f1(np.eye(2, 3), zeros) == 0.0
    assert support_f1(1e-9 * np.ones((2, 3)), zeros, tol=1e-6) == 1.0


def test_support_heterogeneity_is_mean_pairwise_jaccard_distance():
    coef = [[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0]]
    # pairs (0,1): 1 - 1/3, (0,2): 0, (1,2): 1 - 1/3
    assert support_heterogeneity(coef) == pytest.approx(4 / 9)
    assert support_heterogeneity([[1, 0], [2, 0]]) == 0.0
    assert support_heterogeneity([[1, 0], [0, 2]]) == 1.0
    assert support_heterogeneity([[1, 0]]) == 0.0
    assert support_heterogeneity(np.zeros((3, 2))) == 0.0


@pytest.mark.parametrize("call, match", [
    (lambda: task_rmse([[1.0]], [[1.0], [2.0]]), "one prediction array per task"),
    (lambda: task_rmse([[1.0, 2.0]], [[1.0]]), "task 0"),
    (lambda: task_rmse([[np.nan]], [[1.0]]), "non-finite"),
    (lambda: coef_rmse(np.zeros((2, 3)), np.zeros((3, 2))), "same|shape"),
    (lambda: support_f1(np.zeros(3), np.zeros(3)), "reshape"),
    (lambda: support_heterogeneity(np.zeros((2, 2, 2))), "2-D"),
])
def test_metrics_reject_bad_shapes(call, match):
    with pytest.raises(InvalidDataError, match=match):
        call()

# --------------------------------------------------------- sMTL simulation


def supports(coef):
    return [frozenset(np.flatnonzero(row)) for row in coef]


def test_supports_have_size_s_true_within_the_q_candidates():
    problem = smtl_simulation(p=60, K=5, n=10, s_true=4, q=9, seed=1)
    candidates = set(np.flatnonzero(problem.global_coef))
    assert len(candidates) == 9
    assert np.all((np.abs(problem.global_coef[list(candidates)]) >= 0.2)
                  & (np.abs(problem.global_coef[list(candidates)]) <= 0.5))
    assert all(len(s) == 4 and s <= candidates for s in supports(problem.coef))
    assert len(set(supports(problem.coef))) > 1
    assert list(problem.data.n_samples) == [20] * 5  # 2 n rows: n train + n test


def test_q_equal_to_s_true_gives_identical_supports_and_sigma_beta_zero_gives_mu():
    problem = smtl_simulation(p=40, K=4, n=5, s_true=6, q=6, sigma_beta=0.0, seed=2)
    assert len(set(supports(problem.coef))) == 1
    assert np.array_equal(problem.coef, np.tile(problem.global_coef, (4, 1)))


def test_noise_variance_of_every_task_lies_in_tau_range():
    tau = 1.5
    problem = smtl_simulation(p=5, K=6, n=20000, s_true=2, q=3, tau=tau, seed=3)
    for coef, X, y in zip(problem.coef, problem.data.Xs, problem.data.ys):
        variance = np.var(y - X @ coef)  # 40000 rows: relative sd of the estimate ~ 0.7%
        assert 0.97 * tau / 2 <= variance <= 1.03 * 2 * tau


def test_design_has_ar1_covariance():
    rho = 0.8
    X = smtl_simulation(p=6, K=1, n=20000, s_true=1, q=1, rho=rho, seed=4).data.Xs[0]
    corr = np.corrcoef(X, rowvar=False)
    # 40000 rows: the sd of a sample correlation is below 0.005; allow 0.02
    assert np.allclose(np.diag(corr, 1), rho, atol=0.02)
    assert np.allclose(np.diag(corr, 2), rho**2, atol=0.02)
    assert np.allclose(X.var(axis=0), 1.0, atol=0.05)


def test_same_seed_same_problem_different_seed_different_problem():
    a, b, c = (smtl_simulation(p=20, K=3, n=8, s_true=3, q=5, seed=s) for s in (7, 7, 8))
    assert np.array_equal(a.coef, b.coef) and np.array_equal(a.global_coef, b.global_coef)
    assert all(np.array_equal(x, y) for x, y in zip(a.data.Xs, b.data.Xs))
    assert all(np.array_equal(x, y) for x, y in zip(a.data.ys, b.data.ys))
    assert not np.array_equal(a.coef, c.coef)


@pytest.mark.parametrize("kwargs, match", [
    ({"q": 5, "s_true": 6}, "s_true <= q"),
    ({"q": 300}, "q <= p"),
    ({"s_true": 0}, "'s_true' parameter of smtl_simulation must be an int in the range \\[1, inf\\)"),
    ({"rho": 1.0}, "rho"),
    ({"rho": -0.1}, "rho"),
    ({"tau": 0.0}, "tau"),
    ({"sigma_beta": -1.0}, "sigma_beta"),
    ({"n": 0}, "'n' parameter of smtl_simulation must be"),
    ({"p": 25.0}, "'p' parameter of smtl_simulation must be an int"),
])
def test_smtl_simulation_rejects_bad_arguments(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        smtl_simulation(**kwargs)
