"""The exact models of the sparse problem (``formulations.sparse``): the perspective cut oracle,
the outer-approximation master MILP, the Big-M perspective MIQP, and how far a solver's bound or
objective on them may stray from the true one (its tolerances).

Each model is built from a ``SparseProblem`` with named components (``z``, ``beta``, ``resid``,
``cuts``) that users can extend (``MTLEstimator.pyomo_model``); none is solved here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._lazy import pyo
from ..deadline import Deadline
from .constraints import SideConstraints
from .sparse import SparseProblem

#: Cut slopes below this are folded into the cut's constant (``Cut.for_solver``): the solvers'
#: zero tolerance, on the normalized problem whose objective is near 1.
SMALL_SLOPE = 1e-9


def dual_bound_margin(model, dual_tolerance: float) -> float:
    """How far a solver's dual bound on ``model`` may lie above the true one.

    An LP relaxation's value is its dual objective: the sum over the bounds the basis holds
    (rows and columns at a finite bound) of that bound times its dual value or reduced cost
    (Neumaier and Shcherbina, Math. Prog. 2004).  A basis holds exactly n such bounds for n
    columns, and the solver accepts dual values of the wrong sign up to its dual-feasibility
    tolerance, so the value exceeds the relaxation's minimum by at most
    tolerance * n * max(1, largest finite bound): ``model.n_columns`` and ``model.largest_bound``,
    kept by ``build_master``, ``add_cut`` and ``build_miqp`` (and by whoever adds rows of its
    own).  Branch and bound reports the least such value over its open nodes, so the same margin
    covers its dual bound; integrality tolerances only loosen the relaxations.  The rows a solver
    derives itself are assumed valid, with right-hand sides within ``largest_bound``.
    """
    return dual_tolerance * model.n_columns * max(1.0, model.largest_bound)


def perspective_slack(model, primal_tolerance: float) -> float:
    """How far a solver's objective on the MIQP ``model`` may lie below F at its own point.

    Each perspective row beta^2 <= t z may be violated by ``primal_tolerance``, so at z = 1 its t
    may sit that much below beta^2, and t weighs (lambda_ridge + mu_k)/2 in the objective; at
    most s rows per task have z = 1: ``model.perspective_weight``, kept by ``build_miqp`` (a
    model without it, e.g. an ARMUL one, has no perspective rows and no such slack).  The
    solver measures its gap on that lowered value, so where this slack approaches our gap its
    "optimal" leaves ours open (measured: 1.1e-3 of F where the gap asked was 1e-4).
    """
    return primal_tolerance * getattr(model, "perspective_weight", 0.0)


def fitting_tolerance(cost: float, rel_gap: float, objective: float, usual: float,
                      tightest: float) -> float:
    """``usual``, unless ``cost`` (what a unit of tolerance costs our gap: ``dual_bound_margin`` or
    ``perspective_slack`` at 1) times it would take more than half of the gap asked for
    (``rel_gap`` times ``objective``): then the tolerance at which it takes a tenth of that gap,
    never below ``tightest`` (the solver's floor).

    The dual margin grows with the columns: at the usual 1e-9 it alone was 8.3e-6 of F on a bbar
    master of 1033 columns (129 schools, ``examples/sparse_language.py``), against the default
    1e-6.  Where the usual tolerance leaves room it stays: a tighter one changes SCIP's tree, and
    8.1e-10 instead of 1e-9 stalled sMTL l0l2 seed 1's bound from 120 s to 600 s (benchmarks/HISTORY.md).
    """
    gap = rel_gap * abs(objective)
    if cost * usual <= gap / 2:
        return usual
    return float(max(tightest, gap / (10 * cost)))


@dataclass(frozen=True)
class Cut:
    """An affine minorant of the continuous part c(z) valid on all of [0, 1]^(K x p).

    ``constant[k] + sum_j gradient[k, j] * z[k, j]`` bounds task k's part from
    below when the tasks decouple (no Bbar); with Bbar, ``constant`` has one
    entry and the cut bounds the whole of c(z).
    """

    constant: np.ndarray
    gradient: np.ndarray

    def value(self, z: np.ndarray) -> float:
        return float(np.sum(self.constant) + np.sum(self.gradient * z))

    def parts(self, z: np.ndarray) -> np.ndarray:
        """The bound per epigraph part at z: one per task, or one in all with Bbar."""
        if len(self.constant) == 1:
            return np.array([self.value(z)])
        return self.constant + np.sum(self.gradient * z, axis=1)

    def for_solver(self) -> "Cut":
        """The cut with every |slope| below ``SMALL_SLOPE`` folded into the constant at its worst z.

        Solvers drop such coefficients (HiGHS's small_matrix_value, SCIP's epsilon: 1e-9), which
        for a negative slope would strengthen the cut beyond what is proven, and SCIP's LP failed
        on them ("numerical troubles", with tasks on scales 1e-3 and 1e3).  g z >= min(g, 0) on
        [0, 1], so the folded cut is weaker, hence valid.
        """
        small = np.abs(self.gradient) < SMALL_SLOPE
        folded = np.where(small, np.minimum(self.gradient, 0.0), 0.0)
        extra = folded.sum() if len(self.constant) == 1 else folded.sum(axis=1)
        return Cut(self.constant + extra, np.where(small, 0.0, self.gradient))


def perspective_cut(problem: SparseProblem, B: np.ndarray) -> Cut:
    """The cut at any coefficients B, from the strengthened perspective form of c(z).

    With mu_k = ``problem.curvature`` and kappa_k = lambda_ridge + mu_k, write
    c(z) = min_beta G(beta) + sum_jk (kappa_k/2) beta_jk^2 / z_jk, where
    G = loss + Bbar term - sum_k (mu_k/2) ||beta_k||^2 is convex (mu_k is
    below the loss's curvature); at binary z this is exactly the continuous
    part of F.  Conjugating the perspective term gives, for every v,
    c(z) >= -G*(-v) - sum_jk z_jk v_jk^2 / (2 kappa_k); choosing
    v = -grad G(B) makes G*(-v) = -v.B - G(B) exact (Fenchel-Young), so

        c(z) >= G(B) + v.B - sum_jk z_jk v_jk^2 / (2 kappa_k)   for all z,

    tight at z = supp(B) when B is the refit there.  Needs every kappa_k > 0
    (``SparseProblem.exact_curvature``): lambda_ridge > 0, or n_k > p with a well-conditioned design.
    With excluded pairs everything lives on the allowed coordinates (B is 0 on the others,
    mu_k is the allowed columns' curvature, so G is convex there): their slopes are 0.
    """
    kappa = problem.exact_curvature()
    mean = B.mean(axis=0)
    losses, v = [], np.empty_like(B)
    for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
        resid = y - X @ B[k]
        losses.append(resid @ resid / (2 * len(y)) - problem.curvature[k] / 2 * B[k] @ B[k])
        v[k] = (X.T @ resid / len(y) - problem.lambda_bbar * (B[k] - mean)
                + problem.curvature[k] * B[k])
    per_task = np.array(losses) + np.einsum("kp,kp->k", v, B)
    gradient = np.where(problem.excluded, 0.0, -v**2 / (2 * kappa[:, None]))
    if problem.lambda_bbar:
        bbar = 0.5 * problem.lambda_bbar * np.sum((B - mean) ** 2)
        return Cut(np.array([per_task.sum() + bbar]), gradient)
    return Cut(per_task, gradient)


def _support_model(problem: SparseProblem, name: str) -> pyo.ConcreteModel:
    """Binary supports z[k, j] with the cardinality (and common-support) rows, and the Zbar term.

    The Zbar term uses sum_k ||z_k - z_bar||^2 = (1/K) sum_{k<l} ||z_k - z_l||^2,
    exact for binaries with w[j, k, l] >= |z_jk - z_jl| (the objective pushes
    w down): ``model.zbar_cost`` is the expression (lambda_zbar/2) times it.
    An excluded pair's z gets the bounds [0, 0]; with a shared support (no Zbar term) it is
    left as the column's indicator, which the common rows tie to the other tasks' z.
    """
    K, p = problem.n_tasks, problem.n_features
    model = pyo.ConcreteModel(name=name)
    model.tasks = pyo.RangeSet(0, K - 1, doc="task indices k (the data's task order)")
    model.features = pyo.RangeSet(0, p - 1, doc="feature indices j (the data's feature order)")
    model.z = pyo.Var(model.tasks, model.features, within=pyo.Binary,
                      doc="z[k, j]: binary, 1 when beta[k, j] may be non-zero")
    if not problem.common_support:
        for k, j in np.argwhere(problem.excluded):
            model.z[int(k), int(j)].setub(0)
    model.cardinality = pyo.Constraint(
        model.tasks, rule=lambda m, k: sum(m.z[k, j] for j in m.features) <= problem.s,
        doc=f"cardinality[k]: sum_j z[k, j] <= s = {problem.s}")
    if problem.common_support:
        model.common = pyo.Constraint(model.tasks, model.features,
                                      rule=lambda m, k, j: m.z[k, j] == m.z[0, j] if k else pyo.Constraint.Skip,
                                      doc="common[k, j]: z[k, j] == z[0, j] (one shared support)")
    if problem.side.active:   # an unconstrained model stays exactly as it was
        _side_rows(model, problem.side)
    pairs = [(k, l) for k in range(K) for l in range(k + 1, K)] if problem.lambda_zbar else []
    model.pairs = pyo.Set(initialize=pairs, dimen=2, doc="task pairs (k, l), k < l, of the Zbar term")
    model.w = pyo.Var(model.features, model.pairs, within=pyo.NonNegativeReals,
                      doc="w[j, k, l] >= |z[k, j] - z[l, j]| (rows w_up, w_down): the Zbar term")
    model.w_up = pyo.Constraint(model.features, model.pairs,
                                rule=lambda m, j, k, l: m.w[j, k, l] >= m.z[k, j] - m.z[l, j],
                                doc="w_up[j, k, l]: w[j, k, l] >= z[k, j] - z[l, j]")
    model.w_down = pyo.Constraint(model.features, model.pairs,
                                  rule=lambda m, j, k, l: m.w[j, k, l] >= m.z[l, j] - m.z[k, j],
                                  doc="w_down[j, k, l]: w[j, k, l] >= z[l, j] - z[k, j]")
    model.zbar_cost = pyo.Expression(expr=problem.lambda_zbar / (2 * K) * sum(
        model.w[j, k, l] for j in model.features for (k, l) in pairs),
        doc="(lambda_zbar / 2K) sum w, the Zbar term" if pairs else None)
    return model


def _side_rows(model: pyo.ConcreteModel, side: SideConstraints) -> None:
    """The side constraints that act on z (``SideConstraints``): an included pair's z at 1, one
    ranged row per count (``counts``) and z_kj = z_(first task)j per shared support (``shared``);
    exclude is part of ``excluded`` already, and the bounds on beta are the MIQP's.

    They only remove supports, and every cut and perspective row holds on all of [0, 1]^(K x p),
    so the relaxations stay valid: at a forced z = 1 the continuous part still minimizes over a
    free beta (0 included), as F counts an included pair whatever its coefficient.
    """
    for k, j in np.argwhere(side.include):
        model.z[int(k), int(j)].setlb(1)
    counts = side.counts
    model.counts = pyo.Constraint(range(len(counts)), rule=lambda m, i: (
        counts[i].at_least, sum(m.z[counts[i].task, j] for j in counts[i].features), counts[i].at_most),
        doc="counts[i]: at_least <= (features of a group in a task's support) <= at_most")
    shared = [(k, tasks[0], j) for tasks, features in side.shared for k in tasks[1:] for j in features]
    model.shared = pyo.Constraint(range(len(shared)), rule=lambda m, i: (
        m.z[shared[i][0], shared[i][2]] == m.z[shared[i][1], shared[i][2]]),
        doc="shared[i]: z equal between tasks told to share a support")


def miqp_box(problem: SparseProblem, big_m: float) -> tuple[np.ndarray, np.ndarray]:
    """(L, U) (K, p): the MIQP's box at M, [-M, M] cut to the side constraints' bounds where they
    are tighter (``build_miqp``'s rows L z <= beta <= U z and beta's bounds)."""
    return np.maximum(-big_m, problem.side.lower), np.minimum(big_m, problem.side.upper)


def _row_bound(problem: SparseProblem) -> float:
    """The largest right-hand side of the support rows: s, or a count's (``dual_bound_margin``)."""
    return float(max([problem.s, *(max(row.at_least, row.at_most) for row in problem.side.counts)]))


def build_feasibility(problem: SparseProblem) -> pyo.ConcreteModel:
    """The support rows alone with the objective sum z: a MILP whose solution is a small support
    the constraints allow, or whose infeasibility proves that none exists."""
    model = _support_model(problem, "sparse_feasibility")
    model.obj = pyo.Objective(expr=sum(model.z.values()))
    return model


def build_master(problem: SparseProblem) -> pyo.ConcreteModel:
    """The outer-approximation master MILP: supports, Zbar exactly, epigraph variables, no cuts yet.

    Components: ``z``, ``w`` (Zbar), ``eta[t] >= 0`` (one per task without
    Bbar, one in all with it: c(z) >= 0 always), ``cuts`` (a ConstraintList
    that ``add_cut`` fills), objective ``obj = sum eta + zbar_cost``.
    """
    model = _support_model(problem, "sparse_oa_master")
    parts = 1 if problem.lambda_bbar else problem.n_tasks
    model.parts = pyo.RangeSet(0, parts - 1, doc="parts t of the smooth term (one per task, one with Bbar)")
    model.eta = pyo.Var(model.parts, within=pyo.NonNegativeReals,
                        doc="eta[t] >= the smooth part's cuts: its minimum over beta at support z")
    model.cuts = pyo.ConstraintList(doc="eta >= c(z*) + g . (z - z*), outer approximations")
    model.obj = pyo.Objective(expr=sum(model.eta[t] for t in model.parts) + model.zbar_cost,
                              doc="sum eta + zbar_cost, an outer approximation of F")
    # columns z, w, eta; finite bounds: z in [0, 1], the cardinality and count rows' right-hand
    # sides (``dual_bound_margin``)
    model.n_columns = len(model.z) + len(model.w) + parts
    model.largest_bound = _row_bound(problem)
    return model


def add_cut(model: pyo.ConcreteModel, cut: Cut) -> None:
    """Add eta >= cut(z) rows to a master from ``build_master`` (``Cut.for_solver``)."""
    K, p = cut.gradient.shape
    cut = cut.for_solver()
    model.largest_bound = max(model.largest_bound, float(np.max(np.abs(cut.constant))))
    if len(cut.constant) == 1:
        model.cuts.add(model.eta[0] >= float(cut.constant[0]) + sum(
            float(cut.gradient[k, j]) * model.z[k, j] for k in range(K) for j in range(p) if cut.gradient[k, j]))
        return
    for k in range(K):
        model.cuts.add(model.eta[k] >= float(cut.constant[k]) + sum(
            float(cut.gradient[k, j]) * model.z[k, j] for j in range(p) if cut.gradient[k, j]))


def master_support(model: pyo.ConcreteModel, shape) -> np.ndarray:
    """The (K, p) boolean support held by a solved model's z."""
    return np.array([[pyo.value(model.z[k, j]) > 0.5 for j in range(shape[1])]
                     for k in range(shape[0])])


def build_miqp(problem: SparseProblem, big_m: float, perspective: bool = True,
               deadline: Deadline | None = None) -> pyo.ConcreteModel:
    """The Big-M MIQP of F with a diagonal Hessian (never X^T X handed to the solver).

    Variables ``beta[k, j]`` (bounds [0, 0] where excluded), ``z``, ``w`` and, with Bbar,
    ``mean[j] = (1/K) sum_k beta_jk``; ``L z <= beta <= U z`` with U = min(M, the side
    constraints' upper bound), L = max(-M, their lower bound), which are beta's bounds too (a
    bound without 0 forces z = 1, ``compile_constraints``, so the rows are exact there).  Task k's loss is written with
    residual variables ``resid[k, i] = y_ki - x_ki . beta_k``, or, with
    ``perspective`` and curvature mu_k > 0 (``SparseProblem.curvature``), as
    (1/2) ||u_k||^2 - (X_k'y_k / n_k) . beta_k + ||y_k||^2 / (2 n_k) with
    ``u[k, i] = sqrt(w_i - mu_k) v_i . beta_k`` from the eigenpairs (w_i, v_i)
    of X_kA'X_kA / n_k over the allowed columns A: the loss minus (mu_k/2) ||beta_k||^2, which
    moves to the ridge term.  With ``perspective`` the ridge term (lambda_ridge + mu_k)/2
    sum_j beta_jk^2 is written as sum t_jk with beta_jk^2 <= t_jk z_jk: a
    tighter relaxation with the same integer solutions.

    Once ``deadline`` passes, the rows left are skipped (seconds of Pyomo work
    at p in the thousands): the model is then incomplete, and the caller must
    not solve it (``Backend.solve`` with the same deadline won't).
    """
    model = _support_model(problem, "sparse_miqp")
    K, p = problem.n_tasks, problem.n_features
    mu = problem.curvature if perspective else np.zeros(K)
    shifted = [k for k in range(K) if mu[k] > 0]
    rows = [(k, i) for k in range(K) if k not in shifted for i in range(len(problem.ys[k]))]
    model.rows = pyo.Set(initialize=rows, dimen=2, doc="rows (k, i) of the residuals")
    low, high = miqp_box(problem, big_m)
    model.beta = pyo.Var(model.tasks, model.features,
                         bounds=lambda m, k, j: (float(low[k, j]), float(high[k, j])),
                         doc="beta[k, j]: task k's coefficient of feature j")
    for k, j in np.argwhere(problem.excluded):
        model.beta[int(k), int(j)].setlb(0)
        model.beta[int(k), int(j)].setub(0)
    model.resid = pyo.Var(model.rows, doc="resid[k, i]: y_ki minus x_ki . beta_k (rows fit[k, i])")
    X, y = problem.Xs, problem.ys
    model.fit = pyo.Constraint(model.rows, rule=_until(deadline, lambda m, k, i: m.resid[k, i] == float(
        y[k][i]) - sum(float(X[k][i, j]) * m.beta[k, j] for j in m.features if X[k][i, j] != 0)),
        doc="fit[k, i]: resid[k, i] == y_ki - x_ki . beta_k")
    factors = {k: _shifted_factor(X[k], mu[k], problem.allowed[k]) for k in shifted}
    model.eigen = pyo.Set(initialize=[(k, i) for k in shifted for i in range(len(factors[k]))], dimen=2,
                          doc="eigen-directions (k, i) of the tasks whose loss lends curvature")
    model.u = pyo.Var(model.eigen, doc="u[k, i]: eigen-coordinates of task k's loss (rows eigen_fit[k, i])")
    model.eigen_fit = pyo.Constraint(model.eigen, rule=_until(deadline, lambda m, k, i: m.u[k, i] == sum(
        float(factors[k][i, j]) * m.beta[k, j] for j in m.features if factors[k][i, j] != 0)),
        doc="eigen_fit[k, i]: u[k, i] == sqrt(w_i - mu_k) v_i . beta_k")
    model.upper = pyo.Constraint(model.tasks, model.features,
                                 rule=_until(deadline, lambda m, k, j: m.beta[k, j] <= float(high[k, j]) * m.z[k, j]),
                                 doc=f"upper[k, j]: beta[k, j] <= U z[k, j], U = min(M = {big_m:g}, the bounds)")
    model.lower = pyo.Constraint(model.tasks, model.features,
                                 rule=_until(deadline, lambda m, k, j: m.beta[k, j] >= float(low[k, j]) * m.z[k, j]),
                                 doc="lower[k, j]: beta[k, j] >= L z[k, j], L = max(-M, the bounds)")
    loss = sum(model.resid[k, i] ** 2 / (2 * len(y[k])) for k, i in rows)
    for k in shifted:
        linear = X[k].T @ y[k] / len(y[k])
        loss += 0.5 * sum(model.u[k, i] ** 2 for i in range(len(factors[k]))) + float(y[k] @ y[k]) / (2 * len(y[k])) \
            - sum(float(linear[j]) * model.beta[k, j] for j in range(p))
    if perspective and (problem.lambda_ridge > 0 or shifted):
        model.t = pyo.Var(model.tasks, model.features, within=pyo.NonNegativeReals,
                          doc="t[k, j] >= beta[k, j]^2 / z[k, j] (rows perspective[k, j]): the ridge part")
        model.perspective = pyo.Constraint(model.tasks, model.features, rule=_until(
            deadline, lambda m, k, j: m.beta[k, j] ** 2 <= m.t[k, j] * m.z[k, j]),
            doc="perspective[k, j]: beta[k, j]^2 <= t[k, j] z[k, j]")
        ridge = sum((problem.lambda_ridge + mu[k]) / 2 * model.t[k, j] for k in range(K) for j in range(p))
    else:
        ridge = problem.lambda_ridge / 2 * sum(b**2 for b in model.beta.values())
    bbar = 0.0
    if problem.lambda_bbar:
        model.mean = pyo.Var(model.features, doc="mean[j]: beta averaged over the tasks (Bbar term)")
        model.mean_def = pyo.Constraint(model.features, rule=lambda m, j: problem.n_tasks * m.mean[j]
                                        == sum(m.beta[k, j] for k in m.tasks),
                                        doc="mean_def[j]: K mean[j] == sum_k beta[k, j]")
        bbar = problem.lambda_bbar / 2 * sum((model.beta[k, j] - model.mean[j]) ** 2
                                             for k in model.tasks for j in model.features)
    model.obj = pyo.Objective(expr=loss + ridge + bbar + model.zbar_cost,
                              doc=f"F ({problem.variant}), every term written out")
    # ``dual_bound_margin``: every column counts; finite bounds are M (beta), 1 (z), s
    # (cardinality), y (residual rows) and, for the rows SCIP derives from the objective, its
    # value at zero, F(0) = sum ||y_k||^2 / (2 n_k) (the perspective rows are homogeneous cones).
    model.n_columns = model.nvariables()
    model.largest_bound = max(big_m, _row_bound(problem), max(float(np.max(np.abs(y_k))) for y_k in y),
                              sum(y_k @ y_k / (2 * len(y_k)) for y_k in y))
    # ``perspective_slack``: the weight of t in the objective over the <= s rows per task at z = 1.
    model.perspective_weight = float(sum(
        (problem.lambda_ridge + mu[k]) / 2 * min(problem.s, int(problem.allowed[k].sum()))
        for k in range(K))) if perspective and (problem.lambda_ridge > 0 or shifted) else 0.0
    return model


def _until(deadline: Deadline | None, rule):
    """The constraint rule ``rule``, skipping every row once ``deadline`` has passed."""
    if deadline is None:
        return rule
    return lambda m, *index: pyo.Constraint.Skip if deadline.expired() else rule(m, *index)


def _shifted_factor(X: np.ndarray, mu: float, allowed: np.ndarray) -> np.ndarray:
    """F with F'F = X_A'X_A / n - mu I on the allowed columns A and zero columns elsewhere (PSD
    because mu <= lambda_min over A): rows sqrt(w_i - mu) v_i'."""
    X = X[:, allowed]
    eigenvalues, vectors = np.linalg.eigh(X.T @ X / len(X))
    factor = np.zeros((len(eigenvalues), len(allowed)))
    factor[:, allowed] = np.sqrt(np.maximum(eigenvalues - mu, 0.0))[:, None] * vectors.T
    return factor


def coefficient_bound(problem: SparseProblem, upper_bound: float) -> float | None:
    """A valid |beta_jk| bound at any solution with F <= upper_bound, or None if none is proven.

    Two arguments, the smaller wins: (lambda_ridge/2) beta_jk^2 <= F gives
    sqrt(2 UB / lambda_ridge); and the loss of task k is <= F, so
    ||X_k beta_k|| <= ||y_k|| + sqrt(2 n_k UB), while ||X_k beta_k||^2 >=
    n_k mu_k ||beta_k||^2 (mu = ``problem.curvature``).  No optimal solution
    is cut off.
    """
    bounds = [np.sqrt(2 * upper_bound / problem.lambda_ridge)] if problem.lambda_ridge > 0 else []
    if np.all(problem.curvature > 0):
        bounds.append(max((np.linalg.norm(y) + np.sqrt(2 * len(y) * upper_bound)) / np.sqrt(len(y) * mu)
                          for y, mu in zip(problem.ys, problem.curvature)))
    return float(min(bounds)) if bounds else None
