"""MOLAR: covariate-wise weighted median of per-task OLS estimates, then thresholding.

The certified part of MOLAR is the weighted-median problem, solved for all
covariates at once:

    minimize over z in R^d    sum_k sum_m w_m |z_k - b_mk|                 (P)

with b_m the OLS estimate of task m and w_m >= 0 its weight (n_m / sigma_m^2).
Weights are one per task (M,) or one per entry (M, d); an entry of weight 0 is
absent (a coordinate task m does not identify): it adds nothing to (P), the LP
has no row for it and the ranges below ignore it, so each covariate needs one
entry of positive weight.  Its LP form, with deviation variables dev_mk >= |z_k - b_mk|, is built by
``build_median_lp``.  The dual of (P) is

    maximize  sum_k sum_m u_mk b_mk   s.t.  |u_mk| <= w_m,  sum_m u_mk = 0   (D)

so any such u gives a lower bound; ``median_dual_point`` builds the optimal
one for a weighted median, ``project_dual`` repairs solver duals into a
feasible one, and ``dual_bound`` evaluates it so that rounding can only lower
it, at any common level of the data.  Solvers see the problem in a
``MedianFrame``: each covariate centred and scaled to [-1, 1], the weights to
at most 1 (the median is shift- and scale-equivariant), so their absolute
tolerances are relative to the data.

Thresholding (Algorithm 1 of the paper) then moves each task's coordinate to
the global estimate when the two differ by less than
``gamma_m * sqrt([(X_m^T X_m)^{-1}]_kk)`` (hard) or shrinks it toward the
global estimate by that amount (soft).
"""

from __future__ import annotations

import math
import numpy as np

from .._lazy import pyo
from ..errors import InvalidDataError, InvalidParameterError
from ..reductions import Frame
from ..rounding import gamma


def _check_median_inputs(values, weights, axis):
    values = np.asarray(values, dtype=float)
    if values.ndim == 0:
        raise InvalidDataError("weighted_median: values must have at least one dimension.")
    values = np.moveaxis(values, axis, 0)
    weights = np.asarray(weights, dtype=float)
    if weights.ndim == 1:
        if weights.shape[0] != values.shape[0]:
            raise InvalidDataError(
                f"weighted_median: {weights.shape[0]} weights for {values.shape[0]} values "
                f"along axis {axis}.")
        weights = weights.reshape((-1,) + (1,) * (values.ndim - 1))
    else:
        weights = np.moveaxis(weights, axis, 0)
    weights = np.broadcast_to(weights, values.shape)
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(weights))):
        raise InvalidDataError("weighted_median: values and weights must be finite.")
    if np.any(weights < 0):
        raise InvalidParameterError("weighted_median: weights must be non-negative.")
    if np.any(weights.sum(axis=0) <= 0):
        raise InvalidParameterError("weighted_median: the weights of each column must not all be zero.")
    return values, weights


def weighted_median(values, weights, axis: int = 0) -> np.ndarray:
    """Weighted median along ``axis``: a minimizer of ``z -> sum_m w_m |z - values_m|``.

    Vectorized over the other axes.  Returns the lower weighted median, the
    smallest value whose cumulative weight reaches half the total, which is
    always a minimizer (ties and zero weights included).
    ``weights`` is 1-D (one per position along ``axis``) or the shape of ``values``.
    """
    values, weights = _check_median_inputs(values, weights, axis)
    order = np.argsort(values, axis=0, kind="stable")
    sorted_values = np.take_along_axis(values, order, axis=0)
    cumulative = np.cumsum(np.take_along_axis(weights, order, axis=0), axis=0)
    first = np.argmax(2 * cumulative >= cumulative[-1], axis=0)
    return np.take_along_axis(sorted_values, first[None], axis=0)[0]


def entry_weights(weights, shape) -> np.ndarray:
    """The (M, d) weight of every entry from one weight per task (M,) or per entry (M, d)."""
    weights = np.asarray(weights, dtype=float)
    return np.broadcast_to(weights[:, None] if weights.ndim == 1 else weights, shape)


def present_range(values, weights) -> tuple[np.ndarray, np.ndarray]:
    """Per covariate, the smallest and largest value of positive weight: they hold a minimizer of (P)."""
    present = entry_weights(weights, np.shape(values)) > 0
    return (np.where(present, values, np.inf).min(axis=0),
            np.where(present, values, -np.inf).max(axis=0))


def median_objective(z, values, weights) -> float:
    """sum_k sum_m w_mk |z_k - values_mk| for values (M, d), weights (M,) or (M, d), z (d,).

    Accurate at any common level of the data: each term rounds relative to
    |values_mk - z_k| and the terms are non-negative, so nothing cancels.
    """
    values = np.asarray(values, dtype=float)
    return float(np.sum(entry_weights(weights, values.shape) * np.abs(values - z[None, :])))


def median_dual_point(values, weights, z) -> np.ndarray:
    """The dual point of (D) matching a weighted median z: u = w sign(b - z), ties take the balance.

    z is first moved to the nearest present value of its covariate (a solver's median
    may sit a rounding error off it; an optimum is always attained at a value).
    Where that is a weighted median the balance fits within the ties' weights and
    the bound equals the objective; elsewhere ``project_dual`` keeps u feasible.
    """
    values = np.asarray(values, dtype=float)
    w = entry_weights(weights, values.shape)
    distance = np.where(w > 0, np.abs(values - np.asarray(z, dtype=float)[None, :]), np.inf)
    z = values[np.argmin(distance, axis=0), np.arange(values.shape[1])]
    u = w * np.sign(values - z[None, :])
    tie = (values == z[None, :]) & (w > 0)
    tie_weight = np.where(tie, w, 0.0).sum(axis=0)
    balance = -u.sum(axis=0)
    share = np.divide(balance, tie_weight, out=np.zeros_like(balance), where=tie_weight > 0)
    u = np.where(tie, w * share[None, :], u)
    return project_dual(u, weights)


def project_dual(u, weights) -> np.ndarray:
    """Make u feasible for (D): clip to |u_mk| <= w_m, then move each column's sum to zero.

    The excess of a column is removed from the entries in proportion to their
    room inside the box, which always suffices.
    """
    w = entry_weights(weights, np.shape(u))
    u = np.clip(np.asarray(u, dtype=float), -w, w)
    excess = u.sum(axis=0)
    room = np.where(excess > 0, u + w, w - u)
    total_room = room.sum(axis=0)
    fraction = np.divide(excess, total_room, out=np.zeros_like(excess), where=total_room > 0)
    return u - room * fraction[None, :]


def dual_bound(u, values, weights, z) -> float:
    """A float no larger than the exact optimum of (P), from any u (clipped to |u_mk| <= w_m).

    Weak duality with a centre c_k = z_k (clipped into the range [lo_k, hi_k] of the
    values of positive weight, which holds a minimizer z*_k) gives, exactly, for the float data b:

        OPT >= sum_mk u_mk (b_mk - c_k) - sum_k max((hi_k - c_k) r_k, (lo_k - c_k) r_k)

    where r_k = sum_m u_mk is the dual infeasibility rounding leaves (a bounded
    primal variable absorbs it, as in Neumaier and Shcherbina, "Safe bounds in
    linear and mixed-integer programming", Math. Prog. 2004).  Centring at the
    median keeps every term as small as the objective's, so a large common level
    cannot cancel.  The computed sum is then lowered by a rigorous bound on its
    rounding error: each term rounds twice and the sum N - 1 times, so the error
    is at most gamma_{N+1} sum |u (b - c)| (Higham, Accuracy and Stability, Lemma
    3.1), gamma_n = n eps / (1 - n eps) with eps = 2^-53 the unit roundoff; r_k
    is summed exactly rounded (math.fsum).
    The factors 2 gamma_{N+3} and 1 + 2 gamma_{N+3} (N = M d) also cover the few
    roundings of the correction itself, 2 (N + 3) smallest subnormals cover
    underflow, and the last subtraction is rounded down.
    """
    values = np.asarray(values, dtype=float)
    w = entry_weights(weights, values.shape)
    u = np.clip(np.asarray(u, dtype=float), -w, w)
    low, high = present_range(values, w)
    centre = np.clip(np.asarray(z, dtype=float), low, high)
    terms = u * (values - centre[None, :])
    residual = np.array([math.fsum(column) for column in u.T])
    reach = np.where(residual > 0, high - centre, centre - low)
    n = values.size + 3
    slack = (2 * gamma(n) * np.abs(terms).sum() + (1 + 2 * gamma(n)) * np.sum(reach * np.abs(residual))
             + 2 * n * np.finfo(float).smallest_subnormal)
    return float(np.nextafter(terms.sum() - slack, -np.inf))


class MedianFrame(Frame):
    """The ``reductions.Frame`` a solver sees (P) in: ``(b - centre) / scale`` and ``w / weight_scale``.

    The weighted median is shift- and scale-equivariant and (P)'s dual feasible set does not
    involve the values, so a solution maps back as ``z = centre + scale * z_unit`` and a dual
    point as ``u = weight_scale * u_unit``; the centre is the midrange of each covariate's
    present values, the scales powers of two (one for all covariates with ``uniform``).
    """

    @classmethod
    def of(cls, values, weights, uniform: bool = False) -> "MedianFrame":
        return cls.spanning(*present_range(np.asarray(values, dtype=float), weights),
                            float(np.max(weights)), uniform)


def build_median_lp(values, weights) -> pyo.ConcreteModel:
    """The weighted-median problem (P) for all covariates as one Pyomo LP.

    Components: ``z[k]`` (the medians), ``dev[m, k] >= 0``, constraints
    ``upper[m, k]: dev + z >= b`` and ``lower[m, k]: dev - z >= -b``, objective
    ``obj``, all over ``entries``, the (m, k) of positive weight.  Both duals are >= 0 (Pyomo's sign convention for a ``>=`` row
    written this way); the dual of ``upper`` minus that of ``lower`` is a point of (D).
    Hand it the data in a ``MedianFrame`` so that solver tolerances are relative.
    """
    values = np.asarray(values, dtype=float)
    w = entry_weights(weights, values.shape)
    model = pyo.ConcreteModel(name="weighted_median")
    model.covariates = pyo.RangeSet(0, values.shape[1] - 1, doc="covariate indices k of the stacked coefficients")
    model.entries = pyo.Set(initialize=[tuple(e) for e in np.argwhere(w > 0).tolist()], dimen=2,
                            doc="the (m, k) of positive weight (task m fits coefficient k)")
    model.z = pyo.Var(model.covariates, doc="z[k]: the global (median) coefficient k")
    model.dev = pyo.Var(model.entries, within=pyo.NonNegativeReals,
                        doc="dev[m, k] >= |z[k] - b_mk| (rows upper, lower): task m's distance to it")
    model.upper = pyo.Constraint(model.entries,
                                 rule=lambda m, i, k: m.dev[i, k] + m.z[k] >= float(values[i, k]),
                                 doc="upper[m, k]: dev[m, k] + z[k] >= b_mk")
    model.lower = pyo.Constraint(model.entries,
                                 rule=lambda m, i, k: m.dev[i, k] - m.z[k] >= -float(values[i, k]),
                                 doc="lower[m, k]: dev[m, k] - z[k] >= -b_mk")
    model.obj = pyo.Objective(expr=sum(float(w[i, k]) * model.dev[i, k] for i, k in model.entries),
                              doc="sum_mk w_mk dev[m, k], w_mk = n_m / sigma_m^2")
    return model


#: MOLAR's thresholding rules (``shrink``).
THRESHOLDS = ("hard", "soft")


def thresholds(c_gamma: float, sigma, n_samples, n_features, gram_inv_diag) -> np.ndarray:
    """Per-task, per-covariate thresholds gamma_m * sqrt([(X_m^T X_m)^{-1}]_kk).

    gamma_m = c_gamma * sqrt(ln(min(n_total / n_m, d_m))) * sigma_m (Theorem 1 of
    the paper, which needs c_gamma >= 1 for its guarantee); ``n_features`` is d
    for every task or each task's own d_m.  With one task, or d_m = 1, the log
    is 0 and MOLAR returns the OLS estimates.
    """
    n = np.asarray(n_samples, dtype=float)
    gamma = c_gamma * np.sqrt(np.log(np.minimum(n.sum() / n, n_features))) * np.asarray(sigma)
    return gamma[:, None] * np.sqrt(gram_inv_diag)


def shrink(local, global_coef, threshold, how: str) -> np.ndarray:
    """Hard or soft (``how``, checked by the callers' constraints) thresholding of the
    task-wise estimates toward the global one."""
    diff = local - global_coef[None, :]
    if how == "hard":
        return np.where(np.abs(diff) <= threshold, global_coef[None, :], local)
    return global_coef[None, :] + np.sign(diff) * np.maximum(np.abs(diff) - threshold, 0.0)
