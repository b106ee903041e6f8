"""Scaling reductions: a problem's normalized twin, and the inverse that maps its answers back.

As in CVXPY's reductions, ``reduction.apply(problem)`` returns ``(twin, inverse)``: the twin is
what a solver sees, ``inverse`` maps the twin's estimates, objective values, bounds, dual points
and log rows back to ``problem``.  Reductions compose (``Chain``; ``Inverse.then``).  Every
family's scaling is one of these:

- ``centring``: the one centring (standardize's Scaler, the sparse problem's), by two passes;
- ``ObjectiveScale``: y over a power of 2 near sqrt(F), the objective over its square
  (the sparse exact paths, the OLS baselines, the models of ``pyomo_model``);
- ``Level``: a common level of y removed, absorbed by the intercepts;
- ``ResponseScale``: ``Level`` then ``ObjectiveScale`` (ARMUL: y without its pooled level,
  over the power of 2 nearest its RMS);
- ``Frame``: values centred and scaled per coordinate, weights over a power of 2 (MOLAR's
  median; ``uniform`` for one scale over all coordinates, as its edited model takes);
- ``Standardization``: features centred and scaled, y centred (``data.scaling.Scaler.reduction``,
  ARMUL's pooled standardize, the OLS models' levels): the chain's first link, and the one
  inverse of standardization every estimator reports coefficients through.  It changes what is
  reported (coefficients per original feature), so it maps no objective values.

Why a bound mapped back stays a proven bound in floating point (the one statement):

- Scales are powers of 2.  Multiplying or dividing a float by 2^e changes its exponent only, so
  the twin's data are exact and ``Inverse.value`` is exact (no overflow or underflow for data
  within float64's range).  Every term of the objectives here is homogeneous of degree 2 in
  (y, coefficients) (sparse F but its Zbar term, whose weight is scaled by the square too;
  ARMUL's squared loss with lambda scaled by the factor) or of degree 1 in the values and in
  the weights (the median), so the twin's objective at the mapped estimate is the original's
  divided by ``value_scale``, bit for bit, and a bound b on the twin's minimum gives exactly
  the bound ``value_scale * b`` on the original's.
- A common level removed from y (``Level``, ``centring``) is absorbed by the intercepts,
  so the minimum does not change; the level is a rounded number, and the problem certified is
  the one on the shifted floats.  ``centring``'s second pass takes the mean of the centred
  values, which rounds relative to their spread, not to the level (Chan, Golub and LeVeque
  1983): at y ~ 1e9 with a spread of 1e-4 the one-pass mean leaves a shift d of ~1e-7 in every
  residual, and a bound on F then exceeds the true optimum by ~d^2 / 2.
- A frame with a scale per coordinate (``Frame``, MOLAR's LP path) maps no values back: the
  median's bound is evaluated on the original data from the dual point mapped back
  (``Inverse.dual``), rounding made safe there (``formulations.molar.dual_bound``).  A uniform
  frame (MOLAR's edited model) maps values by weight_scale x scale, exact as above.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

#: Log columns that are objective values (mapped by ``value_scale``) and coefficients (by ``scale``).
VALUE_KEYS = ("objective", "lower_bound", "incumbent")
COEFFICIENT_KEYS = ("big_m",)


def power_of_two_above(x):
    """The power of two 2^e with x < 2^e <= 2 x (1 where x is 0): dividing by it is exact."""
    return np.where(x > 0, np.ldexp(1.0, np.frexp(x)[1]), 1.0)


def normalizing_root(objective: float) -> float | None:
    """The power of 2 nearest sqrt(objective) (None when the objective is 0).

    Dividing y by it divides a quadratic objective by its square, a power of 4 within a factor
    2 of the objective: exact in floating point, and the twin's objective is near 1.
    """
    if not objective > 0:
        return None
    mantissa, exponent = np.frexp(objective)   # objective = mantissa 2^exponent, mantissa in [1/2, 1)
    return float(np.ldexp(1.0, int(exponent) // 2))


def centring(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, shift) over axis 0, by the corrected two-pass algorithm (module docstring): the
    level is mean + shift, removed as ``centre`` does, in two subtractions.

    A column whose values are all equal gets that value as its mean and no shift, so it
    centres to exactly 0 (not to rounding noise a fit could pick up).
    """
    values = np.asarray(values, dtype=float)
    mean = values.mean(axis=0)
    shift = (values - mean).mean(axis=0)
    if values.ndim == 2 and len(values):
        exact = np.all(values == values[0], axis=0)
        mean[exact], shift[exact] = values[0, exact], 0.0
    return mean, shift


def centre(values, mean, shift) -> np.ndarray:
    """values - mean - shift, in that order: the first subtraction of values near their mean is
    exact, so what is left rounds relative to the spread, not to the level."""
    return (np.asarray(values, dtype=float) - mean) - shift


def centred(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(level, centred values) of ``values`` over axis 0 (``centring``)."""
    mean, shift = centring(values)
    return mean + shift, centre(values, mean, shift)


@dataclass(frozen=True, eq=False)
class Inverse:
    """What maps a twin's answers back: estimate = offset + scale * twin estimate, objective
    values and bounds times ``value_scale`` (None: not mapped, they are recomputed on the
    original), dual points times ``dual_scale``.  Powers of 2 make every map but the offset exact."""

    scale: Any = 1.0
    offset: Any = 0.0
    value_scale: float | None = 1.0
    dual_scale: float = 1.0

    def estimate(self, twin_estimate):
        """A twin's estimate (coefficients, or an estimate record with a ``mapped`` method that
        maps each of its coefficient arrays) on the original problem."""
        if hasattr(twin_estimate, "mapped"):
            return twin_estimate.mapped(self.estimate)
        return self.offset + self.scale * np.asarray(twin_estimate, dtype=float)

    def to_twin(self, estimate):
        """An original estimate (e.g. a warm start) in the twin's units."""
        return (np.asarray(estimate, dtype=float) - self.offset) / self.scale

    def value(self, twin_value):
        """A twin's objective value or bound on the original problem (None stays None)."""
        if twin_value is None:
            return None
        if self.value_scale is None:
            raise ValueError("this reduction maps no values back: recompute them on the original")
        return self.value_scale * twin_value

    def dual(self, twin_dual):
        return self.dual_scale * np.asarray(twin_dual, dtype=float)

    def row(self, row: dict) -> dict:
        """A log row of a run on the twin, its objective figures and Big-M in original units."""
        def back(key, value):
            if value is None:
                return value
            if key in VALUE_KEYS:
                return self.value(value)
            return self.scale * value if key in COEFFICIENT_KEYS and np.ndim(self.scale) == 0 else value
        return {key: back(key, value) for key, value in row.items()}

    def log(self, rows: list[dict]) -> list[dict]:
        """Log rows of a run on the twin in original units (``row``)."""
        return [self.row(row) for row in rows]

    def run(self, run):
        """A run record on the twin (``estimate``, ``objective``, ``lower_bound``, ``log``) on
        the original problem."""
        return replace(run, estimate=self.estimate(run.estimate), objective=self.value(run.objective),
                       lower_bound=self.value(run.lower_bound), log=self.log(run.log),
                       native=dict(run.native))

    def then(self, outer: "Inverse") -> "Inverse":
        """This inverse followed by ``outer`` (the inverse of the reduction applied before)."""
        values = (None if self.value_scale is None or outer.value_scale is None
                  else outer.value_scale * self.value_scale)
        return Inverse(outer.scale * self.scale, outer.offset + outer.scale * self.offset, values,
                       outer.dual_scale * self.dual_scale)


class Reduction(Protocol):
    def apply(self, problem) -> tuple[Any, Inverse]: ...


@dataclass(frozen=True)
class Chain:
    """Reductions applied in order; the inverse undoes them in reverse."""

    reductions: tuple[Reduction, ...]

    def apply(self, problem):
        inverse = Inverse()
        for reduction in self.reductions:
            problem, step = reduction.apply(problem)
            inverse = step.then(inverse)
        return problem, inverse


@dataclass(frozen=True)
class ObjectiveScale:
    """y over ``root``, a power of 2, so a quadratic objective is over root^2 (``problem.scaled``
    builds the twin: it knows which of its terms are not quadratic in y)."""

    root: float = 1.0

    @classmethod
    def near(cls, objective: float) -> "ObjectiveScale":
        """The scale that puts ``objective`` near 1 (``normalizing_root``; 1 when it is 0)."""
        return cls(normalizing_root(objective) or 1.0)

    @property
    def inverse(self) -> Inverse:
        return Inverse(scale=self.root, value_scale=self.root * self.root)

    def apply(self, problem):
        return problem.scaled(self.root), self.inverse


@dataclass(frozen=True)
class Level:
    """y without a common ``level``, absorbed by the intercepts, so the minimum is unchanged
    (``problem.shifted`` builds the twin, ``problem.level_offset`` says where the level goes
    in an estimate)."""

    level: float = 0.0

    def apply(self, problem):
        return problem.shifted(self.level), Inverse(offset=problem.level_offset(self.level))


@dataclass(frozen=True)
class Responses:
    """ARMUL's responses and penalty scale c, for coefficient rows of ``columns`` entries whose
    column 0 is the intercept where a level is removed: the problem ``ResponseScale`` reduces.

    F(Theta, Gamma; y, c) = root^2 F(Theta / root, Gamma / root; y / root, c / root) (every
    term is of degree 2 in (y, Theta, Gamma, lambda)), and with a column of ones a common level
    in y moves only the intercepts of every theta_j and of the centers."""

    ys: tuple
    c: float
    columns: int

    def scaled(self, root: float) -> "Responses":
        return Responses(tuple(y / root for y in self.ys), self.c / root, self.columns)

    def shifted(self, level: float) -> "Responses":
        return Responses(tuple(y - level for y in self.ys), self.c, self.columns)

    def level_offset(self, level: float) -> np.ndarray:
        offset = np.zeros(self.columns)
        offset[0] = level
        return offset


@dataclass(frozen=True)
class ResponseScale:
    """ARMUL's squared loss on y = level + factor * y': ``Chain`` of ``Level`` (the pooled mean,
    with an intercept) and ``ObjectiveScale`` (the power of 2 nearest the RMS of y - level), so
    every tolerance of the solve is relative to the data's own scale."""

    level: float = 0.0
    factor: float = 1.0

    @classmethod
    def of(cls, ys, has_intercept: bool) -> "ResponseScale":
        y = np.concatenate([np.asarray(v, dtype=float) for v in ys])
        level = float(centred(y)[0]) if has_intercept else 0.0
        return cls(level, normalizing_root(float(np.mean((y - level) ** 2))) or 1.0)

    @property
    def chain(self) -> Chain:
        return Chain((Level(self.level), ObjectiveScale(self.factor)))

    def apply(self, problem: Responses) -> tuple[Responses, Inverse]:
        return self.chain.apply(problem)

    def inverse(self, columns: int) -> Inverse:
        """The inverse for coefficient rows of ``columns`` entries."""
        return self.apply(Responses((), 0.0, columns))[1]

    def run(self, run):
        """A run on the twin (its estimate an ``ArmulEstimate``) with estimates and values on
        the data's scale."""
        return self.inverse(np.shape(run.estimate.theta)[-1]).run(run)

    def to_original(self, rows) -> np.ndarray:
        """Coefficient rows on the twin's scale -> the data's."""
        return self.inverse(np.shape(rows)[-1]).estimate(rows)

    def to_scaled(self, rows) -> np.ndarray:
        return self.inverse(np.shape(rows)[-1]).to_twin(rows)

    def value(self, twin_value):
        """An objective or bound on the twin's scale -> the data's (None stays None)."""
        return ObjectiveScale(self.factor).inverse.value(twin_value)


@dataclass(frozen=True)
class Frame:
    """Values seen as (b - centre) / scale per coordinate, weights as w / weight_scale (powers of
    2): for a shift- and scale-equivariant problem such as the weighted median, a solution maps
    back as centre + scale * z and a dual point as weight_scale * u."""

    centre: np.ndarray
    scale: np.ndarray
    weight_scale: float

    @classmethod
    def spanning(cls, low, high, largest_weight: float, uniform: bool = False):
        """The frame putting [low, high] into [-1, 1] per coordinate (one scale for all with
        ``uniform``: then objective values map back too) and the weights at most 1."""
        low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        centre = low / 2 + high / 2
        scale = power_of_two_above(np.maximum(high - centre, centre - low))
        if uniform:
            scale = np.full_like(scale, np.max(scale))
        return cls(centre, scale, float(power_of_two_above(largest_weight)))

    @property
    def uniform(self) -> bool:
        return bool(np.all(self.scale == self.scale.flat[0]))

    @property
    def inverse(self) -> Inverse:
        values = self.weight_scale * float(self.scale.flat[0]) if self.uniform else None
        return Inverse(scale=self.scale, offset=self.centre, value_scale=values,
                       dual_scale=self.weight_scale)

    def apply(self, problem):
        """``problem``: (values, weights) -> the twin's (values, weights)."""
        return self.to_unit(*problem), self.inverse

    def to_unit(self, values, weights) -> tuple[np.ndarray, np.ndarray]:
        return ((np.asarray(values, dtype=float) - self.centre) / self.scale,
                np.asarray(weights, dtype=float) / self.weight_scale)


@dataclass(frozen=True)
class Standardization:
    """Features seen as (x - x_level) / x_scale and y as y - y_level (per task or pooled: the
    arrays broadcast against coefficient rows).  A fit b' + X' c' on the twin is b + X c on the
    data with c = c' / x_scale and b = y_level + b' - sum_j c_j x_level_j: the one inverse of
    standardization (``Scaler.coef_to_original``, ARMUL's reported coefficients)."""

    x_level: Any = 0.0
    x_scale: Any = 1.0
    y_level: Any = 0.0

    def coefficients(self, coef, intercept) -> tuple[np.ndarray, np.ndarray]:
        """Twin (coefficients, intercepts) -> the data's."""
        coef = np.asarray(coef, dtype=float) / self.x_scale
        return coef, self.y_level + np.asarray(intercept, dtype=float) - np.sum(coef * self.x_level, axis=-1)

    def rows(self, rows, intercept_first: bool) -> tuple[np.ndarray, np.ndarray]:
        """Twin coefficient rows (the intercept in column 0 when ``intercept_first``; else the
        intercept is 0 and nothing was centred) -> (coefficients, intercepts) on the data."""
        rows = np.atleast_2d(np.asarray(rows, dtype=float))
        if intercept_first:
            return self.coefficients(rows[:, 1:], rows[:, 0])
        return self.coefficients(rows, np.zeros(len(rows)))
