"""The weighted median: closed form, dual certificate, and the LP on every backend."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.formulations import molar as F
from mtl_opt.solvers.backends import get_backend
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.deadline import Deadline

LP_BACKENDS = ["highs", "scip"]


def brute_force_minimum(column, weights):
    """The objective is piecewise linear with kinks at the values: its minimum is at one of them."""
    return min(np.sum(weights * np.abs(c - column)) for c in column)


def random_instance(rng, M, d, ties):
    values = rng.normal(size=(M, d))
    if ties:  # repeat values within columns and use integer weights: cumulative ties happen
        values = np.round(values, 0)
    weights = rng.integers(0, 4, size=M).astype(float)
    weights[rng.integers(M)] = 1.0
    return values, weights


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), M=st.integers(1, 9), d=st.integers(1, 5), ties=st.booleans())
def test_closed_form_is_a_minimizer_and_its_dual_certifies_it(seed, M, d, ties):
    values, weights = random_instance(np.random.default_rng(seed), M, d, ties)
    z = F.weighted_median(values, weights)
    for k in range(d):
        best = brute_force_minimum(values[:, k], weights)
        assert np.sum(weights * np.abs(z[k] - values[:, k])) <= best * (1 + 1e-12) + 1e-12
    u = F.median_dual_point(values, weights, z)
    assert np.all(np.abs(u) <= weights[:, None] * (1 + 1e-12))
    assert np.allclose(u.sum(axis=0), 0, atol=1e-9)
    objective, bound = F.median_objective(z, values, weights), F.dual_bound(u, values, weights, z)
    assert bound <= objective + 1e-9
    assert objective - bound <= 1e-9 * max(1.0, objective)


def test_axis_and_weight_shapes():
    rng = np.random.default_rng(1)
    values, weights = rng.normal(size=(5, 3)), rng.random(5)
    assert np.array_equal(F.weighted_median(values.T, weights, axis=1), F.weighted_median(values, weights))
    full = np.tile(weights[:, None], (1, 3))
    assert np.array_equal(F.weighted_median(values, full), F.weighted_median(values, weights))


def test_equal_weights_give_the_ordinary_median_for_odd_counts():
    values = np.array([[3.0], [-1.0], [7.0], [2.0], [10.0]])
    assert F.weighted_median(values, np.ones(5))[0] == np.median(values)


def test_a_dominant_weight_wins():
    assert F.weighted_median(np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 5.0]))[()] == 2.0


def test_projection_repairs_any_point_into_a_dual_feasible_one():
    rng = np.random.default_rng(3)
    weights = rng.random(6)
    u = F.project_dual(rng.normal(scale=3, size=(6, 4)), weights)
    assert np.all(np.abs(u) <= weights[:, None] + 1e-12)
    assert np.allclose(u.sum(axis=0), 0, atol=1e-12)


@pytest.mark.parametrize("bad, error", [
    (dict(weights=[1.0, -1.0]), InvalidParameterError),
    (dict(weights=[0.0, 0.0]), InvalidParameterError),
    (dict(weights=[1.0]), InvalidDataError),
    (dict(values=[[np.nan], [1.0]]), InvalidDataError),
])
def test_bad_median_inputs(bad, error):
    args = dict(values=[[0.0], [1.0]], weights=[1.0, 1.0]) | bad
    with pytest.raises(error):
        F.weighted_median(**args)


def solve_lp(values, weights, backend):
    model = F.build_median_lp(values, weights)
    run = get_backend(backend).solve(model, "lp", SolveOptions(), deadline=Deadline())
    assert run.status == "optimal" and run.has_solution
    return np.array([model.z[k].value for k in range(values.shape[1])]), model, run


@pytest.mark.parametrize("backend", LP_BACKENDS)
@pytest.mark.parametrize("seed", range(6))
def test_lp_objective_matches_the_closed_form(backend, seed):
    rng = np.random.default_rng(seed)
    values, weights = random_instance(rng, M=7, d=6, ties=seed % 2 == 0)
    z_lp, _, _ = solve_lp(values, weights, backend)
    z_cf = F.weighted_median(values, weights)
    lp, cf = F.median_objective(z_lp, values, weights), F.median_objective(z_cf, values, weights)
    assert abs(lp - cf) <= 1e-9 * max(abs(cf), 1e-12)
    # where the minimizer is unique (no cumulative weight equals half the total), z agrees too
    for k in range(values.shape[1]):
        cumulative = np.cumsum(weights[np.argsort(values[:, k])])
        if not np.any(np.isclose(2 * cumulative, cumulative[-1], rtol=0, atol=1e-12)):
            assert z_lp[k] == pytest.approx(z_cf[k], abs=1e-9)


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_lp_duals_give_a_tight_valid_bound(backend):
    rng = np.random.default_rng(11)
    values, weights = rng.normal(size=(9, 4)), rng.random(9) + 0.1
    z, model, run = solve_lp(values, weights, backend)
    duals = get_backend(backend).load_duals(model, run)
    u = np.array([[duals[model.upper[i, k]] - duals[model.lower[i, k]] for k in range(4)]
                  for i in range(9)])
    bound = F.dual_bound(F.project_dual(u, weights), values, weights, z)
    optimum = sum(brute_force_minimum(values[:, k], weights) for k in range(4))
    assert bound <= optimum + 1e-9
    assert optimum - bound <= 1e-7 * optimum
