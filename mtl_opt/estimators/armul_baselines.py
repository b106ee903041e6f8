"""ARMUL's baselines (the paper's Examples 3.1-3.4), with ARMUL's losses and interface.

    independent:   min sum_j w_j f_j(theta_j)
    pooling:       min sum_j w_j f_j(beta)
    clustered MTL: min over centers, labels of sum_j w_j f_j(beta_{z_j})
    low-rank MTL:  min over B (d x K), Z of sum_j w_j f_j(B z_j)

Independent learning and pooling are convex and certified by the dual
points of ``ArmulProblem.dual_bound``; the other two are alternating local
searches (status ``heuristic``).

A coefficient a task cannot identify (a column constant or collinear in it, a task with
fewer rows than coefficients): independent learning has nothing to borrow it from and fixes
it at 0; pooling has no task-level coefficient; clustered and low-rank MTL give the task its
cluster's center or its loading on the shared basis (the minimum-norm loading when the task
cannot pin it down), which the other tasks' data determine.  The loading is not penalized:
where the task's identified coordinates pin it badly (X_j B nearly singular), the unidentified
coefficient follows the basis far out (a model choice, not a numerical failure).
"""

from __future__ import annotations

import numpy as np

from .. import __version__
from ..data import MultiTaskData
from ..deadline import Deadline
from ..result import FitResult, Status
from ..solvers.armul import glm, prox
from .armul import COMMON_CONSTRAINTS, GLMTasks
from .base import Interval, OneOf

#: Newton fits are exact up to rounding; the tolerance for "optimal".
GLM_REL_GAP = 1e-6


class _Baseline(GLMTasks):
    """Stores the shared parameters; subclasses implement ``_run(problem)``."""

    param_constraints = dict(COMMON_CONSTRAINTS)
    coupling: str | None = None
    #: The one algorithm of the baseline (its FitResult's ``algorithm``; no backend).
    algorithm_name = "newton"

    def __init__(self, *, loss="squared", fit_intercept=True, standardize=True,
                 task_column=None, unseen="raise"):
        self.task_column = task_column
        self.unseen = unseen
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.standardize = standardize

    def _fit(self, data: MultiTaskData) -> FitResult:
        problem = self._checked_problem(data)
        run = self._run(problem)
        if self.coupling is not None:
            run.lower_bound = problem.dual_bound(run.theta, self.coupling)
        solved = self._response_scale.run(run.solver_run(
            {"solver": "newton (mtl_opt)", "solver_version": __version__,
             "bound": "dual feasible point from the gradients" if run.lower_bound is not None
             else "none: no dual bound without a convex coupling (a heuristic)"}))
        return self._result(data, solved, rel_gap=GLM_REL_GAP, algorithm=self.algorithm_name,
                            backend=None, extra=solved.estimate.extra)


class IndependentTasks(_Baseline):
    """Independent task learning: one least-squares or logistic fit per task.

    Each task is fitted on the columns its own data identify (``mtl_opt.identifiability``,
    ``identified_columns``: constant columns and columns collinear with the intercept and
    earlier ones are left out), and the coefficients of the pairs it lists in
    ``result_.unidentified`` are 0: with no sharing, nothing else determines them, and 0
    leaves the task's fitted values those of any least-squares solution.  The problem solved
    and certified is therefore sum_j w_j f_j(theta_j) with theta_jk = 0 on those pairs
    (``ArmulProblem.restricted``): on a constant or exactly collinear column this loses
    nothing, on a nearly collinear one (within ``COLLINEAR_RTOL``) it is a choice.

    Examples
    --------
    >>> from mtl_opt import IndependentTasks
    >>> from mtl_opt.synthetic import armul_simulation
    >>> data = armul_simulation("vanilla", m=4, n=30, d=3, seed=0).data
    >>> print(IndependentTasks().fit(data).result_.status)
    optimal
    """

    method, coupling, n_components = "itl", "independent", None
    identification = "collinear"

    def _problem(self, data: MultiTaskData):
        return super()._problem(data).restricted(self._identified)

    def _run(self, problem):
        theta = glm.task_fits(problem, self._identified)
        return prox.ProxRun(theta, theta, problem.objective(theta, theta), None, Status.CONVERGED, 1)


class DataPooling(_Baseline):
    """Data pooling: one fit on all tasks' data, the same model for every task.

    Examples
    --------
    >>> from mtl_opt import DataPooling
    >>> from mtl_opt.synthetic import armul_simulation
    >>> data = armul_simulation("vanilla", m=4, n=30, d=3, seed=0).data
    >>> pooled = DataPooling().fit(data)
    >>> print(pooled.result_.status, (pooled.coef_ == pooled.coef_[0]).all())   # one model for all
    optimal True
    """

    method, coupling, n_components = "pooling", "pooled", None
    identification = None  # one model for all: no task stands alone

    def _has_global_model(self) -> bool:
        return True

    def _global_model(self):
        return self.coef_[0], float(self.intercept_[0])   # every task's model is the pooled one

    def _run(self, problem):
        theta = np.tile(glm.group_fit(problem, np.arange(problem.m)), (problem.m, 1))
        return prox.ProxRun(theta, theta, problem.objective(theta, theta), None, Status.CONVERGED, 1)


class _Structured(_Baseline):
    """Baselines with ``n_components`` (capped at the number of tasks, ``_components``; and
    seeded restarts): alternating exact blocks."""

    algorithm_name = "alternating"

    param_constraints = {**COMMON_CONSTRAINTS, "n_components": [Interval(1, None, integer=True)],
                         "n_init": [Interval(1, None, integer=True)],
                         "seed": [OneOf((None,)), Interval(0, None, integer=True)]}

    def __init__(self, n_components=2, *, loss="squared", fit_intercept=True, standardize=True,
                 n_init=10, seed=None, task_column=None, unseen="raise"):
        super().__init__(loss=loss, fit_intercept=fit_intercept, standardize=standardize,
                         task_column=task_column, unseen=unseen)
        self.n_components = n_components
        self.n_init = n_init
        self.seed = seed


class ClusteredMTL(_Structured):
    """Clustered MTL: K shared models, each task assigned to the one that fits it best.

    Examples
    --------
    >>> from mtl_opt import ClusteredMTL
    >>> from mtl_opt.synthetic import armul_simulation
    >>> data = armul_simulation("clustered", m=6, n=30, d=3, seed=0).data
    >>> model = ClusteredMTL(n_components=2, seed=0).fit(data)
    >>> print(model.result_.status, set(model.labels_) <= {0, 1})
    heuristic True
    """

    method = "clustered_mtl"

    def _run(self, problem):
        run = prox.clustered_mtl(problem, self._components(problem.m), self._anchors(problem),
                                 np.random.default_rng(self.seed), n_init=self.n_init,
                                 deadline=Deadline())   # the baselines take no time limit
        self.centers_, self.centers_intercept_ = self._standardization.rows(
            self._response_scale.to_original(run.extra["centers"]), self.fit_intercept)
        self.labels_ = run.extra["labels"]
        return run


class LowRankMTL(_Structured):
    """Low-rank MTL: task models in a learned K-dimensional subspace (SVD start).

    Examples
    --------
    >>> from mtl_opt import LowRankMTL
    >>> from mtl_opt.synthetic import armul_simulation
    >>> data = armul_simulation("lowrank", m=6, n=30, d=4, seed=0).data
    >>> print(LowRankMTL(n_components=2, seed=0).fit(data).result_.status)
    heuristic
    """

    method = "lowrank_mtl"

    def _level_moves_intercepts_only(self) -> bool:
        return False  # the rank constraint also binds the intercepts

    def _run(self, problem):
        run = prox.lowrank_mtl(problem, self._components(problem.m), self._anchors(problem))
        self.basis_ = np.linalg.qr(run.extra["basis"])[0]
        return run
