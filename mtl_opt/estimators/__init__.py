"""User-facing estimators, and the registry that instance files name them by."""

from .baselines import PerTaskOLS, PooledOLS
from .base import MTLEstimator
from .molar import MOLAR
from .sparse import SparseMTL

#: Instance-file method name -> estimator class.
ESTIMATORS = {cls.method: cls for cls in (MOLAR, PerTaskOLS, PooledOLS, SparseMTL)}

__all__ = ["ESTIMATORS", "MOLAR", "MTLEstimator", "PerTaskOLS", "PooledOLS", "SparseMTL"]
