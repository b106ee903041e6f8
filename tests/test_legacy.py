"""Deprecated spellings live in ``mtl_opt.legacy`` alone: no other module of the package warns
about one (the warnings themselves are tested with each estimator)."""

import ast
from pathlib import Path

import mtl_opt

PACKAGE = Path(mtl_opt.__file__).parent


def deprecation_warnings(root: Path) -> list[str]:
    """Where a module other than legacy.py names DeprecationWarning in a call's arguments
    (``warnings.warn(..., DeprecationWarning)``); filters that show or hide them are not warnings."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "legacy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and "filter" not in ast.unparse(node.func)
                    and any(isinstance(a, ast.Name) and a.id == "DeprecationWarning"
                            for a in [*node.args, *(k.value for k in node.keywords)])):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_deprecation_warnings_are_raised_in_legacy_only():
    assert deprecation_warnings(PACKAGE) == []


def test_the_scan_finds_a_warning(tmp_path):
    (tmp_path / "old.py").write_text("import warnings\nwarnings.warn('x', DeprecationWarning)\n"
                                     "warnings.filterwarnings('always', category=DeprecationWarning)\n")
    assert deprecation_warnings(tmp_path) == ["old.py:2"]
