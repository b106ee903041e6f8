"""Block coordinate descent (block iterative hard thresholding) + local combinatorial search.

The heuristic for the sparse multi-task objective F of
``mtl_opt.formulations.sparse``:

1. Sweeps of block IHT on an active set of columns (grown by full sweeps).  Each task's block takes a gradient step of length
   1/L and keeps the s coordinates of largest score
   ``(L/2) B_tmp_j^2 - (lambda_zbar/2)(1 - (2 S_j + 1)/K)`` (S_j = how many
   *other* tasks hold j): the exact minimizer of the block's quadratic
   majorizer plus its exact Zbar term, so F never increases.  Common-support
   variants update all tasks at once and keep the s rows of largest
   sum_k B_tmp_jk^2.  Once the supports stay the same for a sweep the
   continuous part is refitted exactly on them (so IHT need not crawl to the
   block optimum); stops when F changes by less than ``tol`` relatively.
2. An exact refit of the continuous part on the supports found.
3. Local search: every swap (drop i, add j, or a pure addition when a
   support has room; per task, or per row for common-support variants) is
   scored by the exact change of F *after refitting* the supports, Zbar and
   Bbar included, by Schur complements of the support's joint quadratic
   (``best_swap``), so swaps that pay off only once the other coefficients
   move are found too.  Each round applies every task's best improving swap
   (or only the single best, when the tasks' moves interfere), until none
   improves F; the result admits no improving single swap.

Side constraints (``problem.side``, ``mtl_opt.formulations.constraints``) keep every iterate
feasible: each selection of supports (IHT step, warm-start projection) is
``SideConstraints.best_support`` on the pairs' gains, each coordinate is clipped to its box, each
refit on a fixed support is the box-constrained quadratic (``SparseProblem.refit``), and swaps that would
break an include, a count or a shared support are never scored.  A pair the chosen support holds
whose best value is exactly 0 (a sign bound) keeps the value ``NUDGE`` of an allowed sign, so the
support read from B (``SideConstraints.support``) is the one chosen: F moves by ~1e-300.
Without constraints none of this runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg.lapack

from ...formulations.sparse import SparseProblem
from ...deadline import Deadline
from ...resources import one_blas_thread

#: A move must improve F by more than this (relative) to count.
IMPROVEMENT = 1e-12
#: IHT sweeps with an unchanged support before the continuous part is refitted exactly.
STABLE_SWEEPS = 1
#: The phase of the log record that closes a run the deadline stopped.
TIME_LIMIT = "time limit"
#: Swaps per task whose refit in the boxes is tried when some coefficient is bounded (``_bounded_swap``).
BOUNDED_TRIES = 10
#: Relative margin on a swap's predicted F before ``_bounded_swap`` skips it: the table's
#: predictions are exact but for rounding (and approximate on a singular support, which only a
#: ridge of 0 allows).
PREDICTION_MARGIN = 1e-6
#: The value of a pair a constrained support holds whose best value is 0 (module docstring).
NUDGE = 1e-300


@dataclass
class BcdRun:
    """What ``fit_bcd`` returns: the coefficients (K, p) of its best start, their log and the
    IHT sweeps run."""

    coef: np.ndarray
    log: list
    n_iter: int


@one_blas_thread
def fit_bcd(problem: SparseProblem, init: np.ndarray | None = None, *, max_iter: int = 1000,
            tol: float = 1e-7, local_search: bool = True, max_swaps: int = 10_000,
            deadline: Deadline) -> BcdRun:
    """Run the heuristic; returns the ``BcdRun`` of the best of its starts.

    With ``init`` (K, p) that is the only start.  Without, the starts are
    zeros and, as in the reference code, the solution of the relaxed problem
    with s' = min(3s, p) and no Zbar term, hard-thresholded to s; with a Zbar
    term also the common-support solution with its row swaps (zero Zbar
    cost; single-task swaps from heterogeneous starts cannot reach it once
    lambda_zbar is large), so a Zbar fit is never worse than the cs fit.  A start on the support
    an earlier start's run ended on (refitted there, swap-optimal with local search) is skipped.
    ``log`` holds one record per IHT sweep and per accepted swap:
    start, phase, iteration, objective, support size, time.
    Once ``deadline`` passes, every loop stops (after an exact refit) and the
    best answer so far is returned, its log ending with a "time limit" record.
    Side constraints that no support meets raise InvalidParameterError first
    (``SideConstraints.check_admits``).  Where bounds and signs are the only side constraints,
    the fit without them runs first and is returned if it lies inside them: a support's free
    refit inside the bounds is its bounded refit, and a swap's bounded refit is no better than
    its free one, so that answer is swap-optimal under the bounds as well, with no clipping paid.
    """
    clock = time.perf_counter()
    problem.side.check_admits(problem.s, problem.allowed, problem.common_support, problem.task_names)
    free = problem.side.without_bounds() if problem.side.active else None
    if free is not None:   # bounds alone: first the fit without them, kept if it lies inside them
        run = fit_bcd(replace(problem, side=free), init, max_iter=max_iter, tol=tol,
                      local_search=local_search, max_swaps=max_swaps, deadline=deadline)
        if problem.side.violation(run.coef) == 0:
            return run
    run = lambda prob, start: _descend(prob, start, max_iter, tol, local_search, max_swaps, clock,  # noqa: E731
                                       deadline)
    if init is not None:
        return BcdRun(*_marked(run(problem, _project(problem, np.array(init, dtype=float))), deadline, clock))
    zeros = np.zeros((problem.n_tasks, problem.n_features))
    wide = problem.with_params(s=min(3 * problem.s, problem.n_features), lambda_zbar=0.0)
    starts = [zeros, _project(problem, _descend(wide, zeros, max_iter, tol, False, 0, clock, deadline)[0])]
    if problem.lambda_zbar:  # a shared support costs no Zbar: start from the best one found
        shared = problem.with_params(variant="cs_bbar" if problem.lambda_bbar else "cs_l2",
                                     lambda_zbar=0.0)
        # (side constraints may rule a shared support out)
        if shared.side.admits(shared.s, shared.allowed, shared.common_support):
            starts.append(fit_bcd(shared, max_iter=max_iter, tol=tol, local_search=local_search,
                                  max_swaps=max_swaps, deadline=deadline).coef)
    runs = []
    for start in starts:
        if not any(np.array_equal(_support(problem, start), _support(problem, B)) for B, _, _ in runs):
            runs.append(run(problem, start))
    return BcdRun(*_marked(_best(problem, runs), deadline, clock))


def _best(problem, runs):
    """The run of least F, a later start winning only by more than rounding (``IMPROVEMENT``):
    F values equal up to rounding (e.g. supports that all interpolate) are a tie, and a tie
    keeps the first start, so the answer does not hang on the rounding of the data (the same
    rows in another order, or weighted rather than repeated)."""
    best, best_value = runs[0], problem.objective(runs[0][0])
    for run in runs[1:]:
        value = problem.objective(run[0])
        if value < best_value - IMPROVEMENT * max(abs(best_value), 1e-12):
            best, best_value = run, value
    return best


def _marked(run, deadline, clock):
    """``run`` with a "time limit" record closing its log if the deadline has passed."""
    B, log, it = run
    if deadline.expired():
        log.append(_record(TIME_LIMIT, it, log[-1]["objective"], B, clock))
    return run


def cut_short(log: list) -> bool:
    """Whether the run of ``fit_bcd`` that wrote ``log`` was stopped by its deadline."""
    return log[-1]["phase"] == TIME_LIMIT


def _descend(problem, B, max_iter, tol, local_search, max_swaps, clock, deadline):
    """IHT on growing active sets from B (projected onto the side constraints), an exact refit,
    then swaps until none improves."""
    if problem.side.active:
        B = _project(problem, B)
    value = problem.objective(B)
    log = [_record("start", 0, value, B, clock)]
    B, value, it, exact = _iht_active_set(problem, B, value, max_iter, tol, log, clock, deadline)
    if not exact:
        B, value = _refit(problem, B, value)
    log.append(_record("refit", it, value, B, clock))
    if local_search:
        B, value = _swap_search(problem, B, value, max_swaps, log, clock, deadline)
    return B, log, it


def _swap_search(problem, B, value, max_swaps, log, clock, deadline):
    """Apply exact refit swaps (``best_moves``) until none improves F.

    Each round tries every task's best improving swap at once, kept when that
    lowers F at least as much as the single best swap alone was predicted to
    (always, when the tasks decouple), else applies the single best swap.
    """
    threshold = lambda v: -IMPROVEMENT * max(abs(v), 1e-12)  # noqa: E731
    for swaps in range(1, max_swaps + 1):
        if deadline.expired():
            break
        if problem.side.bounded:
            found = _bounded_swap(problem, B, value + threshold(value))
            if found is None:
                break
            B, value = found
            log.append(_record("swap", swaps, value, B, clock))
            continue
        moves = [move for move in best_moves(problem, B) if move[0] < threshold(value)]
        if not moves:
            break
        best = min(moves, key=lambda move: move[0])
        candidate, candidate_value = None, np.inf
        if len(moves) > 1:
            support = _support(problem, B)
            for move in moves:
                support = swapped_support(support, move)
            candidate = _fit_on(problem, support)
            candidate_value = problem.objective(candidate)
        if candidate_value > value + best[0]:
            candidate = _fit_on(problem, swapped_support(_support(problem, B), best))
            candidate_value = problem.objective(candidate)
        if candidate_value >= value + threshold(value):
            break  # the predicted gain was rounding
        B, value = candidate, candidate_value
        log.append(_record("swap", swaps, value, B, clock))
    return B, value


def _bounded_swap(problem, B, below):
    """The first of the best predicted swaps (``BOUNDED_TRIES`` per task) whose refit in the boxes
    takes F below ``below``, as (B, F(B)), or None: the table predicts the change of the
    unbounded refits, which the boxes can reverse, so the predictions only rank the moves."""
    support = _support(problem, B)
    # a support's refit in the boxes is never below its unbounded refit, whose change the table
    # predicts: once a prediction (less a margin for its rounding) misses ``below``, so do the rest
    unbounded = problem.objective(problem.refit(support, np.ones(support.shape)), support)
    for move in sorted(best_moves(problem, B, BOUNDED_TRIES), key=lambda move: move[0]):
        if not np.isfinite(move[0]) or unbounded + move[0] > below + PREDICTION_MARGIN * abs(below):
            break
        candidate = _fit_on(problem, swapped_support(support, move))
        value = problem.objective(candidate)
        if value < below:
            return candidate, value
    return None


def _iht_active_set(problem, B, value, max_iter, tol, log, clock, deadline):
    """IHT restricted to active columns; one full sweep then adds what it selects outside them.

    The active set starts as B's support plus the 3s columns with the largest
    gradient norm across tasks; it is final when a full sweep selects nothing
    new or does not improve F.  Returns (B, F(B), sweeps, whether B is the refit on its supports).
    """
    support = np.flatnonzero(_support(problem, B).any(axis=0) | _needed_columns(problem))
    score = np.sum(np.array([_gradient(problem, B, k) for k in range(problem.n_tasks)]) ** 2, axis=0)
    score[support] = np.inf
    active = np.sort(_largest(score, support.size + 3 * problem.s))
    it, exact = 0, False
    while it < max_iter and not deadline.expired():
        sub = problem.restricted(active)
        B_sub, value, used, exact = _iht(sub, B[:, active], value, max_iter - it, tol, log, clock, it,
                                         deadline)
        it += used
        B = np.zeros_like(B)
        B[:, active] = B_sub
        if deadline.expired():
            break
        swept = _full_sweep(problem, B, value, sub.lipschitz, active)
        if swept is None:
            break
        (B, value, new), it, exact = swept, it + 1, False
        active = np.union1d(active, new)
        log.append(_record("iht-full", it, value, B, clock))
    return B, value, it, exact


def _full_sweep(problem, B, value, L, active):
    """One IHT sweep over all columns that brings new ones into ``active`` and lowers F, or None.

    The step starts at 1/L with L the active columns' Lipschitz constant (below
    the full one, so the most permissive step) and backtracks, doubling L
    while the sweep selects new columns without lowering F, up to
    ``lipschitz_ceiling`` (>= the full constant, where F cannot rise).  This
    never needs the full design's top eigenvalue, which costs dozens of passes
    over X when p is large.  Returns (B, F(B), new columns).
    """
    ceiling = problem.lipschitz_ceiling
    while True:
        full = _iht_sweep(problem, B, L)
        outside = (full != 0).any(axis=0)
        outside[active] = False
        new = np.flatnonzero(outside)
        if new.size == 0:
            return None
        full_value = problem.objective(full)
        if full_value < value:
            return full, full_value, new
        if L >= ceiling:
            return None
        L = min(2 * L, ceiling)


def _iht(problem, B, value, max_iter, tol, log, clock, offset, deadline):
    """Block IHT sweeps until F changes by less than tol; returns (B, value, sweeps, whether B is
    the refit on its supports).  A support is refitted once: a sweep from its refit that keeps it
    only moves B by rounding."""
    it, stable, exact = 0, 0, False
    for it in range(1, max_iter + 1):
        candidate = _iht_sweep(problem, B, problem.lipschitz)
        new_value = problem.objective(candidate)
        if new_value > value:  # guard against rounding at a fixed point
            return B, value, it, exact
        converged = value - new_value <= tol * max(abs(value), 1e-12)
        same = np.array_equal(candidate != 0, B != 0)
        stable = stable + 1 if same else 0
        exact = exact and same
        B, value = candidate, new_value
        if stable >= STABLE_SWEEPS and not exact:  # supports settled: jump to their exact optimum
            B, value = _refit(problem, B, value)
            stable, exact = 0, True
        log.append(_record("iht", offset + it, value, B, clock))
        if converged or deadline.expired():
            break
    return B, value, it, exact


def _record(phase, iteration, value, B, start):
    return {"phase": phase, "iteration": iteration, "objective": value,
            "support": int(np.count_nonzero(B)), "time": time.perf_counter() - start}


def _refit(problem, B, value):
    """Refit on B's supports; keep whichever of the two is better (the refit should be)."""
    refit = _fit_on(problem, _support(problem, B))
    refit_value = problem.objective(refit)
    return (refit, refit_value) if refit_value <= value else (B, value)


def _project(problem, B):
    """Hard-threshold a warm start onto the feasible set (largest magnitudes kept, excluded pairs 0;
    with side constraints: the best feasible support for the clipped values, ``_select``)."""
    B = np.where(problem.excluded, 0.0, B)
    if problem.side.active:
        return _select(problem, B, 0.0, None)
    if problem.common_support:
        keep = np.argsort(-np.sum(B**2, axis=0), kind="stable")[:problem.s]
        out = np.zeros_like(B)
        out[:, keep] = B[:, keep]
        return out
    out = np.zeros_like(B)
    for k, row in enumerate(B):
        keep = np.argsort(-np.abs(row), kind="stable")[:problem.s]
        out[k, keep] = row[keep]
    return out


def _gradient(problem, B, k):
    X, y = problem.Xs[k], problem.ys[k]
    support = np.flatnonzero(B[k])   # B is sparse: X @ B[k] from its support's columns only
    gradient = problem.lambda_ridge * B[k] - problem.correlations[k]
    if support.size:
        gradient += (X[:, support] @ B[k, support]) @ X / len(y)
    if problem.lambda_bbar:
        gradient += problem.lambda_bbar * (B[k] - B.mean(axis=0))
    return gradient


def _iht_sweep(problem, B, L):
    """One sweep of block IHT (all tasks at once for common support); excluded pairs stay 0."""
    B = B.copy()
    K = problem.n_tasks
    if problem.side.active:
        return _constrained_sweep(problem, B, L)
    if problem.common_support:
        tmp = B - np.array([_gradient(problem, B, k) for k in range(K)]) / L
        tmp[problem.excluded] = 0.0
        keep = _largest(np.sum(tmp**2, axis=0), problem.s)
        B[:] = 0.0
        B[:, keep] = tmp[:, keep]
        return B
    for k in range(K):
        tmp = B[k] - _gradient(problem, B, k) / L
        score = 0.5 * L * tmp**2
        if problem.lambda_zbar:
            others = np.count_nonzero(B, axis=0) - (B[k] != 0)
            score -= 0.5 * problem.lambda_zbar * (1 - (2 * others + 1) / K)
        score[problem.excluded[k]] = -np.inf
        keep = _largest(score, problem.s)
        keep = keep[score[keep] > 0]
        B[k] = 0.0
        B[k, keep] = tmp[keep]
    return B


def _largest(score, count):
    """Indices of the ``count`` largest entries of ``score``, in no particular order: a partition,
    not a sort.  Ties at the boundary go to the lowest indices, as a stable sort's would (equal
    scores are common with duplicated features, and which of them a partition keeps depends on
    its implementation, which numpy picks by CPU)."""
    if count >= score.size:
        return np.arange(score.size)
    threshold = np.partition(score, score.size - count)[score.size - count]
    above = np.flatnonzero(score > threshold)
    return np.concatenate([above, np.flatnonzero(score == threshold)[:count - above.size]])


def _constrained_sweep(problem, B, L):
    """``_iht_sweep`` under side constraints: each block (a task, or every task at once for a
    common support or shared supports) steps, then ``_select`` picks its support."""
    K = problem.n_tasks
    blocks = [None] if problem.common_support or problem.side.shared else range(K)
    for k in blocks:
        rows = slice(None) if k is None else slice(k, k + 1)
        step = B[rows] - np.array([_gradient(problem, B, t) for t in range(K)[rows]]) / L
        B[rows] = _select(problem, step, L, k, B)
    return B


def _select(problem, target, L, task, B=None):
    """Coefficients for the rows ``task`` (None: all) nearest ``target`` on the best support
    the side constraints allow: a pair scores (L / 2)(t^2 - (clip(t) - t)^2), what keeping it at
    its clipped value clip(t) saves over 0 in the step's majorizer (L = 0: the plain squared
    gain, for a projection), minus its exact Zbar cost given the other tasks' supports in B."""
    side = problem.side if task is None else problem.side.task(task)
    rows = slice(None) if task is None else slice(task, task + 1)
    allowed = problem.allowed[rows]
    clipped = np.clip(np.where(allowed, target, 0.0), side.lower, side.upper)
    score = (L or 2.0) / 2 * (target**2 - (clipped - target) ** 2)
    if problem.lambda_zbar and B is not None:
        K = problem.n_tasks
        support = problem.side.support(B)
        others = support.sum(axis=0) - support[rows]
        score = score - 0.5 * problem.lambda_zbar * (1 - (2 * others + 1) / K)
    chosen = side.best_support(score, problem.s, allowed, problem.common_support)
    return _nudged(problem, np.where(chosen & allowed, clipped, 0.0), chosen, rows)


def _nudged(problem, B, chosen, rows=slice(None)):
    """B (the rows ``rows`` of the problem) with ``NUDGE`` on each chosen allowed pair that is 0
    and not included (for a common support: on a chosen column all zero), of a sign its box allows."""
    side, allowed = problem.side, problem.allowed[rows]
    held = (B != 0) | side.include[rows]
    need = chosen & allowed & ~held
    if problem.common_support:   # a column needs one non-zero pair, in its first allowed task
        columns = chosen.any(axis=0) & ~held.any(axis=0)
        need = columns & (np.cumsum(allowed, axis=0) == 1) & allowed
    sign = np.where(side.upper[rows] > 0, 1.0, -1.0)
    return np.where(need & (side.lower[rows] < side.upper[rows]), sign * NUDGE, B)


def _support(problem, B):
    """The support of B that moves and refits start from: its non-zeros, or the exact models' z
    (``SparseProblem.indicators``) under side constraints."""
    return problem.indicators(B) if problem.side.active else B != 0


def _needed_columns(problem):
    """(p,) bool: columns the active set must hold so the side constraints can be met on it
    (included somewhere, or in an at_least group)."""
    side = problem.side
    needed = side.include.any(axis=0)
    for row in side.counts:
        if row.at_least:
            needed[list(row.features)] = True
    return needed


def _fit_on(problem, support):
    """``SparseProblem.refit`` on ``support`` (in the boxes, if any), with the support kept
    (``_nudged``) under side constraints."""
    B = problem.refit(support)
    return _nudged(problem, B, support) if problem.side.active else B


def _zbar_delta(problem, counts_from, counts_to):
    """(lambda_zbar/2) * change of sum_j (S_j - S_j^2/K) when counts move from -> to."""
    K = problem.n_tasks
    f = lambda S: S - S**2 / K  # noqa: E731
    return 0.5 * problem.lambda_zbar * (f(counts_to) - f(counts_from))


def best_swap(problem: SparseProblem, B: np.ndarray):
    """The swap whose exact refit lowers F most, or None when every feature is selected.

    Returns ``(delta, task, drop, add)``: ``delta`` is the change of F from the
    refit on B's supports to the refit on the swapped ones (exact up to
    rounding; Zbar and Bbar included); ``task`` None is a common-support row
    swap (feature ``drop`` leaves every task, ``add`` enters every task);
    ``drop`` None is a pure addition to a support with room.  Every pair is
    scored at once by ``_swap_table``.
    """
    moves = best_moves(problem, B)
    return min(moves, key=lambda move: move[0]) if moves else None


def best_moves(problem: SparseProblem, B: np.ndarray, count: int = 1) -> list:
    """``best_swap`` of each task (one row move for common-support variants), as a list; with
    ``count`` > 1 the ``count`` best of each."""
    support = problem.indicators(B)
    model = _RefitModel(problem, support)
    counts = support.sum(axis=0).astype(float)
    moves = []
    for task in [None] if problem.common_support else range(problem.n_tasks):
        delta, drops = _swap_table(problem, model, task)
        if problem.side.active:
            delta = np.where(_moves_ok(problem.side, support, task, drops), delta, np.inf)
        if task is not None and problem.lambda_zbar and drops:
            dropped = np.array([counts[i] if i is not None else np.nan for i in drops])
            delta = (delta + np.nan_to_num(_zbar_delta(problem, dropped, dropped - 1))[:, None]
                     + _zbar_delta(problem, counts, counts + 1)[None, :])
        if np.isfinite(delta).any():
            ranked = np.argsort(delta, axis=None, kind="stable")[:count] if count > 1 else [np.argmin(delta)]
            for flat in ranked:
                d, j = np.unravel_index(flat, delta.shape)
                moves.append((float(delta[d, j]), task, drops[d], int(j)))
    return moves


def _moves_ok(side, support, task, drops) -> np.ndarray:
    """(drops, p) bool: whether the swap (drop ``drops[d]``, add j) of ``task`` (None: a common
    support's row move) keeps ``support`` within the includes, the counts and the shared supports
    (a one-task move on a shared feature would break it: shared features move only in IHT)."""
    row = support[0 if task is None else task]
    p = row.size
    dropped = np.zeros((len(drops), p), bool)
    for d, j in enumerate(drops):
        if j is not None:
            dropped[d, j] = True
    included = side.include.any(axis=0) if task is None else side.include[task]
    ok = ~(dropped & included).any(axis=1)[:, None] & np.ones((1, p), bool)
    for count in side.counts:
        if task is None or count.task == task:
            group = np.zeros(p, bool)
            group[list(count.features)] = True
            after = row[group].sum() - (dropped & group).any(axis=1)[:, None] + group[None, :]
            ok &= (count.at_least <= after) & (after <= count.at_most)
    for tasks, features in side.shared:
        if task in tasks:
            ok[(dropped[:, list(features)]).any(axis=1)] = False
            ok[:, list(features)] = False
    return ok


def swapped_support(support: np.ndarray, move) -> np.ndarray:
    """The (K, p) support after the swap ``move`` from ``best_swap`` (a new array)."""
    _, task, drop, add = move
    support = support.copy()
    rows = slice(None) if task is None else task
    if drop is not None:
        support[rows, drop] = False
    support[rows, add] = True
    return support


class _RefitModel:
    """The joint quadratic of F's continuous part on a support, for exact swap scoring.

    Over the selected coefficients V (task-major) the continuous part is
    const - r_V^T beta + beta^T H_VV beta / 2 (``SparseProblem.coupled_system``);
    P = H_VV^-1 and beta = P r_V are its refit.  ``cross`` and ``q`` hold H's and
    r's entries for every feature, which the swap scores need.  An excluded pair, selected
    (pinned) or a candidate, has no entries outside H's diagonal (``coupled_system``).
    """

    def __init__(self, problem, support):
        self.tasks, self.features = np.nonzero(support)
        self.cross = [np.outer(allowed, allowed[cols]) * problem.gram_columns(k, np.flatnonzero(cols))
                      for k, (cols, allowed) in enumerate(zip(support, problem.allowed))]
        self.q = problem.allowed * problem.correlations
        self.blocks = np.split(np.arange(self.tasks.size), np.cumsum(support.sum(axis=1))[:-1])
        size = self.tasks.size
        H, r = problem.coupled_system(support)
        # P from a Cholesky factor (dposv, as ``_solve_spd``); a collinear support without ridge
        # has none, and then the scores are approximate (moves are re-checked)
        _, self.P, info = scipy.linalg.lapack.dposv(H, np.eye(size)) if size else (None, H, 0)
        self.singular = info != 0
        if self.singular:
            self.P = np.linalg.pinv(H, hermitian=True)
        self.beta = self.P @ r
        self.coupling = problem.lambda_bbar / problem.n_tasks

    def columns(self, k):
        """H_{V, (k, j)} for every feature j: (|V|, p)."""
        h = np.zeros((self.tasks.size, self.q.shape[1]))
        h[self.blocks[k]] = self.cross[k].T
        if self.coupling:
            others = self.tasks != k
            h[others, self.features[others]] = -self.coupling
        return h


def _swap_table(problem, model, task):
    """(delta, drops): the exact change of the continuous part for every (drop, add) in a task.

    ``task`` None: the common-support row moves (a group of K coefficients).
    Adding the group J lowers the refit value by e^T D^-1 e / 2, with
    e = r_J - H_JV beta and the Schur complement D = H_JJ - H_JV P H_VJ;
    dropping the group R first raises it by beta_R^T P_RR^-1 beta_R / 2 and,
    by block inversion, turns e into e + A_R^T P_RR^-1 beta_R and D into
    D + A_R^T P_RR^-1 A_R (A = P H_VJ), so a few batched products score every
    pair.  ``delta[d, j]`` is inf where j is selected, adds nothing (D ~ 0) or is
    excluded in every task of the group (an excluded pair is decoupled: e = 0, D = 1);
    ``drops`` lists the selected features, plus None when there is room.
    """
    K = problem.n_tasks
    group = list(range(K)) if task is None else [task]
    h = np.stack([model.columns(k) for k in group], axis=-1)          # (|V|, p, g)
    A = np.tensordot(model.P, h, axes=1)
    e = model.q[group].T - np.tensordot(model.beta, h, axes=1)        # (p, g)
    allowed = problem.allowed[group].T                                 # (p, g)
    diagonal = np.where(allowed, problem.column_sq_norms[group].T / np.array([len(problem.ys[k]) for k in group])
                        + problem.lambda_ridge + problem.lambda_bbar, 1.0)   # 1: excluded, decoupled
    D = np.einsum("pg,gh->pgh", diagonal, np.eye(len(group))) \
        - model.coupling * (allowed[:, :, None] & allowed[:, None, :]) \
        - np.einsum("vpg,vph->pgh", h, A)                              # (p, g, g)
    R = np.array([model.blocks[k] for k in group]).T                   # (drops, g): V indices
    invert = np.linalg.pinv if model.singular else np.linalg.inv
    inverse = invert(model.P[R[:, :, None], R[:, None, :]])            # (drops, g, g)
    A_R = A[R].transpose(0, 2, 1, 3)                                   # (drops, p, g, g)
    weighted = inverse[:, None] @ A_R                                  # P_RR^-1 A_R
    beta_R = model.beta[R]
    e_d = e + np.einsum("dprg,dr->dpg", weighted, beta_R)
    D_d = D + np.swapaxes(A_R, -1, -2) @ weighted
    removal = np.einsum("dr,drs,ds->d", beta_R, inverse, beta_R) / 2
    selected = model.features[model.blocks[group[0]]]
    drops = list(selected)
    if selected.size < problem.s:  # a pure addition
        e_d, D_d = np.concatenate([e_d, e[None]]), np.concatenate([D_d, D[None]])
        removal = np.append(removal, 0.0)
        drops.append(None)
    delta = removal[:, None] - _group_gain(e_d, D_d, diagonal)
    delta[:, selected] = np.inf
    delta[:, ~allowed.any(axis=1)] = np.inf   # no task of the group may use the feature
    return delta, drops


def _group_gain(e, D, diagonal):
    """(drops, p) e^T D^-1 e / 2; -inf (never chosen) where D is not safely positive definite."""
    if e.shape[-1] == 1:
        d = D[..., 0, 0]
        usable = d > 1e-10 * diagonal[:, 0]
        return np.where(usable, e[..., 0] ** 2 / (2 * np.where(usable, d, 1.0)), -np.inf)
    try:  # Cholesky pivots (cheap) tell how far from singular each D is
        pivots = np.diagonal(np.linalg.cholesky(D), axis1=-2, axis2=-1) ** 2
    except np.linalg.LinAlgError:  # some D is not positive definite (collinear, no ridge)
        pivots = np.linalg.eigvalsh(D)
    usable = pivots.min(axis=-1) > 1e-10 * diagonal.max(axis=1)
    safe = np.where(usable[..., None, None], D, np.eye(e.shape[-1]))
    solution = np.linalg.solve(safe, e[..., None])[..., 0]
    return np.where(usable, np.sum(e * solution, axis=-1) / 2, -np.inf)
