"""A package's names loaded on first use (PEP 562), so a process imports only the modules it uses
(the CLI's ``--help`` no numpy, a MOLAR fit no numba)."""

from __future__ import annotations

import importlib
import sys


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
