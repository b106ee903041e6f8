"""The Gurobi backend (optional extra ``gurobi``): the reference problems of test_backends, the
sparse and ARMUL exact paths and the MOLAR LP against brute force and the other backends, and
the pip license's size limit.  Runs only where gurobipy is installed (CI does not install it)."""

import numpy as np
import pyomo.environ as pyo
import pytest

pytest.importorskip("gurobipy")

import test_backends as reference  # noqa: E402
from test_sparse import brute_force_optimum, random_problem  # noqa: E402

from mtl_opt.errors import InvalidParameterError, LicenseLimitError  # noqa: E402
from mtl_opt.estimators import ARMUL, MOLAR, SparseMTL  # noqa: E402
from mtl_opt.solvers.backends import BACKENDS, get_backend  # noqa: E402
from mtl_opt.solvers.method import final_status  # noqa: E402
from mtl_opt.solvers.sparse.oa import solve_oa  # noqa: E402
from mtl_opt.solvers.options import SolveOptions  # noqa: E402
from mtl_opt.synthetic import sparse_heterogeneity  # noqa: E402
from mtl_opt.deadline import Deadline


def test_gurobi_is_registered_and_available():
    assert "gurobi" in BACKENDS and get_backend("gurobi").available()
    assert get_backend("gurobi").version().split(".")[0].isdigit()


@pytest.mark.parametrize("check", [
    reference.test_lp_optimum_primal_and_bound, reference.test_milp_duals_are_refused,
    reference.test_infeasible_lp, reference.test_milp_knapsack_matches_brute_force,
    reference.test_convex_qp_closed_form, reference.test_miqp_matches_brute_force,
    reference.test_persistent_solves_see_added_rows_like_fresh_solves,
], ids=lambda check: check.__name__)
def test_reference_problems(check):
    check("gurobi")


@pytest.mark.parametrize("c1_both_sides, c1_dual", [(False, 1.5), (True, -1.5)])
def test_lp_duals_match_hand_computed_values(c1_both_sides, c1_dual):
    reference.test_lp_duals_match_hand_computed_values("gurobi", c1_both_sides, c1_dual)


@pytest.mark.parametrize("limit", ["time_limit", "iteration_limit"])
def test_limited_milp_keeps_incumbent_and_valid_bound(limit):
    reference.test_limited_milp_keeps_incumbent_and_valid_bound("gurobi", limit)


def test_bad_option_is_named_and_the_bound_margin_reads_any_case():
    backend = get_backend("gurobi")
    with pytest.raises(InvalidParameterError, match="MIPGapp"):
        backend.solve(reference.lp_0(), "lp", SolveOptions(solver_options={"MIPGapp": 0.1}), deadline=Deadline())
    # Gurobi takes parameter names in any case, the last one winning: so does the margin.
    opts = SolveOptions(solver_options={"OptimalityTol": 1e-9, "optimalitytol": 1e-4})
    assert backend.dual_tolerance(opts) == pytest.approx(1e-4, rel=1e-12)


def test_a_model_beyond_the_size_limited_license_is_a_clear_error():
    """gurobipy's pip build's license refuses 2001 variables (SIZE_LIMIT_EXCEEDED); the error
    passes on Gurobi's own words."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2001), bounds=(0, 1))
    m.obj = pyo.Objective(expr=sum(m.x.values()))
    with pytest.raises(LicenseLimitError, match="Gurobi: .*size-limited license.*another backend"):
        get_backend("gurobi").solve(m, "lp", deadline=Deadline())


def test_sparse_oa_proves_the_brute_force_optimum():
    problem, _ = random_problem("l0l2", 6100, K=2, p=6, n=15, s=2)
    optimum = brute_force_optimum(problem)
    start = np.zeros((2, 6))
    start[:, :2] = 1.0  # a poor start: Gurobi has to find the optimum
    run = solve_oa(problem, get_backend("gurobi"), SolveOptions(time_limit=30, rel_gap=1e-6), start, deadline=Deadline(30))
    assert run.lower_bound <= optimum + 1e-9 * abs(optimum) <= run.objective + 2e-9 * abs(optimum)
    assert final_status(run, 1e-6) == "optimal" and run.objective == pytest.approx(optimum, rel=1e-6)


def test_the_big_m_miqp_is_refused_on_gurobi_before_any_work(data):
    """Its dual bound exceeded the enumerated optimum on 1 to 8 of 30 tiny instances (by ~5e-7
    relative with BarQCPConvTol=1e-9), so the method table does not offer it there."""
    with pytest.raises(InvalidParameterError, match="miqp.*runs on .scip.*gurobi"):
        SparseMTL(s=2, lambda_ridge=0.05, algorithm="miqp", backend="gurobi").fit(data)


@pytest.fixture(scope="module")
def data():
    return sparse_heterogeneity(d=4, M=3, n=30, s=2, seed=0).data


def test_sparse_oa_estimator_on_gurobi_agrees_with_highs(data):
    fits = {backend: SparseMTL(s=2, lambda_ridge=0.05, algorithm="oa_multi_tree", backend=backend).fit(data).result_
            for backend in ("gurobi", "highs")}
    ours, theirs = fits["gurobi"], fits["highs"]
    assert ours.status == theirs.status == "optimal" and ours.solver.endswith("(Gurobi)")
    assert ours.objective == pytest.approx(theirs.objective, rel=1e-6)
    assert ours.lower_bound <= theirs.objective * (1 + 1e-9) and theirs.lower_bound <= ours.objective * (1 + 1e-9)


def test_armul_exact_model_on_gurobi_agrees_with_scip(data):
    """Vanilla only: clustered ARMUL's exact path is the assignment tree, on no backend."""
    params = {"algorithm": "exact"}
    ours = ARMUL(**params, backend="gurobi").fit(data).result_
    theirs = ARMUL(**params).fit(data).result_
    assert ours.solver == "Gurobi" and theirs.solver == "SCIP"
    # both stop at the default rel_gap (1e-4), each bound below both objectives
    assert ours.objective == pytest.approx(theirs.objective, rel=2e-4)
    assert ours.lower_bound <= theirs.objective * (1 + 1e-9) and theirs.lower_bound <= ours.objective * (1 + 1e-9)


def test_molar_median_lp_on_gurobi_matches_the_sorted_median(data):
    lp = MOLAR(algorithm="lp", backend="gurobi").fit(data)
    closed = MOLAR(algorithm="closed_form").fit(data)
    assert np.allclose(lp.coef_, closed.coef_, rtol=1e-7, atol=1e-9)
