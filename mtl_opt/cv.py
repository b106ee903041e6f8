"""K-fold cross-validation over a hyperparameter grid, for any MTLEstimator.

Folds are stratified by task (every task contributes rows to every fold, see
:meth:`MultiTaskData.kfold_indices`). Within a fold the grid is fitted as one
path, in a fixed order, so estimators with ``supports_warm_start`` start each
fit from the previous point's result; folds are independent and run in
parallel through joblib, one fold's whole path per job: this process takes
folds from the front while the workers take them from the back
(``_run_folds``), so the workers' start is never waited for.

Path order
----------
A dict grid ``{name: values}`` is expanded to the full product, the first key
outermost (it changes slowest). Each name's values are sorted so that
neighbouring points are close: from large to small for names starting with
``"lambda"`` (a penalty path starts from the most regularized, sparsest
model), from small to large for everything else (e.g. support sizes ``s``).
Values that cannot be compared keep the order given. A list of dicts is a
list of explicit points, fitted in the order given.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import numbers
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sklearn.base
from joblib import Parallel, delayed, effective_n_jobs
from joblib.executor import get_memmapping_executor
from joblib.parallel import LokyBackend, get_active_backend
from sklearn.model_selection import StratifiedKFold
from tqdm import tqdm

from . import interrupts
from .data import MultiTaskData
from .errors import InvalidDataError, InvalidParameterError
from .estimators.base import MTLEstimator, split_task_column
from .metrics import task_rmse
from .resources import one_blas_thread

__all__ = ["CVResult", "RULES", "SCORINGS", "TaskKFold", "cross_validate", "default_simplicity",
           "expand_grid"]

#: Seconds this process fits folds alone before ``n_jobs`` workers start (``_run_folds``): a
#: worker's start costs about a second of CPU, more than a small grid's whole run.
WORKERS_AFTER = 1.0

#: Selection rules: the best mean score, or the simplest point within one standard error of it.
RULES = ("min", "1se")

#: Named scores, ``score(y_true_list, y_pred_list) -> float``; lower is better.
SCORINGS = {"rmse": task_rmse}


def default_simplicity(params: Mapping) -> tuple:
    """Sort key of the "1se" rule: the smallest key is the simplest model.

    Smallest support size ``s`` first (0 when the point has no ``s``), then
    the largest sum of penalties (the values of names starting with
    ``"lambda"``).

    Parameters
    ----------
    params : mapping
        One grid point.

    Returns
    -------
    tuple
    """
    penalty = sum(value for name, value in params.items() if name.startswith("lambda"))
    return (params.get("s", 0), -penalty)


@dataclass
class CVResult:
    """Cross-validation scores over a grid and the selected point.

    Attributes
    ----------
    points : list of dict
        The grid points, in path order.
    scores : ndarray of shape (n_points, n_folds)
        Validation score of every point on every fold (lower is better).
    mean, se : ndarray of shape (n_points,)
        Mean over folds, and standard error = sd over folds (ddof=1) / sqrt(n_folds).
    best_index : int
        Index of the selected point in ``points``.
    best_params : dict
        ``points[best_index]``.
    best_estimator : MTLEstimator or None
        A clone with ``best_params`` fitted on all the data (None when ``refit=False``).
    rule : str
        The selection rule used, one of ``RULES``.

    Examples
    --------
    >>> from mtl_opt import MOLAR, cross_validate
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=5, M=3, n=40, s=1, seed=0).data
    >>> cv = cross_validate(MOLAR(), {"c_gamma": [0.5, 1.0]}, data, seed=0, progress=False)
    >>> len(cv.cv_results_["params"]), type(cv.best_estimator).__name__
    (2, 'MOLAR')
    """

    points: list
    scores: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    best_index: int
    best_params: dict
    best_estimator: MTLEstimator | None
    rule: str

    def table(self) -> str:
        """A text table: one row per point with its parameters, mean and se.

        The selected row is marked ``best``; under the "1se" rule the row
        with the lowest mean is marked ``min`` when it differs.
        """
        names = list(dict.fromkeys(name for point in self.points for name in point))
        header = ["#", *names, "mean", "se", ""]
        rows = [header] + [
            [str(i), *(_cell(point.get(name, "-")) for name in names),
             f"{m:.6g}", f"{s:.6g}", self._mark(i)]
            for i, (point, m, s) in enumerate(zip(self.points, self.mean, self.se))]
        widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
        lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        title = (f"{len(self.points)} points x {self.scores.shape[1]} folds, "
                 f"rule={self.rule!r}, selected #{self.best_index}")
        return "\n".join([title, *lines])

    @property
    def cv_results_(self) -> dict:
        """The scores in the layout of scikit-learn's ``GridSearchCV.cv_results_`` (a pandas
        DataFrame takes it): ``params``, ``param_<name>``, ``split<f>_test_score``,
        ``mean_test_score``, ``std_test_score`` and ``rank_test_score`` with score = -loss
        (greater is better, as scikit-learn's ``neg_*`` scorers), and our losses (lower is
        better) as ``split<f>_test_loss``, ``mean_test_loss`` and ``se_test_loss``.  The
        selected point is ``best_index`` (under rule "1se" not always rank 1)."""
        names = list(dict.fromkeys(name for point in self.points for name in point))
        score = -self.scores
        mean = score.mean(axis=1)
        results: dict[str, Any] = {"params": [dict(point) for point in self.points],
                   **{f"param_{name}": [point.get(name) for point in self.points] for name in names}}
        for f in range(score.shape[1]):
            results[f"split{f}_test_score"] = score[:, f]
        results["mean_test_score"] = mean
        results["std_test_score"] = score.std(axis=1)
        results["rank_test_score"] = 1 + np.array([int(np.sum(mean > m)) for m in mean])
        for f in range(score.shape[1]):
            results[f"split{f}_test_loss"] = self.scores[:, f]
        results["mean_test_loss"], results["se_test_loss"] = self.mean, self.se
        return results

    def _mark(self, i: int) -> str:
        """Marker of row i: selected (``best``) or lowest mean (``min``)."""
        if i == self.best_index:
            return "best"
        return "min" if i == int(np.argmin(self.mean)) else ""


def _cell(value) -> str:
    """Short text for a parameter value in the table."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


def expand_grid(grid, valid_names: Iterable[str] | None = None) -> list[dict]:
    """The grid's points in path order (see the module docstring).

    Parameters
    ----------
    grid : dict of str to list, or list of dict
        Values per parameter name (full product), or explicit points.
    valid_names : iterable of str, default=None
        When given, every name in the grid must be one of them.

    Returns
    -------
    list of dict

    Raises
    ------
    InvalidParameterError
        On a malformed or empty grid, or a name not in ``valid_names``.
    """
    if isinstance(grid, Mapping):
        points = _product_path(grid)
    elif (isinstance(grid, Sequence) and not isinstance(grid, (str, bytes))
          and all(isinstance(point, Mapping) for point in grid)):
        points = [dict(point) for point in grid]
    else:
        raise InvalidParameterError(
            "grid must be a dict {name: list of values} (full product) or a list of dicts "
            f"(explicit points); got {type(grid).__name__}.")
    if not points:
        raise InvalidParameterError("the grid is empty; give at least one point.")
    if valid_names is not None:
        _check_names(points, list(valid_names))
    return points


def _product_path(grid: Mapping) -> list[dict]:
    """Full product of the per-name value lists, each in path order, first key outermost."""
    axes = []
    for name, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise InvalidParameterError(
                f"grid[{name!r}] must be a list of values; got {values!r}. "
                "Wrap a single value in a list.")
        values = list(values)
        if not values:
            raise InvalidParameterError(f"grid[{name!r}] is an empty list; give at least one value.")
        axes.append(_path_order(name, values))
    return [dict(zip(grid, combo)) for combo in itertools.product(*axes)]


def _path_order(name: str, values: list) -> list:
    """Large to small for penalties ("lambda*"), small to large otherwise; unsortable values as given."""
    try:
        return sorted(values, reverse=name.startswith("lambda"))
    except TypeError:
        return values


def _check_names(points: list[dict], valid: list[str]) -> None:
    """Raise if a point names a parameter outside ``valid``, listing the valid ones."""
    unknown = sorted({name for point in points for name in point} - set(valid))
    if unknown:
        raise InvalidParameterError(
            f"grid names {unknown} are not parameters of the estimator; "
            f"valid names: {', '.join(valid)}.")


def _clone(estimator: MTLEstimator, params: Mapping) -> MTLEstimator:
    """A new, unfitted estimator with the same parameters, then ``params`` set."""
    return sklearn.base.clone(estimator).set_params(**params)


class TaskKFold(StratifiedKFold):
    """K-fold split stratified by task for scikit-learn's searches: every task has rows in every
    fold, as in ``cross_validate``.  It reads the per-row task labels from X's ``task_column``
    (as the estimators do: no routing needed), or takes them as ``task``, requested through
    metadata routing: ``sklearn.set_config(enable_metadata_routing=True)``, then
    ``GridSearchCV(est, grid, cv=TaskKFold(5)).fit(X, y, task=labels)``.

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt import TaskKFold
    >>> task = np.repeat(["a", "b"], 6)
    >>> [len(test) for _, test in TaskKFold(3).split(np.zeros((12, 1)), task=task)]
    [4, 4, 4]
    """

    __metadata_request__split = {"task": True}

    def __init__(self, n_splits=5, *, shuffle=False, random_state=None, task_column=None):
        super().__init__(n_splits, shuffle=shuffle, random_state=random_state)
        self.task_column = task_column

    def split(self, X, y=None, groups=None, task=None):
        """Train and test rows of each fold (``groups``: not used, as in StratifiedKFold)."""
        if task is None and self.task_column is not None:
            task = split_task_column(X, self.task_column, "TaskKFold")[1]
        if task is None:
            raise InvalidDataError(
                "TaskKFold.split needs the task of each row: name X's task column, "
                "TaskKFold(task_column=...), or pass task= with metadata routing on "
                "(sklearn.set_config(enable_metadata_routing=True)) so a search passes it on.")
        return super().split(X, np.asarray([str(v) for v in np.asarray(task).tolist()]))

    def get_n_splits(self, X=None, y=None, groups=None, task=None) -> int:
        """The number of folds (a search passes it the split's arguments)."""
        return self.n_splits


def _fold_scores(estimator, points, data, test_rows, score) -> np.ndarray:
    """Fit the whole path on one fold's training rows; score each point on its test rows."""
    train, test = data._split(test_rows)
    warm = type(estimator).supports_warm_start
    scores, previous = [], None
    for params in points:
        model = _clone(estimator, params).fit(train, init=previous)
        previous = model.result_ if warm else None
        scores.append(score(test.ys, model.predict(test)))
    return np.array(scores, dtype=float)


def _run_folds(estimator, points, data, folds, score, n_jobs, progress) -> np.ndarray:
    """Scores of shape (n_points, n_folds), one fold's path per job.

    With joblib's process backend (loky, the default) this process fits folds from the front and
    ``n_jobs - 1`` workers take them from the back, each taking the next when it is done, as
    ``solvers.engine.workers`` shares nodes; once none is left, this process also fits the folds still
    with a worker, and the first answer is kept (a fold's scores are the same wherever it runs).
    So a worker's start (a fresh process importing numpy, scipy and Pyomo, about a second of CPU)
    is never waited for, and the workers start only once this process has fitted for
    ``WORKERS_AFTER`` seconds: a grid done by then never pays for them (the guide's took 0.9 s
    serial, and 2.1 s when every fold waited for the workers).  Another backend
    (``joblib.parallel_config``, e.g. Dask) gets one ``Parallel`` job per fold.

    While workers may start, this process fits on one BLAS thread, as each worker does.  The
    workers are forked from other threads (the timer, the feeders' submits), and OpenBLAS shuts
    its thread pool down at a fork (``pthread_atfork``): a threaded BLAS call here at that moment
    then waits forever (OpenBLAS 0.3.21 of numpy 1.24, with joblib 1.4, whose loky calls
    ``os.fork``; gdb showed this thread in ``exec_blas_async_wait`` with no BLAS thread left)."""
    columns: list[Any] = [None] * len(folds)   # each fold's scores, once scored
    lock = threading.Lock()
    with tqdm(total=len(folds) * len(points), desc="cross-validation", unit="fit",
              file=sys.stderr, disable=not progress) as bar:
        def finish(i, column):
            with lock:
                if columns[i] is None:
                    columns[i] = column
                    bar.update(len(points))
        if not isinstance(get_active_backend()[0], LokyBackend):
            jobs = (delayed(_fold_scores)(estimator, points, data, rows, score) for rows in folds)
            for i, column in enumerate(Parallel(n_jobs=n_jobs, return_as="generator")(jobs)):
                finish(i, column)
            return np.column_stack(columns)
        waiting = collections.deque(range(len(folds)))

        def take(from_back: bool):
            with lock:
                return (waiting.pop() if from_back else waiting.popleft()) if waiting else None

        def feed(executor):
            try:
                while (i := take(True)) is not None:
                    finish(i, executor.submit(_fold_scores, estimator, points, data, folds[i], score).result())
            except (Exception, KeyboardInterrupt):   # a worker's failure or stop: this process
                return                                 # fits that fold, and raises or stops there

        started = []

        def start_workers():
            # joblib's own reusable executor (a later joblib.Parallel reuses or replaces it; loky's
            # plain one, reused there, lacked its temporary-folder manager), without memmapping
            started.append(get_memmapping_executor(workers, initializer=interrupts.worker_init, max_nbytes=None))
            for _ in range(workers):
                threading.Thread(target=feed, args=(started[0],), daemon=True).start()
        workers = effective_n_jobs(n_jobs) - 1
        starter = threading.Timer(WORKERS_AFTER, start_workers)
        starter.daemon = True
        forking = workers > 0 and len(folds) > 1
        with one_blas_thread() if forking else contextlib.nullcontext():
            if forking:
                starter.start()
            try:
                while (i := take(False)) is not None:
                    finish(i, _fold_scores(estimator, points, data, folds[i], score))
                starter.cancel()
                for i in reversed(range(len(folds))):   # still with a worker: fitted here too
                    if columns[i] is None:
                        finish(i, _fold_scores(estimator, points, data, folds[i], score))
            except KeyboardInterrupt:   # a fit here was interrupted (FitInterrupted): the workers' too
                starter.cancel()
                waiting.clear()
                for executor in started:
                    interrupts.interrupt_workers(executor)
                raise
            finally:   # the workers' start, if it began, ends on one BLAS thread here
                if starter.ident is not None:
                    starter.join()
    return np.column_stack(columns)


def _select(mean, se, points, rule, simplicity) -> int:
    """Index of the selected point; ties go to the earliest point in path order."""
    best = int(np.argmin(mean))
    if rule == "min":
        return best
    within = np.flatnonzero(mean <= mean[best] + se[best])
    return int(min(within, key=lambda i: simplicity(points[i])))


def _scorer(scoring) -> Callable:
    """The score function for a name in SCORINGS, or the callable itself."""
    if callable(scoring):
        return scoring
    if scoring not in SCORINGS:
        raise InvalidParameterError(
            f"scoring must be one of {sorted(SCORINGS)} or a callable "
            f"score(y_true_list, y_pred_list) -> float; got {scoring!r}.")
    return SCORINGS[scoring]


def _check_args(estimator, data, rule, n_jobs, simplicity) -> None:
    """Validate the arguments of cross_validate that need no data pass."""
    if not isinstance(estimator, MTLEstimator):
        raise InvalidParameterError(
            f"cross_validate needs an MTLEstimator; got {type(estimator).__name__}.")
    if not isinstance(data, MultiTaskData):
        raise InvalidDataError(
            f"cross_validate expects a MultiTaskData, or a design X with y and task= labels per "
            f"row; got {type(data).__name__}.")
    if rule not in RULES:
        raise InvalidParameterError(f"rule must be one of {RULES}; got {rule!r}.")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise InvalidParameterError(
            f"n_jobs must be a nonzero int (-1: all cores); got {n_jobs!r}.")
    if not callable(simplicity):
        raise InvalidParameterError(
            f"simplicity must be a callable params -> sortable key; got {simplicity!r}.")


def cross_validate(estimator: MTLEstimator, grid, data, y=None, *, task=None, n_splits: int = 5,
                   seed=None, rule: str = "min", simplicity: Callable = default_simplicity,
                   scoring="rmse", refit: bool = True, n_jobs: int = 1,
                   progress: bool = True) -> CVResult:
    """Score every grid point by K-fold cross-validation and select one.

    Parameters
    ----------
    estimator : MTLEstimator
        A template; it is never fitted or changed. Each fit uses a clone,
        ``sklearn.base.clone(estimator)`` with the point's
        parameters set.
    grid : dict of str to list, or list of dict
        Parameter values (full product, sorted into path order) or explicit
        points (fitted in the order given); see :func:`expand_grid`. Every
        name must be a parameter of ``estimator``.
    data : MultiTaskData, or a design X (2-D array or DataFrame)
        With X: ``y`` (n,) and ``task`` (n,) labels per row, as in ``fit(X, y, task=...)``
        (``MultiTaskData.from_long``).
    y, task : array-like, default=None
        Only with a design X.
    n_splits : int, default=5
        Number of folds (>= 2; every task needs at least n_splits rows).
    seed : int, Generator or None, default=None
        Seed of the fold assignment: the same seed gives the same folds.
    rule : {"min", "1se"}, default="min"
        "min" selects the lowest mean score; "1se" the simplest point whose
        mean is at most the lowest mean plus that point's standard error.
    simplicity : callable, default=default_simplicity
        ``simplicity(point) -> sortable``; smaller is simpler. Used by "1se".
    scoring : "rmse" or callable, default="rmse"
        "rmse" is :func:`mtl_opt.metrics.task_rmse` (per-task validation RMSE
        averaged over tasks); a callable gets ``(y_true_list, y_pred_list)``
        and returns a float, lower is better.
    refit : bool, default=True
        Fit a clone with the selected parameters on all of ``data``.
    n_jobs : int, default=1
        Parallel fold jobs for ``joblib.Parallel`` (-1: all cores). Change the
        joblib backend with ``joblib.parallel_config``.
    progress : bool, default=True
        Show a tqdm progress bar on stderr; it advances one fold's path at a time.

    Returns
    -------
    CVResult

    Raises
    ------
    InvalidParameterError
        Unknown grid names (the message lists the valid ones), an empty or
        malformed grid, or a bad n_splits, rule, n_jobs, scoring or simplicity.
    InvalidDataError
        ``data`` is not a MultiTaskData, or a task has fewer than n_splits rows.

    Notes
    -----
    Warm starts: when ``type(estimator).supports_warm_start`` is True, the
    fit of each point gets ``init=`` the previous point's ``result_`` on the
    same fold; the first point of every fold starts cold. Other estimators
    fit every point from scratch. The refit on all the data starts cold.

    Examples
    --------
    >>> from mtl_opt.estimators import MOLAR
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> data = sparse_heterogeneity(d=5, M=3, n=40, s=1, seed=0).data
    >>> cv = cross_validate(MOLAR(), {"c_gamma": [0.5, 1.0, 2.0]}, data, seed=0, progress=False)
    >>> sorted(cv.best_params)
    ['c_gamma']
    """
    if not isinstance(data, MultiTaskData) and y is not None:
        data = MultiTaskData.from_long(data, y, task)
    elif y is not None or task is not None:
        raise InvalidDataError("cross_validate(MultiTaskData) takes no y or task: the data hold them.")
    _check_args(estimator, data, rule, n_jobs, simplicity)
    score = _scorer(scoring)
    points = expand_grid(grid, estimator.param_names())
    folds = data.kfold_indices(n_splits, seed)
    scores = _run_folds(estimator, points, data, folds, score, n_jobs, progress)
    mean = scores.mean(axis=1)
    se = scores.std(axis=1, ddof=1) / np.sqrt(scores.shape[1])
    best = _select(mean, se, points, rule, simplicity)
    return CVResult(
        points=points, scores=scores, mean=mean, se=se, best_index=best,
        best_params=dict(points[best]),
        best_estimator=_clone(estimator, points[best]).fit(data) if refit else None,
        rule=rule)
