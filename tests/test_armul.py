"""ARMUL: certificates against SCIP and closed forms, brute force for clusters, API and errors."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from mtl_opt.cli import main
from mtl_opt.errors import CapabilityError, InvalidDataError, InvalidParameterError
from mtl_opt.estimators import (ARMUL, ClusteredMTL, DataPooling, IndependentTasks, LowRankMTL,
                                PerTaskOLS, PooledOLS)
from mtl_opt.formulations.armul import ArmulProblem
from mtl_opt.formulations.least_squares import ols
from mtl_opt.solvers.method import SolverRun, final_status
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.solvers.armul.prox import fista
from mtl_opt.synthetic import armul_simulation
from mtl_opt.deadline import Deadline

PLAIN = {"fit_intercept": False, "standardize": False}


def random_tasks(seed, loss, m=5, d=5, n=30, spread=0.5):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n, d)) for _ in range(m)]
    theta = rng.standard_normal(d) + spread * rng.standard_normal((m, d))
    if loss == "squared":
        ys = [X @ t + rng.standard_normal(n) for X, t in zip(Xs, theta)]
    else:
        ys = [(rng.random(n) < 1 / (1 + np.exp(-X @ t))).astype(float) for X, t in zip(Xs, theta)]
    return Xs, ys


def as_data(Xs, ys):
    from mtl_opt.data import MultiTaskData
    return MultiTaskData(Xs, ys)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_vanilla_prox_matches_scip_and_its_bound_is_valid(loss):
    """Both brackets [bound, objective at the returned point] contain the optimum."""
    for seed in range(4):
        data = as_data(*random_tasks(seed, loss))
        ours = ARMUL(loss=loss, c=1.0, **PLAIN).fit(data).result_
        scip = ARMUL(loss=loss, c=1.0, algorithm="exact", **PLAIN).fit(data).result_
        assert ours.status == "optimal" and ours.rel_gap <= 1e-6
        # scip.objective is recomputed at SCIP's point: a true upper bound on the optimum.
        assert ours.lower_bound <= scip.objective
        assert scip.lower_bound <= ours.objective
        assert ours.objective <= scip.objective * (1 + 1e-5)
        # SCIP's point is within 1e-4 of ours (within 1e-5 unless its cones sit at feastol).
        assert abs(ours.objective - scip.objective) <= 1e-4 * scip.objective


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_dual_bound_at_any_point_is_below_the_optimum(loss):
    problem = ArmulProblem.from_tasks(*random_tasks(1, loss), loss=loss, c=0.7)
    best = fista(problem, rel_gap=1e-10, deadline=Deadline())
    rng = np.random.default_rng(0)
    for scale in (1e-3, 1e-1, 1.0):
        theta = best.theta + scale * rng.standard_normal(best.theta.shape)
        bound = problem.dual_bound(theta, "vanilla")
        assert bound is None or bound <= best.objective
    centers = rng.standard_normal((problem.m, problem.d))
    fixed = fista(problem, centers=centers, rel_gap=1e-9, deadline=Deadline())
    run = SolverRun(fixed.theta, fixed.objective, fixed.lower_bound, fixed.status)
    assert final_status(run, 1e-9) == "optimal" and fixed.lower_bound <= fixed.objective


def test_independent_and_pooled_bounds_equal_least_squares_closed_form():
    Xs, ys = random_tasks(2, "squared")
    problem = ArmulProblem.from_tasks(Xs, ys, c=0.0)
    fits = [ols(X, y) for X, y in zip(Xs, ys)]
    theta = np.array([f.coef for f in fits]) + 0.01
    exact = sum(len(y) * f.objective for f, y in zip(fits, ys))
    assert problem.dual_bound(theta, "independent") == pytest.approx(exact, rel=1e-9)
    pooled = ols(np.vstack(Xs), np.concatenate(ys))
    n_total = sum(len(y) for y in ys)
    assert problem.dual_bound(np.tile(pooled.coef + 0.01, (5, 1)), "pooled") <= n_total * pooled.objective
    assert problem.dual_bound(np.tile(pooled.coef, (5, 1)), "pooled") == pytest.approx(
        n_total * pooled.objective, rel=1e-9)


@pytest.mark.parametrize("seed, c", [(3, 1.0), (4, 0.5), (5, 2.0)])
def test_clustered_scip_equals_brute_force_over_assignments(seed, c):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((20, 2)) for _ in range(5)]
    theta = np.array([[1, 0], [1, 0], [-1, 1], [-1, 1], [0, 0.5]]) + 0.3 * rng.standard_normal((5, 2))
    ys = [X @ t + rng.standard_normal(20) for X, t in zip(Xs, theta)]
    problem = ArmulProblem.from_tasks(Xs, ys, c=c)
    brute = min(
        sum(fista(problem.subset(np.flatnonzero(np.array(labels) == g)), rel_gap=1e-10, deadline=Deadline()).objective
            for g in set(labels))
        for labels in itertools.product(range(2), repeat=5))
    exact = ARMUL("clustered", n_components=2, c=c, algorithm="exact", **PLAIN).fit(as_data(Xs, ys))
    # the bound and the estimate come from the groups' vanilla solves (armul_tree), not from
    # SCIP's bound or its point (which meets its cones only to ~sqrt(feastol))
    assert exact.result_.lower_bound <= brute * (1 + 1e-10)
    assert exact.result_.status == "optimal"
    assert exact.result_.objective == pytest.approx(brute, rel=1e-8)
    local = ARMUL("clustered", n_components=2, c=c, seed=0, **PLAIN).fit(as_data(Xs, ys)).result_
    assert local.status == "heuristic" and local.objective >= brute * (1 - 1e-6)
    assert sorted(np.bincount(exact.labels_)) == sorted(np.bincount(exact.result_.extra["labels"]))


def test_structures_reduce_to_their_limits():
    data = armul_simulation("clustered", m=6, n=40, d=4, delta=0.3, seed=1).data
    vanilla = ARMUL(c=0.8, **PLAIN).fit(data).result_
    one_cluster = ARMUL("clustered", n_components=1, c=0.8, **PLAIN).fit(data).result_
    assert one_cluster.objective == pytest.approx(vanilla.objective, rel=1e-5)
    pooled = DataPooling(**PLAIN).fit(data).result_
    assert ClusteredMTL(1, **PLAIN).fit(data).result_.objective == pytest.approx(pooled.objective, rel=1e-9)
    independent = IndependentTasks(**PLAIN).fit(data).result_
    full_rank = LowRankMTL(4, **PLAIN).fit(data).result_
    assert full_rank.objective == pytest.approx(independent.objective, rel=1e-6)
    lowrank = ARMUL("lowrank", n_components=2, c=0.8, **PLAIN).fit(data)
    assert np.linalg.matrix_rank(lowrank.result_.extra["centers_fitted"], tol=1e-8) <= 2
    assert lowrank.basis_.shape == (4, 2)


def test_baselines_match_ols_with_intercept_and_standardization():
    data = armul_simulation("vanilla", m=4, n=30, d=3, delta=0.5, seed=2).data
    for ours, reference in ((IndependentTasks(), PerTaskOLS()), (DataPooling(), PooledOLS())):
        ours.fit(data)
        reference.fit(data)
        assert ours.result_.status == "optimal"
        assert np.allclose(ours.coef_, reference.coef_, atol=1e-8)
        assert np.allclose(ours.intercept_, reference.intercept_, atol=1e-8)


def test_large_c_pools_and_zero_c_separates():
    data = armul_simulation("vanilla", m=4, n=30, d=3, delta=0.5, seed=4).data
    tight = SolveOptions(rel_gap=1e-11)  # coefficient error ~ sqrt(objective gap)
    assert np.allclose(ARMUL(c=0.0, solve_options=tight).fit(data).coef_, PerTaskOLS().fit(data).coef_,
                       atol=1e-5)
    assert np.allclose(ARMUL(c=50.0, solve_options=tight).fit(data).coef_, PooledOLS().fit(data).coef_,
                       atol=1e-5)


def test_logistic_predictions_and_center():
    Xs, ys = random_tasks(5, "logistic")
    est = ARMUL(loss="logistic", c=0.5).fit(as_data(Xs, ys))
    proba = est.predict_proba(Xs)   # (n_k, 2) per task: P(0), P(1)
    assert all(np.all((p > 0) & (p < 1)) and np.allclose(p.sum(axis=1), 1) for p in proba)
    assert all(np.array_equal(lab, (p[:, 1] > 0.5).astype(float)) for lab, p in zip(est.predict(Xs), proba))
    eta = [X @ c + b for X, c, b in zip(Xs, est.coef_, est.intercept_)]
    assert all(np.allclose(p[:, 1], 1 / (1 + np.exp(-e)), rtol=0, atol=1e-12) for p, e in zip(proba, eta))
    assert est.center_.shape == (5,) and isinstance(est.center_intercept_, float)


def test_warm_start_gives_the_same_certified_optimum():
    data = as_data(*random_tasks(6, "squared"))
    first = ARMUL(c=0.5).fit(data).result_
    cold = ARMUL(c=0.6).fit(data).result_
    warm = ARMUL(c=0.6).fit(data, init=first).result_
    assert warm.status == "optimal" and warm.objective == pytest.approx(cold.objective, rel=2e-6)


@pytest.mark.parametrize("structure, settings, time_limit", [
    ("clustered", {"n_init": 10**6}, 1.0),   # a million restarts: seeding alone outlasts the limit
    ("lowrank", {}, 1e-6),                    # the limit passes during the first round
])
def test_time_limit_bounds_the_whole_prox_fit(structure, settings, time_limit):
    import time
    data = as_data(*random_tasks(0, "squared", m=6))
    start = time.perf_counter()
    est = ARMUL(structure, n_components=2, seed=0, **settings,
                solve_options=SolveOptions(time_limit=time_limit)).fit(data)
    elapsed = time.perf_counter() - start
    result = est.result_
    assert elapsed < 15, elapsed   # 1 s plus building and one partial restart; margin for 4x load
    assert result.status == "time_limit"
    if structure == "clustered":   # a heuristic: no bound
        assert result.lower_bound is None
    else:                          # the independent-tasks bound holds at any iterate
        assert result.lower_bound is None or result.lower_bound <= result.objective
    assert result.algorithm == "prox" and result.backend is None
    assert np.all(np.isfinite(result.coef)) and np.isfinite(result.objective)


def test_baselines_report_their_one_algorithm_and_no_backend():
    data = as_data(*random_tasks(0, "squared"))
    for est, algorithm in ((IndependentTasks(), "newton"), (DataPooling(), "newton"),
                           (ClusteredMTL(2, seed=0), "alternating"), (LowRankMTL(2), "alternating")):
        result = est.fit(data).result_
        assert (result.algorithm, result.backend) == (algorithm, None)


@pytest.mark.parametrize("kwargs, data_kind, match", [
    ({"c": -1.0}, "squared", "'c' parameter of ARMUL"),
    ({"structure": "clustered"}, "squared", "needs n_components"),
    ({"loss": "logistic"}, "squared", "Unknown label type: continuous"),
    ({"structure": "lowrank", "n_components": 2, "algorithm": "exact"}, "squared", "no exact method"),
    ({"backend": "scip"}, "squared", "no backend"),
    ({"algorithm": "scip"}, "squared", "'algorithm' parameter of ARMUL"),
    ({"algorithm": "exact", "backend": "highs"}, "squared", "HiGHS cannot solve QCP.*backend='scip', or backend='gurobi'"),
])
def test_bad_input_is_a_clear_error(kwargs, data_kind, match):
    data = as_data(*random_tasks(0, data_kind))
    with pytest.raises((InvalidParameterError, InvalidDataError, CapabilityError), match=match):
        ARMUL(**kwargs).fit(data)


def test_predict_proba_needs_logistic_and_components_are_capped_at_the_tasks():
    data = as_data(*random_tasks(0, "squared"))   # 5 tasks
    with pytest.raises(InvalidParameterError, match="loss='logistic'"):
        ARMUL().fit(data).predict_proba(data)
    # at most 9 clusters (or rank 9) of 5 tasks is at most 5: the same problem, the same fit
    for more, five in ((LowRankMTL(9), LowRankMTL(5)), (ClusteredMTL(9, seed=0), ClusteredMTL(5, seed=0)),
                       (ARMUL("clustered", n_components=9, seed=0), ARMUL("clustered", n_components=5, seed=0))):
        a, b = more.fit(data), five.fit(data)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.result_.objective == b.result_.objective and a.result_.lower_bound == b.result_.lower_bound


def test_simulation_follows_section_5_1():
    sim = armul_simulation("vanilla", m=10, n=5, d=6, delta=0.4, epsilon=0.2, seed=7)
    assert sim.inliers.sum() == 8
    inlier_dev = np.linalg.norm(sim.coef[sim.inliers] - 2 * np.eye(6)[0], axis=1)
    assert np.allclose(inlier_dev, 0.4)
    assert np.allclose(np.linalg.norm(sim.coef[~sim.inliers], axis=1), 2.0)
    again = armul_simulation("vanilla", m=10, n=5, d=6, delta=0.4, epsilon=0.2, seed=7)
    assert np.array_equal(sim.data.ys[3], again.data.ys[3])
    clustered = armul_simulation("clustered", m=6, n=5, d=4, seed=0)
    assert np.allclose(clustered.coef[:3], 2 * np.eye(4)[[1, 2, 0]])
    with pytest.raises(InvalidParameterError, match="structure"):
        armul_simulation("tree")


def test_cli_rejects_negative_c(tmp_path, capsys):
    from pathlib import Path
    demo = Path(__file__).resolve().parents[1] / "instances" / "armul_demo.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text(demo.read_text().replace('path = "armul_demo.csv"',
                                            f'path = "{demo.parent / "armul_demo.csv"}"')
                   .replace("c = 1.0", "c = -1.0"))
    assert main(["solve", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'c' parameter of ARMUL" in err[0]


def test_cli_solves_the_demo_instance(tmp_path, capsys):
    from pathlib import Path
    demo = Path(__file__).resolve().parents[1] / "instances" / "armul_demo.toml"
    assert main(["solve", str(demo), "--out", str(tmp_path / "r.json")]) == 0
    assert "optimal" in capsys.readouterr().out


def test_clustered_exact_at_the_papers_scale_never_raises_and_never_loses_to_prox():
    """m = 30 tasks, d = 5, n_k = 50, K = 3 (issue 52's shape): SCIP found no solution of the MIQCP
    in a minute, and the exact path once raised SolverError there.  The assignment tree starts
    from the prox heuristic (same seed and restarts), so it returns an answer at least as good,
    with a proven bound (<= the objective), certified or cut by the limit."""
    data = armul_simulation("clustered", m=30, n=50, d=5, delta=0.5, seed=0).data
    prox_fit = ARMUL(structure="clustered", n_components=3, seed=0).fit(data).result_
    exact = ARMUL(structure="clustered", n_components=3, seed=0, algorithm="exact",
                  solve_options=SolveOptions(time_limit=6)).fit(data).result_
    assert exact.objective <= prox_fit.objective * (1 + 1e-12)
    assert exact.lower_bound is not None and exact.lower_bound <= exact.objective
    assert exact.status in ("time_limit", "gap_limit", "optimal")


def _exact_least_squares_rss(X, y) -> Fraction:
    """min_theta ||y - X theta||^2 in exact rational arithmetic (normal equations)."""
    A = [[Fraction(v) for v in row] for row in X]
    b = [Fraction(v) for v in y]
    d = len(A[0])
    G = [[sum(r[i] * r[j] for r in A) for j in range(d)] + [sum(r[i] * v for r, v in zip(A, b))]
         for i in range(d)]
    for col in range(d):   # Gauss-Jordan on the (nonsingular) Gram matrix
        pivot = next(i for i in range(col, d) if G[i][col] != 0)
        G[col], G[pivot] = G[pivot], G[col]
        G[col] = [v / G[col][col] for v in G[col]]
        for i in range(d):
            if i != col and G[i][col] != 0:
                G[i] = [a - G[i][col] * c for a, c in zip(G[i], G[col])]
    theta = [G[i][d] for i in range(d)]
    return sum((v - sum(a * t for a, t in zip(r, theta))) ** 2 for r, v in zip(A, b))


@pytest.mark.parametrize("transform", ["y", "y*1e-6", "y+1e9"])
def test_lowrank_reports_at_least_the_independent_tasks_bound(transform):
    """Low-rank ARMUL (issue 52): dropping the rank constraint lets every center sit on its task,
    so sum_j min 0.5 ||y_j - b_j - X_j theta_j||^2 (exact rationals here) is below the optimum;
    the fit reports at least it (its rank floor adds what the rank costs: test_armul_rank_floor
    checks that part against a brute force) and a gap, not ``heuristic``."""
    Xs, ys = random_tasks(4, "squared", m=6, d=3, n=20)
    ys = [{"y": y, "y*1e-6": y * 1e-6, "y+1e9": y + 1e9}[transform] for y in ys]
    result = ARMUL("lowrank", n_components=2, fit_intercept=True, standardize=False).fit(
        as_data(Xs, ys)).result_
    independent = sum(_exact_least_squares_rss(np.column_stack([np.ones(len(y)), X]), y) / 2
                      for X, y in zip(Xs, ys))
    assert result.lower_bound is not None and result.lower_bound > 0
    # not weaker than that bound, up to its rounding allowance, which grows with the level of y
    # (low-rank keeps it: the rank constraint binds the intercepts too)
    assert result.lower_bound >= float(independent) * (1 - (1e-3 if transform == "y+1e9" else 1e-6))
    assert result.lower_bound <= result.objective
    assert result.status in ("gap_limit", "optimal") and "independent" in result.bound_source


@pytest.mark.parametrize("transform", ["y", "y*1e-6", "y+1e9"])
def test_lowrank_with_tasks_shorter_than_their_coefficients_still_reports_a_proven_bound(transform):
    """A task with no more rows than coefficients (its Gram matrix singular) was the end of the
    bound: the fit said ``heuristic``.  Its own minimum is 0 (it interpolates), so it adds 0 and
    the others their exact least-squares minimum (rationals here)."""
    rng = np.random.default_rng(7)
    d, rows = 3, (20, 3, 25, 2)       # tasks 1 and 3 have <= d + 1 rows (the intercept counts)
    Xs = [rng.normal(size=(n, d)) for n in rows]
    ys = [X @ rng.normal(size=d) + rng.normal(size=len(X)) for X in Xs]
    ys = [{"y": y, "y*1e-6": y * 1e-6, "y+1e9": y + 1e9}[transform] for y in ys]
    result = ARMUL("lowrank", n_components=2, fit_intercept=True, standardize=False).fit(
        as_data(Xs, ys)).result_
    independent = sum(_exact_least_squares_rss(np.column_stack([np.ones(len(y)), X]), y) / 2
                      for X, y in zip(Xs, ys) if len(y) > d + 1)
    assert result.lower_bound is not None and Fraction(result.lower_bound) <= independent
    assert result.lower_bound >= float(independent) * (1 - (1e-3 if transform == "y+1e9" else 1e-6))
    assert result.lower_bound <= result.objective and result.status == "gap_limit"


def test_lowrank_logistic_reports_the_independent_tasks_bound():
    """The logistic loss had no bound at all; now each task's own minimum, from its own fit,
    checked against scipy's minimizer of the same log-likelihood."""
    import scipy.optimize

    rng = np.random.default_rng(3)
    Xs = [rng.normal(size=(60, 2)) for _ in range(5)]
    ys = [(rng.random(60) < 1 / (1 + np.exp(-X @ rng.normal(size=2)))).astype(float) for X in Xs]

    def task_minimum(X, y):
        A = np.column_stack([np.ones(len(y)), X])
        loss = lambda t: np.sum(np.logaddexp(0, A @ t) - y * (A @ t))   # noqa: E731
        return scipy.optimize.minimize(loss, np.zeros(3), method="BFGS", tol=1e-12).fun

    result = ARMUL("lowrank", n_components=1, loss="logistic", standardize=False).fit(
        as_data(Xs, ys)).result_
    independent = sum(task_minimum(X, y) for X, y in zip(Xs, ys))
    assert result.lower_bound is not None and result.status == "gap_limit"
    assert independent * (1 - 1e-6) <= result.lower_bound <= independent * (1 + 1e-9)
    assert result.lower_bound <= result.objective


def test_a_subset_takes_its_tasks_cached_quantities_as_it_would_compute_them():
    """``subset`` slices the parent's per-task caches (``for_subsets``): each equals, to the bit,
    what a problem of those tasks alone computes, in the order asked for."""
    from mtl_opt.formulations.armul import PER_TASK

    rng = np.random.default_rng(4)
    Xs = [rng.normal(size=(n, 4)) for n in (12, 9, 15, 11, 10)]
    ys = [X @ rng.normal(size=4) + rng.normal(size=len(X)) for X in Xs]
    parent = ArmulProblem.from_tasks(Xs, ys, c=1.0).for_subsets()
    tasks = [3, 0, 4]
    sliced = parent.subset(tasks)
    fresh = ArmulProblem(*(getattr(parent, key)[tasks] for key in ("X", "y", "mask", "w", "lam")), parent.loss)
    for key in PER_TASK:
        assert np.array_equal(getattr(sliced, key), getattr(fresh, key)), key
    for mine, theirs in zip(sliced._task_factors, fresh._task_factors):
        assert np.array_equal(mine[0], theirs[0]) and mine[1] == theirs[1]
    assert sliced.dual_bound(fresh.xty, "vanilla") == fresh.dual_bound(fresh.xty, "vanilla")
