"""mtl_opt: multi-task learning estimators as optimization models, with certified gaps.

The names users need come from here (``from mtl_opt import SparseMTL, SolveOptions``), each
imported on first use (``_lazy``), so ``import mtl_opt`` and ``mtl-opt --help`` load no numpy.
Their modules stay where they are; this is the one list of what is public at the top.
"""

from . import logs  # noqa: F401  (the ``mtl_opt`` logger's NullHandler, before any record)
from ._lazy import lazy_names

__version__ = "0.5.0.dev0"

#: Public name -> its module (relative to this package).
_HOME = {
    **{name: "estimators" for name in (
        "ARMUL", "ClusteredMTL", "DataPooling", "IndependentTasks", "LowRankMTL", "MOLAR",
        "MOLARHighDim", "MOLARLogistic", "MedianLasso", "MTLEstimator", "PerTaskLasso",
        "PerTaskOLS", "PooledOLS", "RobustMultitask", "SparseMTL")},
    "MultiTaskData": "data", "Scaler": "data",
    "SolveOptions": "solvers.options",
    "FitResult": "result", "Status": "result",
    "cross_validate": "cv", "TaskKFold": "cv", "CVResult": "cv",
    "FitInterrupted": "interrupts",
    "MTLOptError": "errors", "InvalidDataError": "errors", "InvalidParameterError": "errors",
    "NotFittedError": "errors",
}

__getattr__, __dir__ = lazy_names(__name__, _HOME)
__all__ = sorted(_HOME)
