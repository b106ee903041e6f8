"""bnb's inner loop, compiled by numba: the climbs' dual evaluations, and the climbs themselves.

A node's bound takes about a hundred evaluations of the smoothed dual, each two products of
the tasks' designs with the residuals and a projection per budget row (``search_dual``) or a
softmin over each column's task sets (``set_dual``).  At n_k = 50, p = 250 numpy spent most of
an evaluation in call overhead, not arithmetic (benchmarks/HISTORY.md, "bnb's climbs compiled"); driving
the compiled evaluations from Python's L-BFGS-B loop then cost as much again, so the trees climb
wholly here (``climb``, compiled once for each evaluation: ``SEARCH`` and ``SETS``).  ``climb``
releases the GIL, so that while this process climbs, ``pool``'s feeder thread can take the
worker's bound and send it the next node: holding it left the worker idle until a climb ended.

Nothing here decides a bound: the climb only looks for a good dual point, and ``NodeBound.safe_dual``
(numpy, with its rounding-error terms) scores the point it keeps.  So the kernels may reassociate
sums (``FASTMATH``: vectorized loops), which changes only the last bits of the climb's path.

The designs come stacked, ``X`` (n, p) and ``y`` (n,), task k's rows ``ends[k]:ends[k + 1]``;
every array C-contiguous, float64 but ``ends`` (int64) and the node's ``states`` (int8).  The
kernels are compiled for those types when this module is first imported (16-40 s measured, once
per Python environment: numba caches them on disk beside the package, or in NUMBA_CACHE_DIR), so no
fit's time limit pays for a compilation (``FitResult.compile_time`` reports it).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

#: Reassociation and fused multiply-adds only: no assumption that values are finite.
FASTMATH = {"reassoc", "contract"}
#: A node's entry states (``tree`` and the bound families use these): free, fixed out, fixed in.
FREE, OUT, IN = -1, 0, 1
_VECTOR, _MATRIX, _INDEX = types.float64[::1], types.float64[:, ::1], types.int64[::1]


@njit([(_MATRIX, _INDEX, _VECTOR)], cache=True, fastmath=FASTMATH)
def products(X, ends, r):
    """(K, p) X_k' r_k, for the residuals at the start of r."""
    K, p = ends.shape[0] - 1, X.shape[1]
    out = np.zeros((K, p))
    for k in range(K):
        for i in range(ends[k], ends[k + 1]):
            ri = r[i]
            for j in range(p):
                out[k, j] += X[i, j] * ri
    return out


@njit([(_MATRIX, _VECTOR, _INDEX, _VECTOR, _MATRIX, _VECTOR)], cache=True, fastmath=FASTMATH)
def loss_part(X, y, ends, point, penalty_slopes, gradient):
    """sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k; writes (y_k - r_k - X_k g_k) / n_k, its gradient in r_k
    less that of a penalty part whose gradient in v_k = X_k'r_k / n_k is g_k (``penalty_slopes``
    (K, p)), into the first n entries of ``gradient``."""
    K, p = ends.shape[0] - 1, X.shape[1]
    base = 0.0
    for k in range(K):
        inverse = 1.0 / (ends[k + 1] - ends[k])
        part = 0.0
        for i in range(ends[k], ends[k + 1]):
            ri = point[i]
            part += y[i] * ri - ri * ri / 2
            fitted = 0.0
            for j in range(p):
                fitted += X[i, j] * penalty_slopes[k, j]
            gradient[i] = (y[i] - ri - fitted) * inverse
        base += part * inverse
    return base


@njit([(_VECTOR, types.int64)], cache=True)
def capped(scores, budget):
    """clip(scores - t, 0, 1) with the least t >= 0 keeping the sum <= budget, exactly.

    The sum is piecewise linear and decreasing in t with breaks at the scores and the scores - 1;
    it is evaluated at the breaks in order and interpolated on the segment that crosses the budget.
    Only scores above L = w_(budget+1) - 1 (the (budget+1)-th largest minus 1) take part: at t < L
    budget + 1 entries would be 1, so t >= L, where the others are 0 (most scores, at p >> s).
    Breaks below 0 are raised to 0; equal breaks have equal sums, so the crossing segment has two
    distinct ends.
    """
    z = np.minimum(np.maximum(scores, 0.0), 1.0)
    if z.sum() <= budget:
        return z
    w = np.sort(scores)
    w = w[np.searchsorted(w, w[w.shape[0] - budget - 1] - 1.0, side="right"):]
    m = w.shape[0]
    breaks = np.maximum(np.sort(np.concatenate((w, w - 1.0))), 0.0)
    prefix = np.zeros(m + 1)
    for i in range(m):
        prefix[i + 1] = prefix[i] + w[i]
    t, previous, previous_total = breaks[-1], 0.0, np.inf
    for b in range(breaks.shape[0]):
        ones = np.searchsorted(w, breaks[b] + 1.0, side="left")      # w[ones:] >= t + 1
        partial = np.searchsorted(w, breaks[b], side="right")        # w[partial:ones] in (t, t + 1)
        total = (m - ones) + (prefix[ones] - prefix[partial]) - (ones - partial) * breaks[b]
        if total <= budget:
            t = previous + (previous_total - budget) * (breaks[b] - previous) / (previous_total - total)
            break
        previous, previous_total = breaks[b], total
    return np.minimum(np.maximum(scores - t, 0.0), 1.0)


@njit([(_MATRIX, _MATRIX, _MATRIX, types.float64, types.boolean)], cache=True, fastmath=FASTMATH)
def boxed_weights(v, low, high, lam, boxed):
    """(weights, their slopes in v): w = max over low <= c <= high of v c - lam c^2 / 2, the
    conjugate of the ridge term in its box, and the maximizer c = clip(v / lam, low, high), w's
    derivative in v; without a box (``boxed`` False) v^2 / (2 lam) and v / lam, skipping the clip
    (a climb evaluates this about a hundred times a node)."""
    if not boxed:
        return v * v / (2 * lam), v / lam
    c = np.minimum(np.maximum(v / lam, low), high)
    return v * c - lam / 2 * c * c, c


@njit([(_MATRIX, _VECTOR, _INDEX, _VECTOR, _MATRIX, types.float64, _MATRIX, _MATRIX, types.boolean, types.float64,
        types.int8[:, ::1], types.int64, _VECTOR)], cache=True, fastmath=FASTMATH)
def search_dual(X, y, ends, point, slope_scale, lam, low, high, boxed, mu, states, s, gradient):
    """``GreedyBound.dual``: (D at the node, D smoothed by -(mu/2)||z_free||^2); writes the smoothed D's
    gradient into ``gradient``.

    v = slope_scale * X'r, weights ``boxed_weights`` (v^2 / (2 lam) without a box), summed over the
    tasks when ``states`` has one row (a common support: a shared column takes every task's weight)
    and per task otherwise.  Each budget row's fixed-in entries have z = 1; D takes the s - |in|
    heaviest free ones, the smoothed D its free z = ``capped``(weight / mu, s - |in|).
    """
    v = products(X, ends, point) * slope_scale
    weights, slopes = boxed_weights(v, low, high, lam, boxed)
    if states.shape[0] == 1:
        weights = weights.sum(axis=0).reshape(1, -1)
    z = np.zeros(weights.shape)
    heaviest, free_squares = 0.0, 0.0
    for row in range(states.shape[0]):
        free = np.flatnonzero(states[row] == FREE)
        inside = np.flatnonzero(states[row] == IN)
        budget = s - inside.shape[0]
        z[row, inside] = 1.0
        heaviest += weights[row, inside].sum()
        if free.shape[0] and budget > 0:
            free_weights = weights[row, free]
            chosen = capped(free_weights / mu, budget)
            z[row, free] = chosen
            free_squares += (chosen * chosen).sum()
            heaviest += np.sort(free_weights)[max(free.shape[0] - budget, 0):].sum()
    base = loss_part(X, y, ends, point, z * slopes, gradient)
    return base - heaviest, base - (z * weights).sum() + mu / 2 * free_squares


@njit([(_MATRIX, _VECTOR, _INDEX, _VECTOR, _MATRIX, types.float64, _MATRIX, _VECTOR, types.float64, _VECTOR,
        types.boolean[:, ::1], types.float64, types.int64, types.float64, _VECTOR)],
      cache=True, fastmath=FASTMATH)
def set_dual(X, y, ends, point, slope_scale, price_unit, sets, set_cost, inverse, coupling, allowed_sets, mu, s,
             negligible, gradient):
    """``SetBound.dual``: (D(r, pi), D smoothed by a softmin at temperature mu over each column's
    sets); writes the smoothed D's gradient into ``gradient`` (the K prices' entries last).  The point's
    last K entries are the prices in units of ``price_unit``: pi = max(entry, 0) ``price_unit``.

    Column j's set S (a row of ``sets``, allowed by the node where ``allowed_sets``) costs
    sum_(k in S) pi_k + ``set_cost``_S - g_S(v_j), g_S(v) = ``inverse`` ||v_S||^2 + ``coupling``_S
    (sum_(k in S) v_k)^2; D = base - s sum pi + sum_j min_S, the smoothed D the softmin, whose
    chances weight each set's z and slopes.  A set whose softmin weight is below exp(``negligible``)
    gets none (no exp of -inf)."""
    K, p = slope_scale.shape
    n, n_sets = ends[-1], sets.shape[0]
    v = products(X, ends, point) * slope_scale
    prices = np.maximum(point[n:], 0.0) * price_unit
    # by sets, each a loop along the columns: these vectorize, and exp runs only where it counts
    sums, squares, totals = np.zeros((n_sets, p)), np.zeros((n_sets, p)), np.empty((n_sets, p))
    least = np.full(p, np.inf)
    for S in range(n_sets):
        fixed_cost = set_cost[S]
        for k in range(K):
            if sets[S, k] > 0.5:
                fixed_cost += prices[k]
                for j in range(p):
                    squares[S, j] += v[k, j] * v[k, j]
                    sums[S, j] += v[k, j]
        for j in range(p):
            total = fixed_cost - inverse * squares[S, j] - coupling[S] * sums[S, j] * sums[S, j]
            totals[S, j] = total if allowed_sets[S, j] else np.inf
            least[j] = min(least[j], totals[S, j])
    chances = np.empty((n_sets, p))
    for S in range(n_sets):
        for j in range(p):
            chances[S, j] = (least[j] - totals[S, j]) / mu
    for S in range(n_sets):   # a column's least set has weight 1; most others are negligible
        for j in range(p):
            shifted = chances[S, j]
            chances[S, j] = 1.0 if shifted == 0.0 else np.exp(shifted) if shifted > negligible else 0.0
    mass = chances.sum(axis=0)
    slopes, z = np.zeros((K, p)), np.zeros((K, p))
    for S in range(n_sets):
        for j in range(p):
            chances[S, j] /= mass[j]
        for k in range(K):
            if sets[S, k] > 0.5:
                for j in range(p):
                    z[k, j] += chances[S, j]
                    slopes[k, j] += chances[S, j] * 2 * coupling[S] * sums[S, j]
    slopes += z * v * (2 * inverse)
    base = loss_part(X, y, ends, point, slopes * (slope_scale != 0), gradient)
    for k in range(K):
        gradient[n + k] = (z[k].sum() - s) * price_unit
    budget = s * prices.sum()
    return base - budget + least.sum(), base - budget + (least - mu * np.log(mass)).sum()


@njit([types.float64(_VECTOR, types.float64, _VECTOR, types.float64)], cache=True)
def _kept(point, value, best_point, best_value):
    """The larger of ``value`` and ``best_value``; ``point`` copied into ``best_point`` when it is ``value``."""
    if value > best_value:
        best_point[:] = point
        return value
    return best_value


#: The evaluations ``climb`` is compiled for: ``search_dual``'s arguments but the point and gradient,
#: (X, y, ends, slope_scale, lam, low, high, boxed, mu, states, s), and ``set_dual``'s, (X, y, ends, slope_scale, price_unit,
#: sets, set_cost, inverse, coupling, allowed_sets, mu, s, negligible).
SEARCH = types.Tuple((_MATRIX, _VECTOR, _INDEX, _MATRIX, types.float64, _MATRIX, _MATRIX, types.boolean,
                      types.float64, types.int8[:, ::1], types.int64))
SETS = types.Tuple((_MATRIX, _VECTOR, _INDEX, _MATRIX, types.float64, _MATRIX, _VECTOR, types.float64, _VECTOR,
                    types.boolean[:, ::1], types.float64, types.int64, types.float64))


def _dual(evaluation, point, gradient):
    """(D, smoothed D) at ``point``, the smoothed D's gradient written into ``gradient``: ``search_dual`` or
    ``set_dual``, chosen by the type of ``evaluation`` when ``climb`` is compiled (a ``SEARCH`` or
    ``SETS`` tuple).  Compiled code only."""
    raise NotImplementedError("bnb.kernels._dual runs inside compiled code only")


@overload(_dual)
def _dual_of(evaluation, point, gradient):
    if len(evaluation) == len(SEARCH):
        def search(evaluation, point, gradient):
            X, y, ends, slope_scale, lam, low, high, boxed, mu, states, s = evaluation
            return search_dual(X, y, ends, point, slope_scale, lam, low, high, boxed, mu, states, s, gradient)
        return search

    def priced(evaluation, point, gradient):
        X, y, ends, slope_scale, price_unit, sets, set_cost, inverse, coupling, allowed_sets, mu, s, negligible = evaluation
        return set_dual(X, y, ends, point, slope_scale, price_unit, sets, set_cost, inverse, coupling, allowed_sets, mu,
                        s, negligible, gradient)
    return priced


@njit([(kind, _VECTOR, types.int64, types.int64, types.int64, types.float64, types.float64, _VECTOR, types.float64)
       for kind in (SEARCH, SETS)], cache=True, fastmath=FASTMATH, nogil=True)
def climb(evaluation, point, floor_from, maxiter, memory, least_gain, upper, best_point, best_value):
    """One smoothing stage of ``NodeBound.bound``: L-BFGS on minus the smoothed D (``_dual``) from ``point``,
    its entries from ``floor_from`` on (a priced tree's prices) kept >= 0.

    Returns (the last iterate, the best D seen, whether some D reached ``upper``: the node is pruned
    and the climb stopped there); a point whose D beats ``best_value`` is copied into ``best_point``.
    The line search bisects for a weak Wolfe step (sufficient decrease, and a slope no longer steep),
    doubling while the step is too short: backtracking alone never lengthens a step, and stopped
    climbs on small gains.  The smoothed -D is convex, so every pair's curvature s'y >= 0 (flat ones
    are dropped); the first step is scaled to length 1, as L-BFGS-B's.  A price at 0 whose gradient
    would take it below 0 is held there for the step; a trial step's prices are clipped at 0, and
    such a step needs only sufficient decrease along the move it made.  A stage stops after
    ``maxiter`` iterations, once a step gains less than ``least_gain``, when 20 trial steps along a
    direction find no decrease, or at a zero gradient.
    """
    n = point.shape[0]
    steps, changes, rho, alpha = np.zeros((memory, n)), np.zeros((memory, n)), np.zeros(memory), np.zeros(memory)
    x, g, trial_g = point.copy(), np.empty(n), np.empty(n)
    x[floor_from:] = np.maximum(x[floor_from:], 0.0)
    value, smooth = _dual(evaluation, x, g)
    best_value = _kept(x, value, best_point, best_value)
    if value >= upper:
        return x, best_value, True
    f, g = -smooth, -g
    stored, newest = 0, 0
    for _ in range(maxiter):
        free_g = g.copy()   # the gradient without the held prices
        for i in range(floor_from, n):
            if x[i] <= 0.0 and g[i] > 0.0:
                free_g[i] = 0.0
        direction = -free_g   # the two-loop recursion: direction = -H g
        for back in range(stored):
            i = (newest - back) % memory
            alpha[i] = rho[i] * np.dot(steps[i], direction)
            direction -= alpha[i] * changes[i]
        if stored:
            direction *= np.dot(steps[newest], changes[newest]) / np.dot(changes[newest], changes[newest])
        for back in range(stored - 1, -1, -1):
            i = (newest - back) % memory
            direction += (alpha[i] - rho[i] * np.dot(changes[i], direction)) * steps[i]
        for i in range(floor_from, n):
            if x[i] <= 0.0 and g[i] > 0.0:
                direction[i] = 0.0
        slope = np.dot(free_g, direction)
        if not slope < 0:   # not a descent direction (rounding): restart from the gradient
            direction, stored = -free_g, 0
            slope = np.dot(free_g, direction)
            if not slope < 0:   # a zero (or NaN) gradient: the point is stationary, nothing to climb
                break
        step = 1.0 if stored else min(1.0, 1.0 / np.sqrt(-slope))
        shorter, longer = 0.0, np.inf   # the weak Wolfe step lies between them
        for _ in range(20):
            trial = x + step * direction
            clipped = False
            for i in range(floor_from, n):
                if trial[i] < 0.0:
                    trial[i], clipped = 0.0, True
            value, smooth = _dual(evaluation, trial, trial_g)
            best_value = _kept(trial, value, best_point, best_value)
            if value >= upper:
                return trial, best_value, True
            descent = -smooth <= f + 1e-4 * (np.dot(g, trial - x) if clipped else step * slope)
            if not descent:
                longer = step
            elif not clipped and -np.dot(trial_g, direction) < 0.9 * slope:   # still steep: a longer step gains more
                shorter = step
            else:
                break
            step = (shorter + longer) / 2 if longer < np.inf else 2 * step
        else:
            if not descent:
                break
        trial_g = -trial_g
        moved, change = trial - x, trial_g - g
        curvature = np.dot(moved, change)
        if curvature > 1e-12 * np.dot(change, change):   # else a flat pair, not kept
            newest = (newest + 1) % memory
            steps[newest], changes[newest], rho[newest] = moved, change, 1.0 / curvature
            stored = min(stored + 1, memory)
        gain = f + smooth
        x, f, g, trial_g = trial, -smooth, trial_g, g
        if gain <= least_gain:
            break
    return x, best_value, False
