"""Block coordinate descent (block iterative hard thresholding) + local combinatorial search.

The heuristic for the sparse multi-task objective F of
``mtl_opt.formulations.sparse``:

1. Sweeps of block IHT.  Each task's block takes a gradient step of length
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
   refit; repeat until no swap improves F.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..formulations.sparse import SparseProblem

#: A move must improve F by more than this (relative) to count.
IMPROVEMENT = 1e-12
#: IHT sweeps with an unchanged support before the continuous part is refitted exactly.
STABLE_SWEEPS = 3


def fit_bcd(problem: SparseProblem, init: np.ndarray | None = None, *, max_iter: int = 1000,
            tol: float = 1e-7, local_search: bool = True, max_swaps: int = 10_000):
    """Run the heuristic; returns (B, log, n_iter) for the best of its starts.

    With ``init`` (K, p) that is the only start.  Without, two starts are
    tried, as in the reference code: zeros, and the solution of the relaxed
    problem with s' = min(3s, p) and no Zbar term, hard-thresholded to s.
    ``log`` holds one record per IHT sweep and per accepted swap:
    start, phase, iteration, objective, support size, time.
    """
    clock = time.perf_counter()
    run = lambda prob, start: _descend(prob, start, max_iter, tol, local_search, max_swaps, clock)  # noqa: E731
    if init is not None:
        return run(problem, _project(problem, np.array(init, dtype=float)))
    zeros = np.zeros((problem.n_tasks, problem.n_features))
    wide = replace(problem, s=min(3 * problem.s, problem.n_features), lambda_zbar=0.0)
    wide_solution = run(wide, zeros)[0]
    runs = [run(problem, zeros), run(problem, _project(problem, wide_solution))]
    return min(runs, key=lambda r: problem.objective(r[0]))


def _descend(problem, B, max_iter, tol, local_search, max_swaps, clock):
    """IHT sweeps from B, an exact refit, then swaps until none improves."""
    value = problem.objective(B)
    log = [_record("start", 0, value, B, clock)]
    step = problem.lipschitz()
    it, stable = 0, 0
    for it in range(1, max_iter + 1):
        candidate = _iht_sweep(problem, B, step)
        new_value = problem.objective(candidate)
        if new_value > value:  # guard against rounding at a fixed point
            break
        converged = value - new_value <= tol * max(abs(value), 1e-12)
        stable = stable + 1 if np.array_equal(candidate != 0, B != 0) else 0
        B, value = candidate, new_value
        if stable >= STABLE_SWEEPS:  # supports settled: jump to their exact optimum
            B, value = _refit(problem, B, value)
            stable = 0
        log.append(_record("iht", it, value, B, clock))
        if converged:
            break
    B, value = _refit(problem, B, value)
    log.append(_record("refit", it, value, B, clock))
    if local_search:
        for swap in range(1, max_swaps + 1):
            move = best_swap(problem, B)
            if move is None or move[0] >= -IMPROVEMENT * max(abs(value), 1e-12):
                break
            B = apply_swap(B, move)
            B, value = _refit(problem, B, problem.objective(B))
            log.append(_record("swap", swap, value, B, clock))
    return B, log, it


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
    if problem.common_support:
        return _best_row_swap(problem, B)
    best = None
    for k in range(problem.n_tasks):
        move = _best_task_swap(problem, B, k)
        if move is not None and (best is None or move[0] < best[0]):
            best = move
    return best


def _best_task_swap(problem, B, k):
    X, y, n = problem.Xs[k], problem.ys[k], len(problem.ys[k])
    K, lr, lb = problem.n_tasks, problem.lambda_ridge, problem.lambda_bbar
    support = np.flatnonzero(B[k])
    outside = np.flatnonzero(B[k] == 0)
    if outside.size == 0:
        return None
    resid = y - X @ B[k]
    mean = B.mean(axis=0)
    counts = np.count_nonzero(B, axis=0).astype(float)
    Xo = X[:, outside]
    a = np.sum(Xo**2, axis=0) / (2 * n) + lr / 2 + lb * (1 - 1 / K) / 2
    # drop candidates: None (only when under s) plus every i in the support
    drops = ([None] if support.size < problem.s else []) + list(support)
    best = None
    for i in drops:
        if i is None:
            r, removal, counts_i = resid, 0.0, counts
        else:
            b = B[k, i]
            r = resid + X[:, i] * b
            removal = ((r @ r - resid @ resid) / (2 * n) - lr / 2 * b**2
                       + lb / 2 * (-b**2 + 2 * mean[i] * b - b**2 / K))
            counts_i = counts.copy()
            counts_i[i] -= 1
            removal += _zbar_delta(problem, counts[i], counts_i[i])
        c = Xo.T @ r / (2 * n) + lb * mean[outside] / 2
        ok = a > 0
        gain = np.where(ok, -np.divide(c**2, a, out=np.zeros_like(c), where=ok), np.inf)
        gain += _zbar_delta(problem, counts_i[outside], counts_i[outside] + 1)
        j = int(np.argmin(gain))
        delta = removal + gain[j]
        if best is None or delta < best[0]:
            best = (float(delta), k, i, int(outside[j]), c[j] / a[j])
    return best


def _best_row_swap(problem, B):
    K, lr, lb = problem.n_tasks, problem.lambda_ridge, problem.lambda_bbar
    rows = np.flatnonzero(np.any(B != 0, axis=0))
    outside = np.flatnonzero(~np.any(B != 0, axis=0))
    if outside.size == 0:
        return None
    drops = ([None] if rows.size < problem.s else []) + list(rows)
    resids = [y - X @ b for X, y, b in zip(problem.Xs, problem.ys, B)]
    a = np.array([np.sum(X[:, outside] ** 2, axis=0) / (2 * len(y)) + lr / 2 + lb / 2
                  for X, y in zip(problem.Xs, problem.ys)])          # (K, |outside|)
    gamma = lb / (2 * K)
    best = None
    for i in drops:
        removal, c = 0.0, np.empty_like(a)
        for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
            n, r = len(y), resids[k]
            if i is not None:
                r = r + X[:, i] * B[k, i]
                removal += (r @ r - resids[k] @ resids[k]) / (2 * n) - lr / 2 * B[k, i] ** 2
            c[k] = X[:, outside].T @ r / (2 * n)
        if i is not None:
            removal -= lb / 2 * (np.sum(B[:, i] ** 2) - K * B[:, i].mean() ** 2)
        # minimize sum_k a_k t_k^2 - 2 c_k t_k - gamma (sum_k t_k)^2 for every candidate row
        total = np.sum(c / a, axis=0) / (1 - gamma * np.sum(1 / a, axis=0))
        t = (c + gamma * total) / a
        gain = -np.sum(c * t, axis=0)
        j = int(np.argmin(gain))
        delta = removal + gain[j]
        if best is None or delta < best[0]:
            best = (float(delta), None, i, int(outside[j]), t[:, j])
    return best


def apply_swap(B: np.ndarray, move) -> np.ndarray:
    """B after the swap ``move`` from ``best_swap`` (a new array)."""
    _, task, drop, add, values = move
    B = B.copy()
    rows = slice(None) if task is None else task
    if drop is not None:
        B[rows, drop] = 0.0
    B[rows, add] = values
    return B
