"""ARMUL (vanilla, clustered, low-rank), and the shared plumbing of its baselines.

ARMUL's algorithms are the method table ``solvers.armul.methods.METHODS``: ``prox``
(``solvers.armul.prox``: proximal gradient, alternating searches) and ``exact`` (``solvers.armul.scip``:
the exact Pyomo model on SCIP or Gurobi).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data import MultiTaskData
from ..data.scaling import fit_scaler
from ..errors import InvalidParameterError
from ..formulations import armul as formulation
from ..formulations.armul import ArmulProblem
from ..reductions import Responses, ResponseScale, Standardization
from ..result import FitResult
from ..solvers.armul import glm, prox
from ..solvers.armul.methods import METHODS, STRUCTURES, StructuredProblem
from ..solvers.armul.scip import read_solution
from ..solvers.user_model import ModelSpec
from ..solvers.method import SolverRun, lookup
from ..solvers.backends import BACKENDS
from ..deadline import Deadline
from ..solvers.options import SolveOptions
from ..solvers.progress import Progress
from .base import BOOLEAN, InstanceOf, Interval, MTLEstimator, OneOf, OneOfKeys, SampleWeighted

#: The paper's grid of c (Section 5.1); lambda_j = c sqrt(d / n_j).
PAPER_C_GRID = tuple(round(0.2 * i, 1) for i in range(1, 11))


class GLMTasks(SampleWeighted, MTLEstimator):
    """Per-task linear or logistic models: design preparation, back-mapping and prediction.

    ``standardize`` scales every feature by one pooled mean and standard
    deviation, the same for all tasks so a shared center keeps its meaning
    (``MultiTaskData.standardize(how="pooled")``'s scaler, applied to the designs only);
    ``fit_intercept`` adds a column of ones, coefficient 0, treated like any
    other coefficient.  With the squared loss the solvers see y without its common
    level and over a power of 2 near its RMS (``reductions.ResponseScale``); estimates,
    objectives and bounds are mapped back exactly, so reported values are on the data's scale.
    """

    #: The penalty scale of ``_problem``: ARMUL's parameter ``c``; 0 for the baselines.
    c = 0.0

    def _check_weighted(self) -> None:
        if self.loss == "logistic":
            raise InvalidParameterError(
                f"{type(self).__name__}(loss='logistic') takes no sample_weight: the weighted "
                f"logistic loss is not implemented (sample_weight works with loss='squared').")

    def _problem(self, data: MultiTaskData) -> ArmulProblem:
        """The problem on ``data`` at penalty scale ``c``, and the reductions that map its
        solutions back (``_standardization``, ``_response_scale``; ``_identified`` where used)."""
        if self.standardize:
            scaler = fit_scaler(data, how="pooled", center=self.fit_intercept, scale=True)
            if scaler.constant.any():
                raise InvalidParameterError(
                    f"{type(self).__name__}: a feature is constant over all tasks, so it cannot "
                    f"be standardized; drop it or pass standardize=False.")
            # the designs alone: y's level and scale are the response reduction's
            Xs, self._standardization = (scaler.transform_designs(data),
                                         Standardization(scaler.reduction.x_level[0], scaler.x_scale[0]))
        else:   # the data as they are (no standardized copy to build)
            Xs, self._standardization = data.Xs, Standardization()
        self._identified = self._identified_columns(data) if self._uses_identified() else None
        scale = (ResponseScale.of(data.ys, self._level_moves_intercepts_only())
                 if self.loss == "squared" else ResponseScale())
        self._response_scale = scale
        columns = data.n_features + self.fit_intercept
        twin, _ = scale.apply(Responses(tuple(data.ys), self.c, columns))
        return ArmulProblem.from_tasks(Xs, list(twin.ys), loss=self.loss, c=twin.c,
                                       counts=data.counts,
                                       intercept=self.fit_intercept)

    def _identified_columns(self, data: MultiTaskData) -> np.ndarray:
        """(m, d): the columns each task's least squares can estimate (the intercept first), by
        the data set's rank test (``MultiTaskData.unidentified``, computed once per data set)."""
        identified = ~data.unidentified(self.fit_intercept, collinear=True)
        if self.fit_intercept:
            identified = np.hstack([np.ones((data.n_tasks, 1), dtype=bool), identified])
        return identified

    def _uses_identified(self) -> bool:
        """Whether the fit uses ``_identified`` (its anchors, a per-task fit, a method's check);
        the rank test is skipped otherwise (None)."""
        return True

    def _level_moves_intercepts_only(self) -> bool:
        """Whether adding a constant to every y moves only the intercepts of the optimum (so
        ``_problem`` may remove it): with an intercept, unless a rank constraint couples them."""
        return self.fit_intercept

    def _result(self, data, run: SolverRun, *, rel_gap, algorithm, backend, extra=None):
        """The FitResult of ``run``, a run on the data's response scale (``ResponseScale.run``) whose estimate
        is an ``ArmulEstimate``."""
        estimate = run.estimate
        coef, intercept = self._standardization.rows(estimate.theta, self.fit_intercept)
        self.n_iter_ = run.native.get("n_iter", 0)
        return self._result_of(
            data, run, coef=coef, intercept=intercept, rel_gap=rel_gap,
            objective_name=f"{self.method} objective, {self.loss} loss"
            + (" (standardized features)" if self.standardize else ""),
            algorithm=algorithm, backend=backend,
            extra={"theta_fitted": estimate.theta, "centers_fitted": estimate.centers, **(extra or {})})

    def _anchors(self, problem: ArmulProblem) -> np.ndarray:
        """Seeds of clustered / low-rank starts: the pooled fit corrected, in every task, by the
        task's own fit on the columns it identifies (``_identified``).  A coefficient a task
        cannot identify starts at the pooled value, so it neither pulls the task toward tasks
        that share its gap nor starts at an arbitrary value the penalty never revisits."""
        pooled = glm.group_fit(problem, np.arange(problem.m))
        return glm.task_fits(problem, self._identified, pooled)

    def _components(self, n_tasks: int) -> int | None:
        """The clusters or rank fitted: ``n_components`` capped at the number of tasks (at most
        that many clusters, or rank, is the same problem), None for none."""
        return None if self.n_components is None else min(self.n_components, n_tasks)

    def _check_fit(self, data: MultiTaskData) -> None:
        # constant features, labels of the logistic loss; the fit takes it (``_checked_problem``)
        self._checked = (data, self._problem(data))

    def _is_classifier(self) -> bool:
        """The logistic loss makes a binary classifier (``MTLEstimator``)."""
        return self.loss == "logistic"


COMMON_CONSTRAINTS = {
    "loss": [OneOf(formulation.LOSSES)],
    "fit_intercept": [BOOLEAN],
    "standardize": [BOOLEAN],
}


class ARMUL(GLMTasks):
    """Adaptive and robust multi-task learning: task models shrunk toward a learned structure.

    Minimizes (``mtl_opt.formulations.armul``)::

        sum_j w_j [ f_j(theta_j) + lambda_j ||theta_j - gamma_j||_2 ],   w_j = n_j,
        lambda_j = c sqrt(d / n_j),   Gamma in Omega

    Omega: one center (``vanilla``), ``n_components`` centers with labels
    (``clustered``) or rank ``n_components`` (``lowrank``).

    Parameters
    ----------
    structure : {"vanilla", "clustered", "lowrank"}, default="vanilla"
    n_components : int or None, default=None
        Clusters or rank; required for clustered / low-rank.  Capped at the number of tasks
        (at most that many clusters, or that rank, is the same problem).
    c : float >= 0, default=1.0
        Penalty scale; tune over ``PAPER_C_GRID`` with ``cross_validate``.
    loss : {"squared", "logistic"}, default="squared"
        Logistic: a binary classifier (``classes_``: any two labels, the second coded 1).
    algorithm : {"prox", "exact"}, default="prox"
        A method of ``mtl_opt.solvers.armul.methods.METHODS``. ``prox``:
        ``mtl_opt.solvers.armul.prox``; ``exact``: the exact Pyomo model (vanilla, both losses), a
        branch and bound over assignments (clustered, both losses); no low-rank method.
    backend : a name in ``mtl_opt.solvers.backends.BACKENDS`` or None
        Only with algorithm="exact": the backend of vanilla's exact model, "scip" (None) or
        "gurobi"; clustered's branch and bound uses none (a backend named is refused).
    fit_intercept, standardize : bool, default=True
        See ``GLMTasks``.
    n_init : int, default=10
        Seeded k-means++ restarts (clustered).
    max_iter : int, default=20000
        FISTA iterations per convex solve.
    seed : int or None
        Seeds the restarts.
    solve_options : SolveOptions or None
        ``rel_gap`` (default 1e-6) is the stopping tolerance of the duality gap;
        ``time_limit`` bounds the whole fit (every restart and convex solve; a fit it cuts
        has status ``time_limit``); the rest go to the backend.

    Attributes
    ----------
    coef_ (m, p), intercept_ (m,), result_, n_iter_
    center_, center_intercept_ : vanilla center on the data's scale
    centers_ (K, p), centers_intercept_ (K,), labels_ (m,) : clustered
    basis_ : (d, K) orthonormal basis of the low-rank subspace, in fitted
        coordinates (standardized, intercept first)

    Notes
    -----
    Vanilla with algorithm="prox": ``lower_bound`` is the value of a dual
    feasible point built from the final iterate, less a bound on its float64
    rounding (see the formulation), and ``optimal`` means a proven relative
    gap <= rel_gap.  With the squared loss every solver works on y without its
    common level and near unit scale (``ResponseScale``; not the level for
    low-rank, whose rank constraint binds the intercepts too).  algorithm="exact":
    vanilla, our dual bound at SCIP's point, never SCIP's own; clustered, a branch and bound
    over task-to-cluster assignments (``solvers.armul.tree``, no backend) from the prox answer,
    whose bound is the least safe bound over its closed nodes (at a time limit, over the open
    ones too).  Clustered and low-rank with algorithm="prox" are local
    searches: clustered has no bound (``heuristic``); low-rank carries the independent-tasks
    bound (the rank constraint dropped: proven, weak), so a gap.  The objective is recomputed in
    float64 at the returned estimate, on the fitted (standardized) scale.

    A coefficient a task cannot identify (a feature constant within it, listed in
    ``result_.unidentified``; or any direction when n_k <= p) is carried by the task's center
    through the penalty: moving theta_j - gamma_j along a direction X_j does not see changes no
    loss and lengthens the penalized deviation, so the optimal deviation has no such component.
    A feature that is zero in the task (data centred per task) thus gets the center's
    coefficient; a constant one shares its direction with the intercept, so only
    intercept + value * coefficient is the task's own and the split is the shortest deviation.

    Examples
    --------
    >>> from mtl_opt import ARMUL
    >>> from mtl_opt.synthetic import armul_simulation
    >>> data = armul_simulation("vanilla", m=6, n=40, d=3, delta=0.3, seed=0).data
    >>> model = ARMUL(c=1.0).fit(data)
    >>> print(model.result_.status, model.coef_.shape)   # a proven relative duality gap <= 1e-6
    optimal (6, 3)
    >>> ARMUL("clustered", n_components=2, seed=0).fit(data).labels_.shape
    (6,)
    """

    method = "armul"
    supports_warm_start = True
    global_model = ("center_", "center_intercept_")
    param_constraints = {
        "structure": [OneOf(formulation.STRUCTURES)],
        "n_components": [OneOf((None,)), Interval(1, None, integer=True)],
        "c": [Interval(0.0, None)],
        "algorithm": [OneOf(tuple(METHODS))],
        "backend": [OneOfKeys(BACKENDS)],
        "n_init": [Interval(1, None, integer=True)],
        "max_iter": [Interval(1, None, integer=True)],
        "seed": [OneOf((None,)), Interval(0, None, integer=True)],
        "solve_options": [OneOf((None,)), InstanceOf((SolveOptions,), "a SolveOptions")],
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, structure="vanilla", *, n_components=None, c=1.0, loss="squared",
                 algorithm="prox", backend=None, fit_intercept=True, standardize=True, n_init=10,
                 max_iter=20000, seed=None, solve_options=None,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.structure = structure
        self.n_components = n_components
        self.c = c
        self.loss = loss
        self.algorithm = algorithm
        self.backend = backend
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.n_init = n_init
        self.max_iter = max_iter
        self.seed = seed
        self.solve_options = solve_options

    def _level_moves_intercepts_only(self) -> bool:
        return self.fit_intercept and self.structure != "lowrank"

    def _has_global_model(self) -> bool:
        """The vanilla centre; clustered and low-rank fits have no one global model."""
        return self.structure == "vanilla"

    def _uses_identified(self) -> bool:
        return STRUCTURES[self.structure].local_search   # anchors; the clustered model's check

    def _method(self, problem: ArmulProblem, data: MultiTaskData):
        """The method ``algorithm`` names, and ``problem`` with
        its structure; every refusal of the method comes here, before any work."""
        structured = StructuredProblem(problem, self.structure, self._components(problem.m),
                                       self._identified, tuple(data.task_names))
        method = lookup(METHODS, self.algorithm, "ARMUL algorithm")
        return method.check(structured, self.backend), structured

    def _check_fit(self, data: MultiTaskData) -> None:
        super()._check_fit(data)
        if self.structure != "vanilla" and self.n_components is None:
            raise InvalidParameterError(
                f"ARMUL(structure={self.structure!r}) needs n_components (clusters or rank).")
        self._method(self._checked[1], data)

    def _fit(self, data: MultiTaskData, init: FitResult | None = None) -> FitResult:
        options = self.solve_options or SolveOptions()
        deadline = Deadline(options.time_limit)  # the whole fit: model build and every restart
        method, structured = self._method(self._checked_problem(data), data)  # cheap, checked
        problem = structured.problem
        anchors = self._anchors(problem) if STRUCTURES[self.structure].local_search else None
        run = method.solve(structured, _warm_start(init, problem, self._response_scale), options,
                           deadline, self.backend, anchors=anchors, seed=self.seed,
                           n_init=self.n_init, max_iter=self.max_iter,
                           progress=Progress(options.verbose,
                                             units=self._response_scale.inverse(problem.d).row))
        return self._finish(data, run, options, method.name, method.backend_for(self.backend, structured))

    def _model_spec(self, data: MultiTaskData) -> ModelSpec:
        """The SCIP model behind ``algorithm="exact"`` (``formulations.armul``: vanilla convex, or
        clustered with binary assignments), on the solver's scale (``ResponseScale``)."""
        if self.structure not in ("vanilla", "clustered"):
            raise InvalidParameterError(
                f"ARMUL(structure={self.structure!r}) has no optimization model to edit; "
                f"structure='vanilla' and 'clustered' have one.")
        problem = self._checked_problem(data)
        scale = self._response_scale
        vanilla = self.structure == "vanilla"
        model = (formulation.build_vanilla_model(problem) if vanilla
                 else formulation.build_clustered_model(problem, self._components(problem.m)))
        at_zero = problem.objective(np.zeros((problem.m, problem.d)), np.zeros(problem.d))
        columns = (["intercept"] if self.fit_intercept else []) + list(map(str, data.feature_names))
        # ``dual_bound_margin``: the rows SCIP derives from the objective reach its value at 0
        model.largest_bound = max(at_zero, float(np.max(np.abs(problem.y))))

        def finish(run, options):   # the estimate back to the data's scale; the run's values
            # (spec.objective: already on it) are what ``fit(model=...)`` reports, not its log
            return self._finish(data, replace(run, log=[]), options, "user_model", "scip")

        return ModelSpec(
            model, "scip", "qcp" if vanilla else "miqcp", *self._spec_key(data),
            decode=lambda solved: prox.ArmulEstimate(*read_solution(solved, problem, self.structure)),
            objective=lambda estimate: scale.value(problem.objective(estimate.theta, estimate.centers)),
            finish=finish,
            inverse=scale.inverse(problem.d), bound_cap=None if vanilla else at_zero,
            notes=f"tasks 0..{problem.m - 1}: {', '.join(map(str, data.task_names))}; coefficients "
                  f"0..{problem.d - 1}: {', '.join(columns)}"
                  + (" (standardized features)" if self.standardize else "") + ".  "
                  f"y_level = {scale.level:.17g}, y_scale = {scale.factor:.17g}: the model's y is "
                  f"(y - y_level) / y_scale; the model's own objective is reported on the data's "
                  f"scale (times y_scale^2), a replaced one on the model's."
                  + ("" if vanilla else "  The box R holds every solution with objective <= its "
                     "value at 0, so the bound reported is at most that level."))

    def _finish(self, data, solved: SolverRun, options, algorithm, backend) -> FitResult:
        run, extra = self._response_scale.run(solved), {}
        estimate = run.estimate
        reported = self._standardization.rows
        if self.structure == "vanilla":
            center, center_intercept = reported(estimate.centers[0], self.fit_intercept)
            self.center_, self.center_intercept_ = center[0], float(center_intercept[0])
        elif self.structure == "clustered":
            self.centers_, self.centers_intercept_ = reported(estimate.extra["centers"], self.fit_intercept)
            self.labels_ = estimate.extra["labels"]
            extra = {"labels": self.labels_, "centers": self.centers_}
        else:
            self.basis_ = estimate.extra["basis"]
            extra = {"basis": self.basis_}
        return self._result(data, run, rel_gap=options.rel_gap, algorithm=algorithm,
                            backend=backend, extra=extra)


def _warm_start(init: FitResult | None, problem: ArmulProblem, scale):
    """(theta, center) of a previous vanilla fit with the same shape on the solver's scale,
    else (None, None)."""
    if init is None or "theta_fitted" not in init.extra:
        return None, None
    theta = np.asarray(init.extra["theta_fitted"])
    if theta.shape != (problem.m, problem.d):
        return None, None
    return scale.to_scaled(theta), scale.to_scaled(np.asarray(init.extra["centers_fitted"])[0])


def mean_squared_error(ys, preds) -> float:
    """The paper's CV score: mean over tasks of the mean squared prediction error."""
    return float(np.mean([np.mean((y - p) ** 2) for y, p in zip(ys, preds)]))


def misclassification(ys, preds) -> float:
    """Mean over tasks of the error rate of predicted labels."""
    return float(np.mean([np.mean(y != p) for y, p in zip(ys, preds)]))


def cross_validate_armul(estimator: GLMTasks, data: MultiTaskData, *, n_components=None,
                         c_grid=PAPER_C_GRID, n_splits=5, seed=None, n_jobs=1, progress=False):
    """K-fold CV (folds within tasks; 5 as in the paper) over c (ARMUL) and ``n_components``.

    Every task needs ``n_splits`` rows; lower it for small tasks (real multi-site data).

    Scores by mean squared error (squared loss) or misclassification
    (logistic); returns ``mtl_opt.cv.CVResult`` with the refitted best estimator.
    """
    from ..cv import cross_validate  # cv imports the estimators package

    grid = {"c": list(c_grid)} if "c" in estimator.param_names() else {}
    if n_components is not None:
        grid["n_components"] = list(n_components)
    scoring = mean_squared_error if estimator.loss == "squared" else misclassification
    return cross_validate(estimator, grid, data, n_splits=n_splits, seed=seed, scoring=scoring,
                          n_jobs=n_jobs, progress=progress)
