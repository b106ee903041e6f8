"""Single-tree outer approximation on SCIP: one branch-and-bound, cuts added by a constraint handler.

The master is ``oa.initial_master`` (the same Pyomo model the multi-tree loop
solves), handed to SCIP by the SCIP backend (``ScipBackend.native_model``, options through
``ScipBackend.set_options``).  A constraint handler owns the
constraint "eta_t >= c_t(z) for every part t" and

* separates at fractional LP points: the perspective cut at the minimizer of
  the (strengthened) relaxation there, if it cuts the point off;
* enforces at integral points: refits the support (an upper bound, kept as
  the incumbent) and adds the cut there, which is tight, so SCIP can only
  accept a point whose eta equals the true continuous part;
* locks: eta may not be rounded down, z not moved either way.

Every cut is valid on all of [0, 1]^(K x p), so SCIP's dual bound is a lower
bound on min F.  The incumbent enters as a MIP start.  The log (``solvers.progress``) gets a
row from an event handler as SCIP goes (``ScipBackend``'s watcher), with SCIP's dual bound
lowered by the margin and the handler's refitted incumbent.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._lazy import pyo
from ...errors import SolverError
from ...formulations.sparse import SparseProblem, zbar_penalty
from ...formulations.sparse_models import Cut, dual_bound_margin, perspective_cut
from ...result import Status, relative_gap
from ..backends import ScipBackend, get_backend, native_streams, note_interrupt
from ..backends.base import ticking
from ..backends.scip import event_watcher, optimize_stoppably
from ...deadline import Deadline
from ..method import SolverRun
from .oa import FRACTIONAL_SUPPORT, fitted_options, oa_start
from ..options import SolveOptions
from ..progress import Progress

#: A cut is added when it exceeds eta by more than this, relative to max(1, |cut|).
CUT_TOLERANCE = 1e-9
#: SCIP's feasibility tolerance for this model, so that such cuts are not ignored as satisfied.
FEASTOL = 1e-10


def solve_oa_single_tree(problem: SparseProblem, options: SolveOptions,
                         incumbent: np.ndarray, *, deadline: Deadline,
                         progress: Progress | None = None) -> SolverRun:
    """Outer approximation as one SCIP branch-and-bound from ``incumbent`` (e.g. the BCD solution).

    ``deadline`` (the fit's, ``mtl_opt.deadline``) bounds the whole call: SCIP gets
    what is left after the master is built, and is not started when nothing is.  ``progress``
    (default: a new one) keeps the log.
    """
    from pyscipopt import SCIP_PARAMSETTING

    backend = get_backend("scip")
    backend.check("milp")
    progress = progress or Progress(options.verbose)
    start = oa_start(problem, incumbent, backend, options, deadline)
    if isinstance(start, SolverRun):
        return start
    options, user_options, best, best_z, master = start
    scip, z, eta, w, epigraph = _native_master(master, problem, backend)
    handler = _CutHandler(problem, z, eta, w, epigraph, master)
    scip.includeConshdlr(handler, "sparse_oa", "outer-approximation cuts of the continuous part",
                         sepapriority=1, enfopriority=-1, chckpriority=-1, sepafreq=1, propfreq=-1,
                         eagerfreq=-1, maxprerounds=0, needscons=True)
    scip.addPyCons(scip.createCons(handler, "continuous_part", propagate=False))
    options = fitted_options(backend, options, user_options, master, problem.objective(best, best_z)).with_updates(
        solver_options={"numerics/feastol": FEASTOL, **user_options})
    backend.set_options(scip, options)
    scip.setPresolve(SCIP_PARAMSETTING.OFF)  # presolve would remove z columns the cuts need
    handler.offer(best, best_z)
    start_accepted = handler.add_start()
    margin = functools.partial(dual_bound_margin, handler, backend.dual_tolerance(options))
    progress.update(handler.upper, None, 0, force=True)
    def seen(incumbent, bound, nodes):   # SCIP's incumbent is the handler's, refitted
        progress.offer(handler.upper, None if bound is None else bound - margin(), nodes)
    scip.includeEventhdlr(event_watcher()(seen), "mtl_opt_progress", "mtl_opt's live log (solvers.progress)")
    started = deadline.remaining() > 0
    try:
        if started:
            # SoPlex writes to std::cerr itself; SCIP runs without the GIL, so ``ticking`` beats
            with native_streams(backend.native_log(options)), ticking(progress.heartbeat):
                _optimize(scip, handler, options, deadline, margin)
    except Exception as exc:
        raise SolverError(f"SCIP failed in single-tree outer approximation: {exc}") from exc
    lower = _lower_bound(scip, margin()) if started else None
    upper = handler.upper
    note_interrupt(scip.getStatus())
    # SCIP's gap, on its own tolerances, is not ours: final_status measures ours
    stop = backend.status_of(scip.getStatus()) if started else Status.TIME_LIMIT
    progress.update(upper, lower, scip.getNNodes(), force=True, cuts=handler.n_cuts,
                    master_status=scip.getStatus())
    native = {"solver": "SCIP single-tree", "solver_version": backend.version(),
              "master_status": scip.getStatus(), "nodes": scip.getNNodes(), "cuts": handler.n_cuts,
              "start_accepted": start_accepted}
    if lower is None:
        native["bound"] = f"none: SCIP stopped ({scip.getStatus()}) before a dual bound"
    return SolverRun(handler.best, upper, lower, stop, progress.rows, native, handler.best_z)


def _lower_bound(scip, margin: float) -> float | None:
    """SCIP's dual bound lowered by ``margin`` (``dual_bound_margin``), or None without one."""
    bound = scip.getDualbound()
    return float(bound) - margin if np.isfinite(bound) and abs(bound) < 1e20 else None


def _optimize(scip, handler: "_CutHandler", options: SolveOptions, deadline: Deadline,
              margin) -> None:
    """Run SCIP until ``deadline``, resuming it while its gap limit stops it short of ours.

    SCIP stops when its own gap meets ``limits/gap``, but our bound is its dual bound less
    ``margin()``, which grows as cuts are added: on sMTL l0l2 seed 0 SCIP stopped at 1e-4 with
    our gap 1.1e-4.  Then SCIP resumes (it keeps its tree) with ``limits/gap`` 0 and
    ``limits/absgap`` at half the gap ours still allows, or at 0 (to SCIP's optimum) when that
    is no smaller than the last one, so that the resumes end.  Ours is met at ``rel_gap`` or
    ``abs_gap``, as in bnb.  A user's own ``limits/gap`` or ``limits/absgap`` in
    ``solver_options`` is their stopping rule: no resume.
    """
    own_rule = {"limits/gap", "limits/absgap"} & set(options.solver_options)
    last = np.inf
    while (left := deadline.remaining()) > 0:
        if left < np.inf:   # SCIP's clock runs on across resumes
            scip.setParam("limits/time", scip.getSolvingTime() + left)
        optimize_stoppably(scip)   # callbacks take the GIL back; between them, ``ticking`` beats
        lower = _lower_bound(scip, margin())
        if (scip.getStatus() != "gaplimit" or own_rule or lower is None
                or relative_gap(handler.upper, lower) <= options.rel_gap
                or handler.upper - lower <= options.abs_gap):
            return
        wanted = max(0.0, (options.rel_gap * abs(handler.upper) - margin()) / 2)
        last = wanted if wanted < last else 0.0
        scip.setParam("limits/gap", 0.0)
        scip.setParam("limits/absgap", last)


def _native_master(master: pyo.ConcreteModel, problem: SparseProblem, backend: ScipBackend):
    """The Pyomo master as a pyscipopt Model, with its z, eta and w (the Zbar term's
    |z_kj - z_lj|, keyed (j, k, l)) variables, and the column Pyomo's translation adds for the
    objective (an epigraph variable, above eta's sum plus the Zbar cost) or None."""
    scip, variables = backend.native_model(master)
    K, p = problem.n_tasks, problem.n_features
    z = [[variables[master.z[k, j]] for j in range(p)] for k in range(K)]
    eta = [variables[master.eta[t]] for t in master.parts]
    w = {index: variables[var] for index, var in master.w.items()}
    mapped = {var.name for var in variables.values()}
    epigraph = next((var for var in scip.getVars() if var.name not in mapped), None)
    return scip, z, eta, w, epigraph


try:
    from pyscipopt import SCIP_RESULT, Conshdlr
except ImportError:  # the backend check reports SCIP missing before this is used
    Conshdlr = object


class _CutHandler(Conshdlr):
    """Adds perspective cuts at LP points and keeps the best refitted support as the incumbent."""

    def __init__(self, problem: SparseProblem, z, eta, w, epigraph, master: pyo.ConcreteModel):
        self.problem, self.z, self.eta, self.w, self.epigraph = problem, z, eta, w, epigraph
        self.best, self.best_z, self.upper, self.n_cuts = None, None, np.inf, 0
        # the master's columns and bounds, with this handler's cuts (``dual_bound_margin``)
        self.n_columns, self.largest_bound = master.n_columns, master.largest_bound

    # --- helpers -------------------------------------------------------------

    def offer(self, B: np.ndarray, z: np.ndarray) -> None:
        """Keep (B, z) if it is feasible (SCIP also checks points that break other rows) and better."""
        if not self.problem.feasible(B, z):
            return
        value = self.problem.objective(B, z)
        if value < self.upper:
            self.best, self.best_z, self.upper = B, self.problem.indicators(B, z), value

    def add_start(self) -> bool:
        """The incumbent as a complete MIP start (every master column: z, eta at the exact
        continuous parts of z, which every cut is below, and w = |z_kj - z_lj|), checked by SCIP
        (``checkSol``, our cut rows included) before it is stored; whether SCIP accepted it."""
        support = self.best_z
        sol = self.model.createSol()
        for k, row in enumerate(self.z):
            for j, var in enumerate(row):
                self.model.setSolVal(sol, var, float(support[k, j]))
        values = perspective_cut(self.problem, self.problem.refit(support)).parts(support.astype(float))
        values = values + CUT_TOLERANCE * np.maximum(1.0, np.abs(values))
        for var, value in zip(self.eta, values):
            self.model.setSolVal(sol, var, float(value))
        for (j, k, l), var in self.w.items():
            self.model.setSolVal(sol, var, float(support[k, j] != support[l, j]))
        if self.epigraph is not None:
            zbar = 0.5 * self.problem.lambda_zbar * zbar_penalty(support)
            self.model.setSolVal(sol, self.epigraph, float(np.sum(values) + zbar) * (1 + CUT_TOLERANCE))
        if not self.model.checkSol(sol, printreason=False, completely=True):
            self.model.freeSol(sol)
            return False
        return bool(self.model.addSol(sol))

    def _point(self, sol=None) -> np.ndarray:
        return np.clip([[self.model.getSolVal(sol, var) for var in row] for row in self.z], 0.0, 1.0)

    def _cut(self, z: np.ndarray, integral: bool) -> Cut:
        if integral:
            B = self.problem.refit(z > 0.5)
            self.offer(B, z > 0.5)
        else:
            support = z > FRACTIONAL_SUPPORT
            B = self.problem.refit(support, np.where(support, z, 1.0))
        return perspective_cut(self.problem, B)

    def _violated(self, cut: Cut, z: np.ndarray, sol=None) -> np.ndarray:
        values = cut.parts(z)
        eta = np.array([self.model.getSolVal(sol, var) for var in self.eta])
        return values - eta > CUT_TOLERANCE * np.maximum(1.0, np.abs(values))

    def _add(self, cut: Cut, violated: np.ndarray) -> None:
        K, p = cut.gradient.shape
        cut = cut.for_solver()
        for t in np.flatnonzero(violated):
            tasks = range(K) if len(cut.constant) == 1 else [t]
            expr = sum(float(cut.gradient[k, j]) * self.z[k][j] for k in tasks for j in range(p) if cut.gradient[k, j])
            self.model.addCons(self.eta[t] >= float(cut.constant[t]) + expr,
                               name=f"oa_cut_{self.n_cuts}", removable=True)
            self.n_cuts += 1
            self.largest_bound = max(self.largest_bound, abs(float(cut.constant[t])))

    def _separate(self, integral: bool, sol=None) -> tuple[Cut, np.ndarray]:
        """The cut at the point ``sol`` (the LP solution when None) and which parts it violates."""
        z = self._point(sol)
        if integral:
            z = np.round(z)
        cut = self._cut(z, integral)
        return cut, self._violated(cut, z, sol)

    def _enforce(self, integral: bool) -> dict:
        cut, violated = self._separate(integral)
        if not violated.any():
            return {"result": SCIP_RESULT.FEASIBLE}
        self._add(cut, violated)
        return {"result": SCIP_RESULT.CONSADDED}

    # --- SCIP callbacks --------------------------------------------------------

    def conscheck(self, constraints, solution, checkintegrality, checklprows, printreason,
                  completely, **kwargs):
        z = np.round(self._point(solution)) > 0.5
        if not self.problem.feasible(np.zeros(z.shape), z):
            # SCIP's heuristics propose points breaking the cardinality rows (e.g. every z at 1):
            # infeasible whatever eta is, and refitting their support (6000 columns at p=1500)
            # would hold SCIP for seconds past its time limit.
            return {"result": SCIP_RESULT.INFEASIBLE}
        _, violated = self._separate(True, solution)
        return {"result": SCIP_RESULT.INFEASIBLE if violated.any() else SCIP_RESULT.FEASIBLE}

    def consenfolp(self, constraints, nusefulconss, solinfeasible):
        return self._enforce(integral=True)

    def consenfops(self, constraints, nusefulconss, solinfeasible, objinfeasible):
        return self._enforce(integral=True)

    def conssepalp(self, constraints, nusefulconss):
        result = self._enforce(integral=False)
        return {"result": SCIP_RESULT.CONSADDED if result["result"] == SCIP_RESULT.CONSADDED
                else SCIP_RESULT.DIDNOTFIND}

    def conslock(self, constraint, locktype, nlockspos, nlocksneg):
        for var in self.eta:
            self.model.addVarLocks(var, nlockspos, nlocksneg)
        for row in self.z:
            for var in row:
                self.model.addVarLocks(var, nlockspos + nlocksneg, nlockspos + nlocksneg)
