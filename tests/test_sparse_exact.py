"""Exact sparse solvers: perspective cuts, OA on HiGHS and SCIP, the Big-M MIQP, all against brute force."""

import dataclasses
import time

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.bench.cell import trace
from mtl_opt.errors import CapabilityError, InvalidDataError, InvalidParameterError
from mtl_opt.estimators import SparseMTL

from mtl_opt.formulations.sparse import VARIANTS, zbar_penalty
from mtl_opt.formulations.sparse_models import perspective_cut
from mtl_opt.solvers.backends import get_backend
from mtl_opt.solvers.sparse import bnb
from mtl_opt.solvers import progress
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.sparse.bnb import solve_bnb
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.sparse.oa import solve_miqp, solve_oa
from mtl_opt.solvers.sparse.methods import METHODS, run_exact
from mtl_opt.solvers.options import SolveOptions
from test_sparse import brute_force_optimum, random_problem
from timing import deadline


def perspective_value(problem, z):
    """The relaxation at z in (0, 1]^(K x p): min_beta G(beta) + sum (l_r + mu_k)/2 beta^2 / z - mu_k/2 beta^2.

    mu = problem.curvature; at binary z this is F's continuous part.  One dense solve.
    """
    B = _perspective_minimizer(problem, z)
    mu = problem.curvature[:, None]
    value = sum(np.sum((y - X @ b) ** 2) / (2 * len(y)) for X, y, b in zip(problem.Xs, problem.ys, B))
    return value + np.sum(((problem.lambda_ridge + mu) / z - mu) * B**2) / 2 + problem.lambda_bbar / 2 * np.sum(
        (B - B.mean(axis=0)) ** 2)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cuts_are_tight_at_their_support_and_below_c_everywhere(variant):
    problem, rng = random_problem(variant, 7, K=3, p=5, n=15)
    support = rng.random((3, 5)) < 0.5
    B = problem.refit(support)
    cut = perspective_cut(problem, B)
    continuous = problem.objective(B) - problem.lambda_zbar / 2 * zbar_penalty(B != 0)
    assert cut.value(support.astype(float)) == pytest.approx(continuous, rel=1e-10)
    assert cut.parts(support.astype(float)).sum() == pytest.approx(continuous, rel=1e-10)
    for _ in range(20):
        z = rng.uniform(0.05, 1.0, size=(3, 5))
        assert cut.value(z) <= perspective_value(problem, z) + 1e-10


@pytest.mark.parametrize("variant", ["l0l2", "bbar"])
def test_cut_gradient_matches_finite_differences_of_c(variant):
    problem, rng = random_problem(variant, 3, K=2, p=4, n=12)
    z = rng.uniform(0.2, 0.9, size=(2, 4))
    # the refit at a fractional z: minimize the perspective form, then take the cut there
    h = 1e-6
    for k, j in [(0, 0), (1, 3)]:
        up, down = z.copy(), z.copy()
        up[k, j] += h
        down[k, j] -= h
        numeric = (perspective_value(problem, up) - perspective_value(problem, down)) / (2 * h)
        beta = _perspective_minimizer(problem, z)
        analytic = perspective_cut(problem, beta).gradient[k, j]
        assert analytic == pytest.approx(numeric, rel=1e-5)


def _perspective_minimizer(problem, z):
    """The minimizer of the perspective form at z > 0 (a dense linear system over all K p coefficients)."""
    K, p = z.shape
    H = np.zeros((K * p, K * p))
    rhs = np.zeros(K * p)
    for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
        block = slice(k * p, (k + 1) * p)
        mu = problem.curvature[k]
        H[block, block] += X.T @ X / len(y) + np.diag((problem.lambda_ridge + mu) / z[k] - mu)
        rhs[block] = X.T @ y / len(y)
    for j in range(p):
        idx = np.arange(K) * p + j
        H[np.ix_(idx, idx)] += problem.lambda_bbar * (np.eye(K) - 1 / K)
    return np.linalg.solve(H, rhs).reshape(K, p)


@pytest.mark.parametrize("variant", ["l0l2", "cs_l2", "cs_bbar", "zbar_l2"])
def test_outer_approximation_proves_the_brute_force_optimum(variant):
    """On HiGHS and on SCIP (one enumeration for both)."""
    problem, _ = random_problem(variant, 2000)
    optimum = brute_force_optimum(problem)
    start = fit_bcd(problem, local_search=False, deadline=Deadline()).coef
    for backend in ("highs", "scip"):
        result = solve_oa(problem, get_backend(backend), SolveOptions(time_limit=60), start, deadline=Deadline(60))
        assert result.lower_bound <= optimum + 1e-9 * abs(optimum) <= result.objective + 2e-9 * abs(optimum), backend
        assert final_status(result, 1e-6) == "optimal", backend
        assert result.objective == pytest.approx(optimum, rel=1e-6), backend


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_miqp_on_scip_proves_the_brute_force_optimum(variant):
    problem, _ = random_problem(variant, 3000)
    optimum = brute_force_optimum(problem)
    start = fit_bcd(problem, local_search=False, deadline=Deadline()).coef
    result = solve_miqp(problem, get_backend("scip"), SolveOptions(time_limit=60), start, deadline=Deadline(60))
    assert result.lower_bound <= optimum + 1e-9 * abs(optimum)
    assert result.objective == pytest.approx(optimum, rel=1e-6)
    assert final_status(result, 1e-6) == "optimal"


def test_oa_with_a_time_limit_keeps_a_valid_bound():
    problem, _ = random_problem("bbar", 4000)
    optimum = brute_force_optimum(problem)
    result = solve_oa(problem, get_backend("highs"), SolveOptions(time_limit=0.3), fit_bcd(problem, deadline=Deadline()).coef, deadline=Deadline(0.3))
    assert result.lower_bound is None or result.lower_bound <= optimum + 1e-9
    assert result.objective >= optimum - 1e-9
    assert final_status(result, 1e-6) in ("optimal", "time_limit")


EXACT_PATHS = [("oa_multi_tree", "highs"), ("oa_single_tree", "scip"), ("miqp", "scip")]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_estimator_exact_paths_are_sound_on_5_tiny_instances(variant):
    """LB <= enumerated optimum <= UB on every instance and path (30 instances over the variants);
    'optimal' implies rel_gap <= tolerance.  Each instance is enumerated once for the three paths."""
    for K, seed in [(1, 0), (2, 1), (3, 2), (2, 3), (3, 4)]:
        problem, _ = random_problem(variant, 5000 + seed, K=K, p=6, n=15, s=2)
        optimum = brute_force_optimum(problem)
        data = MultiTaskData(list(problem.Xs), list(problem.ys))
        params = {k: getattr(problem, k) for k in ("lambda_ridge", "lambda_bbar", "lambda_zbar")}
        for solver, backend in EXACT_PATHS:
            model = SparseMTL(variant=variant, s=2, algorithm=solver, backend=backend, standardize=False,
                              fit_intercept=False, solve_options=SolveOptions(time_limit=30), **params).fit(data)
            result, case = model.result_, (solver, backend, K, seed)
            assert result.lower_bound <= optimum + 1e-9 * abs(optimum), case
            assert optimum <= result.objective + 1e-9 * abs(optimum), case
            if result.status == "optimal":
                assert result.rel_gap <= 1e-6, case


def test_curvature_is_a_proven_lower_bound_on_the_loss_curvature():
    problem, _ = random_problem("zbar_l2", 11, K=3, p=8, n=12)
    for X, y, mu in zip(problem.Xs, problem.ys, problem.curvature):
        smallest = np.linalg.svd(X, compute_uv=False)[-1] ** 2 / len(y)   # an independent route
        assert 0 < mu <= smallest <= mu * (1 + 1e-8)
    wide, _ = random_problem("l0l2", 12, K=2, p=10, n=8)
    assert np.all(wide.curvature == 0)


@pytest.mark.parametrize("path", EXACT_PATHS, ids=lambda p: "-".join(p))
def test_lambda_ridge_zero_is_certified_when_the_designs_have_curvature(path):
    """n_k > p: the loss's own curvature gives the cuts and a proven Big-M; checked by enumeration."""
    solver, backend = path
    for variant, seed in [("l0l2", 21), ("zbar_l2", 22), ("bbar", 23), ("cs_l2", 24)]:
        problem, _ = random_problem(variant, seed, K=2, p=7, n=15, s=2)
        problem = problem.with_params(lambda_ridge=0.0)
        optimum = brute_force_optimum(problem)
        data = MultiTaskData(list(problem.Xs), list(problem.ys))
        result = SparseMTL(variant=variant, s=2, algorithm=solver, backend=backend, standardize=False,
                           fit_intercept=False, lambda_bbar=problem.lambda_bbar,
                           lambda_zbar=problem.lambda_zbar).fit(data).result_
        assert result.lower_bound <= optimum + 1e-9 * abs(optimum) <= result.objective + 2e-9 * abs(optimum)
        assert result.status == "optimal" and result.objective == pytest.approx(optimum, rel=1e-6)


def test_exact_paths_refuse_lambda_ridge_zero_without_curvature():
    problem, _ = random_problem("l0l2", 0, p=10, n=8)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    for solver in ("oa_multi_tree", "miqp"):
        with pytest.raises(InvalidParameterError, match="lambda_ridge > 0"):
            SparseMTL(variant="l0l2", s=3, algorithm=solver).fit(data)


@pytest.mark.parametrize("path", EXACT_PATHS, ids=lambda p: "-".join(p))
def test_time_limit_returns_in_time_with_incumbent_and_valid_bound(path):
    """n_k < p (no curvature to borrow) and a small ridge: no path closes this in 2 s (nor in 5)."""
    from mtl_opt.synthetic import smtl_simulation
    data = smtl_simulation(p=60, K=3, n=40, s_true=5, q=8, seed=9).data
    solver, backend = path
    start = time.perf_counter()
    model = SparseMTL(variant="zbar_l2", s=5, lambda_ridge=0.01, lambda_zbar=0.02, algorithm=solver,
                      backend=backend, solve_options=SolveOptions(time_limit=2)).fit(data)
    elapsed = time.perf_counter() - start
    result = model.result_
    heuristic = SparseMTL(variant="zbar_l2", s=5, lambda_ridge=0.01, lambda_zbar=0.02).fit(data).result_
    assert elapsed < deadline(2) + heuristic.wall_time
    assert result.status == "time_limit"
    assert result.objective <= heuristic.objective + 1e-12
    assert result.lower_bound is not None and result.lower_bound <= result.objective


def test_certify_turns_a_heuristic_fit_into_a_bounded_one():
    problem, _ = random_problem("zbar_l2", 77)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    model = SparseMTL(variant="zbar_l2", s=3, lambda_ridge=problem.lambda_ridge, lambda_zbar=problem.lambda_zbar,
                      standardize=False, fit_intercept=False).fit(data)
    assert model.result_.lower_bound is None
    result = model.certify(data, time_limit=30)
    assert model.result_ is result and result.status == "optimal"
    assert result.lower_bound <= brute_force_optimum(problem) + 1e-9 <= result.objective + 2e-9


def _tiny_instance(tmp_path, variant="zbar_l2"):
    problem, _ = random_problem(variant, 11, K=2, p=6, n=15, s=2)
    MultiTaskData(list(problem.Xs), list(problem.ys)).to_npz(tmp_path / "tiny.npz")
    path = tmp_path / "tiny.toml"
    path.write_text(f'[data]\npath = "tiny.npz"\n[method]\nname = "sparse_mtl"\nvariant = "{variant}"\n'
                    f's = 2\nlambda_ridge = 0.05\nlambda_zbar = 0.05\nstandardize = false\n'
                    f'fit_intercept = false\n')
    return path


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_exported_master_reads_back_into_highs_with_the_same_optimum(tmp_path, fmt):
    import highspy
    from mtl_opt.cli import main
    from mtl_opt.instance import load_instance
    path = _tiny_instance(tmp_path)
    out = tmp_path / f"master.{fmt}"
    assert main(["export", str(path), "--model", "master", "--format", fmt, "--out", str(out)]) == 0
    instance = load_instance(path)
    master = instance.estimator().pyomo_model(instance.load_data(), kind="master",
                                              normalized=False).model
    in_process = get_backend("highs").solve(master, "milp", SolveOptions(rel_gap=1e-9), deadline=Deadline())
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.readModel(str(out))
    h.run()
    assert in_process.objective > 0  # the first cuts already bind: a meaningful comparison
    assert h.getInfo().objective_function_value == pytest.approx(in_process.objective, rel=1e-7)


def test_exported_miqp_reads_back_into_scip_with_the_same_optimum(tmp_path):
    import pyscipopt
    from mtl_opt.cli import main
    from mtl_opt.instance import load_instance
    path = _tiny_instance(tmp_path)
    out = tmp_path / "miqp.mps"
    assert main(["export", str(path), "--format", "mps", "--out", str(out)]) == 0
    scip = pyscipopt.Model()
    scip.hideOutput()
    scip.readProblem(str(out))
    scip.optimize()
    instance = load_instance(path)
    exact = instance.estimator().set_params(algorithm="miqp").fit(instance.load_data())
    assert scip.getStatus() == "optimal"
    assert scip.getObjVal() == pytest.approx(exact.result_.objective, rel=1e-6)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_single_tree_oa_on_scip_proves_the_brute_force_optimum(variant):
    """Cuts from the constraint handler only: SCIP's bound must still be valid and tight."""
    from mtl_opt.solvers.sparse.oa_scip import solve_oa_single_tree

    problem, _ = random_problem(variant, 6000, K=3, p=6, n=15, s=2)
    optimum = brute_force_optimum(problem)
    # start from a poor support so the handler, not the start, has to find the optimum
    start = np.zeros((3, 6))
    start[:, -2:] = 1.0
    if not problem.common_support:
        start[1, :] = np.roll(start[1], 2)
    result = solve_oa_single_tree(problem, SolveOptions(time_limit=30), start, deadline=Deadline(30))
    assert result.lower_bound <= optimum + 1e-9 * abs(optimum) <= result.objective + 2e-9 * abs(optimum)
    assert final_status(result, 1e-6) == "optimal" and result.objective == pytest.approx(optimum, rel=1e-6)
    assert result.native["cuts"] > 0


@pytest.mark.parametrize("variant", ["l0l2", "zbar_l2"])
def test_single_tree_oa_resumes_scip_until_our_gap_with_its_margin_is_met(variant, monkeypatch):
    """SCIP's gap limit is on its own dual bound; ours subtracts ``dual_bound_margin``.  With the
    margin inflated to 0.02 F, SCIP stops at its 5% with ours above 5% on these instances (it
    did before the resume), so it must go on until ours is met; a user's own limits/gap stands."""
    from mtl_opt.solvers.sparse import oa_scip

    problem, _ = random_problem(variant, 1, K=2, p=8, n=20, s=3)
    optimum = brute_force_optimum(problem)
    start = fit_bcd(problem, deadline=Deadline()).coef
    margin = oa_scip.dual_bound_margin
    monkeypatch.setattr(oa_scip, "dual_bound_margin", lambda model, tol: margin(model, tol) + 0.02 * optimum)
    result = oa_scip.solve_oa_single_tree(problem, SolveOptions(time_limit=30, rel_gap=0.05), start, deadline=Deadline(30))
    assert final_status(result, 0.05) == "optimal"
    assert result.lower_bound <= optimum - 0.02 * optimum * (1 - 1e-9)
    own_rule = SolveOptions(time_limit=30, rel_gap=0.05, solver_options={"limits/gap": 0.05})
    stopped = oa_scip.solve_oa_single_tree(problem, own_rule, start, deadline=Deadline(own_rule.time_limit))
    assert stopped.native["master_status"] == "gaplimit" and final_status(stopped, 0.05) == "gap_limit"


def test_single_tree_oa_tightens_scip_dual_tolerance_where_the_master_is_large(monkeypatch):
    """dual_bound_margin grows with the master's columns: at SCIP's usual 1e-9 it alone exceeds a
    1e-8 gap on 10 tasks (it did: gap_limit), so SCIP gets a tighter tolerance and certifies the
    brute-force optimum, the margin within the gap."""
    from mtl_opt.solvers.sparse import oa_scip

    tolerances = []
    margin = oa_scip.dual_bound_margin
    monkeypatch.setattr(oa_scip, "dual_bound_margin",
                        lambda model, tol: tolerances.append(tol) or margin(model, tol))
    problem, _ = random_problem("cs_l2", 0, K=10, p=6, n=10, s=2)
    optimum = brute_force_optimum(problem)
    result = oa_scip.solve_oa_single_tree(problem, SolveOptions(time_limit=30, rel_gap=1e-8),
                                          fit_bcd(problem, deadline=Deadline()).coef, deadline=Deadline(30))
    assert final_status(result, 1e-8) == "optimal"
    assert result.lower_bound <= optimum <= result.objective * (1 + 1e-12)
    assert get_backend("scip").TIGHTEST_DUAL_TOLERANCE <= max(tolerances) < 1e-9


def test_multi_tree_oa_tightens_highs_dual_tolerance_where_the_master_is_large():
    """As above on HiGHS, down to its floor 1e-10: a 1e-7 gap on 10 tasks ended gap_limit at the
    usual 1e-9 (the margin alone was 1.06e-7 of F) and is now certified."""
    problem, _ = random_problem("cs_l2", 0, K=10, p=6, n=10, s=2)
    optimum = brute_force_optimum(problem)
    result = run_exact(METHODS["oa_multi_tree"], problem, fit_bcd(problem, deadline=Deadline()).coef,   # as fit runs it
                       SolveOptions(time_limit=30, rel_gap=1e-7), Deadline(30), "highs")
    assert final_status(result, 1e-7) == "optimal"
    assert result.lower_bound <= optimum <= result.objective * (1 + 1e-12)


def test_miqp_tightens_its_rows_where_the_perspective_slack_would_eat_the_gap():
    """A large ridge on few rows: at feastol 1e-6 each perspective row's t may sit 1e-6 low at a
    weight of lambda_ridge / 2 = 25, so SCIP's "optimal" left our gap at 2.0e-4 against 1e-4
    (gap_limit, measured).  Tightened rows certify the brute-force optimum, on the solver path
    and on the modeling API's (the same model, handed back unedited)."""
    problem, _ = random_problem("l0l2", 4, K=2, p=10, n=8, s=5)
    problem = dataclasses.replace(problem, lambda_ridge=50.0)
    optimum = brute_force_optimum(problem)
    options = SolveOptions(time_limit=30, rel_gap=1e-4)
    result = run_exact(METHODS["miqp"], problem, fit_bcd(problem, deadline=Deadline()).coef, options, Deadline(30), "scip")
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    est = SparseMTL(variant="l0l2", s=5, lambda_ridge=50.0, standardize=False, fit_intercept=False,
                    solve_options=options)
    edited = est.fit(data, model=est.pyomo_model(data)).result_
    assert (final_status(result, 1e-4), edited.status) == ("optimal", "optimal")
    for run in (result, edited):
        assert run.lower_bound <= optimum <= run.objective * (1 + 1e-12)
    assert result.objective == pytest.approx(optimum, rel=1e-9)   # the refit of its support


def test_oa_paths_agree_on_a_small_instance():
    """K=3, p=30, s=5 (beyond enumeration): multi-tree on HiGHS and single-tree on SCIP prove the same optimum.

    The full 10-instance agreement table, MIQP included, is in benchmarks/sparse_exact.py.
    """
    from mtl_opt.synthetic import smtl_simulation

    data = smtl_simulation(p=30, K=3, n=100, s_true=5, q=7, seed=0).data
    results = [SparseMTL(variant="zbar_l2", s=5, lambda_ridge=0.05, lambda_zbar=0.01, algorithm="oa_multi_tree",
                         backend=backend, solve_options=SolveOptions(time_limit=60)).fit(data).result_
               for backend in ("highs", "scip")]
    assert [r.status for r in results] == ["optimal", "optimal"]
    assert results[0].objective == pytest.approx(results[1].objective, rel=1e-6)
    assert max(r.lower_bound for r in results) <= min(r.objective for r in results) * (1 + 1e-9)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nearby_supports_are_distinct_and_start_at_the_incumbent(variant):
    """From a local optimum the best swap and its reverse cycle; each support gets one cut."""
    from mtl_opt.solvers.sparse.bcd import best_swap, swapped_support
    from mtl_opt.solvers.sparse.oa import _nearby_supports

    problem, _ = random_problem(variant, 5)
    B = fit_bcd(problem, deadline=Deadline()).coef
    back = problem.refit(swapped_support(B != 0, best_swap(problem, B)))
    cycles = np.array_equal(swapped_support(back != 0, best_swap(problem, back)), B != 0)
    supports = _nearby_supports(problem, B)
    assert np.array_equal(supports[0], B != 0)
    assert len({s.tobytes() for s in supports}) == len(supports)
    assert len(supports) >= 2 and (not cycles or len(supports) == 2)


def test_miqp_returns_at_its_time_limit_where_scip_nlp_deadlocked():
    """p=100, K=5, n_k=100 (the exact benchmark's grid): with SCIP's NLP solver on, pyscipopt 6.3's
    bundled Ipopt/MUMPS/METIS hung in free() after about 5-30 s; the run must end near its limit
    (10 s here: long enough for the hangs seen from 5 s on, short enough for the suite)."""
    import subprocess
    import sys

    script = (
        "import sys; sys.path.insert(0, 'benchmarks')\n"
        "from sparse_exact import demo_data, problem_for\n"
        "from mtl_opt.deadline import Deadline\n"
        "from mtl_opt.solvers.sparse.bcd import fit_bcd\n"
        "from mtl_opt.solvers.backends import get_backend\n"
        "from mtl_opt.solvers.method import final_status\n"
        "from mtl_opt.solvers.sparse.oa import solve_miqp\n"
        "from mtl_opt.solvers.options import SolveOptions\n"
        "problem = problem_for(demo_data(100, 5, 100, seed=0), s=5, lambda_ridge=0.1)\n"
        "start = fit_bcd(problem, deadline=Deadline()).coef\n"
        "r = solve_miqp(problem, get_backend('scip'), SolveOptions(time_limit=10), start,\n"
        "               deadline=Deadline(10))\n"
        "print(final_status(r, 1e-6), r.lower_bound <= r.objective)\n")
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] in (["time_limit", "True"], ["optimal", "True"])


def test_scip_stops_at_its_memory_limit_with_the_incumbent_and_a_valid_bound():
    """A default memory limit is set; hitting it is a work limit, never an error or a claim."""
    from mtl_opt.solvers.backends import default_memory_limit_mb
    from mtl_opt.solvers.sparse.oa_scip import solve_oa_single_tree

    assert get_backend("scip").native_options(SolveOptions())["limits/memory"] == default_memory_limit_mb() > 0
    problem, _ = random_problem("l0l2", 6001, K=2, p=8, n=15, s=3)
    optimum = brute_force_optimum(problem)
    start = fit_bcd(problem, deadline=Deadline()).coef
    result = solve_oa_single_tree(problem, SolveOptions(time_limit=30, solver_options={"limits/memory": 0}),
                                  start, deadline=Deadline(30))
    assert result.native["master_status"] == "memlimit"
    assert final_status(result, 1e-6) == "iteration_limit"
    assert result.objective == pytest.approx(problem.objective(problem.refit(start != 0)))
    assert result.lower_bound is None or result.lower_bound <= optimum + 1e-9



@pytest.mark.parametrize("bad", [{"limits/tyme": 5}, {"limits/time": "soon"}])
def test_single_tree_oa_refuses_a_bad_scip_option_by_name(bad):
    """solver_options go through the SCIP backend's check, as on every other path (was a bare KeyError)."""
    from mtl_opt.solvers.sparse.oa_scip import solve_oa_single_tree

    problem, _ = random_problem("l0l2", 6002, K=2, p=4, n=10, s=2)
    start = np.zeros((2, 4))
    start[:, :2] = 1.0
    (name,) = bad
    with pytest.raises(InvalidParameterError, match=name):
        solve_oa_single_tree(problem, SolveOptions(time_limit=30, solver_options=bad), start, deadline=Deadline(30))


BNB_SOUNDNESS = [(variant, K, p, n, seed) for variant in ("l0l2", "cs_l2")
                 for K, p, n, seed in [(1, 8, 6, 0), (1, 7, 20, 1), (2, 7, 5, 2), (2, 6, 15, 3),
                                       (3, 6, 4, 4), (3, 7, 12, 5), (2, 8, 8, 6), (1, 9, 4, 7)]]


@pytest.mark.parametrize("variant,K,p,n,seed", BNB_SOUNDNESS)
def test_bnb_proves_the_brute_force_optimum(variant, K, p, n, seed):
    """Wide (n < p) and tall tasks: LB <= enumerated optimum <= UB, and it closes the gap."""
    problem, _ = random_problem(variant, 7000 + seed, K=K, p=p, n=n, s=3)
    problem = problem.with_params(lambda_ridge=[1e-3, 0.1][seed % 2])
    optimum = brute_force_optimum(problem)
    result = solve_bnb(problem, SolveOptions(time_limit=60), fit_bcd(problem, local_search=False, deadline=Deadline()).coef, deadline=Deadline(60))
    assert result.lower_bound <= optimum + 1e-9 * abs(optimum) <= result.objective + 2e-9 * abs(optimum)
    assert final_status(result, 1e-6) == "optimal" and result.objective == pytest.approx(optimum, rel=1e-6)
    assert problem.feasible(result.estimate)


def test_bnb_stopped_early_keeps_a_valid_bound_and_returns_in_time():
    """From an empty incumbent with a tiny ridge on wide designs the root bound is far from the
    optimum: a stop right after the root keeps LB <= enumerated optimum <= UB; on a larger
    instance a 0.5 s limit is kept."""
    problem, _ = random_problem("l0l2", 77, K=2, p=14, n=6, s=3)
    problem = problem.with_params(lambda_ridge=1e-4)
    optimum = brute_force_optimum(problem)
    result = solve_bnb(problem, SolveOptions(time_limit=1e-3), np.zeros((2, 14)), deadline=Deadline(0.001))
    assert result.stop == "time_limit"
    assert result.lower_bound <= optimum + 1e-9 * optimum <= result.objective + 2e-9 * optimum

    problem, _ = random_problem("l0l2", 78, K=1, p=60, n=20, s=5)
    problem = problem.with_params(lambda_ridge=1e-4)
    start = time.perf_counter()
    result = solve_bnb(problem, SolveOptions(time_limit=0.5), np.zeros((1, 60)), deadline=Deadline(0.5))
    assert time.perf_counter() - start < deadline(0.5)
    assert result.stop == "time_limit" and result.lower_bound <= result.objective


def test_bnb_logs_its_gap_over_time(monkeypatch):
    """A row at the start (the incumbent, no bound yet), then one per ``progress.EVERY`` seconds
    (0 here: every step of up to ``BATCH`` nodes), and the final one (merged into the last step's
    when nothing moved), which carries the run's bound: the trace ``mtl-opt bench`` plots.  Every
    row's bound is below the enumerated optimum and its incumbent above it."""
    monkeypatch.setattr(progress, "EVERY", 0.0)
    problem, _ = random_problem("cs_l2", 7003, K=2, p=10, n=6, s=3)
    problem = problem.with_params(lambda_ridge=1e-3)
    optimum = brute_force_optimum(problem)
    result = solve_bnb(problem, SolveOptions(time_limit=60), np.zeros((2, 10)), deadline=Deadline(60))
    first = result.log[0]
    assert first["nodes"] == 0 and first["lower_bound"] is None and first["gap"] is None
    assert first["incumbent"] == pytest.approx(problem.objective(np.zeros((2, 10))), rel=1e-12)
    nodes = [row["nodes"] for row in result.log]
    steps = np.diff(nodes)   # nodes taken by each step, one row each
    assert len(steps) > 2 and all(0 <= step <= bnb.BATCH for step in steps)
    assert nodes[-1] == result.native["nodes"] > len(steps)   # some steps took two
    final = result.log[-1]
    assert final["lower_bound"] == pytest.approx(result.lower_bound, rel=1e-12)
    assert final["incumbent"] == pytest.approx(result.objective, rel=1e-12)
    assert all(row["lower_bound"] <= optimum + 1e-9 * optimum <= row["incumbent"] + 2e-9 * optimum
               for row in result.log[1:])
    times = [row["time"] for row in result.log]
    assert times == sorted(times) and len(trace(result.log)) == len(result.log) - 1

    monkeypatch.setattr(progress, "EVERY", 3600.0)
    assert len(solve_bnb(problem, SolveOptions(time_limit=60), np.zeros((2, 10)), deadline=Deadline(60)).log) == 2


def test_bnb_through_the_estimator_reports_its_bound_and_refuses_what_it_does_not_model():
    problem, _ = random_problem("cs_l2", 81, K=2, p=7, n=6, s=2)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    model = SparseMTL(variant="cs_l2", s=2, lambda_ridge=0.05, algorithm="bnb", standardize=False,
                      fit_intercept=False).fit(data)
    optimum = brute_force_optimum(problem.with_params(lambda_ridge=0.05))
    assert model.result_.status == "optimal"
    assert model.result_.lower_bound <= optimum + 1e-9 <= model.result_.objective + 1e-9
    assert "perspective dual" in model.result_.bound_source
    for params, message in [({"variant": "l0l2", "lambda_ridge": 0.0}, "lambda_ridge > 0"),
                            ({"variant": "l0l2", "backend": "highs"}, "backend")]:
        settings = {"s": 2, "lambda_ridge": 0.05, "algorithm": "bnb", **params}
        with pytest.raises(InvalidParameterError, match=message):
            SparseMTL(**settings).fit(data)


@pytest.mark.parametrize("solver, backend, error, phrase", [
    ("typo", None, InvalidParameterError, "'algorithm' parameter"),
    ("bcd", None, InvalidParameterError, "exact method"),
    ("miqp", "highs", CapabilityError, "cannot solve MIQP")])
def test_certify_checks_its_solver_and_backend_before_any_work(solver, backend, error, phrase):
    """certify(algorithm='typo') (then solver=) ran OA and reported solver 'typo (HiGHS)', status optimal."""
    problem, _ = random_problem("l0l2", 5)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    model = SparseMTL(variant="l0l2", s=3, lambda_ridge=0.1).fit(data)
    before = model.result_
    with pytest.raises(error, match=phrase):
        model.certify(data, algorithm=solver, backend=backend)
    assert model.result_ is before


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_single_tree_oa_hands_scip_a_complete_start_it_accepts(variant):
    """The bcd answer goes in as a MIP start with every master column set (z, eta, the Zbar term's
    w and the objective's epigraph column), checked by SCIP (``checkSol``) before it is stored.
    It once set z and eta only, and SCIP rejected every start ("all 1 solutions given by solution
    candidate storage are infeasible")."""
    from mtl_opt.solvers.sparse.oa_scip import solve_oa_single_tree

    problem, _ = random_problem(variant, 77, K=3, p=12, n=15)
    run = solve_oa_single_tree(problem, SolveOptions(time_limit=2), fit_bcd(problem, deadline=Deadline()).coef, deadline=Deadline(2))
    assert run.native["start_accepted"] is True


def test_certify_refuses_data_other_than_the_fitted_tasks():
    """certify on data with fewer tasks ended in a raw IndexError deep in the refit."""
    problem, _ = random_problem("l0l2", 5, K=3)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    model = SparseMTL(variant="l0l2", s=3, lambda_ridge=0.1).fit(data)
    before = model.result_
    with pytest.raises(InvalidDataError, match=r"fitted on: tasks \['task0', 'task1', 'task2'\].*got "
                                               r"tasks \['task0', 'task1'\]"):
        model.certify(data.subset_tasks([0, 1]))
    assert model.result_ is before


def test_the_exact_benchmark_runs_every_path_to_the_brute_force_optimum():
    """benchmarks/sparse_exact.py calls the solvers itself (no estimator in between), so a change of
    their signatures breaks it silently (the required deadline did): each of its paths, on a tiny
    instance, must certify the brute-force optimum."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "sparse_exact.py"
    spec = importlib.util.spec_from_file_location("sparse_exact_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    problem, _ = random_problem("zbar_l2", 3, K=2, p=6, n=15, s=2)
    best = brute_force_optimum(problem)
    _, _, runs = bench.run_paths(problem, 30.0, bench.GRID_PATHS, threads=1)
    assert set(runs) == set(bench.GRID_PATHS)
    for name, (_, status, objective, bound, _) in runs.items():
        assert status == "optimal", name
        assert bound <= best * (1 + 1e-9) and objective <= best * (1 + bench.REL_GAP), name
