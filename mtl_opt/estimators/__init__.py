"""User-facing estimators, and the registry that instance files name them by.

Each class is imported on first use (PEP 562), so a process that fits one estimator (a CLI
solve, a bench cell, a cross-validation worker) loads that estimator's modules only.
"""

from .._lazy import lazy_names
from collections.abc import Mapping

#: Class name -> module of this package.
_HOME = {"ARMUL": "armul", "ClusteredMTL": "armul_baselines", "DataPooling": "armul_baselines",
         "IndependentTasks": "armul_baselines", "LowRankMTL": "armul_baselines", "MTLEstimator": "base",
         "PerTaskOLS": "baselines", "PooledOLS": "baselines", "MOLAR": "molar",
         "MedianLasso": "molar_baselines", "PerTaskLasso": "molar_baselines",
         "RobustMultitask": "molar_baselines", "MOLARHighDim": "molar_variants",
         "MOLARLogistic": "molar_variants", "SparseMTL": "sparse"}

#: Instance-file method name (each class's ``method``) -> class name.  Regression estimators
#: only: MOLARLogistic (a classifier) is imported from here but not offered to instance files.
_METHODS = {"molar": "MOLAR", "molar_hd": "MOLARHighDim", "ols": "PerTaskOLS",
            "pooled_ols": "PooledOLS", "lasso": "PerTaskLasso", "rm": "RobustMultitask",
            "ml": "MedianLasso", "sparse_mtl": "SparseMTL", "armul": "ARMUL",
            "itl": "IndependentTasks", "pooling": "DataPooling", "clustered_mtl": "ClusteredMTL",
            "lowrank_mtl": "LowRankMTL"}


__getattr__, __dir__ = lazy_names(__name__, _HOME)


class _Registry(Mapping):
    """Instance-file method name -> estimator class, the class imported when looked up."""

    def __getitem__(self, method):
        return __getattr__(_METHODS[method])

    def __iter__(self):
        return iter(_METHODS)

    def __len__(self):
        return len(_METHODS)

    def __repr__(self):
        return f"ESTIMATORS({', '.join(_METHODS)})"


ESTIMATORS = _Registry()

__all__ = ["ESTIMATORS", *sorted(_HOME)]
