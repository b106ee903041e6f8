"""The estimator base class: a scikit-learn regressor that checks ``mtl_opt.params`` constraints.

As in scikit-learn, ``__init__`` only stores its arguments; ``fit`` checks
them against the class's ``param_constraints`` (so every bad-parameter error
has one shape), runs ``_fit`` and stores the learned state in attributes
ending in ``_``.  ``MTLEstimator`` subclasses ``sklearn.base.BaseEstimator``, so
``clone``, ``get_params(deep=True)``, pipelines and searches work on every estimator.

Data come in two shapes: a ``MultiTaskData``, or scikit-learn's long format
``fit(X, y, task=labels)`` (X a 2-D array or DataFrame, ``task`` one label per row, like
``groups``; without it every row is one task).  ``task`` is requested by default from
``fit``, ``predict`` and ``score`` through scikit-learn's metadata routing, so with
``sklearn.set_config(enable_metadata_routing=True)`` a search or a pipeline hands it on.

Or the label travels inside X, so that scikit-learn needs no routing at all: every estimator
takes ``task_column`` (a DataFrame column name, or an int column index), read in ``fit``,
``predict`` and ``score`` and left out of the features; every scorer, splitter and search then
works with scikit-learn's defaults.  ``unseen`` ("raise" or "global") says what ``predict`` does
with a task not seen in fit, so leave-task-out splitters can score new tasks.  Where a task label
is needed and missing, the error says how to give it: a search never gets a NaN score from us
(``_refuse_unscorable``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import numbers
import pickle
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sklearn.exceptions
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import validate_data

from .. import interrupts
from ..data import MultiTaskData, _to_float_array
from ..data.core import _check_finite
from ..data.io import task_rows
from ..data.weights import task_weights, weighted_twin
from ..errors import (
    InvalidDataError,
    InvalidDataTypeError,
    InvalidParameterError,
    MTLOptError,
    NotFittedError,
    SolverError,
    UnavailableMethodError,
)
from ..identifiability import check_some_signal, named_pairs
from ..params import (NONE, BOOLEAN, InstanceOf, Interval, OneOf, OneOfKeys, SequenceOf, validate,
                      validate_attributes)
from ..deadline import Deadline, DeadlineReached
from ..resources import blas_for
from ..result import FitResult, Status
from ..solvers.method import NO_BOUND, SolverRun, final_status
from ..solvers.options import SolveOptions
from ..solvers.progress import reporting
from ..solvers.user_model import OWN_OBJECTIVE, ModelSpec, solve_spec

__all__ = ["BOOLEAN", "InstanceOf", "Interval", "MTLEstimator", "OneOf", "OneOfKeys",  # constraints:
           "SampleWeighted", "SequenceOf"]                                            # re-exported

#: The parameters every estimator takes for scikit-learn's tools (each ``__init__`` lists them
#: last, keyword-only): where the per-row task label is read from, and what ``predict`` does with
#: a task not seen in fit.  ``MTLEstimator.__init_subclass__`` adds them to every class's
#: ``param_constraints``.
API_CONSTRAINTS = {
    "task_column": [NONE, InstanceOf((str, numbers.Integral), "a column name or an int column index")],
    "unseen": [OneOf(("raise", "global"))],
}
#: The estimators with a global / centre model (``MTLEstimator._has_global_model``).
WITH_GLOBAL_MODEL = "MOLAR, MOLARLogistic, ARMUL(structure='vanilla'), PooledOLS and DataPooling"


class _classifier_method:
    """A method that a classifier has and a regressor lacks (``MTLEstimator._is_classifier``):
    on a regressor the attribute raises UnavailableMethodError, an AttributeError, so ``hasattr``
    is False as scikit-learn expects, and the message names the fix (scikit-learn's
    ``available_if`` would replace it by its own)."""

    def __init__(self, method):
        self.method = method
        functools.update_wrapper(self, method)

    def __get__(self, estimator, owner=None):
        if estimator is None:   # on the class: the plain function, as a method would be
            return self.method
        estimator._classifier_only(self.method.__name__)
        return types.MethodType(self.method, estimator)


class MTLEstimator(RegressorMixin, BaseEstimator):
    """Base of every mtl_opt estimator: parameters, checks, fit/predict plumbing.

    Subclasses set ``method`` (the instance-file name), ``param_constraints``
    (name -> list of accepted constraints) and implement ``_fit(data) -> FitResult``.
    An estimator whose ``_is_classifier()`` (a logistic loss) is a scikit-learn binary
    classifier: ``classes_``, ``predict`` gives labels, ``predict_proba`` (n, 2),
    ``decision_function`` the log-odds, ``score`` the accuracy; its fit sees the labels as 0/1
    (``classes_[1]`` is 1).

    Examples
    --------
    >>> from mtl_opt import MOLAR, MTLEstimator
    >>> from sklearn.base import clone
    >>> isinstance(MOLAR(), MTLEstimator), clone(MOLAR(c_gamma=2.0)).get_params()["c_gamma"]
    (True, 2.0)
    """

    method: str = ""
    param_constraints: dict = {}
    #: The solver settings of the estimators that take them (``param_names``).
    solve_options: SolveOptions | None
    #: ``check``'s plan for a data object (``_check_fit``), taken by the fit (``_checked_problem``).
    _checked: tuple[MultiTaskData, Any] | None

    #: ``API_CONSTRAINTS``'s defaults, for a subclass whose ``__init__`` does not take them
    #: (a user's own estimator); every mtl_opt estimator takes both.
    task_column = None
    unseen = "raise"

    def __init_subclass__(cls, **kwargs):
        """Every estimator's ``param_constraints`` ends with ``API_CONSTRAINTS`` (an abstract
        base that takes no parameters, ``__init__`` object's, declares none)."""
        super().__init_subclass__(**kwargs)
        if cls.__init__ is not object.__init__:
            cls.param_constraints = {**cls.param_constraints, **API_CONSTRAINTS}

    #: ``task`` is routed to fit, predict and score by default (scikit-learn metadata routing).
    __metadata_request__fit = {"task": True}
    __metadata_request__predict = {"task": True}
    __metadata_request__score = {"task": True}

    #: The fitted attributes (coef, intercept) of the global / centre model that
    #: ``predict(..., unseen="global")`` gives a task not seen in fit; None: the method has none.
    global_model: tuple[str, str] | None = None

    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's parameter names, in order."""
        sig = inspect.signature(cls.__init__)
        return [name for name in sig.parameters if name != "self"]

    def set_params(self, **params) -> "MTLEstimator":
        """Set parameters; ``solve_options__<name>=value`` sets one field of ``solve_options``
        (a new ``SolveOptions``: the record is immutable), as ``get_params(deep=True)`` lists it."""
        valid = self.param_names()
        unknown = [key for key in params if key.split("__", 1)[0] not in valid
                   or ("__" in key and not key.startswith("solve_options__"))]
        if unknown:
            raise InvalidParameterError(
                f"{type(self).__name__} has no parameter {unknown[0]!r}; valid parameters: "
                f"{', '.join(valid)}" + (" (and solve_options__<field>)" if "solve_options" in valid
                                         else "") + ".")
        for name, value in params.items():
            if "__" not in name:
                setattr(self, name, value)
        fields = {key.split("__", 1)[1]: value for key, value in params.items() if "__" in key}
        if fields:
            current = self.solve_options or SolveOptions()
            wrong = sorted(set(fields) - set(current.get_params()))
            if wrong:
                raise InvalidParameterError(
                    f"SolveOptions has no field {wrong[0]!r}; fields: "
                    f"{', '.join(current.get_params())}.")
            self.solve_options = dataclasses.replace(current, **fields)
        return self

    def _is_classifier(self) -> bool:
        """Whether this estimator (with these parameters) is a binary classifier."""
        return False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._is_classifier():
            from sklearn.utils import ClassifierTags

            tags.estimator_type, tags.regressor_tags = "classifier", None
            tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags

    def _check_params(self) -> None:
        validate_attributes(self)
        if self.unseen == "global" and not self._has_global_model():
            raise InvalidParameterError(
                f"unseen='global' predicts a new task with the global / centre model, which this "
                f"{type(self).__name__} has none of (these have one: {WITH_GLOBAL_MODEL}); use "
                f"unseen='raise', or one of those estimators.")

    #: Which (task, feature) pairs ``result_.unidentified`` lists (``mtl_opt.identifiability``):
    #: "constant" (features constant in a task), "collinear" (also those collinear with earlier
    #: ones: least-squares-based methods) or None (a pooled fit, where no task stands alone).
    identification: str | None = "constant"

    #: Whether ``fit(data, init=...)`` uses a previous FitResult as a warm start.
    supports_warm_start: bool = False

    def fit(self, X, y=None, *, task=None, init: FitResult | None = None,
            model: ModelSpec | None = None, callback: Callable[[dict], object] | None = None,
            ) -> "MTLEstimator":
        """Fit and return ``self``; the estimate and its certificate are in ``result_``.

        Parameters
        ----------
        X : MultiTaskData, or array-like / DataFrame of shape (n, p)
            The tasks' data; a design is given with ``y`` and ``task``.
        y : array-like of shape (n,), default=None
            The responses of a design ``X`` (a MultiTaskData holds its own).
        task : array-like of shape (n,), default=None
            One task label per row of a design ``X`` (None: all rows are one task); a task's
            rows keep their order.
        init : FitResult, default=None
            A previous result on the same tasks and features, a warm start for estimators with
            ``supports_warm_start`` (ignored by others).
        model : ModelSpec, default=None
            ``self.pyomo_model(data)``, maybe edited, solved instead of the estimator's own
            algorithm (``mtl_opt.solvers.user_model``).
        callback : callable, default=None
            ``callback(row)`` for each row of the run's live log (``solvers.progress``: the rows
            ``verbose`` shows, whatever ``verbose``), a dict with the keys of ``result_.log``
            in the units of the problem: on the exact paths, the rows of ``result_.log``
            (MOLAR's adds its stages after them).  A row is passed once final: when the next
            one is written (a forced row that moves no figure is merged into the last), or when
            the fit ends.  It may run in a solver's thread: keep it quick.  An exception it
            raises stops this fit as Ctrl-C does (``result_`` holds the best estimate and the
            bound proven by then, status ``interrupted``), no row is passed after it, and
            ``fit`` raises it.

        Returns
        -------
        self : MTLEstimator
            The fitted estimator.

        Notes
        -----
        Ctrl-C stops the fit softly (``mtl_opt.interrupts``): it raises ``FitInterrupted`` (a
        KeyboardInterrupt) once the fit has stopped, and ``result_`` holds the best estimate and
        the bound proven by then (status ``interrupted``); a second Ctrl-C stops at once.
        """
        return self._fit_weighted(X, y, task, None, init, model, callback)

    def _fit_weighted(self, X, y, task, sample_weight, init, model, callback) -> "MTLEstimator":
        """``fit`` with ``sample_weight`` (None: unweighted; ``SampleWeighted``)."""
        start = time.perf_counter()   # one clock for the whole fit, checks included
        with interrupts.stoppable() as stop, reporting(callback, stop):
            self._check_params()   # before the data: fit reads them with task_column and classes_
            data = self._fit_data(X, y, task, sample_weight)
            with blas_for(data.n_samples, data.n_features):
                if not self._planned(data):
                    self._check_data(data)
                try:
                    if model is not None:
                        self._check_spec(model, data)
                        result = self._fit_spec(model, data)
                    else:
                        result = (self._fit(data, init)  # type: ignore[call-arg]  # its _fit takes init
                                  if self.supports_warm_start else self._fit(data))
                except (MTLOptError, DeadlineReached) as exc:   # e.g. no solution found by the stop
                    if interrupts.requested():
                        raise interrupts.FitInterrupted(None, "the fit was interrupted before an "
                                                        "estimate") from exc
                    raise
                self._adopt(result, data)
                result.wall_time = time.perf_counter() - start - result.compile_time
                if result.status is Status.INTERRUPTED:
                    raise interrupts.FitInterrupted(result, "the fit was interrupted; result_ holds its "
                                                    "best estimate and the bound proven by then")
        return self

    def _fit_data(self, X, y, task, sample_weight=None) -> MultiTaskData:
        """The MultiTaskData of fit's arguments (with ``sample_weight``: its weighted twin,
        ``mtl_opt.data.weights``); sets ``n_features_in_`` and ``feature_names_in_``."""
        data, labels = self._unweighted_data(X, y, task)
        if sample_weight is None:
            return data
        if labels is None:   # a MultiTaskData: weights in the stacked order of its rows
            rows = np.split(np.arange(data.n_total), np.cumsum(data.n_samples)[:-1])
        else:                # the long format: weights in the caller's row order
            rows = task_rows([str(v) for v in labels.tolist()])[1]
        return weighted_twin(data, task_weights(sample_weight, rows, data.n_total, data,
                                                f"{type(self).__name__}.fit"))

    def _unweighted_data(self, X, y, task) -> tuple[MultiTaskData, np.ndarray | None]:
        """(the MultiTaskData of fit's arguments, the per-row task labels of a long-format X:
        None for a MultiTaskData)."""
        if isinstance(X, MultiTaskData):
            if y is not None or task is not None:
                raise InvalidDataError(
                    f"{type(self).__name__}.fit(MultiTaskData) takes no y or task: the data hold "
                    f"them; pass fit(data), or fit(X, y, task=labels) with arrays.")
            self.n_features_in_ = X.n_features
            self.feature_names_in_ = np.asarray(X.feature_names, dtype=object)
            if not self._is_classifier():
                return X, None
            labels = self._encoded(np.concatenate(X.ys))
            return MultiTaskData(X.Xs, np.split(labels, np.cumsum(X.n_samples)[:-1]),
                                 X.task_names, X.feature_names), None
        if y is None:
            raise InvalidDataError(
                f"{type(self).__name__}.fit expects a MultiTaskData, or a design X (2-D array or "
                f"DataFrame) with y and task= labels per row; got {type(X).__name__} without y "
                f"({type(self).__name__} requires y to be passed, but the target y is None). "
                f"Build data with MultiTaskData(Xs, ys) or MultiTaskData.from_frame(df, ...).")
        X, task = self._split_task(X, task)
        self._refuse_unscorable(X, task)
        classifier = self._is_classifier()
        X, y = _validated(self, X, y, reset=True, y_numeric=not classifier, ensure_min_samples=2)
        if classifier:
            y = self._encoded(y)
        names = getattr(self, "feature_names_in_", None)
        data = MultiTaskData.from_long(X, y, task, feature_names=None if names is None else list(names))
        return data, np.zeros(len(y)) if task is None else np.asarray(task)

    def _encoded(self, y: np.ndarray) -> np.ndarray:
        """A classifier's labels as 0.0 / 1.0 (1: ``classes_[1]``); sets ``classes_``."""
        from sklearn.utils.multiclass import check_classification_targets

        name = type(self).__name__
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise InvalidDataError(f"{name} is a classifier: {exc}") from None
        classes = np.unique(y)
        if len(classes) != 2:
            raise InvalidDataError(
                f"{name} is a binary classifier: y must hold exactly two classes; got "
                f"{len(classes)} class(es) {classes[:5].tolist()}. Only binary classification is "
                f"supported. For more classes, fit one per class "
                f"(sklearn.multiclass.OneVsRestClassifier({name}())).")
        self.classes_ = classes
        return (y == classes[1]).astype(float)

    def _split_task(self, X, task):
        """(the design without the task column, the per-row labels): ``task`` itself, or the
        ``task_column`` of ``X`` when one is set (then ``task=`` is refused: one source)."""
        if self.task_column is None:
            return X, task
        if task is not None:
            raise InvalidDataError(
                f"{type(self).__name__} got task= labels and task_column={self.task_column!r}: "
                f"pass one of them (with task_column the labels are read from X).")
        return split_task_column(X, self.task_column, type(self).__name__)

    def _refuse_unscorable(self, X, task) -> None:
        """Refuse a fit inside scikit-learn's cross-validation whose scores could only fail, and
        be NaN: the scorer will not be given the task labels fit got as ``task=`` (routing off,
        or a scorer that does not request them), or the test rows hold a task the training rows
        lack while ``unseen="raise"``.  scikit-learn turns a failed score into NaN with a
        warning, but reports fits that all fail as an error (with our message)."""
        fold = _cv_fold()
        if fold is None:
            return
        fix = (f"or put the label in X and name it, {type(self).__name__}(task_column=...), "
               f"which every scorer and splitter then reads without routing.")
        if task is not None and self.task_column is None and not fold["scored_with_task"]:
            raise InvalidDataError(
                f"{type(self).__name__}.fit got task= in scikit-learn's cross-validation, but its "
                f"predictions for the score will not get task (metadata routing is off, or the "
                f"scorer is not the estimator's own score: a scorer hands task to its metric, not "
                f"to predict), so every score would fail: enable routing "
                f"(sklearn.set_config(enable_metadata_routing=True)) with the default scoring, "
                + fix)
        tested = self._fold_labels(fold)
        if self.unseen == "raise" and task is not None and tested is not None:
            new = sorted(set(_as_labels(tested)) - set(_as_labels(task)))
            if new:
                name = type(self).__name__
                remedy = ("pass unseen='global' (a new task gets the global model)"
                          if self._has_global_model() else
                          f"use an estimator with a global model and unseen='global' ({name} has "
                          f"none; {WITH_GLOBAL_MODEL} have one)")
                raise InvalidDataError(
                    f"the test rows of this cross-validation split hold tasks its training rows "
                    f"lack ({new[:5]}), which {name}.predict refuses with unseen='raise', so "
                    f"every score would fail: {remedy}, or split so that every test task is also "
                    f"trained on (e.g. mtl_opt.cv.TaskKFold).")

    def _fold_labels(self, fold):
        """The task labels of the test rows of a cross-validation ``fold`` (``_cv_fold``): the
        scorer's ``task``, or the ``task_column`` of the test rows; None when neither is known
        (e.g. a pipeline step renamed the column)."""
        if fold["scored_with_task"]:
            return fold["score_params"]["task"]
        if self.task_column is None:
            return None
        from sklearn.utils import _safe_indexing

        try:
            return self._split_task(_safe_indexing(fold["X"], fold["test"]), None)[1]
        except (InvalidDataError, IndexError, KeyError, TypeError):
            return None

    def pyomo_model(self, data: MultiTaskData, **options) -> ModelSpec:
        """The estimator's optimization model on ``data``, to edit with Pyomo and solve with
        ``fit(data, model=spec)``: a ``ModelSpec`` (``print(spec)`` lists its components).
        ``options``: the estimator's own model options (SparseMTL: ``kind``, ``normalized``)."""
        self.check(data)
        if type(self)._model_spec is MTLEstimator._model_spec:
            raise InvalidParameterError(
                f"{type(self).__name__} has no optimization model to edit; these have one: "
                f"{', '.join(sorted(_with_models(MTLEstimator)))}.")
        return self._model_spec(data, **options)

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        """The ModelSpec of ``data`` (checked): how to build the model and decode its estimate."""
        raise NotImplementedError

    def _spec_key(self, data: MultiTaskData) -> tuple[tuple, tuple]:
        """What ties a ModelSpec to its estimator (class, parameters but the solve options and
        ``API_CONSTRAINTS``'s, which the model does not depend on) and to its data."""
        digest = hashlib.sha1()
        for array in (*data.Xs, *data.ys):
            digest.update(np.ascontiguousarray(array, dtype=float).tobytes())
        params = {k: v for k, v in self.get_params(deep=False).items()
                  if k != "solve_options" and k not in API_CONSTRAINTS}
        return ((type(self).__name__, repr(params)),
                (tuple(X.shape for X in data.Xs), digest.hexdigest()))

    def _check_spec(self, spec, data: MultiTaskData) -> None:
        if type(self)._model_spec is MTLEstimator._model_spec:
            self.pyomo_model(data)   # raises: no model
        if not isinstance(spec, ModelSpec):
            raise InvalidParameterError(
                f"fit(model=...) takes the ModelSpec of {type(self).__name__}.pyomo_model(data); "
                f"got {type(spec).__name__}.")
        estimator, data_key = self._spec_key(data)
        if spec.estimator != estimator:
            raise InvalidParameterError(
                f"this ModelSpec was built by {spec.estimator[0]} with parameters "
                f"{spec.estimator[1]}, not by this {estimator[0]} with {estimator[1]}; build it "
                f"with this estimator's pyomo_model(data).")
        if spec.data_key != data_key:
            raise InvalidDataError(
                f"this ModelSpec was built on other data (design shapes {spec.data_key[0]}; "
                f"these are {data_key[0]}); build it from this data with pyomo_model(data).")

    def _result_of(self, data: MultiTaskData, run: SolverRun, *, coef, intercept, rel_gap: float,
                   algorithm: str, backend: str | None, objective_name: str,
                   objective: float | None = None, solver: str | None = None,
                   solver_version: str | None = None, log: list | None = None,
                   warnings=(), extra: dict | None = None) -> FitResult:
        """The FitResult of ``run``: the one place a fit's result is made.

        Its status is ``final_status(run, rel_gap)``; bound, bound source (``native["bound"]``,
        the reason when there is none), log, native figures, solver and version are the run's.
        ``coef`` and ``intercept`` are the estimate on the data's scale; ``objective`` the
        stated objective recomputed there (default: the run's); ``solver``, ``solver_version``
        and ``log`` replace the run's where the fit did more than the run (e.g. MOLAR's stages).
        ``fit`` adds the wall time, ``_adopt`` the parameters and unidentified pairs.
        """
        return FitResult(
            method=self.method, coef=coef, intercept=intercept,
            objective=run.objective if objective is None else objective,
            lower_bound=run.lower_bound, status=final_status(run, rel_gap),
            objective_name=objective_name, bound_source=run.native.get("bound"),
            algorithm=algorithm, backend=backend, solver=solver or run.native["solver"],
            solver_version=solver_version or run.native["solver_version"],
            log=run.log if log is None else log, native=run.native,
            task_names=list(data.task_names), feature_names=list(data.feature_names),
            warnings=list(warnings), extra=extra or {})

    def _fit_spec(self, spec: ModelSpec, data: MultiTaskData) -> FitResult:
        """The FitResult of the edited ``spec.model``, solved by ``solve_spec``."""
        options = getattr(self, "solve_options", None) or SolveOptions()
        run = solve_spec(spec, options, Deadline(options.time_limit))
        shared = {"objective_name": run.native["objective_name"], "algorithm": "user_model",
                  "rel_gap": options.rel_gap, "backend": spec.backend,
                  "solver": f"user_model ({run.native['solver']})"}
        if run.estimate is None:   # infeasible, or stopped without a solution: NaN, and why
            nan = np.full((data.n_tasks, data.n_features), np.nan)
            why = run.native.get("infeasible", f"the backend stopped ({run.native['backend_status']}) "
                                               f"before it found a solution")
            return self._result_of(data, run, coef=nan, intercept=nan[:, 0], **shared,
                                   warnings=[f"no estimate: {why}; coef and intercept are NaN."])
        decoded = run   # what the estimator's own result is made from
        if run.native["objective_name"] != OWN_OBJECTIVE:   # its bound is not on F's scale
            decoded = dataclasses.replace(run, lower_bound=None, native={
                **run.native, "bound": f"{NO_BOUND}: the edited objective's bound is reported"})
        # the estimator's own result for the estimate; objective, bound and status are the run's
        own = spec.finish(decoded, options)
        return self._result_of(data, run, coef=own.coef, intercept=own.intercept, log=own.log,
                               warnings=own.warnings, extra=own.extra, **shared)

    def _adopt(self, result: FitResult, data: MultiTaskData) -> None:
        """Make ``result`` this estimator's ``result_``, with what every result records about
        the fit: the parameters and the (task, feature) pairs the data leave unidentified."""
        result.params = {k: _recorded(v) for k, v in self.get_params(deep=False).items()
                         if _is_plain(v) or _is_records(v)}
        if data.weighted:   # the problem solved and certified is the weighted one
            result.objective_name += ", weighted by sample_weight"
            result.extra["weighted"] = True
        mask = self._unidentified_mask(data)
        if mask is not None:
            result.unidentified = named_pairs(mask, data.task_names, data.feature_names)
        self.result_ = result
        self.coef_, self.intercept_ = result.coef, result.intercept
        self.task_names_ = list(data.task_names)

    def _unidentified_mask(self, data: MultiTaskData) -> np.ndarray | None:
        """(K, p) bool: the pairs ``result_.unidentified`` lists, by the ``identification`` rule
        (None: not recorded).  An estimator whose fit leaves out more pairs overrides it."""
        if self.identification is None:
            return None
        return data.unidentified(getattr(self, "fit_intercept", True),
                                 collinear=self.identification == "collinear")

    def check(self, data: MultiTaskData) -> None:
        """Every refusal ``fit`` makes before it fits (parameters, their combinations, the data's
        fit with them), without fitting: ``mtl-opt validate`` runs it."""
        self._check_params()
        self._check_data(data)
        self._checked_params = self._params_key()

    def _planned(self, data: MultiTaskData) -> bool:
        """Whether ``check`` has made the fit's plan (``_check_fit``'s problem, and method where
        the estimator resolves one) for this very ``data`` object with the parameters as they
        are now: then ``fit`` takes it as it is, so a checked fit builds and resolves once."""
        checked, key = getattr(self, "_checked", None), getattr(self, "_checked_params", None)
        return checked is not None and checked[0] is data and key is not None and (
            key == self._params_key())

    def _params_key(self) -> bytes | None:
        """The parameters as bytes (equal bytes: the same setting), or None when one cannot be
        pickled (then no plan is reused)."""
        try:
            return pickle.dumps(self.get_params(deep=False))
        except (pickle.PicklingError, TypeError, AttributeError):
            return None

    def _check_data(self, data: MultiTaskData) -> None:
        """``check``'s refusals of ``data`` with these (checked) parameters."""
        if not isinstance(data, MultiTaskData):
            raise InvalidDataError(
                f"{type(self).__name__}.fit expects a MultiTaskData; got {type(data).__name__}. "
                f"Build one with MultiTaskData(Xs, ys) or MultiTaskData.from_csv(...).")
        check_some_signal(data, getattr(self, "fit_intercept", True))
        self._check_fit(data)

    def _check_fit(self, data: MultiTaskData) -> None:
        """The estimator's own refusals of ``data`` and parameter combinations (cheap: no fit).
        One that builds its problem to check it stores ``self._checked = (data, plan)`` (the
        problem, and what else it resolved), and its ``_fit`` takes it back with
        ``_checked_problem``: one problem and one resolution per fit."""

    def _checked_problem(self, data: MultiTaskData):
        """The plan ``_check_fit`` stored for this very ``data`` object (``fit`` checks right
        before it fits, unless ``check`` did), made now when there is none; taken once."""
        checked, plan = getattr(self, "_checked", None) or (None, None)
        if checked is not data:
            self._check_fit(data)
            assert self._checked is not None   # stored by ``_check_fit``
            _, plan = self._checked
        self._checked = None
        return plan

    def _fit(self, data: MultiTaskData) -> FitResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _fit(data).")

    def _check_is_fitted(self) -> None:
        if not hasattr(self, "result_"):
            raise _NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(data) first.")

    def predict(self, X, task=None, *, unseen: str | None = None):
        """Predictions: a 1-D array in row order for a design ``X`` (2-D array or DataFrame with
        ``task`` labels per row, or its ``task_column``, as in fit), or a list of per-task arrays
        for a MultiTaskData (tasks matched to the fitted ones by name) or a list of design
        matrices (one per fitted task, in order).  A classifier predicts labels (``classes_``):
        ``classes_[1]`` where the log-odds are > 0.

        A task not seen in fit is refused, unless ``unseen="global"`` (default: the estimator's
        ``unseen``): its rows get the fitted global / centre model where the method has one.
        """
        scores = self._linear_predictor(X, task, unseen)
        if not self._is_classifier():
            return scores
        return _each(scores, lambda s: self.classes_[(s > 0).astype(int)])

    @_classifier_method
    def decision_function(self, X, task=None, *, unseen: str | None = None):
        """A classifier's log-odds of ``classes_[1]`` (arguments and shapes as in ``predict``)."""
        return self._linear_predictor(X, task, unseen)

    @_classifier_method
    def predict_proba(self, X, task=None, *, unseen: str | None = None):
        """A classifier's class probabilities, (n, 2) in the order of ``classes_`` (arguments as
        in ``predict``; a list of (n_k, 2) arrays for per-task input)."""
        from scipy.special import expit

        return _each(self._linear_predictor(X, task, unseen),
                     lambda s: np.column_stack([expit(-s), expit(s)]))

    def _classifier_only(self, name: str) -> None:
        if not self._is_classifier():
            raise UnavailableMethodError(
                f"{name} needs a classifier (loss='logistic', or MOLARLogistic); this "
                f"{type(self).__name__} is a regressor.")

    def _linear_predictor(self, X, task, unseen):
        """b_k + X theta_k per row (per task for per-task input): ``predict``'s arguments."""
        self._check_is_fitted()
        if np.isnan(self.coef_).all():   # the fit stopped without one (``_fit_spec``)
            raise SolverError(f"the last fit found no estimate ({self.result_.status}): "
                              f"{' '.join(self.result_.warnings)} Fit again before predicting.")
        unseen = self.unseen if unseen is None else unseen
        if unseen not in ("raise", "global"):
            raise InvalidParameterError(f"unseen must be 'raise' or 'global'; got {unseen!r}.")
        if isinstance(X, MultiTaskData) or _is_design_list(X):
            if task is not None:
                raise InvalidDataError(
                    "predict(MultiTaskData or list of designs) takes no task=: the tasks are the "
                    "data's (or the fitted ones, in order).")
            return self._predict_tasks(X)
        X, task = self._split_task(X, task)
        X = _validated(self, X, reset=False)
        names, rows = task_rows(_labels(task, len(X), self.task_names_, type(self).__name__))
        out = np.empty(len(X))
        for name, r in zip(names, rows):
            coef, intercept = self._task_model(name, unseen)
            out[r] = X[r] @ coef + intercept
        return out

    def _task_model(self, name: str, unseen: str) -> tuple[np.ndarray, float]:
        """(coef, intercept) that predict uses for task ``name``."""
        if name in self.task_names_:
            k = self.task_names_.index(name)
            return self.coef_[k], self.intercept_[k]
        fitted = ", ".join(map(repr, self.task_names_[:10])) + (
            ", ..." if len(self.task_names_) > 10 else "")
        if unseen == "raise":
            hint = (f" Pass unseen='global' (to predict, or to {type(self).__name__}(...)) to use "
                    f"the global model for it." if self._has_global_model() else "")
            raise InvalidDataError(
                f"task {name!r} was not seen in fit (fitted tasks: {fitted}).{hint}")
        if not self._has_global_model():
            raise InvalidDataError(
                f"task {name!r} was not seen in fit, and this {type(self).__name__} has no "
                f"global model to predict it with (unseen='global' needs {WITH_GLOBAL_MODEL}); "
                f"fitted tasks: {fitted}.")
        return self._global_model()

    def _has_global_model(self) -> bool:
        """Whether the method (with these parameters) fits a global / centre model, which
        ``unseen="global"`` gives a task not seen in fit."""
        return self.global_model is not None

    def _global_model(self) -> tuple[np.ndarray, float]:
        """The fitted global / centre model (coef (p,), intercept) (``_has_global_model``)."""
        assert self.global_model is not None   # ``_has_global_model``
        coef, intercept = (getattr(self, a) for a in self.global_model)
        return np.asarray(coef, dtype=float), float(intercept)

    def _predict_tasks(self, data) -> list[np.ndarray]:
        """Predictions per task of a MultiTaskData (tasks by name) or a list of designs."""
        if isinstance(data, MultiTaskData):
            unknown = [t for t in data.task_names if t not in self.task_names_]
            if unknown:
                raise InvalidDataError(
                    f"tasks {unknown} were not seen in fit; fitted tasks: {self.task_names_}.")
            rows: Sequence[int] = [self.task_names_.index(t) for t in data.task_names]
            Xs = data.Xs
        else:
            Xs = list(data)
            if len(Xs) != len(self.task_names_):
                raise InvalidDataError(
                    f"predict got {len(Xs)} design matrices for {len(self.task_names_)} fitted tasks.")
            rows = range(len(Xs))
        p = self.coef_.shape[1]
        out = []
        for k, X in zip(rows, Xs):
            X = _to_float_array(X, self.task_names_[k], "X")
            _check_finite(X, self.task_names_[k], "X")
            if X.ndim != 2 or X.shape[1] != p:
                raise InvalidDataError(
                    f"task {self.task_names_[k]!r}: expected an (n, {p}) design matrix; "
                    f"got shape {X.shape}.")
            out.append(X @ self.coef_[k] + self.intercept_[k])
        return out

    def score(self, X, y=None, *, task=None, sample_weight=None) -> float:
        """R^2 of ``predict`` (a classifier's: accuracy), higher is better, over all rows of all
        tasks: ``X`` and ``task`` as in ``predict``; with a MultiTaskData, y comes from the data."""
        if isinstance(X, MultiTaskData):
            y, predicted = np.concatenate(X.ys), np.concatenate(self.predict(X))
        else:
            predicted = self.predict(X, task=task)
        metric = accuracy_score if self._is_classifier() else r2_score
        return float(metric(y, predicted, sample_weight=sample_weight))


class SampleWeighted:
    """Mixin of the estimators whose objective is a count-normalized squared loss per task, with
    tasks weighed by their ``MultiTaskData.counts`` where at all (``mtl_opt.data.weights``):
    their ``fit`` takes ``sample_weight``."""

    _fit_weighted: Callable[..., MTLEstimator]   # the estimator's (``MTLEstimator``)

    def fit(self, X, y=None, *, task=None, sample_weight=None, init: FitResult | None = None,
            model: ModelSpec | None = None, callback: Callable[[dict], object] | None = None):
        """``MTLEstimator.fit``, with ``sample_weight``: None, a number, or one weight >= 0 per
        row (in the row order of X, or the stacked task order of a MultiTaskData).  Each task's
        loss is then the weighted mean ``1/(2 W_k) sum_i w_i r_i^2``, W_k its total weight:
        integer weights equal duplicating rows, rows of weight 0 are left out, and the
        certificate is the weighted problem's."""
        if sample_weight is not None:
            if model is not None:
                raise InvalidParameterError(
                    f"{type(self).__name__}.fit takes sample_weight or model=, not both: a "
                    f"ModelSpec is the model of the unweighted data it was built on.")
            self._check_weighted()
        return self._fit_weighted(X, y, task, sample_weight, init, model, callback)

    def _check_weighted(self) -> None:
        """Refuse ``sample_weight`` where these parameters leave the squared loss."""


class _NotFittedError(NotFittedError, sklearn.exceptions.NotFittedError):
    """mtl_opt's NotFittedError that scikit-learn also recognizes as its own (``errors`` does not
    import scikit-learn)."""


def _validated(estimator, X, y=None, *, reset: bool, **options):
    """scikit-learn's input validation (also ``n_features_in_`` and ``feature_names_in_``: set
    with ``reset``, else checked), its refusals raised as InvalidDataError."""
    args = (X,) if y is None else (X, y)
    try:
        return validate_data(estimator, *args, reset=reset, **options)
    except (ValueError, TypeError) as exc:
        kind = InvalidDataTypeError if isinstance(exc, TypeError) else InvalidDataError
        raise kind(f"{type(estimator).__name__}: {exc}") from None


def split_task_column(X, column, name: str):
    """(X without its task column, the column's per-row labels): ``column`` a DataFrame column
    name, or an int column index (negative from the end) of a DataFrame or an array; ``name``
    (the owner, e.g. the estimator's class) prefixes the errors."""
    if hasattr(X, "columns"):   # a DataFrame: by name, or by position with an int
        columns = list(X.columns)
        if isinstance(column, str) and column not in columns:
            raise InvalidDataError(
                f"{name}(task_column={column!r}): X has no column {column!r} (columns: "
                f"{columns[:10]}{' ...' if len(columns) > 10 else ''}); pass X with the task "
                f"column, or task_column=None with task= labels.")
        if not isinstance(column, str):
            column = columns[_position(column, len(columns), name)]
        return X.drop(columns=[column]), X[column].to_numpy()
    if isinstance(column, str):
        raise InvalidDataError(
            f"{name}(task_column={column!r}) names a DataFrame column, but X is a "
            f"{type(X).__name__}; pass a DataFrame, or an int column index as task_column.")
    X = np.asarray(X)
    if X.ndim != 2:
        raise InvalidDataError(
            f"{name}: expected a 2-D X holding the task column {column}; got shape {X.shape}.")
    i = _position(column, X.shape[1], name)
    return np.delete(X, i, axis=1), X[:, i]


def _position(column, width: int, name: str) -> int:
    """The int column index ``column`` of a design ``width`` columns wide (negative from the end)."""
    if not -width <= column < width:
        raise InvalidDataError(
            f"{name}(task_column={column}): X has {width} columns; give the index of its task "
            f"column (0..{width - 1}, or negative from the end).")
    return int(column) % width


def _as_labels(task) -> list[str]:
    """Per-row task labels as the str names fit gives tasks (``MultiTaskData.from_long``)."""
    return [str(v) for v in np.asarray(task).tolist()]


def _cv_fold() -> dict | None:
    """The split that scikit-learn's cross-validation is fitting on right now (its
    ``_fit_and_score`` frame, the innermost one on the stack: ``X``, ``test`` rows, the
    ``score_params`` its scorer will get, and ``scored_with_task``: whether the score's
    predictions get ``task``, which only the estimator's own score, scikit-learn's
    ``_PassthroughScorer``, hands on), or None outside one (or in a scikit-learn that names them
    otherwise: then nothing is refused)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if (frame.f_code.co_name == "_fit_and_score"
                and frame.f_globals.get("__name__", "").startswith("sklearn.model_selection")):
            local = frame.f_locals
            if not {"X", "test", "scorer", "score_params"} <= set(local):
                return None
            params = local["score_params"] or {}
            return {"X": local["X"], "test": local["test"], "score_params": params,
                    "scored_with_task": "task" in params and _passes_task(local["scorer"])}
        frame = frame.f_back
    return None


def _passes_task(scorer) -> bool:
    """Whether a scikit-learn scorer hands ``task`` to the estimator: its own score does
    (``_PassthroughScorer``), a metric's scorer hands it to the metric; a multi-metric scorer
    (``cross_val_score`` wraps every scorer in one) when all of its scorers do."""
    if type(scorer).__name__ == "_MultimetricScorer":
        return all(_passes_task(one) for one in getattr(scorer, "_scorers", {None: None}).values())
    return type(scorer).__name__ == "_PassthroughScorer"


def _labels(task, n: int, fitted: list[str], name: str) -> list[str]:
    """predict's per-row task labels as str; without ``task``, the one fitted task (if one)."""
    if task is None:
        if len(fitted) != 1:
            raise InvalidDataError(
                f"predict needs task= (one label per row): this {name} was fitted on "
                f"{len(fitted)} tasks. Pass task= labels (scikit-learn's tools pass them with "
                f"metadata routing on and the default scoring), or put the label in X and name "
                f"it: {name}(task_column=...), which every scorer reads without routing.")
        return [fitted[0]] * n
    labels = np.asarray(task)
    if labels.ndim != 1 or len(labels) != n:
        raise InvalidDataError(
            f"task must hold one label per row of X: {n} labels; got shape {labels.shape}.")
    return _as_labels(labels)


def _each(out, f):
    """``f`` applied to a prediction: one array (long format) or a list of per-task arrays."""
    return [f(a) for a in out] if isinstance(out, list) else f(out)


def _is_design_list(X) -> bool:
    """Whether ``X`` is predict's older input: a list of per-task 2-D design arrays."""
    return (isinstance(X, (list, tuple)) and bool(X)
            and all(isinstance(x, np.ndarray) and x.ndim == 2 for x in X))


def _is_records(value) -> bool:
    """A non-empty list of records a result keeps in their dict form (``to_dict``, e.g. the
    sparse model's constraints) or as the dicts they were given in."""
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(v, dict) or hasattr(v, "to_dict") for v in value))


def _recorded(value):
    """``value`` as a JSON result records it (``_is_plain`` or ``_is_records``)."""
    return [v if isinstance(v, dict) else v.to_dict() for v in value] if _is_records(value) else value


def _is_plain(value) -> bool:
    """Parameters worth recording in a JSON result (numbers, strings, None, lists of numbers)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value)


def _with_models(cls) -> set[str]:
    """The names of the estimators below ``cls`` that have a ``pyomo_model``."""
    from .. import estimators

    for name in estimators.__all__:   # the package imports its classes on first use
        getattr(estimators, name)
    names = set()
    for sub in cls.__subclasses__():
        if sub._model_spec is not MTLEstimator._model_spec:
            names.add(sub.__name__)
        names |= _with_models(sub)
    return names
