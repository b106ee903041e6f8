"""The safe-bound numerics every family's certificate uses, in one place: bounds on float64
rounding error, so that a bound computed in floats is lowered below the exact value it stands
for (Higham, Accuracy and Stability of Numerical Algorithms, Thm 3.1 and 3.1's gamma_n;
Neumaier and Shcherbina, Math. Prog. 2004).

- ``rounding_factor(n)``: gamma_n with eps (twice the unit roundoff: conservative), the allowance
  of the least-squares, ARMUL, OLS-baseline and assignment-tree certificates;
- ``gamma(m)``: Higham's gamma_m with the unit roundoff u = eps / 2, bnb's node bounds;
- ``lowered``, ``lowered_sum``, ``rounded_up``, ``safe_min_eigenvalue``: the operations built on
  them.  A rational bound (``fractions.Fraction``) is rounded up only where it bounds an error.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

#: Machine epsilon of float64 (twice the unit roundoff: the allowances are conservative).
EPS = float(np.finfo(float).eps)


def rounding_factor(n) -> float:
    """gamma_n = n eps / (1 - n eps): a float64 sum of n products is within gamma_n times the
    sum of their absolute values (Higham, Thm 3.1; Neumaier and Shcherbina, Math. Prog. 2004)."""
    return n * EPS / (1 - n * EPS)


def gamma(m: int) -> float:
    """gamma_m = m u / (1 - m u), u = eps / 2: the relative error bound of m rounded operations."""
    u = EPS / 2
    return m * u / (1 - m * u)


def lowered(base, error, penalty):
    """base - penalty, lowered by the error bounds: ``error`` on base, gamma_3 on the two subtractions."""
    return base - error - penalty - gamma(3) * (abs(base) + error + abs(penalty))


def lowered_sum(total: float, terms: int) -> float:
    """A float sum of ``terms`` non-negative floats, lowered below the exact sum."""
    return max(0.0, total * _lowering(terms))


@functools.cache
def _lowering(terms: int) -> float:
    """1 - gamma_(terms + 1): ``lowered_sum``'s factor, made once per count (the clustered tree
    lowers millions of sums of K + 1 terms)."""
    return 1 - rounding_factor(terms + 1)


def rounded_up(value: Fraction) -> float:
    """The smallest float at or above the rational ``value`` (``float()`` rounds to nearest)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= value else float(np.nextafter(nearest, np.inf))


def safe_min_eigenvalue(matrix, n_terms) -> float:
    """A lower bound on the smallest eigenvalue of the exact PSD matrix of which ``matrix`` is
    the float64 accumulation of n_terms products: less its rounding and the eigensolver's
    backward error (a few d eps ||matrix||), both below gamma * trace."""
    d = matrix.shape[0]
    return float(np.linalg.eigvalsh(matrix)[0]
                 - rounding_factor(n_terms + 4 * d + 2) * np.trace(matrix))
