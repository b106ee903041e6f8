"""Solvers for ARMUL (``mtl_opt.formulations.armul``) and its baselines, with real stopping rules.

- ``fista``: accelerated proximal gradient on (V, center), theta_j = center + v_j,
  with the exact prox of lambda ||v||_2 (block soft-thresholding), a
  block-diagonal step metric and gradient restarts.  It stops when the
  relative duality gap (``ArmulProblem.dual_bound``) is <= rel_gap: status
  ``converged`` (``method.final_status`` proves ``optimal``), else ``iteration_limit``.
- ``clustered_armul`` / ``lowrank_armul``: alternating minimization (the
  paper's Algorithm 1 with exact blocks) from seeded k-means++ or SVD starts;
  every block step lowers the objective; no bound.
- every ARMUL routine takes the fit's ``deadline`` and, once it passes, returns its best
  answer so far with status ``time_limit``.
- the MTL baselines (clustered / low-rank MTL without the ARMUL relaxation), solved by
  exact blocks (``solvers.armul.glm``: normal equations or damped Newton).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...deadline import Deadline
from ...formulations.armul import ArmulProblem, row_norms
from ...result import Status
from .glm import group_fit, newton_glm, solve_psd, task_fits, task_rows
from ..method import SolverRun

#: Weight a of the step metric: ||v + b||^2 <= (1 + a) ||v||^2 + (1 + 1/a) ||b||^2.
METRIC_SPLIT = 0.25


@dataclass
class ArmulEstimate:
    """An ARMUL estimate: the task coefficients, the center of every task and what its structure
    adds (``extra``: a clustered fit's ``centers`` table and ``labels``, a low-rank fit's
    ``basis``).  The estimate of every ARMUL ``SolverRun``."""

    theta: np.ndarray            # (m, d)
    centers: np.ndarray          # (m, d): the center gamma_j of every task
    extra: dict = field(default_factory=dict)

    def mapped(self, rows) -> "ArmulEstimate":
        """This estimate with ``rows`` (a map of coefficient rows) applied to every table of
        coefficients (``reductions.Inverse.estimate``)."""
        extra = dict(self.extra)
        if "centers" in extra:
            extra["centers"] = rows(extra["centers"])
        return ArmulEstimate(rows(self.theta), rows(self.centers), extra)


@dataclass
class ProxRun:
    """What a routine here returns: estimates, value, proven bound (or None), why it stopped
    (``status``: one of ``result.STOPS``; ``converged``: its own criterion met, and
    ``method.final_status`` decides whether that is ``optimal``), iterations and a log."""

    theta: np.ndarray
    centers: np.ndarray          # (m, d): the center gamma_j of every task
    objective: float
    lower_bound: float | None
    status: Status
    n_iter: int
    log: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def solver_run(self, native: dict) -> SolverRun:
        """This run as the ``SolverRun`` of a method: its estimate an ``ArmulEstimate``, its
        iterations ``native["n_iter"]`` beside ``native`` (solver, version, the bound's source)."""
        return SolverRun(ArmulEstimate(self.theta, self.centers, self.extra), self.objective,
                         self.lower_bound, self.status, self.log, {**native, "n_iter": self.n_iter})


#: The least positive normal float: ``block_soft_threshold``'s floor under a row's norm.
TINY = float(np.finfo(float).tiny)


def block_soft_threshold(V: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Row-wise prox of tau_j ||v_j||_2: (1 - tau_j / ||v_j||)_+ v_j."""
    norms = row_norms(V)
    # a zero row stays zero whatever its scale (the floor only keeps 0 / 0 out)
    scale = np.maximum(0.0, 1.0 - tau / np.maximum(norms, TINY))
    return V * scale[:, None]


def fista(problem: ArmulProblem, theta0=None, center0=None, *, centers=None, rel_gap=1e-6,
          max_iter=20000, check_every=10, deadline: Deadline) -> ProxRun:
    """Vanilla ARMUL (one free center), or the Theta-step for fixed ``centers`` (m, d).

    Gap stopping: every ``check_every`` iterations the deadline is checked and the best dual
    bound so far compared with the objective at the current iterate.  Only a check that could
    close the gap is made (vanilla: ``gap_estimate``, a screen costing about two iterations,
    says so) and proves its bound (``dual_bound``'s float-safety terms), and the last check
    always: a log row per check made, its ``lower_bound`` the best proven so far (None before
    the first).
    """
    m, d = problem.m, problem.d
    shared = centers is None
    theta = np.zeros((m, d)) if theta0 is None else np.array(theta0, dtype=float)
    wl = problem.w * problem.smoothness
    if shared:
        center = (np.average(theta, axis=0, weights=problem.w) if center0 is None
                  else np.array(center0, dtype=float))
        step_v, step_c = 1 / ((1 + METRIC_SPLIT) * wl), 1 / ((1 + 1 / METRIC_SPLIT) * wl.sum())
    else:
        center, step_v, step_c = np.zeros(d), 1 / wl, 0.0
    offset = (lambda c: c) if shared else (lambda c: centers)
    cap = problem.w * problem.lam
    weight, step, tau = problem.w[:, None], step_v[:, None], cap * step_v   # loop invariants
    V = theta - offset(center)
    Vy, cy, t = V, center, 1.0
    best, log, status = -math.inf, [], Status.ITERATION_LIMIT
    for it in range(1, max_iter + 1):
        G = weight * problem.grads(offset(cy) + Vy)
        V_new = block_soft_threshold(Vy - step * G, tau)
        c_new = cy - step_c * G.sum(axis=0)
        if np.vdot(Vy - V_new, V_new - V) + np.vdot(cy - c_new, c_new - center) > 0:
            t, Vy, cy = 1.0, V_new, c_new
        else:
            t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
            mom = (t - 1) / t_new
            Vy, cy, t = V_new + mom * (V_new - V), c_new + mom * (c_new - center), t_new
        V, center = V_new, c_new
        if it % check_every and it < max_iter:
            continue
        theta = offset(center) + V
        expired = deadline.expired()
        last = expired or it == max_iter
        if shared and not last:   # a check the Gram-space estimate shows cannot close: skipped
            estimate = problem.gap_estimate(theta, center)
            if estimate is not None:
                primal, dual, allowance = estimate
                if primal - dual - allowance > rel_gap * abs(primal):
                    continue
        objective = problem.objective(theta, offset(center))
        needed = -math.inf if last else objective - rel_gap * abs(objective)
        bound = problem.dual_bound(theta, "vanilla" if shared else "fixed", centers, needed=needed)
        best = best if bound is None else max(best, bound)
        gap = objective - best
        log.append({"iter": it, "objective": objective,
                    "lower_bound": None if best == -math.inf else best,
                    "rel_gap": None if best == -math.inf else gap / max(abs(objective), 1e-300)})
        if gap <= rel_gap * abs(objective):  # relative, no absolute floor: scale-free
            status = Status.CONVERGED
            break
        if expired:
            status = Status.TIME_LIMIT
            break
    return ProxRun(theta, np.broadcast_to(offset(center), (m, d)).copy(), objective,
                   None if best == -math.inf else best, status, it, log)


def kmeans_pp(points: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: each new center drawn with probability ~ squared distance."""
    chosen = [points[rng.integers(len(points))]]
    for _ in range(1, k):
        d2 = np.min([np.sum((points - c) ** 2, axis=1) for c in chosen], axis=0)
        prob = d2 / d2.sum() if d2.sum() > 0 else np.full(len(points), 1 / len(points))
        chosen.append(points[rng.choice(len(points), p=prob)])
    return np.array(chosen)


def _nearest(theta, centers) -> np.ndarray:
    return np.argmin(((theta[:, None, :] - centers[None]) ** 2).sum(axis=2), axis=1)


def seeded_partitions(anchors: np.ndarray, k: int, rng, n_init: int, max_iter=100, *,
                      deadline: Deadline):
    """Yield each new (labels, centers) of ``n_init`` k-means++ starts refined by Lloyd's
    iterations, as it is found; after the first, none once ``deadline`` passes."""
    found = set()
    for _ in range(n_init):
        if found and deadline.expired():
            return
        centers = kmeans_pp(anchors, k, rng)
        labels = _nearest(anchors, centers)
        for _ in range(max_iter):
            centers = np.array([anchors[labels == g].mean(axis=0) if np.any(labels == g)
                                else centers[g] for g in range(k)])
            new_labels = _nearest(anchors, centers)
            if np.array_equal(new_labels, labels):
                break
            labels = new_labels
        if labels.tobytes() not in found:
            found.add(labels.tobytes())
            yield labels, centers


def clustered_armul(problem: ArmulProblem, k: int, anchors: np.ndarray, rng, *, n_init=10,
                    rel_gap=1e-8, max_rounds=100, deadline: Deadline) -> ProxRun:
    """Alternate exact per-cluster vanilla fits and nearest-center labels from each seeded
    partition; the best, ``converged`` or, when ``deadline`` cut the search, ``time_limit``."""
    best = None
    for start, (labels, centers) in enumerate(seeded_partitions(anchors, k, rng, n_init,
                                                                 deadline=deadline)):
        theta, centers = anchors.copy(), centers.copy()
        for rounds in range(1, max_rounds + 1):
            for g in range(k):
                members = np.flatnonzero(labels == g)
                if members.size == 1:  # exact: theta = center = the task's fit nearest the center
                    one = problem.subset(members)
                    theta[members] = centers[g] = task_fits(one, np.ones((1, problem.d), bool),
                                                            centers[g])[0]
                elif members.size:
                    run = fista(problem.subset(members), theta[members], centers[g],
                                rel_gap=rel_gap, deadline=deadline)
                    theta[members], centers[g] = run.theta, run.centers[0]
            new_labels = _nearest(theta, centers)
            if np.array_equal(new_labels, labels) or deadline.expired():
                break
            labels = new_labels
        objective = problem.objective(theta, centers[labels])
        if best is None or objective < best.objective:
            best = ProxRun(theta.copy(), centers[labels], objective, None, Status.CONVERGED, rounds,
                           extra={"centers": centers.copy(), "labels": labels})
        best.log.append({"start": start, "objective": objective, "rounds": rounds})
    best.status = Status.TIME_LIMIT if deadline.expired() else Status.CONVERGED
    return best


def weighted_low_rank(theta: np.ndarray, weights: np.ndarray, k: int):
    """argmin over rank-k Gamma of sum_j weights_j ||theta_j - gamma_j||^2, and its row basis (d, k)."""
    root = np.sqrt(weights)[:, None]
    U, sv, Vt = np.linalg.svd(root * theta, full_matrices=False)
    return (U[:, :k] * sv[:k]) @ Vt[:k] / root, Vt[:k].T


#: The sine of the largest principal angle between the two starts' spans below which
#: ``lowrank_armul`` runs the first alone: on ARMUL's low-rank simulation (standardized tasks)
#: they are 0.004-0.012 apart and ended on the same objectives; where the curvature start helped
#: on the random cases of ``lowrank_armul``'s docstring, 0.12-0.99.
SECOND_START_ANGLE = 0.1


def lowrank_armul(problem: ArmulProblem, k: int, anchors: np.ndarray, *, rel_gap=1e-8,
                  max_rounds=200, tol=1e-7, irls_steps=5, deadline: Deadline) -> ProxRun:
    """Alternate three descent steps from two SVD starts, keeping the better end:

    Theta given Gamma (certified convex step); for the squared loss, (B, Z)
    given V = Theta - Gamma (low-rank MTL on y_j - X_j v_j, so tasks sitting
    on their centers move with them); Gamma given Theta by IRLS.
    The starts weigh the tasks' anchors equally, and by what moving each task's coefficients
    costs, w_j times its loss's curvature (``smoothness``): with equal weights, tasks whose
    features are on a small scale (large coefficients, little curvature) choose the span, and the
    search can stay near it.  On 120 random 2-D rank-1 cases (tasks' features up to 1e6 apart in
    scale) the equal-weight start ended more than 1 % above a brute force on 15, once 416x; with
    the second, on 8 (BENCHMARKS.md, "Fuzz audits").  The second runs only where its span is
    ``SECOND_START_ANGLE`` or more from the first's.
    """
    starts = [weighted_low_rank(anchors, weights, k)
              for weights in (np.ones(problem.m), problem.w * problem.smoothness)]
    cosines = np.linalg.svd(starts[0][1].T @ starts[1][1], compute_uv=False)
    if np.sqrt(max(0.0, 1.0 - cosines.min() ** 2)) < SECOND_START_ANGLE:
        starts.pop()
    runs = []
    for gamma, _ in starts:
        if runs and deadline.expired():
            break
        runs.append(_alternate(problem, k, anchors, gamma, rel_gap, max_rounds, tol, irls_steps,
                               deadline))
    best = min(runs, key=lambda run: run.objective)
    best.status = Status.TIME_LIMIT if deadline.expired() else Status.CONVERGED
    return best


def _alternate(problem, k, theta, gamma, rel_gap, max_rounds, tol, irls_steps, deadline) -> ProxRun:
    """``lowrank_armul``'s descent from coefficients ``theta`` and centers ``gamma``."""
    cap = problem.w * problem.lam
    previous, log, basis = math.inf, [], None
    for rounds in range(1, max_rounds + 1):
        theta = fista(problem, theta, centers=gamma, rel_gap=rel_gap, deadline=deadline).theta
        if problem.loss == "squared":
            V = theta - gamma
            shifted = problem.with_response(problem.y - problem.scores(V))
            fit = lowrank_mtl(shifted, k, gamma, max_rounds=5)
            gamma, theta = fit.theta, fit.theta + V
        for _ in range(irls_steps):  # majorize-minimize: each step lowers sum_j cap_j ||theta_j - gamma_j||
            dist = np.maximum(np.linalg.norm(theta - gamma, axis=1), 1e-12)
            gamma, basis = weighted_low_rank(theta, cap / dist + 1e-300, k)
        objective = problem.objective(theta, gamma)
        log.append({"round": rounds, "objective": objective})
        if previous - objective <= tol * abs(objective) or deadline.expired():
            break
        previous = objective
    return ProxRun(theta, gamma, objective, None, Status.CONVERGED, rounds, log, {"basis": basis})


def clustered_mtl(problem: ArmulProblem, k: int, anchors, rng, *, n_init=10, max_rounds=100,
                  deadline: Deadline) -> ProxRun:
    """min over centers and labels of sum_j w_j f_j(beta_{z_j}): alternate pooled fits and labels."""
    zero = problem.with_lam(0.0)
    best = None
    for labels, centers in seeded_partitions(anchors, k, rng, n_init, deadline=deadline):
        centers = centers.copy()
        for rounds in range(1, max_rounds + 1):
            for g in np.unique(labels):
                centers[g] = group_fit(problem, np.flatnonzero(labels == g), centers[g])
            loss = np.array([zero.losses(np.tile(c, (problem.m, 1))) for c in centers])
            new_labels = np.argmin(loss, axis=0)
            if np.array_equal(new_labels, labels):
                break
            labels = new_labels
        theta = centers[labels]
        objective = zero.objective(theta, theta)
        if best is None or objective < best.objective:
            best = ProxRun(theta, theta, objective, None, Status.CONVERGED, rounds,
                           extra={"centers": centers.copy(), "labels": labels})
    return best


def _loading_step(problem: ArmulProblem, B, Z) -> np.ndarray:
    """Z-step of low-rank MTL: each z_j fits task j with design X_j B."""
    if problem.loss == "squared":
        return np.array([solve_psd(B.T @ G @ B, B.T @ b) for G, b in zip(problem.gram, problem.xty)])
    return np.array([newton_glm(A @ B, yj, cj, problem.loss, zj)
                     for (A, yj, cj), zj in zip((task_rows(problem, [j]) for j in range(problem.m)), Z)])


def _basis_step(problem: ArmulProblem, B, Z) -> np.ndarray:
    """B-step of low-rank MTL: theta_j = B z_j is linear in vec(B) (row-major, d x k)."""
    d, k = B.shape
    if problem.loss == "squared":
        H = np.einsum("m,mik,ma,mb->iakb", problem.w, problem.gram, Z, Z, optimize=True).reshape(d * k, d * k)
        rhs = np.einsum("m,mi,ma->ia", problem.w, problem.xty, Z).ravel()
        return solve_psd(H, rhs).reshape(d, k)
    mask = problem.mask
    kron = np.einsum("mk,mnd->mndk", Z, problem.X)[mask].reshape(-1, d * k)
    c = np.repeat(problem.row_weight, mask.sum(axis=1))
    return newton_glm(kron, problem.y[mask], c, problem.loss, B.ravel()).reshape(d, k)


def lowrank_mtl(problem: ArmulProblem, k: int, anchors, *, max_rounds=500, tol=1e-9) -> ProxRun:
    """min over B (d, k), Z (m, k) of sum_j w_j f_j(B z_j): alternate exact Z- and B-steps."""
    zero = problem.with_lam(0.0)
    U, sv, Vt = np.linalg.svd(anchors, full_matrices=False)
    B, Z = Vt[:k].T, U[:, :k] * sv[:k]
    previous = math.inf
    for rounds in range(1, max_rounds + 1):
        Z = _loading_step(problem, B, Z)
        B = _basis_step(problem, B, Z)
        theta = Z @ B.T
        objective = zero.objective(theta, theta)
        if previous - objective <= tol * abs(objective):
            break
        previous = objective
    return ProxRun(theta, theta, objective, None, Status.CONVERGED, rounds, extra={"basis": B})
