"""User-facing estimators, and the registry that instance files name them by."""

from .baselines import PerTaskOLS, PooledOLS
from .base import MTLEstimator
from .molar import MOLAR

#: Instance-file method name -> estimator class.
ESTIMATORS = {cls.method: cls for cls in (MOLAR, PerTaskOLS, PooledOLS)}

__all__ = ["ESTIMATORS", "MOLAR", "MTLEstimator", "PerTaskOLS", "PooledOLS"]
