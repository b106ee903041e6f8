"""Exact solvers for the sparse multi-task objective: outer approximation and the Big-M MIQP.

Outer approximation (multi-tree, on any MILP backend): the master MILP of
``formulations.sparse_models.build_master`` holds the supports, the Zbar term
exactly and epigraph variables eta; every support z the master proposes is
refitted exactly (an upper bound F(z)) and contributes a perspective cut
eta >= c(z0) + g.(z - z0), valid on all of [0, 1]^(K x p).  The master's
dual bound is a lower bound on min F, so the loop stops with a proven gap.  Its log
(``solvers.progress``) has a row per iteration and, inside each master solve, the backend's
heartbeat with the master's dual bound.

The MIQP (SCIP) solves ``build_miqp`` directly, with M = sqrt(2 UB /
lambda_ridge) from the incumbent, which no solution with F <= UB can exceed.

Side constraints (``formulations.constraints``): their rows on z are part of the master and the
MIQP, so both search the allowed supports only; the MIQP also bounds beta.  Every method starts
from a feasible point (``feasible_start``: UB and M come from one), and keeps a new point only
when it is feasible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..._lazy import pyo
from ...errors import InvalidParameterError, SolverError
from ...formulations.sparse import SparseProblem
from ...formulations.sparse_models import (Cut, add_cut, build_feasibility, build_master, build_miqp,
                                          coefficient_bound, dual_bound_margin, fitting_tolerance,
                                          master_support, miqp_box, perspective_cut, perspective_slack)
from ...result import Status, relative_gap
from ..backends import Backend
from .bcd import best_swap, swapped_support
from ..method import SolverRun
from ...deadline import Deadline
from ..options import SolveOptions
from ..progress import Progress

#: Root cut rounds at most; they stop once ROOT_PATIENCE rounds raised the LP bound by
#: less than ROOT_STALL (relative) in all.
ROOT_ROUNDS, ROOT_PATIENCE, ROOT_STALL = 300, 25, 1e-3
#: z values above this count as in the support of a fractional point.
FRACTIONAL_SUPPORT = 1e-6
#: ``floor_cut`` refits every allowed pair at once: only while that system has at most this
#: many unknowns (a dense solve of 1000 takes ~0.1 s).
FLOOR_UNKNOWNS = 1000
#: Dual-feasibility tolerance of every exact solve: its dual bound is lowered by this times the
#: model's bound mass (``formulations.sparse_models.dual_bound_margin``), which on the normalized
#: problem (objective ~1) of a small model stays a small fraction of a 1e-6 gap; the defaults
#: (1e-7) would not.  The OA masters go tighter where they are too large for it
#: (``fitting_tolerance``).
DUAL_TOLERANCE = 1e-9
#: Native options of the exact solves per backend, besides DUAL_TOLERANCE on every backend (the
#: user's solver_options still win).  HiGHS's default mip_feasibility_tolerance (1e-6) leaves its
#: dual bound up to 1e-6 below the master's optimum, more than a 1e-6 relative gap on the
#: normalized objective.
EXACT_OPTIONS = {"highs": {"mip_feasibility_tolerance": 1e-9}}
#: Native settings of the Big-M MIQP per backend (the user's solver_options still win): SCIP
#: without its NLP solver; Gurobi's cone relaxations (barrier) converged to 1e-9, not 1e-6: at 1e-6
#: its bound exceeded the enumerated optimum on 8 of the 30 tiny soundness instances, at 1e-9 on
#: 1 (by 5e-7 relative; ``checked_bound`` drops such a bound: prefer algorithm='oa_multi_tree' on Gurobi).
MIQP_SOLVER_OPTIONS = {"scip": {"nlp/disable": True}, "gurobi": {"BarQCPConvTol": 1e-9}}
#: (tightest, loosest) primal-feasibility tolerance of the MIQP's rows (``miqp_options``).
MIQP_FEASTOL = (1e-9, 1e-6)


def solve_oa(problem: SparseProblem, backend: Backend, options: SolveOptions,
             incumbent: np.ndarray, *, max_iter: int = 500, print_log: bool = False,
             deadline: Deadline, progress: Progress | None = None) -> SolverRun:
    """Multi-tree outer approximation from ``incumbent`` (e.g. the BCD solution).

    Initial cuts: at the incumbent's support, at the supports of its best
    single swaps, and ``floor_cut``.  Each iteration re-solves the master (to a
    tenth of ``rel_gap``), refits its support, and adds that support's cut.  The
    master stays loaded in one persistent solver (root LP rounds and MILP
    iterations only send the new cuts, and the LP rounds restart from the last
    basis), with the incumbent's support as a MIP start.  Stops ``converged``
    when the proven relative gap is <= ``rel_gap`` or the master repeats a
    support, else at ``time_limit`` or ``iteration_limit``.  ``deadline`` (the fit's)
    bounds the whole call.  ``progress`` (default: a new one, printed with
    ``print_log`` or ``options.verbose``) keeps the log; its ``nodes`` are the masters' nodes so far.
    """
    progress = progress or Progress(print_log or options.verbose)
    start = oa_start(problem, incumbent, backend, options, deadline)
    if isinstance(start, SolverRun):
        return start
    options, user_options, best, best_z, master = start
    if (floor := floor_cut(problem)) is not None:
        add_cut(master, floor)
    upper = problem.objective(best, best_z)
    progress.update(upper, None, 0, force=True)
    root = root_cuts(problem, master, backend, options, deadline=deadline, progress=progress,
                     floor=-np.inf if floor is None else float(np.sum(floor.constant)))
    lower, stop, seen, nodes = max(root, default=-np.inf), Status.ITERATION_LIMIT, set(), 0
    progress.update(upper, lower, 0, force=True, iteration=0, cuts=len(master.cuts),
                    master_status=f"root LP, {len(root)} rounds")
    for it in range(1, max_iter + 1):
        if deadline.expired():
            stop = Status.TIME_LIMIT
            break
        start_values = [(master.z[k, j], float(on)) for (k, j), on in np.ndenumerate(best_z)]
        master_options = fitted_options(backend, options, user_options, master, upper).with_updates(
            rel_gap=options.rel_gap / 10)
        margin = dual_bound_margin(master, backend.dual_tolerance(master_options))
        run = backend.solve(master, "milp", master_options, start=start_values, persistent=True,
                            deadline=deadline,
                            progress=progress.solver_callback(lambda bound: bound - margin, nodes))
        nodes += run.native.get("nodes", 0)
        if run.bound is not None:
            lower = max(lower, run.bound - margin)
        if not run.has_solution:
            stop = Status.TIME_LIMIT if run.status == Status.TIME_LIMIT else Status.ERROR
            break
        support = master_support(master, best.shape)
        B = problem.refit(support)
        value = problem.objective(B, support)
        if value < upper and problem.feasible(B, support):
            best, best_z, upper = B, problem.indicators(B, support), value
        progress.update(upper, lower, nodes, force=True, iteration=it, cuts=len(master.cuts),
                        master_status=run.native.get("status"))
        if relative_gap(upper, lower) <= options.rel_gap:
            stop = Status.CONVERGED
            break
        key = support.tobytes()
        if key in seen:  # the master repeats a support: its tolerance is the limit
            stop = run.status
            break
        seen.add(key)
        add_cut(master, perspective_cut(problem, B))
    progress.update(upper, lower, nodes, force=True)
    native = {"solver": backend.label, "solver_version": backend.version(), "nodes": nodes,
              "master_status": next(row["master_status"] for row in reversed(progress.rows)
                                    if "master_status" in row)}
    if not np.isfinite(lower):
        native["bound"] = f"none: stopped ({stop}) before the master had a dual bound"
    return SolverRun(best, upper, float(lower) if np.isfinite(lower) else None, stop, progress.rows,
                     native, best_z)


class OAStart(NamedTuple):
    """What both outer-approximation loops start from (``oa_start``)."""

    options: SolveOptions    # the fit's, with the exact tolerances (``exact_options``)
    user_options: Mapping    # the user's own solver_options, which stay above ours
    best: np.ndarray         # a feasible point (``feasible_start``) and its indicators
    best_z: np.ndarray
    master: pyo.ConcreteModel   # with its first cuts (``initial_master``)


def oa_start(problem: SparseProblem, incumbent: np.ndarray, backend: Backend,
             options: SolveOptions, deadline: Deadline) -> OAStart | SolverRun:
    """The start of multi-tree and single-tree OA alike, or the run to return when the side
    constraints leave no feasible point."""
    exact = exact_options(backend, options)
    start = feasible_start(problem, incumbent, backend, exact, deadline)
    if isinstance(start, SolverRun):
        return start
    return OAStart(exact, options.solver_options, *start,
                   initial_master(problem, incumbent, deadline))


def feasible_start(problem: SparseProblem, incumbent: np.ndarray, backend: Backend,
                   options: SolveOptions, deadline: Deadline
                   ) -> tuple[np.ndarray, np.ndarray] | SolverRun:
    """Where an exact method starts: a feasible point and its indicators
    (``SparseProblem.completed_point``; its objective is the first upper bound and the MIQP's
    Big-M level), or the run to return when the side constraints leave none.

    ``feasible_point`` of the incumbent; if the incumbent's support cannot be made feasible,
    the constrained refit of the support ``build_feasibility`` finds, whose MILP proves it when
    no support is allowed (a run stopped ``infeasible``).
    """
    B = feasible_point(problem, incumbent)
    if B is not None:
        return problem.completed_point(B)
    model = build_feasibility(problem)
    run = backend.solve(model, "milp", options, deadline=deadline)
    if run.has_solution and problem.feasible(B := problem.refit(master_support(model, incumbent.shape))):
        return problem.completed_point(B)
    if run.has_solution or run.status not in (Status.INFEASIBLE, Status.TIME_LIMIT):
        raise InvalidParameterError(
            f"no point satisfying the side constraints was found to start from ({run.solver}: "
            f"{run.status}); pass a feasible init, or loosen the constraints.")
    return SolverRun(incumbent, problem.objective(incumbent), None, run.status, [],
                     {"solver": backend.label, "solver_version": backend.version(),
                      "why": f"the side constraints leave no support ({run.solver}: {run.status})",
                      "bound": "none: no feasible point"})


def feasible_point(problem: SparseProblem, incumbent: np.ndarray) -> np.ndarray | None:
    """A feasible point from the incumbent, without a solve, or None.

    Unconstrained: the refit of its support.  Under side constraints the incumbent may break
    them: the better feasible one of the refit (in the boxes) of its support with the included
    pairs, and the incumbent itself.
    """
    if not problem.side.active:
        return problem.refit(incumbent != 0)
    feasible = [B for B in (problem.refit(problem.side.support(incumbent)), incumbent)
                if problem.feasible(B)]
    return min(feasible, key=problem.objective, default=None)


def exact_options(backend: Backend, options: SolveOptions) -> SolveOptions:
    """``options`` with DUAL_TOLERANCE and ``EXACT_OPTIONS`` for ``backend`` under the user's own
    solver_options."""
    return options.with_updates(solver_options={
        backend.DUAL_TOLERANCE[0]: DUAL_TOLERANCE, **EXACT_OPTIONS.get(backend.name, {}),
        **options.solver_options})


def fitted_options(backend: Backend, options: SolveOptions, user_options, master,
                   objective: float) -> SolveOptions:
    """``options`` (from ``exact_options``) with the dual tolerance fitted to ``master`` and the gap
    at ``objective`` (``fitting_tolerance`` of its ``dual_bound_margin``, down to the backend's
    floor), under the user's own ``user_options``."""
    tolerance = fitting_tolerance(dual_bound_margin(master, 1.0), options.rel_gap, objective,
                                  backend.dual_tolerance(options), backend.TIGHTEST_DUAL_TOLERANCE)
    return options.with_updates(solver_options={backend.DUAL_TOLERANCE[0]: tolerance, **user_options})


def initial_master(problem: SparseProblem, incumbent: np.ndarray,
                   deadline: Deadline | None = None) -> pyo.ConcreteModel:
    """The OA master with its first cuts: at the incumbent's support and at a few nearby ones
    (those found before ``deadline``)."""
    master = build_master(problem)
    for support in _nearby_supports(problem, problem.refit(incumbent != 0), deadline):
        add_cut(master, perspective_cut(problem, problem.refit(support)))
    return master


def floor_cut(problem: SparseProblem) -> Cut | None:
    """A cut without slopes: c(1), the continuous part with every allowed pair in the support.

    Every perspective cut has slopes <= 0, so its value at z = 1 bounds c from below on all of
    [0, 1]^(K x p); at the refit of every pair that value is c(1) itself, positive unless y is
    fitted at no cost.  Cuts at supports alone leave the master's bound at 0 when lambda_ridge
    + mu is small: their slopes -v^2 / (2 kappa) then outweigh F at every support but their own
    (a tiny bbar instance with n < p stayed at 0 for 12 iterations).  None when that refit
    would have more than ``FLOOR_UNKNOWNS`` unknowns.  In the root LP rounds it hides Kelley's
    progress below it, so ``root_cuts`` counts a stall only above it.
    """
    allowed = ~problem.excluded
    if allowed.sum() > FLOOR_UNKNOWNS:
        return None
    cut = perspective_cut(problem, problem.refit(allowed))
    return Cut(cut.parts(allowed.astype(float)), np.zeros_like(cut.gradient))


def root_cuts(problem: SparseProblem, master: pyo.ConcreteModel, backend: Backend,
              options: SolveOptions, max_rounds: int = ROOT_ROUNDS, *,
              deadline: Deadline, progress: Progress | None = None,
              floor: float = -np.inf) -> list[float]:
    """Kelley's loop on the master's LP relaxation: cuts at fractional supports.

    Each round solves the relaxation, takes the minimizer of the perspective
    relaxation at its fractional z and adds the cut there (valid everywhere,
    tight at that z), until a positive LP bound stalls or ``deadline`` passes.  Cuts only at integral points leave the
    bound near 0 on all but tiny instances; Kelley's loop is slow too (on
    K=3, p=30 it needs ~150 rounds), hence the patience rule, which counts only rounds that
    start above ``floor`` (the master's ``floor_cut`` level, below which the LP bound is flat
    while Kelley's cuts still make progress).  Returns the LP bounds, one per round, each lowered by ``dual_bound_margin`` (so a valid lower bound on min F);
    ``progress`` gets the best of them as it goes.
    """
    progress = progress or Progress()
    for var in master.z.values():
        var.domain = pyo.UnitInterval
    bounds = []
    try:
        for _ in range(max_rounds):
            if deadline.expired():
                break
            margin = dual_bound_margin(master, backend.dual_tolerance(options))
            run = backend.solve(master, "lp", options, persistent=True, deadline=deadline,
                                progress=progress.heartbeat)
            if not run.has_solution or run.objective is None:
                break
            bounds.append(run.objective - margin)
            progress.update(lower_bound=max(bounds))
            z = np.clip([[pyo.value(master.z[k, j]) for j in range(problem.n_features)]
                         for k in range(problem.n_tasks)], 0.0, 1.0)
            support = z > FRACTIONAL_SUPPORT
            add_cut(master, perspective_cut(problem, problem.refit(support, np.where(support, z, 1.0))))
            if (len(bounds) > ROOT_PATIENCE and bounds[-1] > 0 and bounds[-1 - ROOT_PATIENCE] > floor
                    and bounds[-1] - bounds[-1 - ROOT_PATIENCE] <= ROOT_STALL * bounds[-1]):
                break
    finally:
        for var in master.z.values():
            var.domain = pyo.Binary
    return bounds


def _nearby_supports(problem, B, deadline=None):
    """The incumbent's support and those of its best single swap chain (a few steps).

    At a local optimum the best swap is the least bad one, and the best swap
    back from there returns to the start: the chain stops at the first support
    it has seen (repeated cuts only slow the solver down).
    """
    supports, current = [B != 0], B
    for _ in range(3):
        if deadline is not None and deadline.expired():
            break
        move = best_swap(problem, current)
        if move is None:
            break
        current = problem.refit(swapped_support(current != 0, move))
        if any(np.array_equal(current != 0, seen) for seen in supports):
            break
        supports.append(current != 0)
    return supports


def solve_miqp(problem: SparseProblem, backend: Backend, options: SolveOptions,
               incumbent: np.ndarray, *, perspective: bool = True,
               deadline: Deadline, progress: Progress | None = None) -> SolverRun:
    """The Big-M MIQP on ``backend`` (SCIP), with M proven from the incumbent's objective.

    ``deadline`` (the fit's) bounds the build and the solve.
    ``progress`` (default: a new one) keeps the log: the backend's heartbeat with its dual bound
    during the solve, the incumbent the objective of the point held (the start until the end).
    """
    progress = progress or Progress(options.verbose)
    start = feasible_start(problem, incumbent, backend, exact_options(backend, options), deadline)
    if isinstance(start, SolverRun):
        return start
    best, best_z = start
    progress.update(problem.objective(best, best_z), None, 0, force=True)
    model = _boxed_miqp(problem, best, perspective, deadline, best_z)
    upper, big_m = model.big_m_level, model.big_m
    # SCIP measures its gap on its own primal value, which its feasibility tolerance on the
    # perspective rows lets sit below F (``perspective_slack``): ask for a tenth of our gap, on
    # rows as tight as that gap needs (tighter rows cost time, so only as tight as needed).  SCIP's NLP
    # (Ipopt) is off: the bounds come from its LP outer approximation anyway, and the Ipopt,
    # MUMPS and METIS bundled with pyscipopt 6.3 deadlock in free() on some of these models
    # (p=100, K=5, n_k=100: hung past a 30 s limit; MIQP_SOLVER_OPTIONS).
    scip_options = miqp_options(backend, options, model, upper)
    margin = dual_bound_margin(model, backend.dual_tolerance(scip_options))
    run = backend.solve(model, "miqp", scip_options, deadline=deadline,
                        progress=progress.solver_callback(lambda bound: bound - margin))
    bound = None if run.bound is None else run.bound - margin
    if run.has_solution:
        B, z = _decoded(problem, model)
        value = problem.objective(B, z)
        if value < upper and problem.feasible(B, z):
            best, best_z, upper = B, problem.indicators(B, z), value
    elif run.status not in (Status.TIME_LIMIT, Status.ITERATION_LIMIT):
        raise SolverError(f"{run.solver} found no solution of the sparse MIQP (status {run.status}).")
    stop = run.status if run.status in (Status.TIME_LIMIT, Status.ITERATION_LIMIT) else Status.CONVERGED
    progress.update(upper, bound, run.native["nodes"], force=True, big_m=big_m)
    native = {"solver": run.solver, "solver_version": run.solver_version, **run.native}
    if bound is None:
        native["bound"] = f"none: {run.solver} stopped ({run.status}) before a dual bound"
    return SolverRun(best, upper, bound, stop, progress.rows, native, best_z)


def miqp_options(backend: Backend, options: SolveOptions, model: pyo.ConcreteModel | None = None,
                 objective: float | None = None) -> SolveOptions:
    """``exact_options`` for a Big-M MIQP solve: a tenth of ``rel_gap``, rows as tight as that gap
    needs and ``MIQP_SOLVER_OPTIONS`` (the user's solver_options still win).

    The rows' tolerance is rel_gap / 100 within ``MIQP_FEASTOL``; for a ``model`` whose
    perspective rows would let the solver's objective sit more than half our gap at ``objective``
    below F (``perspective_slack``), tighter, to a tenth (``fitting_tolerance``).  The dual
    tolerance is not fitted here as it is for the OA masters: that would move it on most sMTL
    and grid rows, unmeasured (benchmarks/HISTORY.md, issue 22).
    """
    tightest, loosest = MIQP_FEASTOL
    feastol = min(loosest, max(tightest, options.rel_gap / 100))
    if model is not None and objective is not None:
        feastol = fitting_tolerance(perspective_slack(model, 1.0), options.rel_gap, objective, feastol, tightest)
    return exact_options(backend, options.with_updates(rel_gap=options.rel_gap / 10, solver_options={
        backend.PRIMAL_TOLERANCE[0]: feastol, **MIQP_SOLVER_OPTIONS.get(backend.name, {}),
        **options.solver_options}))


def _decoded(problem: SparseProblem, model: pyo.ConcreteModel) -> tuple[np.ndarray, np.ndarray]:
    """The solved MIQP's estimate and its support z: the refit of z, or with bounds on the
    coefficients, the better feasible one of that refit and the solver's coefficients (0 off z)
    clipped to the bounds, which its tolerances let them leave slightly."""
    support = master_support(model, (problem.n_tasks, problem.n_features))
    B = problem.refit(support)
    if not problem.side.bounded:
        return B, support
    beta = np.array([[pyo.value(model.beta[k, j]) for j in range(problem.n_features)]
                     for k in range(problem.n_tasks)])
    clipped = np.clip(np.where(support, beta, 0.0), problem.side.lower, problem.side.upper)
    candidates = [C for C in (B, clipped) if problem.feasible(C, support)] or [clipped]
    return min(candidates, key=lambda C: problem.objective(C, support)), support


def miqp_model(problem: SparseProblem, incumbent: np.ndarray, perspective: bool = True) -> pyo.ConcreteModel:
    """The Big-M MIQP with M = sqrt(2 F(incumbent) / lambda_ridge), valid for every solution at
    least as good (``feasible_point``: the incumbent must meet the side constraints; M is kept as
    ``model.big_m``)."""
    best = feasible_point(problem, incumbent)
    if best is None:
        raise InvalidParameterError(
            "the starting point breaks the side constraints, so its objective proves no Big-M; "
            "start from a feasible one (fit with algorithm='miqp' finds one itself).")
    return _boxed_miqp(problem, best, perspective)


def _boxed_miqp(problem: SparseProblem, best: np.ndarray, perspective: bool,
                deadline: Deadline | None = None, support: np.ndarray | None = None) -> pyo.ConcreteModel:
    """``build_miqp`` with the M proven for every solution at least as good as the feasible point
    (``best``, ``support``), kept as ``model.big_m`` and that level F(best, support) as
    ``model.big_m_level``."""
    level = problem.objective(best, support)
    big_m = _proven_big_m(problem, level)
    model = build_miqp(problem, big_m, perspective, deadline=deadline)
    model.big_m, model.big_m_level = big_m, level
    return model


def widen_miqp_box(model: pyo.ConcreteModel, problem: SparseProblem, level: float) -> None:
    """Rewrite the box of ``miqp_model``'s ``model`` (maybe edited) for every solution with
    F <= ``level``: its rows ``upper``, ``lower`` and the beta bounds at the old M, each clipped
    to the pair's side bounds as ``build_miqp`` clips them (a bound of the user's own stays)."""
    big_m = coefficient_bound(problem, level)
    (old_low, old_high), (low, high) = miqp_box(problem, model.big_m), miqp_box(problem, big_m)
    for (k, j), beta in model.beta.items():
        model.upper[k, j].set_value(beta <= float(high[k, j]) * model.z[k, j])
        model.lower[k, j].set_value(beta >= float(low[k, j]) * model.z[k, j])
        if beta.ub == old_high[k, j]:
            beta.setub(float(high[k, j]))
        if beta.lb == old_low[k, j]:
            beta.setlb(float(low[k, j]))
    model.big_m, model.big_m_level = big_m, level
    model.largest_bound = max(model.largest_bound, big_m)


def unboxed_miqp(model: pyo.ConcreteModel) -> pyo.ConcreteModel:
    """``miqp_model``'s ``model`` (maybe edited) relaxed for a feasibility check: without the box
    (the rows ``upper``, ``lower`` and beta's bounds at M) and the perspective rows, which are
    what tie beta to z, and with the objective sum z.  Every other row (the user's, the side
    constraints', the budgets) stays, so when this has no solution, neither has the model at
    any M."""
    for rows in ("upper", "lower", "perspective"):
        if model.component(rows) is not None:
            model.component(rows).deactivate()
    for beta in model.beta.values():
        if beta.ub == model.big_m:
            beta.setub(None)
        if beta.lb == -model.big_m:
            beta.setlb(None)
    for objective in model.component_data_objects(pyo.Objective, active=True):
        objective.deactivate()
    model.feasibility = pyo.Objective(expr=sum(model.z.values()))
    return model


def _proven_big_m(problem, upper):
    problem.exact_curvature()   # refuses an ill-conditioned instance, naming lambda_ridge
    big_m = coefficient_bound(problem, upper)
    if big_m is None:
        raise InvalidParameterError(
            "the MIQP needs lambda_ridge > 0 to derive a valid Big-M (|beta| <= sqrt(2 UB / "
            "lambda_ridge)); without a ridge term no bound on the coefficients is proven.")
    return big_m
