"""Pyomo -> solver adapters: ``base`` holds what they share, one module per backend.

Importing a backend module registers its adapter in ``BACKENDS`` (the import
order below is the order of preference); the names are re-exported here so
``from mtl_opt.solvers.backends import ...`` does not depend on the layout.
"""

from mtl_opt.result import absolute_gap, relative_gap
from mtl_opt.solvers.backends.base import (
    BACKENDS, CAPABILITIES, LAZY_CUTS, LP, MILP, MIQCP, MIQP, NLP, PROBLEM_CLASSES,
    QCP, QP, STATUSES, Backend, BackendResult, get_backend, list_backends, native_streams,
    pick_backend, note_interrupt,
)
from mtl_opt.solvers.backends.highs import HighsBackend
from mtl_opt.solvers.backends.scip import ScipBackend, default_memory_limit_mb
from mtl_opt.solvers.backends.gurobi import GurobiBackend

__all__ = [
    "BACKENDS", "CAPABILITIES", "LAZY_CUTS", "LP", "MILP", "MIQCP", "MIQP", "NLP",
    "PROBLEM_CLASSES", "QCP", "QP", "STATUSES", "Backend", "BackendResult", "GurobiBackend", "HighsBackend",
    "ScipBackend", "absolute_gap", "default_memory_limit_mb", "get_backend", "list_backends",
    "native_streams", "pick_backend", "note_interrupt", "relative_gap",
]
