"""User-facing estimators, and the registry that instance files name them by."""

from .armul import ARMUL
from .armul_baselines import ClusteredMTL, DataPooling, IndependentTasks, LowRankMTL
from .base import MTLEstimator
from .baselines import PerTaskOLS, PooledOLS
from .molar import MOLAR
from .molar_baselines import MedianLasso, PerTaskLasso, RobustMultitask
from .molar_variants import MOLARHighDim, MOLARLogistic
from .sparse import SparseMTL

#: Instance-file method name -> estimator class.  Regression estimators only: MOLARLogistic
#: (0/1 labels) is imported from here but not offered to instance files.
ESTIMATORS = {cls.method: cls for cls in (MOLAR, MOLARHighDim, PerTaskOLS, PooledOLS,
                                          PerTaskLasso, RobustMultitask, MedianLasso, SparseMTL, ARMUL,
                                          IndependentTasks, DataPooling, ClusteredMTL, LowRankMTL)}

__all__ = ["ARMUL", "ESTIMATORS", "MOLAR", "ClusteredMTL", "DataPooling", "IndependentTasks",
           "LowRankMTL", "MOLARHighDim", "MOLARLogistic", "MTLEstimator", "MedianLasso", "PerTaskLasso",
           "PerTaskOLS", "PooledOLS", "RobustMultitask", "SparseMTL"]
