"""The Gurobi backend's license-limit error, without gurobipy: a stand-in module raises Gurobi's
error SIZE_LIMIT_EXCEEDED (errno 10010) and the message must be Gurobi's own, not a figure of
ours (its pip license refused a 320-variable MIQP while we stated 2000: issue 50)."""

import sys
import types

import pytest

from mtl_opt.errors import LicenseLimitError, SolverError
from mtl_opt.solvers.backends.gurobi import GurobiBackend

GUROBI_SAYS = "Model too large for size-limited license; visit https://gurobi.com/unrestricted"


class GurobiError(Exception):
    """gurobipy.GurobiError's shape: an error number beside the message."""

    def __init__(self, errno, message):
        super().__init__(message)
        self.errno, self.message = errno, message


@pytest.fixture
def fake_gurobipy(monkeypatch):
    error_codes = types.SimpleNamespace(SIZE_LIMIT_EXCEEDED=10010)   # Gurobi's documented code
    module = types.SimpleNamespace(GurobiError=GurobiError, GRB=types.SimpleNamespace(Error=error_codes))
    monkeypatch.setitem(sys.modules, "gurobipy", module)


def test_the_size_limit_error_passes_on_what_gurobi_reports(fake_gurobipy):
    error = GurobiBackend()._failure(GurobiError(10010, GUROBI_SAYS), "miqp")
    assert isinstance(error, LicenseLimitError)
    assert GUROBI_SAYS in str(error) and "MIQP" in str(error) and "another backend" in str(error)
    assert "2000" not in str(error)


def test_another_gurobi_error_is_a_solver_error_not_a_license_limit(fake_gurobipy):
    error = GurobiBackend()._failure(GurobiError(10005, "Unable to retrieve attribute 'X'"), "lp")
    assert isinstance(error, SolverError) and not isinstance(error, LicenseLimitError)
    assert "Unable to retrieve attribute 'X'" in str(error)
