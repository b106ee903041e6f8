"""Multi-task data sets: K tasks, each with its own design and response.

Data model
----------
A :class:`MultiTaskData` holds K >= 1 tasks. Task k has a design matrix
``X_k`` of shape ``(n_k, p)`` and a response ``y_k`` of shape ``(n_k,)``, both
float64. Tasks may have different sample sizes ``n_k`` but share the same p
features, in the same order. Task names and feature names are kept (defaults
``task0..task{K-1}`` and ``x0..x{p-1}``). A shared-design ("multi-label") data
set is just K tasks with the same X.

The object is immutable: the constructor copies its inputs, and the arrays it
exposes are read-only views, so a fitted estimator can never be changed
behind its back. Every transformation (standardization, subsetting, splits)
returns a new object.

Standardization is reversible: :meth:`MultiTaskData.standardize` returns the
transformed data and a :class:`Scaler` that undoes it and maps coefficients
fitted on the standardized scale back to the original one, which is where
mtl_opt reports them.

Files come in two long formats, one row per observation: CSV (a task column, a
response column and feature columns) and NPZ (a stacked ``X``, ``y`` and a
per-row ``task`` label). Both round-trip exactly. In memory the same long layout comes as a
pandas DataFrame (``MultiTaskData.from_frame``) or as scikit-learn's ``X, y, task``
(``MultiTaskData.from_long``, what ``fit(X, y, task=...)`` uses).

Layout: ``core`` (the container and its input checks), ``io`` (CSV / NPZ), ``scaling``
(``standardize`` and ``Scaler``: the preprocessing path of every estimator), ``splits``
(train/test and K-fold, stratified by task) and ``weights`` (``sample_weight`` as the unweighted
twin with the weighted moments).
"""

from .core import MultiTaskData, _to_float_array
from .scaling import Scaler

#: ``_to_float_array`` stays importable from here: ``estimators.base`` checks arrays with it.
__all__ = ["MultiTaskData", "Scaler", "_to_float_array"]
