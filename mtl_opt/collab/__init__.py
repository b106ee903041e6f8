"""Personalized collaborative learning: AffPCL and federated baselines on stochastic linear systems.

Names are loaded on first use (PEP 562), so ``mtl_opt.collab.command`` can be
imported by the CLI without loading numpy-heavy modules or the solver stack.
"""

from .._lazy import lazy_names

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


__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF)
