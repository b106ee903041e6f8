"""Declarative parameter constraints: the one way mtl_opt checks a hyperparameter or option.

As in scikit-learn's ``_param_validation``, a class (an estimator, ``SolveOptions``, a bandit
policy or environment, a collab method) declares ``param_constraints``: parameter name ->
list of accepted constraints, any one of which may accept the value; a function declares
them with the ``validate_params`` decorator.  ``validate`` raises
one ``InvalidParameterError`` shape everywhere: the parameter, its owner, what is allowed,
what was given.  Numbers are finite unless an interval names an infinite end explicitly,
and NaN is never accepted.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import InvalidParameterError
from .limits import MAX_HORIZON, MAX_REPEATS


@dataclass(frozen=True)
class Interval:
    """A real (or integer, with ``integer=True``) number in [low, high] (open ends with ``open_low``/``open_high``).

    NaN is never accepted, and a missing end (None) is an open infinite end,
    so the number must be finite there: ``Interval(0, None)`` is [0, inf).
    A parameter for which inf means "no limit" says so with ``high=math.inf``.
    ``note`` is shown after the range in errors (a unit, where a bound comes from).
    """

    low: float | None = None
    high: float | None = None
    integer: bool = False
    open_low: bool = False
    open_high: bool = False
    note: str = ""

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
        note = f" ({self.note})" if self.note else ""
        return f"{'an int' if self.integer else 'a float'} in the range {left}{low}, {high}{right}{note}"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of values (strings, None...)."""

    values: tuple

    def accepts(self, value) -> bool:
        return any(value is v or (isinstance(v, str) and value == v) for v in self.values)

    def __str__(self) -> str:
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(v) for v in self.values)


class OneOfKeys(OneOf):
    """One of ``registry``'s keys as they are when a value is checked, or None: a name registered
    after the class that checks it (a backend module imported later) is accepted."""

    def __init__(self, registry: Mapping):
        object.__setattr__(self, "registry", registry)

    @property
    def values(self) -> tuple:
        return (*self.registry, None)


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
    """A list, tuple or array whose every item ``item`` accepts (its length is the owner's to check)."""

    item: Interval

    def accepts(self, value) -> bool:
        if not isinstance(value, (list, tuple, np.ndarray)):
            return False
        items = value.ravel().tolist() if isinstance(value, np.ndarray) else value
        return all(self.item.accepts(v) for v in items)

    def __str__(self) -> str:
        return f"a sequence, each {self.item}"


@dataclass(frozen=True)
class StrKeyed:
    """A mapping whose keys are all strings (native solver options: name -> value)."""

    label: str

    def accepts(self, value) -> bool:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)

    def __str__(self) -> str:
        return self.label


BOOLEAN = InstanceOf((bool,), "a bool")
NONE = OneOf((None,))
#: The most common constraint lists.
POSITIVE = [Interval(0, None, open_low=True)]
NONNEGATIVE = [Interval(0, None)]
POSITIVE_INT = [Interval(1, None, integer=True)]
NONNEGATIVE_INT = [Interval(0, None, integer=True)]
#: Bandit and collab counts, up to mtl_opt.limits' maxima (a horizon of 10^9 rounds runs for days).
HORIZON = [Interval(1, MAX_HORIZON, integer=True, note="mtl_opt.limits.MAX_HORIZON")]
REPEATS = [Interval(1, MAX_REPEATS, integer=True, note="mtl_opt.limits.MAX_REPEATS")]


def validate(owner: str, params: Mapping, constraints: Mapping) -> None:
    """Raise InvalidParameterError naming the first of ``constraints`` that ``params`` breaks.

    ``owner`` names what the parameters belong to (a class, a function, a file table).
    """
    for name, allowed in constraints.items():
        value = params[name]
        if not any(c.accepts(value) for c in allowed):
            raise InvalidParameterError(
                f"The {name!r} parameter of {owner} must be {' or '.join(map(str, allowed))}; "
                f"got {value!r}.")


def validate_attributes(obj) -> None:
    """``validate`` the attributes of ``obj`` that its class's ``param_constraints`` declares."""
    cls = type(obj)
    validate(cls.__name__, {name: getattr(obj, name) for name in cls.param_constraints}, cls.param_constraints)


def validate_params(constraints: dict):
    """Decorator: ``validate`` a function's arguments (defaults included) before every call.

    The table stays readable as the function's ``param_constraints``, as on a class.
    """
    def decorate(func):
        signature = inspect.signature(func)

        @functools.wraps(func)
        def checked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            validate(func.__name__, bound.arguments, constraints)
            return func(*args, **kwargs)

        checked.param_constraints = constraints
        return checked

    return decorate
