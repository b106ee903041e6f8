"""Names and modules loaded on first use, so a process imports only the modules it uses (the CLI's
``--help`` no numpy, a MOLAR fit no numba, a fit that builds no model no Pyomo)."""

from __future__ import annotations

import functools
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
    """The module ``name``, imported by ``load`` at the first attribute asked of it (each attribute
    then kept here)."""

    def __init__(self, name: str, load=importlib.import_module):
        super().__init__(name)
        self._load = load

    def __getattr__(self, attr):
        value = getattr(self._load(self.__name__), attr)
        setattr(self, attr, value)
        return value


def import_pyomo(name: str = "pyomo.environ") -> types.ModuleType:
    """Pyomo's module ``name``, imported after ``unlink_pyomo_lock``."""
    unlink_pyomo_lock()
    return importlib.import_module(name)


@functools.cache
def unlink_pyomo_lock() -> None:
    """Make Pyomo's interprocess lock now and unlink its name (the lock still works), dropped from
    the resource tracker and from the unlinking at exit.

    Pyomo makes a named semaphore for ``capture_output`` on its first use of multiprocessing
    (named wherever the start method is not fork: the workers of scikit-learn's ``GridSearchCV``
    and of the trees).  A process killed holding the name (a Ctrl-C stops those workers) left it
    to the resource tracker, which warned about leaked semaphores on the terminal."""
    dependencies = importlib.import_module("pyomo.common.dependencies")
    dependencies.multiprocessing.Lock   # resolves the deferred import: Pyomo makes its lock now
    name = getattr(getattr(dependencies.capture_output_lock, "_semlock", None), "name", None)
    if name is None:   # a lock unlinked at birth (the fork start method)
        return
    from multiprocessing import resource_tracker, synchronize, util

    synchronize.sem_unlink(name)
    resource_tracker.unregister(name, "semaphore")
    for finalizer in list(getattr(util, "_finalizer_registry", {}).values()):
        if getattr(finalizer, "_args", None) == (name,):
            finalizer.cancel()


# Pyomo for the modules that build or read models: importing it costs 0.3-0.5 s (with the scipy
# modules its import hooks load), more than a whole fit by bcd, FISTA or a weighted median, which
# build none.  Type checkers see the module itself.
if TYPE_CHECKING:
    import pyomo.environ as pyo
else:
    pyo = LazyModule("pyomo.environ", import_pyomo)
