"""Degenerate tasks on every sparse variant and every exact path, against an independent brute force
on the MIP definition (issue 47).

The definition (``formulations/sparse.py``, DESIGN.md): z is a decision variable, beta_jk = 0
where z_jk = 0, and z_jk = 1 with beta_jk = 0 is allowed, so z counts in the Zbar term even where
its coefficient is exactly 0.  A task whose y is 0 after centring (y = 0, or y constant with an
intercept) makes the two readings differ: the optimum puts that task on the support its neighbours
share with beta = 0.  bnb once reported ``optimal`` with a bound above such an attained value.

The brute force here shares no code with the package: per support, the ridge (and Bbar) problem
is one dense linear system written from the objective's statement; the Zbar term counts the
supports' indicators.
"""

import itertools

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import VARIANTS
from mtl_opt.solvers.options import SolveOptions

PATHS = ("bnb", "oa_single_tree", "oa_multi_tree", "miqp", "exact")
K, P, N, S = 2, 5, 7, 2
PENALTIES = {"lambda_ridge": 0.05, "lambda_bbar": 0.5, "lambda_zbar": 0.3}
#: Relative slack of ``LB <= optimum <= objective``.
TOL = 1e-7


def degenerate(case: str, seed: int):
    """Two tasks sharing part of a support, the second made degenerate by ``case``."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((N, P)) for _ in range(K)]
    beta = np.array([1.5, -2.0, 0.0, 0.0, 0.7])
    ys = [X @ (beta * (1 + 0.2 * k)) + 0.3 * rng.standard_normal(N) for k, X in enumerate(Xs)]
    if case == "zero_y":
        ys[1] = np.zeros(N)
    elif case == "constant_y":
        ys[1] = np.full(N, 3.7)
    elif case == "identical":
        Xs[1], ys[1] = Xs[0].copy(), ys[0].copy()
    elif case == "scaled":
        Xs[1], ys[1] = Xs[0].copy(), 7.0 * ys[0]
    elif case == "square":   # one row per feature
        Xs[1] = rng.standard_normal((P, P))
        ys[1] = Xs[1] @ beta + 0.1 * rng.standard_normal(P)
    return Xs, ys


def brute_force(Xs, ys, variant, s, lambda_ridge=0.0, lambda_bbar=0.0, lambda_zbar=0.0):
    """min over z (|z_k| <= s; one shared set for cs_*) of min over beta on z of F, with intercepts
    profiled out by centring.  Every combination of the tasks' supports is scored."""
    Xs = [X - X.mean(axis=0) for X in Xs]
    ys = [y - y.mean() for y in ys]
    n_tasks, p = len(Xs), Xs[0].shape[1]
    # F's continuous part: const - r.b + b'Hb/2 over the stacked b = (beta_1, ..., beta_K)
    H = np.zeros((n_tasks * p, n_tasks * p))
    r = np.concatenate([X.T @ y / len(y) for X, y in zip(Xs, ys)])
    const = sum(y @ y / (2 * len(y)) for y in ys)
    for k, X in enumerate(Xs):
        block = slice(k * p, (k + 1) * p)
        H[block, block] = X.T @ X / len(X) + (lambda_ridge + lambda_bbar) * np.eye(p)
    H -= lambda_bbar / n_tasks * np.kron(np.ones((n_tasks, n_tasks)), np.eye(p))
    subsets = [c for size in range(s + 1) for c in itertools.combinations(range(p), size)]
    rows = ([(c,) * n_tasks for c in subsets] if variant.startswith("cs")
            else itertools.product(subsets, repeat=n_tasks))
    best = np.inf
    for row in rows:
        z = np.zeros((n_tasks, p), bool)
        for k, cols in enumerate(row):
            z[k, list(cols)] = True
        on = z.ravel()
        value = const
        if on.any():
            value -= 0.5 * r[on] @ np.linalg.solve(H[np.ix_(on, on)], r[on])
        counts = z.sum(axis=0)
        value += 0.5 * lambda_zbar * np.sum(counts * (n_tasks - counts) / n_tasks)
        best = min(best, value)
    return best


def penalties(variant):
    _, bbar, zbar = VARIANTS[variant]
    return {"lambda_ridge": PENALTIES["lambda_ridge"],
            "lambda_bbar": PENALTIES["lambda_bbar"] if bbar else 0.0,
            "lambda_zbar": PENALTIES["lambda_zbar"] if zbar else 0.0}


@pytest.mark.parametrize("case", ["zero_y", "constant_y", "identical", "scaled", "square"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_exact_path_certifies_the_brute_force_optimum_on_degenerate_tasks(variant, case):
    """LB <= optimum <= objective on every exact path, ``optimal`` only within rel_gap of the true
    optimum, and the paths agree on it; the objective is F at the reported (coef, support_)."""
    Xs, ys = degenerate(case, seed=sorted(VARIANTS).index(variant))
    params = penalties(variant)
    optimum = brute_force(Xs, ys, variant, S, **params)
    data = MultiTaskData(Xs, ys)
    options = SolveOptions(time_limit=60, rel_gap=1e-6)
    objectives = {}
    for path in PATHS:
        model = SparseMTL(variant=variant, s=S, algorithm=path, standardize=False,
                          solve_options=options, **params).fit(data)
        result = model.result_
        scale = TOL * max(abs(optimum), 1e-12)
        assert result.lower_bound <= optimum + scale, (path, result.lower_bound, optimum)
        assert result.objective >= optimum - scale, (path, result.objective, optimum)
        if result.status == "optimal":
            assert result.objective - optimum <= options.rel_gap * abs(result.objective) + scale, path
        # the objective is F at the reported coefficients and support, recomputed here
        assert np.all(model.support_ >= (model.coef_ != 0))
        assert np.all(model.support_.sum(axis=1) <= S)
        problem = model._problem(data)[0]
        assert result.objective == pytest.approx(problem.objective(model.coef_, model.support_), rel=1e-12)
        objectives[path] = result.objective
    # every path proved its answer here (tiny instances): they agree on the optimum
    assert max(objectives.values()) - optimum <= 1e-6 * abs(optimum) + 1e-12, objectives


def test_a_zero_task_shares_its_neighbours_support_at_no_zbar_cost():
    """The issue's shape: K = 2, task 1's y = 0.  The optimum puts task 1 on task 0's support with
    beta = 0 (z = 1), so the Zbar term is 0; bnb, bcd and the OA paths all report that point."""
    rng = np.random.default_rng(3)
    Xs = [rng.standard_normal((5, 7)), rng.standard_normal((17, 7))]
    ys = [Xs[0][:, :2] @ [1.0, -2.0] + 0.1 * rng.standard_normal(5), np.zeros(17)]
    params = {"lambda_ridge": 1e-2, "lambda_zbar": 0.24}
    optimum = brute_force(Xs, ys, "zbar_l2", 2, **params)
    for path in ("bcd", "bnb", "oa_single_tree"):
        model = SparseMTL(variant="zbar_l2", s=2, algorithm=path, standardize=False,
                          solve_options=SolveOptions(time_limit=30), **params).fit(MultiTaskData(Xs, ys))
        assert model.result_.objective == pytest.approx(optimum, rel=1e-9), path
        assert np.array_equal(model.support_[1], model.support_[0])
        assert not model.coef_[1].any()
