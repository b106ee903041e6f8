"""User-facing estimators, and the registry that instance files name them by."""

from .armul import ARMUL
from .armul_baselines import ClusteredMTL, DataPooling, IndependentTasks, LowRankMTL
from .baselines import PerTaskOLS, PooledOLS
from .base import MTLEstimator
from .molar import MOLAR
from .sparse import SparseMTL

#: Instance-file method name -> estimator class.
ESTIMATORS = {cls.method: cls for cls in (MOLAR, PerTaskOLS, PooledOLS, SparseMTL, ARMUL, IndependentTasks,
                                          DataPooling, ClusteredMTL, LowRankMTL)}

__all__ = ["ARMUL", "ClusteredMTL", "DataPooling", "ESTIMATORS", "IndependentTasks", "LowRankMTL",
           "MOLAR", "MTLEstimator", "PerTaskOLS", "PooledOLS", "SparseMTL"]
