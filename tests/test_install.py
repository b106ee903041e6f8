"""What an install outside the checkout needs: the demos as package data (``mtl_opt.datasets``,
``mtl-opt demo``), and why a solver that is installed does not import."""

import filecmp
import fnmatch
import json
from pathlib import Path

import pytest

from cli_runner import run_cli
from mtl_opt import datasets
from mtl_opt.errors import InvalidParameterError, SolverUnavailableError
from mtl_opt.solvers.backends import HighsBackend

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


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


def test_the_wheel_carries_every_shipped_file_a_demo_reads():
    """pyproject.toml's package-data patterns, against the files the shipped TOMLs name."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = [p.replace("instances/", "", 1) for p in patterns["mtl_opt.datasets"]]
    tomls = sorted((ROOT / "instances").glob("*.toml")) + sorted((ROOT / "instances").glob("library/*.toml"))
    assert len(tomls) > 10
    for toml in tomls:
        data = tomllib.loads(toml.read_text()).get("data", {})
        needed = [toml] + ([toml.parent / data["path"]] if "path" in data else [])
        for file in needed:
            relative = file.relative_to(ROOT / "instances").as_posix()
            assert file.is_file(), file
            assert any(fnmatch.fnmatch(relative, p) and relative.count("/") == p.count("/")
                       for p in shipped), (relative, shipped)


def test_datasets_finds_the_demos_and_names_the_command_of_each():
    # the link to instances/ in a checkout, a copy of it in an sdist or a wheel
    shipped = datasets.path("molar_demo")
    assert filecmp.cmp(shipped, ROOT / "instances" / "molar_demo.toml", shallow=False)   # the same file
    assert {"molar_demo", "armul_demo", "sparse_zbar", "molarb_model_c"} <= set(datasets.names())
    assert datasets.command("molar_demo") == "solve" and datasets.command("molarb_model_c") == "bandit"
    assert datasets.command("affpcl_synthetic") == "collab"
    assert datasets.load("molar_demo").load_data().n_tasks == 6


def test_datasets_reaches_the_bench_library_by_name():
    """The bench library's instances as ``library/NAME``, every one of them, and a wrong name
    is refused listing them (the gallery reached them through folder() by hand)."""
    library = datasets.names(library=True)
    assert sorted(f"library/{f.stem}" for f in (ROOT / "instances" / "library").glob("*.toml")) == library
    assert filecmp.cmp(datasets.path("library/small_sparse_l0l2"),
                       ROOT / "instances" / "library" / "small_sparse_l0l2.toml", shallow=False)
    assert datasets.load("library/tiny_molar").load_data().n_tasks > 1
    with pytest.raises(InvalidParameterError, match="library/small_sparse_l0l2"):
        datasets.path("library/no_such_instance")
    assert not set(library) & set(datasets.names())


def test_mtl_opt_demo_solves_a_shipped_demo_by_name(tmp_path):
    proc = run_cli("demo", "molar_demo", "--out", tmp_path / "fit.json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "fit.json").read_text())["status"] == "optimal"
    listing = run_cli("demo")
    assert listing.returncode == 0 and "mtl-opt demo molar_demo" in listing.stdout
    assert "mtl-opt bandit " in listing.stdout


def test_mtl_opt_demo_refuses_unknown_names_and_points_experiments_to_their_command(tmp_path):
    unknown = run_cli("demo", "no_such_demo")
    assert unknown.returncode == 2 and "molar_demo" in unknown.stderr
    bandit = run_cli("demo", "molarb_model_c")
    assert bandit.returncode == 2 and "mtl-opt bandit" in bandit.stderr
    assert run_cli("solve").returncode == 2
