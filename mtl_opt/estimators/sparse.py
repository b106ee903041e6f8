"""SparseMTL: sparse multi-task best subset with Zbar / Bbar / ridge penalties."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import interrupts
from ..data import MultiTaskData
from ..errors import InvalidDataError, InvalidParameterError
from ..formulations.constraints import compile_constraints
from ..formulations.sparse import VARIANTS, SparseProblem
from ..result import FitResult, Status
from ..solvers.backends import BACKENDS
from ..solvers.sparse.bcd import fit_bcd
from ..deadline import Deadline
from ..solvers.sparse.oa import initial_master, miqp_model, unboxed_miqp, widen_miqp_box
from ..solvers.options import SolveOptions
from ..reductions import ObjectiveScale
from ..solvers.sparse.methods import METHODS, NAMES, choose, resolve, run_exact
from ..solvers.user_model import ModelSpec, indexed_values
from .base import (BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf, OneOfKeys,
                   SampleWeighted, SequenceOf)

#: Share of ``time_limit`` the bcd warm start may use before an exact solver.
BCD_SHARE = 0.5


class SparseMTL(SampleWeighted, MTLEstimator):
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
        Maximum support size per task; capped at the number of features p (s >= p leaves
        every feature free: the same problem as s = p).
    lambda_ridge, lambda_bbar, lambda_zbar : float, default=0.0
        Penalty weights; a variant without a term requires its weight to be 0.
    algorithm : {"bcd", "exact", "oa_multi_tree", "oa_single_tree", "miqp", "bnb"}, default="bcd"
        A method of ``mtl_opt.solvers.sparse.methods.METHODS``, or ``"exact"``: the certifying
        method that suits the problem (``sparse.methods.choose``: bnb when some task has
        n_k <= p, else single-tree OA, else the first that accepts the problem and backend;
        ``result_.algorithm`` names the one that ran).
        ``bcd``: block coordinate descent + local search (``mtl_opt.solvers.sparse.bcd``),
        no bound.  ``oa_multi_tree``: outer approximation started from the bcd
        answer, a MILP master re-solved between cuts (HiGHS by default, or SCIP);
        ``oa_single_tree``: one SCIP branch-and-bound, cuts from a constraint
        handler.  ``miqp``: the Big-M MIQP on
        SCIP, M proven from the bcd answer.  All three report a proven lower bound; they need lambda_ridge > 0
        unless every task has more rows than identifiable features and a full-rank
        design on them (the cuts and the Big-M then borrow the loss's own curvature);
        otherwise they refuse, naming the task.  ``bnb``: our branch and
        bound over supports, each node bounded by its perspective relaxation
        solved in the dual (``mtl_opt.solvers.sparse.bnb``); for n_k < p with a small
        ridge, where the other two stall; with a Zbar or Bbar term one joint tree whose
        node bounds price the support budgets by Lagrange multipliers (with Bbar, each
        column's task sets enumerated: K <= 8, any K for cs_bbar); needs lambda_ridge > 0,
        and no backend.
    standardize : bool, default=True
        Fit on features standardized per task; coefficients are reported on
        the original scale, the objective on the standardized one (where it is minimized).
        A constant feature is centred, not scaled (and left out of that task, above).
    fit_intercept : bool, default=True
    max_iter : int, default=1000
        Maximum IHT sweeps.
    local_search : bool, default=True
    backend : a name in ``mtl_opt.solvers.backends.BACKENDS`` ("highs", "scip", ...) or None
        MILP backend of ``oa_multi_tree`` (default HiGHS); ``oa_single_tree`` and ``miqp``
        run on SCIP.
    solve_options : SolveOptions or None
        time_limit (the whole fit: the bcd warm start gets at most half of it
        before an exact solver), rel_gap (tolerance for status ``optimal``),
        verbose (prints the progress table: time, incumbent, bound, gap, nodes), threads...
    constraints : list of Constraint or dict, or None
        Built-in side constraints (``mtl_opt.formulations.constraints``): include / exclude
        features, at most / at least ``count`` of a group, signs, bounds on the original scale,
        shared supports between tasks; e.g. ``[{"kind": "include", "features": ["age"]},
        {"kind": "at_most", "features": ["a1", "a2", "a3"], "count": 1}]``.  Every algorithm
        enforces them or refuses them, naming one that would.
    coef_bound : float, sequence of p floats, or None
        A box the user knows, ``|coefficient_j| <= coef_bound`` (scalar: every feature; else one
        positive bound per feature), on the original scale of the features, for every task: part
        of the problem fitted and certified (``result_.objective_name`` says ``certified for
        |b_j| <= M``).  The same as a ``bounds`` constraint on every feature; bcd keeps to it, bnb
        (in its node bounds too) and the MIQP certify it; outer approximation refuses it, and bnb
        with a Bbar term, naming the MIQP.

    Attributes
    ----------
    coef_ : ndarray of shape (K, p)
        Coefficients per task, on the original scale of the features.
    intercept_ : ndarray of shape (K,)
    support_ : ndarray of shape (K, p), bool
        The support indicator z of the estimate (it contains ``coef_ != 0``).
    result_ : FitResult
        ``algorithm``: the method's name; ``backend``: the backend it ran on (None for bcd and
        bnb, which run in mtl_opt).  status ``heuristic`` for bcd (no bound; ``time_limit`` when
        the deadline cut it short); for oa / miqp ``optimal`` only
        when the proven relative gap is <= rel_gap, else ``gap_limit`` or
        ``time_limit`` with the bound reached: at least the trivial F >= 0
        when the limit passes before the solver proves a positive bound.
    n_iter_ : int
        IHT sweeps run.

    Examples
    --------
    >>> from mtl_opt import SolveOptions, SparseMTL
    >>> from mtl_opt.synthetic import smtl_simulation
    >>> data = smtl_simulation(p=20, K=3, n=40, s_true=3, q=4, seed=0).data
    >>> fast = SparseMTL(s=3, lambda_ridge=0.1, lambda_zbar=0.05).fit(data)   # bcd: no bound
    >>> print(fast.result_.status, fast.coef_.shape, fast.support_.sum(axis=1).max() <= 3)
    heuristic (3, 20) True
    >>> exact = SparseMTL(s=3, lambda_ridge=0.1, lambda_zbar=0.05, algorithm="exact",
    ...                   solve_options=SolveOptions(time_limit=30)).fit(data)
    >>> print(exact.result_.status, exact.result_.lower_bound <= exact.result_.objective)
    optimal True
    """

    method = "sparse_mtl"
    supports_warm_start = True
    param_constraints = {
        "variant": [OneOf(tuple(VARIANTS))],
        "s": [Interval(1, None, integer=True)],
        "lambda_ridge": [Interval(0.0, None)],
        "lambda_bbar": [Interval(0.0, None)],
        "lambda_zbar": [Interval(0.0, None)],
        "algorithm": [OneOf(NAMES)],
        "backend": [OneOfKeys(BACKENDS)],
        "solve_options": [OneOf((None,)), InstanceOf((SolveOptions,), "a SolveOptions")],
        "standardize": [BOOLEAN],
        "fit_intercept": [BOOLEAN],
        "max_iter": [Interval(1, None, integer=True)],
        "local_search": [BOOLEAN],
        "constraints": [OneOf((None,)), InstanceOf((list, tuple), "a list of constraints")],
        "coef_bound": [OneOf((None,)), Interval(0.0, None, open_low=True),
                       SequenceOf(Interval(0.0, None, open_low=True))],
    }

    def __init__(self, *, variant="zbar_l2", s=10, lambda_ridge=0.0, lambda_bbar=0.0,
                 lambda_zbar=0.0, algorithm="bcd", standardize=True, fit_intercept=True,
                 max_iter=1000, local_search=True, backend=None, solve_options=None,
                 constraints=None, coef_bound=None, task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.variant = variant
        self.s = s
        self.lambda_ridge = lambda_ridge
        self.lambda_bbar = lambda_bbar
        self.lambda_zbar = lambda_zbar
        self.algorithm = algorithm
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.local_search = local_search
        self.backend = backend
        self.solve_options = solve_options
        self.constraints = constraints
        self.coef_bound = coef_bound

    def _check_fit(self, data: MultiTaskData) -> None:
        problem, scaler, std_data = self._problem(data)
        method = self._method(problem, self.algorithm, self.backend)
        self._checked = (data, (problem, scaler, std_data, method))   # ``_checked_problem``'s plan

    def _method(self, problem, algorithm, backend):
        """The method ``algorithm`` names (``sparse.methods.resolve``; "exact": the one
        ``sparse.methods.choose`` picks for ``problem``), once it has said it can run ``problem``
        on ``backend``: every refusal comes here, before any work, once per candidate."""
        if algorithm == "exact":
            return choose(problem, backend).installed(problem, backend)   # refusals asked once
        return resolve(algorithm).check(problem, backend)

    def _fit(self, data: MultiTaskData, init: FitResult | None = None) -> FitResult:
        options = self.solve_options or SolveOptions()
        problem, scaler, data, method = self._checked_problem(data)
        compile_time = _prepared(method)
        deadline = Deadline(options.time_limit)   # the whole fit's budget, passed down
        start = None if init is None else init.extra.get("coef_fitted")
        if start is not None and np.shape(start) != (data.n_tasks, data.n_features):
            raise InvalidParameterError(
                f"init has coefficients of shape {np.shape(start)}; this data needs "
                f"{(data.n_tasks, data.n_features)}.")
        settings = {"max_iter": self.max_iter, "local_search": self.local_search}
        if not method.needs_incumbent:
            run = method.solve(problem, start, options, deadline, None, **settings)
            self.n_iter_ = run.native["n_iter"]
            return self._result(problem, scaler, data, run, method, None, options)
        warm = METHODS["bcd"].solve(problem, start, options, deadline.share(BCD_SHARE), None,
                                    **settings)   # the warm start, within the fit's budget
        self.n_iter_ = warm.native["n_iter"]
        result = self._result(problem, scaler, data,
                              run_exact(method, problem, warm.estimate, options, deadline, self.backend),
                              method, self.backend, options)
        result.compile_time = compile_time
        return result

    def certify(self, data: MultiTaskData, *, sample_weight=None, algorithm: str = "exact",
                backend: str | None = None, time_limit: float | None = None) -> FitResult:
        """Prove how good the fitted estimate is: run an exact method from it, update ``result_``.

        The exact method starts from the current estimate, so the objective can
        only improve; afterwards ``result_.lower_bound`` is a proven bound.  The default
        ``algorithm="exact"`` picks the method that suits the problem (``sparse.methods.choose``).  ``algorithm`` and
        ``backend`` are checked as ``fit`` would check them, before any work.  A fit with
        ``sample_weight`` is certified with the same weights.
        """
        self._check_is_fitted()
        if (sample_weight is not None) != self.result_.extra.get("weighted", False):
            raise InvalidParameterError(
                "certify proves the problem that was fitted: pass the sample_weight the fit got"
                if sample_weight is None else
                "certify got sample_weight, but the fit had none: refit with it first")
        if sample_weight is not None:
            data = self._fit_data(data, None, None, sample_weight)
        checker = type(self)(**{**self.get_params(deep=False), "algorithm": algorithm,
                                "backend": backend})
        checker.check(data)
        if (data.task_names, data.feature_names) != (self.task_names_, self.result_.feature_names):
            raise InvalidDataError(
                f"certify proves the fitted estimate on the data it was fitted on: tasks "
                f"{self.task_names_} and features {self.result_.feature_names}; got tasks "
                f"{data.task_names} and features {data.feature_names}. Pass that data, or fit "
                f"on this data first.")
        options = (self.solve_options or SolveOptions()).with_updates(time_limit=time_limit)
        problem, scaler, std_data, method = checker._checked_problem(data)
        if not method.certifies:
            raise InvalidParameterError(
                f"certify needs an exact method: one of "
                f"{', '.join(repr(m.name) for m in METHODS.values() if m.certifies)}; got {algorithm!r}.")
        with interrupts.stoppable():
            return self._certified(data, problem, scaler, std_data, method, backend, options)

    def _certified(self, data, problem, scaler, std_data, method, backend, options) -> FitResult:
        """``certify``'s exact run, in a region that stops softly on Ctrl-C (``fit``'s rule)."""
        compile_time = _prepared(method)
        deadline = Deadline(options.time_limit)
        run = run_exact(method, problem, self.result_.extra["coef_fitted"], options, deadline, backend)
        result = self._result(problem, scaler, std_data, run, method, backend, options)
        result.compile_time = compile_time
        self._adopt(result, data)
        if result.status is Status.INTERRUPTED:
            raise interrupts.FitInterrupted(result, "certify was interrupted; result_ holds the "
                                            "bound proven by then")
        return result

    def _model_spec(self, data: MultiTaskData, kind: str = "miqp", normalized: bool = True) -> ModelSpec:
        """An exact model of the fitted problem, on its normalized twin (``ObjectiveScale``: y over
        the power of 2 that puts F near 1 at the bcd answer; ``normalized=False``: y as it is, as
        ``mtl-opt export`` writes it).  ``kind="miqp"``: the Big-M perspective MIQP of
        ``algorithm="miqp"`` (``formulations.sparse_models.build_miqp``), M proven from the bcd answer;
        ``"master"``: the outer-approximation master with its first cuts (a MILP whose solution
        is refitted on its support; its bound holds since the cuts underestimate F)."""
        if kind not in ("miqp", "master"):
            raise InvalidParameterError(f"kind must be 'miqp' or 'master'; got {kind!r}.")
        problem, scaler, std_data, _ = self._checked_problem(data)
        method = METHODS["miqp" if kind == "miqp" else "oa_multi_tree"]   # the method this model is
        refusal = method.refusal(problem, None)
        if refusal is not None:   # as fit refuses it: a model that drops a constraint is no export
            raise InvalidParameterError(f"no {kind} model for this problem, as fit with "
                                        f"algorithm={method.name!r} refuses it: {refusal}")
        warm = fit_bcd(problem, max_iter=self.max_iter, local_search=self.local_search,
                       deadline=Deadline())   # a model, not a fit: no time limit
        incumbent = warm.coef
        scale = ObjectiveScale.near(problem.objective(incumbent)) if normalized else ObjectiveScale()
        twin, inverse = scale.apply(problem)
        names = (f"tasks 0..{data.n_tasks - 1}: {', '.join(map(str, data.task_names))}; features "
                 f"0..{data.n_features - 1}: {', '.join(map(str, data.feature_names))}"
                 + (" (standardized)" if self.standardize else "") + ".  ")

        def finish(run, options):
            self.n_iter_ = warm.n_iter
            B, z = run.estimate
            return self._result(problem, scaler, std_data, dataclasses.replace(run, estimate=B, support=z),
                                method, method.backend_for(None, problem), options)

        if kind == "master":
            def decode(solved):
                z = indexed_values(solved, "z", problem.n_tasks, problem.n_features) > 0.5
                return problem.refit(z), z

            return ModelSpec(
                initial_master(twin, inverse.to_twin(incumbent)), "highs", "milp", *self._spec_key(data),
                decode=decode, objective=lambda estimate: problem.objective(*estimate), finish=finish,
                inverse=inverse,
                notes=names + f"y_scale = {scale.root:g}.  The master's optimum is a lower bound on "
                              f"F / y_scale^2 (its cuts underestimate F); the estimate is the refit "
                              f"on the support z it finds.")

        model = miqp_model(twin, inverse.to_twin(incumbent))

        def decode(solved):
            beta, z = (indexed_values(solved, name, problem.n_tasks, problem.n_features)
                       for name in ("beta", "z"))
            return inverse.estimate(np.where(z > 0.5, beta, 0.0)), z > 0.5

        return ModelSpec(
            model, "scip", "miqp", *self._spec_key(data), decode=decode,
            objective=lambda estimate: problem.objective(*estimate), finish=finish,
            inverse=inverse,
            widen=lambda solved, level: widen_miqp_box(solved, twin, level), unboxed=unboxed_miqp,
            bound_cap=model.big_m_level,
            notes=(names + f"y_scale = {scale.root:g} (a power of 2: F / y_scale^2 is near 1 at the bcd "
                   f"answer, solver tolerances are absolute).  M = {model.big_m:g} holds for "
                   f"every solution with F / y_scale^2 <= F(bcd answer) / y_scale^2; with your "
                   f"constraints, a solution above that level widens the box (M for its level) "
                   f"and the model is solved again; the bound reported is at most the level the "
                   f"box is proven for.  A beta whose z is 0 is read as exactly 0."))

    def _problem(self, data):
        """The problem F on (standardized) ``data``, leaving out the pairs ``data`` cannot identify.

        The data are centred once, by ``standardize`` (with or without scaling), so the problem
        holds no intercept terms of its own; the Scaler maps coefficients back."""
        scaler = None
        excluded = data.unidentified(self.fit_intercept, collinear=False)
        if self.standardize or self.fit_intercept:
            data, scaler = data.standardize(how="task", center=self.fit_intercept, scale=self.standardize)
        side = compile_constraints([*(self.constraints or ()), *self._box(data.feature_names)],
                                   data.task_names, data.feature_names,
                                   scaler.x_scale if self.standardize else None)
        problem = SparseProblem.from_data(
            data, variant=self.variant, s=min(self.s, data.n_features), lambda_ridge=self.lambda_ridge,
            lambda_bbar=self.lambda_bbar, lambda_zbar=self.lambda_zbar,
            fit_intercept=False, excluded=excluded, side=side)
        return problem, scaler, data

    def _box(self, features) -> list[dict]:
        """``coef_bound`` as ``bounds`` constraints, one per distinct bound (none: no box)."""
        if self.coef_bound is None:
            return []
        bound = np.asarray(self.coef_bound, dtype=float)
        if bound.ndim and len(bound) != len(features):
            raise InvalidParameterError(
                f"coef_bound must be one number or one per feature ({len(features)}); got "
                f"{len(bound)} numbers.")
        bound = np.broadcast_to(bound, (len(features),))
        return [{"kind": "bounds", "features": [name for name, b in zip(features, bound) if b == M],
                 "lower": -float(M), "upper": float(M)} for M in np.unique(bound)]

    def _box_statement(self, certified: bool) -> str:
        """How the summary states the box of the problem fitted ("" without one): "certified
        for" it where the run proved a bound, else "for"."""
        if self.coef_bound is None:
            return ""
        bound = np.asarray(self.coef_bound, dtype=float)
        box = (f"|b_j| <= {float(bound):g}" if bound.ndim == 0
               else f"|b_j| <= M_j (coef_bound, max {bound.max():g})")
        return f", {'certified for' if certified else 'for'} {box}"

    def _result(self, problem, scaler, data, run, method, backend, options) -> FitResult:
        """The FitResult of ``run`` (of ``method`` on ``backend``, None: its default) on the
        fitted scale."""
        B = run.estimate
        z = problem.indicators(B, run.support)   # the model's z: the support F was evaluated at
        intercept = problem.intercepts(B)
        coef, intercept_orig = (scaler.coef_to_original(B, intercept) if scaler
                                else (B.copy(), intercept))
        self.support_ = z
        return self._result_of(
            data, run, coef=coef, intercept=intercept_orig, objective=problem.objective(B, z),
            rel_gap=options.rel_gap,
            objective_name=f"F ({self.variant}" + (", standardized data" if scaler else "")
            + self._box_statement(run.lower_bound is not None) + ")",
            solver=f"{method.name} ({run.native['solver']})",
            algorithm=method.name, backend=method.backend_for(backend, problem),
            extra={"coef_fitted": B, "support": z, "n_iter": self.n_iter_})


def _prepared(method) -> float:
    """Run ``method.prepare`` (bnb: compile or load its kernels) before a deadline starts; the
    seconds it took (``FitResult.compile_time``)."""
    start = time.perf_counter()
    if method.prepare is not None:
        method.prepare()
    return time.perf_counter() - start
