"""Brute-force optimum of the sparse objective F under built-in side constraints (tiny instances).

``constrained_optimum`` enumerates every support z the constraints and the variant allow and, on
each, solves the box-constrained least squares of F's continuous part exactly (scipy's BVLS, an
active-set method).  It reads the constraints itself, from the user's dict form (the keys of
``mtl_opt.formulations.constraints.Constraint``), so it does not share code with
``compile_constraints`` / ``SideConstraints`` or with any solver: tests compare the solvers to it.

Semantics (those of the exact models): z is a 0-1 support, beta is 0 off z (and on the pairs the
problem excludes); a pair with z = 1 may still have beta = 0.  F = loss + ridge + Bbar terms at
beta + (lambda_zbar / 2) sum_k ||z_k - z_bar||^2.  For the cs_* variants z_k is one column set C
(|C| <= s) for every task, and task k's coefficients live on C minus its excluded pairs.  The
constraints restrict z (include: z = 1; exclude: beta = 0, and z = 0 unless the support is
common: excluded pairs are like the problem's own; at_most / at_least: the count of z over
the features, per listed task; shared_support: equal z over the tasks) and beta (nonnegative,
nonpositive, bounds: the box, on the ORIGINAL feature scale times ``x_scale``; a pair off the
support has beta = 0, so a box without 0 needs z = 1).

Cost: the product over tasks of the per-task supports (sum_{i<=s} C(p, i) each), one small
least squares per task support without a Bbar term, one per combination with it: keep K p small
(K <= 3, p <= 7, s <= 2 runs in about a second).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import lsq_linear


def constrained_optimum(problem, constraints, x_scale=None, feature_names=None):
    """(min F, B) over the supports and coefficients satisfying ``constraints`` (module docstring).

    ``problem``: a ``SparseProblem`` (its centred data Xs / ys, variant, s, lambda_* and
    ``excluded``; its ``side`` is ignored).  ``constraints``: dicts or ``Constraint`` records
    with features / tasks as names (``feature_names``, ``problem.task_names``) or 0-based
    indices.  ``x_scale`` (K, p): the fitted problem's feature scales (``scaler.x_scale`` when
    standardized), which multiply the bounds; None: 1.  B (K, p) is on the fitted scale.
    Returns (inf, None) when nothing is feasible.
    """
    K, p = len(problem.Xs), problem.Xs[0].shape[1]
    rules = _Rules(constraints, K, p, list(map(str, problem.task_names)) or None,
                   None if feature_names is None else list(map(str, feature_names)), x_scale)
    allowed = ~np.asarray(problem.excluded, bool) & ~rules.exclude
    common = problem.variant.startswith("cs_")
    sets = [frozenset(c) for size in range(problem.s + 1)
            for c in itertools.combinations(range(p), size)]
    if common:   # one column set for every task
        combos = ((c,) * K for c in sets)
    else:
        per_task = [[c for c in sets if all(allowed[k, j] for j in c) and rules.task_ok(k, c)]
                    for k in range(K)]
        combos = itertools.product(*per_task)
    A, t, task_rows = _least_squares(problem)
    cache = {}
    best, best_B = np.inf, None
    for combo in combos:
        if not all(rules.task_ok(k, c) for k, c in enumerate(combo)) or not rules.shared_ok(combo):
            continue
        z = np.zeros((K, p), bool)
        for k, c in enumerate(combo):
            z[k, list(c)] = True
        coefs = z & allowed
        if problem.lambda_bbar:
            cont, B = _box_lsq(A, t, coefs, rules.lower, rules.upper)
        else:   # separable over tasks: solve each task's support once
            cont, B = 0.0, np.zeros((K, p))
            for k in range(K):
                key = (k, combo[k])
                if key not in cache:
                    mask = np.zeros((K, p), bool)
                    mask[k] = coefs[k]
                    cache[key] = _box_lsq(A, t, mask, rules.lower, rules.upper, task_rows[k])
                part, Bk = cache[key]
                cont, B[k] = cont + part, Bk[k]
        if not np.isfinite(cont):
            continue
        value = cont + 0.5 * problem.lambda_zbar * float(np.sum((z - z.mean(axis=0)) ** 2))
        if value < best:
            best, best_B = value, B
    return best, best_B


class _Rules:
    """The constraints as per-pair boxes and support rules (read from the dicts directly)."""

    def __init__(self, constraints, K, p, task_names, feature_names, x_scale):
        self.include, self.exclude = np.zeros((K, p), bool), np.zeros((K, p), bool)
        self.lower, self.upper = np.full((K, p), -np.inf), np.full((K, p), np.inf)
        self.counts, self.shared = [], []   # (task, features, low, high); (tasks, features)
        for c in constraints:
            c = c if isinstance(c, dict) else c.to_dict()
            tasks = _resolve(c.get("tasks"), K, task_names)
            features = _resolve(c.get("features"), p, feature_names)
            kind = c["kind"]
            for k in tasks:
                if kind == "include":
                    self.include[k, features] = True
                elif kind == "exclude":
                    self.exclude[k, features] = True
                elif kind == "at_most":
                    self.counts.append((k, features, 0, c["count"]))
                elif kind == "at_least":
                    self.counts.append((k, features, c["count"], len(features)))
                elif kind in ("nonnegative", "nonpositive", "bounds"):
                    low = {"nonnegative": 0.0}.get(kind, c.get("lower", -np.inf))
                    high = {"nonpositive": 0.0}.get(kind, c.get("upper", np.inf))
                    self.lower[k, features] = np.maximum(self.lower[k, features], low)
                    self.upper[k, features] = np.minimum(self.upper[k, features], high)
            if kind == "shared_support":
                self.shared.append((tasks, features))
        if x_scale is not None:
            self.lower, self.upper = self.lower * x_scale, self.upper * x_scale
        self.needed = self.include | (self.lower > 0) | (self.upper < 0)
        self.exclude |= (self.lower == 0) & (self.upper == 0)   # a box [0, 0] is an exclude

    def task_ok(self, k, support) -> bool:
        """Whether task k's support (a set of features) meets include and the counts."""
        z = np.zeros(self.include.shape[1], bool)
        z[list(support)] = True
        return (not np.any(self.needed[k] & ~z)
                and all(low <= z[features].sum() <= high
                        for task, features, low, high in self.counts if task == k))

    def shared_ok(self, combo) -> bool:
        return all(len({frozenset(combo[k]) & set(features) for k in tasks}) == 1
                   for tasks, features in self.shared)


def _resolve(names, size, valid):
    if names is None:
        return list(range(size))
    names = [names] if isinstance(names, (str, int)) else list(names)
    return [valid.index(str(n)) if isinstance(n, str) else int(n) for n in names]


def _least_squares(problem):
    """(A, t, task_rows) with F's continuous part = ||A vec(B) - t||^2 / 2 over vec(B) (row-major
    K x p); task_rows[k]: the rows that hold task k's data and ridge terms."""
    K, p = len(problem.Xs), problem.Xs[0].shape[1]
    blocks, targets = [], []
    for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
        rows = np.zeros((len(y), K * p))
        rows[:, k * p:(k + 1) * p] = X / np.sqrt(len(y))
        blocks.append(rows)
        targets.append(y / np.sqrt(len(y)))
    eye = np.eye(K * p)
    blocks.append(np.sqrt(problem.lambda_ridge) * eye)
    blocks.append(np.sqrt(problem.lambda_bbar) * (eye - np.kron(np.ones((K, K)) / K, np.eye(p))))
    targets.append(np.zeros(2 * K * p))
    ends = np.cumsum([0] + [len(y) for y in problem.ys])
    task_rows = [np.concatenate([np.arange(ends[k], ends[k + 1]), ends[-1] + np.arange(k * p, (k + 1) * p)])
                 for k in range(K)]
    return np.vstack(blocks), np.concatenate(targets), task_rows


def _box_lsq(A, t, mask, lower, upper, rows=None):
    """min ||A b - t||^2 / 2 over b on ``mask`` (zero elsewhere) in [lower, upper]: (value, B),
    over the rows ``rows`` of A (None: all: the value of one task alone, whose mask it is)."""
    K, p = mask.shape
    rows = slice(None) if rows is None else rows
    columns = np.flatnonzero(mask.ravel())
    B = np.zeros(K * p)
    A_, t_ = A[rows][:, columns], t[rows]
    if columns.size:
        low, high = lower.ravel()[columns], upper.ravel()[columns]
        if np.all(np.isinf(low)) and np.all(np.isinf(high)):
            B[columns] = np.linalg.lstsq(A_, t_, rcond=None)[0]
        else:
            B[columns] = lsq_linear(A_, t_, bounds=(low, high), method="bvls", tol=1e-14).x
            B[columns] = np.clip(B[columns], low, high)
    residual = A[rows] @ B - t_
    return 0.5 * float(residual @ residual), B.reshape(K, p)

