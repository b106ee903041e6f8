"""Multi-task contextual bandits: MOLARB (Model-C / Model-P), Meta-Ban and their baselines.

``base`` fixes the environment / policy interface, ``runner`` runs policies
over seeded trials, ``registry`` names them for ``mtl-opt bandit`` files.
Names are loaded on first use (PEP 562), as in ``mtl_opt.collab``, so the CLI
imports ``mtl_opt.bandits.command`` without numpy or scipy.
"""

import importlib

_HOME = {
    "base": ["Environment", "Policy", "Round"],
    "runner": ["BanditResult", "plot_regret", "run_bandit", "run_policy"],
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
