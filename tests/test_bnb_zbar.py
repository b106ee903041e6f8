"""bnb with the Zbar term: node bounds and certified optima against an independent enumeration."""

import itertools

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.resources import one_blas_thread
from mtl_opt.solvers.sparse import bnb
from mtl_opt.solvers.sparse.bnb import kernels
from mtl_opt.solvers.sparse.bnb.greedy import GreedyBound
from mtl_opt.solvers.sparse.bnb.sets import SetBound
from mtl_opt.solvers.sparse.bnb.zbar import ZbarBound
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.options import SolveOptions


def enumerated_optimum(Xs, ys, s, lambda_ridge, lambda_zbar, fixed=None):
    """min over supports (|S_k| <= s, consistent with ``fixed``: 1 in, 0 out, -1 free) of the
    ridge least squares on each task's support plus (lambda_zbar/2) sum_j c_j (K - c_j) / K.

    Each task's ridge fit is one dense solve of its normal equations; the Zbar term depends on
    the supports only, so every combination of the tasks' supports is scored at once by
    broadcasting.  Data as given (no intercept: center beforehand to profile one out).
    """
    K, p = len(Xs), Xs[0].shape[1]
    fixed = np.full((K, p), -1) if fixed is None else fixed
    masks, values = [], []
    for k, (X, y) in enumerate(zip(Xs, ys)):
        task_masks, task_values = [], []
        for size in range(s + 1):
            for cols in itertools.combinations(range(p), size):
                mask = np.zeros(p, bool)
                mask[list(cols)] = True
                if np.any(mask & (fixed[k] == 0)) or np.any(~mask & (fixed[k] == 1)):
                    continue
                n, Xs_ = len(y), X[:, mask]
                beta = np.linalg.solve(Xs_.T @ Xs_ / n + lambda_ridge * np.eye(size), Xs_.T @ y / n)
                task_values.append(np.sum((y - Xs_ @ beta) ** 2) / (2 * n) + lambda_ridge / 2 * beta @ beta)
                task_masks.append(mask)
        masks.append(np.array(task_masks, int).reshape(-1, p))
        values.append(np.array(task_values))
    total, counts = 0.0, 0
    for k in range(K):
        shape = [1] * K
        shape[k] = -1
        total = total + values[k].reshape(shape)
        counts = counts + masks[k].reshape(shape + [p])
    return float(np.min(total + lambda_zbar / 2 * np.sum(counts * (K - counts) / K, axis=-1)))


def instance(seed, K, p, n, s, lambda_ridge, lambda_zbar, excluded=None):
    """Tasks sharing part of a support, so the Zbar term matters; ``n`` rows per task, or a
    tuple of each task's rows."""
    rng = np.random.default_rng(seed)
    shared = rng.choice(p, s + 1, replace=False)
    Xs, ys = [], []
    for n_k in (n if isinstance(n, tuple) else (n,) * K):
        beta = np.zeros(p)
        beta[rng.choice(shared, s, replace=False)] = rng.uniform(0.3, 1.0, s) * rng.choice([-1, 1], s)
        X = rng.normal(size=(n_k, p))
        Xs.append(X)
        ys.append(X @ beta + rng.normal(size=n_k))
    problem = SparseProblem.from_data(MultiTaskData(Xs, ys), variant="zbar_l2", s=s, lambda_ridge=lambda_ridge,
                                      lambda_zbar=lambda_zbar, fit_intercept=False, excluded=excluded)
    return problem, Xs, ys


#: (seed, K, p, n, s, lambda_ridge, lambda_zbar): wide (n < p) and tall tasks, every s and penalty,
#: and tasks of different sizes (the climb stacks them padded to the longest).
CASES = [(0, 1, 7, 4, 2, 0.1, 1.0), (1, 2, 6, 4, 2, 0.1, 1.0), (2, 2, 8, 12, 3, 1.0, 0.01),
         (3, 3, 6, 4, 1, 1.0, 10.0), (4, 3, 6, 10, 2, 1.0, 0.01), (5, 2, 7, 5, 3, 0.1, 10.0),
         (6, 3, 6, 5, 3, 0.1, 1.0), (7, 2, 8, 20, 2, 1.0, 1.0), (8, 3, 7, 9, 2, 1.0, 10.0),
         (9, 3, 7, (4, 11, 6), 2, 0.1, 1.0), (10, 2, 6, (12, 3), 2, 1.0, 10.0)]


@pytest.mark.parametrize("seed,K,p,n,s,lambda_ridge,lambda_zbar", CASES)
def test_bnb_proves_the_enumerated_optimum_with_a_zbar_term(seed, K, p, n, s, lambda_ridge, lambda_zbar):
    """From the empty support on odd seeds (the tree must find the optimum: a node bound above
    its node's optimum prunes it and leaves the objective above the enumerated one), else bcd's."""
    problem, Xs, ys = instance(seed, K, p, n, s, lambda_ridge, lambda_zbar)
    optimum = enumerated_optimum(Xs, ys, s, lambda_ridge, lambda_zbar)
    start = np.zeros((K, p)) if seed % 2 else fit_bcd(problem, local_search=False, deadline=Deadline()).coef
    result = bnb.solve_bnb(problem, SolveOptions(time_limit=60), start, deadline=Deadline(60))
    assert result.lower_bound <= optimum + 1e-9 * optimum <= result.objective + 2e-9 * optimum
    assert final_status(result, 1e-6) == "optimal"
    assert result.objective <= optimum * (1 + 1e-6)
    assert problem.feasible(result.estimate)


@pytest.mark.parametrize("search_class", [ZbarBound, SetBound])
@one_blas_thread   # as solve_bnb runs: L-BFGS-B's tiny BLAS calls on spinning threads crawl under load
def test_every_node_bound_is_below_the_node_optimum_at_any_dual_point(search_class):
    """D(r, pi) bounds the node from below for every r and every pi >= 0 (weak duality), not
    only at the maximizer: random fixings (an excluded pair among them), random residuals and
    prices, from 0 to far above the weights, and the point 40 L-BFGS steps climb to (no
    incumbent to stop it), on a wide and a tall instance; by the recursion over tasks and by
    the enumeration of each column's task sets (what solve_bnb runs for K <= 6)."""
    rng = np.random.default_rng(11)
    for K, p, n, s, lambda_zbar in [(3, 6, 4, 2, 1.0), (2, 7, 12, 3, 10.0), (3, 6, (4, 9, 5), 2, 1.0)]:
        excluded = np.zeros((K, p), bool)
        excluded[0, 1] = True
        problem, Xs, ys = instance(20 + K, K, p, n, s, 0.1, lambda_zbar, excluded)
        search = search_class(problem, 40, Deadline(30))
        for _ in range(12):
            fixed = rng.choice([bnb.FREE, bnb.OUT, bnb.IN], size=(K, p), p=[0.7, 0.15, 0.15]).astype(np.int8)
            fixed[excluded] = bnb.OUT
            for k in range(K):   # at most s in per task
                extra = np.flatnonzero(fixed[k] == bnb.IN)[s:]
                fixed[k, extra] = bnb.OUT
            optimum = enumerated_optimum(Xs, ys, s, 0.1, lambda_zbar,
                                         np.where(fixed == bnb.FREE, -1, fixed))
            for scale in (0.0, 0.1, 1.0, 10.0):
                point = np.concatenate([np.concatenate(ys) + rng.normal(size=sum(map(len, ys))),
                                        scale * rng.exponential(size=K)])
                value, _ = search.dual(fixed, point, 0.1)
                safe = search.safe_dual(fixed, point)
                assert safe <= value <= optimum + 1e-12 * abs(optimum)
            search.upper = np.inf
            climbed, _, _ = search.bound(fixed, search.start())
            assert climbed <= optimum + 1e-12 * abs(optimum)


@pytest.mark.parametrize("sizes", [(5, 5, 5), (4, 9, 6), (12, 3), (1, 30, 2, 16, 7)])
def test_compiled_products_are_each_tasks_own(sizes):
    """The climb's compiled products (``bnb.kernels``, tasks stacked) against each task's own in numpy:
    X_k'r_k, the loss part sum_k (y_k.r_k - ||r_k||^2/2) / n_k and its gradient (y_k - r_k - X_k g_k) / n_k,
    with the point's trailing entries (a Zbar tree's prices) left alone."""
    rng = np.random.default_rng(len(sizes))
    p = 6
    Xs = [rng.normal(size=(n, p)) for n in sizes]
    ys = [rng.normal(size=n) for n in sizes]
    ends = np.cumsum([0, *sizes])
    X, y = np.vstack(Xs), np.concatenate(ys)
    point, slopes = rng.normal(size=ends[-1] + 2), rng.normal(size=(len(sizes), p))
    r = [point[ends[k]:ends[k + 1]] for k in range(len(sizes))]
    assert np.allclose(kernels.products(X, ends, point), [X.T @ rk for X, rk in zip(Xs, r)], rtol=1e-12, atol=1e-12)
    gradient = np.full_like(point, 7.0)
    base = kernels.loss_part(X, y, ends, point, slopes, gradient)
    assert base == pytest.approx(sum((y @ rk - rk @ rk / 2) / len(y) for y, rk in zip(ys, r)), rel=1e-12)
    expected = np.concatenate([(y - rk - X @ g) / len(y) for X, y, rk, g in zip(Xs, ys, r, slopes)])
    assert np.allclose(gradient[:ends[-1]], expected, rtol=1e-12, atol=1e-12)
    assert np.all(gradient[ends[-1]:] == 7.0)


@pytest.mark.parametrize("variant,lambda_zbar,lambda_bbar,search_class", [
    ("l0l2", 0.0, 0.0, GreedyBound), ("cs_l2", 0.0, 0.0, GreedyBound), ("zbar_l2", 1.0, 0.0, ZbarBound),
    ("zbar_l2", 1.0, 0.0, SetBound), ("bbar", 0.0, 10.0, SetBound), ("cs_bbar", 0.0, 10.0, SetBound)])
def test_the_climbed_gradient_is_the_smoothed_duals(variant, lambda_zbar, lambda_bbar, search_class):
    """The gradient L-BFGS climbs with is that of the smoothed D it returns (central differences),
    on tasks of different sizes: a wrong one leaves every bound valid but climbs badly, which no
    soundness test sees."""
    rng = np.random.default_rng(5)
    sizes, p = (4, 9, 6), 7
    Xs = [rng.normal(size=(n, p)) for n in sizes]
    ys = [X @ rng.normal(size=p) + rng.normal(size=len(X)) for X in Xs]
    problem = SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=2, lambda_ridge=0.5,
                                      lambda_zbar=lambda_zbar, lambda_bbar=lambda_bbar, fit_intercept=False)
    search = search_class(problem, 40, Deadline(30))
    fixed = np.full((3, p), bnb.FREE, dtype=np.int8)
    fixed[:, 0] = bnb.IN
    fixed[:, 1] = bnb.OUT
    point = search.start() + 0.1 * rng.normal(size=search.start().shape)
    point[sum(sizes):] = np.abs(point[sum(sizes):])   # prices >= 0
    _, (_, gradient) = search.dual(fixed, point, 0.3)
    h, numeric = 1e-6, np.empty_like(point)
    for i in range(len(point)):
        step = np.zeros_like(point)
        step[i] = h
        numeric[i] = (search.dual(fixed, point + step, 0.3)[1][0] - search.dual(fixed, point - step, 0.3)[1][0]) / (2 * h)
    assert np.allclose(gradient, numeric, rtol=1e-4, atol=1e-6 * np.abs(numeric).max())


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_priced_climb_is_the_same_in_any_units_of_y(seed):
    """The root's climbed bound on y / c is the bound on y over c^2 (rel 2e-3; 3.3e-4 measured), for
    c = 1e-3 and 1e3, with climbs long enough (1000 steps a stage) that their first step's length
    (L-BFGS-B's convention, 1 in the point's units) no longer matters.  r is in units of y and the
    prices in units of y^2, so the climb measures the prices in a unit proportional to sqrt(F(0))
    (``price_unit``); with the prices in fixed units these bounds differed from it by 0.26 to 80
    times its value (measured)."""
    problem, _, _ = instance(seed, 3, 8, 5, 2, 0.1, 1.0)
    K, p = 3, 8
    bounds = {}
    for c in (1e-3, 1.0, 1e3):
        twin = problem.scaled(c)
        search = SetBound(twin, 4000, Deadline(30))
        search.upper = 2 * twin.objective(np.zeros((K, p)))   # in the twin's units, above every bound
        root = np.full((K, p), bnb.FREE, dtype=np.int8)
        bounds[c] = search.bound(root, search.start())[0] * c**2
    assert bounds[1e-3] == pytest.approx(bounds[1.0], rel=2e-3)
    assert bounds[1e3] == pytest.approx(bounds[1.0], rel=2e-3)


@pytest.mark.parametrize("scale,offset", [(1.0, 0.0), (1e-6, 0.0), (1.0, 1e9)])
def test_estimator_certifies_zbar_with_bnb_at_any_scale(scale, offset):
    """y times 1e-6 (with lambda_zbar times 1e-12, the same problem in other units) and y + 1e9
    with an intercept: the run is normalized (``run_exact``), so the bound still holds and
    closes; the optimum is enumerated on the centered, unshifted data."""
    _, Xs, ys = instance(31, 2, 7, 5, 2, 0.1, 1.0)
    centered_X = [X - X.mean(axis=0) for X in Xs]
    centered_y = [y - y.mean() for y in ys]
    optimum = enumerated_optimum(centered_X, centered_y, 2, 0.1, 1.0) * scale**2
    model = SparseMTL(variant="zbar_l2", s=2, lambda_ridge=0.1, lambda_zbar=1.0 * scale**2, algorithm="bnb",
                      standardize=False, solve_options=SolveOptions(time_limit=60))
    model.fit(MultiTaskData(Xs, [scale * y + offset for y in ys]))
    result = model.result_
    assert result.status == "optimal" and "perspective dual" in result.bound_source
    assert result.lower_bound <= optimum * (1 + 1e-7)
    assert result.objective == pytest.approx(optimum, rel=1e-5)
