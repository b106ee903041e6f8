"""The certificate guard: no FitResult ever reports a bound above its objective."""

import math

import numpy as np
import pytest

from mtl_opt.result import BOUND_ROUNDING_MARGIN, FitResult, checked_bound
from mtl_opt.solvers.method import SolverRun, final_status


def _result(objective, bound, status="optimal"):
    return FitResult(method="t", coef=np.zeros((1, 2)), intercept=np.zeros(1), objective=objective,
                     lower_bound=bound, status=status, bound_source="test bound")


@pytest.mark.parametrize("objective", [1e-12, 1e-8, 1.0, 1e9, -3.0])
def test_a_bound_above_the_objective_is_dropped_and_optimal_is_withdrawn(objective):
    bound = objective + 1e-6 * abs(objective)
    result = _result(objective, bound)
    assert result.lower_bound is None and result.status == "heuristic"
    assert result.bound_source is None
    assert "above the objective" in result.warnings[0]
    assert "Warning" in result.summary()
    assert final_status(SolverRun(None, objective, bound), 1e-2) == "heuristic"


def test_a_bound_within_rounding_is_clipped_to_the_objective():
    objective = 2.5
    bound = objective * (1 + BOUND_ROUNDING_MARGIN / 2)
    result = _result(objective, bound)
    assert result.lower_bound == objective and result.status == "optimal" and not result.warnings


@pytest.mark.parametrize("status", ["time_limit", "iteration_limit"])
def test_a_stop_keeps_its_reason_when_its_bound_is_dropped(status):
    result = _result(1.0, 2.0, status)
    assert result.status == status and result.lower_bound is None


@pytest.mark.parametrize("objective, bound", [(math.nan, 1.0), (math.inf, 1.0), (1.0, math.nan),
                                              (1.0, math.inf)])
def test_non_finite_values_never_certify(objective, bound):
    kept, failure = checked_bound(objective, bound)
    assert kept is None and failure
    assert _result(objective, bound).status == "heuristic"


def test_a_valid_bound_is_kept_as_is_and_survives_json():
    result = _result(1.0, 0.75, "gap_limit")
    assert result.lower_bound == 0.75 and result.status == "gap_limit"
    dropped = _result(1.0, 1.5)
    again = FitResult.from_json(dropped.to_json())
    assert again.lower_bound is None and again.status == "heuristic" and again.warnings == dropped.warnings
