"""Sparse multi-task best subset: objective, refits, swap gains, and BCD quality vs brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import VARIANTS, SparseProblem
from mtl_opt.solvers.bcd import _project, apply_swap, best_swap, fit_bcd


def penalties(variant, rng):
    _, bbar, zbar = VARIANTS[variant]
    return dict(lambda_ridge=float(rng.uniform(0.01, 0.2)),
                lambda_bbar=float(rng.uniform(0.05, 0.5)) if bbar else 0.0,
                lambda_zbar=float(rng.uniform(0.02, 0.2)) if zbar else 0.0)


def random_problem(variant, seed, K=2, p=10, n=20, s=3, intercept=False):
    rng = np.random.default_rng(seed)
    truth = np.zeros(p)
    truth[rng.choice(p, s, replace=False)] = rng.uniform(0.5, 1.5, s)
    Xs = [rng.normal(size=(n, p)) for _ in range(K)]
    ys = [X @ (truth + 0.3 * rng.normal(size=p) * (truth != 0)) + rng.normal(size=n) for X in Xs]
    data = MultiTaskData(Xs, ys)
    return SparseProblem.from_data(data, variant=variant, s=s, fit_intercept=intercept,
                                   **penalties(variant, rng)), rng


def naive_objective(problem, B):
    K, p = B.shape
    total = 0.0
    for k in range(K):
        for i in range(len(problem.ys[k])):
            total += (problem.ys[k][i] - sum(problem.Xs[k][i, j] * B[k, j] for j in range(p))) ** 2 / (2 * len(problem.ys[k]))
    bbar = [sum(B[k, j] for k in range(K)) / K for j in range(p)]
    z = [[1.0 if B[k, j] != 0 else 0.0 for j in range(p)] for k in range(K)]
    zbar = [sum(z[k][j] for k in range(K)) / K for j in range(p)]
    for k in range(K):
        for j in range(p):
            total += problem.lambda_ridge / 2 * B[k, j] ** 2
            total += problem.lambda_bbar / 2 * (B[k, j] - bbar[j]) ** 2
            total += problem.lambda_zbar / 2 * (z[k][j] - zbar[j]) ** 2
    return total


def random_feasible(problem, rng):
    K, p = problem.n_tasks, problem.n_features
    dense = rng.normal(size=(K, p))
    return _project(problem, dense if problem.common_support else dense * (rng.random((K, p)) < 0.4))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", range(3))
def test_objective_matches_a_naive_loop(variant, seed):
    problem, rng = random_problem(variant, seed, K=3, p=6, n=8)
    B = random_feasible(problem, rng)
    assert problem.objective(B) == pytest.approx(naive_objective(problem, B), rel=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", range(3))
def test_refit_matches_a_generic_least_squares_solve(variant, seed):
    """Stack loss, ridge and Bbar rows into one least-squares problem and solve it with lstsq."""
    problem, rng = random_problem(variant, seed, K=3, p=7, n=15)
    support = random_feasible(problem, rng) != 0
    K, p = support.shape
    index = {(k, j): i for i, (k, j) in enumerate(zip(*np.nonzero(support)))}
    rows, rhs = [], []
    for k in range(K):
        w = np.sqrt(1 / (2 * len(problem.ys[k])))
        for x, y in zip(problem.Xs[k], problem.ys[k]):
            row = np.zeros(len(index))
            for (kk, j), i in index.items():
                if kk == k:
                    row[i] = w * x[j]
            rows.append(row)
            rhs.append(w * y)
    for (k, j), i in index.items():
        row = np.zeros(len(index))
        row[i] = np.sqrt(problem.lambda_ridge / 2)
        rows.append(row)
        rhs.append(0.0)
    for k in range(K):
        for j in range(p):  # sqrt(lb/2) (beta_kj - mean_l beta_lj)
            row = np.zeros(len(index))
            for l in range(K):
                if (l, j) in index:
                    row[index[l, j]] += np.sqrt(problem.lambda_bbar / 2) * ((l == k) - 1 / K)
            rows.append(row)
            rhs.append(0.0)
    solution = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    expected = np.zeros((K, p))
    for (k, j), i in index.items():
        expected[k, j] = solution[i]
    assert np.allclose(problem.refit(support), expected, atol=1e-10)


@settings(max_examples=80, deadline=None)
@given(variant=st.sampled_from(list(VARIANTS)), seed=st.integers(0, 10**6), K=st.integers(1, 4),
       p=st.integers(3, 9), s=st.integers(1, 3), density=st.floats(0.1, 1.0))
def test_swap_gain_equals_the_actual_change_in_F(variant, seed, K, p, s, density):
    """Predicted gain of the chosen move (swap, or pure addition when a support has room) is exact."""
    problem, rng = random_problem(variant, seed, K=K, p=p, n=12, s=s)
    dense = rng.normal(size=(K, p))
    B = _project(problem, dense if problem.common_support else dense * (rng.random((K, p)) < density))
    move = best_swap(problem, B)
    if move is None:  # every feature is already in every support
        assert np.all(B != 0)
        return
    after = apply_swap(B, move)
    assert problem.feasible(after)
    assert move[0] == pytest.approx(problem.objective(after) - problem.objective(B), rel=1e-9, abs=1e-12)


def exhaustive_best_swap_value(problem, B):
    """min F over single swaps, each new coefficient optimized numerically (scipy), not by formula."""
    best = problem.objective(B)
    K = problem.n_tasks
    if problem.common_support:
        rows = np.flatnonzero(B.any(axis=0))
        drops = list(rows) + ([None] if rows.size < problem.s else [])
        for i, j in itertools.product(drops, np.flatnonzero(~B.any(axis=0))):
            def f(t, i=i, j=j):
                C = B.copy()
                if i is not None:
                    C[:, i] = 0
                C[:, j] = t
                return problem.objective(C)
            best = min(best, minimize(f, np.full(K, 0.1), method="BFGS", options={"gtol": 1e-10}).fun)
        return best
    for k in range(K):
        support = np.flatnonzero(B[k])
        drops = list(support) + ([None] if support.size < problem.s else [])
        for i, j in itertools.product(drops, np.flatnonzero(B[k] == 0)):
            def f(t, k=k, i=i, j=j):
                C = B.copy()
                if i is not None:
                    C[k, i] = 0
                C[k, j] = t
                return problem.objective(C)
            best = min(best, minimize_scalar(f, bracket=(-1, 1), tol=1e-12).fun)
    return best


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", range(2))
def test_bcd_result_admits_no_improving_single_swap(variant, seed):
    problem, _ = random_problem(variant, 100 + seed, K=2, p=8, n=20)
    B, _, _ = fit_bcd(problem)
    value = problem.objective(B)
    assert exhaustive_best_swap_value(problem, B) >= value - 1e-8 * abs(value)


def brute_force_optimum(problem):
    """Enumerate supports: size <= s with a Zbar term, else exactly s (a superset never costs more)."""
    K, p, s = problem.n_tasks, problem.n_features, problem.s
    sizes = range(s + 1) if problem.lambda_zbar else [s]
    supports = [c for r in sizes for c in itertools.combinations(range(p), r)]

    def mask(rows):
        m = np.zeros((len(rows), p), bool)
        for k, cols in enumerate(rows):
            m[k, list(cols)] = True
        return m

    if problem.common_support:
        return min(problem.objective(problem.refit(mask([c] * K))) for c in supports)
    if problem.lambda_bbar:
        return min(problem.objective(problem.refit(mask(rows)))
                   for rows in itertools.product(supports, repeat=K))
    # no Bbar: the continuous parts decouple, so refit each task once per support
    single = []
    for k in range(K):
        task = SparseProblem(problem.Xs[k:k + 1], problem.ys[k:k + 1], problem.x_means[k:k + 1],
                             problem.y_means[k:k + 1], "l0l2", s, problem.lambda_ridge, 0.0, 0.0)
        single.append({c: task.objective(task.refit(mask([c]))) for c in supports})
    best = np.inf
    for rows in itertools.product(supports, repeat=K):
        counts = mask(rows).sum(axis=0)
        zbar = 0.5 * problem.lambda_zbar * np.sum(counts - counts**2 / K)
        best = min(best, sum(single[k][c] for k, c in enumerate(rows)) + zbar)
    return best


INSTANCES = [(variant, seed) for variant in VARIANTS for seed in range(5)]  # 30 instances


def test_bcd_against_brute_force_on_30_tiny_instances():
    """Never below the enumerated optimum; within 1e-8 relative of it on at least 27 of 30."""
    hits, misses = 0, []
    for variant, seed in INSTANCES:
        problem, _ = random_problem(variant, 1000 + seed)
        value = problem.objective(fit_bcd(problem)[0])
        optimum = brute_force_optimum(problem)
        assert value >= optimum - 1e-9 * abs(optimum), (variant, seed, value, optimum)
        if value <= optimum * (1 + 1e-8):
            hits += 1
        else:
            misses.append((variant, seed, value / optimum - 1))
    assert hits >= 27, misses


@pytest.mark.parametrize("params, phrase", [
    (dict(s=0), "'s' parameter"),
    (dict(s=50), "s must be an int in"),
    (dict(lambda_ridge=-1.0), "'lambda_ridge' parameter"),
    (dict(variant="lasso"), "'variant' parameter"),
    (dict(variant="l0l2", lambda_zbar=0.1), "has no zbar term"),
])
def test_bad_hyperparameters_are_clear_errors(params, phrase):
    problem, _ = random_problem("l0l2", 0)
    data = MultiTaskData([np.ones((5, 1)) * np.arange(5)[:, None] + np.random.default_rng(0).normal(size=(5, 10))] * 2,
                         [np.arange(5.0)] * 2)
    with pytest.raises(InvalidParameterError, match=phrase):
        SparseMTL(**params).fit(data)


def test_estimator_reports_original_scale_and_warm_starts():
    rng = np.random.default_rng(7)
    Xs = [rng.normal(loc=3, scale=[1, 2, 5, 1, 1, 3], size=(40, 6)) for _ in range(2)]
    ys = [X[:, 0] - 0.5 * X[:, 2] + 1 + 0.1 * rng.normal(size=40) for X in Xs]
    data = MultiTaskData(Xs, ys)
    model = SparseMTL(variant="zbar_l2", s=2, lambda_ridge=1e-4, lambda_zbar=0.01).fit(data)
    assert np.array_equal(model.support_[:, [0, 2]], np.ones((2, 2), bool))
    assert np.allclose(model.coef_[:, [0, 2]], [[1, -0.5]] * 2, atol=0.05)
    assert np.allclose(model.intercept_, 1, atol=0.3)
    predictions = model.predict(data)
    assert all(np.sqrt(np.mean((p - y) ** 2)) < 0.2 for p, y in zip(predictions, ys))
    warm = SparseMTL(variant="zbar_l2", s=2, lambda_ridge=1e-4, lambda_zbar=0.01).fit(
        data, init=model.result_)
    assert warm.result_.objective <= model.result_.objective + 1e-12
    assert warm.n_iter_ <= model.n_iter_
    assert model.result_.status == "heuristic" and model.result_.lower_bound is None


def test_cross_validation_over_a_sparse_path_prefers_enough_features():
    from mtl_opt.cv import cross_validate
    from mtl_opt.synthetic import smtl_simulation
    data = smtl_simulation(p=30, K=3, n=60, s_true=4, q=4, tau=0.25, seed=3).data
    cv = cross_validate(SparseMTL(variant="zbar_l2", lambda_zbar=0.01), {"s": [1, 2, 4, 8],
                        "lambda_ridge": [1e-3, 1e-1]}, data, n_splits=3, seed=0, progress=False)
    assert cv.best_params["s"] >= 4
    assert cv.mean[[p["s"] for p in cv.points].index(1)] > cv.mean[cv.best_index]
    assert isinstance(cv.best_estimator, SparseMTL) and cv.best_estimator.coef_.shape == (3, 30)


@pytest.mark.parametrize("lambda_zbar", [0.2, 1.0])
def test_a_zbar_fit_is_never_worse_than_the_common_support_fit(lambda_zbar):
    """A shared support has no Zbar cost, so zbar_l2's optimum is at most cs_l2's (a bcd regression seen at large lambda_zbar)."""
    from mtl_opt.synthetic import smtl_simulation
    data = smtl_simulation(p=60, K=4, n=40, s_true=6, q=8, seed=5).data
    zbar = SparseMTL(variant="zbar_l2", s=6, lambda_ridge=1.0, lambda_zbar=lambda_zbar).fit(data)
    shared = SparseMTL(variant="cs_l2", s=6, lambda_ridge=1.0).fit(data)
    assert zbar.result_.objective <= shared.result_.objective * (1 + 1e-12)
