"""Model knowledge lives in formulations/: a ModelSpec's component descriptions are the Pyomo
``doc`` strings of the components the formulations build; ``pyomo_model``'s ``kind="master"``
spec is solved and certified like the MIQP's."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import ARMUL, MOLAR, PerTaskOLS, PooledOLS, SparseMTL
from mtl_opt.formulations.sparse import SparseProblem

ESTIMATORS = Path(__file__).resolve().parents[1] / "mtl_opt" / "estimators"


def small_data(seed=0, level=5.0):
    rng = np.random.default_rng(seed)
    Xs = [rng.normal(size=(20, 4)) for _ in range(2)]
    return MultiTaskData(Xs, [X @ [1.0, 0, -1.0, 0] + 0.1 * rng.normal(size=20) + level for X in Xs])


@pytest.mark.parametrize("estimator", [SparseMTL(variant="zbar_l2", s=2, lambda_ridge=0.1, lambda_zbar=0.05),
                                       MOLAR(), ARMUL(), ARMUL(structure="clustered", n_components=2),
                                       PerTaskOLS(), PooledOLS()], ids=lambda e: type(e).__name__)
def test_components_are_the_docs_the_formulations_give(estimator):
    spec = estimator.pyomo_model(small_data())
    assert {"obj"} <= set(spec.components) and len(spec.components) >= 5
    for name, text in spec.components.items():
        assert spec.model.component(name).doc == text
    documented = {c.local_name for c in spec.model.component_objects(descend_into=False) if c.doc}
    assert set(spec.components) <= documented
    assert spec.model.component(next(iter(spec.components))).doc in spec.describe()


def test_no_estimator_hand_writes_component_descriptions():
    """The descriptions are written once, as doc= in formulations/ (today: dicts in 4 estimators)."""
    for path in ESTIMATORS.glob("*.py"):
        assert not re.search(r"\bcomponents = \{|\bnamed = \{", path.read_text()), path.name


def test_the_model_on_the_problems_own_scale_is_not_normalized():
    """``normalized=False`` (what ``mtl-opt export`` writes, and what the removed ``exact_model``
    returned): y as it is, y_scale exactly 1, the same model as the normalized twin's."""
    data, estimator = small_data(), SparseMTL(variant="l0l2", s=2, lambda_ridge=0.1)
    for kind in ("miqp", "master"):
        raw = estimator.pyomo_model(data, kind=kind, normalized=False)
        twin = estimator.pyomo_model(data, kind=kind)
        assert raw.y_scale == pytest.approx(1.0, rel=0, abs=0)
        assert (raw.model.nvariables(), raw.model.nconstraints()) == (
            twin.model.nvariables(), twin.model.nconstraints())


def brute_force_l0l2(data, s, lambda_ridge):
    """min F over every support of size <= s per task (refits on the centred data, independent
    of the estimator's standardization path: standardize=False below)."""
    problem = SparseProblem.from_data(data, variant="l0l2", s=s, lambda_ridge=lambda_ridge)
    K, p = problem.n_tasks, problem.n_features
    subsets = [c for size in range(s + 1) for c in itertools.combinations(range(p), size)]
    best = np.inf
    for choice in itertools.product(subsets, repeat=K):
        support = np.zeros((K, p), bool)
        for k, columns in enumerate(choice):
            support[k, list(columns)] = True
        best = min(best, problem.objective(problem.refit(support), support))
    return best


@pytest.mark.parametrize("level", [0.0, 1e9])
def test_a_master_spec_is_solved_and_certified(level):
    data = small_data(1, level)
    estimator = SparseMTL(variant="l0l2", s=2, lambda_ridge=0.1, standardize=False)
    spec = estimator.pyomo_model(data, kind="master")
    assert isinstance(spec.model.component("cuts"), pyo.ConstraintList)
    result = estimator.fit(data, model=spec).result_
    optimum = brute_force_l0l2(data, 2, 0.1)
    assert result.lower_bound is not None
    assert result.lower_bound <= optimum * (1 + 1e-12)
    assert optimum <= result.objective * (1 + 1e-12)
