"""Clustered ARMUL certified by a branch and bound over task-to-cluster assignments.

With the labels fixed, clustered ARMUL separates into one vanilla ARMUL per cluster (its center
free): its optimum is the least, over partitions of the tasks into at most K groups, of
sum_c f(S_c), f(S) the vanilla optimum of group S.  f is superadditive,
f(A u B) >= f(A) + f(B) (a least sum is at least the sum of the least terms), so a node that has
placed the tasks before position t of ``order`` in groups A_1..A_K, leaving U_t, is bounded by

    sum_c LB f(A_c) + LB opt_K(U_t)

(any completion B_1..B_K partitions U_t: sum_c f(A_c u B_c) >= sum_c f(A_c) + sum_c f(B_c)).
Each suffix also gets a block floor before it is searched, and the tasks before a stage's
suffix one more (their own clustering costs at least that): K groups split a block of tasks into
at most K groups, whose least cost is enumerated (``AssignmentTree._floors``; DESIGN.md, claim 5).
The repetitive branch and bound of Brusco (2006, Psychometrika 71) solves the suffix problems
opt_K(U_t) first, t = m - 1 down to 0, each depth first from an incumbent, so each is there as
the bound of the next.  Tasks are ordered farthest first (distinct tasks decide the clusters
early), and for K <= 2 the floors' blocks are then laid out as runs at the order's end
(``AssignmentTree._laid_out``); labels are opened in order (task order[0] in cluster 0, the first task not in it in
cluster 1, ...), which removes the K! relabelings; children are visited best bound first.

Every LB f(S) is safe: FISTA's best dual feasible point (``ArmulProblem.dual_bound``, its
rounding covered; for the logistic loss up to the float dual point's ~eps constraint violation,
as every logistic ARMUL bound, see ``formulations.armul``), never a primal value; a solve cut by
the deadline keeps its bound so far.
Each group is solved once (cached by its bit mask), warm-started from the group it grew from.
The stages run on the package's engine (``engine.search``, depth first); a node's new groups are
its jobs, solved by the fit's workers (``engine.workers``: this machine's cores, or a Dask
cluster), which hold the problem and get each group as its tasks and warm start.
Bounds are sums of at most K + 1 non-negative floats, lowered past their rounding; a child keeps
its parent's bound when its own is less.  A node is pruned when its bound >= incumbent *
(1 - rel_gap); the bound a stage proves is the least over the nodes it closed (pruned nodes,
leaves, and the nodes open when the deadline passed).  Stage t proves opt_K(all tasks) >= the
block floor of the tasks before t + its bound; the tree's bound is the best of these over
the stages reached, so a stage cut by the deadline never lowers what an earlier stage proved (the
live log shows the same running best).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import __version__
from ...deadline import Deadline
from ...formulations.armul import ArmulProblem
from ...rounding import lowered_sum
from ...result import Status
from . import prox
from ..engine import Engine, Serial, Workers, workers_for
from ..method import SolverRun
from ..progress import Progress

#: Each group's vanilla solve stops at this share of the tree's rel_gap (its bound and its
#: objective then differ by less than the tree's tolerance), and at least at GROUP_FLOOR.
GROUP_SHARE, GROUP_FLOOR = 0.1, 1e-10
#: Tasks per block of the floors (``AssignmentTree._floors``): 2 (K + 1) when at most this many
#: (a block's groups of 2 to b - K + 1 tasks are solved, up to 2^b), else K + 1.
BLOCK_TASKS = 6

BOUND_SOURCE = ("least safe bound over the closed nodes of a branch and bound over task-to-cluster "
                "assignments (FISTA dual feasible points per group, superadditive suffix bounds "
                "with block floors)")


@dataclass
class Clustering:
    """The tree's answer: labels (m,), theta (m, d), cluster centers (K, d), a proven lower
    bound on the clustered optimum, whether it is certified to rel_gap (``finished``) and the
    number of nodes."""

    labels: np.ndarray
    theta: np.ndarray
    centers: np.ndarray
    bound: float
    finished: bool
    nodes: int


class GroupSolver:
    """The vanilla solve of one group of tasks (the trees' bounder, held by every worker): a job
    is (its tasks, its warm start), the result (a safe bound, the FISTA run)."""

    def __init__(self, problem: ArmulProblem, rel_gap: float):
        self.problem, self.rel_gap = problem.for_subsets(), rel_gap

    def work(self, job: tuple, upper: float, deadline) -> tuple[float, prox.ProxRun]:
        tasks, theta0, center0 = job
        sub = self.problem.subset(tasks)
        run = prox.fista(sub, theta0, center0, rel_gap=self.rel_gap, deadline=deadline)
        return safe_bound(sub, run), run


class GroupCosts:
    """f(S) of every group solved so far: bit mask -> (safe bound, FISTA run)."""

    def __init__(self, problem: ArmulProblem, rel_gap: float, deadline: Deadline):
        self.solver, self.deadline = GroupSolver(problem, rel_gap), deadline
        self.runs: dict[int, tuple[float, prox.ProxRun]] = {}

    def job(self, group: int, parent: int = 0) -> tuple:
        """The solve of ``group`` from ``parent``'s point (a subgroup) if it is solved: the parent's
        tasks where they were, the new ones at its center."""
        tasks = _tasks(group)
        theta0 = center0 = None
        if parent in self.runs:
            run = self.runs[parent][1]
            center0 = run.centers[0]
            theta0 = np.tile(center0, (len(tasks), 1))
            theta0[np.isin(tasks, _tasks(parent))] = run.theta
        return tasks, theta0, center0

    def get(self, group: int, parent: int = 0) -> tuple[float, prox.ProxRun]:
        """(bound, run) of ``group``, solved here from ``parent``'s point if not solved yet."""
        if group not in self.runs:
            self.runs[group] = self.solver.work(self.job(group, parent), math.inf, self.deadline)
        return self.runs[group]

    def bound(self, group: int, parent: int = 0) -> float:
        solved = self.runs.get(group)
        return solved[0] if solved is not None else self.get(group, parent)[0] if group else 0.0

    def value(self, group: int) -> float:
        return self.get(group)[1].objective if group else 0.0


def safe_bound(group: ArmulProblem, run: prox.ProxRun) -> float:
    """A proven lower bound on the vanilla optimum of ``group``: FISTA's best dual bound, the
    independent-tasks bound at its point (lambda >= 0), or 0 (both losses are >= 0)."""
    candidates = [run.lower_bound, group.dual_bound(run.theta, "independent"), 0.0]
    return max(b for b in candidates if b is not None and math.isfinite(b))


def farthest_first(points: np.ndarray) -> np.ndarray:
    """An order of the rows: the one farthest from their mean, then each time the one farthest
    from those already taken."""
    order = [int(np.argmax(np.sum((points - points.mean(axis=0)) ** 2, axis=1)))]
    near = np.sum((points - points[order[0]]) ** 2, axis=1)
    for _ in range(1, len(points)):
        near[order] = -1.0
        order.append(int(np.argmax(near)))
        near = np.minimum(near, np.sum((points - points[order[-1]]) ** 2, axis=1))
    return np.array(order)


class AssignmentTree:
    """The repetitive branch and bound (module docstring) on ``problem`` with K clusters; groups
    are solved by ``workers`` (here, one after another, by default)."""

    def __init__(self, problem: ArmulProblem, n_clusters: int, order, rel_gap: float,
                 deadline: Deadline, report=lambda incumbent, bound, nodes: None, workers: Workers | None = None):
        self.problem, self.k = problem, n_clusters
        self.rel_gap, self.deadline, self.report = rel_gap, deadline, report
        self.workers = workers or Serial(deadline)
        self.costs = GroupCosts(problem, max(rel_gap * GROUP_SHARE, GROUP_FLOOR), deadline)
        m = problem.m
        self.suffix = [0.0] * (m + 1)   # suffix[t]: proven LB of opt_K(tasks order[t:])
        singles = [1 << int(j) for j in order]
        self.solved(singles, self.workers.map(self.costs.solver, [self.costs.job(g) for g in singles], math.inf))
        self.order, tails, heads = self._laid_out([int(j) for j in order])
        self.singles = [self.costs.bound(1 << j) for j in self.order]
        self.floor, self.head = self._floors(tails, heads)
        # the independent-tasks bound, or a block floor on all tasks
        self.proven = max(lowered_sum(math.fsum(self.singles), m), self.floor[0], self.head[m])
        self.nodes = 0

    def _laid_out(self, order: list[int]) -> tuple[list[int], list[list[int]], list[list[int]]]:
        """The tree's order, the blocks of its suffixes and those of its heads (DESIGN.md, claim 5):
        blocks of one or two tasks of each of K + 1 far-apart kinds, so that every split into
        K groups merges tasks of different kinds (blocks cut from ``order`` as it came held tasks
        of one true cluster and priced little).

        Where two tasks of each kind fit ``BLOCK_TASKS`` (K <= 2), the blocks cut from the end
        of ``order`` are laid out one after another at the end of the tree's order, the tasks in
        no block first (in ``order``'s order): each block is then a run of positions, both
        floors use them all, and a finished stage at a block's start adds its suffix's optimum
        to the floor of the blocks before it.  Otherwise (one task of each kind) ``order`` stays
        the tree's, the suffixes' blocks cut from its end and the heads' from its start (laid
        out, the K = 5 trees lost 4-6 % at 60 s)."""
        kinds = self._kinds(order)
        if 2 * (self.k + 1) > BLOCK_TASKS:
            return (order, _blocks(range(len(order) - 1, -1, -1), kinds, 1, self.k + 1),
                    _blocks(range(len(order)), kinds, 1, self.k + 1))
        cut = _blocks(range(len(order) - 1, -1, -1), kinds, 2, self.k + 1)
        inside = {a for block in cut for a in block}
        positions = [a for a in range(len(order)) if a not in inside]
        start, size = len(positions), 2 * (self.k + 1)
        positions += [a for block in sorted(cut, key=min) for a in sorted(block)]
        blocks = [list(range(start + i * size, start + (i + 1) * size)) for i in range(len(cut))]
        return [order[a] for a in positions], blocks, blocks

    def _floors(self, tails: list[list[int]], heads: list[list[int]]) -> tuple[list[float], list[float]]:
        """Block floors (DESIGN.md, claim 5): ``floor[t]`` on opt_K(order[t:]) from the blocks
        ``tails`` inside it, and ``head[t]`` on opt_K(order[:t]) from the blocks ``heads`` inside it.

        A clustering into K groups splits each block into at most K groups (refined: exactly K):
        a block adds the least, over those partitions, of its groups' LB f; every task outside
        the blocks adds its own.  The partitions' groups of two tasks or more are solved by the
        workers, the smaller first, each from its group without its last task, a block at a
        time; a block whose groups the deadline left unsolved counts its tasks alone."""
        m = len(self.order)
        partitions = {tuple(block): list(_partitions(block, self.k)) for block in tails + heads}
        masks = {tuple(group): sum(1 << self.order[a] for a in group)
                 for parts in partitions.values() for partition in parts for group in partition}
        for block, parts in partitions.items():   # a block at a time: the deadline stops them soon
            if self.deadline.expired():
                break
            for width in range(2, len(block) - self.k + 2):   # each from its subgroup, solved before
                groups = {masks[group]: masks.get(group[:-1], 0) for partition in parts for group in map(tuple, partition)
                          if len(group) == width and masks[group] not in self.costs.runs}
                jobs = [self.costs.job(group, parent) for group, parent in groups.items()]
                self.solved(list(groups), self.workers.map(self.costs.solver, jobs, math.inf) if jobs else [])
        least = {block: min(lowered_sum(math.fsum(self._group_floor(masks, group) for group in map(tuple, partition)),
                                        len(partition)) for partition in parts)
                 for block, parts in partitions.items()
                 if all(masks[tuple(group)] in self.costs.runs for partition in parts for group in partition)}

        def floors(blocks, inside) -> list[float]:
            """For each t, the lowered sum over the solved blocks inside(t, block) and the
            singles of the positions inside(t, position) that are in none of those blocks."""
            out = []
            for t in range(m + 1):
                whole = [tuple(block) for block in blocks if tuple(block) in least and all(inside(t, a) for a in block)]
                covered = {a for block in whole for a in block}
                terms = [least[block] for block in whole]
                terms += [self.singles[a] for a in range(m) if inside(t, a) and a not in covered]
                out.append(lowered_sum(math.fsum(terms), len(terms)) if terms else 0.0)
            return out
        return floors(tails, lambda t, a: a >= t), floors(heads, lambda t, a: a < t)

    def _group_floor(self, masks: dict, group: tuple) -> float:
        """LB f(group), and f(group) >= its tasks' f alone too (claim 1)."""
        return max(self.costs.bound(masks[group]), lowered_sum(math.fsum(self.singles[a] for a in group), len(group)))

    def _kinds(self, order: list[int]) -> list[int]:
        """A kind (0..K) per position of ``order``: the nearest, in its single-task
        coefficients, of the first K + 1 tasks of ``order`` (far apart: farthest first)."""
        theta = np.array([self.costs.get(1 << j)[1].theta[0] for j in order])
        seeds = theta[: self.k + 1]
        return [int(np.argmin(np.sum((seeds - row) ** 2, axis=1))) for row in theta]

    def solve(self, start_labels: np.ndarray) -> tuple[list[int], float, bool]:
        """The best groups found (bit masks), the best bound on the clustered optimum proven by
        any stage (never below one reported before), and whether every stage finished (then the
        bound is within rel_gap of the groups' value)."""
        m, best = self.problem.m, None
        self.groups_value(self._restricted(start_labels, 0))   # solved first: the answer of a cut run
        for t in range(m - 1, -1, -1):
            candidates = [self._restricted(start_labels, t)]
            if best is not None:
                candidates.append(self._extended(best, t))
            best = min(candidates, key=self.groups_value)
            best, stage_bound, finished = self._stage(t, best)
            self.suffix[t] = max(stage_bound, self.floor[t])   # two bounds on opt_K(order[t:])
            # the tasks before t: opt_K(all) >= opt_K(order[:t]) + opt_K(order[t:]) (claim 1 on
            # each group) >= head[t] + suffix[t]; a bound proven by an earlier stage stays
            # proven, so the best is kept (a cut stage can be weaker)
            stage = lowered_sum(self.head[t] + self.suffix[t], 2)
            self.proven = max(self.proven, stage)
            if not finished:   # before the last stage, ``best`` places only order[t:]
                return best if t == 0 else self._restricted(start_labels, 0), self.proven, False
        return best, self.proven, True

    def groups_value(self, groups) -> float:
        return math.fsum(self.costs.value(g) for g in groups)

    def _restricted(self, labels, t) -> list[int]:
        """The groups of ``labels`` on the tasks order[t:]."""
        groups = [0] * self.k
        for j in self.order[t:]:
            groups[labels[j]] |= 1 << j
        return groups

    def _extended(self, groups, t) -> list[int]:
        """``groups`` (a clustering of order[t + 1:]) with task order[t] where it costs least."""
        bit = 1 << self.order[t]
        options = [groups[:c] + [groups[c] | bit] + groups[c + 1:] for c in range(self.k)]
        return min(options, key=self.groups_value)

    def _stage(self, t: int, incumbent: list[int]):
        """Depth first over assignments of order[t:], from ``incumbent``, on the engine: the best
        groups, the least bound over the closed nodes (and the open ones, when the deadline
        passed), and whether the deadline left it finished.

        A node is (depth, groups, their bounds, clusters in use, bound); it is pruned against the
        incumbent of the moment it is kept or taken."""
        stage = Stage(self, t)
        engine = Engine(stage, self.workers, depth_first=True, prune_gap=self.rel_gap)
        engine.offer(self.groups_value(incumbent), incumbent)
        # f({order[t]}) + opt_K(U_t+1), or the block floor on opt_K(U_t)
        root = max(lowered_sum(self.singles[t] + self.suffix[t + 1], 2), self.floor[t])
        engine.push(root, (t, [0] * self.k, [0.0] * self.k, 0, root))
        finished = engine.run(self.deadline)
        return engine.best, engine.least_bound(), finished

    def solved(self, groups: list[int], results: list) -> None:
        """Keep the workers' solves of ``groups``."""
        self.costs.runs.update(zip(groups, results))

    def children(self, depth, groups, bounds, opened, bound):
        """The children of a node that has placed order[:depth] (after its stage's first task) in
        ``groups`` (bit masks; their bounds ``bounds``; ``opened`` clusters in use; its own bound
        ``bound``): (depth + 1, groups, their bounds, clusters in use, bound); order[depth] goes
        to an open cluster or to the next new one.  A child keeps its parent's bound when its own
        is less (its completions are some of the parent's): the parent's suffix bound covers
        order[depth] and the child's does not, so it can be far weaker.  Sorted by their own
        bounds, best first (an order their bounds agree with)."""
        bit, suffix, out = 1 << self.order[depth], self.suffix[depth + 1], []
        for c in range(min(opened + 1, self.k)):
            grown = groups[c] | bit
            child = groups[:c] + [grown] + groups[c + 1:]
            child_bounds = bounds[:c] + [self.costs.bound(grown, groups[c])] + bounds[c + 1:]
            own = lowered_sum(math.fsum(child_bounds) + suffix, self.k + 1)
            out.append((own, (depth + 1, child, child_bounds, max(opened, c + 1), max(bound, own))))
        return [node for _, node in sorted(out, key=lambda pair: pair[0])]


class Stage:
    """One stage of ``AssignmentTree`` as the engine runs it (``engine.TreeProblem``): a node's
    jobs are its children's groups not solved yet, each warm-started from the group it grew from."""

    def __init__(self, tree: AssignmentTree, t: int):
        self.tree, self.final = tree, t == 0
        self.bounder = tree.costs.solver

    def split(self, node, bound: float, engine: Engine):
        """A leaf (every task placed) is offered and closed with its bound; another node's jobs
        are the groups its children add a task to, warm-started from the group they grew from."""
        tree = self.tree
        tree.nodes += 1
        tree.report(engine.upper if self.final else None, tree.proven, tree.nodes)
        depth, groups, _, opened, _ = node
        if depth == len(tree.order):
            engine.offer(tree.groups_value(groups), list(groups))
            engine.close(bound)
            return [], []
        bit = 1 << tree.order[depth]
        wanted = [(groups[c] | bit, groups[c]) for c in range(min(opened + 1, tree.k))]
        return [tree.costs.job(group, parent) for group, parent in wanted if group not in tree.costs.runs], []

    def children(self, node, bound: float, jobs: list, results: list, engine: Engine):
        """The node's children, best bound first (``AssignmentTree.children``), as (bound, node);
        none for a leaf."""
        if node[0] == len(self.tree.order):
            return []
        self.tree.solved([sum(1 << j for j in tasks) for tasks, _, _ in jobs], results)
        return [(child[-1], child) for child in self.tree.children(*node)]


def _blocks(positions, kinds: list[int], per_kind: int, n_kinds: int) -> list[list[int]]:
    """Disjoint blocks of ``per_kind`` positions of each of the ``n_kinds`` kinds, taken along
    ``positions``: a block closes as soon as each kind has that many waiting (the first waiting
    of each); what is left waiting joins no block."""
    waiting: list[list[int]] = [[] for _ in range(n_kinds)]
    blocks = []
    for a in positions:
        waiting[kinds[a]].append(a)
        if all(len(queue) >= per_kind for queue in waiting):
            blocks.append([queue.pop(0) for queue in waiting for _ in range(per_kind)])
    return blocks


def _partitions(items: list, k: int):
    """Every partition of ``items`` into exactly ``k`` groups (lists, in ``items``' order), once."""
    if k == 1:
        if items:
            yield [list(items)]
        return
    if len(items) < k:
        return
    first, rest = items[0], items[1:]
    for partition in _partitions(rest, k):   # first joins one of the k groups of the rest
        for i in range(k):
            yield partition[:i] + [[first] + partition[i]] + partition[i + 1:]
    for partition in _partitions(rest, k - 1):   # or is a group alone
        yield [[first]] + partition


def _tasks(group: int) -> list[int]:
    return [j for j in range(group.bit_length()) if group >> j & 1]


def certify_clusters(problem: ArmulProblem, n_clusters: int, start: prox.ArmulEstimate,
                     rel_gap: float, deadline: Deadline, report=lambda incumbent, bound, nodes: None,
                     workers: Workers | None = None) -> Clustering:
    """Clustered ARMUL by the tree, from the answer ``start`` (a clustered run:
    ``extra["labels"]``), whose tasks' coefficients also set the order; the answer is never
    worse than ``start``'s groups re-solved.  ``report(incumbent, bound, nodes)`` is called at
    every node (the live log; incumbent None before the last stage).  Groups are solved by
    ``workers`` (default: here)."""
    tree = AssignmentTree(problem, n_clusters, farthest_first(start.theta), rel_gap, deadline, report, workers)
    groups, bound, finished = tree.solve(np.asarray(start.extra["labels"]))
    labels, theta = np.zeros(problem.m, dtype=int), np.zeros((problem.m, problem.d))
    centers = np.zeros((n_clusters, problem.d))
    for label, group in enumerate(g for g in groups if g):
        run, tasks = tree.costs.get(group)[1], _tasks(group)
        labels[tasks], theta[tasks], centers[label] = label, run.theta, run.centers[0]
    return Clustering(labels, theta, centers, bound, finished, tree.nodes)


def solve_tree(problem: ArmulProblem, n_clusters: int, heuristic: prox.ArmulEstimate,
               rel_gap: float, deadline: Deadline, progress: Progress, threads: int | None = None) -> SolverRun:
    """ARMUL's exact path for clustered ARMUL: ``certify_clusters`` from the prox heuristic's
    answer (over its restarts), whose point is kept when the tree's is not better; stopped by
    ``deadline``, the best answer and the least bound over the open nodes (``time_limit``).
    The live log's rows come from the tree (incumbent: the heuristic's value until the last
    stage finds a better one).  Groups are solved by ``engine.workers_for(threads)``'s workers."""
    held = problem.objective(heuristic.theta, heuristic.centers)
    progress.update(held, None, 0, force=True)

    def report(incumbent, bound, nodes):   # the heuristic's point is held too
        progress.update(None if incumbent is None else min(incumbent, held), bound, nodes)

    workers = workers_for(threads, deadline)
    try:
        found = certify_clusters(problem, n_clusters, heuristic, rel_gap, deadline, report, workers)
    finally:
        workers.close()
    theta, centers = found.theta, found.centers[found.labels]
    extra = {"centers": found.centers, "labels": found.labels}
    if held < problem.objective(theta, centers):
        theta, centers, extra = heuristic.theta, heuristic.centers, dict(heuristic.extra)
    objective = problem.objective(theta, centers)
    progress.update(objective, found.bound, found.nodes, force=True)
    return SolverRun(prox.ArmulEstimate(theta, centers, extra), objective, found.bound,
                     Status.CONVERGED if found.finished else Status.TIME_LIMIT, progress.rows,
                     {"solver": "armul_tree (mtl_opt)", "solver_version": __version__,
                      "bound": BOUND_SOURCE, "nodes": found.nodes, "pool_bounds": workers.jobs})
