"""One branch-and-bound tree over supports: its open nodes, its incumbent, and how a node is
screened, split and its children kept.

A node is an int8 array of entry states (``kernels.FREE``, ``OUT``, ``IN``), one row per task,
kept on a heap by its bound with the dual point that bound came from.  Nodes are taken
best-first, ``BATCH`` at a time, so the smallest open bound is the tree's lower bound.  Before a
node is split, its dual point bounds each free entry's two children (``child_bounds``): an entry
whose "in" child is bounded at or above the incumbent is fixed out for the whole subtree, one
whose "out" child is, in (node screening, as in L0BnB and el0ps).  Branching follows OKRidge:
the entry of the node's refitted worst support whose removal raises F the most.

Excluded pairs (``SparseProblem.excluded``) are fixed out at the root where supports are per
task (every bound weighs them 0 anyway: their beta is fixed at 0); included pairs (side
constraints) are fixed in at the root (their column, for a common support), and their beta
stays free (0 allowed).
"""

from __future__ import annotations

import copy
import heapq
import itertools

import numpy as np

from ...formulations.sparse import SparseProblem
from ...deadline import Deadline
from .kernels import FREE, IN, OUT
from .pool import SERIAL

#: Open nodes split per step; their children are bounded together (``NodePool.bounds``), so the
#: second core has work while the first bounds a long climb: a split's two children took very
#: different times (the shorter a fifth of the longer, median over sMTL cs_l2 seed 0's splits:
#: one is often pruned early).  One core splits the same way, so the tree is the same on both.
BATCH = 2


class Tree:
    """One tree: the open nodes (a heap by bound), the incumbent, how a node is screened and split.

    A node keeps the dual point its bound came from, its children's start and the point that
    screens its entries before it is split (``screened`` counts the fixings).  How a node is
    bounded is the subclass's (``node.NodeBound`` and a bound family): ``bound``, ``child_bounds``,
    ``worst``, ``weights``, ``start`` and ``warm_skip``; what they derive from a node they may keep
    with ``_of_node``.
    """

    #: What bounds the nodes a split makes: here, one after the other; ``solve_bnb`` sets a
    #: ``NodePool`` that bounds them on both cores.
    pool = SERIAL

    def __init__(self, problem: SparseProblem, incumbent: np.ndarray, deadline: Deadline, screening: bool = True):
        self.problem, self.deadline = problem, deadline
        self.screening, self.screened = screening, 0
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

    def detached(self) -> Tree:
        """A copy that bounds nodes elsewhere (``pool``'s worker): no tree, no pool."""
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

    def _of_node(self, fixed: np.ndarray, build):
        """``build(fixed)``, kept for the node last asked about: a climb asks about one node throughout."""
        key = fixed.tobytes()
        if self._node_memo[0] != key:
            self._node_memo = key, {}
        memo = self._node_memo[1]
        if build.__name__ not in memo:
            memo[build.__name__] = build(fixed)
        return memo[build.__name__]
