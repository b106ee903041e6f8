"""One branch-and-bound tree over supports, as the engine (``engine.search``) runs it: how a node
is screened, split and its children kept.

A node is an int8 array of entry states (``kernels.FREE``, ``OUT``, ``IN``), one row per task,
with the dual point its bound came from; the engine keeps them best-first by bound and takes
``BATCH`` per step, so the smallest open bound is the tree's lower bound.  Before a node is split,
its dual point bounds each free entry's two children (``child_bounds``): an entry whose "in" child
is bounded at or above the incumbent is fixed out for the whole subtree, one whose "out" child
is, in (node screening, as in L0BnB and el0ps).  Branching follows OKRidge: the entry of the
node's refitted worst support whose removal raises F the most.  The children's bounds are the
bounder's (a bound family: ``greedy``, ``zbar``, ``sets``), which the engine's workers run.

Excluded pairs (``SparseProblem.excluded``) are fixed out at the root where supports are per
task (every bound weighs them 0 anyway: their beta is fixed at 0); included pairs (side
constraints) are fixed in at the root (their column, for a common support), and their beta
stays free (0 allowed).
"""

from __future__ import annotations

import numpy as np

from ....formulations.sparse import SparseProblem
from ...engine import Engine, Workers
from .kernels import FREE, IN, OUT

#: Open nodes split per step; their children are bounded together (``Workers.map``), so a
#: second core has work while the first bounds a long climb: a split's two children took very
#: different times (the shorter a fifth of the longer, median over sMTL cs_l2 seed 0's splits:
#: one is often pruned early).  One core splits the same way, so the tree is the same on both.
#: With more workers, a step splits half as many nodes as there are workers, if that is more.
BATCH = 2


def filled(fixed: np.ndarray, s: int) -> np.ndarray | None:
    """``fixed`` with the free entries of its full rows (s fixed in) fixed out; None if a row has more."""
    count = (fixed == IN).sum(axis=1)
    if np.any(count > s):
        return None
    fixed[(count >= s)[:, None] & (fixed == FREE)] = OUT
    return fixed


class SupportTree:
    """One tree: its engine (open nodes, incumbent), how a node is screened and split; ``bounder``
    bounds the nodes (``node.NodeBound``).  ``screened`` counts the screening's fixings."""

    def __init__(self, problem: SparseProblem, bounder, incumbent: np.ndarray, workers: Workers,
                 screening: bool = True, batch: int = BATCH, prune_gap: float = 0.0):
        self.problem, self.bounder = problem, bounder
        self.screening, self.screened = screening, 0
        self.engine = Engine(self, workers, batch=batch, prune_gap=prune_gap)
        start = problem.completed(incumbent)
        self.offer(problem.refit(start), start)
        if self.upper > 0:   # F >= 0, so an incumbent with F = 0 (e.g. y = 0) is optimal
            root = np.full(incumbent.shape, FREE, dtype=np.int8)
            if not problem.common_support:   # a shared column's z is not a pair's: weights only
                root[problem.excluded] = OUT
                root[problem.side.include] = IN
            else:   # an included pair puts its column in the shared support
                root[:, problem.side.include.any(axis=0)] = IN
            jobs, leaves = self._jobs([filled(root, problem.s)], bounder.start(), skip=0)
            for leaf in leaves:
                self.engine.offer(*leaf)
            results = workers.map(bounder, jobs, self.engine.level()) if jobs else []
            for bound, node in self.children(None, None, jobs, results, self.engine):
                self.engine.push(bound, node)

    @property
    def upper(self) -> float:
        return self.engine.upper

    @property
    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """(B, z) of the incumbent: z is the support B was refitted on (``offer``)."""
        return self.engine.best

    def lower(self) -> float:
        """The proven lower bound: the smallest open bound (the incumbent when none is open)."""
        return self.engine.lower()

    def split(self, node, bound: float, engine: Engine):
        """The node screened, then closed (one support left: solved; or none) or split: its
        children's jobs, and those already single supports (leaves)."""
        fixed, r = node
        if self.screening:
            fixed = self.screen(fixed, r)
        if fixed is not None and not (fixed == FREE).any():
            self.offer(self.problem.refit(fixed == IN), fixed == IN)
        elif fixed is not None:
            return self._jobs(self.branch(fixed, r), r, skip=self.bounder.warm_skip)
        return [], []

    def children(self, node, bound, jobs: list, results: list, engine: Engine):
        """The bounded children (bound, (fixed, dual point)), each greedy support offered first."""
        for (fixed, _, _), (child_bound, r, greedy) in zip(jobs, results):
            self.offer(*greedy)
            yield child_bound, (fixed, r)

    def _jobs(self, nodes: list[np.ndarray], r: np.ndarray, skip: int):
        """(the bounder's jobs for the nodes with a free entry, climbed from ``r`` with ``skip``
        smoothing stages skipped; the others, single supports solved exactly, as the engine offers
        them: (F, (B, z)), the infeasible left out)."""
        jobs = [(fixed, r, skip) for fixed in nodes if (fixed == FREE).any()]
        leaves = (self._valued(self.problem.refit(fixed == IN), fixed == IN) for fixed in nodes
                  if not (fixed == FREE).any())
        return jobs, [leaf for leaf in leaves if leaf is not None]

    def _valued(self, B: np.ndarray, z: np.ndarray):
        """(F, (B, its indicators)) of a refit on the support z, or None if it is infeasible (an
        incumbent handed in may miss an include).  z is the support B was refitted on: a leaf's or
        a greedy support, whose refit may hold exact zeros that still count as z = 1 in the Zbar
        term (``formulations.sparse``)."""
        if self.problem.side.active and not self.problem.feasible(B, z):
            return None
        return self.problem.objective(B, z), (B, self.problem.indicators(B, z))

    def screen(self, fixed: np.ndarray, r: np.ndarray) -> np.ndarray | None:
        """The node with every free entry fixed whose other child is bounded at or above the incumbent
        (``child_bounds`` at r); None if some entry's two children both are, or the fixings overfill a
        budget: then no solution of the node beats the incumbent.  Each fixing alone keeps every such
        solution, so all of them at once do too."""
        free = fixed == FREE
        bound_in, bound_out = self.bounder.child_bounds(fixed, r)
        out, into = free & (bound_in >= self.upper), free & (bound_out >= self.upper)
        if (out & into).any():
            return None
        screened = np.where(out, OUT, np.where(into, IN, fixed)).astype(np.int8)
        changed = out | into
        self.screened += int(changed.any(axis=0).sum() if self.problem.common_support else changed.sum())
        return filled(screened, self.problem.s)

    def offer(self, B: np.ndarray, z: np.ndarray) -> None:
        """Keep B, refitted on the support z, if it is feasible and better (``_valued``)."""
        valued = self._valued(B, z)
        if valued is not None:
            self.engine.offer(*valued)

    def branch(self, fixed: np.ndarray, r: np.ndarray) -> list[np.ndarray]:
        """The two children of a split on the free entry (column for common supports) of the node's
        refitted greedy support whose removal raises F the most (OKRidge's rule): its "out" child
        has the largest bound to gain.  Ties in the relaxation's weights make "the heaviest entry"
        an arbitrary pick, often one whose removal changes nothing."""
        B = self.problem.refit(self.bounder.worst(fixed, r))
        pairs = np.argwhere((B != 0) & (fixed == FREE))
        if not len(pairs):   # the refit zeroed every free entry it chose: take the heaviest
            weight = np.where(fixed == FREE, self.bounder.weights(r), -1.0)
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
            children.append(filled(child, self.problem.s))
        return children

    def _entry(self, k: int, j: int):
        """Index of the branching variable z_jk, or of the column j for common supports."""
        return (slice(None), int(j)) if self.problem.common_support else (int(k), int(j))
