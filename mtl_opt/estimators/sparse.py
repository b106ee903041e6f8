"""SparseMTL: sparse multi-task best subset with Zbar / Bbar / ridge penalties."""

from __future__ import annotations

import numpy as np

from .. import __version__
from ..data import MultiTaskData
from ..errors import InvalidParameterError
from ..formulations.sparse import VARIANTS, SparseProblem
from ..identifiability import unidentified_mask
from ..result import FitResult
from ..result import relative_gap
from ..solvers.backends import BACKENDS, pick_backend
from ..solvers.bcd import fit_bcd
from ..solvers.bnb import solve_bnb
from ..deadline import Deadline
from ..solvers.oa import ExactSolve, initial_master, miqp_model, solve_miqp, solve_oa
from ..solvers.oa_scip import solve_oa_single_tree
from ..solvers.options import SolveOptions
from .base import BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf

#: Share of ``time_limit`` the bcd warm start may use before an exact solver.
BCD_SHARE = 0.5


class SparseMTL(MTLEstimator):
    """Sparse models per task that borrow strength through shared supports or values.

    Minimizes (DESIGN.md, ``mtl_opt.formulations.sparse``)::

        F = sum_k 1/(2 n_k) ||y_k - b_k - X_k beta_k||^2 + (lambda_ridge/2) sum_k ||beta_k||^2
            + (lambda_bbar/2) sum_k ||beta_k - beta_bar||^2 + (lambda_zbar/2) sum_k ||z_k - z_bar||^2
        s.t. ||beta_k||_0 <= s  (one shared support for the cs_* variants)

    A feature constant within task k (or all zero there, without intercept) says nothing about
    beta_jk: the intercept absorbs it.  Such a pair is left out of task k's model on every
    solver, beta_jk = 0 by construction, and the problem certified is F with those pairs removed
    (``SparseProblem.excluded``); ``result_.unidentified`` lists them.  The other tasks keep the
    feature: a shared support (cs_*) is a set of <= s columns that each task uses where it can,
    and the Bbar mean beta_bar averages over all K tasks, counting the left-out coefficient as 0.

    Parameters
    ----------
    variant : {"l0l2", "cs_l2", "cs_bbar", "zbar_l2", "bbar", "zbar_bbar"}, default="zbar_l2"
    s : int, default=10
        Maximum support size per task.
    lambda_ridge, lambda_bbar, lambda_zbar : float, default=0.0
        Penalty weights; a variant without a term requires its weight to be 0.
    solver : {"bcd", "oa", "miqp", "bnb"}, default="bcd"
        ``bcd``: block coordinate descent + local search (``mtl_opt.solvers.bcd``),
        no bound.  ``oa``: outer approximation started from the bcd answer,
        multi-tree with a MILP master re-solved between cuts on HiGHS (the
        default), single-tree (one branch-and-bound, cuts from a constraint
        handler) on SCIP; ``miqp``: the Big-M MIQP on SCIP, M proven from the
        bcd answer.  Both report a proven lower bound; they need lambda_ridge > 0
        unless every task has more rows than identifiable features and a full-rank
        design on them (the cuts and the Big-M then borrow the loss's own curvature);
        otherwise they refuse, naming the task.  ``bnb``: our branch and
        bound over supports, each node bounded by its perspective relaxation
        solved in the dual (``mtl_opt.solvers.bnb``); for n_k < p with a small
        ridge, where the other two stall; needs lambda_ridge > 0 and no Zbar or
        Bbar term, and no backend.
    standardize : bool, default=True
        Fit on features standardized per task; coefficients are reported on
        the original scale, the objective on the standardized one (where it is minimized).
        A constant feature is centred, not scaled (and left out of that task, above).
    fit_intercept : bool, default=True
    max_iter : int, default=1000
        Maximum IHT sweeps.
    local_search : bool, default=True
    backend : a name in ``mtl_opt.solvers.backends.BACKENDS`` ("highs", "scip", ...) or None
        MILP backend of ``oa`` (default HiGHS; on SCIP single-tree); ``miqp`` runs on SCIP by default.
    solve_options : SolveOptions or None
        time_limit (the whole fit: the bcd warm start gets at most half of it
        before an exact solver), rel_gap (tolerance for status ``optimal``),
        verbose (prints the OA iteration table), threads...
    seed : int or None
        Accepted for API symmetry; the BCD heuristic is deterministic.

    Attributes
    ----------
    coef_ : ndarray (K, p), intercept_ : ndarray (K,), support_ : ndarray (K, p) bool
    result_ : FitResult
        status ``heuristic`` for bcd (no bound); for oa / miqp ``optimal`` only
        when the proven relative gap is <= rel_gap, else ``gap_limit`` or
        ``time_limit`` with the bound reached: at least the trivial F >= 0
        when the limit passes before the solver proves a positive bound.
    n_iter_ : int
        IHT sweeps run.
    """

    method = "sparse_mtl"
    supports_warm_start = True
    param_constraints = {
        "variant": [OneOf(tuple(VARIANTS))],
        "s": [Interval(1, None, integer=True)],
        "lambda_ridge": [Interval(0.0, None)],
        "lambda_bbar": [Interval(0.0, None)],
        "lambda_zbar": [Interval(0.0, None)],
        "solver": [OneOf(("bcd", "oa", "miqp", "bnb"))],
        "backend": [OneOf((*BACKENDS, None))],
        "solve_options": [OneOf((None,)), InstanceOf((SolveOptions,), "a SolveOptions")],
        "standardize": [BOOLEAN],
        "fit_intercept": [BOOLEAN],
        "max_iter": [Interval(1, None, integer=True)],
        "local_search": [BOOLEAN],
        "seed": [OneOf((None,)), Interval(0, None, integer=True)],
    }

    def __init__(self, *, variant="zbar_l2", s=10, lambda_ridge=0.0, lambda_bbar=0.0,
                 lambda_zbar=0.0, solver="bcd", standardize=True, fit_intercept=True,
                 max_iter=1000, local_search=True, backend=None, solve_options=None, seed=None):
        self.variant = variant
        self.s = s
        self.lambda_ridge = lambda_ridge
        self.lambda_bbar = lambda_bbar
        self.lambda_zbar = lambda_zbar
        self.solver = solver
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.local_search = local_search
        self.backend = backend
        self.solve_options = solve_options
        self.seed = seed

    def _check_fit(self, data: MultiTaskData) -> None:
        if self.solver in ("bcd", "bnb") and self.backend is not None:
            raise InvalidParameterError(
                f"backend={self.backend!r} is only used by solver='oa' or 'miqp'; "
                f"solver={self.solver!r} runs in mtl_opt itself.")
        problem = self._problem(data)[0]  # the variant's terms, s <= p
        if self.solver == "bnb" and (self.lambda_zbar or self.lambda_bbar or not self.lambda_ridge > 0):
            raise InvalidParameterError(
                "solver='bnb' needs lambda_ridge > 0 and no Zbar or Bbar term (lambda_zbar = "
                "lambda_bbar = 0); use solver='oa', which models both.")
        if self.solver in ("oa", "miqp"):
            pick_backend("miqp" if self.solver == "miqp" else "milp", self.backend)
            problem.exact_curvature(data.task_names)   # refuses curvature too small for a safe bound

    def _fit(self, data: MultiTaskData, init: FitResult | None = None) -> FitResult:
        options = self.solve_options or SolveOptions()
        deadline = Deadline(options.time_limit)
        problem, scaler, data = self._problem(data)
        start = None if init is None else init.extra.get("coef_fitted")
        if start is not None and np.shape(start) != (data.n_tasks, data.n_features):
            raise InvalidParameterError(
                f"init has coefficients of shape {np.shape(start)}; this data needs "
                f"{(data.n_tasks, data.n_features)}.")
        B, log, n_iter = fit_bcd(problem, start, max_iter=self.max_iter, local_search=self.local_search,
                                 deadline=deadline if self.solver == "bcd" else deadline.share(BCD_SHARE))
        self.n_iter_ = n_iter
        if self.solver == "bcd":
            return self._result(problem, scaler, data, B, None, "heuristic", "bcd (mtl_opt)",
                                __version__, log, {})
        return self._certified(problem, scaler, data, B, self.solver, self.backend, options, deadline)

    def certify(self, data: MultiTaskData, *, solver: str = "oa", backend: str | None = None,
                time_limit: float | None = None) -> FitResult:
        """Prove how good the fitted estimate is: run an exact solver from it, update ``result_``.

        The exact solver starts from the current estimate, so the objective can
        only improve; afterwards ``result_.lower_bound`` is a proven bound.  ``solver`` and
        ``backend`` are checked as ``fit`` would check them, before any work.
        """
        self._check_is_fitted()
        if solver == "bcd":
            raise InvalidParameterError("certify needs an exact solver: 'oa', 'miqp' or 'bnb'; got 'bcd'.")
        type(self)(**{**self.get_params(), "solver": solver, "backend": backend}).check(data)
        options = (self.solve_options or SolveOptions()).with_updates(time_limit=time_limit)
        deadline = Deadline(options.time_limit)
        problem, scaler, std_data = self._problem(data)
        result = self._certified(problem, scaler, std_data, self.result_.extra["coef_fitted"],
                                 solver, backend, options, deadline)
        result.params = self.result_.params
        self.result_ = result
        self.coef_, self.intercept_ = result.coef, result.intercept
        return result

    def exact_model(self, data: MultiTaskData, kind: str = "miqp"):
        """The Pyomo model an exact solver would start from, for inspection, extension or export.

        ``kind="miqp"``: the Big-M MIQP (M from the bcd answer); ``"master"``:
        the outer-approximation master with its initial cuts.  Both are on the
        standardized data when ``standardize`` is set.
        """
        self._check_params()
        if kind not in ("miqp", "master"):
            raise InvalidParameterError(f"kind must be 'miqp' or 'master'; got {kind!r}.")
        problem, _, _ = self._problem(data)
        incumbent = fit_bcd(problem, max_iter=self.max_iter, local_search=self.local_search)[0]
        return miqp_model(problem, incumbent) if kind == "miqp" else initial_master(problem, incumbent)

    def _problem(self, data):
        """The problem F on (standardized) ``data``, leaving out the pairs ``data`` cannot identify."""
        scaler = None
        excluded = unidentified_mask(data.Xs, self.fit_intercept, collinear=False)
        if self.standardize:
            data, scaler = data.standardize(how="task", center=self.fit_intercept, scale=True)
        problem = SparseProblem.from_data(
            data, variant=self.variant, s=self.s, lambda_ridge=self.lambda_ridge,
            lambda_bbar=self.lambda_bbar, lambda_zbar=self.lambda_zbar,
            fit_intercept=self.fit_intercept, excluded=excluded)
        return problem, scaler, data

    def _certified(self, problem, scaler, data, B, solver, backend_name, options, deadline):
        """Run OA, the MIQP or bnb from the incumbent B until ``deadline`` and wrap the outcome.

        The solver sees the normalized twin ``problem.scaled(root)`` (``normalizing_root``),
        whose objective at the incumbent is between 1/2 and 2: its tolerances are then
        relative to the objective, whatever the units of y.  This is also the one place of
        the fallback bound: every term of F is a square or a non-negative penalty, so F >= 0
        stands in for a bound the solver did not reach (none, or a negative one) before it
        stopped.
        """
        root = normalizing_root(problem.objective(B))
        if root is None:   # F >= 0 everywhere, so an incumbent with F = 0 is optimal
            exact = ExactSolve(B, 0.0, 0.0, "optimal", [], {"solver": "none: F = 0 at the incumbent",
                                                            "solver_version": __version__})
        else:
            exact = _exact_solve(problem.scaled(root), B / root, solver, backend_name, options,
                                 deadline).unscaled(root)
        status, lower = exact.status, exact.lower_bound
        if status == "optimal" and not relative_gap(exact.objective, lower) <= options.rel_gap:
            status = "gap_limit"
        bound = {"miqp": "Big-M MIQP dual bound", "bnb": "smallest open node's perspective dual bound"}.get(
            solver, "outer-approximation master dual bound")
        if root is None:
            bound = "F >= 0, and F = 0 at the incumbent"
        elif lower is None or lower <= 0:
            lower, bound = 0.0, f"trivial bound (F >= 0; stopped before the {bound} rose above 0)"
        return self._result(problem, scaler, data, exact.B, lower, status,
                            f"{solver} ({exact.native['solver']})", exact.native["solver_version"],
                            exact.log, exact.native, bound)

    def _result(self, problem, scaler, data, B, lower, status, solver, version, log, native,
                bound_source=None) -> FitResult:
        intercept = problem.intercepts(B)
        coef, intercept_orig = (scaler.coef_to_original(B, intercept) if scaler
                                else (B.copy(), intercept))
        self.support_ = coef != 0
        return FitResult(
            method=self.method, coef=coef, intercept=intercept_orig,
            objective=problem.objective(B), lower_bound=lower, status=status,
            objective_name=f"F ({self.variant}" + (", standardized data)" if scaler else ")"),
            bound_source=bound_source, solver=solver, solver_version=version, log=log,
            native=native, task_names=list(data.task_names), feature_names=list(data.feature_names),
            extra={"coef_fitted": B, "n_iter": self.n_iter_})


def normalizing_root(objective: float) -> float | None:
    """The power of 2 nearest sqrt(objective) (None when the objective is 0).

    Dividing y by it (``SparseProblem.scaled``) divides F by its square, a power of 4 within a
    factor 2 of F: exact in floating point, and the twin's objective is near 1.
    """
    if not objective > 0:
        return None
    mantissa, exponent = np.frexp(objective)   # objective = mantissa 2^exponent, mantissa in [1/2, 1)
    return float(np.ldexp(1.0, int(exponent) // 2))


def _exact_solve(problem, B, solver, backend_name, options, deadline):
    """The exact solver ``solver`` (on ``backend_name``) run from the incumbent B until ``deadline``."""
    if solver == "miqp":
        return solve_miqp(problem, pick_backend("miqp", backend_name), options, B, deadline=deadline)
    if solver == "bnb":
        return solve_bnb(problem, options, B, deadline=deadline)
    if pick_backend("milp", backend_name).name == "scip":
        return solve_oa_single_tree(problem, options, B, deadline=deadline)
    return solve_oa(problem, pick_backend("milp", backend_name), options, B, deadline=deadline)
