"""The Zbar bound family: one joint tree over the pairs (k, j), the budgets priced.

With the Zbar term (lambda_zbar/2) sum_j P(c_j), c_j = sum_k z_jk the tasks using column j and
P(c) = c (K - c) / K (concave, so not a node-wise greedy any more), the tasks share one tree over
the pairs (k, j), and the budgets sum_j z_jk <= s get prices pi_k >= 0 (Lagrange multipliers,
the dual point's last K entries).  For feasible z, adding sum_k pi_k (sum_j z_jk - s) <= 0 gives

    F >= D(r, pi) = sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k - s sum_k pi_k
                    + sum_j min_S [sum_(k in S) (pi_k - w_jk) + (lambda_zbar/2) P(|S|)],

w_jk = v_jk^2 / (2 lambda_ridge) (in a box: ``greedy``'s), S over the task sets the node allows
for column j (its fixed-in tasks, any of its free ones).  For each size the best S takes the cheapest free tasks,
so the worst z is a sort per column; D is concave in (r, pi) jointly and a lower bound on the
node at every point with pi >= 0.  L-BFGS-B (``lbfgsb``) climbs it over both, the prices kept
>= 0, smoothed by a softmin over S (its sum over sizes is a small recursion per column).  At
lambda_zbar = 0 and the best pi this is the greedy bound (``greedy``); those variants keep the
greedy.  For few tasks ``sets`` finds the same bound faster, by enumeration.
"""

from __future__ import annotations

import numpy as np

from ....formulations.sparse import SparseProblem
from .. import lbfgsb
from .greedy import GreedyBound
from .kernels import FREE, IN, OUT
from .node import FTOL, MEMORY, STAGES
from ....rounding import gamma

#: A priced tree's prices are climbed in units of this times sqrt(F(0)) (``ZbarBound.price_unit``);
#: 0.3 climbed zbar_l2 seeds 2 and 4 to higher bounds in 60 s than 0.2 or 0.5 (benchmarks/HISTORY.md, "The
#: priced trees climb in compiled code, and their prices get a unit").
PRICE_UNIT = 0.3
#: A log-weight standing for log 0 in ``ZbarBound._column_softminima`` (finite: no inf - inf).
_NEVER = -1e30


class ZbarBound(GreedyBound):
    """The bound of a Zbar variant's joint tree: budgets priced, worst z per column (module docstring).

    The dual point is (r, pi): the residuals, then the K prices in units of ``price_unit``, kept >= 0
    by the climb.
    """

    #: The recursion's climb is L-BFGS-B driven from Python (``lbfgsb``), holding the GIL.
    releases_gil = False

    def __init__(self, problem: SparseProblem, *args):
        K = problem.n_tasks
        sizes = np.arange(K + 1)
        #: (lambda_zbar/2) P(c) for c = 0..K tasks on a column
        self.size_cost = problem.lambda_zbar / 2 * sizes * (K - sizes) / K
        self.n_residuals = sum(len(y) for y in problem.ys)
        #: The prices' unit, ``PRICE_UNIT`` sqrt(F(0)) (1 where F(0) = 0, y = 0): r is in units of y and pi
        #: in units of F (y^2), so without it the climb's path would change with the units of y.
        self.price_unit = PRICE_UNIT * (np.sqrt(problem.objective(np.zeros((K, problem.n_features)))) or 1.0)
        #: L-BFGS-B's lower bounds on the dual point: the prices' 0
        self.point_floor = np.concatenate([np.full(self.n_residuals, -np.inf), np.zeros(K)])
        super().__init__(problem, *args)

    def start(self) -> np.ndarray:
        """r = y and, per task, the price at which its s heaviest weights are the ones worth taking
        (its (s+1)-th largest weight: the best price without the Zbar term)."""
        r = super().start()
        weights = np.sort(self.weights(r), axis=1)
        s = self.problem.s
        prices = weights[:, -s - 1] if weights.shape[1] > s else np.zeros(len(weights))
        return np.concatenate([r, prices / self.price_unit])

    def prices(self, point: np.ndarray) -> np.ndarray:
        """(K,) pi >= 0 at the dual point."""
        return np.maximum(point[self.n_residuals:], 0.0) * self.price_unit

    def stage(self, fixed: np.ndarray, point: np.ndarray, mu: float, best: list):
        """``GreedyBound.stage`` by L-BFGS-B (``lbfgsb``), which keeps the prices >= 0: the deadline is
        checked at every evaluation."""
        def negative_smoothed(point):
            value, (smooth, gradient) = self.dual(fixed, point, mu)
            if value > best[0]:
                best[:] = value, point.copy()
            if value >= self.upper or self.deadline.expired():
                raise _Pruned(value >= self.upper)
            return -smooth, -gradient

        try:
            return lbfgsb.minimize(negative_smoothed, point, self.point_floor, maxiter=self.node_iterations // STAGES,
                                   memory=MEMORY, ftol=FTOL), False
        except _Pruned as stop:
            return point, stop.args[0]

    def dual(self, fixed: np.ndarray, point: np.ndarray, mu: float):
        """(D(r, pi), (D smoothed by a softmin at temperature mu, its gradient))."""
        problem, prices = self.problem, self.prices(point)
        weights, slopes = self._weights_and_slopes(self._slopes(point))
        cost = prices[:, None] - weights
        minima = self._column_minima(fixed, cost)
        softminima, z = self._column_softminima(fixed, cost, mu)
        base, gradient = self._loss_part(point, z * slopes)
        gradient[self.n_residuals:] = (z.sum(axis=1) - problem.s) * self.price_unit
        budget = problem.s * prices.sum()
        return base - budget + minima.sum(), (base - budget + softminima.sum(), gradient)

    def worst(self, fixed: np.ndarray, point: np.ndarray) -> np.ndarray:
        cost = self.prices(point)[:, None] - self.weights(point)
        return self._within_budget(fixed, self._column_choice(fixed, cost), point)

    def _within_budget(self, fixed: np.ndarray, chosen: np.ndarray, point: np.ndarray) -> np.ndarray:
        """``chosen`` cut to the budgets: each task's fixed-in pairs, then its heaviest chosen free ones."""
        if np.all(chosen.sum(axis=1) <= self.problem.s):
            return chosen
        return self._greedy(np.where((fixed == FREE) & ~chosen, OUT, fixed), self.weights(point))

    def safe_penalty(self, fixed: np.ndarray, upper_weights: np.ndarray, point: np.ndarray) -> float:
        """s sum pi - sum_j min_S(...) at the costs pi_k - upper_weights, which are below the exact
        costs (so the minima are too), plus a bound on the rounding error.

        Each column's minimum is a sum of at most 2 K + 3 rounded terms (prices, weights,
        the size cost); the sum over the p columns and the budget term add p + K + 2 more, so
        gamma_(p + 3K + 6) times the sum of their magnitudes covers it all (doubled for the
        magnitude's own rounding).
        """
        prices = self.prices(point)
        minima = self._column_minima(fixed, prices[:, None] - upper_weights)
        slack = 2 * gamma(fixed.shape[1] + 3 * fixed.shape[0] + 6) * self._magnitude(fixed, upper_weights, prices)
        return self.problem.s * prices.sum() - minima.sum() + slack

    def _magnitude(self, fixed: np.ndarray, upper_weights: np.ndarray, prices: np.ndarray) -> float:
        """The summed magnitudes of the terms of ``safe_penalty`` (above each column minimum's too)."""
        return (self.problem.s * prices.sum() + (prices[:, None] + upper_weights)[fixed != OUT].sum()
                + fixed.shape[1] * self.size_cost.max())

    def child_penalties(self, fixed: np.ndarray, upper_weights: np.ndarray, point: np.ndarray):
        """Fixing (k, j) in or out leaves the sets of every other column, and shrinks column j's, so
        its minimum m_j rises to m'_j and the penalty falls by m'_j - m_j.  Each column is changed on
        its own, so fixing all of task k's free pairs at once gives every m'_j of that task.  A computed
        minimum (2K + 3 rounded terms) is off by at most gamma_(2K+3) times the magnitude (above the
        column's), so 2 gamma_(p+3K+8) (magnitude + |penalty|) covers both minima and the two subtractions.
        """
        penalty = self.safe_penalty(fixed, upper_weights, point)
        prices = self.prices(point)
        cost = prices[:, None] - upper_weights
        minima = self._column_minima(fixed, cost)
        K, p = fixed.shape
        slack = 2 * gamma(p + 3 * K + 8) * (self._magnitude(fixed, upper_weights, prices) + abs(penalty))
        children = []
        for value in (IN, OUT):
            child_penalty = np.full(fixed.shape, penalty + slack)
            for k in range(K):
                child = fixed.copy()
                child[k, fixed[k] == FREE] = value
                child_penalty[k] -= self._column_minima(child, cost) - minima
            children.append(child_penalty)
        return children

    def _column_minima(self, fixed: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """(p,) min_S sum_(k in S) cost_kj + size_cost[|S|] over the sets the node allows for column j."""
        return self._size_totals(fixed, cost)[0].min(axis=1)

    def _column_choice(self, fixed: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """(K, p) the tasks of each column's minimizing set (``_column_minima``)."""
        totals, order = self._size_totals(fixed, cost)
        best = np.argmin(totals, axis=1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(fixed.shape[0])[None, :].repeat(len(order), axis=0), axis=1)
        return (rank < best[:, None]).T

    def _size_totals(self, fixed: np.ndarray, cost: np.ndarray):
        """((p, K+1) each column's cheapest allowed S of each size, inf where none; (p, K) the task order).

        Per column: the fixed-in tasks first, then the free ones by increasing cost; the best S
        of each size is a prefix of that order, so its value is a prefix sum.
        """
        K = fixed.shape[0]
        key = np.where(fixed == IN, -np.inf, np.where(fixed == FREE, cost, np.inf)).T
        order = np.argsort(key, axis=1, kind="stable")
        usable = np.take_along_axis((fixed != OUT).T, order, axis=1)
        prefix = np.zeros((fixed.shape[1], K + 1))
        prefix[:, 1:] = np.cumsum(np.where(usable, np.take_along_axis(cost.T, order, axis=1), 0.0), axis=1)
        sizes = np.arange(K + 1)
        allowed = (sizes >= (fixed == IN).sum(axis=0)[:, None]) & (sizes <= usable.sum(axis=1)[:, None])
        return np.where(allowed, prefix + self.size_cost, np.inf), order

    def _column_softminima(self, fixed: np.ndarray, cost: np.ndarray, mu: float):
        """((p,) the softmin -mu log sum_S exp(-(cost of S) / mu) of ``_column_minima``'s sets, (K, p) the
        chance of each pair in S under those weights, 1 for the fixed-in ones): a smooth minorant of the
        minima, and its gradient in ``cost``.

        The weights of the sets by size come from the recursion over tasks
        L_k[c] = logaddexp(L_(k-1)[c], L_(k-1)[c - 1] - cost_kj / mu) (free tasks only),
        the chances by going back through it (reverse-mode differentiation).
        """
        K, p = fixed.shape
        log_terms = np.where(fixed == FREE, -cost / mu, _NEVER)
        forward = [np.full((p, K + 1), _NEVER)]
        forward[0][:, 0] = 0.0
        for k in range(K):
            added = np.full((p, K + 1), _NEVER)
            added[:, 1:] = forward[-1][:, :-1] + log_terms[k][:, None]
            forward.append(np.logaddexp(forward[-1], added))
        fixed_in = (fixed == IN)
        sizes = np.minimum(fixed_in.sum(axis=0)[:, None] + np.arange(K + 1), K)
        scored = forward[-1] - self.size_cost[sizes] / mu
        top = scored.max(axis=1)
        log_total = top + np.log(np.exp(scored - top[:, None]).sum(axis=1))
        adjoint = np.exp(scored - log_total[:, None])            # chance of each size
        chances = fixed_in.astype(float)
        for k in reversed(range(K)):
            before, after = forward[k], forward[k + 1]
            add = np.exp(before[:, :-1] + log_terms[k][:, None] - after[:, 1:])
            if np.any(fixed[k] == FREE):
                chances[k] = np.where(fixed[k] == FREE, (adjoint[:, 1:] * add).sum(axis=1), chances[k])
            stayed = adjoint * np.exp(before - after)
            stayed[:, :-1] += adjoint[:, 1:] * add
            adjoint = stayed
        return np.where(fixed_in, cost, 0.0).sum(axis=0) - mu * log_total, chances


class _Pruned(Exception):
    """Raised inside L-BFGS-B when a node's bound passes the incumbent (its argument True), or at the
    deadline (False)."""
