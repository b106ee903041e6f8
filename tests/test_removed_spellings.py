"""The spellings deprecated until 0.4.0 are gone in 0.5.0 (CHANGELOG.md's table): each is refused
before any work, and no module of the package warns about a deprecated name any more."""

import ast
from pathlib import Path

import pytest

import mtl_opt
from mtl_opt import ARMUL, MOLAR, SparseMTL
from mtl_opt.errors import InvalidParameterError
from mtl_opt.synthetic import sparse_heterogeneity

PACKAGE = Path(mtl_opt.__file__).parent


@pytest.mark.parametrize("make", [lambda: SparseMTL(solver="bnb"), lambda: SparseMTL(seed=0),
                                  lambda: ARMUL(solver="scip"), lambda: MOLAR(median="lp")],
                         ids=["SparseMTL-solver", "SparseMTL-seed", "ARMUL-solver", "MOLAR-median"])
def test_a_removed_parameter_is_refused_by_the_constructor(make):
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        make()


def test_the_removed_names_of_sparse_methods_are_refused_before_any_work():
    data = sparse_heterogeneity(d=4, M=2, n=12, s=1, seed=0).data
    with pytest.raises(InvalidParameterError, match="oa_multi_tree"):   # the error lists the names
        SparseMTL(s=2, lambda_ridge=0.1, algorithm="oa").check(data)
    model = SparseMTL(s=2, lambda_ridge=0.1).fit(data)
    with pytest.raises(TypeError, match="unexpected keyword argument 'solver'"):
        model.certify(data, solver="oa_multi_tree")
    assert not hasattr(model, "exact_model")
    with pytest.raises(ValueError, match="has no parameter 'solver'"):
        SparseMTL().set_params(solver="bnb")


def deprecation_warnings(root: Path) -> list[str]:
    """Where a module names DeprecationWarning in a call's arguments
    (``warnings.warn(..., DeprecationWarning)``); filters that show or hide them are not warnings."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and "filter" not in ast.unparse(node.func)
                    and any(isinstance(a, ast.Name) and a.id == "DeprecationWarning"
                            for a in [*node.args, *(k.value for k in node.keywords)])):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_warns_about_a_deprecated_name():
    assert deprecation_warnings(PACKAGE) == []


def test_the_scan_finds_a_warning(tmp_path):
    (tmp_path / "old.py").write_text("import warnings\nwarnings.warn('x', DeprecationWarning)\n"
                                     "warnings.filterwarnings('always', category=DeprecationWarning)\n")
    assert deprecation_warnings(tmp_path) == ["old.py:2"]
