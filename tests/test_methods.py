"""The one path: method tables refuse before any work, runs become a status in one place."""

import ast
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_sparse import brute_force_optimum, random_problem

import mtl_opt
import mtl_opt.solvers.bcd as bcd
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.result import relative_gap
from mtl_opt.solvers import sparse_methods
from mtl_opt.solvers.method import STOPS, SolverRun, final_status
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import smtl_simulation

PACKAGE = Path(mtl_opt.__file__).parent


def _status_literals_outside_final_status():
    """Every "optimal" string literal of the package that is not compared against, not an entry of
    an ALL-CAPS vocabulary collection (STATUSES, a backend's native STATUS map) and not in
    ``final_status``: each is a place that decides the status."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and node.value == "optimal"):
                continue
            chain, up = [], node
            while up in parents:
                up = parents[up]
                chain.append(up)
            if any(isinstance(a, ast.Compare) for a in chain[:2]) or (
                    isinstance(chain[0], (ast.Tuple, ast.Set)) and isinstance(chain[1], ast.Compare)):
                continue
            if any(isinstance(a, ast.FunctionDef) and a.name == "final_status" for a in chain):
                continue
            assign = next((a for a in chain if isinstance(a, (ast.Assign, ast.AnnAssign))), None)
            targets = [] if assign is None else getattr(assign, "targets", [getattr(assign, "target", None)])
            if (assign is not None and assign.value is not node
                    and isinstance(assign.value, (ast.Tuple, ast.Set, ast.Dict, ast.Call))
                    and all(isinstance(t, ast.Name) and t.id.isupper() for t in targets)):
                continue
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_status_optimal_is_assigned_in_final_status_only():
    """Seven places decided "optimal" (oa, oa_scip, bnb, the MIQP, result.certified_status, prox,
    the ARMUL baselines, MOLAR's closed form); now only ``final_status`` does."""
    assert _status_literals_outside_final_status() == []


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("bound", [None, 0.0, 9.99, 10.0, 10.5])
def test_final_status_follows_the_proven_gap(stop, bound):
    """Optimal exactly when a bound the guard keeps proves gap <= tolerance (objective 10,
    tolerance 0.01: 9.99 proves 0.001); else the budget that ran out, or for a converged run
    heuristic (no bound) / gap_limit (a wider one); infeasible and error stand."""
    status = final_status(SolverRun(None, 10.0, bound, stop), 0.01)
    kept = bound is not None and bound <= 10.0
    if stop in ("infeasible", "error"):
        assert status == stop
    elif kept and (10.0 - bound) / 10.0 <= 0.01:
        assert status == "optimal" and relative_gap(10.0, bound) <= 0.01
    elif stop != "converged":
        assert status == stop
    else:
        assert status == ("gap_limit" if kept else "heuristic")


@pytest.fixture(scope="module")
def wide():
    """p = 400 features, K = 4 tasks of 100 rows: no curvature to borrow without a ridge."""
    return smtl_simulation(p=400, K=4, n=50, seed=0).data


@pytest.mark.parametrize("params, phrase", [
    ({"solver": "oa", "lambda_ridge": 0.0}, "lambda_ridge > 0"),
    ({"solver": "oa_multi_tree", "backend": "scip", "lambda_ridge": 0.0}, "lambda_ridge > 0"),
    ({"solver": "bnb", "lambda_ridge": 0.1, "lambda_zbar": 0.1}, "no Zbar or Bbar"),
    ({"solver": "oa_single_tree", "backend": "highs", "lambda_ridge": 0.1}, "runs on 'scip'"),
    ({"solver": "bnb", "backend": "highs", "lambda_ridge": 0.1}, "no backend")])
def test_a_method_refuses_before_any_work(wide, monkeypatch, params, phrase):
    """The refusals came after seconds of bcd (3.97 s for oa, 2.12 s for bnb with Zbar)."""
    def no_bcd(*args, **kwargs):
        raise AssertionError("bcd ran before the refusal")

    monkeypatch.setattr(bcd, "_descend", no_bcd)
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=phrase):
        SparseMTL(s=10, **params).fit(wide)
    assert time.perf_counter() - start < 1.0   # ~0.02 s idle; a bcd run here takes seconds


def test_an_unknown_method_name_lists_the_valid_ones():
    problem, _ = random_problem("l0l2", 5)
    data = MultiTaskData(list(problem.Xs), list(problem.ys))
    for call in (lambda: SparseMTL(solver="typo").fit(data),
                 lambda: SparseMTL(variant="l0l2", s=2, lambda_ridge=0.1).fit(data).certify(data, solver="typo"),
                 lambda: sparse_methods.resolve("typo", None)):
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert all(name in str(error.value) for name in sparse_methods.METHODS), str(error.value)


def _tiny():
    problem, _ = random_problem("zbar_l2", 11)
    return problem, MultiTaskData(list(problem.Xs), list(problem.ys))


def _fit(data, problem, **params):
    return SparseMTL(variant="zbar_l2", s=problem.s, lambda_ridge=problem.lambda_ridge,
                     lambda_zbar=problem.lambda_zbar, standardize=False, fit_intercept=False,
                     solve_options=SolveOptions(time_limit=60), **params).fit(data).result_


@pytest.mark.parametrize("solver, backend, native", [
    ("oa_multi_tree", "scip", "SCIP"), ("oa_single_tree", "scip", "SCIP single-tree")])
def test_multi_tree_and_single_tree_oa_are_named_and_run_on_scip(solver, backend, native):
    """Multi-tree OA on SCIP could not be asked for (backend='scip' meant single-tree)."""
    problem, data = _tiny()
    optimum = brute_force_optimum(problem)
    result = _fit(data, problem, solver=solver, backend=backend)
    assert result.native["solver"] == native and result.solver.startswith(solver)
    assert result.status == "optimal"
    assert result.lower_bound <= optimum * (1 + 1e-9) <= result.objective * (1 + 2e-9)


def test_the_old_oa_on_scip_spelling_still_runs_single_tree_with_a_warning():
    problem, data = _tiny()
    with pytest.warns(DeprecationWarning, match="oa_single_tree"):
        result = _fit(data, problem, solver="oa", backend="scip")
    assert result.native["solver"] == "SCIP single-tree" and result.status == "optimal"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fit(data, problem, solver="oa").native["solver"] == "HiGHS"


def test_the_fit_deadline_reaches_the_method(monkeypatch):
    """One deadline, made when the fit starts, is the one the exact method gets: time_limit
    covers the bcd warm start and the exact phase together."""
    problem, data = _tiny()
    seen = []
    method = sparse_methods.METHODS["oa_multi_tree"]

    def spy(problem, incumbent, options, deadline, backend):
        seen.append(deadline)
        return method.solve(problem, incumbent, options, deadline, backend)

    monkeypatch.setitem(sparse_methods.METHODS, "oa_multi_tree", replace(method, solve=spy))
    start = time.perf_counter()
    SparseMTL(variant="zbar_l2", s=problem.s, lambda_ridge=problem.lambda_ridge,
              lambda_zbar=problem.lambda_zbar, solver="oa_multi_tree",
              solve_options=SolveOptions(time_limit=50)).fit(data)
    assert len(seen) == 1
    assert start < seen[0].end - 50 < time.perf_counter()   # made in this fit, for all of it
    assert np.isfinite(seen[0].remaining())
