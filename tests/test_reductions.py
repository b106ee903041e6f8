"""The scaling reductions (``mtl_opt.reductions``): one implementation, exact round trips, and
bounds that stay bounds once mapped back, for each family's reduction at y, y * 1e-6 and y + 1e9.

Objectives are checked against an independent evaluation in exact rational arithmetic
(``Fraction``) or in 60-digit decimals where a norm needs a square root, so a bound that is
above the true objective by rounding only still fails.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from mtl_opt.deadline import Deadline
from mtl_opt.formulations import molar as M
from mtl_opt.formulations.armul import ArmulProblem
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.data import MultiTaskData
from mtl_opt import (ARMUL, ClusteredMTL, DataPooling, IndependentTasks, LowRankMTL, PerTaskLasso,
                     SparseMTL)
from mtl_opt.reductions import (Chain, Frame, Inverse, Level, ObjectiveScale, Responses,
                                ResponseScale, Standardization, centred)
from mtl_opt.synthetic import armul_simulation
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.solvers.armul.prox import fista
from mtl_opt.solvers.sparse.methods import METHODS

PACKAGE = Path(__file__).resolve().parents[1] / "mtl_opt"
#: y itself, y over a million, y at a common level of 1e9.
TRANSFORMS = {"y": lambda y: y, "y*1e-6": lambda y: y * 1e-6, "y+1e9": lambda y: y + 1e9}


def sources():
    return {path.relative_to(PACKAGE).as_posix(): path.read_text()
            for path in PACKAGE.rglob("*.py")}


def test_one_scaling_and_inverse_implementation():
    """Powers of 2 are made, the twins' inverses and the two-pass centring written, in
    ``mtl_opt/reductions.py`` alone (today: also in the sparse solvers, MOLAR, ARMUL and the
    model protocol)."""
    found = {pattern: sorted(name for name, text in sources().items() if re.search(pattern, text))
             for pattern in (r"np\.(ldexp|frexp)\(", r"def (normalizing_root|unscaled|_centered|centring)\b",
                             r"class (ResponseScale|Frame|Inverse|Standardization)\b", r"def (to_original|to_unit|z_from_unit)\b")}
    assert found == {pattern: ["reductions.py"] for pattern in found}, found
    model_protocol = sources()["solvers/user_model.py"]
    assert not re.search(r"^\s+(objective_scale|y_scale|y_offset): ", model_protocol, re.M), \
        "ModelSpec holds its scaling as a reductions.Inverse, not as separate fields"


STANDARDIZING = {
    "SparseMTL": lambda: SparseMTL(s=2, standardize=True),
    "ARMUL vanilla": lambda: ARMUL(structure="vanilla", c=0.5),
    "ARMUL clustered": lambda: ARMUL(structure="clustered", n_components=2, c=0.5, seed=0),
    "ARMUL low-rank": lambda: ARMUL(structure="lowrank", n_components=1, c=0.5, seed=0),
    "IndependentTasks": IndependentTasks, "DataPooling": DataPooling,
    "ClusteredMTL": lambda: ClusteredMTL(n_components=2, seed=0),
    "LowRankMTL": lambda: LowRankMTL(n_components=1, seed=0),
    "PerTaskLasso": PerTaskLasso,
}


@pytest.mark.parametrize("name", list(STANDARDIZING))
def test_standardized_coefficients_are_reported_through_the_one_inverse(name, monkeypatch):
    """The concept, not a name: with its features standardized, every estimator's reported
    coefficients are ``reductions.Standardization``'s map of the fitted ones (a hand inverse
    anywhere else would leave the spy uncalled, or report other numbers)."""
    returned = []
    original = Standardization.coefficients

    def spy(self, coef, intercept):
        returned.append(original(self, coef, intercept)[0])
        return returned[-1], original(self, coef, intercept)[1]

    monkeypatch.setattr(Standardization, "coefficients", spy)
    data = armul_simulation("vanilla", m=4, n=30, d=3, seed=1).data
    spread = [1.0, 100.0, 0.01], [5.0, -3.0, 0.0]   # scales and levels a standardization undoes
    data = MultiTaskData([X * spread[0] + spread[1] for X in data.Xs], data.ys, data.task_names)
    model = STANDARDIZING[name]().fit(data)
    assert any(np.shape(coef) == np.shape(model.coef_) and np.allclose(model.coef_, coef, rtol=1e-12, atol=0)
               for coef in returned), f"{name}: coef_ is not what reductions.Standardization returned"


def test_data_are_centred_once_on_the_sparse_path():
    """SparseMTL standardizes (centring there) and builds its problem without centring again."""
    text = sources()["estimators/sparse.py"]
    assert "fit_intercept=False" in text.split("def _problem", 1)[1].split("def ", 1)[0]


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("exponent", [-40, -3, 0, 7, 40])
def test_objective_scale_round_trips_exactly(exponent):
    """Powers of 2 change exponents only: estimate and value come back bit for bit (the exactness
    the certificates rely on, so the comparison has no tolerance)."""
    rng = np.random.default_rng(exponent + 50)
    inverse = ObjectiveScale.near(2.0**exponent * rng.uniform(0.5, 2)).inverse
    x, value = rng.normal(size=(3, 4)) * 10.0**rng.uniform(-5, 5, size=(3, 4)), rng.uniform(1e-3, 1e3)
    assert np.array_equal(inverse.estimate(inverse.to_twin(x)), x)
    assert inverse.value(value / inverse.value_scale) == value
    assert inverse.value(None) is None


def test_a_chain_inverts_in_reverse_order():
    """Level then scale: x = level e0 + factor x_twin; values times factor^2 (independent check)."""
    problem = Responses((np.array([5.0, 9.0, 13.0]),), 3.0, 3)
    twin, inverse = Chain((Level(9.0), ObjectiveScale(4.0))).apply(problem)
    np.testing.assert_allclose(twin.ys[0], [-1.0, 0.0, 1.0], rtol=0, atol=0)
    assert twin.c == pytest.approx(0.75, rel=0, abs=0)
    np.testing.assert_allclose(inverse.estimate([[1.0, 2.0, 3.0]]), [[13.0, 8.0, 12.0]], rtol=0, atol=0)
    assert inverse.value(2.0) == pytest.approx(32.0, rel=0, abs=0)
    other = ResponseScale(9.0, 4.0).inverse(3)
    np.testing.assert_allclose(other.estimate([[1.0, 2.0, 3.0]]), [[13.0, 8.0, 12.0]], rtol=0, atol=0)
    assert other.value_scale == pytest.approx(16.0, rel=0, abs=0)


def test_a_frame_maps_values_estimates_and_duals():
    frame = Frame.spanning(np.array([1e9 - 3.0, -2.0]), np.array([1e9 + 1.0, 6.0]), 5.0)
    values, weights = np.array([[1e9 - 3.0, -2.0], [1e9 + 1.0, 6.0]]), np.array([5.0, 1.0])
    (unit, unit_weights), inverse = frame.apply((values, weights))
    assert np.all(np.abs(unit) <= 1) and 0.5 < unit_weights.max() <= 1
    np.testing.assert_allclose(inverse.estimate(unit), values, rtol=0, atol=0)
    np.testing.assert_allclose(inverse.dual(unit_weights), weights, rtol=0, atol=0)
    assert inverse.value_scale is None    # per-covariate scales: values are recomputed
    # weights up to 1 over 2, half-widths 1/2 and 2 over one scale 4: values times 2 * 4
    assert Frame.spanning([0.0, 0.0], [1.0, 4.0], 1.0, uniform=True).inverse.value_scale == 8.0


@pytest.mark.parametrize("level", [0.0, 1e9, -3e12])
def test_centring_takes_out_the_level_to_the_spread(level):
    rng = np.random.default_rng(1)
    values = level + 1e-4 * rng.normal(size=(50, 3))
    values[:, 2] = level + 0.1   # constant: centred to exactly 0
    mean, centred_values = centred(values)
    exact = [sum(map(Fraction, column)) / len(column) for column in values.T]
    for j in range(2):   # what is left is the exact centred data up to rounding at the spread
        residual = [Fraction(v) - exact[j] - Fraction(c) for v, c in zip(values[:, j], centred_values[:, j])]
        assert max(abs(r) for r in residual) <= 1e-15 * 1e-4 * 8 + float(np.spacing(abs(level) or 1.0))
        assert abs(float(sum(map(Fraction, centred_values[:, j])))) <= 50 * 1e-20 + 1e-18
    assert np.all(centred_values[:, 2] == 0.0)


# ------------------------------------------------------ bounds mapped back, per family
def exact_sparse_objective(Xs, ys, B, lambda_ridge) -> Fraction:
    """F (l0l2, intercepts profiled out) at B, in rationals, on the data as given."""
    total = Fraction(lambda_ridge) / 2 * sum(Fraction(b) ** 2 for b in B.ravel())
    for X, y, beta in zip(Xs, ys, B):
        residual = [Fraction(t) - sum(Fraction(x) * Fraction(b) for x, b in zip(row, beta))
                    for row, t in zip(X, y)]
        mean = sum(residual) / len(residual)
        total += sum((r - mean) ** 2 for r in residual) / (2 * len(residual))
    return total


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_sparse_bound_mapped_back_is_below_the_objective(transform):
    rng = np.random.default_rng(3)
    Xs = [rng.normal(size=(12, 4)) for _ in range(2)]
    ys = [TRANSFORMS[transform](X @ [1.5, 0, -2.0, 0] + 0.3 * rng.normal(size=12)) for X in Xs]
    problem = SparseProblem.from_data(MultiTaskData(Xs, ys), variant="l0l2", s=2, lambda_ridge=0.1)
    incumbent = fit_bcd(problem, deadline=Deadline()).coef
    twin, inverse = ObjectiveScale.near(problem.objective(incumbent)).apply(problem)
    assert 0.25 <= twin.objective(inverse.to_twin(incumbent)) <= 4
    np.testing.assert_allclose(inverse.value(twin.objective(inverse.to_twin(incumbent))),
                               problem.objective(incumbent), rtol=1e-15, atol=0)
    run = inverse.run(METHODS["oa_multi_tree"].solve(twin, inverse.to_twin(incumbent), SolveOptions(),
                                                     Deadline(60), "highs"))
    assert run.lower_bound is not None and run.lower_bound > 0
    assert Fraction(run.lower_bound) <= exact_sparse_objective(Xs, ys, run.estimate, 0.1)
    assert run.objective == pytest.approx(problem.objective(run.estimate), rel=1e-12)


def decimal_armul_objective(Xs, ys, theta, center, w, lam) -> Decimal:
    """ARMUL's squared-loss objective at (theta, center) in 60-digit decimals."""
    with localcontext() as context:
        context.prec = 60
        total = Decimal(0)
        for X, y, t, wj, lj in zip(Xs, ys, theta, w, lam):
            t = [Decimal(float(v)) for v in t]
            loss = sum((Decimal(float(yi)) - sum(Decimal(float(x)) * v for x, v in zip(row, t))) ** 2
                       for row, yi in zip(X, y)) / (2 * len(y))
            dist = sum((v - Decimal(float(g))) ** 2 for v, g in zip(t, center)).sqrt()
            total += Decimal(float(wj)) * (loss + Decimal(float(lj)) * dist)
        return total


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_armul_bound_mapped_back_is_below_the_objective(transform):
    rng = np.random.default_rng(4)
    Xs = [np.hstack([np.ones((15, 1)), rng.normal(size=(15, 2))]) for _ in range(3)]
    ys = [TRANSFORMS[transform](X @ ([0.5, 1.0, -1.0] + 0.2 * rng.normal(size=3))
                                + 0.3 * rng.normal(size=15)) for X in Xs]
    scale = ResponseScale.of(ys, has_intercept=True)
    twin, inverse = scale.apply(Responses(tuple(ys), 0.5, 3))
    assert 0.5 <= np.sqrt(np.mean(np.concatenate(twin.ys) ** 2)) <= 2
    problem = ArmulProblem.from_tasks(Xs, list(twin.ys), c=twin.c)
    run = fista(problem, rel_gap=1e-9, deadline=Deadline())
    theta, center = inverse.estimate(run.theta), inverse.estimate(run.centers)[0]
    # the intercept column comes back to the rounding of the level (1e9: ~1e-7)
    np.testing.assert_allclose(inverse.to_twin(theta), run.theta, rtol=1e-12,
                               atol=4 * np.spacing(abs(scale.level) + 1.0) / scale.factor)
    original = ArmulProblem.from_tasks(Xs, ys, c=0.5)
    bound = inverse.value(run.lower_bound)
    assert bound is not None and bound > 0
    assert Decimal(bound) <= decimal_armul_objective(Xs, ys, theta, center, original.w, original.lam)


@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_median_bound_mapped_back_is_below_the_objective(transform, uniform):
    rng = np.random.default_rng(5)
    values = TRANSFORMS[transform](rng.normal(size=(7, 3)) * [1.0, 10.0, 0.1])
    weights = 10.0 ** rng.uniform(-2, 3, size=7)
    frame = M.MedianFrame.of(values, weights, uniform=uniform)
    (unit, unit_weights), inverse = frame.apply((values, weights))
    z_unit = M.weighted_median(unit, unit_weights, axis=0)
    z = inverse.estimate(z_unit)
    u = inverse.dual(M.median_dual_point(unit, unit_weights, z_unit))
    bound = M.dual_bound(u, values, weights, z)
    exact = sum(Fraction(w) * abs(Fraction(zk) - Fraction(b))
                for row, w in zip(values, weights) for zk, b in zip(z, row))
    assert Fraction(bound) <= exact
    assert bound >= float(exact) * (1 - 1e-9)   # and it certifies the median (gap ~ 0)
    if uniform:
        unit_objective = M.median_objective(z_unit, unit, unit_weights)
        assert inverse.value(unit_objective) == pytest.approx(float(exact), rel=1e-9)


def test_inverse_maps_a_run_and_its_log():
    from mtl_opt.solvers.method import SolverRun
    run = SolverRun(np.ones(2), 1.5, 0.5, "converged",
                    [{"time": 1.0, "incumbent": 1.5, "lower_bound": 0.5, "big_m": 3.0, "nodes": 4}],
                    {"bound": "test"})
    back = Inverse(scale=2.0, value_scale=4.0).run(run)
    np.testing.assert_allclose(back.estimate, [2.0, 2.0], rtol=0, atol=0)
    assert (back.objective, back.lower_bound) == pytest.approx((6.0, 2.0), rel=0, abs=0)
    assert back.log == [{"time": 1.0, "incumbent": 6.0, "lower_bound": 2.0, "big_m": 6.0, "nodes": 4}]
