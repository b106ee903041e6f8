"""bnb's node screening: its children's bounds against enumerated child optima, and certified fits."""

import itertools

import numpy as np
import pytest
import scipy.optimize
from test_bnb_zbar import enumerated_optimum

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.resources import one_blas_thread
from mtl_opt.solvers.sparse import bnb
from mtl_opt.solvers.sparse.bnb import kernels
from mtl_opt.solvers.sparse.bnb.greedy import GreedyBound
from mtl_opt.solvers.sparse.bnb.node import STAGES
from mtl_opt.solvers.sparse.bnb.sets import SetBound
from mtl_opt.solvers.sparse.bnb.tree import filled
from mtl_opt.solvers.sparse.bnb.zbar import ZbarBound
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.options import SolveOptions

#: (variant, lambda_zbar), and (seed, K, p, n, s): wide (n < p) and tall tasks.
VARIANTS = [("l0l2", 0.0), ("cs_l2", 0.0), ("zbar_l2", 1.0)]
SHAPES = [(0, 1, 8, 5, 2), (1, 2, 7, 12, 2), (2, 3, 6, 4, 2), (3, 2, 8, 6, 3), (4, 1, 10, 14, 2)]


def data(seed, K, p, n, s, signal=1.0):
    """Tasks sharing most of an s-sparse truth (so supports, shared or not, matter)."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(p)
    truth[rng.choice(p, s, replace=False)] = signal * rng.uniform(0.5, 1.5, s) * rng.choice([-1, 1], s)
    Xs = [rng.normal(size=(n, p)) for _ in range(K)]
    ys = [X @ (truth * rng.uniform(0.7, 1.3, p)) + rng.normal(size=n) for X in Xs]
    return Xs, ys


def problem_of(Xs, ys, variant, s, lambda_zbar, lambda_ridge=0.1):
    return SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=s, lambda_ridge=lambda_ridge,
                                   lambda_zbar=lambda_zbar, fit_intercept=False)


def child_optimum(Xs, ys, variant, s, lambda_zbar, fixed, lambda_ridge=0.1):
    """min F over the supports ``fixed`` allows (1 in, 0 out, -1 free), inf if none: per task (and
    the Zbar term) by ``enumerated_optimum``; for cs_l2 over the shared column sets, each task's
    ridge fit on the set by its own normal equations."""
    if np.sum(fixed == 1, axis=1).max() > s:
        return np.inf
    if variant != "cs_l2":
        return enumerated_optimum(Xs, ys, s, lambda_ridge, lambda_zbar, fixed)
    p, best = fixed.shape[1], np.inf
    for size in range(s + 1):
        for cols in itertools.combinations(range(p), size):
            mask = np.zeros(p, bool)
            mask[list(cols)] = True
            if np.any(mask & (fixed[0] == 0)) or np.any(~mask & (fixed[0] == 1)):
                continue
            total = 0.0
            for X, y in zip(Xs, ys):
                n, Xc = len(y), X[:, mask]
                beta = np.linalg.solve(Xc.T @ Xc / n + lambda_ridge * np.eye(size), Xc.T @ y / n)
                total += np.sum((y - Xc @ beta) ** 2) / (2 * n) + lambda_ridge / 2 * beta @ beta
            best = min(best, total)
    return best


def random_node(rng, variant, K, p, s):
    """Random fixings (per column for a shared support), at most s in per task."""
    rows = 1 if variant.startswith("cs") else K
    fixed = rng.choice([bnb.FREE, bnb.OUT, bnb.IN], size=(rows, p), p=[0.7, 0.15, 0.15]).astype(np.int8)
    for row in fixed:
        row[np.flatnonzero(row == bnb.IN)[s - 1:]] = bnb.FREE   # room for one more in
    return np.repeat(fixed, K, axis=0) if rows == 1 else fixed


def entries(fixed, variant):
    """The free branching variables: pairs, or columns for a shared support."""
    if variant.startswith("cs"):
        return [(slice(None), j) for j in np.flatnonzero(fixed[0] == bnb.FREE)]
    return [tuple(e) for e in np.argwhere(fixed == bnb.FREE)]


@one_blas_thread
@pytest.mark.parametrize("variant,lambda_zbar", VARIANTS)
def test_child_bounds_are_below_the_enumerated_child_optima(variant, lambda_zbar):
    """Weak duality: at random dual points and at points L-BFGS climbs to (at the node and at a
    child), each free entry's "in" and "out" bound is at most the child's enumerated optimum."""
    rng = np.random.default_rng(7)
    tight = 0
    for seed, K, p, n, s in SHAPES:
        Xs, ys = data(seed, K, p, n, s)
        problem = problem_of(Xs, ys, variant, s, lambda_zbar)
        search = (ZbarBound if lambda_zbar else GreedyBound)(problem, 40, Deadline(30))
        search.upper = np.inf   # climb without stopping at an incumbent
        for _ in range(2):
            fixed = filled(random_node(rng, variant, K, p, s), s)
            cases = entries(fixed, variant)
            optima = {}
            for i, entry in enumerate(cases):
                for value in (bnb.IN, bnb.OUT):
                    child = fixed.copy()
                    child[entry] = value
                    optima[i, value] = child_optimum(Xs, ys, variant, s, lambda_zbar, child)
            some_child = fixed.copy()
            some_child[cases[0]] = bnb.IN
            points = [search.start() + rng.normal(size=search.start().shape) for _ in range(2)]
            points += [search.bound(fixed, search.start())[1], search.bound(filled(some_child, s), search.start())[1]]
            for point in points:
                if lambda_zbar:
                    point[search.n_residuals:] = np.maximum(point[search.n_residuals:], 0.0)
                bound_in, bound_out = search.child_bounds(fixed, point)
                for i, entry in enumerate(cases):
                    for value, bounds in ((bnb.IN, bound_in), (bnb.OUT, bound_out)):
                        optimum = optima[i, value]
                        bound = np.max(bounds[entry])
                        assert bound <= optimum + 1e-12 * abs(optimum), (seed, entry, value)
                        tight += bound > 0.9 * optimum
    assert tight > 0   # the bounds are not trivially low


@pytest.mark.parametrize("variant", ["l0l2", "cs_l2"])
def test_the_climb_scores_d_with_the_weight_of_the_greedy_support(variant):
    """The climb's D (``bnb.kernels.search_dual``: the heaviest free entries by its own sort) and the
    reported bound and proposed support (``_greedy``, a stable sort) take the same weight, with many
    ties; and the greedy support fills each budget with the node's fixed-in entries and none of its
    fixed-out ones."""
    rng = np.random.default_rng(11)
    for seed, K, p, n, s in SHAPES:
        Xs, ys = data(seed, K, p, n, s)
        Xs = [np.round(X) for X in Xs]   # integer designs and points: ties in the weights throughout
        search = GreedyBound(problem_of(Xs, ys, variant, s, 0.0), 40, Deadline(30))
        for _ in range(20):
            fixed = filled(random_node(rng, variant, K, p, s), s)
            r = rng.integers(-1, 2, size=search.ends[-1]).astype(float)
            weight = search.weights(r)
            greedy = search._greedy(fixed, weight)
            base, _ = search._loss_part(r, np.zeros((K, p)))
            value, _ = search.dual(fixed, r, 0.5)
            assert value == pytest.approx(base - np.sum(weight[greedy]), rel=1e-12, abs=1e-12)
            assert np.all(greedy.sum(axis=1) == np.minimum(s, (fixed != bnb.OUT).sum(axis=1)))
            assert np.all(greedy[fixed == bnb.IN]) and not np.any(greedy[fixed == bnb.OUT])


@pytest.mark.parametrize("variant,lambda_zbar,lambda_bbar,search_class", [
    ("l0l2", 0.0, 0.0, GreedyBound), ("cs_l2", 0.0, 0.0, GreedyBound), ("zbar_l2", 1.0, 0.0, SetBound),
    ("zbar_bbar", 0.5, 3.0, SetBound), ("cs_bbar", 0.0, 1.0, SetBound)])
def test_the_compiled_climb_reaches_scipys_maximum_and_keeps_its_best_point(variant, lambda_zbar, lambda_bbar,
                                                                             search_class):
    """``bnb.kernels.climb`` against scipy's L-BFGS-B on the same smoothed D, run to convergence (with
    the prices' bound pi >= 0 in the priced trees): the same maximum (both methods, one concave
    function); the best D it reports is D at the point it kept, at least D at the start and at its
    last point; and a start already at the incumbent is pruned there, without a step.  The priced
    starts have one price below 0, which the climb raises to 0 before its first evaluation."""
    rng = np.random.default_rng(3)
    for seed, K, p, n, s in SHAPES:
        Xs, ys = data(seed, K, p, n, s)
        problem = SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=s, lambda_ridge=0.1,
                                          lambda_zbar=lambda_zbar, lambda_bbar=lambda_bbar, fit_intercept=False)
        search = search_class(problem, 40, Deadline(30))
        fixed = filled(random_node(rng, variant, K, p, s), s)
        mu, residuals = 0.05, search.ends[-1]
        start = search.start() + 0.1 * rng.normal(size=len(search.start()))
        start[residuals:] = np.abs(start[residuals:])
        start[-1] = -0.5 if len(start) > residuals else start[-1]
        floor = [(None, None)] * residuals + [(0.0, None)] * (len(start) - residuals)

        def climb(upper, best_point, maxiter=2000):
            return kernels.climb(search._evaluation(fixed, mu), start, residuals, maxiter, 10, 0.0, upper,
                                     best_point, -np.inf)

        def negative_smoothed(point):
            _, (smooth, gradient) = search.dual(fixed, point, mu)
            return -smooth, -gradient
        cleared = np.concatenate([start[:residuals], np.maximum(start[residuals:], 0.0)])
        maximum = -scipy.optimize.minimize(negative_smoothed, cleared, jac=True, method="L-BFGS-B", bounds=floor,
                                           options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12}).fun
        best_point = np.empty_like(start)
        last, best, pruned = climb(np.inf, best_point)
        assert not pruned and np.all(last[residuals:] >= 0)
        assert -negative_smoothed(last)[0] == pytest.approx(maximum, rel=1e-9, abs=1e-12)
        assert search.dual(fixed, best_point, mu)[0] == pytest.approx(best, rel=1e-12, abs=1e-12)
        at_start = search.dual(fixed, cleared, mu)[0]
        assert best >= max(at_start, search.dual(fixed, last, mu)[0])
        last, best, pruned = climb(at_start, best_point)
        assert pruned and best == pytest.approx(at_start, rel=1e-12, abs=1e-12)
        assert np.allclose(last, cleared, rtol=0, atol=0)


def test_the_compiled_climb_stops_at_a_stationary_start():
    """y = 0 and r = 0: every slope is 0, so the smoothed D's gradient is exactly 0.  The climb ends
    there (it divided by the zero gradient's length before), keeping the start and its D = 0."""
    rng = np.random.default_rng(0)
    X, ends = rng.normal(size=(6, 8)), np.array([0, 6])
    best_point = np.full(6, np.nan)
    evaluation = (X, np.zeros(6), ends, np.full((1, 8), 1 / 6), 0.5, np.full((1, 8), -np.inf), np.full((1, 8), np.inf),
                  False, 0.1, np.full((1, 8), bnb.FREE, dtype=np.int8), 2)
    last, best, pruned = kernels.climb(evaluation, np.zeros(6), 6, 50, 10, 0.0, np.inf, best_point, -np.inf)
    assert not pruned and best == pytest.approx(0.0, abs=1e-12)
    assert np.allclose(last, 0.0, rtol=0, atol=1e-12) and np.allclose(best_point, 0.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("variant,lambda_zbar,K,n,skip", [
    ("l0l2", 0.0, 2, 6, 0), ("cs_l2", 0.0, 2, 6, 1), ("zbar_l2", 1.0, 2, 6, 1), ("cs_l2", 0.0, 1, 6, 0),
    ("zbar_l2", 1.0, 2, 12, 0)])
def test_the_root_climbs_every_stage_and_children_of_wide_joint_trees_skip_one(variant, lambda_zbar, K, n, skip,
                                                                               monkeypatch):
    """``warm_skip``: a tree over several tasks (a shared support, a Zbar term) with fewer rows than
    features climbs its children from the parent's point without the roughest stage; one task's
    tree (l0l2 splits per task, or K = 1) and a tree of tall tasks keep every stage."""
    schedules = []
    original = GreedyBound.mu_schedule
    monkeypatch.setattr(GreedyBound, "mu_schedule", lambda self: schedules.append(original(self)) or schedules[-1])
    Xs, ys = data(1, K, 8, n, 2)
    run = bnb.solve_bnb(problem_of(Xs, ys, variant, 2, lambda_zbar), SolveOptions(time_limit=60, threads=1),
                        np.zeros((K, 8)), deadline=Deadline(60))
    assert run.native["nodes"] > 1
    roots = K if variant == "l0l2" else 1
    assert [len(mus) for mus in schedules[:roots]] == [STAGES] * roots
    assert {len(mus) for mus in schedules[roots:]} == {STAGES - skip}
    assert all(np.all(np.diff(mus) < 0) for mus in schedules)


def test_capped_projection_matches_bisection():
    """The smoothed climb's z, clip(scores - t, 0, 1) with the least t >= 0 keeping sum z <= budget,
    against t found by bisection; scores with ties, negatives, many far below the cut, exact
    integer scores (the cut on a break), and grids of fifths (many scores within 1 of the cut;
    at [5, 5, 5, 4.4] and budget 2, t = 4.35 and the 4.4 takes part)."""
    rng = np.random.default_rng(5)
    cases = [(rng.normal(size=n) * spread, budget) for n, spread, budget in
             itertools.product((1, 3, 40, 250), (0.3, 3.0, 300.0), (1, 2, 14))]
    cases += [(rng.integers(-2, 4, size=60).astype(float), budget) for budget in (1, 5, 13)]
    cases += [(rng.integers(0, 12, size=n) / 5.0, budget) for n in (4, 9, 50) for budget in (2, 3, 6)]
    cases += [(np.array([5.0, 5.0, 5.0, 4.4]), 2), (np.full(30, 2.5), 7),
              (np.concatenate([np.full(5, 9.0), rng.uniform(0, 0.1, 200)]), 3)]
    for scores, budget in cases:
        z = kernels.capped(scores, budget)

        def total(t):
            return np.clip(scores - t, 0.0, 1.0).sum()
        low, high = 0.0, max(scores.max(), 0.0) + 1.0
        if total(low) > budget:
            for _ in range(200):
                middle = (low + high) / 2
                low, high = (middle, high) if total(middle) > budget else (low, middle)
        expected = np.clip(scores - high, 0.0, 1.0) if total(0.0) > budget else np.clip(scores, 0.0, 1.0)
        np.testing.assert_allclose(z, expected, rtol=0, atol=1e-9)
        assert z.sum() <= budget + 1e-9


CASES = [(variant, lambda_zbar, *shape) for variant, lambda_zbar in VARIANTS for shape in SHAPES[:4]]


@pytest.mark.parametrize("variant,lambda_zbar,seed,K,p,n,s", CASES)
def test_bnb_with_screening_proves_the_enumerated_optimum(variant, lambda_zbar, seed, K, p, n, s):
    """From the empty support, so the tree must find the optimum: a wrong fixing would leave the
    objective above it, or the bound."""
    Xs, ys = data(seed, K, p, n, s, signal=3.0)
    problem = problem_of(Xs, ys, variant, s, lambda_zbar)
    optimum = child_optimum(Xs, ys, variant, s, lambda_zbar, np.full((K, p), bnb.FREE))
    start = np.zeros((K, p))
    result = bnb.solve_bnb(problem, SolveOptions(time_limit=60), start, deadline=Deadline(60))
    assert result.lower_bound <= optimum + 1e-9 * optimum <= result.objective + 2e-9 * optimum
    assert final_status(result, 1e-6) == "optimal"
    assert result.objective <= optimum * (1 + 1e-6)
    assert result.native["screened"] > 0   # the fixings were exercised


@pytest.mark.parametrize("scale,offset", [(1e-6, 0.0), (1.0, 1e9)])
@pytest.mark.parametrize("variant,lambda_zbar", VARIANTS)
def test_estimator_certifies_with_screening_at_any_scale(variant, lambda_zbar, scale, offset):
    """y times 1e-6 (lambda_zbar times 1e-12: the same problem in other units) and y + 1e9 with an
    intercept, through SparseMTL: the optimum is enumerated on the centered, unshifted data."""
    Xs, ys = data(5, 2, 7, 6, 2, signal=3.0)
    centered_X = [X - X.mean(axis=0) for X in Xs]
    centered_y = [y - y.mean() for y in ys]
    optimum = child_optimum(centered_X, centered_y, variant, 2, lambda_zbar, np.full((2, 7), bnb.FREE)) * scale**2
    model = SparseMTL(variant=variant, s=2, lambda_ridge=0.1, lambda_zbar=lambda_zbar * scale**2, algorithm="bnb",
                      standardize=False, solve_options=SolveOptions(time_limit=60))
    model.fit(MultiTaskData(Xs, [scale * y + offset for y in ys]))
    result = model.result_
    assert result.status == "optimal"
    assert result.lower_bound <= optimum * (1 + 1e-7)
    assert result.objective == pytest.approx(optimum, rel=1e-5)


#: (seed, p, n, s, signal, lambda_ridge): K = 1, n < p, small trees (4-25 nodes each).
SCREENING_CASES = [(3, 30, 20, 4, 4.0, 0.5), (3, 30, 20, 4, 2.0, 0.5), (3, 40, 20, 5, 2.0, 0.2), (1, 30, 20, 4, 1.0, 0.5),
                   (1, 60, 25, 5, 1.0, 0.5), (2, 60, 25, 5, 1.0, 0.3), (3, 50, 20, 4, 1.5, 0.5), (4, 60, 30, 5, 1.0, 0.5)]


def test_screening_fixes_entries_and_saves_nodes():
    """Where the root's dual point already shows most features out (K = 1, n < p), screening fixes
    entries on every instance and, over the eight, the trees need fewer nodes (74 against 81 when
    written; per instance the saving is 0-3 nodes, and one tree took 25 against 22), with the same
    certified optimum."""
    nodes = {True: 0, False: 0}
    for seed, p, n, s, signal, lambda_ridge in SCREENING_CASES:
        Xs, ys = data(seed, 1, p, n, s, signal=signal)
        problem = problem_of(Xs, ys, "l0l2", s, 0.0, lambda_ridge=lambda_ridge)
        runs = {on: bnb.solve_bnb(problem, SolveOptions(time_limit=60), np.zeros((1, p)), screening=on, deadline=Deadline(60))
                for on in (True, False)}
        assert runs[True].native["screened"] > 0 and runs[False].native["screened"] == 0
        for on, run in runs.items():
            assert final_status(run, 1e-6) == "optimal"
            nodes[on] += run.native["nodes"]
        assert runs[True].objective == pytest.approx(runs[False].objective, rel=1e-9)
    assert nodes[True] < nodes[False]


def test_the_slopes_error_bound_covers_their_exact_error():
    """``_safe_slopes``' slack (Cauchy-Schwarz on the column and residual norms) is above the
    exact error of each slope v = X'r / n, computed in rational arithmetic: columns of very
    different magnitudes and residuals that nearly cancel against them."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    Xs = [rng.normal(size=(9, 5)) * [1e-8, 1.0, 1e6, 1.0, 3.0] for _ in range(2)]
    ys = [rng.normal(size=9) for _ in range(2)]
    problem = problem_of(Xs, ys, "l0l2", 2, 0.0)
    bounder = GreedyBound(problem, 10, Deadline(None))
    r = np.concatenate([y + 1e-3 * rng.normal(size=9) for y in problem.ys])
    r[:9] -= problem.Xs[0][:, 2] * (problem.Xs[0][:, 2] @ r[:9]) / (problem.Xs[0][:, 2] @ problem.Xs[0][:, 2])
    _, _, v, slack = bounder._safe_slopes(r)
    for k, X in enumerate(problem.Xs):
        rk = r[9 * k:9 * (k + 1)]
        for j in range(5):
            exact = sum(Fraction(a) * Fraction(b) for a, b in zip(X[:, j], rk)) / 9
            assert abs(Fraction(v[k, j]) - exact) <= Fraction(slack[k, j])
            assert slack[k, j] <= 1e-12 * np.linalg.norm(X[:, j]) * np.linalg.norm(rk)   # and tight


def test_nodes_are_bounded_against_the_level_that_prunes_them():
    """A tree with a prune gap hands its climbs upper (1 - gap), the level past which climbing
    proves nothing it reports (``Engine.level``), at the root and below."""
    from mtl_opt.solvers.engine.workers import Serial
    from mtl_opt.solvers.sparse.bnb.tree import SupportTree

    Xs, ys = data(1, 1, 60, 25, 5, signal=1.0)
    problem = problem_of(Xs, ys, "l0l2", 5, 0.0, lambda_ridge=0.5)
    levels = []

    class Recording(GreedyBound):
        def work(self, job, upper, deadline):
            levels.append((upper, tree_upper()))
            return super().work(job, upper, deadline)

    tree = None
    tree_upper = lambda: problem.objective(np.zeros((1, 60))) if tree is None else tree.upper   # noqa: E731
    tree = SupportTree(problem, Recording(problem, 1000, Deadline(None)), np.zeros((1, 60)),
                       Serial(Deadline(None)), prune_gap=0.01)
    while tree.engine.open and tree.engine.nodes < 5:
        tree.engine.step()
    assert len(levels) > 2
    for level, upper in levels:
        assert level == pytest.approx(0.99 * upper, rel=1e-12)


@pytest.mark.parametrize("variant,lambda_zbar", VARIANTS)
def test_a_loose_gap_is_met_with_a_bound_below_the_enumerated_optimum(variant, lambda_zbar):
    """At rel_gap 5 % (nodes closed within 2.5 % of the incumbent), the bound stays below the
    enumerated optimum and the gap within 5 %."""
    Xs, ys = data(2, 2, 7, 12, 2, signal=1.0)
    problem = problem_of(Xs, ys, variant, 2, lambda_zbar)
    optimum = child_optimum(Xs, ys, variant, 2, lambda_zbar, np.full((2, 7), bnb.FREE))
    result = bnb.solve_bnb(problem, SolveOptions(time_limit=60, rel_gap=0.05), np.zeros((2, 7)),
                           deadline=Deadline(60))
    assert result.lower_bound <= optimum * (1 + 1e-9)
    assert result.objective >= optimum * (1 - 1e-9)
    assert result.objective - result.lower_bound <= 0.05 * result.objective
