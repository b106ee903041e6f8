"""bnb with a Bbar term: node bounds, child bounds and certified optima against an independent enumeration."""

import itertools

import numpy as np
import pytest
import scipy.linalg
from test_bnb_screening import data, random_node

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.resources import one_blas_thread
from mtl_opt.solvers.sparse import bnb
from mtl_opt.solvers.sparse.bnb.sets import SetBound
from mtl_opt.solvers.sparse.bnb.tree import filled
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.options import SolveOptions


class Enumeration:
    """F minimized exactly on every combination of per-task supports (|S_k| <= s, no excluded pair), or
    with ``common`` on every shared support (|S| <= s columns; an excluded pair's coefficient is 0).

    F = sum_k ||y_k - X_k b_k||^2 / (2 n_k) + (lambda_ridge/2) ||B||^2
        + (lambda_bbar/2) sum_k ||b_k - mean_k b_k||^2 + (lambda_zbar/2) sum_j c_j (K - c_j) / K,
    c_j the tasks whose support holds column j.
    Over the pairs (k, j) the smooth part is q0 - q.b + b'Hb / 2 with H = blockdiag_k(X_k'X_k / n_k)
    + (lambda_ridge + lambda_bbar) I - (lambda_bbar / K) [same column]; its minimum on a support is
    H_SS^-1 q_S, solved for all the supports with the same number of pairs in one batch.
    Data as given (no intercept: center beforehand to profile one out).
    """

    def __init__(self, Xs, ys, s, lambda_ridge, lambda_bbar, lambda_zbar=0.0, excluded=None, common=False):
        K, p = len(Xs), Xs[0].shape[1]
        excluded = np.zeros((K, p), bool) if excluded is None else excluded
        rows = np.array([np.isin(np.arange(p), cols) for size in range(s + 1)
                         for cols in itertools.combinations(range(p), size)])
        if common:   # the supports (N, K, p) as bnb fixes them (by column), the coefficients without excluded pairs
            self.masks = np.repeat(rows[:, None, :], K, axis=1)
            nonzero = self.masks & ~excluded
        else:
            per_task = [rows[~np.any(rows & excluded[k], axis=1)] for k in range(K)]
            picks = np.stack(np.meshgrid(*[np.arange(len(m)) for m in per_task], indexing="ij"), -1).reshape(-1, K)
            self.masks = nonzero = np.stack([per_task[k][picks[:, k]] for k in range(K)], axis=1)
        H = (scipy.linalg.block_diag(*[X.T @ X / len(y) for X, y in zip(Xs, ys)])
             + (lambda_ridge + lambda_bbar) * np.eye(K * p) - lambda_bbar / K * np.kron(np.ones((K, K)), np.eye(p)))
        q = np.concatenate([X.T @ y / len(y) for X, y in zip(Xs, ys)])
        flat = nonzero.reshape(len(nonzero), K * p)
        B = np.zeros(flat.shape)
        for size in np.unique(flat.sum(axis=1)):
            rows = np.flatnonzero(flat.sum(axis=1) == size)
            pairs = np.argsort(~flat[rows], axis=1, kind="stable")[:, :size]
            if size:
                B[rows[:, None], pairs] = np.linalg.solve(H[pairs[:, :, None], pairs[:, None, :]],
                                                          q[pairs][..., None])[..., 0]
        B = B.reshape(-1, K, p)
        loss = sum(np.sum((y - B[:, k] @ X.T) ** 2, axis=1) / (2 * len(y)) for k, (X, y) in enumerate(zip(Xs, ys)))
        spread = B - B.mean(axis=1, keepdims=True)
        counts = self.masks.sum(axis=1)
        self.values = (loss + lambda_ridge / 2 * np.sum(B**2, axis=(1, 2))
                       + lambda_bbar / 2 * np.sum(spread**2, axis=(1, 2))
                       + lambda_zbar / 2 * np.sum(counts * (K - counts) / K, axis=1))

    def optimum(self, fixed=None) -> float:
        """min F over the supports ``fixed`` (bnb's codes: IN, OUT, FREE) allows; inf if none."""
        if fixed is None:
            return float(self.values.min())
        ok = ~np.any((self.masks & (fixed == bnb.OUT)) | (~self.masks & (fixed == bnb.IN)), axis=(1, 2))
        return float(self.values[ok].min()) if ok.any() else np.inf


def enumeration(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded=None):
    return Enumeration(Xs, ys, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded, common=variant.startswith("cs"))


def bbar_problem(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded=None):
    return SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=s, lambda_ridge=lambda_ridge,
                                   lambda_bbar=lambda_bbar, lambda_zbar=lambda_zbar, fit_intercept=False,
                                   excluded=excluded)


def below(bound, optimum):
    return bound <= optimum + 1e-12 * abs(optimum)


#: (variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar): wide (n < p) and tall tasks.
BOUND_CASES = [("bbar", 0, 3, 6, 4, 2, 0.01, 10.0, 0.0), ("bbar", 1, 2, 7, 12, 2, 1.0, 0.1, 0.0),
               ("zbar_bbar", 2, 3, 5, 8, 1, 0.1, 1.0, 10.0), ("zbar_bbar", 3, 2, 6, 4, 2, 0.1, 3.0, 1.0),
               ("cs_bbar", 7, 3, 6, 4, 2, 0.01, 10.0, 0.0), ("cs_bbar", 8, 2, 7, 12, 3, 1.0, 1.0, 0.0)]


@one_blas_thread   # as solve_bnb runs: L-BFGS-B's tiny BLAS calls on spinning threads crawl under load
@pytest.mark.parametrize("variant,seed,K,p,n,s,lambda_ridge,lambda_bbar,lambda_zbar", BOUND_CASES)
def test_every_bbar_node_bound_is_below_the_node_optimum_at_any_dual_point(
        variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar):
    """Weak duality: D(r, pi) bounds the node for every r and every pi >= 0, not only at its maximizer.
    Random fixings (an excluded pair among them), residuals around y and at other scales, prices from 0
    to far above the weights, the point 200 L-BFGS steps climb to (no incumbent to stop them) and points
    around it; the safe D is below D."""
    rng = np.random.default_rng(seed)
    Xs, ys = data(seed, K, p, n, s)
    excluded = np.zeros((K, p), bool)
    excluded[-1, 1] = True
    problem = bbar_problem(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded)
    table = enumeration(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded)
    search = SetBound(problem, 200, Deadline(30))
    search.upper = np.inf
    search.skipped = 0   # every stage, as at the root: these climbs start cold, not from a parent
    y, tight = np.concatenate(ys), 0
    for _ in range(6):
        fixed = rng.choice([bnb.FREE, bnb.OUT, bnb.IN], size=(K, p), p=[0.7, 0.15, 0.15]).astype(np.int8)
        if variant == "cs_bbar":   # a shared support is fixed by column, an excluded pair only weighs 0
            fixed[:] = fixed[0]
        else:
            fixed[excluded] = bnb.OUT
        for row in fixed:   # at most s in per task
            row[np.flatnonzero(row == bnb.IN)[s:]] = bnb.OUT
        optimum = table.optimum(fixed)
        climbed, top, _ = search.bound(fixed, search.start())
        assert below(climbed, optimum), fixed
        tight += climbed > 0.9 * optimum
        points = [np.concatenate([r_scale * y + rng.normal(size=y.size), price_scale * rng.exponential(size=K)])
                  for r_scale, price_scale in itertools.product((0.0, 0.5, 1.0, 3.0), (0.0, 0.1, 1.0, 100.0))]
        points += [np.concatenate([top[:y.size] + 0.1 * rng.normal(size=y.size),   # where D is nearly tight
                                   search.prices(top) / search.price_unit * rng.uniform(0.5, 2.0, K)]) for _ in range(4)]
        for point in points:
            value, _ = search.dual(fixed, point, 0.1)
            assert search.safe_dual(fixed, point) <= value
            assert below(value, optimum), (fixed, point)
    assert tight > 0   # the bounds are not trivially low


@pytest.mark.parametrize("mu", [0.05, 1e-3])
@pytest.mark.parametrize("variant,seed,K,p,n,s,lambda_ridge,lambda_bbar,lambda_zbar",
                         BOUND_CASES + [("zbar_l2", 10, 3, 5, 4, 2, 0.5, 0.0, 2.0)])
def test_the_compiled_set_dual_is_the_enumerated_formula(variant, seed, K, p, n, s, lambda_ridge, lambda_bbar,
                                                         lambda_zbar, mu):
    """``bnb.kernels.set_dual`` against D(r, pi) and its softmin written out here: each column's task
    sets the node allows (every fixed-in task, no fixed-out one; none or all for a shared support),
    each costing sum_S pi_k + (lambda_zbar/2)|S|(K-|S|)/K - ||v_S||^2/(2a) - c (sum_S v_k)^2 / (2a(a - c|S|)),
    a = lambda_ridge + lambda_bbar, c = lambda_bbar / K, v_k = X_k'r_k / n_k (0 on an excluded pair).  At the
    smaller mu most sets' softmin weights are below exp(-40), which the kernel takes as 0."""
    rng = np.random.default_rng(seed)
    Xs, ys = data(seed, K, p, n, s)
    excluded = np.zeros((K, p), bool)
    excluded[-1, 1] = True
    problem = bbar_problem(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar, excluded)
    search = SetBound(problem, 20, Deadline(30))
    a, c = lambda_ridge + lambda_bbar, lambda_bbar / K
    common = variant.startswith("cs")
    for _ in range(5):
        fixed = random_node(rng, variant, K, p, s)
        if not common:
            fixed[excluded] = bnb.OUT
        r = [y * rng.uniform(0, 2) + rng.normal(size=len(y)) for y in ys]
        prices = rng.exponential(size=K)
        v = np.array([X.T @ rk / len(rk) for X, rk in zip(Xs, r)]) * ~excluded
        base = sum((y @ rk - rk @ rk / 2) / len(y) for y, rk in zip(ys, r))
        minima, softminima = 0.0, 0.0
        for j in range(p):
            sets = [(), tuple(range(K))] if common else [S for m in range(K + 1) for S in itertools.combinations(range(K), m)]
            totals = [sum(prices[list(S)]) + lambda_zbar / 2 * len(S) * (K - len(S)) / K
                      - sum(v[list(S), j] ** 2) / (2 * a) - c * sum(v[list(S), j]) ** 2 / (2 * a * (a - c * len(S)))
                      for S in sets if all(k in S for k in range(K) if fixed[k, j] == bnb.IN)
                      and not any(fixed[k, j] == bnb.OUT for k in S)]
            minima += min(totals)
            softminima += min(totals) - mu * np.log(np.sum(np.exp((min(totals) - np.array(totals)) / mu)))
        budget = s * prices.sum()
        value, (smooth, _) = search.dual(fixed, np.concatenate(r + [prices / search.price_unit]), mu)
        assert value == pytest.approx(base - budget + minima, rel=1e-9, abs=1e-12)
        assert smooth == pytest.approx(base - budget + softminima, rel=1e-9, abs=1e-12)


#: (variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar)
CHILD_CASES = [("bbar", 4, 3, 6, 4, 2, 0.1, 1.0, 0.0), ("zbar_bbar", 5, 2, 7, 10, 2, 0.01, 10.0, 1.0),
               ("zbar_bbar", 6, 3, 5, 4, 2, 1.0, 0.1, 10.0), ("cs_bbar", 9, 3, 6, 4, 2, 0.1, 3.0, 0.0)]


@one_blas_thread
@pytest.mark.parametrize("variant,seed,K,p,n,s,lambda_ridge,lambda_bbar,lambda_zbar", CHILD_CASES)
def test_bbar_child_bounds_are_below_the_enumerated_child_optima(
        variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar):
    """Each free entry's "in" and "out" bound (node screening) is at most that child's enumerated
    optimum, at random dual points and at the points L-BFGS climbs to at the node and at a child."""
    rng = np.random.default_rng(seed)
    Xs, ys = data(seed, K, p, n, s)
    problem = bbar_problem(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar)
    table = enumeration(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar)
    search = SetBound(problem, 40, Deadline(30))
    search.upper = np.inf
    tight = 0
    for _ in range(3):
        fixed = filled(random_node(rng, variant, K, p, s), s)
        free = [tuple(entry) for entry in np.argwhere(fixed == bnb.FREE)]
        optima = {}
        for entry, value in itertools.product(free, (bnb.IN, bnb.OUT)):
            child = fixed.copy()
            child[entry] = value
            optima[entry, value] = table.optimum(child)
        some_child = fixed.copy()
        some_child[free[0]] = bnb.IN
        start = search.start()
        points = [start + rng.normal(size=start.size) for _ in range(2)]
        points += [search.bound(fixed, start)[1], search.bound(filled(some_child, s), start)[1]]
        for point in points:
            point[search.n_residuals:] = np.maximum(point[search.n_residuals:], 0.0)
            bound_in, bound_out = search.child_bounds(fixed, point)
            for entry, value in optima:
                bound = (bound_in if value == bnb.IN else bound_out)[entry]
                assert below(bound, optima[entry, value]), (fixed, entry, value)
                tight += bound > 0.9 * optima[entry, value]
    assert tight > 0


#: (variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar, signal, start): K = 1, wide and
#: tall tasks, 5-22 nodes each; from the empty support ("zero": the tree must find the optimum) or from
#: bcd's without local search (up to 41% above the optimum).
SOLVE_CASES = [("bbar", 20, 1, 8, 4, 2, 0.01, 1.0, 0.0, 0.5, "zero"),
               ("bbar", 21, 2, 8, 4, 2, 0.01, 10.0, 0.0, 0.0, "bcd"),
               ("bbar", 22, 2, 7, 12, 2, 1.0, 0.1, 0.0, 0.0, "zero"),
               ("zbar_bbar", 22, 2, 8, 5, 2, 0.01, 1.0, 1.0, 0.0, "bcd"),
               ("zbar_bbar", 20, 3, 7, 4, 2, 0.01, 3.0, 0.3, 0.5, "zero"),
               ("zbar_bbar", 20, 2, 8, 12, 2, 0.1, 1.0, 0.1, 0.5, "bcd"),
               ("zbar_bbar", 20, 3, 6, 4, 1, 0.1, 10.0, 10.0, 0.5, "zero"),
               ("cs_bbar", 23, 2, 8, 4, 2, 0.01, 1.0, 0.0, 0.5, "zero"),
               ("cs_bbar", 24, 3, 7, 12, 3, 0.1, 10.0, 0.0, 0.0, "bcd")]


@pytest.mark.parametrize("variant,seed,K,p,n,s,lambda_ridge,lambda_bbar,lambda_zbar,signal,start", SOLVE_CASES)
def test_bnb_proves_the_enumerated_optimum_with_a_bbar_term(
        variant, seed, K, p, n, s, lambda_ridge, lambda_bbar, lambda_zbar, signal, start):
    """A node bound above its node's optimum would prune the optimum away (the objective stays above
    the enumerated one) or put the final bound above it."""
    Xs, ys = data(seed, K, p, n, s, signal=signal)
    problem = bbar_problem(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar)
    optimum = enumeration(Xs, ys, variant, s, lambda_ridge, lambda_bbar, lambda_zbar).optimum()
    incumbent = np.zeros((K, p)) if start == "zero" else fit_bcd(problem, local_search=False, deadline=Deadline()).coef
    result = bnb.solve_bnb(problem, SolveOptions(time_limit=60), incumbent, deadline=Deadline(60))
    assert result.lower_bound <= optimum + 1e-9 * optimum <= result.objective + 2e-9 * optimum
    assert final_status(result, 1e-6) == "optimal"
    assert result.objective <= optimum * (1 + 1e-6)
    assert problem.feasible(result.estimate)


def centered_optimum(Xs, ys, s, lambda_ridge, lambda_bbar, lambda_zbar, variant="bbar"):
    """The enumerated optimum with intercepts (profiled out by centering each task's data)."""
    return enumeration([X - X.mean(axis=0) for X in Xs], [y - y.mean() for y in ys],
                       variant, s, lambda_ridge, lambda_bbar, lambda_zbar).optimum()


@pytest.mark.parametrize("scale,offset", [(1e-6, 0.0), (1.0, 1e9)])
@pytest.mark.parametrize("variant,lambda_zbar", [("bbar", 0.0), ("zbar_bbar", 1.0), ("cs_bbar", 0.0)])
def test_estimator_certifies_bbar_with_bnb_at_any_scale(variant, lambda_zbar, scale, offset):
    """y times 1e-6 (lambda_zbar times 1e-12, lambda_ridge and lambda_bbar unchanged: the same problem in
    other units) and y + 1e9, with an intercept: the optimum is enumerated on the centered, unshifted data."""
    Xs, ys = data(13, 2, 7, 5, 2, signal=2.0)
    optimum = centered_optimum(Xs, ys, 2, 0.1, 1.0, lambda_zbar, variant) * scale**2
    model = SparseMTL(variant=variant, s=2, lambda_ridge=0.1, lambda_bbar=1.0, lambda_zbar=lambda_zbar * scale**2,
                      algorithm="bnb", standardize=False, solve_options=SolveOptions(time_limit=60))
    model.fit(MultiTaskData(Xs, [scale * y + offset for y in ys]))
    result = model.result_
    assert result.status == "optimal" and "perspective dual" in result.bound_source
    assert result.lower_bound <= optimum * (1 + 1e-7)
    assert result.objective == pytest.approx(optimum, rel=1e-5)


def test_exact_picks_bnb_for_a_wide_bbar_problem_and_certifies():
    """n_k < p lends the cuts no curvature, so algorithm="exact" runs bnb, which now accepts Bbar."""
    Xs, ys = data(14, 3, 6, 4, 2, signal=2.0)
    optimum = centered_optimum(Xs, ys, 2, 0.05, 2.0, 0.0)
    model = SparseMTL(variant="bbar", s=2, lambda_ridge=0.05, lambda_bbar=2.0, algorithm="exact",
                      standardize=False, solve_options=SolveOptions(time_limit=60))
    model.fit(MultiTaskData(Xs, ys))
    result = model.result_
    assert result.algorithm == "bnb" and result.status == "optimal"
    assert result.lower_bound <= optimum * (1 + 1e-7)
    assert result.objective == pytest.approx(optimum, rel=1e-6)


def test_bnb_refuses_bbar_only_beyond_its_scope_and_names_a_path_that_works():
    """Per-task supports with K > MAX_BBAR_TASKS are refused up front, naming oa_multi_tree; at
    K = MAX_BBAR_TASKS (2^K task sets per column) bnb certifies the enumerated optimum (p = 2, s = 1:
    3^K supports), and a shared support (cs_bbar: two sets per column, none or all tasks) at any K."""
    def model(variant, s):
        return SparseMTL(variant=variant, s=s, lambda_ridge=0.1, lambda_bbar=5.0, algorithm="bnb",
                         standardize=False, solve_options=SolveOptions(time_limit=60))

    for variant in ("bbar", "zbar_bbar"):
        Xs, ys = data(15, bnb.MAX_BBAR_TASKS + 1, 4, 6, 2)
        with pytest.raises(InvalidParameterError, match="oa_multi_tree"):
            model(variant, 2).fit(MultiTaskData(Xs, ys))
    for variant, K, p, s in [("bbar", bnb.MAX_BBAR_TASKS, 2, 1), ("cs_bbar", 3 * bnb.MAX_BBAR_TASKS, 6, 2)]:
        Xs, ys = data(15, K, p, 3, s, signal=0.5)
        optimum = centered_optimum(Xs, ys, s, 0.1, 5.0, 0.0, variant)
        result = model(variant, s).fit(MultiTaskData(Xs, ys)).result_
        assert result.algorithm == "bnb" and result.status == "optimal"
        assert result.lower_bound <= optimum * (1 + 1e-7)
        assert result.objective == pytest.approx(optimum, rel=1e-6)
