"""The exact paths under built-in side constraints (#21): each one enforces a constraint kind, and
then certifies the optimum of the constrained problem, or refuses it naming a path that would.

Every certificate is checked against ``constrained_reference.constrained_optimum`` (enumerated
supports, box least squares by BVLS), which reads the constraint dicts itself; every estimate is
checked against the constraint on ``coef_``, on the original scale, by the code here.
"""

import numpy as np
import pytest
from constrained_reference import constrained_optimum

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.solvers.sparse.oa import miqp_model
from mtl_opt.solvers.sparse.methods import METHODS, run_exact
from mtl_opt.solvers.options import SolveOptions

#: Relative tolerance of LB <= optimum <= UB (the solvers' bounds carry a 1e-6 gap, the
#: reference's BVLS and the refit agree to ~1e-12).
TOL = 1e-7
S = 2
PENALTIES = {"l0l2": {}, "cs_l2": {}, "zbar_l2": {"lambda_zbar": 0.05}, "bbar": {"lambda_bbar": 0.2},
             "zbar_bbar": {"lambda_zbar": 0.05, "lambda_bbar": 0.2}}
#: One constraint of each kind, each binding on the data below (``test_each_constraint_binds``).
KINDS = {"include": {"features": [4]}, "exclude": {"features": [0]},
         "at_most": {"features": [0, 1, 2], "count": 1},
         "at_least": {"features": [3, 4, 5], "count": 2},
         "nonnegative": {"features": [1]}, "nonpositive": {"features": [0]},
         "bounds": {"features": [0], "lower": -0.5, "upper": 0.5},
         "shared_support": {"tasks": [0, 1]}}
#: (path, backend, kind, variant): every kind on every path that accepts it, every variant that
#: applies on every path (bnb: no counts, shared supports, nor a box with a Bbar term; outer
#: approximation: no signs, bounds).
CASES = [
    ("oa_multi_tree", "highs", "include", "zbar_l2"), ("oa_multi_tree", "highs", "exclude", "bbar"),
    ("oa_multi_tree", "highs", "at_most", "l0l2"), ("oa_multi_tree", "highs", "at_least", "cs_l2"),
    ("oa_multi_tree", "highs", "shared_support", "bbar"), ("oa_multi_tree", "scip", "at_least", "l0l2"),
    ("oa_single_tree", "scip", "include", "bbar"), ("oa_single_tree", "scip", "exclude", "l0l2"),
    ("oa_single_tree", "scip", "at_most", "cs_l2"), ("oa_single_tree", "scip", "at_least", "zbar_l2"),
    ("oa_single_tree", "scip", "shared_support", "l0l2"),
    ("miqp", "scip", "include", "cs_l2"), ("miqp", "scip", "exclude", "zbar_l2"),
    ("miqp", "scip", "at_most", "bbar"), ("miqp", "scip", "at_least", "l0l2"),
    ("miqp", "scip", "nonnegative", "l0l2"), ("miqp", "scip", "nonpositive", "zbar_l2"),
    ("miqp", "scip", "bounds", "cs_l2"), ("miqp", "scip", "bounds", "bbar"),
    ("miqp", "scip", "shared_support", "bbar"),
    ("bnb", None, "include", "l0l2"), ("bnb", None, "include", "cs_l2"),
    ("bnb", None, "include", "zbar_l2"), ("bnb", None, "exclude", "l0l2"),
    ("bnb", None, "include", "bbar"), ("bnb", None, "exclude", "zbar_bbar"),
    ("bnb", None, "nonnegative", "l0l2"), ("bnb", None, "nonpositive", "zbar_l2"),
    ("bnb", None, "bounds", "cs_l2"), ("bnb", None, "bounds", "zbar_l2"),
]


def tiny_data(shift=0.0, factor=1.0):
    """K = 2, p = 6: task 0 with n = 10 > p, task 1 with n = 4 < p, different true supports."""
    rng = np.random.default_rng(1)
    truth = [np.array([1.2, -1.0, 0, 0, 0, 0]), np.array([1.2, 0, 0.9, 0, 0, 0])]
    Xs = [rng.normal(size=(n, 6)) for n in (10, 4)]
    ys = [factor * (X @ b + 0.3 * rng.normal(size=len(X))) + shift for X, b in zip(Xs, truth)]
    return MultiTaskData(Xs, ys)


def estimator(variant, constraints, algorithm="bcd", backend=None):
    return SparseMTL(variant=variant, s=S, lambda_ridge=0.1, algorithm=algorithm, backend=backend,
                     constraints=constraints, **PENALTIES[variant])


def reference(variant, constraints, data):
    """The enumerated constrained optimum on the fitted (standardized) problem, and that problem."""
    problem, scaler, _ = estimator(variant, constraints)._problem(data)
    value, B = constrained_optimum(problem, constraints, scaler.x_scale)
    return value, B, problem


def satisfied(kind, keys, coef, scale=1.0):
    """Whether ``coef`` (K, p, original scale) meets the constraint, checked on its own terms;
    ``scale``: the factor the bounds were multiplied by along with y."""
    features = keys.get("features")
    nonzero = coef != 0
    if kind == "include":   # z = 1: a budget place is taken, whatever the coefficient
        return bool(np.all((nonzero | np.isin(np.arange(coef.shape[1]), features)).sum(axis=1) <= S))
    if kind == "exclude":
        return bool(np.all(coef[:, features] == 0))
    if kind == "at_most":
        return bool(np.all(nonzero[:, features].sum(axis=1) <= keys["count"]))
    if kind == "at_least":
        return bool(np.all(nonzero[:, features].sum(axis=1) >= keys["count"]))
    if kind == "nonnegative":
        return bool(np.all(coef[:, features] >= 0))
    if kind == "nonpositive":
        return bool(np.all(coef[:, features] <= 0))
    if kind == "bounds":   # the division back to the original scale may round by an ulp or so
        slack = 1e-12 * scale
        values = coef[:, features]
        return bool(np.all(values >= keys["lower"] * scale - slack) and np.all(values <= keys["upper"] * scale + slack))
    tasks = keys["tasks"]
    return bool(np.all(nonzero[tasks] == nonzero[tasks[0]]))


def assert_certified(result, optimum):
    assert result.status == "optimal"
    assert result.lower_bound <= optimum * (1 + TOL)
    assert optimum * (1 - TOL) <= result.objective <= optimum * (1 + 1e-6) + TOL * optimum


@pytest.mark.parametrize("algorithm, backend, kind, variant", CASES)
def test_certified_constrained_optimum(algorithm, backend, kind, variant):
    data = tiny_data()
    constraints = [{"kind": kind, **KINDS[kind]}]
    optimum, _, _ = reference(variant, constraints, data)
    est = estimator(variant, constraints, algorithm, backend).fit(data)
    assert_certified(est.result_, optimum)
    assert satisfied(kind, KINDS[kind], est.result_.coef)


def test_each_constraint_binds():
    """Each constraint of ``KINDS`` moves the l0l2 optimum, so the tests above see it enforced."""
    data = tiny_data()
    free, _, _ = reference("l0l2", [], data)
    for kind, keys in KINDS.items():
        assert reference("l0l2", [{"kind": kind, **keys}], data)[0] > free * (1 + 1e-6), kind


@pytest.mark.parametrize("algorithm, kind, variant, names", [
    ("oa_multi_tree", "nonnegative", "l0l2", "'miqp'"), ("oa_single_tree", "bounds", "l0l2", "'miqp'"),
    ("bnb", "bounds", "bbar", "'miqp'"), ("bnb", "nonnegative", "zbar_bbar", "'miqp'"),
    ("bnb", "at_most", "l0l2", "'oa_multi_tree'"), ("bnb", "shared_support", "l0l2", "'oa_multi_tree'")])
def test_refusals_name_a_path_that_works(algorithm, kind, variant, names):
    est = estimator(variant, [{"kind": kind, **KINDS[kind]}], algorithm,
                    "scip" if algorithm.startswith("oa") else None)
    with pytest.raises(InvalidParameterError, match=f"algorithm={names}"):
        est.check(tiny_data())


@pytest.mark.parametrize("algorithm, backend, kind, keys", [
    ("oa_multi_tree", "highs", "at_least", {"features": [3, 4, 5], "count": 3}),
    ("oa_single_tree", "scip", "at_least", {"features": [3, 4, 5], "count": 3}),
    ("miqp", "scip", "at_least", {"features": [3, 4, 5], "count": 3}),
    ("bnb", None, "include", {"features": [3, 4, 5]})])
def test_infeasible_constraints_are_refused_before_any_path_runs(algorithm, backend, kind, keys):
    """More than s = 2 features demanded: no support meets the constraints, which the problem's
    build proves (``check_admits``), so every path refuses them up front, naming them."""
    with pytest.raises(InvalidParameterError, match=kind):
        estimator("l0l2", [{"kind": kind, **keys}], algorithm, backend).check(tiny_data())


@pytest.mark.parametrize("algorithm, backend", [("miqp", "scip"), ("bnb", None)])
@pytest.mark.parametrize("shift, factor", [(0.0, 1.0), (0.0, 1e-6), (1e9, 1.0)])
def test_bounds_on_the_exact_paths_at_any_scale(shift, factor, algorithm, backend):
    """Bounds on the original scale scale with y; the certificate holds at y, y * 1e-6 and y + 1e9."""
    data = tiny_data(shift, factor)
    keys = {"features": [0, 1], "lower": -0.5 * factor, "upper": 0.5 * factor}
    constraints = [{"kind": "bounds", **keys}]
    optimum, _, _ = reference("l0l2", constraints, data)
    est = estimator("l0l2", constraints, algorithm, backend).fit(data)
    assert_certified(est.result_, optimum)
    assert satisfied("bounds", {"features": [0, 1], "lower": -0.5, "upper": 0.5}, est.result_.coef, factor)


@pytest.mark.parametrize("algorithm, backend, kind", [
    ("oa_multi_tree", "highs", "include"), ("miqp", "scip", "bounds"), ("bnb", None, "include"),
    ("bnb", None, "bounds")])
def test_infeasible_incumbent_is_no_upper_bound(algorithm, backend, kind):
    """An incumbent that breaks the constraints (the unconstrained optimum, below the constrained
    one) is neither the answer nor the upper bound; a feasible one (the optimum) stays optimal."""
    data = tiny_data()
    constraints = [{"kind": kind, **KINDS[kind]}]
    optimum, best, problem = reference("l0l2", constraints, data)
    _, free, _ = reference("l0l2", [], data)
    assert not problem.feasible(free) and problem.objective(free) < optimum
    for incumbent in (free, best):
        run = run_exact(METHODS[algorithm], problem, incumbent, SolveOptions(), Deadline(None), backend)
        assert problem.feasible(run.estimate)
        assert run.lower_bound <= optimum * (1 + TOL)
        assert optimum * (1 - TOL) <= run.objective <= optimum * (1 + 1e-6)


def test_miqp_model_big_m_comes_from_a_feasible_point():
    """The exported MIQP's Big-M is proven only by a feasible point: an infeasible start (the
    unconstrained optimum, with a lower F) is refused; from a feasible one, the model's beta box
    holds the enumerated constrained optimum."""
    data = tiny_data()
    constraints = [{"kind": "bounds", **KINDS["bounds"]}, {"kind": "include", **KINDS["include"]}]
    optimum, best, problem = reference("l0l2", constraints, data)
    _, free, _ = reference("l0l2", [], data)
    with pytest.raises(InvalidParameterError, match="breaks the side constraints"):
        miqp_model(problem, free)
    model = miqp_model(problem, best)
    for (k, j), value in np.ndenumerate(best):
        assert model.beta[k, j].lb <= value <= model.beta[k, j].ub
