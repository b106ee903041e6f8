"""Names and modules loaded on first use, so a process imports only the modules it uses (the CLI's
``--help`` no numpy, a MOLAR fit no numba, a fit that builds no model no Pyomo)."""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING


def lazy_names(package: str, home: dict[str, str]):
    """(``__getattr__``, ``__dir__``) for ``package``, whose public name -> module (relative to the
    package) is ``home``: a name's module is imported when the name is first asked for."""
    def __getattr__(name):
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{home[name]}", package), name)

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(home))
    return __getattr__, __dir__


class LazyModule(types.ModuleType):
    """The module ``name``, imported at the first attribute asked of it (each attribute then kept
    here)."""

    def __getattr__(self, attr):
        value = getattr(importlib.import_module(self.__name__), attr)
        setattr(self, attr, value)
        return value


# Pyomo for the modules that build or read models: importing it costs 0.3-0.5 s (with the scipy
# modules its import hooks load), more than a whole fit by bcd, FISTA or a weighted median, which
# build none.  Type checkers see the module itself.
if TYPE_CHECKING:
    import pyomo.environ as pyo
else:
    pyo = LazyModule("pyomo.environ")
