"""The branch-and-bound engine both trees run on: open nodes, incumbent, pruning and the bound
of what has been closed; it knows nothing of regression or clustering.

A tree problem hands the engine three things (``TreeProblem``):

- ``bounder``: the object that bounds a node's children, shipped once to where node work runs
  (``workers``), with ``work(job, level, deadline)`` returning the bound of one job (``level``:
  the bound that prunes it, ``Engine.level``);
- ``split(node, bound, engine)``: what a node taken from the queue becomes: the jobs its children
  need bounded, and the leaves it already solved (offered by the engine once the step's nodes
  are split); a node it closes itself (a leaf with only a bound) goes to ``engine.close``;
- ``children(node, bound, jobs, results, engine)``: the children, as (bound, node) pairs, once
  their jobs are bounded; it may ``offer`` solutions found on the way (in order: a child is kept
  or pruned against the incumbent of that moment).

The engine takes up to ``batch`` open nodes per ``step`` (best first by bound, or depth first),
splits all of them, has every job bounded at once by its ``workers`` (here, on local processes or
on a Dask cluster: the same results in any case), and keeps the children the incumbent does not
prune.  A node is pruned when its bound >= upper (1 - ``prune_gap``); ``lower()`` is the least
bound over the open and the closed nodes (pruned nodes, leaves with only a bound), capped by the
incumbent: a proven bound on the whole tree at any moment, a deadline's included (every node
still open counts as open, wherever its job was).
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Protocol

from .workers import Workers


class TreeProblem(Protocol):
    """What the engine needs of a tree (module docstring)."""

    bounder: Any

    def split(self, node, bound: float, engine: Engine) -> tuple[list, list]: ...

    def children(self, node, bound: float, jobs: list, results: list, engine: Engine): ...


class Engine:
    """One branch-and-bound run over ``tree`` (a ``TreeProblem``): ``push`` its root, then ``step``
    (or ``run`` to the end or a deadline)."""

    def __init__(self, tree: TreeProblem, workers: Workers, *, depth_first: bool = False,
                 batch: int = 1, prune_gap: float = 0.0):
        self.tree, self.workers = tree, workers
        self.depth_first, self.batch, self.prune_gap = depth_first, batch, prune_gap
        self.open: list = []   # a heap of (bound, counter, node), or a stack when depth first
        self.counter = itertools.count()
        self.upper, self.best = math.inf, None
        self.closed = math.inf   # the least bound of the nodes closed without a solution
        self.nodes = 0           # nodes taken and split

    def offer(self, value: float, solution) -> bool:
        """Keep ``solution`` (of objective ``value``) if it beats the incumbent; whether it did."""
        if value < self.upper:
            self.upper, self.best = value, solution
            return True
        return False

    def level(self) -> float:
        """The bound that prunes a node: ``upper (1 - prune_gap)``.  Jobs are bounded against it,
        so a bounder may stop climbing there (past it the node is closed whatever its bound)."""
        return self.upper * (1 - self.prune_gap)

    def prunes(self, bound: float) -> bool:
        """Whether a node of this bound can hold nothing ``prune_gap`` better than the incumbent."""
        return bound >= self.level()

    def close(self, bound: float) -> None:
        """A node is done with only ``bound`` proven on it (pruned, or a leaf solved inexactly)."""
        self.closed = min(self.closed, bound)

    def push(self, bound: float, node) -> None:
        """Keep ``node`` open, unless its bound is pruned (then it is closed)."""
        if self.prunes(bound):
            self.close(bound)
        elif self.depth_first:
            self.open.append((bound, node))
        else:
            heapq.heappush(self.open, (bound, next(self.counter), node))

    def least_bound(self) -> float:
        """The least bound over the open and the closed nodes (inf when there are none)."""
        if not self.open:
            return self.closed
        least = min(entry[0] for entry in self.open) if self.depth_first else self.open[0][0]
        return min(least, self.closed)

    def lower(self) -> float:
        """The proven lower bound on the tree: ``least_bound`` capped by the incumbent."""
        return min(self.least_bound(), self.upper)

    def step(self) -> int:
        """Split up to ``batch`` open nodes (the pruned ones closed on the way), bound all their
        children's jobs at once, keep the children; the number of nodes split."""
        taken = []
        while self.open and len(taken) < self.batch:
            entry = self.open.pop() if self.depth_first else heapq.heappop(self.open)
            bound, node = entry[0], entry[-1]
            if self.prunes(bound):
                self.close(bound)
                continue
            self.nodes += 1
            taken.append((node, bound, *self.tree.split(node, bound, self)))
        for _, _, _, leaves in taken:
            for value, solution in leaves:
                self.offer(value, solution)
        jobs = [job for _, _, node_jobs, _ in taken for job in node_jobs]
        results = iter(self.workers.map(self.tree.bounder, jobs, self.level()) if jobs else [])
        for node, bound, node_jobs, _ in taken:
            children = self.tree.children(node, bound, node_jobs, [next(results) for _ in node_jobs], self)
            if self.depth_first:   # the best child on top of the stack
                children = reversed(list(children))
            for child_bound, child in children:
                self.push(child_bound, child)
        return len(taken)

    def run(self, deadline) -> bool:
        """``step`` until no node is open (True) or ``deadline`` passes (False: the open nodes stay
        open, and ``lower`` counts them)."""
        while self.open:
            if deadline.expired():
                return False
            self.step()
        return True
