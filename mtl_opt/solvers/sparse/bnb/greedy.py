"""The greedy bound family: per-task trees and common supports, with no Zbar or Bbar term.

Outer approximation bounds a node by the cuts it has collected so far; where n_k < p and
lambda_ridge is small its LP bound stays near 0, because the relaxation at a node is never
solved, only approximated by Kelley's method.  Here every node solves its own relaxation, in
the dual.  For residuals r_k in R^(n_k) and v_k = X_k' r_k / n_k, conjugating the loss and the
perspective of the ridge term gives, for every r,

    c(z) >= D(r) = sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k - sum_jk z_jk v_jk^2 / (2 lambda_ridge),

and the worst z of the node is greedy: its fixed-in entries plus the s - |in| heaviest free
ones (per task, or per common column).  So D(r) at that z is a proven lower bound on the node
for *every* r (``node`` climbs it).  The same dual point bounds each free entry's two children
by a swap in the greedy z (``child_penalties``).  Excluded pairs have v_jk = 0, so they weigh 0.

A box on the coefficients (``coef_bound``, signs, bounds: l_jk <= beta_jk <= u_jk, 0 inside for a
free pair) keeps z_jk linear: the perspective's conjugate over |beta| <= M z is z times the
ridge term's conjugate in the box, so each weight becomes

    w_jk = max over l <= c <= u of v c - lambda_ridge c^2 / 2 = (v^2 - d^2) / (2 lambda_ridge),

d the distance from v to [lambda_ridge l, lambda_ridge u]: v^2 / (2 lambda_ridge) inside, linear
outside (the big-M strengthened perspective of L0BnB), never more, so every bound is at least
the box-free one (``kernels.boxed_weights``; an included pair's box may leave 0 out).

``GreedyBound`` also holds what every family's dual is made of (the stacked designs, the
slopes v and the loss part, and their rounding-error bounds): ``zbar`` and ``sets`` extend it.
"""

from __future__ import annotations

import numpy as np

from ....formulations.sparse import SparseProblem
from ....deadline import Deadline
from . import kernels
from .kernels import FREE, IN
from .node import NodeBound
from ....rounding import gamma


class GreedyBound(NodeBound):
    """Nodes bounded by the greedy dual: the dual point is the residuals r."""

    def __init__(self, problem: SparseProblem, node_iterations: int, deadline: Deadline):
        super().__init__(problem, node_iterations, deadline)
        self.ends = np.cumsum([0] + [len(y) for y in problem.ys], dtype=np.int64)   # task k's residuals: ends[k]:ends[k+1]
        self.X = np.ascontiguousarray(np.vstack(problem.Xs), dtype=float)   # ``kernels``' types
        self.y = np.ascontiguousarray(np.concatenate(problem.ys), dtype=float)
        self.slope_scale = problem.allowed / np.diff(self.ends)[:, None]
        self.low, self.high = (np.ascontiguousarray(bound, dtype=float) for bound in (problem.side.lower, problem.side.upper))
        self.boxed = problem.side.bounded

    def start(self) -> np.ndarray:
        """The root's dual point: r = y (D's maximizer without the penalty)."""
        return np.concatenate(self.problem.ys)

    #: The dual's evaluation (``dual``); ``_evaluation`` holds its arguments but the point and gradient.
    kernel = staticmethod(kernels.search_dual)

    def _evaluation(self, fixed: np.ndarray, mu: float) -> tuple:
        """What ``stage`` climbs: ``kernel``'s arguments at the node, but the point and gradient (a
        ``kernels.SEARCH``)."""
        return (self.X, self.y, self.ends, self.slope_scale, float(self.problem.lambda_ridge), self.low, self.high,
                self.boxed, float(mu), self._states(fixed), int(self.problem.s))

    def child_penalties(self, fixed: np.ndarray, upper_weights: np.ndarray, r: np.ndarray):
        """Floats above the exact penalty part of -D(r) at each entry's "in" child, and "out" child.

        A row's worst z takes its b = s - |in| heaviest free entries, w_(1) >= ... >= w_(b) >= w_(b+1)
        (0 past the last; b >= 1 where a row has a free entry, ``tree.filled``).  Fixing an unchosen
        entry j in puts it in place of w_(b): the penalty moves by w_j - w_(b); fixing a chosen one
        out brings in w_(b+1): by w_(b+1) - w_j; the other children keep the node's z.  The two extra
        terms add their magnitudes to ``safe_penalty``'s error bound, covered by a doubled gamma term.
        """
        penalty = self.safe_penalty(fixed, upper_weights, r)
        row_weights = self._row_weights(upper_weights)
        change = np.zeros((2,) + row_weights.shape)      # in, out
        magnitude = np.zeros_like(change)
        for i, ((_, free, budget), weight) in enumerate(zip(self._of_node(fixed, self._budget_rows), row_weights)):
            order = free[np.argsort(-weight[free], kind="stable")]
            chosen, rest = order[:budget], order[budget:]
            following = weight[rest[0]] if len(rest) else 0.0
            if len(rest):
                last = weight[chosen[-1]]
                change[0, i, rest], magnitude[0, i, rest] = weight[rest] - last, weight[rest] + last
            change[1, i, chosen], magnitude[1, i, chosen] = following - weight[chosen], following + weight[chosen]
        slack = 2 * gamma(upper_weights.size + 4) * (penalty + magnitude)
        children = penalty + change + slack
        if self.problem.common_support:   # a column's children are every task's
            return [np.repeat(child, len(fixed), axis=0) for child in children]
        return list(children)

    def _safe_parts(self, r: np.ndarray):
        """(base, its error bound, weights above the exact ones) of ``safe_dual`` at r."""
        base, error, v, slack = self._safe_slopes(r)
        if not self.boxed:   # d = 0, so the larger end is |v| + slack: one square.  Both ends cost sMTL
            # cs_l2's tree (with the clip in the climb) 5 % of its nodes in 15 s; now within 1 %.
            upper_weights = (np.abs(v) + slack) ** 2 / (2 * self.problem.lambda_ridge) * (1 + gamma(4))
        else:
            widened = slack + gamma(3) * (np.abs(v) + slack)   # the rounding of v +- slack, covered
            upper_weights = np.maximum(self._upper_weight(v + widened), self._upper_weight(v - widened))
        return base, error, upper_weights * self.problem.allowed

    def _upper_weight(self, t: np.ndarray) -> np.ndarray:
        """Floats above the exact weight (t^2 - d^2) / (2 lambda_ridge) at slopes t (module
        docstring; convex in t, so the larger of its values at a slope's two error ends is above
        it at the exact slope): t^2 rounded up, d rounded down (``gamma`` terms; d is 0 where
        there is no box), the rest rounded up."""
        lam, low, high = self.problem.lambda_ridge, self.low, self.high
        below = lam * low - t - gamma(3) * (lam * np.abs(low) + np.abs(t))   # -inf where no box
        above = t - lam * high - gamma(3) * (np.abs(t) + lam * np.abs(high))
        distance = np.maximum(np.maximum(below, above), 0.0)
        weight = (t * t * (1 + gamma(3)) - distance * distance * (1 - gamma(3))) / (2 * lam)
        return weight + np.abs(weight) * gamma(3)   # below 0 only where an included pair's box leaves 0 out

    def _safe_slopes(self, r: np.ndarray):
        """(base, its error bound, the slopes v (K, p), a bound on each slope's error) at r."""
        problem = self.problem
        base, error = 0.0, 0.0
        v, slack = np.empty((problem.n_tasks, problem.n_features)), np.empty((problem.n_tasks, problem.n_features))
        for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
            rk, n = r[self.ends[k]:self.ends[k + 1]], len(y)
            base += (y @ rk - rk @ rk / 2) / n
            error += gamma(n + 3 + problem.n_tasks) * (np.abs(y) @ np.abs(rk) + rk @ rk / 2) / n
            # |x_j|.|r_k| <= ||x_j|| ||r_k|| (Cauchy-Schwarz; no |X| to hold), doubled to cover
            # the rounding of the squared norms and the root (each off by far less than 1 %)
            slack[k] = gamma(n + 1) * 2 * np.sqrt(problem.column_sq_norms[k] * (rk @ rk)) / n
            v[k] = X.T @ rk / n
        return base, error, v, slack

    def safe_penalty(self, fixed: np.ndarray, upper_weights: np.ndarray, r: np.ndarray) -> float:
        """A float above the exact penalty part of -D(r) at weights below ``upper_weights``."""
        return upper_weights[self._greedy(fixed, upper_weights)].sum() * (1 + gamma(upper_weights.size))

    def weights(self, r: np.ndarray) -> np.ndarray:
        """(K, p) w_jk, the slope of -D in z_jk (v_jk^2 / (2 lambda_ridge) without a box)."""
        return self._weights_and_slopes(self._slopes(r))[0]

    def _weights_and_slopes(self, v: np.ndarray):
        """(weights, their slopes in v) at the slopes v (``kernels.boxed_weights``)."""
        return kernels.boxed_weights(np.ascontiguousarray(v), self.low, self.high, float(self.problem.lambda_ridge),
                                     self.boxed)

    def _states(self, fixed: np.ndarray) -> np.ndarray:
        """The kernels' node states: one row per budget (a common support's columns once)."""
        return np.ascontiguousarray(fixed[:1] if self.problem.common_support else fixed, dtype=np.int8)

    def _loss_part(self, point: np.ndarray, penalty_slopes: np.ndarray):
        """(sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k, the gradient in the point of that minus a penalty
        part whose gradient in v is ``penalty_slopes`` (K, p); the K prices' entries left to fill)."""
        gradient = np.empty_like(point)
        base = kernels.loss_part(self.X, self.y, self.ends, point, np.ascontiguousarray(penalty_slopes, dtype=float),
                                 gradient)
        return base, gradient

    def worst(self, fixed: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The node's worst support at the dual point ``r`` (a feasible one: it is refitted)."""
        return self._greedy(fixed, self.weights(r))

    def _slopes(self, r: np.ndarray) -> np.ndarray:
        """(K, p) v_jk = X_k' r_k / n_k, 0 for an excluded pair (its beta is fixed at 0)."""
        return kernels.products(self.X, self.ends, r) * self.slope_scale

    def _greedy(self, fixed: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """The node's worst z: its fixed-in entries plus the heaviest free ones (the first of equal ones)."""
        def fill(z, free, weight, budget):
            z[free[np.argsort(-weight[free], kind="stable")[:budget]]] = 1.0
            return z
        z = self._per_row(fixed, self._row_weights(weight), fill) > 0.5
        return np.repeat(z, len(fixed), axis=0) if self.problem.common_support else z

    def _row_weights(self, weight: np.ndarray) -> np.ndarray:
        """(K, p) weights as the budgets count them: per task, or (1, p) summed over the tasks for
        common supports (a shared column takes every task's weight)."""
        return weight.sum(axis=0, keepdims=True) if self.problem.common_support else weight

    def _per_row(self, fixed: np.ndarray, row_weights: np.ndarray, fill) -> np.ndarray:
        """(rows, p) z per budget row (``_row_weights``): the fixed-in entries at 1 and
        ``fill(z, free, weight, budget)`` choosing among the free ones (indices) and returning z."""
        return np.array([fill(inside.copy(), free, weight, budget)
                         for (inside, free, budget), weight in zip(self._of_node(fixed, self._budget_rows), row_weights)])

    def _budget_rows(self, fixed: np.ndarray) -> list:
        """Per budget row (each task, or the shared columns once): (its fixed-in entries as 0/1 floats,
        the indices of its free ones, the budget they have left)."""
        states = fixed[:1] if self.problem.common_support else fixed
        return [((state == IN).astype(float), np.flatnonzero(state == FREE), self.problem.s - int((state == IN).sum()))
                for state in states]
