"""One concept in one place, checked on the package's source (issue 51: one result exit).

Seven estimators built their FitResult each its own way, and three string vocabularies
(``result.STATUSES``, ``backends.STATUSES``, ``method.STOPS``) named the statuses, joined by
hand-written mappings (``method.stop_of``).  These tests read the source, so a second place
cannot come back unnoticed.
"""

import ast
import dataclasses
from pathlib import Path

import mtl_opt

PACKAGE = Path(mtl_opt.__file__).parent
STATUS_NAMES = {"optimal", "gap_limit", "time_limit", "iteration_limit", "interrupted", "heuristic",
                "infeasible", "unbounded", "error", "converged"}


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text())


def _enclosing_function(tree, target) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                child is target for child in ast.walk(node)):
            inner = _enclosing_function(ast.Module(body=node.body, type_ignores=[]), target)
            return inner or node.name
    return None


def test_one_place_constructs_a_fit_result():
    """``FitResult(...)`` is called in one place: the estimator base's ``_result_of``, which
    every estimator and baseline goes through (status by ``final_status``)."""
    calls = [(name, _enclosing_function(tree, node))
             for name, tree in _trees() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and (
                 (isinstance(node.func, ast.Name) and node.func.id == "FitResult")
                 or (isinstance(node.func, ast.Attribute) and node.func.attr == "FitResult"))]
    assert calls == [("estimators/base.py", "_result_of")], calls


def _status_collections(tree):
    """Named collections (a tuple, list, set or dict keys, maybe in a call such as frozenset,
    assigned to a name) of >= 2 string literals that are all status names: vocabularies."""
    for assign in ast.walk(tree):
        if not isinstance(assign, (ast.Assign, ast.AnnAssign)) or assign.value is None:
            continue
        value = assign.value
        for node in [value, *(value.args if isinstance(value, ast.Call) else [])]:
            items = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set))
                     else node.keys if isinstance(node, ast.Dict) else [])
            words = [item.value for item in items if isinstance(item, ast.Constant)]
            if len(words) >= 2 and len(words) == len(items) and set(words) <= STATUS_NAMES:
                yield node.lineno, tuple(words)


def _status_enums(tree):
    """Enum classes (``class X(str, enum.Enum)``) that define a member "optimal"."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
                (isinstance(base, ast.Attribute) and base.attr in ("Enum", "StrEnum"))
                or (isinstance(base, ast.Name) and base.id in ("Enum", "StrEnum")) for base in node.bases):
            values = {stmt.value.value for stmt in node.body
                      if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)}
            if "optimal" in values:
                yield node.name


def test_one_status_vocabulary():
    """The statuses are defined once, as ``result.Status``; backends, runs and fits use groups of
    it, not collections of their own status strings."""
    enums = [(name, enum) for name, tree in _trees() for enum in _status_enums(tree)]
    assert enums == [("result.py", "Status")], enums
    collections = [(name, line, words) for name, tree in _trees()
                   for line, words in _status_collections(tree)]
    assert collections == [], collections


def test_the_groups_are_members_of_the_one_vocabulary():
    """Backends report, runs stop with and fits end in members of ``Status``; a run stops
    ``converged`` or with a backend's status as it is (no mapping between them)."""
    from mtl_opt.result import BACKEND_STATUSES, STATUSES, STOPS, Status

    for group in (STATUSES, BACKEND_STATUSES, STOPS):
        assert all(isinstance(status, Status) for status in group)
    assert set(STOPS) == {Status.CONVERGED, *BACKEND_STATUSES}
    assert {str(status) for status in Status} == STATUS_NAMES


def test_no_hand_written_mapping_from_backend_status_to_stop():
    """``method.stop_of`` turned backend statuses into stops by hand in five places."""
    defined = [(name, node.name) for name, tree in _trees() for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name == "stop_of"]
    assert defined == []


def test_run_records_are_typed():
    """``fit_bcd`` returns a dataclass (it returned a tuple), and an ARMUL run's estimate is an
    ``ArmulEstimate``, not a second run record (``ProxRun``) nested in the SolverRun."""
    from mtl_opt.solvers.armul import methods as armul_methods, prox
    from mtl_opt.solvers.sparse import bcd

    assert dataclasses.is_dataclass(bcd.BcdRun)
    assert bcd.fit_bcd.__annotations__["return"] in ("BcdRun", bcd.BcdRun)
    assert {f.name for f in dataclasses.fields(prox.ArmulEstimate)} == {"theta", "centers", "extra"}
    source = Path(armul_methods.__file__).read_text() + Path(bcd.__file__).read_text()
    assert "SolverRun(run," not in source


def test_the_safe_bound_numerics_live_in_one_module():
    """gamma_n, eps and rounding up are ``mtl_opt.rounding``'s (issue 51): no other module of the
    package defines a rounding allowance or reads float64's eps (L-BFGS-B's ftol scale aside)."""
    definitions = [(name, node.name) for name, tree in _trees() for node in ast.walk(tree)
                   if isinstance(node, ast.FunctionDef)
                   and node.name in ("gamma", "rounding_factor", "rounded_up", "lowered", "lowered_sum")]
    assert {name for name, _ in definitions} == {"rounding.py"}
    eps = [name for name, tree in _trees() if "finfo(float).eps" in ast.unparse(tree)]
    assert sorted(eps) == ["rounding.py", "solvers/sparse/lbfgsb.py"]
