"""Pyomo's private solver internals are touched by the backend adapters only
(``mtl_opt/solvers/backends/``): a Pyomo release may rename them, and one package to change then is
the point of the adapters."""

import ast
import inspect
import re
from pathlib import Path

import pyomo.environ  # noqa: F401  (registers the contrib solvers)
from pyomo.contrib.solver.solvers.gurobi import gurobi_persistent
from pyomo.contrib.solver.solvers.highs import Highs
from pyomo.contrib.solver.solvers.scip import scip_direct

import mtl_opt

PACKAGE = Path(mtl_opt.__file__).parent
ADAPTERS = PACKAGE / "solvers" / "backends"

#: The ones the adapters use today; the rest are read from Pyomo's classes below.
KNOWN = {"_solver_model", "_pyomo_var_to_solver_var_map", "_pyomo_con_to_solver_con_map",
         "_create_solver_model", "_add_constraint", "_model", "_solver_con_to_pyomo_con_map"}


def pyomo_private_names() -> set[str]:
    """Private (one leading underscore) attributes of Pyomo's HiGHS, SCIP and Gurobi interfaces
    and their bases: class members, and the ``self._name`` their source assigns or reads."""
    classes = [Highs, *(c for module in (scip_direct, gurobi_persistent)
                        for c in vars(module).values()
                        if inspect.isclass(c) and c.__module__.startswith("pyomo."))]
    names = set(KNOWN)
    for cls in classes:
        for base in cls.__mro__:
            if not base.__module__.startswith("pyomo."):
                continue
            names |= {n for n in vars(base) if n.startswith("_")}
            try:
                names |= set(re.findall(r"self\.(_\w+)", inspect.getsource(base)))
            except (OSError, TypeError):
                pass
    return {n for n in names if not n.startswith("__")}


#: Names that are Pyomo's by coincidence only, where we read another library's object: in
#: ``interrupts._exit_now``, multiprocessing.util.Finalize's ``_callback``.
NOT_PYOMO = {"interrupts.py": {"_callback"}}


def private_pyomo_uses(names: set[str], root: Path = PACKAGE) -> list[str]:
    """``x._name`` (x not self or cls: our own classes may have such a name) and ``"_name"``
    strings (getattr) of ``names``, in the package outside the adapters."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if ADAPTERS in path.parents:
            continue
        names_here = names - NOT_PYOMO.get(str(path.relative_to(root)), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in names_here
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in names_here:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_the_names_come_from_pyomo():
    names = pyomo_private_names()
    assert KNOWN <= names and len(names) > 50


def test_no_private_pyomo_name_outside_the_backend_adapters():
    assert private_pyomo_uses(pyomo_private_names()) == []


def test_the_scan_finds_a_use(tmp_path):
    (tmp_path / "leak.py").write_text("def f(solver):\n    return solver._solver_model, "
                                      "getattr(solver, '_pyomo_var_to_solver_var_map')\n"
                                      "class A:\n    def g(self):\n        return self._model\n")
    assert private_pyomo_uses(pyomo_private_names(), tmp_path) == [
        "leak.py:2: ._solver_model", "leak.py:2: '_pyomo_var_to_solver_var_map'"]
