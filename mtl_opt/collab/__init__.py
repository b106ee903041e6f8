"""Personalized collaborative learning: AffPCL and federated baselines on stochastic linear systems.

Names are loaded on first use (PEP 562), so ``mtl_opt.collab.command`` can be
imported by the CLI without loading numpy-heavy modules or the solver stack.
"""

import importlib

_HOME = {
    "systems": ["FiniteStateSystem", "GaussianSystem", "LinearSystem", "Sample", "digits_system",
                "gaussian_system", "random_finite_system"],
    "algorithms": ["METHODS", "AffPCL", "Ditto", "FedAvg", "FineTuning", "IFCA", "Independent",
                   "Method", "PFedMe", "affpcl_direction", "make_method", "step_size"],
    "runner": ["CollabResult", "plot", "run_methods"],
    "config": ["Experiment", "load_experiment"],
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
