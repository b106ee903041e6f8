"""The MultiTaskData container: per-task designs and responses with names, and their checks.

File formats, standardization and splits live in ``io``, ``scaling`` and ``splits``; the
container's methods of the same names call them.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from ..identifiability import unidentified_mask
from . import io, scaling, splits
from .scaling import Scaler
from .weights import twin_rows


def _frozen(a: np.ndarray) -> np.ndarray:
    """Mark ``a`` read-only and return it."""
    a.flags.writeable = False
    return a


def _names(names, count: int, default_prefix: str, what: str, per: str) -> list[str]:
    """Validate a list of ``count`` unique names, or build the default ones."""
    if names is None:
        return [f"{default_prefix}{i}" for i in range(count)]
    if isinstance(names, (str, bytes)):
        raise InvalidDataError(
            f"{what} must be a list of {count} strings; got a single string {names!r}."
        )
    names = [str(n) for n in names]
    if len(names) != count:
        raise InvalidDataError(
            f"got {len(names)} {what} for {count} {per}s; pass exactly one name per {per}."
        )
    seen, dups = set(), []
    for n in names:
        if n in seen and n not in dups:
            dups.append(n)
        seen.add(n)
    if dups:
        raise InvalidDataError(f"duplicate {what}: {dups}; every name must be unique.")
    return names


def _as_task_list(seq, what: str, ndim: int) -> list:
    """Turn ``seq`` (one array-like per task) into a list, refusing a lone array."""
    if isinstance(seq, np.ndarray) and seq.ndim <= ndim:
        raise InvalidDataError(
            f"{what} must be a list with one array per task; got a single {seq.ndim}-D array "
            f"of shape {seq.shape}. For one task, wrap it in a list: MultiTaskData([X], [y])."
        )
    if isinstance(seq, (str, bytes)):
        raise InvalidDataError(f"{what} must be a list of per-task arrays; got a string.")
    try:
        return list(seq)
    except TypeError:
        raise InvalidDataError(
            f"{what} must be a list of per-task arrays; got {type(seq).__name__}."
        ) from None


#: What to do about an array of each dtype kind float64 must not silently coerce.
_NOT_REAL = {
    "c": "complex values would lose their imaginary part; pass the real part ({what}.real) "
         "if that is what you mean",
    "U": "strings are not numbers; parse them first (e.g. {what}.astype(float))",
    "S": "bytes are not numbers; parse them first (e.g. {what}.astype(float))",
    "O": "an object array may hold anything (None, strings, complex); convert it to a "
         "numeric array first (e.g. np.asarray({what}, dtype=float))",
}


def _to_float_array(value, task: str, what: str) -> np.ndarray:
    """Copy a real-valued array-like (bool, int or float) to a new float64 array.

    Complex, string, object and other dtypes are refused rather than coerced:
    numpy would drop an imaginary part with only a warning and parse "1.5".
    """
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InvalidDataError(
            f"task '{task}': {what} could not be converted to a float64 array ({exc}); "
            "pass numeric arrays of a regular shape."
        ) from None
    if array.dtype.kind not in "biuf":
        fix = _NOT_REAL.get(array.dtype.kind, "convert it to a float array first").format(what=what)
        raise InvalidDataError(
            f"task '{task}': {what} has dtype {array.dtype}; expected real numbers "
            f"(bool, int or float): {fix}."
        )
    return np.array(array, dtype=np.float64, copy=True)


def _check_finite(a: np.ndarray, task: str, what: str) -> None:
    """Raise if ``a`` holds NaN or inf, giving the count and the first row."""
    bad = ~np.isfinite(a)
    if bad.any():
        count = int(bad.sum())
        first_row = int(np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))[0])
        raise InvalidDataError(
            f"task '{task}': {what} has {count} non-finite value(s) (NaN or inf), the first "
            f"in row {first_row}; remove or impute them before building MultiTaskData."
        )


#: The magnitudes a fit's float64 arithmetic carries: squares and sums of squares of larger values
#: overflow (y = 1e200 gave an objective of inf), and in a column whose every value is smaller the
#: squares underflow to 0, so its spread reads as 0 and it looks constant (x 1e-300 did).
LARGEST_VALUE, SMALLEST_SCALE = 1e100, 1e-100


def _check_scale(a: np.ndarray, task: str, columns: list[str]) -> None:
    """Raise if a column of ``a`` (2-D, named ``columns``) holds a value beyond ``LARGEST_VALUE``
    or is not all zero but has no value of ``SMALLEST_SCALE`` or more in magnitude."""
    for column, top in zip(columns, np.abs(a).max(axis=0)):
        if top > LARGEST_VALUE or 0 < top < SMALLEST_SCALE:
            side = (f"holds a value of magnitude {top:.3g}, beyond {LARGEST_VALUE:g}: sums of its "
                    f"squares overflow float64" if top > LARGEST_VALUE else
                    f"has no value above {top:.3g} in magnitude, below {SMALLEST_SCALE:g}: its "
                    f"squares underflow to 0, so it would look constant")
            raise InvalidDataError(f"task '{task}': {column} {side}. Rescale it (change its "
                                   f"units) first.")


class MultiTaskData:
    """K regression tasks sharing p features: per-task ``(X_k, y_k)`` with names.

    Parameters
    ----------
    Xs : list of array-like, each of shape (n_k, p)
        Per-task designs. Copied to float64; the caller's arrays are untouched.
    ys : list of array-like, each of shape (n_k,)
        Per-task responses, copied to float64.
    task_names : list of str, default=None
        One unique name per task; default ``task0..task{K-1}``.
    feature_names : list of str, default=None
        One unique name per feature column; default ``x0..x{p-1}``.

    Raises
    ------
    InvalidDataError
        On zero tasks, mismatched lengths or shapes, empty tasks, non-finite
        values or values at a scale float64 sums of squares cannot carry
        (``LARGEST_VALUE``, ``SMALLEST_SCALE``), or wrong/duplicate names. The
        message names the task.

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt import MultiTaskData
    >>> rng = np.random.default_rng(0)
    >>> Xs = [rng.normal(size=(n, 3)) for n in (20, 30)]          # tasks may differ in size
    >>> data = MultiTaskData(Xs, [X @ [1.0, 0.0, -1.0] for X in Xs], task_names=["a", "b"])
    >>> data.n_tasks, data.n_features, data.n_samples.tolist()
    (2, 3, [20, 30])
    >>> train, test = data.train_test_split(0.5, seed=0)
    >>> train.n_samples.tolist()
    [10, 15]
    """

    def __init__(self, Xs, ys, task_names=None, feature_names=None):
        Xs = _as_task_list(Xs, "Xs", 2)
        ys = _as_task_list(ys, "ys", 1)
        if not Xs:
            raise InvalidDataError("no tasks given: Xs and ys are empty; pass at least one task.")
        if len(Xs) != len(ys):
            raise InvalidDataError(
                f"got {len(Xs)} designs (Xs) but {len(ys)} responses (ys); "
                "pass one X and one y per task."
            )
        names = _names(task_names, len(Xs), "task", "task names", "task")
        self._Xs, self._ys = [], []
        for name, X, y in zip(names, Xs, ys):
            X = _to_float_array(X, name, "X")
            y = _to_float_array(y, name, "y")
            if X.ndim != 2:
                hint = " Use X.reshape(-1, 1) if it holds a single feature." if X.ndim == 1 else ""
                raise InvalidDataError(
                    f"task '{name}': X must be a 2-D array (n_k x p); got a {X.ndim}-D array "
                    f"of shape {X.shape}.{hint}"
                )
            if y.ndim != 1:
                raise InvalidDataError(
                    f"task '{name}': y must be a 1-D array (n_k,); got a {y.ndim}-D array of "
                    f"shape {y.shape}. Use y.ravel() for a single-column response."
                )
            if X.shape[0] == 0:
                raise InvalidDataError(
                    f"task '{name}' has no rows; every task needs at least one observation "
                    "(drop the task instead)."
                )
            if len(y) != X.shape[0]:
                raise InvalidDataError(
                    f"task '{name}': y has {len(y)} entries but X has {X.shape[0]} rows; "
                    "X and y must have one row per observation."
                )
            if self._Xs and X.shape[1] != self._Xs[0].shape[1]:
                raise InvalidDataError(
                    f"task '{name}': X has {X.shape[1]} feature columns but task '{names[0]}' "
                    f"has {self._Xs[0].shape[1]}; every task must have the same features."
                )
            _check_finite(X, name, "X")
            _check_finite(y, name, "y")
            self._Xs.append(_frozen(X))
            self._ys.append(_frozen(y))
        if self._Xs[0].shape[1] == 0:
            raise InvalidDataError("X has 0 feature columns; at least one feature is needed.")
        self._task_names = names
        self._feature_names = _names(
            feature_names, self._Xs[0].shape[1], "x", "feature names", "feature column"
        )
        for name, X, y in zip(names, self._Xs, self._ys):
            _check_scale(X, name, [f"feature '{f}'" for f in self._feature_names])
            _check_scale(y[:, None], name, ["y"])
        self._unidentified: dict = {}   # (fit_intercept, collinear) -> mask: see unidentified
        self._counts = None   # the twin of weighted data: the tasks' total weights (``counts``)

    @classmethod
    def _derived(cls, Xs, ys, task_names, feature_names) -> MultiTaskData:
        """A data set computed from a validated one by mtl_opt itself (some of its tasks, or an
        affine map of each task: ``Scaler``), so a fit validates its data once.

        The parent passed ``__init__``'s checks, and such maps keep shapes, names and types;
        only finiteness is checked again (a map can overflow).  The magnitude checks
        (``LARGEST_VALUE``, ``SMALLEST_SCALE``) are for data as given: centring a valid y of
        [1e-100, 0] gives +-5e-101, which is no reason to refuse its standardized copy.
        ``Xs`` and ``ys`` must be float64 arrays no one else writes to; they are made read-only.
        """
        for name, X, y in zip(task_names, Xs, ys):
            _check_finite(X, name, "X")
            _check_finite(y, name, "y")
        data = cls.__new__(cls)
        data._Xs = [_frozen(X) for X in Xs]
        data._ys = [_frozen(y) for y in ys]
        data._task_names, data._feature_names = list(task_names), list(feature_names)
        data._unidentified = {}
        data._counts = None
        return data

    # ----------------------------------------------------------------- access
    @property
    def n_tasks(self) -> int:
        """Number of tasks K."""
        return len(self._Xs)

    @property
    def n_features(self) -> int:
        """Number of features p."""
        return self._Xs[0].shape[1]

    @property
    def n_samples(self) -> np.ndarray:
        """Per-task sample sizes n_k, shape (K,)."""
        return np.array([len(y) for y in self._ys], dtype=np.int64)

    @property
    def counts(self) -> np.ndarray:
        """(K,) how many observations each task stands for: ``n_samples``, or for the twin of
        weighted data (``mtl_opt.data.weights``) the tasks' total weights, which objectives that weigh
        tasks by their size use in place of the row counts."""
        return self.n_samples if self._counts is None else self._counts

    @property
    def weighted(self) -> bool:
        """Whether these are the unweighted twin of weighted data (``mtl_opt.data.weights``)."""
        return self._counts is not None

    @property
    def n_total(self) -> int:
        """Total number of observations, sum of n_k."""
        return sum(len(y) for y in self._ys)

    @property
    def task_names(self) -> list[str]:
        """Task names, in task order (a copy)."""
        return list(self._task_names)

    @property
    def feature_names(self) -> list[str]:
        """Feature names, in column order (a copy)."""
        return list(self._feature_names)

    @property
    def Xs(self) -> list[np.ndarray]:
        """Per-task designs as read-only views."""
        return [X.view() for X in self._Xs]

    @property
    def ys(self) -> list[np.ndarray]:
        """Per-task responses as read-only views."""
        return [y.view() for y in self._ys]

    def __len__(self) -> int:
        return self.n_tasks

    def __repr__(self) -> str:
        shown = self._task_names[:5] + (["..."] if self.n_tasks > 5 else [])
        return (
            f"MultiTaskData(n_tasks={self.n_tasks}, n_features={self.n_features}, "
            f"n_total={self.n_total}, tasks={shown})"
        )

    def _task_index(self, key) -> int:
        """Resolve a task name or (possibly negative) index to an index in range(K)."""
        if isinstance(key, str):
            if key not in self._task_names:
                raise InvalidParameterError(
                    f"no task named '{key}'; available tasks: {self._task_names}."
                )
            return self._task_names.index(key)
        try:
            if isinstance(key, bool):
                raise TypeError
            k = operator.index(key)
        except TypeError:
            raise InvalidParameterError(
                f"a task is selected by name (str) or index (int); got {key!r}."
            ) from None
        if not -self.n_tasks <= k < self.n_tasks:
            raise InvalidParameterError(
                f"task index {k} is out of range for {self.n_tasks} tasks."
            )
        return k % self.n_tasks

    def task(self, key) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(X_k, y_k)`` (read-only views) for a task name or index."""
        k = self._task_index(key)
        return self._Xs[k].view(), self._ys[k].view()

    def subset_tasks(self, names_or_indices) -> MultiTaskData:
        """Return a new data set with the selected tasks, in the order given.

        Parameters
        ----------
        names_or_indices : str, int, or list of str/int
            Task names or indices; each task at most once.
        """
        if isinstance(names_or_indices, (str, numbers.Integral)):
            names_or_indices = [names_or_indices]
        ks = [self._task_index(key) for key in names_or_indices]
        repeated = sorted({self._task_names[k] for k in ks if ks.count(k) > 1})
        if repeated:
            raise InvalidParameterError(f"subset_tasks got task(s) {repeated} more than once.")
        subset = MultiTaskData._derived(
            [self._Xs[k] for k in ks],
            [self._ys[k] for k in ks],
            [self._task_names[k] for k in ks],
            self._feature_names,
        )
        subset._counts = None if self._counts is None else self._counts[ks]
        return subset

    def stacked(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pool all tasks into one design, for pooled methods.

        Returns
        -------
        X_all : ndarray of shape (n_total, p)
        y_all : ndarray of shape (n_total,)
        task_index : ndarray of int64, shape (n_total,)
            Index k of the task each row came from; rows stay in task order.
        """
        return (
            np.concatenate(self._Xs, axis=0),
            np.concatenate(self._ys),
            np.repeat(np.arange(self.n_tasks, dtype=np.int64), self.n_samples),
        )

    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """(X, y) of all tasks' rows as one sample, for pooled fits and pooled statistics: the
        rows stacked, or for the twin of weighted data (``mtl_opt.data.weights``) rows whose mean and
        second moments are the pooled weighted ones (each task's rows standing for its counts)."""
        X_all, y_all, _ = self.stacked()
        if not self.weighted:
            return X_all, y_all
        rows = twin_rows(np.column_stack([X_all, y_all]),
                         np.repeat(self.counts / self.n_samples, self.n_samples))
        return rows[:, :-1], rows[:, -1]

    def unidentified(self, fit_intercept: bool = True, *, collinear: bool) -> np.ndarray:
        """(K, p) read-only bool: the (task, feature) pairs the tasks' own data cannot identify
        (``mtl_opt.identifiability.unidentified_mask``; ``collinear`` adds the rank test).

        Computed once per data set and kept: the data are immutable (private, read-only
        arrays), and every fit on them asks again.
        """
        key = (bool(fit_intercept), bool(collinear))
        if key not in self._unidentified:
            self._unidentified[key] = _frozen(
                unidentified_mask(self._Xs, key[0], collinear=key[1]))
        return self._unidentified[key]


    # --------------------------------------------------------------------- io
    @classmethod
    def from_csv(cls, path, *, task="task", response="y", features=None) -> MultiTaskData:
        """Read a long-format CSV file: one row per observation.

        Parameters
        ----------
        path : str or Path
        task : str, default="task"
            Column holding the task label (read as a string). Tasks are ordered
            by first appearance in the file.
        response : str, default="y"
            Column holding the response.
        features : str or list of str, default=None
            Feature columns, in the order wanted; None means every other column,
            in file order.

        Raises
        ------
        InvalidDataError
            Naming the file, and the line and column where it applies.
        """
        return io.read_csv(cls, path, task=task, response=response, features=features)

    @classmethod
    def from_long(cls, X, y, task=None, *, feature_names=None) -> MultiTaskData:
        """Build from scikit-learn's long format: a design ``X`` (n, p) (array or DataFrame), ``y``
        (n,) and ``task``, one label per row (like ``groups``; None: all rows are one task).

        Task names are the labels as str, in order of first appearance, and a task's rows keep
        their order; feature names are ``feature_names``, else a DataFrame's column names.
        """
        if feature_names is None and hasattr(X, "columns"):
            feature_names = [str(c) for c in X.columns]
        X, y = np.asarray(X), np.asarray(y)
        labels = np.zeros(len(y)) if task is None else np.asarray(task)
        if labels.ndim != 1 or len(labels) != len(y) or X.ndim != 2 or len(X) != len(y):
            raise InvalidDataError(
                f"the long format needs X (n, p), y (n,) and task (n,), one label per row; got "
                f"shapes {X.shape}, {y.shape} and {labels.shape}.")
        names, rows = io.task_rows([str(v) for v in labels.tolist()])
        return cls([X[r] for r in rows], [y[r] for r in rows],
                   None if task is None else names,   # None: the one task's default name, task0
                   feature_names)

    @classmethod
    def from_frame(cls, df, *, task="task", response="y", features=None) -> MultiTaskData:
        """Build from a long pandas DataFrame: one row per observation.

        Parameters
        ----------
        df : pandas.DataFrame
        task : column name, default="task"
            The per-row task label; task names are its values as str, in order of first
            appearance, and a task's rows keep their order in ``df``.
        response : column name, default="y"
        features : list of column names, default=None
            Feature columns, in the order wanted; None means every other column, in frame order.
            Feature names are the column names (as str).
        """
        return io.from_frame(cls, df, task=task, response=response, features=features)

    def to_csv(self, path, *, task="task", response="y") -> None:
        """Write the long CSV format read by :meth:`from_csv` (exact round trip).

        Floats are written with ``repr``, the shortest string that reads back
        to the same float64.
        """
        io.write_csv(self, path, task=task, response=response)

    @classmethod
    def from_npz(cls, path, *, X="X", y="y", task="task") -> MultiTaskData:
        """Read an ``.npz`` file with a stacked layout.

        The file holds ``X`` (n x p), ``y`` (n,) and ``task`` (n,) labels
        (converted to str), and optionally ``feature_names`` (p,) and
        ``task_names`` (K,), which fixes the task order (otherwise: order of
        first appearance). Arguments give the keys of the first three arrays.
        """
        return io.read_npz(cls, path, X=X, y=y, task=task)

    def to_npz(self, path) -> None:
        """Write the stacked layout read by :meth:`from_npz` (exact round trip).

        Writes exactly to ``path`` (numpy would otherwise append ``.npz``).
        """
        io.write_npz(self, path)

    # ------------------------------------------------------- standardization
    def standardize(self, how="task", center=True, scale=True) -> tuple[MultiTaskData, Scaler]:
        """Center and scale features (and center y), returning the data and its inverse.

        Parameters
        ----------
        how : {"task", "pooled"}, default="task"
            "task" uses each task's own means and standard deviations (the
            default of the sparse objective); "pooled" uses statistics of all
            rows together, identical for every task.
        center : bool, default=True
            Subtract feature means and the per-task (or pooled) mean of y.
        scale : bool, default=True
            Divide features by their population standard deviation (ddof=0).
            y is never scaled.

        Returns
        -------
        data : MultiTaskData
        scaler : Scaler
            Undoes the transform and maps fitted coefficients back.

        Notes
        -----
        A feature constant in a task ("task") or overall ("pooled") is centred but left
        unscaled (scale 1), as scikit-learn's StandardScaler does: it becomes a zero column,
        whose coefficient no fit on it can determine (``mtl_opt.identifiability``).
        """
        return scaling.standardize(self, how, center, scale)

    # ----------------------------------------------------------------- splits
    def _take(self, rows: Sequence[np.ndarray]) -> MultiTaskData:
        """Return a new data set keeping, for each task k, the rows ``rows[k]``."""
        return splits.take(self, rows)

    def _split(self, test_rows: Sequence[np.ndarray]) -> tuple[MultiTaskData, MultiTaskData]:
        """Return ``(train, test)`` where test keeps ``test_rows[k]`` of task k, train the rest."""
        return splits.split(self, test_rows)

    def train_test_split(self, test_size=0.25, seed=None) -> tuple[MultiTaskData, MultiTaskData]:
        """Split every task separately into train and test rows (stratified by task).

        Task k gets ``ceil(test_size * n_k)`` test rows, clipped so that both
        sides keep at least one row. Rows keep their original order.

        Parameters
        ----------
        test_size : float in (0, 1), default=0.25
        seed : int, numpy.random.Generator or None
            Passed to ``numpy.random.default_rng``; same seed, same split.
        """
        return splits.train_test_split(self, test_size, seed)

    def kfold_indices(self, n_splits=5, seed=None) -> list[list[np.ndarray]]:
        """Test-row indices of a K-fold split stratified by task.

        Each task's rows are shuffled and cut into ``n_splits`` folds whose
        sizes differ by at most one.

        Returns
        -------
        folds : list (length n_splits) of list (length K) of int arrays
            ``folds[f][k]`` are the sorted test rows of task k in fold f.
        """
        return splits.kfold_indices(self, n_splits, seed)

    def kfold(self, n_splits=5, seed=None) -> Iterator[tuple[MultiTaskData, MultiTaskData]]:
        """Yield ``(train, test)`` pairs, one per fold of :meth:`kfold_indices`.

        Arguments are checked when called, not when iteration starts.
        """
        return splits.kfold(self, n_splits, seed)
