"""The set-enumeration bound family: each column's task sets enumerated, for a Bbar term (and
for a Zbar term on few tasks).

With the Bbar term a column's coefficients are coupled through beta_bar, so its conjugate is no
longer a sum over tasks: the priced bound of ``zbar`` enumerates each column's 2^K task sets
(K <= ``scope.MAX_BBAR_TASKS``) with the exact conjugate of the ridge and Bbar terms on each set;
on a common support (``cs_bbar``) a column holds no task or all of them, two sets at any K.  For
few tasks the enumeration is also the faster way to the Zbar bound (the same minima and
softminima as the recursion), so Zbar variants with K <= ``ENUMERATED_TASKS`` use it.  Its
climbs are compiled whole (``kernels.set_dual`` inside ``kernels.climb``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ....formulations.sparse import SparseProblem
from . import kernels
from .greedy import GreedyBound
from .kernels import FREE, IN, OUT
from ....rounding import gamma, rounded_up
from .zbar import ZbarBound

#: Each column's 2^K task sets are enumerated (``SetBound``) with a Bbar term on per-task supports
#: up to ``scope.MAX_BBAR_TASKS`` tasks, and in place of the Zbar recursion (``ZbarBound``) up to
#: ``ENUMERATED_TASKS``.  One dual evaluation at p = 250, n_k = 50 took (recursion / enumeration)
#: 2.1 / 1.0 ms at K = 4, 4.1 / 1.6 ms at K = 6, 3.5 / 10.6 ms at K = 8, 5.2 / 133 ms at K = 10.
ENUMERATED_TASKS = 6
#: Softmin weights exp(x) with x below this are taken as 0: a column's softmin mass is at least 1
#: (its least set's weight), and each exp(-40) < 2^-57 is below its rounding error.  Most of a column's
#: sets sit that far above its least once mu is small, so few exps are taken (benchmarks/HISTORY.md, "The
#: priced trees climb in compiled code, and their prices get a unit").
_NEGLIGIBLE = -40.0


class SetBound(ZbarBound):
    """The bound of a Bbar or Zbar variant's joint tree, with each column's task sets enumerated.

    On the tasks S using column j (the others' coefficients 0), the ridge and Bbar terms are
    b'Q_S b / 2 with Q_S = a I - c 11', a = lambda_ridge + lambda_bbar, c = lambda_bbar / K (beta_bar
    averages over all K tasks), whose conjugate is, by Sherman-Morrison (a - c|S| >= lambda_ridge > 0),

        g_S(v) = ||v_S||^2 / (2a) + C_|S| (sum_(k in S) v_k)^2,   C_m = c / (2a (a - c m)).

    For a fixed support, F is the max over r of base(r) - sum_j g_(S_j)(v_j) plus the Zbar term (the
    dual of its convex part), so ``ZbarBound``'s bound holds with g_S in place of sum_(k in S) w_jk:

        F >= base(r) - s sum_k pi_k + sum_j min_S [sum_(k in S) pi_k - g_S(v_j) + (lambda_zbar/2) P(|S|)]

    for every r and pi >= 0, S over the task sets the node allows for column j, all 2^K of them
    enumerated (on a common support the two a shared column can have: no task, or all K).  C_|S|
    is what the Bbar term adds: a column's coefficients are priced at lambda_ridge + lambda_bbar
    along the tasks' differences, at lambda_ridge along their mean.  At lambda_bbar = 0 (C = 0,
    a = lambda_ridge) this is ``ZbarBound``'s bound, found by enumeration.
    """

    #: Compiled whole, as ``GreedyBound``'s climbs (not the recursion's L-BFGS-B).
    releases_gil = True

    def __init__(self, problem: SparseProblem, *args):
        K = problem.n_tasks
        if problem.common_support:   # a shared column is in every task's support or in none
            self.sets = np.array([np.zeros(K), np.ones(K)])
        else:   # set number i holds task k iff bit k of i is 1: (2^K, K) 0/1
            self.sets = ((np.arange(2**K)[:, None] >> np.arange(K)) & 1).astype(float)
        self.set_sizes = self.sets.sum(axis=1).astype(int)
        a = Fraction(problem.lambda_ridge) + Fraction(problem.lambda_bbar)
        c = Fraction(problem.lambda_bbar) / K
        #: 1 / (2a) and C_|S| per set, rounded up from exact rationals (so above the exact values)
        self.inverse = rounded_up(1 / (2 * a))
        self.coupling = np.array([rounded_up(c / (2 * a * (a - c * m))) for m in self.set_sizes])
        super().__init__(problem, *args)

    def weights(self, r: np.ndarray) -> np.ndarray:
        """(K, p) g_{k}(v_j): each pair's value alone in its column (the greedy order of v_jk^2, and
        the scale ``start`` prices the budgets at)."""
        return self._slopes(r) ** 2 * (self.inverse + self.coupling[1])

    @property
    def set_cost(self) -> np.ndarray:
        """(2^K,) each set's Zbar cost (lambda_zbar/2) P(|S|)."""
        return self.size_cost[self.set_sizes]

    #: D(r, pi) and D smoothed by a softmin over each column's sets, climbed in compiled code as trees
    #: without prices are (``kernels.climb`` keeps the prices >= 0).
    stage, dual, kernel = GreedyBound.stage, GreedyBound.dual, staticmethod(kernels.set_dual)

    def _evaluation(self, fixed: np.ndarray, mu: float) -> tuple:
        """What ``stage`` climbs: ``kernel``'s arguments at the node, but the point and gradient (a
        ``kernels.SETS``)."""
        return (self.X, self.y, self.ends, self.slope_scale, float(self.price_unit), self.sets, self.set_cost,
                self.inverse, self.coupling, self._of_node(fixed, self._allowed_sets), float(mu), int(self.problem.s),
                _NEGLIGIBLE)

    def worst(self, fixed: np.ndarray, point: np.ndarray) -> np.ndarray:
        g, _ = self._conjugates(self._slopes(point))
        return self._within_budget(fixed, self._set_minima(self._totals(fixed, g, self.prices(point)))[1], point)

    def _conjugates(self, v: np.ndarray):
        """((2^K, p) g_S(v_j) for every set and column, (2^K, p) sum_(k in S) v_jk, or None without a
        Bbar term: C_|S| = 0 then, and a Zbar variant's evaluation skips those products)."""
        g = self.inverse * (self.sets @ v**2)
        if not self.problem.lambda_bbar:
            return g, None
        sums = self.sets @ v
        return g + self.coupling[:, None] * sums**2, sums

    def _totals(self, fixed: np.ndarray, g: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """(2^K, p) sum_(k in S) pi_k - g_S + (lambda_zbar/2) P(|S|); inf on the sets the node forbids.
        Sets by columns: a column's reductions run along the long axis (12 against 2 us at p = 250)."""
        return np.where(self._of_node(fixed, self._allowed_sets), (self.sets @ prices + self.set_cost)[:, None] - g,
                        np.inf)

    def _allowed_sets(self, fixed: np.ndarray) -> np.ndarray:
        """(2^K, p) whether the node allows each column's set (it holds every fixed-in task and no
        fixed-out one); ``_totals`` keeps it per node."""
        missing_in = (1.0 - self.sets) @ (fixed == IN).astype(float)   # fixed-in tasks a set lacks
        holding_out = self.sets @ (fixed == OUT).astype(float)        # fixed-out tasks it holds
        return (missing_in == 0) & (holding_out == 0)

    def _set_minima(self, totals: np.ndarray):
        """((p,) each column's smallest total, (K, p) the tasks of its set)."""
        best = np.argmin(totals, axis=0)
        return totals[best, np.arange(len(best))], self.sets[best].T > 0.5

    def _safe_parts(self, r: np.ndarray):
        """(base, its error bound, (v, bounds on the slopes' errors)): g_S needs the slopes' signs."""
        base, error, v, slack = self._safe_slopes(r)
        allowed = self.problem.allowed
        return base, error, (v * allowed, slack * allowed)

    def _safe_totals(self, fixed: np.ndarray, slopes, prices: np.ndarray):
        """(``_totals`` at g_S raised above the exact g_S of every slope within its error bound, the
        magnitude of each total's terms).  |sum_S v| <= |computed sum| + sum_S (slack + 2 gamma_(K+2) |v|)."""
        v, slack = slopes
        reach = np.abs(v) + slack
        sums = np.abs(self.sets @ v) + self.sets @ (slack + 2 * gamma(v.shape[0] + 2) * np.abs(v))
        g = self.inverse * (self.sets @ reach**2) + self.coupling[:, None] * sums**2
        totals = self._totals(fixed, g, prices)
        return totals, np.where(np.isfinite(totals), (self.sets @ prices + self.set_cost)[:, None] + g, 0.0)

    def safe_penalty(self, fixed: np.ndarray, slopes, point: np.ndarray) -> float:
        """s sum pi - sum_j min_S(...) at the raised g_S (``_safe_totals``), plus a bound on the rounding:
        a set's total is at most 2K + 8 rounded operations deep, the sums over columns and prices add
        p + K + 2, so 2 gamma_(p + 3K + 10) times the magnitudes covers them (doubled for their own rounding)."""
        return self._safe_penalty_parts(fixed, slopes, point)[0]

    def _safe_penalty_parts(self, fixed, slopes, point):
        """(``safe_penalty``, the safe totals, their column minima, the rounding slack)."""
        prices = self.prices(point)
        totals, magnitude = self._safe_totals(fixed, slopes, prices)
        minima = totals.min(axis=0)
        K, p = fixed.shape
        budget = self.problem.s * prices.sum()
        slack = 2 * gamma(p + 3 * K + 10) * (budget + magnitude.max(axis=0).sum())
        return budget - minima.sum() + slack, totals, minima, slack

    def child_penalties(self, fixed: np.ndarray, slopes, point: np.ndarray):
        """Fixing a free (k, j) in (out) keeps column j's sets holding (not holding) task k: its minimum
        rises from m_j to m'_j and the penalty falls by m'_j - m_j, the other columns unchanged.  The
        two extra minima and subtractions are covered by adding |penalty| to the slack's magnitude."""
        penalty, totals, minima, slack = self._safe_penalty_parts(fixed, slopes, point)
        extra = slack + 2 * gamma(fixed.shape[1] + 3 * fixed.shape[0] + 10) * abs(penalty)
        free = fixed == FREE
        children = []
        for holds in (True, False):
            child = np.full(fixed.shape, penalty)
            for k in range(fixed.shape[0]):
                keeps = (self.sets[:, k] > 0.5) == holds
                rise = np.where(keeps[:, None], totals, np.inf).min(axis=0) - minima
                child[k] = np.where(free[k], penalty - rise + extra, penalty)
            children.append(child)
        return children

