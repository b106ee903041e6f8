"""coef_bound: a box |b_j| <= M the user knows, part of the problem fitted and certified.

Checked against a brute force written here: every support, each task's box-constrained ridge
least squares by scipy's bounded-variable least squares (the intercept, free and unpenalized,
profiled out by centring).
"""

import itertools

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from constrained_reference import constrained_optimum

from mtl_opt import InvalidParameterError, SolveOptions, SparseMTL
from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.solvers.sparse.bnb.kernels import FREE, IN, OUT
from mtl_opt.solvers.sparse.bnb.node import NODE_ITERATIONS
from mtl_opt.solvers.sparse.bnb.search import family
from mtl_opt.solvers.sparse.bnb.tree import filled


def _data(seed, n=20, p=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n, p))
    y = 1.5 * X[:, 0] - 1.0 * X[:, 1] + 0.3 * rng.normal(size=2 * n)
    return X, y, np.repeat(["a", "b"], n)


def _boxed_optimum(X, y, task, s, ridge, M):
    """sum over tasks of min over supports of size s of 1/(2n) ||y - b - X beta||^2 +
    (ridge/2) ||beta||^2 with |beta_j| <= M_j (variant l0l2: the tasks decouple)."""
    total = 0.0
    for name in dict.fromkeys(task):
        Xk, yk = X[task == name], y[task == name]
        n = len(yk)
        Xc, yc = Xk - Xk.mean(axis=0), yk - yk.mean()
        best = np.inf
        for cols in itertools.combinations(range(X.shape[1]), s):
            A = np.vstack([Xc[:, cols], np.sqrt(n * ridge) * np.eye(s)])
            b = np.concatenate([yc, np.zeros(s)])
            fit = lsq_linear(A, b, bounds=(-M[list(cols)], M[list(cols)]), method="bvls", tol=1e-14)
            best = min(best, 0.5 * np.sum((A @ fit.x - b) ** 2) / n)
        total += best
    return total


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_feature", [False, True])
@pytest.mark.parametrize("algorithm, runs", [("exact", "bnb"), ("miqp", "miqp")])
def test_the_box_is_certified_against_a_boxed_brute_force(seed, per_feature, algorithm, runs):
    """``exact`` runs bnb here (n_k > p, where OA would come first, refuses the box)."""
    X, y, task = _data(seed)
    M = np.array([0.5, 0.8, 2.0, 2.0, 2.0]) if per_feature else np.full(5, 0.5)
    est = SparseMTL(variant="l0l2", s=2, lambda_ridge=0.05, standardize=False, algorithm=algorithm,
                    coef_bound=M.tolist() if per_feature else 0.5,
                    solve_options=SolveOptions(time_limit=60))
    result = est.fit(X, y, task=task).result_
    best = _boxed_optimum(X, y, task, 2, 0.05, M)
    assert result.status == "optimal" and result.algorithm == runs
    assert result.lower_bound <= best * (1 + 1e-9)
    assert abs(result.objective - best) <= 1e-6 * best
    assert np.all(np.abs(result.coef) <= M + 1e-9)
    assert "certified for |b_j| <= " in result.objective_name
    unboxed = SparseMTL(variant="l0l2", s=2, lambda_ridge=0.05, standardize=False).fit(X, y, task=task)
    assert np.abs(unboxed.coef_).max() > 1.0   # the box binds: the truth has 1.5


def test_the_box_is_on_the_original_scale_and_kept_by_bcd():
    X, y, task = _data(4)
    X[:, 0] *= 100.0   # a feature in other units: its coefficient is 0.015
    result = SparseMTL(s=2, lambda_ridge=0.05, coef_bound=0.01).fit(X, y, task=task).result_
    assert np.all(np.abs(result.coef) <= 0.01 * (1 + 1e-12))
    assert result.status == "heuristic" and "for |b_j| <= 0.01" in result.objective_name


def test_coef_bound_is_the_bounds_constraint_on_every_feature():
    X, y, task = _data(5)
    names = [f"x{j}" for j in range(5)]
    boxed = SparseMTL(s=2, lambda_ridge=0.05, coef_bound=0.7).fit(X, y, task=task).result_
    stated = SparseMTL(s=2, lambda_ridge=0.05, constraints=[
        {"kind": "bounds", "features": names, "lower": -0.7, "upper": 0.7}]).fit(X, y, task=task).result_
    np.testing.assert_allclose(boxed.coef, stated.coef, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bound, match", [
    (0.0, "coef_bound"), (-1.0, "coef_bound"), (np.inf, "coef_bound"), ([1.0, 2.0], "one per feature \\(5\\)")])
def test_a_bad_box_is_our_error(bound, match):
    X, y, task = _data(6)
    with pytest.raises(InvalidParameterError, match=match):
        SparseMTL(s=2, coef_bound=bound).fit(X, y, task=task)


def test_outer_approximation_refuses_a_box_and_names_the_miqp():
    X, y, task = _data(7)
    with pytest.raises(InvalidParameterError, match="coef_bound included.*algorithm='miqp'"):
        SparseMTL(s=2, lambda_ridge=0.05, coef_bound=1.0, algorithm="oa_multi_tree").fit(X, y, task=task)


def _tiny(shift=0.0, factor=1.0):
    """K = 2, p = 6 (task 0 with n = 10 > p, task 1 with n = 4 < p); true coefficients up to 1.2."""
    rng = np.random.default_rng(11)
    truth = [np.array([1.2, -1.0, 0, 0, 0, 0]), np.array([1.2, 0, 0.9, 0, 0, 0])]
    Xs = [rng.normal(size=(n, 6)) for n in (10, 4)]
    return MultiTaskData(Xs, [factor * (X @ b + 0.3 * rng.normal(size=len(X))) + shift for X, b in zip(Xs, truth)])


VARIANTS = {"l0l2": {}, "cs_l2": {}, "zbar_l2": {"lambda_zbar": 0.05}}


def _boxed(variant, M, **params):
    return SparseMTL(variant=variant, s=2, lambda_ridge=0.1, coef_bound=M, **VARIANTS[variant], **params)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("shift, factor", [(0.0, 1.0), (0.0, 1e-6), (1e9, 1.0)])
def test_bnb_certifies_the_box_against_enumeration_at_any_scale(variant, shift, factor):
    """bnb's certificate of the boxed problem (the big-M strengthened perspective in its node bounds)
    against the enumerated optimum in the box (``constrained_reference``: every support, BVLS), at
    y, y * 1e-6 (the box scaled with it) and y + 1e9."""
    data, M = _tiny(shift, factor), 0.4 * factor
    est = _boxed(variant, M, algorithm="bnb", solve_options=SolveOptions(time_limit=60, rel_gap=1e-6))
    result = est.fit(data).result_
    problem, scaler, _ = est._problem(data)
    box = [{"kind": "bounds", "lower": -M, "upper": M}]
    optimum, _ = constrained_optimum(problem, box, scaler.x_scale)
    assert result.status == "optimal" and result.algorithm == "bnb"
    assert result.lower_bound <= optimum * (1 + 1e-9)
    assert optimum * (1 - 1e-9) <= result.objective <= optimum * (1 + 1e-5)
    assert np.all(np.abs(result.coef) <= M * (1 + 1e-12))
    assert "certified for |b_j| <= " in result.objective_name


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("factor", [1.0, 1e-6])
def test_every_node_bound_in_a_box_is_below_the_nodes_enumerated_optimum(variant, factor):
    """Weak duality, node by node: at random nodes (entries fixed in and out) and random dual
    points, the safe dual, the climbed bound and both children's bounds stay below the node's (or
    the child's) enumerated optimum in the box; and at one point the box never lowers the dual,
    and its climbed root bound is above the box-free one where the box binds (truth 1.2 > M)."""
    data, M = _tiny(0.0, factor), 0.4 * factor
    problem, scaler, _ = _boxed(variant, M)._problem(data)
    free_problem, _, _ = _boxed(variant, None)._problem(data)
    bounder, free_bounder = (family(p)(p, NODE_ITERATIONS, Deadline(None)) for p in (problem, free_problem))
    box = [{"kind": "bounds", "lower": -M, "upper": M}]

    def optimum(fixed):
        rows = range(1) if problem.common_support else range(problem.n_tasks)
        node = [{"kind": kind, "tasks": None if problem.common_support else [k], "features": [int(j)]}
                for k in rows for kind, state in (("include", IN), ("exclude", OUT))
                for j in np.flatnonzero(fixed[k] == state)]
        return constrained_optimum(problem, box + node, scaler.x_scale)[0]

    rng = np.random.default_rng(0)
    root = np.full((problem.n_tasks, problem.n_features), FREE, dtype=np.int8)
    start = bounder.start()
    assert free_bounder.bound(root, start)[0] < bounder.bound(root, start)[0] <= optimum(root) * (1 + 1e-12)
    residuals = sum(len(y) for y in problem.ys)   # the point's residuals, then (Zbar) the prices
    for _ in range(6):
        fixed = root.copy()
        for k, j in zip(rng.integers(0, problem.n_tasks, 2), rng.choice(problem.n_features, 2, replace=False)):
            fixed[(slice(None), j) if problem.common_support else (k, j)] = rng.choice([IN, OUT])
        fixed = filled(fixed, problem.s)   # as the tree keeps nodes: a full row's free entries out
        point = start.copy()
        point[:residuals] += rng.normal(scale=0.3 * factor, size=residuals)
        point[residuals:] *= rng.uniform(0.5, 1.5, size=len(point) - residuals)
        node_optimum = optimum(fixed)
        assert free_bounder.safe_dual(fixed, point) <= bounder.safe_dual(fixed, point) <= node_optimum * (1 + 1e-12)
        assert bounder.bound(fixed, point)[0] <= node_optimum * (1 + 1e-12)
        bound_in, bound_out = bounder.child_bounds(fixed, point)
        for (k, j) in np.argwhere(fixed == FREE)[:4]:
            for child_bound, state in ((bound_in, IN), (bound_out, OUT)):
                child = fixed.copy()
                child[(slice(None), j) if problem.common_support else (k, j)] = state
                if filled(child.copy(), problem.s) is not None:
                    assert child_bound[k, j] <= optimum(child) * (1 + 1e-12)


def _boxed_refit_value(problem, columns, M):
    """F of one task's best coefficients on ``columns`` within |b_j| <= M (BVLS, written here)."""
    X, y = problem.Xs[0], problem.ys[0]
    n, size = len(y), len(columns)
    A = np.vstack([X[:, columns], np.sqrt(n * problem.lambda_ridge) * np.eye(size)])
    b = np.concatenate([y, np.zeros(size)])
    fit = lsq_linear(A, b, bounds=(-M, M), method="bvls", tol=1e-14)
    return 0.5 * np.sum((A @ fit.x - b) ** 2) / n


@pytest.mark.parametrize("seed", range(3))
def test_bcd_in_a_box_that_does_not_bind_is_the_free_fit_and_swap_optimal_in_the_box(seed, monkeypatch):
    """bcd under a box alone fits without it first and keeps that fit when it lies in the box (no
    clipped sweep runs): then no single swap's refit in the box (BVLS here) is better; a box that
    binds is kept."""
    from mtl_opt.solvers.sparse import bcd

    clipped = []
    sweep = bcd._constrained_sweep
    monkeypatch.setattr(bcd, "_constrained_sweep", lambda *args: clipped.append(1) or sweep(*args))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 8))
    y = X[:, :3] @ [1.2, -0.8, 0.5] + 0.5 * rng.normal(size=30)
    data = MultiTaskData([X], [y])
    free = SparseMTL(s=3, lambda_ridge=0.05, standardize=False, fit_intercept=False).fit(data)
    top = np.abs(free.coef_).max()
    for M in (2 * top, 0.6 * top):
        est = SparseMTL(s=3, lambda_ridge=0.05, standardize=False, fit_intercept=False, coef_bound=M)
        result = est.fit(data).result_
        assert np.all(np.abs(result.coef) <= M)
        if M < top:
            assert clipped   # the box binds: the clipped fit ran
            continue
        assert not clipped
        np.testing.assert_allclose(result.coef, free.coef_, rtol=0, atol=1e-12)
        problem = est._problem(data)[0]
        support = list(np.flatnonzero(result.coef[0]))
        assert _boxed_refit_value(problem, support, M) >= result.objective * (1 - 1e-9)
        for out, into in itertools.product(support, sorted(set(range(8)) - set(support))):
            swapped = [into if j == out else j for j in support]
            assert _boxed_refit_value(problem, swapped, M) >= result.objective * (1 - 1e-9)
