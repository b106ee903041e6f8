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
per-row ``task`` label). Both round-trip exactly.
"""

from __future__ import annotations

import csv
import math
import numbers
import operator
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.identifiability import constant_columns

__all__ = ["MultiTaskData", "Scaler"]


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
    count = int(bad.sum())
    if count:
        first_row = int(np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))[0])
        raise InvalidDataError(
            f"task '{task}': {what} has {count} non-finite value(s) (NaN or inf), the first "
            f"in row {first_row}; remove or impute them before building MultiTaskData."
        )


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
        values, or wrong/duplicate names. The message names the task.
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
        return MultiTaskData(
            [self._Xs[k] for k in ks],
            [self._ys[k] for k in ks],
            [self._task_names[k] for k in ks],
            self._feature_names,
        )

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
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.reader(fh)
                header = next(reader, None)
                if header is None:
                    raise InvalidDataError(f"{path}: the file is empty; expected a header row.")
                columns = _csv_columns(path, header, task, response, features)
                labels, rows = [], []
                for row in reader:
                    if not row:
                        continue
                    if len(row) != len(header):
                        raise InvalidDataError(
                            f"{path}: line {reader.line_num} has {len(row)} fields but the "
                            f"header has {len(header)}; every row needs one value per column."
                        )
                    labels.append(row[columns[0]])
                    rows.append([_csv_float(path, reader.line_num, header[i], row[i])
                                 for i in columns[1:]])
        except OSError as exc:
            raise InvalidDataError(f"{path}: cannot read the CSV file ({exc.strerror}).") from None
        except UnicodeDecodeError as exc:
            raise InvalidDataError(f"{path}: the CSV file is not UTF-8 text ({exc}).") from None
        if not rows:
            raise InvalidDataError(f"{path}: the file has a header but no data rows.")
        values = np.array(rows, dtype=np.float64)
        return _from_long(path, values[:, 1:], values[:, 0], labels,
                          [header[i] for i in columns[2:]], task_names=None)

    def to_csv(self, path, *, task="task", response="y") -> None:
        """Write the long CSV format read by :meth:`from_csv` (exact round trip).

        Floats are written with ``repr``, the shortest string that reads back
        to the same float64.
        """
        clash = {task, response} & set(self._feature_names)
        if task == response or clash:
            raise InvalidParameterError(
                f"the task column '{task}', the response column '{response}' and the feature "
                "names must all differ; pass other task=/response= column names."
            )
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow([task, response, *self._feature_names])
            for name, X, y in zip(self._task_names, self._Xs, self._ys):
                for xi, yi in zip(X.tolist(), y.tolist()):
                    writer.writerow([name, repr(yi), *map(repr, xi)])

    @classmethod
    def from_npz(cls, path, *, X="X", y="y", task="task") -> MultiTaskData:
        """Read an ``.npz`` file with a stacked layout.

        The file holds ``X`` (n x p), ``y`` (n,) and ``task`` (n,) labels
        (converted to str), and optionally ``feature_names`` (p,) and
        ``task_names`` (K,), which fixes the task order (otherwise: order of
        first appearance). Arguments give the keys of the first three arrays.
        """
        arrays = _read_npz(path)
        missing = [key for key in (X, y, task) if key not in arrays]
        if missing:
            raise InvalidDataError(
                f"{path}: missing array(s) {missing}; the file holds {sorted(arrays)}. "
                "Pass X=, y=, task= to name the arrays to use."
            )
        X_all, y_all, labels = arrays[X], arrays[y], arrays[task]
        if X_all.ndim != 2 or y_all.ndim != 1 or labels.ndim != 1:
            raise InvalidDataError(
                f"{path}: expected '{X}' 2-D (n x p), '{y}' and '{task}' 1-D (n,); got shapes "
                f"{X_all.shape}, {y_all.shape}, {labels.shape}."
            )
        if not len(X_all) == len(y_all) == len(labels):
            raise InvalidDataError(
                f"{path}: '{X}', '{y}' and '{task}' must have the same number of rows; got "
                f"{len(X_all)}, {len(y_all)}, {len(labels)}."
            )
        task_names = arrays.get("task_names")
        feature_names = arrays.get("feature_names")
        return _from_long(
            path, X_all, y_all, [str(v) for v in labels.tolist()],
            None if feature_names is None else feature_names.tolist(),
            task_names=None if task_names is None else [str(v) for v in task_names.tolist()],
        )

    def to_npz(self, path) -> None:
        """Write the stacked layout read by :meth:`from_npz` (exact round trip).

        Writes exactly to ``path`` (numpy would otherwise append ``.npz``).
        """
        X_all, y_all, task_index = self.stacked()
        names = np.array(self._task_names, dtype=str)
        with open(path, "wb") as fh:
            np.savez(fh, X=X_all, y=y_all, task=names[task_index], task_names=names,
                     feature_names=np.array(self._feature_names, dtype=str))

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
        if how not in ("task", "pooled"):
            raise InvalidParameterError(f"how must be 'task' or 'pooled'; got {how!r}.")
        for flag, value in (("center", center), ("scale", scale)):
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidParameterError(f"{flag} must be True or False; got {value!r}.")
        if how == "task":
            groups = list(zip(self._Xs, self._ys))
        else:
            X_all, y_all, _ = self.stacked()
            groups = [(X_all, y_all)]
        x_mean, x_scale, y_mean = [], [], []
        for X, y in groups:
            mean, std = X.mean(axis=0), X.std(axis=0)
            std[constant_columns(X)] = 1.0     # left unscaled, as StandardScaler does
            x_mean.append(mean if center else np.zeros_like(mean))
            x_scale.append(std if scale else np.ones_like(std))
            y_mean.append(y.mean() if center else 0.0)
        repeat = 1 if how == "task" else self.n_tasks
        scaler = Scaler(
            how=how,
            task_names=tuple(self._task_names),
            feature_names=tuple(self._feature_names),
            x_mean=np.repeat(np.array(x_mean), repeat, axis=0),
            x_scale=np.repeat(np.array(x_scale), repeat, axis=0),
            y_mean=np.repeat(np.array(y_mean), repeat),
        )
        return scaler.transform(self), scaler

    # ----------------------------------------------------------------- splits
    def _take(self, rows: Sequence[np.ndarray]) -> MultiTaskData:
        """Return a new data set keeping, for each task k, the rows ``rows[k]``."""
        return MultiTaskData(
            [X[r] for X, r in zip(self._Xs, rows)],
            [y[r] for y, r in zip(self._ys, rows)],
            self._task_names,
            self._feature_names,
        )

    def _split(self, test_rows: Sequence[np.ndarray]) -> tuple[MultiTaskData, MultiTaskData]:
        """Return ``(train, test)`` where test keeps ``test_rows[k]`` of task k, train the rest."""
        train_rows = [np.setdiff1d(np.arange(n), r) for n, r in zip(self.n_samples, test_rows)]
        return self._take(train_rows), self._take(test_rows)

    def _require_rows(self, minimum: int, why: str, hint: str = "") -> None:
        """Raise if some task has fewer than ``minimum`` rows; ``hint`` extends the way out."""
        small = [f"'{t}' ({n} rows)" for t, n in zip(self._task_names, self.n_samples)
                 if n < minimum]
        if small:
            raise InvalidDataError(
                f"{why} needs at least {minimum} rows in every task; got task(s) "
                f"{', '.join(small)}. Drop those tasks with subset_tasks{hint}."
            )

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
        if (isinstance(test_size, bool) or not isinstance(test_size, numbers.Real)
                or not 0.0 < test_size < 1.0):
            raise InvalidParameterError(f"test_size must be a float in (0, 1); got {test_size!r}.")
        self._require_rows(2, "train_test_split")
        rng = np.random.default_rng(seed)
        test_rows = []
        for n in self.n_samples:
            n_test = min(max(math.ceil(test_size * n), 1), n - 1)
            test_rows.append(np.sort(rng.permutation(n)[:n_test]))
        return self._split(test_rows)

    def kfold_indices(self, n_splits=5, seed=None) -> list[list[np.ndarray]]:
        """Test-row indices of a K-fold split stratified by task.

        Each task's rows are shuffled and cut into ``n_splits`` folds whose
        sizes differ by at most one.

        Returns
        -------
        folds : list (length n_splits) of list (length K) of int arrays
            ``folds[f][k]`` are the sorted test rows of task k in fold f.
        """
        if (isinstance(n_splits, bool) or not isinstance(n_splits, numbers.Integral)
                or n_splits < 2):
            raise InvalidParameterError(f"n_splits must be an int >= 2; got {n_splits!r}.")
        self._require_rows(int(n_splits), f"kfold with n_splits={n_splits}", " or lower n_splits")
        rng = np.random.default_rng(seed)
        per_task = [np.array_split(rng.permutation(n), n_splits) for n in self.n_samples]
        return [[np.sort(folds[f]) for folds in per_task] for f in range(n_splits)]

    def kfold(self, n_splits=5, seed=None) -> Iterator[tuple[MultiTaskData, MultiTaskData]]:
        """Yield ``(train, test)`` pairs, one per fold of :meth:`kfold_indices`.

        Arguments are checked when called, not when iteration starts.
        """
        folds = self.kfold_indices(n_splits, seed)
        return (self._split(test_rows) for test_rows in folds)


def _csv_columns(path, header, task, response, features) -> list[int]:
    """Validate the column choice; return header indices: task, response, features."""
    seen = set()
    for col in header:
        if col in seen:
            raise InvalidDataError(
                f"{path}: line 1: column '{col}' appears twice in the header; rename one."
            )
        seen.add(col)
    if task == response:
        raise InvalidDataError(
            f"{path}: task and response must be different columns; both are '{task}'."
        )
    if features is None:
        features = [c for c in header if c not in (task, response)]
    elif isinstance(features, str):
        features = [features]
    else:
        features = list(features)
    for col in features:
        if col in (task, response):
            role = "task" if col == task else "response"
            raise InvalidDataError(
                f"{path}: column '{col}' is the {role} column and cannot also be a feature; "
                "remove it from features."
            )
        if features.count(col) > 1:
            raise InvalidDataError(
                f"{path}: column '{col}' is listed more than once in features; list it once."
            )
    if not features:
        raise InvalidDataError(
            f"{path}: no feature columns; the header has only {header}. "
            "Add feature columns or pass features=."
        )
    for col, role in [(task, "task column"), (response, "response column")] + [
            (c, "feature") for c in features]:
        if col not in header:
            raise InvalidDataError(
                f"{path}: no column '{col}' (the {role}); available columns: {header}."
            )
    return [header.index(c) for c in (task, response, *features)]


def _csv_float(path, line: int, column: str, text: str) -> float:
    """Parse one CSV cell as a finite float, naming the file, line and column on failure."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidDataError(
            f"{path}: line {line}, column '{column}': {text!r} is not a number; "
            "feature and response columns must be numeric."
        ) from None
    if not math.isfinite(value):
        raise InvalidDataError(
            f"{path}: line {line}, column '{column}': {text!r} is not finite; "
            "remove or impute missing values first."
        )
    return value


def _read_npz(path) -> dict[str, np.ndarray]:
    """Load every array of an npz archive (no pickles), with readable errors."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InvalidDataError(f"{path}: cannot read the npz file ({exc.strerror}).") from None
    with fh:
        if not zipfile.is_zipfile(fh):
            raise InvalidDataError(
                f"{path}: not an npz (zip) archive; write one with MultiTaskData.to_npz "
                "or numpy.savez."
            )
        fh.seek(0)
        try:
            with np.load(fh, allow_pickle=False) as npz:
                return {key: npz[key] for key in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise InvalidDataError(f"{path}: cannot read the npz arrays ({exc}).") from None


def _from_long(path, X_all, y_all, labels, feature_names, task_names) -> MultiTaskData:
    """Group stacked rows by task label; constructor errors get the file name prefixed."""
    labels = np.asarray(labels, dtype=str)
    order = list(dict.fromkeys(labels.tolist()))
    if task_names is not None:
        unknown = [t for t in order if t not in task_names]
        if unknown:
            raise InvalidDataError(
                f"{path}: task label(s) {unknown} do not appear in 'task_names' {task_names}."
            )
        order = task_names
    rows = [np.flatnonzero(labels == t) for t in order]
    try:
        return MultiTaskData([X_all[r] for r in rows], [y_all[r] for r in rows],
                             order, feature_names)
    except InvalidDataError as exc:
        raise InvalidDataError(f"{path}: {exc}") from None


@dataclass(frozen=True, eq=False)
class Scaler:
    """The affine map applied by :meth:`MultiTaskData.standardize`, and its inverse.

    For task k: ``X' = (X - x_mean[k]) / x_scale[k]`` and ``y' = y - y_mean[k]``.
    With ``how="pooled"`` all rows of the arrays are equal. Tasks are matched
    by name, so the scaler fitted on a training split also applies to its
    test split.

    Attributes
    ----------
    how : {"task", "pooled"}
    task_names, feature_names : tuple of str
        The tasks (row order of the arrays) and features it was fitted on.
    x_mean : ndarray of shape (K, p)
        Zero where ``center=False``.
    x_scale : ndarray of shape (K, p)
        Population standard deviations; one where ``scale=False``.
    y_mean : ndarray of shape (K,)
        Zero where ``center=False``.
    """

    how: str
    task_names: tuple[str, ...]
    feature_names: tuple[str, ...]
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray

    def __post_init__(self):
        for field in ("x_mean", "x_scale", "y_mean"):
            object.__setattr__(self, field, _frozen(np.array(getattr(self, field), dtype=float)))

    def _rows(self, data: MultiTaskData) -> list[int]:
        """Row of the scaler's arrays for each task of ``data``, checking names."""
        if data.feature_names != list(self.feature_names):
            raise InvalidDataError(
                f"the data has features {data.feature_names} but the scaler was fitted on "
                f"{list(self.feature_names)}; transform data with the same features."
            )
        unknown = [t for t in data.task_names if t not in self.task_names]
        if unknown:
            raise InvalidDataError(
                f"task(s) {unknown} were not seen when the scaler was fitted; "
                f"known tasks: {list(self.task_names)}."
            )
        return [self.task_names.index(t) for t in data.task_names]

    def _apply(self, data: MultiTaskData, inverse: bool) -> MultiTaskData:
        """Apply the map (or its inverse) task by task."""
        Xs, ys = [], []
        for k, X, y in zip(self._rows(data), data.Xs, data.ys):
            if inverse:
                Xs.append(X * self.x_scale[k] + self.x_mean[k])
                ys.append(y + self.y_mean[k])
            else:
                Xs.append((X - self.x_mean[k]) / self.x_scale[k])
                ys.append(y - self.y_mean[k])
        return MultiTaskData(Xs, ys, data.task_names, data.feature_names)

    def transform(self, data: MultiTaskData) -> MultiTaskData:
        """Standardize ``data`` (whose tasks must be among the fitted ones)."""
        return self._apply(data, inverse=False)

    def inverse_transform(self, data: MultiTaskData) -> MultiTaskData:
        """Map standardized data back to the original scale."""
        return self._apply(data, inverse=True)

    def coef_to_original(self, coef_std, intercept_std) -> tuple[np.ndarray, np.ndarray]:
        """Map coefficients fitted on standardized data back to the original scale.

        A fit ``y' = b' + X' c'`` on the standardized scale equals
        ``y = b + X c`` with::

            c_kj = c'_kj / x_scale_kj
            b_k  = y_mean_k + b'_k - sum_j c_kj * x_mean_kj

        Parameters
        ----------
        coef_std : array-like of shape (K, p)
        intercept_std : array-like of shape (K,)
            Rows in the scaler's task order.

        Returns
        -------
        coef : ndarray of shape (K, p)
        intercept : ndarray of shape (K,)
        """
        coef_std = np.asarray(coef_std, dtype=float)
        intercept_std = np.asarray(intercept_std, dtype=float)
        if coef_std.shape != self.x_mean.shape or intercept_std.shape != self.y_mean.shape:
            raise InvalidParameterError(
                f"expected coef_std of shape {self.x_mean.shape} and intercept_std of shape "
                f"{self.y_mean.shape} (tasks x features); got {coef_std.shape} and "
                f"{intercept_std.shape}."
            )
        coef = coef_std / self.x_scale
        return coef, self.y_mean + intercept_std - np.sum(coef * self.x_mean, axis=1)
