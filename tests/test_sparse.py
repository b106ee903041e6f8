"""Sparse multi-task best subset: objective, refits, swap gains, and BCD quality vs brute force."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import VARIANTS, SparseProblem, zbar_penalty
from mtl_opt.solvers.sparse.bcd import _project, _RefitModel, _swap_table, best_swap, fit_bcd, swapped_support
from mtl_opt.deadline import Deadline


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
    """F at one B, and at each B of a stack (``objectives``, which bnb ranks its removals with)."""
    problem, rng = random_problem(variant, seed, K=3, p=6, n=8)
    B = random_feasible(problem, rng)
    assert problem.objective(B) == pytest.approx(naive_objective(problem, B), rel=1e-12)
    stack = np.array([random_feasible(problem, rng) for _ in range(4)])
    naive = [naive_objective(problem, C) for C in stack]
    assert problem.objectives(stack) == pytest.approx(naive, rel=1e-12)


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
@given(variant=st.sampled_from(list(VARIANTS)), seed=st.integers(0, 10**6), K=st.integers(1, 3),
       p=st.integers(3, 8), s=st.integers(1, 3), density=st.floats(0.1, 1.0))
def test_swap_table_equals_refit_and_evaluate_for_every_pair(variant, seed, K, p, s, density):
    """Every (drop, add) entry of the Schur-complement table is the change of F after an exact refit."""
    problem, rng = random_problem(variant, seed, K=K, p=p, n=12, s=s)
    dense = rng.normal(size=(K, p))
    support = _project(problem, dense if problem.common_support
                       else dense * (rng.random((K, p)) < density)) != 0
    before = problem.objective(problem.refit(support))
    model = _RefitModel(problem, support)
    actual_changes = []
    for task in [None] if problem.common_support else range(K):
        table, drops = _swap_table(problem, model, task)
        selected = np.flatnonzero(support[0 if task is None else task])
        assert sorted(d for d in drops if d is not None) == list(selected)
        assert (None in drops) == (selected.size < s)
        for (d, drop), add in itertools.product(enumerate(drops), np.setdiff1d(np.arange(p), selected)):
            after = swapped_support(support, (None, task, drop, add))
            actual = problem.objective(problem.refit(after)) - before
            zbar = 0.5 * problem.lambda_zbar * (zbar_penalty(after) - zbar_penalty(support))
            assert table[d, add] + zbar == pytest.approx(actual, rel=1e-8, abs=1e-10)
            actual_changes.append(actual)
        assert np.all(np.isinf(table[:, selected]))
    move = best_swap(problem, problem.refit(support))
    if move is None:
        assert not actual_changes
        return
    after = swapped_support(support, move)
    assert problem.feasible(problem.refit(after))
    assert move[0] == pytest.approx(min(actual_changes), rel=1e-8, abs=1e-10)
    assert problem.objective(problem.refit(after)) - before == pytest.approx(move[0], rel=1e-8, abs=1e-10)


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
    B = fit_bcd(problem, deadline=Deadline()).coef
    value = problem.objective(B)
    assert exhaustive_best_swap_value(problem, B) >= value - 1e-8 * abs(value)


def brute_force_optimum(problem):
    """Enumerate supports z (the MIP definition: beta free on z, 0 off it; z counts in the Zbar
    term even where the refit's coefficient is 0): size <= s with a Zbar term, else exactly s (a
    superset never costs more)."""
    K, p, s = problem.n_tasks, problem.n_features, problem.s
    sizes = range(s + 1) if problem.lambda_zbar else [s]
    supports = [c for r in sizes for c in itertools.combinations(range(p), r)]

    def mask(rows):
        m = np.zeros((len(rows), p), bool)
        for k, cols in enumerate(rows):
            m[k, list(cols)] = True
        return m

    if problem.common_support:
        return min(problem.objective(problem.refit(mask([c] * K)), mask([c] * K)) for c in supports)
    if problem.lambda_bbar:
        return min(problem.objective(problem.refit(mask(rows)), mask(rows))
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
    """Never below the enumerated optimum; within 1e-8 relative of it on at least 27 of 30.

    p=8 keeps enumerating every pair of supports for the Bbar variants to seconds.
    """
    hits, misses = 0, []
    for variant, seed in INSTANCES:
        problem, _ = random_problem(variant, 1000 + seed, p=8)
        value = problem.objective(fit_bcd(problem, deadline=Deadline()).coef)
        optimum = brute_force_optimum(problem)
        assert value >= optimum - 1e-9 * abs(optimum), (variant, seed, value, optimum)
        if value <= optimum * (1 + 1e-8):
            hits += 1
        else:
            misses.append((variant, seed, value / optimum - 1))
    assert hits >= 27, misses


@pytest.mark.parametrize("variant", VARIANTS)
def test_collinear_supports_without_ridge_still_fit(variant):
    """n_k < s, a duplicated column and lambda_ridge = 0: the swap model is singular, the fit is not."""
    rng = np.random.default_rng(7)
    Xs = [rng.normal(size=(4, 7)) for _ in range(2)]
    Xs[0][:, 3] = Xs[0][:, 2]
    ys = [X[:, :3].sum(axis=1) + rng.normal(size=4) for X in Xs]
    _, bbar, zbar = VARIANTS[variant]
    problem = SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=5, fit_intercept=False,
                                      lambda_bbar=0.3 if bbar else 0.0, lambda_zbar=0.05 if zbar else 0.0)
    B = fit_bcd(problem, deadline=Deadline()).coef
    optimum = brute_force_optimum(problem)
    assert problem.feasible(B)
    assert optimum - 1e-9 <= problem.objective(B) <= problem.objective(np.zeros_like(B))


@pytest.mark.parametrize("variant", VARIANTS)
def test_feasible_counts_the_shared_set_not_each_rows_nonzeros(variant):
    """cs_*: rows inside one set of <= s features are feasible even with an exact 0; others per row."""
    problem, _ = random_problem(variant, 0, K=2, p=5, s=2)
    inside = np.array([[1.0, 2.0, 0, 0, 0], [3.0, 0.0, 0, 0, 0]])   # task 1 has a 0 on the shared set
    spread = np.array([[1.0, 2.0, 0, 0, 0], [3.0, 0.0, 4.0, 0, 0]])  # 3 features in all, 2 per row
    too_many = np.array([[1.0, 2.0, 5.0, 0, 0], [0, 0, 0, 0, 0]])
    assert problem.feasible(inside)
    assert problem.feasible(spread) is not problem.common_support
    assert not problem.feasible(too_many)


@pytest.mark.parametrize("params, phrase", [
    (dict(s=0), "'s' parameter"),
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


def test_s_above_p_is_capped_by_the_estimator_and_refused_by_the_problem():
    """SparseMTL caps s at p (the same problem); SparseProblem, stated directly, still refuses it."""
    data = MultiTaskData([np.random.default_rng(0).normal(size=(8, 3))] * 2,
                         [np.arange(8.0), np.arange(8.0)[::-1]])
    np.testing.assert_array_equal(SparseMTL(variant="l0l2", s=50).fit(data).coef_,
                                  SparseMTL(variant="l0l2", s=3).fit(data).coef_)
    with pytest.raises(InvalidParameterError, match=r"s must be an int in \[1, p\] = \[1, 3\]"):
        SparseProblem.from_data(data, variant="l0l2", s=50)


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


@pytest.mark.parametrize("seed", range(3))
def test_gram_columns_and_correlations_match_plain_sums(seed):
    """The swap search's cached X_k^T X_k[:, J] / n_k (any order, repeated, after other columns
    were cached) and X_k^T y_k / n_k against sums over the rows; a twin with other y does not
    inherit the correlations."""
    problem, rng = random_problem("zbar_l2", seed, K=2, p=9, n=12)
    for k in range(2):
        X, y, n = problem.Xs[k], problem.ys[k], len(problem.ys[k])
        for columns in ([4, 1], [1, 7, 4, 0], [], [8]):
            expected = np.array([[sum(X[i, a] * X[i, b] for i in range(n)) / n for b in columns]
                                 for a in range(9)]).reshape(9, len(columns))
            assert np.allclose(problem.gram_columns(k, np.array(columns, int)), expected,
                               rtol=1e-12, atol=1e-14)
        plain = [sum(X[i, a] * y[i] for i in range(n)) / n for a in range(9)]
        assert np.allclose(problem.correlations[k], plain, rtol=1e-12, atol=1e-14)
    assert np.array_equal(problem.with_params(lambda_ridge=0.5).correlations, problem.correlations)


@pytest.mark.parametrize("shape", [(12, 9), (6, 9), (40, 3)])
def test_lipschitz_matches_the_largest_singular_value(shape):
    """IHT's step: ``lipschitz`` against the largest singular value of each X_k over its allowed
    columns (an SVD, not the Gram's eigenvalues), tall and wide, one column excluded."""
    n, p = shape
    problem, rng = random_problem("l0l2", 1, K=2, p=p, n=n)
    excluded = np.zeros((2, p), bool)
    excluded[1, 0] = True
    problem = replace(problem, excluded=excluded)
    top = max(np.linalg.svd(X[:, ~ex], compute_uv=False)[0] ** 2 / n
              for X, ex in zip(problem.Xs, excluded))
    assert problem.lipschitz == pytest.approx(top + problem.lambda_ridge, rel=1e-12)


def test_gram_column_cache_stays_under_its_cap(monkeypatch):
    from mtl_opt.formulations import sparse
    monkeypatch.setattr(sparse, "GRAM_CACHE_FLOATS", 3 * 9)     # three columns of p = 9
    problem, _ = random_problem("l0l2", 0, K=1, p=9, n=12)
    X, n = problem.Xs[0], len(problem.ys[0])
    for columns in ([0, 1], [2, 3], [4], [5, 6, 7], [1, 8]):
        assert np.allclose(problem.gram_columns(0, np.array(columns)), X.T @ X[:, columns] / n, rtol=1e-12)
        assert len(problem.__dict__["_gram_columns"]) <= 3
    assert np.allclose(problem.scaled(4.0).correlations, problem.correlations / 4, rtol=1e-15, atol=0)


def test_spd_solve_falls_back_to_least_squares_when_singular():
    from mtl_opt.formulations.sparse import _solve_spd
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 4))
    H, rhs = A.T @ A + 0.1 * np.eye(4), rng.normal(size=4)
    assert np.allclose(H @ _solve_spd(H, rhs), rhs, rtol=0, atol=1e-12)
    singular = np.outer(A[0], A[0])                          # rank 1: no Cholesky factor
    assert np.allclose(_solve_spd(singular, A[0]), np.linalg.pinv(singular) @ A[0], atol=1e-12)


@pytest.mark.parametrize("variant", ["l0l2", "zbar_l2", "bbar", "cs_l2"])
@pytest.mark.parametrize("seed", range(6))
def test_skipping_a_start_on_a_finished_support_loses_nothing(variant, seed):
    """fit_bcd skips a start whose support a finished run ended on (11 of these 24 instances);
    its answer is as good as the best of every start descended in full."""
    from mtl_opt.solvers.sparse import bcd
    problem, _ = random_problem(variant, seed, K=2, p=12, n=15, s=3)
    answer = problem.objective(fit_bcd(problem, deadline=Deadline()).coef)
    every = [problem.objective(bcd._descend(problem, start, 1000, 1e-7, True, 10_000, 0.0, Deadline())[0])
             for start in bcd_starts(problem)]
    assert answer <= min(every) * (1 + 1e-12)


def bcd_starts(problem):
    """fit_bcd's starts: zeros, the projected wide solution and (Zbar) the shared-support fit."""
    from mtl_opt.solvers.sparse import bcd
    zeros = np.zeros((problem.n_tasks, problem.n_features))
    wide = problem.with_params(s=min(3 * problem.s, problem.n_features), lambda_zbar=0.0)
    wide_fit = bcd._descend(wide, zeros, 1000, 1e-7, False, 0, 0.0, Deadline())[0]
    starts = [zeros, bcd._project(problem, wide_fit)]
    if problem.lambda_zbar:
        shared = problem.with_params(variant="cs_bbar" if problem.lambda_bbar else "cs_l2", lambda_zbar=0.0)
        starts.append(fit_bcd(shared, deadline=Deadline()).coef)
    return starts


@pytest.mark.parametrize("count", [1, 3, 5, 8])
def test_the_largest_scores_break_ties_as_a_stable_sort_does(count):
    """bcd keeps the s largest scores by a partition; where scores tie at the boundary (duplicated
    features) it must keep the same indices as the stable sort it replaced, on every CPU."""
    from mtl_opt.solvers.sparse.bcd import _largest

    rng = np.random.default_rng(count)
    for _ in range(50):
        score = rng.integers(-2, 3, size=8).astype(float)   # many ties
        score[rng.integers(8)] = -np.inf
        expected = np.argsort(-score, kind="stable")[:count]
        assert sorted(_largest(score, count)) == sorted(expected)
