"""DESIGN.md's recipe "add a backend", walked: a backend module is one ``Backend`` subclass, and
nothing else changes.  The stub here declares MILP and LP and delegates to HiGHS; the methods
that hand a backend those classes (sparse ``oa_multi_tree``, MOLAR ``lp``) accept it by its name
and run on it, those that hand it none refuse it, and no table names it."""

import numpy as np
import pytest

from mtl_opt import MOLAR, SparseMTL
from mtl_opt.errors import CapabilityError, InvalidParameterError
from mtl_opt.solvers.backends import BACKENDS, LP, MILP
from mtl_opt.solvers.backends.highs import HighsBackend
from mtl_opt.synthetic import sparse_heterogeneity


@pytest.fixture
def stub():
    """A backend registered by defining it (``Backend.__init_subclass__``), removed afterwards."""
    class StubBackend(HighsBackend):
        name, label = "stub_milp", "Stub MILP"
        capabilities = frozenset({LP, MILP})

    yield StubBackend.name
    del BACKENDS[StubBackend.name]


@pytest.fixture(scope="module")
def data():
    return sparse_heterogeneity(d=4, M=3, n=30, s=1, sigma=0.1, seed=2).data


def test_oa_multi_tree_and_molar_lp_run_on_a_new_backend_module(stub, data):
    sparse = SparseMTL(s=2, lambda_ridge=0.05, algorithm="oa_multi_tree", backend=stub).fit(data)
    on_highs = SparseMTL(s=2, lambda_ridge=0.05, algorithm="oa_multi_tree").fit(data)
    assert (sparse.result_.backend, sparse.result_.status) == (stub, "optimal")
    assert sparse.result_.native["solver"] == "Stub MILP"
    assert sparse.result_.objective == pytest.approx(on_highs.result_.objective, rel=1e-6)
    molar = MOLAR(algorithm="lp", backend=stub).fit(data)
    closed = MOLAR().fit(data)
    assert (molar.result_.backend, molar.result_.status) == (stub, "optimal")
    np.testing.assert_allclose(molar.coef_, closed.coef_, rtol=0, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["miqp", "oa_single_tree", "bnb"])
def test_methods_it_cannot_run_refuse_it_by_their_own_rules(stub, data, algorithm):
    """The MIQP needs MIQP (and is limited to SCIP), single-tree OA is SCIP's own, bnb uses none."""
    with pytest.raises((InvalidParameterError, CapabilityError), match="runs on|cannot solve"):
        SparseMTL(s=2, lambda_ridge=0.05, algorithm=algorithm, backend=stub).check(data)


def test_a_backend_name_nobody_registered_is_refused():
    with pytest.raises(InvalidParameterError, match="'backend' parameter"):
        SparseMTL(backend="stub_milp").check(sparse_heterogeneity(d=4, M=2, n=12, s=1, seed=0).data)
