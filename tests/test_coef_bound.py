"""coef_bound: a box |b_j| <= M the user knows, part of the problem fitted and certified.

Checked against a brute force written here: every support, each task's box-constrained ridge
least squares by scipy's bounded-variable least squares (the intercept, free and unpenalized,
profiled out by centring).
"""

import itertools

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from mtl_opt import InvalidParameterError, SolveOptions, SparseMTL


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
def test_the_box_is_certified_against_a_boxed_brute_force(seed, per_feature):
    X, y, task = _data(seed)
    M = np.array([0.5, 0.8, 2.0, 2.0, 2.0]) if per_feature else np.full(5, 0.5)
    est = SparseMTL(variant="l0l2", s=2, lambda_ridge=0.05, standardize=False, algorithm="exact",
                    coef_bound=M.tolist() if per_feature else 0.5,
                    solve_options=SolveOptions(time_limit=60))
    result = est.fit(X, y, task=task).result_
    best = _boxed_optimum(X, y, task, 2, 0.05, M)
    assert result.status == "optimal" and result.algorithm == "miqp"
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


@pytest.mark.parametrize("algorithm", ["bnb", "oa_multi_tree"])
def test_paths_without_a_box_refuse_it_and_name_the_miqp(algorithm):
    X, y, task = _data(7)
    with pytest.raises(InvalidParameterError, match="coef_bound included.*algorithm='miqp'"):
        SparseMTL(s=2, lambda_ridge=0.05, coef_bound=1.0, algorithm=algorithm).fit(X, y, task=task)
