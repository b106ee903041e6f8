"""The estimator base class; it checks the declarative parameter constraints of ``mtl_opt.params``.

As in scikit-learn, ``__init__`` only stores its arguments; ``fit`` checks
them against the class's ``param_constraints`` (so every bad-parameter error
has one shape), runs ``_fit`` and stores the learned state in attributes
ending in ``_``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import time

import numpy as np

from ..data import MultiTaskData, _to_float_array
from ..errors import InvalidDataError, InvalidParameterError, NotFittedError
from ..identifiability import check_some_signal, named_pairs
from ..params import BOOLEAN, InstanceOf, Interval, OneOf, SequenceOf, validate_attributes
from ..deadline import Deadline
from ..result import FitResult
from ..solvers.method import final_status
from ..solvers.options import SolveOptions
from ..solvers.user_model import ModelSpec, solve_spec

__all__ = ["BOOLEAN", "InstanceOf", "Interval", "MTLEstimator", "OneOf", "SequenceOf"]  # constraints: re-exported


class MTLEstimator:
    """Base of every mtl_opt estimator: parameters, checks, fit/predict plumbing.

    Subclasses set ``method`` (the instance-file name), ``param_constraints``
    (name -> list of accepted constraints) and implement ``_fit(data) -> FitResult``.
    """

    method: str = ""
    param_constraints: dict = {}

    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's parameter names, in order."""
        sig = inspect.signature(cls.__init__)
        return [name for name in sig.parameters if name != "self"]

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params) -> "MTLEstimator":
        for name, value in params.items():
            if name not in self.param_names():
                raise InvalidParameterError(
                    f"{type(self).__name__} has no parameter {name!r}; valid parameters: "
                    f"{', '.join(self.param_names())}.")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _check_params(self) -> None:
        validate_attributes(self)

    def _renamed(self, new: str, old: str):
        """The value of parameter ``new``, or of ``old``, its deprecated name (listed in
        ``deprecated_params``, default None), when that one is set; setting both is an error."""
        value = getattr(self, old)
        if value is None:
            return getattr(self, new)
        default = inspect.signature(type(self).__init__).parameters[new].default
        if getattr(self, new) != default:
            raise InvalidParameterError(
                f"{type(self).__name__}: {old}={value!r} is the deprecated name of {new}=; "
                f"set only {new}={getattr(self, new)!r}.")
        return value

    #: Which (task, feature) pairs ``result_.unidentified`` lists (``mtl_opt.identifiability``):
    #: "constant" (features constant in a task), "collinear" (also those collinear with earlier
    #: ones: least-squares-based methods) or None (a pooled fit, where no task stands alone).
    identification: str | None = "constant"

    #: Whether ``fit(data, init=...)`` uses a previous FitResult as a warm start.
    supports_warm_start: bool = False

    def fit(self, data: MultiTaskData, *, init: FitResult | None = None,
            model: ModelSpec | None = None) -> "MTLEstimator":
        """Fit on ``data`` and return ``self``; the estimate and its certificate are in ``result_``.

        ``init`` is a previous result on the same tasks and features, used as a
        warm start by estimators with ``supports_warm_start`` (ignored by others).  ``model``:
        a ``ModelSpec`` from ``self.pyomo_model(data)``, maybe edited, solved instead of the
        estimator's own algorithm (``mtl_opt.solvers.user_model``).
        """
        start = time.perf_counter()   # one clock for the whole fit, checks included
        self.check(data)
        if model is not None:
            self._check_spec(model, data)
            result = self._fit_spec(model, data)
        else:
            result = self._fit(data, init) if self.supports_warm_start else self._fit(data)
        self._adopt(result, data)
        result.wall_time = time.perf_counter() - start
        return self

    def pyomo_model(self, data: MultiTaskData) -> ModelSpec:
        """The estimator's optimization model on ``data``, to edit with Pyomo and solve with
        ``fit(data, model=spec)``: a ``ModelSpec`` (``print(spec)`` lists its components)."""
        self.check(data)
        if type(self)._model_spec is MTLEstimator._model_spec:
            raise InvalidParameterError(
                f"{type(self).__name__} has no optimization model to edit; these have one: "
                f"{', '.join(sorted(_with_models(MTLEstimator)))}.")
        return self._model_spec(data)

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        """The ModelSpec of ``data`` (checked): how to build the model and decode its estimate."""
        raise NotImplementedError

    def _spec_key(self, data: MultiTaskData) -> tuple[tuple, tuple]:
        """What ties a ModelSpec to its estimator (class, parameters but the solve options, which
        the model does not depend on) and to its data."""
        digest = hashlib.sha1()
        for array in (*data.Xs, *data.ys):
            digest.update(np.ascontiguousarray(array, dtype=float).tobytes())
        params = {k: v for k, v in self.get_params().items() if k != "solve_options"}
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

    def _fit_spec(self, spec: ModelSpec, data: MultiTaskData) -> FitResult:
        """The FitResult of the edited ``spec.model``, solved by ``solve_spec``."""
        options = getattr(self, "solve_options", None) or SolveOptions()
        run = solve_spec(spec, options, Deadline(options.time_limit))
        shared = {"objective_name": run.native["objective_name"], "algorithm": "user_model",
                  "objective": run.objective, "lower_bound": run.lower_bound,
                  "status": final_status(run, options.rel_gap),
                  "backend": spec.backend, "solver": f"user_model ({run.native['solver']})",
                  "solver_version": run.native["solver_version"], "native": run.native,
                  "bound_source": run.native["bound"]}
        if run.estimate is None:   # infeasible, or stopped without a solution
            nan = np.full((data.n_tasks, data.n_features), np.nan)
            return FitResult(method=self.method, coef=nan, intercept=nan[:, 0],
                             task_names=list(data.task_names),
                             feature_names=list(data.feature_names), **shared)
        return dataclasses.replace(spec.finish(run, options), **shared)

    def _adopt(self, result: FitResult, data: MultiTaskData) -> None:
        """Make ``result`` this estimator's ``result_``, with what every result records about
        the fit: the parameters and the (task, feature) pairs the data leave unidentified."""
        result.params = {k: _recorded(v) for k, v in self.get_params().items()
                         if _is_plain(v) or _is_records(v)}
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
        if not isinstance(data, MultiTaskData):
            raise InvalidDataError(
                f"{type(self).__name__}.fit expects a MultiTaskData; got {type(data).__name__}. "
                f"Build one with MultiTaskData(Xs, ys) or MultiTaskData.from_csv(...).")
        check_some_signal(data, getattr(self, "fit_intercept", True))
        self._check_fit(data)

    def _check_fit(self, data: MultiTaskData) -> None:
        """The estimator's own refusals of ``data`` and parameter combinations (cheap: no fit).
        One that builds its problem to check it stores ``self._checked = (data, problem)``, and
        its ``_fit`` takes it back with ``_checked_problem``: one problem per fit."""

    def _checked_problem(self, data: MultiTaskData):
        """``self._problem(data)``: the one ``check`` built for this very ``data`` object (``fit``
        checks right before it fits), else a new one."""
        checked, built = getattr(self, "_checked", None) or (None, None)
        self._checked = None
        return built if checked is data else self._problem(data)

    def _fit(self, data: MultiTaskData) -> FitResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _fit(data).")

    def _check_is_fitted(self) -> None:
        if not hasattr(self, "result_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(data) first.")

    def predict(self, data) -> list[np.ndarray]:
        """Predictions per task.

        ``data`` is a MultiTaskData whose tasks are matched to the fitted ones
        by name, or a list of design matrices, one per fitted task in order.
        """
        self._check_is_fitted()
        if isinstance(data, MultiTaskData):
            unknown = [t for t in data.task_names if t not in self.task_names_]
            if unknown:
                raise InvalidDataError(
                    f"tasks {unknown} were not seen in fit; fitted tasks: {self.task_names_}.")
            rows = [self.task_names_.index(t) for t in data.task_names]
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
            if X.ndim != 2 or X.shape[1] != p:
                raise InvalidDataError(
                    f"task {self.task_names_[k]!r}: expected an (n, {p}) design matrix; "
                    f"got shape {X.shape}.")
            out.append(X @ self.coef_[k] + self.intercept_[k])
        return out


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
    names = set()
    for sub in cls.__subclasses__():
        if sub._model_spec is not MTLEstimator._model_spec:
            names.add(sub.__name__)
        names |= _with_models(sub)
    return names
