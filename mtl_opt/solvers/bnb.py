"""Branch and bound over supports with perspective-dual node bounds (the L0BnB / OKRidge design).

Outer approximation bounds a node by the cuts it has collected so far; where
n_k < p and lambda_ridge is small its LP bound stays near 0, because the
relaxation at a node is never solved, only approximated by Kelley's method.
Here every node solves its own relaxation, in the dual.  A node fixes some
z_jk to 1 or 0 and leaves the rest in [0, 1] under the cardinality rows.
For residuals r_k in R^(n_k) and v_k = X_k' r_k / n_k, conjugating the loss
and the perspective of the ridge term gives, for every r,

    c(z) >= D(r) = sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k - sum_jk z_jk v_jk^2 / (2 lambda_ridge),

and the worst z of the node is greedy: its fixed-in entries plus the
s - |in| heaviest free ones (per task, or per common column).  So D(r) at
that z is a proven lower bound on the node for *every* r.  It is concave in
r, strongly so (the -||r||^2 term), with a low-rank ill-conditioned part
(the chosen columns); L-BFGS climbs it from the parent's maximizer and the
best value it visits is the node's bound.  It climbs a smoothed D (the
max over z with a -(mu/2)||z||^2 term, mu shrinking tenfold per stage) and
scores every point on the exact D: the plain D's kinks, where the chosen
entries tie, stall L-BFGS.  The greedy z at the best r proposes a support,
refitted as an upper bound.  Before a node is split, the same dual point bounds each
free entry's two children (``child_bounds``, a swap in the greedy z): an entry
whose "in" child is bounded at or above the incumbent is fixed out for the
whole subtree, one whose "out" child is, in (node screening, as in L0BnB and
el0ps).  Nodes are explored best-first, ``BATCH`` at a time, so the
smallest open bound is the global lower bound; the search stops at
``rel_gap``, ``abs_gap`` or the time limit.  Branching follows OKRidge: the
entry of the node's refitted support whose removal raises F the most.  A step's
children are bounded at once, shared with a worker process (``bnb_pool``).

With the Zbar term (lambda_zbar/2) sum_j P(c_j), c_j = sum_k z_jk the tasks
using column j and P(c) = c (K - c) / K (concave, so not a node-wise greedy
any more), the tasks share one tree over the pairs (k, j), and the budgets
sum_j z_jk <= s get prices pi_k >= 0 (Lagrange multipliers, the dual point's
last K entries).  For feasible z, adding sum_k pi_k (sum_j z_jk - s) <= 0 gives

    F >= D(r, pi) = sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k - s sum_k pi_k
                    + sum_j min_S [sum_(k in S) (pi_k - w_jk) + (lambda_zbar/2) P(|S|)],

w_jk = v_jk^2 / (2 lambda_ridge), S over the task sets the node allows for
column j (its fixed-in tasks, any of its free ones).  For each size the best
S takes the cheapest free tasks, so the worst z is a sort per column; D is
concave in (r, pi) jointly and a lower bound on the node at every point with
pi >= 0.  L-BFGS climbs it over both, the prices kept >= 0, smoothed by a softmin over S (its
sum over sizes is a small recursion per column).  At lambda_zbar = 0 and the
best pi this is the greedy bound above; those variants keep the greedy.

Excluded pairs (``SparseProblem.excluded``) have v_jk = 0, so they weigh 0 in
every bound (their beta is fixed at 0), and are fixed out at the root where supports are per task.
Included pairs (side constraints) are fixed in at the root (their column, for a common support):
the bounds above already take a node's fixed-in entries, whose beta stays free (0 allowed).

With the Bbar term (``_SetSearch``) a column's coefficients are coupled through beta_bar, so
its conjugate is no longer a sum over tasks: the same priced bound enumerates each column's
2^K task sets (K <= ``MAX_BBAR_TASKS``) with the exact conjugate of the ridge and Bbar terms on
each set; on a common support (``cs_bbar``) a column holds no task or all of them, two sets at
any K.  For few tasks the enumeration is also the faster way to the Zbar bound (the same minima
and softminima as the recursion), so Zbar variants with K <= ``ENUMERATED_TASKS`` use it.

The climbs' dual evaluations (``_Search.dual``, ``_SetSearch.dual``, the products of all three)
are compiled (``bnb_kernels``), and so are the whole climbs of ``_Search`` and ``_SetSearch``
(``bnb_kernels.climb``); the Zbar recursion (``_ZbarSearch``, K > ``ENUMERATED_TASKS``) climbs with
L-BFGS-B (``lbfgsb``).  No bound comes from them: ``safe_dual`` scores the point kept.

Scope: lambda_ridge > 0, every variant (with a Bbar term on per-task supports, K <=
``MAX_BBAR_TASKS``).  The bound uses the penalties' curvature alone, not the curvature outer
approximation borrows when n_k > p; it is built for n_k <= p, where that curvature is 0 anyway.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from fractions import Fraction

import numpy as np

from .. import __version__
from ..errors import InvalidParameterError
from ..formulations.sparse import SparseProblem
from ..result import relative_gap
from ..deadline import Deadline
from ..resources import one_blas_thread
from . import bnb_kernels, lbfgsb
from .bnb_kernels import FREE, IN, OUT
from .bnb_pool import SERIAL, NodePool
from .bnb_scope import MAX_BBAR_TASKS, refusal  # noqa: F401 (bnb's scope, named here too)
from .method import SolverRun
from .options import SolveOptions
from .progress import Progress

#: L-BFGS iterations per node, over all smoothing stages.  On four benchmark instances 1000
#: closed in 6.8-31 s, 3000 in 11-40 s (stronger bounds, dearer nodes), 500 in 5.5-26 s with
#: up to 2.3x the nodes.
NODE_ITERATIONS = 1000
#: Smoothing stages per node, and the first stage's mu times s / |incumbent|.
STAGES, SMOOTHING = 4, 1e-1
#: L-BFGS memory (pairs kept): the dual's ill-conditioned part has rank about K s.
MEMORY = 10
#: A priced tree's prices are climbed in units of this times sqrt(F(0)) (``_ZbarSearch.price_unit``);
#: 0.3 climbed zbar_l2 seeds 2 and 4 to higher bounds in 60 s than 0.2 or 0.5 (benchmarks/HISTORY.md, same section).
PRICE_UNIT = 0.3
#: A smoothing stage ends when an L-BFGS step gains less than this relative to a scale: the
#: incumbent's F in ``_Search.stage``, max(|D|, 1) in the Zbar recursion's (L-BFGS-B's test).  (It was 1e-13:
#: ~1000 evaluations per node, on digits that prune nothing.)  Measured
#: (benchmarks/HISTORY.md, "bnb with the Bbar term, set enumeration and fewer steps per node"): the grid's l0l2 p = 500, K = 2 row took 27.7 s
#: at 1e-13, 21.3 s at 1e-9, 14.2 s at 1e-7 and 41.7 s at 1e-5 (weak bounds, 571 nodes against 33);
#: zbar_l2 seeds 1 and 2 of the sMTL simulation left 2.85 / 3.9% at 30 s with 1e-13, 2.45 / 3.43%
#: with 1e-7, 5.8 / 5.94% with 1e-5.
FTOL = 1e-7
#: Open nodes split per step; their children are bounded together (``NodePool.bounds``), so the
#: second core has work while the first bounds a long climb: a split's two children took very
#: different times (the shorter a fifth of the longer, median over sMTL cs_l2 seed 0's splits:
#: one is often pruned early).  One core splits the same way, so the tree is the same on both.
BATCH = 2
#: Each column's 2^K task sets are enumerated (``_SetSearch``) with a Bbar term on per-task supports
#: up to ``bnb_scope.MAX_BBAR_TASKS`` tasks, and in place of the Zbar recursion (``_ZbarSearch``) up to
#: ``ENUMERATED_TASKS``.  One dual evaluation at p = 250, n_k = 50 took (recursion / enumeration)
#: 2.1 / 1.0 ms at K = 4, 4.1 / 1.6 ms at K = 6, 3.5 / 10.6 ms at K = 8, 5.2 / 133 ms at K = 10.
ENUMERATED_TASKS = 6
#: A log-weight standing for log 0 in ``_ZbarSearch._column_softminima`` (finite: no inf - inf).
_NEVER = -1e30
#: Softmin weights exp(x) with x below this are taken as 0: a column's softmin mass is at least 1
#: (its least set's weight), and each exp(-40) < 2^-57 is below its rounding error.  Most of a column's
#: sets sit that far above its least once mu is small, so few exps are taken (benchmarks/HISTORY.md, "The
#: priced trees climb in compiled code, and their prices get a unit").
_NEGLIGIBLE = -40.0


@one_blas_thread
def solve_bnb(problem: SparseProblem, options: SolveOptions, incumbent: np.ndarray, *,
              node_iterations: int = NODE_ITERATIONS, deadline: Deadline,
              screening: bool = True, progress: Progress | None = None) -> SolverRun:
    """Best-first branch and bound from ``incumbent`` (e.g. the BCD solution).

    Without a common support or a Zbar term the tasks share nothing, so each
    gets its own tree: one joint tree would branch over the product of theirs.
    Bounds and objectives add up; each step expands ``BATCH`` nodes of the task with the
    widest gap, until the summed gap is within ``rel_gap`` or ``abs_gap``, or
    ``deadline`` (the fit's) passes; a node bounded
    when it passes keeps the best dual value found so far (valid for every r).
    ``screening=False`` splits nodes without fixing entries by their children's bounds.
    The log (``progress``, default a new one) has a row after the first step, then one a
    ``progress.EVERY`` seconds, and a final one; a row's ``open_nodes`` are the trees' open nodes.
    A step's children are bounded at once on two cores (``bnb_pool``) unless
    ``options.threads`` is 1; the result is the same either way.
    """
    reason = refusal(problem)
    if reason is not None:
        raise InvalidParameterError(reason)
    if not problem.feasible(np.zeros(incumbent.shape)):   # in scope: more includes than s allows
        return SolverRun(incumbent, problem.objective(incumbent), None, "infeasible",
                         [], {"solver": "mtl_opt", "solver_version": __version__,
                              "why": "the included features exceed s",
                              "bound": "none: infeasible"})
    progress = progress or Progress(options.verbose)
    progress.update(problem.objective(incumbent), None, 0, force=True)   # before the roots' bounds
    if problem.common_support or problem.lambda_zbar or problem.lambda_bbar:
        parts = [(problem, incumbent)]
    else:
        parts = [(problem.task(k), incumbent[k:k + 1]) for k in range(problem.n_tasks)]
    if problem.lambda_bbar or (problem.lambda_zbar and problem.n_tasks <= ENUMERATED_TASKS):
        search = _SetSearch
    else:
        search = _ZbarSearch if problem.lambda_zbar else _Search
    searches = [search(part, node_iterations, start_from, deadline, screening) for part, start_from in parts]
    pool = NodePool(options.threads, deadline)
    for one in searches:
        one.pool = pool
    stop, explored = "converged", 0

    def record(force=False):
        progress.update(sum(s.upper for s in searches), sum(s.lower() for s in searches), explored,
                        force=force, open_nodes=sum(len(s.heap) for s in searches))
    try:
        while True:
            lower, upper = sum(s.lower() for s in searches), sum(s.upper for s in searches)
            if relative_gap(upper, lower) <= options.rel_gap or upper - lower <= options.abs_gap:
                break
            if deadline.expired():
                stop = "time_limit"
                break
            explored += max(searches, key=lambda s: s.upper - s.lower()).expand()
            if progress.due():
                record()
    finally:
        pool.close()
    record(force=True)
    row = progress.rows[-1]
    B, z = np.vstack([s.best for s in searches]), np.vstack([s.best_z for s in searches])
    return SolverRun(B, problem.objective(B, z), sum(s.lower() for s in searches), stop, progress.rows,
                      {"solver": "mtl_opt", "solver_version": __version__,
                       "nodes": explored, "open_nodes": row["open_nodes"],
                       "screened": sum(s.screened for s in searches), "pool_bounds": pool.jobs}, z)


class _Search:
    """One tree: the open nodes (a heap by bound), the incumbent, how a node is bounded and split.

    A node keeps the dual point its bound came from (the residuals r, here), its children's start
    and the point that screens its entries before it is split (``screened`` counts the fixings).
    """

    #: What bounds the nodes a split makes: here, one after the other; ``solve_bnb`` sets a
    #: ``NodePool`` that bounds them on both cores.
    pool = SERIAL
    #: Stages skipped now: none for the root, ``warm_skip`` after it.
    skipped = 0

    def __init__(self, problem: SparseProblem, node_iterations: int, incumbent: np.ndarray,
                 deadline: Deadline, screening: bool = True):
        self.problem, self.node_iterations, self.deadline = problem, node_iterations, deadline
        self.screening, self.screened = screening, 0
        self.ends = np.cumsum([0] + [len(y) for y in problem.ys], dtype=np.int64)   # task k's residuals: ends[k]:ends[k+1]
        self.abs_Xs = [np.abs(X) for X in problem.Xs]
        self.X = np.ascontiguousarray(np.vstack(problem.Xs), dtype=float)   # ``bnb_kernels``' types
        self.y = np.ascontiguousarray(np.concatenate(problem.ys), dtype=float)
        self.slope_scale = problem.allowed / np.diff(self.ends)[:, None]
        self._node_memo = (None, {})
        self.heap, self.counter = [], itertools.count()
        self.best, self.best_z, self.upper = None, None, np.inf
        start = problem.completed(incumbent)
        self.offer(problem.refit(start), start)
        if self.upper > 0:   # F >= 0, so an incumbent with F = 0 (e.g. y = 0) is optimal
            root = np.full(incumbent.shape, FREE, dtype=np.int8)
            if not problem.common_support:   # a shared column's z is not a pair's: weights only
                root[problem.excluded] = OUT
                root[problem.side.include] = IN
            else:   # an included pair puts its column in the shared support
                root[:, problem.side.include.any(axis=0)] = IN
            self.push([(self._filled(root), self.start())])
        self.skipped = self.warm_skip

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

    def start(self) -> np.ndarray:
        """The root's dual point: r = y (D's maximizer without the penalty)."""
        return np.concatenate(self.problem.ys)

    def lower(self) -> float:
        """The proven lower bound: the smallest open bound (the incumbent when none is open)."""
        return min(self.heap[0][0], self.upper) if self.heap else self.upper

    def expand(self) -> int:
        """Take the ``BATCH`` open nodes with the smallest bounds (dropping those the incumbent beats),
        screen each and split it (or close it: one support left, or none), then bound all their
        children together; the number taken."""
        children, taken = [], 0
        while self.heap and taken < BATCH:
            bound, _, fixed, r = heapq.heappop(self.heap)
            if bound >= self.upper:
                continue
            taken += 1
            if self.screening:
                fixed = self.screen(fixed, r)
            if fixed is not None and not (fixed == FREE).any():
                self.offer(self.problem.refit(fixed == IN), fixed == IN)
            elif fixed is not None:
                children += [(child, r) for child in self.branch(fixed, r)]
        self.push(children)
        return taken

    def screen(self, fixed: np.ndarray, r: np.ndarray) -> np.ndarray | None:
        """The node with every free entry fixed whose other child is bounded at or above the incumbent
        (``child_bounds`` at r); None if some entry's two children both are, or the fixings overfill a
        budget: then no solution of the node beats the incumbent.  Each fixing alone keeps every such
        solution, so all of them at once do too."""
        free = fixed == FREE
        bound_in, bound_out = self.child_bounds(fixed, r)
        out, into = free & (bound_in >= self.upper), free & (bound_out >= self.upper)
        if (out & into).any():
            return None
        screened = np.where(out, OUT, np.where(into, IN, fixed)).astype(np.int8)
        changed = out | into
        self.screened += int(changed.any(axis=0).sum() if self.problem.common_support else changed.sum())
        return self._filled(screened)

    def _filled(self, fixed: np.ndarray) -> np.ndarray | None:
        """``fixed`` with the free entries of its full rows (s fixed in) fixed out; None if a row has more."""
        count = (fixed == IN).sum(axis=1)
        if np.any(count > self.problem.s):
            return None
        fixed[(count >= self.problem.s)[:, None] & (fixed == FREE)] = OUT
        return fixed

    def offer(self, B: np.ndarray, z: np.ndarray) -> None:
        """Keep (B, z) if it is better, and feasible (an incumbent handed in may miss an include).
        z is the support B was refitted on: a leaf's or a greedy support, whose refit may hold
        exact zeros that still count as z = 1 in the Zbar term (``formulations.sparse``)."""
        if self.problem.side.active and not self.problem.feasible(B, z):
            return
        value = self.problem.objective(B, z)
        if value < self.upper:
            self.best, self.best_z, self.upper = B, self.problem.indicators(B, z), value

    def push(self, nodes: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Bound the ``nodes`` (each with the dual point its climb starts from); keep those that may
        hold a better solution.

        All are bounded against the same incumbent (by ``pool``, on both cores when it runs), and
        only then are their greedy supports offered, so one core or two make the same tree.
        """
        open_nodes = []
        for fixed, r in nodes:
            if (fixed == FREE).any():
                open_nodes.append((fixed, r))
            else:                                # a single support: solved exactly
                self.offer(self.problem.refit(fixed == IN), fixed == IN)
        for (fixed, _), (bound, r_node, greedy) in zip(open_nodes, self.pool.bounds(self, open_nodes)):
            self.offer(*greedy)
            if bound < self.upper:
                heapq.heappush(self.heap, (bound, next(self.counter), fixed, r_node))

    def detached(self) -> _Search:
        """A copy that bounds nodes elsewhere (``bnb_pool``'s worker): no tree, no pool."""
        twin = copy.copy(self)
        twin.heap, twin.counter, twin.best, twin.best_z = [], None, None, None
        twin._node_memo = (None, {})   # its own: this one changes while the twin is sent
        twin.__dict__.pop("pool", None)
        return twin

    def branch(self, fixed: np.ndarray, r: np.ndarray) -> list[np.ndarray]:
        """The two children of a split on the free entry (column for common supports) of the node's
        refitted greedy support whose removal raises F the most (OKRidge's rule): its "out" child
        has the largest bound to gain.  Ties in the relaxation's weights make "the heaviest entry"
        an arbitrary pick, often one whose removal changes nothing."""
        B = self.problem.refit(self.worst(fixed, r))
        pairs = np.argwhere((B != 0) & (fixed == FREE))
        if not len(pairs):   # the refit zeroed every free entry it chose: take the heaviest
            weight = np.where(fixed == FREE, self.weights(r), -1.0)
            pairs = np.array([np.unravel_index(np.argmax(weight), fixed.shape)])
        if self.problem.common_support:
            pairs = [(0, j) for j in np.unique(pairs[:, 1])]
        entries = [self._entry(k, j) for k, j in pairs]
        removals = np.repeat(B[None], len(entries), axis=0)
        for removal, entry in zip(removals, entries):
            removal[entry] = 0.0
        entry = entries[int(np.argmax(self.problem.objectives(removals)))]
        children = []
        for value in (IN, OUT):
            child = fixed.copy()
            child[entry] = value
            children.append(self._filled(child))
        return children

    def _entry(self, k: int, j: int):
        """Index of the branching variable z_jk, or of the column j for common supports."""
        return (slice(None), int(j)) if self.problem.common_support else (int(k), int(j))

    def bound(self, fixed: np.ndarray, r0: np.ndarray):
        """(a proven bound, its residuals, (its greedy support refitted, that support)) for the node ``fixed``, from
        ``r0`` (the refit here, not in ``push``: on the worker's core for the worker's nodes).

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
        updated: compiled whole (``bnb_kernels.climb``), so one stage runs between deadline checks
        (at most ``node_iterations / STAGES`` iterations, 15 ms at p = 250, K = 4, n_k = 50).  A step
        gaining less than ``FTOL`` times the incumbent's F ends it: the tree's own units, so the
        climb does the same in any units of y."""
        least_gain = FTOL * (abs(self.upper) if np.isfinite(self.upper) else 1.0)
        point, best[0], pruned = bnb_kernels.climb(
            self._evaluation(fixed, mu), point, int(self.ends[-1]), self.node_iterations // STAGES, MEMORY, least_gain,
            self.upper, best[1], best[0])
        return point, pruned

    #: The dual's evaluation (``dual``); ``_evaluation`` holds its arguments but the point and gradient.
    kernel = staticmethod(bnb_kernels.search_dual)

    def _evaluation(self, fixed: np.ndarray, mu: float) -> tuple:
        """What ``stage`` climbs: ``kernel``'s arguments at the node, but the point and gradient (a
        ``bnb_kernels.SEARCH``)."""
        return (self.X, self.y, self.ends, self.slope_scale, float(self.problem.lambda_ridge), float(mu),
                self._states(fixed), int(self.problem.s))

    def safe_dual(self, fixed: np.ndarray, r: np.ndarray) -> float:
        """D(r) at the node, lowered by a bound on its rounding error: never above the exact D(r).

        Dot products of length m are off by at most gamma_m |x|.|y|, gamma_m = m u / (1 - m u)
        (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).  So the loss part
        sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k is off by at most gamma_(n+3) (|y_k|.|r_k| +
        ||r_k||^2 / 2) / n_k per task; each slope v = X'r / n by at most e = gamma_(n+1) |X|'|r| / n,
        so (|v| + e)^2 / (2 lambda_ridge), rounded up, is above every exact weight, and the greedy
        z on those weights (summed, rounded up) bounds the node's exact penalty max_z z.a from
        above (``safe_penalty``).  The last subtractions are covered by a final gamma_3 term.
        """
        base, error, upper_weights = self._safe_parts(r)
        return _lowered(base, error, self.safe_penalty(fixed, upper_weights, r))

    def child_bounds(self, fixed: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(K, p) lower bounds, safe as ``safe_dual``'s, on the node with each free entry fixed in, and out.

        D(r) bounds every node from below at every r (weak duality), so the child's D at the
        parent's r does: it is ``safe_dual``'s base part with the child's penalty.  Entries not
        free get the node's own bound.
        """
        base, error, upper_weights = self._safe_parts(r)
        return tuple(_lowered(base, error, penalty) for penalty in self.child_penalties(fixed, upper_weights, r))

    def child_penalties(self, fixed: np.ndarray, upper_weights: np.ndarray, r: np.ndarray):
        """Floats above the exact penalty part of -D(r) at each entry's "in" child, and "out" child.

        A row's worst z takes its b = s - |in| heaviest free entries, w_(1) >= ... >= w_(b) >= w_(b+1)
        (0 past the last; b >= 1 where a row has a free entry, ``_filled``).  Fixing an unchosen
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
        slack = 2 * _gamma(upper_weights.size + 4) * (penalty + magnitude)
        children = penalty + change + slack
        if self.problem.common_support:   # a column's children are every task's
            return [np.repeat(child, len(fixed), axis=0) for child in children]
        return list(children)

    def _safe_parts(self, r: np.ndarray):
        """(base, its error bound, weights above the exact ones) of ``safe_dual`` at r."""
        base, error, v, slack = self._safe_slopes(r)
        upper_weights = (np.abs(v) + slack) ** 2 / (2 * self.problem.lambda_ridge)
        return base, error, upper_weights * (1 + _gamma(4)) * self.problem.allowed

    def _safe_slopes(self, r: np.ndarray):
        """(base, its error bound, the slopes v (K, p), a bound on each slope's error) at r."""
        problem = self.problem
        base, error = 0.0, 0.0
        v, slack = np.empty((problem.n_tasks, problem.n_features)), np.empty((problem.n_tasks, problem.n_features))
        for k, (X, abs_X, y) in enumerate(zip(problem.Xs, self.abs_Xs, problem.ys)):
            rk, n = r[self.ends[k]:self.ends[k + 1]], len(y)
            base += (y @ rk - rk @ rk / 2) / n
            error += _gamma(n + 3 + problem.n_tasks) * (np.abs(y) @ np.abs(rk) + rk @ rk / 2) / n
            slack[k] = _gamma(n + 1) * (np.abs(rk) @ abs_X) / n
            v[k] = X.T @ rk / n
        return base, error, v, slack

    def safe_penalty(self, fixed: np.ndarray, upper_weights: np.ndarray, r: np.ndarray) -> float:
        """A float above the exact penalty part of -D(r) at weights below ``upper_weights``."""
        return upper_weights[self._greedy(fixed, upper_weights)].sum() * (1 + _gamma(upper_weights.size))

    def mu_schedule(self):
        """The stages' mu, tenfold apart, from SMOOTHING |incumbent| / s down (less ``skipped``)."""
        top = SMOOTHING * (abs(self.upper) if np.isfinite(self.upper) else 1.0) / self.problem.s
        return [top * 10.0 ** -i for i in range(self.skipped, STAGES)]

    def weights(self, r: np.ndarray) -> np.ndarray:
        """(K, p) v_jk^2 / (2 lambda_ridge), the slope of -D in z_jk."""
        v = self._slopes(r)
        return v**2 / (2 * self.problem.lambda_ridge)

    def dual(self, fixed: np.ndarray, point: np.ndarray, mu: float):
        """(D, (smoothed D, its gradient)) at the dual point, as ``stage`` climbs them (``kernel``)."""
        X, y, ends, slope_scale, *rest = self._evaluation(fixed, mu)
        gradient = np.empty_like(point)
        value, smooth = self.kernel(X, y, ends, point, slope_scale, *rest, gradient)
        return value, (smooth, gradient)

    def _states(self, fixed: np.ndarray) -> np.ndarray:
        """The kernels' node states: one row per budget (a common support's columns once)."""
        return np.ascontiguousarray(fixed[:1] if self.problem.common_support else fixed, dtype=np.int8)

    def _loss_part(self, point: np.ndarray, penalty_slopes: np.ndarray):
        """(sum_k (y_k.r_k - ||r_k||^2 / 2) / n_k, the gradient in the point of that minus a penalty
        part whose gradient in v is ``penalty_slopes`` (K, p); the K prices' entries left to fill)."""
        gradient = np.empty_like(point)
        base = bnb_kernels.loss_part(self.X, self.y, self.ends, point, np.ascontiguousarray(penalty_slopes, dtype=float),
                                     gradient)
        return base, gradient

    def worst(self, fixed: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The node's worst support at the dual point ``r`` (a feasible one: it is refitted)."""
        return self._greedy(fixed, self.weights(r))

    def _slopes(self, r: np.ndarray) -> np.ndarray:
        """(K, p) v_jk = X_k' r_k / n_k, 0 for an excluded pair (its beta is fixed at 0)."""
        return bnb_kernels.products(self.X, self.ends, r) * self.slope_scale

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

    def _of_node(self, fixed: np.ndarray, build):
        """``build(fixed)``, kept for the node last asked about: a climb asks about one node throughout."""
        key = fixed.tobytes()
        if self._node_memo[0] != key:
            self._node_memo = key, {}
        memo = self._node_memo[1]
        if build.__name__ not in memo:
            memo[build.__name__] = build(fixed)
        return memo[build.__name__]


class _ZbarSearch(_Search):
    """The joint tree of a Zbar variant: budgets priced, worst z per column (module docstring).

    The dual point is (r, pi): the residuals, then the K prices in units of ``price_unit``, kept >= 0
    by the climb.
    """

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
        """``_Search.stage`` by L-BFGS-B (``lbfgsb``), which keeps the prices >= 0: the deadline is
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
        problem, lam = self.problem, self.problem.lambda_ridge
        v, prices = self._slopes(point), self.prices(point)
        cost = prices[:, None] - v**2 / (2 * lam)
        minima = self._column_minima(fixed, cost)
        softminima, z = self._column_softminima(fixed, cost, mu)
        base, gradient = self._loss_part(point, z * v / lam)
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
        slack = 2 * _gamma(fixed.shape[1] + 3 * fixed.shape[0] + 6) * self._magnitude(fixed, upper_weights, prices)
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
        slack = 2 * _gamma(p + 3 * K + 8) * (self._magnitude(fixed, upper_weights, prices) + abs(penalty))
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


class _SetSearch(_ZbarSearch):
    """The joint tree of a Bbar or Zbar variant with each column's task sets enumerated.

    On the tasks S using column j (the others' coefficients 0), the ridge and Bbar terms are
    b'Q_S b / 2 with Q_S = a I - c 11', a = lambda_ridge + lambda_bbar, c = lambda_bbar / K (beta_bar
    averages over all K tasks), whose conjugate is, by Sherman-Morrison (a - c|S| >= lambda_ridge > 0),

        g_S(v) = ||v_S||^2 / (2a) + C_|S| (sum_(k in S) v_k)^2,   C_m = c / (2a (a - c m)).

    For a fixed support, F is the max over r of base(r) - sum_j g_(S_j)(v_j) plus the Zbar term (the
    dual of its convex part), so ``_ZbarSearch``'s bound holds with g_S in place of sum_(k in S) w_jk:

        F >= base(r) - s sum_k pi_k + sum_j min_S [sum_(k in S) pi_k - g_S(v_j) + (lambda_zbar/2) P(|S|)]

    for every r and pi >= 0, S over the task sets the node allows for column j, all 2^K of them
    enumerated (on a common support the two a shared column can have: no task, or all K).  C_|S|
    is what the Bbar term adds: a column's coefficients are priced at lambda_ridge + lambda_bbar
    along the tasks' differences, at lambda_ridge along their mean.  At lambda_bbar = 0 (C = 0,
    a = lambda_ridge) this is ``_ZbarSearch``'s bound, found by enumeration.
    """

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
        self.inverse = _rounded_up(1 / (2 * a))
        self.coupling = np.array([_rounded_up(c / (2 * a * (a - c * m))) for m in self.set_sizes])
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
    #: without prices are (``bnb_kernels.climb`` keeps the prices >= 0).
    stage, dual, kernel = _Search.stage, _Search.dual, staticmethod(bnb_kernels.set_dual)

    def _evaluation(self, fixed: np.ndarray, mu: float) -> tuple:
        """What ``stage`` climbs: ``kernel``'s arguments at the node, but the point and gradient (a
        ``bnb_kernels.SETS``)."""
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
        sums = np.abs(self.sets @ v) + self.sets @ (slack + 2 * _gamma(v.shape[0] + 2) * np.abs(v))
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
        slack = 2 * _gamma(p + 3 * K + 10) * (budget + magnitude.max(axis=0).sum())
        return budget - minima.sum() + slack, totals, minima, slack

    def child_penalties(self, fixed: np.ndarray, slopes, point: np.ndarray):
        """Fixing a free (k, j) in (out) keeps column j's sets holding (not holding) task k: its minimum
        rises from m_j to m'_j and the penalty falls by m'_j - m_j, the other columns unchanged.  The
        two extra minima and subtractions are covered by adding |penalty| to the slack's magnitude."""
        penalty, totals, minima, slack = self._safe_penalty_parts(fixed, slopes, point)
        extra = slack + 2 * _gamma(fixed.shape[1] + 3 * fixed.shape[0] + 10) * abs(penalty)
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


def _lowered(base, error, penalty):
    """base - penalty, lowered by the error bounds: ``error`` on base, gamma_3 on the two subtractions."""
    return base - error - penalty - _gamma(3) * (abs(base) + error + abs(penalty))


def _rounded_up(value: Fraction) -> float:
    """The smallest float at or above the rational ``value`` (``float()`` rounds to nearest)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= value else float(np.nextafter(nearest, np.inf))


def _gamma(m: int) -> float:
    """gamma_m = m u / (1 - m u), u = eps / 2: the relative error bound of m rounded operations."""
    u = np.finfo(float).eps / 2
    return m * u / (1 - m * u)


class _Pruned(Exception):
    """Raised inside L-BFGS-B when a node's bound passes the incumbent (its argument True), or at the
    deadline (False)."""
