"""The estimator base class and the declarative parameter constraints it checks.

As in scikit-learn, ``__init__`` only stores its arguments; ``fit`` checks
them against the class's ``param_constraints`` (so every bad-parameter error
has one shape), runs ``_fit`` and stores the learned state in attributes
ending in ``_``.
"""

from __future__ import annotations

import inspect
import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

from ..data import MultiTaskData, _to_float_array
from ..errors import InvalidDataError, InvalidParameterError, NotFittedError
from ..identifiability import check_some_signal, named_pairs, unidentified_mask
from ..result import FitResult


@dataclass(frozen=True)
class Interval:
    """A real (or integer, with ``integer=True``) number in [low, high] (open ends with ``open_low``/``open_high``).

    NaN is never accepted, and a missing end (None) is an open infinite end,
    so the number must be finite there: ``Interval(0, None)`` is [0, inf).
    A parameter for which inf means "no limit" says so with ``high=math.inf``.
    """

    low: float | None = None
    high: float | None = None
    integer: bool = False
    open_low: bool = False
    open_high: bool = False

    def accepts(self, value) -> bool:
        kind = numbers.Integral if self.integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or value != value:  # NaN != NaN
            return False
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        open_low = self.open_low or self.low is None
        open_high = self.open_high or self.high is None
        return bool((low < value or (not open_low and value == low))
                    and (value < high or (not open_high and value == high)))

    def __str__(self) -> str:
        left = "(" if self.open_low or self.low is None else "["
        right = ")" if self.open_high or self.high is None else "]"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'an int' if self.integer else 'a float'} in the range {left}{low}, {high}{right}"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of values (strings, None...)."""

    values: tuple

    def accepts(self, value) -> bool:
        return any(value is v or (isinstance(v, str) and value == v) for v in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class InstanceOf:
    """An instance of the given type(s), described by ``label``."""

    types: tuple
    label: str

    def accepts(self, value) -> bool:
        if isinstance(value, bool) and bool not in self.types:
            return False
        return isinstance(value, self.types)

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class SequenceOf:
    """A list, tuple or array whose every item ``item`` accepts (its length is the estimator's to check)."""

    item: Interval

    def accepts(self, value) -> bool:
        if not isinstance(value, (list, tuple, np.ndarray)):
            return False
        items = value.ravel().tolist() if isinstance(value, np.ndarray) else value
        return all(self.item.accepts(v) for v in items)

    def __str__(self) -> str:
        return f"a sequence, each {self.item}"


BOOLEAN = InstanceOf((bool,), "a bool")


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
        for name, constraints in self.param_constraints.items():
            value = getattr(self, name)
            if not any(c.accepts(value) for c in constraints):
                allowed = " or ".join(str(c) for c in constraints)
                raise InvalidParameterError(
                    f"The {name!r} parameter of {type(self).__name__} must be {allowed}; "
                    f"got {value!r}.")

    #: Which (task, feature) pairs ``result_.unidentified`` lists (``mtl_opt.identifiability``):
    #: "constant" (features constant in a task), "collinear" (also those collinear with earlier
    #: ones: least-squares-based methods) or None (a pooled fit, where no task stands alone).
    identification: str | None = "constant"

    #: Whether ``fit(data, init=...)`` uses a previous FitResult as a warm start.
    supports_warm_start: bool = False

    def fit(self, data: MultiTaskData, *, init: FitResult | None = None) -> "MTLEstimator":
        """Fit on ``data`` and return ``self``; the estimate and its certificate are in ``result_``.

        ``init`` is a previous result on the same tasks and features, used as a
        warm start by estimators with ``supports_warm_start`` (ignored by others).
        """
        self.check(data)
        start = time.perf_counter()
        result = self._fit(data, init) if self.supports_warm_start else self._fit(data)
        result.wall_time = time.perf_counter() - start
        result.params = {k: v for k, v in self.get_params().items() if _is_plain(v)}
        mask = self._unidentified_mask(data)
        if mask is not None:
            result.unidentified = named_pairs(mask, data.task_names, data.feature_names)
        self.result_ = result
        self.coef_, self.intercept_ = result.coef, result.intercept
        self.task_names_ = list(data.task_names)
        return self

    def _unidentified_mask(self, data: MultiTaskData) -> np.ndarray | None:
        """(K, p) bool: the pairs ``result_.unidentified`` lists, by the ``identification`` rule
        (None: not recorded).  An estimator whose fit leaves out more pairs overrides it."""
        if self.identification is None:
            return None
        return unidentified_mask(data.Xs, getattr(self, "fit_intercept", True),
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
        """The estimator's own refusals of ``data`` and parameter combinations (cheap: no fit)."""

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


def _is_plain(value) -> bool:
    """Parameters worth recording in a JSON result (numbers, strings, None, lists of numbers)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value)
