"""Bounding one node: climb its dual from the parent's point, score the best point found so that
rounding can only lower it, and refit the support that point picks as an upper bound.

A node fixes some z_jk to 1 or 0 and leaves the rest in [0, 1] under the cardinality rows; its
bound family (``greedy``, ``zbar``, ``sets``) gives a dual D that is a lower bound on the node at
*every* dual point.  D is concave, strongly so in the residuals (its -||r||^2 term), with a
low-rank ill-conditioned part (the chosen columns); L-BFGS climbs it from the parent's maximizer
and the best value it visits is the node's bound.  It climbs a smoothed D (the max over z with a
-(mu/2)||z||^2 term, or a softmin over a column's task sets, mu shrinking tenfold per stage) and
scores every point on the exact D: the plain D's kinks, where the chosen entries tie, stall
L-BFGS.  The worst z at the best point proposes a support, refitted as an upper bound.

The climbs' dual evaluations are compiled (``kernels``), and so are the whole climbs
(``kernels.climb``) but the Zbar recursion's (``zbar``), which climbs with L-BFGS-B (``lbfgsb``).
No bound comes from them: ``safe_dual`` scores the point kept.
"""

from __future__ import annotations

import copy

import numpy as np

from . import kernels
from ....deadline import Deadline
from ....rounding import lowered

#: L-BFGS iterations per node, over all smoothing stages.  On four benchmark instances 1000
#: closed in 6.8-31 s, 3000 in 11-40 s (stronger bounds, dearer nodes), 500 in 5.5-26 s with
#: up to 2.3x the nodes.
NODE_ITERATIONS = 1000
#: Smoothing stages per node, and the first stage's mu times s / |incumbent|.
STAGES, SMOOTHING = 4, 1e-1
#: L-BFGS memory (pairs kept): the dual's ill-conditioned part has rank about K s.
MEMORY = 10
#: A smoothing stage ends when an L-BFGS step gains less than this relative to a scale: the
#: incumbent's F in ``NodeBound.stage``, max(|D|, 1) in the Zbar recursion's (L-BFGS-B's test).  (It was 1e-13:
#: ~1000 evaluations per node, on digits that prune nothing.)  Measured
#: (benchmarks/HISTORY.md, "bnb with the Bbar term, set enumeration and fewer steps per node"): the grid's l0l2 p = 500, K = 2 row took 27.7 s
#: at 1e-13, 21.3 s at 1e-9, 14.2 s at 1e-7 and 41.7 s at 1e-5 (weak bounds, 571 nodes against 33);
#: zbar_l2 seeds 1 and 2 of the sMTL simulation left 2.85 / 3.9% at 30 s with 1e-13, 2.45 / 3.43%
#: with 1e-7, 5.8 / 5.94% with 1e-5.
FTOL = 1e-7


class NodeBound:
    """How a tree's nodes are bounded: the base of each bound family (``greedy``, ``zbar``,
    ``sets``), the tree's bounder (``tree.SupportTree``), which the engine ships to its workers.

    The family supplies its dual (``kernel`` at ``_evaluation``'s arguments), its safe parts
    (``_safe_parts``, ``safe_penalty``, ``child_penalties``) and its worst support (``worst``).
    A job (``work``) sets the level that prunes the node (``upper``: the incumbent's value less the
    tree's prune gap, ``Engine.level``; a climb stops there), the ``deadline`` and the stages
    ``skipped``; called directly, ``bound`` climbs against those set here.
    """

    #: The level a climb stops at (the incumbent's value, less the tree's prune gap), and the
    #: stages skipped: none (the root's).
    upper, skipped = np.inf, 0
    #: The climbs are compiled without the GIL (``kernels.climb``): the threads feeding local
    #: workers run beside them (``engine.workers.LocalWorkers``).
    releases_gil = True

    def __init__(self, problem, node_iterations: int, deadline: Deadline):
        self.problem, self.node_iterations, self.deadline = problem, node_iterations, deadline
        self._node_memo = (None, {})

    def work(self, job: tuple, upper: float, deadline: Deadline):
        """``bound`` of the job (node, its start point, stages skipped) against ``upper``: on a copy,
        so that one bounder serves every job, here or on a worker."""
        fixed, start, skipped = job
        twin = copy.copy(self)
        twin.upper, twin.deadline, twin.skipped = upper, deadline, skipped
        return twin.bound(fixed, start)

    @property
    def warm_skip(self) -> int:
        """Smoothing stages a node skips once the root is bounded: it starts from its parent's dual
        point, already climbed, which the first, roughest stage pulls a long way off.  One where
        the tree spans several tasks, each with fewer rows than features; none otherwise.
        Measured (benchmarks/HISTORY.md, "a skip where tasks are wide"): with the skip, such trees got
        1.1-1.8x the nodes in 30 s and smaller gaps (sMTL zbar_l2 and cs_l2, grid rows), while
        one task's tree took 1.4-1.7x longer to certify (the grid's l0l2 row, OKRidge rows) and
        trees of tall tasks lost ground (the library's small cs_l2 and zbar_l2, a K = 5 grid row)."""
        problem = self.problem
        return int(problem.n_tasks > 1 and max(len(y) for y in problem.ys) < problem.n_features)

    def bound(self, fixed: np.ndarray, r0: np.ndarray):
        """(a proven bound, its residuals, (its greedy support refitted, that support)) for the node ``fixed``, from
        ``r0`` (the refit here: on the worker's core for a worker's nodes).

        L-BFGS climbs a smoothed D (the max over z gets a -(mu/2)||z||^2 term, so the
        chosen z moves continuously), with mu shrinking tenfold per stage; every point it
        evaluates is also scored on D, and the best point's D, evaluated by ``safe_dual``,
        is the bound, and its worst support the one proposed.  Stops early once D passes the
        incumbent (the node is pruned) or, between stages, once the deadline has passed.
        """
        best = [-np.inf, r0.copy()]   # the best D seen, and its point
        r = r0
        for mu in self.mu_schedule():
            r, pruned = self.stage(fixed, r, float(mu), best)
            if pruned or self.deadline.expired():
                break
        greedy = self.worst(fixed, best[1])
        return self.safe_dual(fixed, best[1]), best[1], (self.problem.refit(greedy), greedy)

    def stage(self, fixed: np.ndarray, point: np.ndarray, mu: float, best: list):
        """(the last point, whether D reached the incumbent) of one smoothing stage from ``point``, ``best``
        updated: compiled whole (``kernels.climb``), so one stage runs between deadline checks
        (at most ``node_iterations / STAGES`` iterations, 15 ms at p = 250, K = 4, n_k = 50).  A step
        gaining less than ``FTOL`` times the incumbent's F ends it: the tree's own units, so the
        climb does the same in any units of y."""
        least_gain = FTOL * (abs(self.upper) if np.isfinite(self.upper) else 1.0)
        point, best[0], pruned = kernels.climb(
            self._evaluation(fixed, mu), point, int(self.ends[-1]), self.node_iterations // STAGES, MEMORY, least_gain,
            self.upper, best[1], best[0])
        return point, pruned

    def safe_dual(self, fixed: np.ndarray, r: np.ndarray) -> float:
        """D(r) at the node, lowered by a bound on its rounding error: never above the exact D(r).

        Dot products of length m are off by at most gamma_m |x|.|y|, gamma_m = m u / (1 - m u)
        (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).  So the loss part
        sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k is off by at most gamma_(n+3) (|y_k|.|r_k| +
        ||r_k||^2 / 2) / n_k per task; each slope v = X'r / n by at most gamma_(n+1) |x_j|.|r| / n,
        below e = 2 gamma_(n+1) ||x_j|| ||r|| / n (Cauchy-Schwarz, the 2 covering the norms' own
        rounding; no |X| is kept), so (|v| + e)^2 / (2 lambda_ridge), rounded up, is above every exact weight, and the family's
        ``safe_penalty`` on those weights bounds the node's exact penalty from above (in ``greedy``:
        the greedy z, summed and rounded up).  The last subtractions are covered by a final gamma_3 term.
        """
        base, error, upper_weights = self._safe_parts(r)
        return lowered(base, error, self.safe_penalty(fixed, upper_weights, r))

    def child_bounds(self, fixed: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(K, p) lower bounds, safe as ``safe_dual``'s, on the node with each free entry fixed in, and out.

        D(r) bounds every node from below at every r (weak duality), so the child's D at the
        parent's r does: it is ``safe_dual``'s base part with the child's penalty.  Entries not
        free get the node's own bound.
        """
        base, error, upper_weights = self._safe_parts(r)
        return tuple(lowered(base, error, penalty) for penalty in self.child_penalties(fixed, upper_weights, r))

    def mu_schedule(self):
        """The stages' mu, tenfold apart, from SMOOTHING |incumbent| / s down (less ``skipped``)."""
        top = SMOOTHING * (abs(self.upper) if np.isfinite(self.upper) else 1.0) / self.problem.s
        return [top * 10.0 ** -i for i in range(self.skipped, STAGES)]

    def _of_node(self, fixed: np.ndarray, build):
        """``build(fixed)``, kept for the node last asked about: a climb asks about one node throughout."""
        key = fixed.tobytes()
        if self._node_memo[0] != key:
            self._node_memo = key, {}
        memo = self._node_memo[1]
        if build.__name__ not in memo:
            memo[build.__name__] = build(fixed)
        return memo[build.__name__]

    def dual(self, fixed: np.ndarray, point: np.ndarray, mu: float):
        """(D, (smoothed D, its gradient)) at the dual point, as ``stage`` climbs them (``kernel``)."""
        X, y, ends, slope_scale, *rest = self._evaluation(fixed, mu)
        gradient = np.empty_like(point)
        value, smooth = self.kernel(X, y, ends, point, slope_scale, *rest, gradient)
        return value, (smooth, gradient)

