"""Bounds on floating-point rounding error, so that every node bound bnb reports is proven: each
bound family evaluates its dual in floats and lowers the result by these (Higham, Accuracy and
Stability of Numerical Algorithms, 3.1)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def lowered(base, error, penalty):
    """base - penalty, lowered by the error bounds: ``error`` on base, gamma_3 on the two subtractions."""
    return base - error - penalty - gamma(3) * (abs(base) + error + abs(penalty))


def rounded_up(value: Fraction) -> float:
    """The smallest float at or above the rational ``value`` (``float()`` rounds to nearest)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= value else float(np.nextafter(nearest, np.inf))


def gamma(m: int) -> float:
    """gamma_m = m u / (1 - m u), u = eps / 2: the relative error bound of m rounded operations."""
    u = np.finfo(float).eps / 2
    return m * u / (1 - m * u)
