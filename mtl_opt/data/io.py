"""Reading and writing MultiTaskData files: the long CSV and stacked NPZ formats.

Both formats hold one row per observation (CSV: a task column, a response column and feature
columns; NPZ: a stacked ``X``, ``y`` and a per-row ``task`` label) and round-trip exactly.
The ``MultiTaskData`` methods ``from_csv``, ``to_csv``, ``from_npz`` and ``to_npz`` call these.
"""

from __future__ import annotations

import csv
import math
import zipfile
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    from .core import MultiTaskData


def read_csv(cls, path, *, task="task", response="y", features=None) -> MultiTaskData:
    """``MultiTaskData.from_csv``: read the long CSV format into ``cls``."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: drops a BOM (Excel)
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
    return _from_long(cls, path, values[:, 1:], values[:, 0], labels,
                      [header[i] for i in columns[2:]], task_names=None)


def write_csv(data: MultiTaskData, path, *, task="task", response="y") -> None:
    """``MultiTaskData.to_csv``: write the long CSV format read by ``read_csv``."""
    clash = {task, response} & set(data.feature_names)
    if task == response or clash:
        raise InvalidParameterError(
            f"the task column '{task}', the response column '{response}' and the feature "
            "names must all differ; pass other task=/response= column names."
        )
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([task, response, *data.feature_names])
        for name, X, y in zip(data.task_names, data.Xs, data.ys):
            for xi, yi in zip(X.tolist(), y.tolist()):
                writer.writerow([name, repr(yi), *map(repr, xi)])


def read_npz(cls, path, *, X="X", y="y", task="task") -> MultiTaskData:
    """``MultiTaskData.from_npz``: read the stacked NPZ layout into ``cls``."""
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
        cls, path, X_all, y_all, [str(v) for v in labels.tolist()],
        None if feature_names is None else feature_names.tolist(),
        task_names=None if task_names is None else [str(v) for v in task_names.tolist()],
    )


def write_npz(data: MultiTaskData, path) -> None:
    """``MultiTaskData.to_npz``: write the stacked NPZ layout read by ``read_npz``."""
    X_all, y_all, task_index = data.stacked()
    names = np.array(data.task_names, dtype=str)
    with open(path, "wb") as fh:
        np.savez(fh, X=X_all, y=y_all, task=names[task_index], task_names=names,
                 feature_names=np.array(data.feature_names, dtype=str))


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
    features = feature_columns(header, task, response, features, where=f"{path}: ")
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
    for col, role in [(task, "task column"), (response, "response column")] + [
            (c, "feature") for c in features]:
        if col not in header:
            raise InvalidDataError(
                f"{path}: no column '{col}' (the {role}); available columns: {header}."
            )
    return [header.index(c) for c in (task, response, *features)]


def feature_columns(columns, task, response, features, *, where: str) -> list:
    """The feature columns ``features`` asks for (None: every column but task and response; a
    name: that column), before they are checked against ``columns``.  An empty list, or no other
    column, is an error: data without features has nothing to fit.  ``where`` prefixes errors."""
    others = [c for c in columns if c not in (task, response)]
    if features is None:
        if not others:
            raise InvalidDataError(
                f"{where}no column is left for features: the columns are {list(columns)}, with "
                f"task = {task!r} and response = {response!r}. Add feature columns.")
        return others
    if isinstance(features, str):
        return [features]
    if isinstance(features, (dict, bytes)) or not hasattr(features, "__iter__"):
        raise InvalidDataError(
            f"{where}features must be a list of column names; got {features!r}.")
    features = list(features)
    if not features:
        raise InvalidDataError(
            f"{where}features is an empty list, which selects no column, and a fit needs at "
            f"least one feature: list the feature columns"
            + (f" (the columns besides task and response are {others})" if others else "")
            + ", or leave features out to use every column but task and response.")
    return features


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


def task_rows(labels) -> tuple[list[str], list[np.ndarray]]:
    """The task names of per-row ``labels`` (as str, in order of first appearance) and the row
    indices of each: the grouping of every long format (CSV, NPZ, DataFrame, ``fit(X, y, task=)``)."""
    labels = np.asarray(labels, dtype=str)
    order = list(dict.fromkeys(labels.tolist()))
    return order, [np.flatnonzero(labels == t) for t in order]


def _from_long(cls, path, X_all, y_all, labels, feature_names, task_names) -> MultiTaskData:
    """Group stacked rows by task label; constructor errors get ``path`` (None: none) prefixed."""
    order, rows = task_rows(labels)
    if task_names is not None:
        unknown = [t for t in order if t not in task_names]
        if unknown:
            raise InvalidDataError(
                f"{path}: task label(s) {unknown} do not appear in 'task_names' {task_names}."
            )
        labels = np.asarray(labels, dtype=str)
        order, rows = task_names, [np.flatnonzero(labels == t) for t in task_names]
    try:
        return cls([X_all[r] for r in rows], [y_all[r] for r in rows], order, feature_names)
    except InvalidDataError as exc:
        raise InvalidDataError(f"{path}: {exc}" if path is not None else str(exc)) from None


def from_frame(cls, df, *, task, response, features) -> MultiTaskData:
    """``MultiTaskData.from_frame``: a long pandas DataFrame (one row per observation)."""
    if not hasattr(df, "columns") or not hasattr(df, "iloc"):
        raise InvalidDataError(f"from_frame needs a pandas DataFrame; got {type(df).__name__}.")
    columns = list(df.columns)
    if task == response:
        raise InvalidDataError(f"task and response must be different columns; both are {task!r}.")
    features = feature_columns(columns, task, response, features, where="the DataFrame: ")
    missing = [c for c in (task, response, *features) if c not in columns]
    if missing:
        raise InvalidDataError(
            f"column(s) {missing} are not in the DataFrame; its columns are {columns}. "
            f"Pass task=, response= and features= naming its columns.")
    clash = {task, response} & set(features)
    if clash:
        raise InvalidDataError(f"column(s) {sorted(map(str, clash))} cannot be both a feature "
                               f"and the task or response column.")
    not_real = [c for c in (response, *features) if df[c].dtype.kind not in "biuf"]
    if not_real:
        raise InvalidDataError(
            f"column(s) {[str(c) for c in not_real]} are not numeric (dtypes "
            f"{[str(df[c].dtype) for c in not_real]}); encode them as numbers first "
            f"(e.g. pandas.get_dummies for categories) or leave them out with features=.")
    labels = [str(v) for v in df[task].tolist()]
    as_float = {"dtype": np.float64, "na_value": np.nan}   # a missing value: refused as NaN
    return _from_long(cls, None, df[list(features)].to_numpy(**as_float),
                      df[response].to_numpy(**as_float), labels,
                      [str(c) for c in features], task_names=None)
