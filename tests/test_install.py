"""What a fresh install needs to tell a user: why a solver that is installed does not import."""

import pytest

from mtl_opt.errors import SolverUnavailableError
from mtl_opt.solvers.backends import HighsBackend


def test_a_backend_whose_package_fails_to_import_shows_the_import_error(tmp_path, monkeypatch):
    """As highspy 1.16 did on Python 3.10 without typing_extensions: installed, and its import fails
    on a dependency of its own, so "pip install highspy" would be the wrong advice."""
    (tmp_path / "broken_solver").mkdir()
    (tmp_path / "broken_solver" / "__init__.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = HighsBackend()
    monkeypatch.setattr(backend, "module", "broken_solver")
    monkeypatch.setattr(backend, "available", lambda: False)
    reason = backend.unavailable_reason()
    assert "importing broken_solver failed" in reason and "no_such_dependency_xyz" in reason, reason
    with pytest.raises(SolverUnavailableError, match="no_such_dependency_xyz"):
        backend._require_available()


def test_a_missing_backend_package_gets_the_install_hint(monkeypatch):
    backend = HighsBackend()
    monkeypatch.setattr(backend, "module", "no_such_solver_package_xyz")
    assert backend.unavailable_reason() == backend.install_hint
