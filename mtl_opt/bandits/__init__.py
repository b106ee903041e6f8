"""Multi-task contextual bandits: MOLARB (Model-C / Model-P), Meta-Ban and their baselines.

``base`` fixes the environment / policy interface, ``runner`` runs policies
over seeded trials, ``registry`` names them for ``mtl-opt bandit`` files.
Names are loaded on first use (PEP 562), as in ``mtl_opt.collab``, so the CLI
imports ``mtl_opt.bandits.command`` without numpy or scipy.
"""

from .._lazy import lazy_names

_HOME = {
    "base": ["Environment", "Policy", "Round"],
    "runner": ["BanditResult", "plot_regret", "run_bandit", "run_policy"],
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF)
