"""Block coordinate descent (block iterative hard thresholding) + local combinatorial search.

The heuristic for the sparse multi-task objective F of
``mtl_opt.formulations.sparse``:

1. Sweeps of block IHT on an active set of columns (grown by full sweeps).  Each task's block takes a gradient step of length
   1/L and keeps the s coordinates of largest score
   ``(L/2) B_tmp_j^2 - (lambda_zbar/2)(1 - (2 S_j + 1)/K)`` (S_j = how many
   *other* tasks hold j): the exact minimizer of the block's quadratic
   majorizer plus its exact Zbar term, so F never increases.  Common-support
   variants update all tasks at once and keep the s rows of largest
   sum_k B_tmp_jk^2.  Once the supports stay the same for a few sweeps the
   continuous part is refitted exactly on them (so IHT need not crawl to the
   block optimum); stops when F changes by less than ``tol`` relatively.
2. An exact refit of the continuous part on the supports found.
3. Local search: the best single swap (drop i, add j with its exact 1-D
   minimizer, others fixed; Zbar and Bbar changes included exactly), per task,
   or per row for common-support variants; each accepted swap is followed by a
   refit.  When no such swap improves F, the 3s most promising swaps of each
   task are scored again with a full refit (correlated features can pay off
   only together); repeat until neither kind improves F.
"""

from __future__ import annotations

import time

import numpy as np

from ..formulations.sparse import SparseProblem, zbar_penalty

#: A move must improve F by more than this (relative) to count.
IMPROVEMENT = 1e-12
#: IHT sweeps with an unchanged support before the continuous part is refitted exactly.
STABLE_SWEEPS = 3
#: Swaps per unit of s (per task) re-scored with a full refit once no 1-D swap improves.
REFIT_CANDIDATES = 3


def fit_bcd(problem: SparseProblem, init: np.ndarray | None = None, *, max_iter: int = 1000,
            tol: float = 1e-7, local_search: bool = True, max_swaps: int = 10_000):
    """Run the heuristic; returns (B, log, n_iter) for the best of its starts.

    With ``init`` (K, p) that is the only start.  Without, the starts are
    zeros and, as in the reference code, the solution of the relaxed problem
    with s' = min(3s, p) and no Zbar term, hard-thresholded to s; with a Zbar
    term also the common-support solution with its row swaps (zero Zbar
    cost; single-task swaps from heterogeneous starts cannot reach it once
    lambda_zbar is large), so a Zbar fit is never worse than the cs fit.
    ``log`` holds one record per IHT sweep and per accepted swap:
    start, phase, iteration, objective, support size, time.
    """
    clock = time.perf_counter()
    run = lambda prob, start: _descend(prob, start, max_iter, tol, local_search, max_swaps, clock)  # noqa: E731
    if init is not None:
        return run(problem, _project(problem, np.array(init, dtype=float)))
    zeros = np.zeros((problem.n_tasks, problem.n_features))
    problem.lipschitz  # computed once, shared with the relaxed problems
    wide = problem.with_params(s=min(3 * problem.s, problem.n_features), lambda_zbar=0.0)
    starts = [zeros, _project(problem, _descend(wide, zeros, max_iter, tol, False, 0, clock)[0])]
    if problem.lambda_zbar:  # a shared support costs no Zbar: start from the best one found
        shared = problem.with_params(variant="cs_bbar" if problem.lambda_bbar else "cs_l2",
                                     lambda_zbar=0.0)
        starts.append(fit_bcd(shared, max_iter=max_iter, tol=tol, local_search=local_search,
                              max_swaps=max_swaps)[0])
    runs = [run(problem, start) for start in starts]
    return min(runs, key=lambda r: problem.objective(r[0]))


def _descend(problem, B, max_iter, tol, local_search, max_swaps, clock):
    """IHT on growing active sets from B, an exact refit, then swaps until none improves."""
    value = problem.objective(B)
    log = [_record("start", 0, value, B, clock)]
    B, value, it = _iht_active_set(problem, B, value, max_iter, tol, log, clock)
    B, value = _refit(problem, B, value)
    log.append(_record("refit", it, value, B, clock))
    swaps = 0
    while local_search and swaps < max_swaps:
        move = best_swap(problem, B)
        if move is not None and move[0] < -IMPROVEMENT * max(abs(value), 1e-12):
            phase, B = "swap", apply_swap(B, move)
            B, value = _refit(problem, B, problem.objective(B))
        else:  # no 1-D swap improves: try the most promising swaps with a full refit
            candidate = _best_refit_swap(problem, B, value)
            if candidate is None:
                break
            phase, (B, value) = "refit-swap", candidate
        swaps += 1
        log.append(_record(phase, swaps, value, B, clock))
    return B, log, it


def _iht_active_set(problem, B, value, max_iter, tol, log, clock):
    """IHT restricted to active columns; one full sweep then adds what it selects outside them.

    The active set starts as B's support plus the 3s columns with the largest
    gradient norm across tasks; it is final when a full sweep selects nothing
    new or does not improve F.
    """
    support = np.flatnonzero((B != 0).any(axis=0))
    score = np.sum(np.array([_gradient(problem, B, k) for k in range(problem.n_tasks)]) ** 2, axis=0)
    score[support] = np.inf
    active = np.sort(np.argsort(-score, kind="stable")[:support.size + 3 * problem.s])
    it = 0
    while it < max_iter:
        sub = problem.restricted(active)
        B_sub, value, used = _iht(sub, B[:, active], value, max_iter - it, tol, log, clock, it)
        it += used
        B = np.zeros_like(B)
        B[:, active] = B_sub
        full = _iht_sweep(problem, B, problem.lipschitz)
        full_value = problem.objective(full)
        new = np.setdiff1d(np.flatnonzero((full != 0).any(axis=0)), active)
        if new.size == 0 or full_value >= value:
            break
        B, value, it = full, full_value, it + 1
        active = np.union1d(active, new)
        log.append(_record("iht-full", it, value, B, clock))
    return B, value, it


def _iht(problem, B, value, max_iter, tol, log, clock, offset):
    """Block IHT sweeps until F changes by less than tol; returns (B, value, sweeps)."""
    it, stable = 0, 0
    for it in range(1, max_iter + 1):
        candidate = _iht_sweep(problem, B, problem.lipschitz)
        new_value = problem.objective(candidate)
        if new_value > value:  # guard against rounding at a fixed point
            return B, value, it
        converged = value - new_value <= tol * max(abs(value), 1e-12)
        stable = stable + 1 if np.array_equal(candidate != 0, B != 0) else 0
        B, value = candidate, new_value
        if stable >= STABLE_SWEEPS:  # supports settled: jump to their exact optimum
            B, value = _refit(problem, B, value)
            stable = 0
        log.append(_record("iht", offset + it, value, B, clock))
        if converged:
            break
    return B, value, it


def _record(phase, iteration, value, B, start):
    return {"phase": phase, "iteration": iteration, "objective": value,
            "support": int(np.count_nonzero(B)), "time": time.perf_counter() - start}


def _refit(problem, B, value):
    """Refit on B's supports; keep whichever of the two is better (the refit should be)."""
    refit = problem.refit(B != 0)
    refit_value = problem.objective(refit)
    return (refit, refit_value) if refit_value <= value else (B, value)


def _project(problem, B):
    """Hard-threshold a warm start onto the feasible set (largest magnitudes kept)."""
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
    return (X.T @ (X @ B[k] - y) / len(y) + problem.lambda_ridge * B[k]
            + problem.lambda_bbar * (B[k] - B.mean(axis=0)))


def _iht_sweep(problem, B, L):
    """One sweep of block IHT (all tasks at once for common support)."""
    B = B.copy()
    K = problem.n_tasks
    if problem.common_support:
        tmp = B - np.array([_gradient(problem, B, k) for k in range(K)]) / L
        keep = np.argsort(-np.sum(tmp**2, axis=0), kind="stable")[:problem.s]
        B[:] = 0.0
        B[:, keep] = tmp[:, keep]
        return B
    for k in range(K):
        tmp = B[k] - _gradient(problem, B, k) / L
        others = np.count_nonzero(B, axis=0) - (B[k] != 0)
        score = 0.5 * L * tmp**2 - 0.5 * problem.lambda_zbar * (1 - (2 * others + 1) / K)
        keep = np.argsort(-score, kind="stable")[:problem.s]
        keep = keep[score[keep] > 0]
        B[k] = 0.0
        B[k, keep] = tmp[keep]
    return B


def _zbar_delta(problem, counts_from, counts_to):
    """(lambda_zbar/2) * change of sum_j (S_j - S_j^2/K) when counts move from -> to."""
    K = problem.n_tasks
    f = lambda S: S - S**2 / K  # noqa: E731
    return 0.5 * problem.lambda_zbar * (f(counts_to) - f(counts_from))


def best_swap(problem: SparseProblem, B: np.ndarray):
    """The single swap with the most negative exact change of F, or None if there is none.

    Returns ``(delta, task, drop, add, values)``: ``task`` is None for a
    common-support row swap; ``values`` are the new coefficients of ``add``
    (one per task for a row swap).  For a task with fewer than s features,
    adding without dropping (drop = None) is considered too.
    """
    moves = [move for moves in _swap_tables(problem, B, 1) for move in moves]
    return min(moves, key=lambda move: move[0]) if moves else None


def _swap_tables(problem, B, count):
    """The ``count`` best swaps of each task (or of the shared rows), by exact 1-D gain."""
    if problem.common_support:
        return [_row_swaps(problem, B, count)]
    return [_task_swaps(problem, B, k, count) for k in range(problem.n_tasks)]


def _best_refit_swap(problem, B, value):
    """Among each task's REFIT_CANDIDATES * s best 1-D swaps, the one whose refit improves F most.

    Scoring with the other coefficients fixed misses swaps that pay off only
    once the support is refitted (correlated features); this catches them.
    Returns (B, value) or None.
    """
    best = None
    for moves in _swap_tables(problem, B, REFIT_CANDIDATES * problem.s):
        for move in moves:
            refit, refit_value = _refit_after(problem, B, value, move)
            if refit_value < value - IMPROVEMENT * max(abs(value), 1e-12) and (
                    best is None or refit_value < best[1]):
                best = (refit, refit_value)
    return best


def _refit_after(problem, B, value, move):
    """(B', F(B')): B after ``move`` with the continuous part refitted.

    When tasks decouple (no Bbar) only the moved task is refitted and F is
    updated by that task's change, not re-evaluated over all tasks.
    """
    swapped = apply_swap(B, move)
    task = move[1]
    if task is None or problem.lambda_bbar:
        refit = problem.refit(swapped != 0)
        return refit, problem.objective(refit)
    swapped[task] = problem.refit_task(task, swapped[task] != 0)
    change = (_task_part(problem, task, swapped[task]) - _task_part(problem, task, B[task])
              + 0.5 * problem.lambda_zbar * (zbar_penalty(swapped != 0) - zbar_penalty(B != 0)))
    return swapped, value + change


def _task_part(problem, k, row):
    """Task k's loss plus ridge term at coefficients ``row`` (only its support is touched)."""
    cols = np.flatnonzero(row)
    resid = problem.ys[k] - problem.Xs[k][:, cols] @ row[cols]
    return resid @ resid / (2 * len(resid)) + 0.5 * problem.lambda_ridge * row[cols] @ row[cols]


def _smallest(delta, count):
    """Flat indices of the ``count`` smallest finite entries of delta, in increasing order."""
    flat = delta.ravel()
    finite = np.flatnonzero(np.isfinite(flat))
    order = finite[np.argsort(flat[finite], kind="stable")[:count]]
    return [np.unravel_index(i, delta.shape) for i in order]


def _task_swaps(problem, B, k, count):
    """The ``count`` best swaps in task k, all (drop, add) pairs scored from one product X^T [r, X_S]."""
    X, y, n = problem.Xs[k], problem.ys[k], len(problem.ys[k])
    K, lr, lb = problem.n_tasks, problem.lambda_ridge, problem.lambda_bbar
    support = np.flatnonzero(B[k])
    outside = B[k] == 0
    if not outside.any():
        return []
    resid = y - X @ B[k]
    mean = B.mean(axis=0)
    counts = np.count_nonzero(B, axis=0).astype(float)
    col_sq = problem.column_sq_norms[k]
    products = X.T @ np.column_stack([resid, X[:, support]])        # (p, 1 + |S|)
    b = B[k, support]
    # drop candidates: every i in the support, plus "none" when the task has room
    Xr = products[:, 1:] * b + products[:, :1]                        # X^T r_i, one column per i
    removal = ((2 * b * products[support, 0] + b**2 * col_sq[support]) / (2 * n)
               - lr / 2 * b**2 + lb / 2 * (-b**2 + 2 * mean[support] * b - b**2 / K)
               + _zbar_delta(problem, counts[support], counts[support] - 1))
    drops = list(support)
    if support.size < problem.s:
        Xr = np.column_stack([Xr, products[:, 0]])
        removal = np.append(removal, 0.0)
        drops.append(None)
    a = col_sq / (2 * n) + lr / 2 + lb * (1 - 1 / K) / 2
    c = Xr / (2 * n) + (lb * mean / 2)[:, None]
    usable = outside & (a > 0)
    gain = np.full(c.shape, np.inf)
    gain[usable] = (-c[usable] ** 2 / a[usable, None]
                    + _zbar_delta(problem, counts[usable], counts[usable] + 1)[:, None])
    delta = gain + removal[None, :]
    return [(float(delta[j, d]), k, drops[d], int(j), c[j, d] / a[j])
            for j, d in _smallest(delta, count)]


def _row_swaps(problem, B, count):
    """The ``count`` best common-support swaps: drop row i in every task, add row j at its joint optimum.

    Adding row j means minimizing sum_k a_k t_k^2 - 2 c_k t_k - gamma (sum_k t_k)^2
    (gamma = lambda_bbar / 2K), a diagonal-minus-rank-one quadratic solved in closed form.
    """
    K, lr, lb = problem.n_tasks, problem.lambda_ridge, problem.lambda_bbar
    rows = np.flatnonzero((B != 0).any(axis=0))
    outside = ~(B != 0).any(axis=0)
    if not outside.any():
        return []
    drops = list(rows) + ([None] if rows.size < problem.s else [])
    c, removal = [], np.zeros(len(drops))
    for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
        n, b = len(y), B[k, rows]
        resid = y - X @ B[k]
        products = X.T @ np.column_stack([resid, X[:, rows]])        # (p, 1 + |rows|)
        Xr = products[:, 1:] * b + products[:, :1]
        removal[:rows.size] += ((2 * b * products[rows, 0] + b**2 * problem.column_sq_norms[k, rows])
                                / (2 * n) - lr / 2 * b**2)
        if rows.size < len(drops):
            Xr = np.column_stack([Xr, products[:, 0]])
        c.append(Xr[outside] / (2 * n))
    c = np.array(c)                                                    # (K, |outside|, drops)
    removal[:rows.size] -= lb / 2 * (np.sum(B[:, rows] ** 2, axis=0) - K * B[:, rows].mean(axis=0) ** 2)
    a = (problem.column_sq_norms[:, outside] / (2 * np.array([len(y) for y in problem.ys]))[:, None]
         + lr / 2 + lb / 2)[:, :, None]                                # (K, |outside|, 1)
    gamma = lb / (2 * K)
    with np.errstate(divide="ignore", invalid="ignore"):  # a = 0: an all-zero column, unusable
        total = np.sum(c / a, axis=0) / (1 - gamma * np.sum(1 / a, axis=0))
        t = (c + gamma * total) / a
        delta = -np.sum(c * t, axis=0) + removal[None, :]              # (|outside|, drops)
    columns = np.flatnonzero(outside)
    return [(float(delta[j, d]), None, drops[d], int(columns[j]), t[:, j, d])
            for j, d in _smallest(delta, count)]


def apply_swap(B: np.ndarray, move) -> np.ndarray:
    """B after the swap ``move`` from ``best_swap`` (a new array)."""
    _, task, drop, add, values = move
    B = B.copy()
    rows = slice(None) if task is None else task
    if drop is not None:
        B[rows, drop] = 0.0
    B[rows, add] = values
    return B
