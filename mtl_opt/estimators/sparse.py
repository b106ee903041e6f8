"""SparseMTL: sparse multi-task best subset with Zbar / Bbar / ridge penalties."""

from __future__ import annotations

import numpy as np

from .. import __version__
from ..data import MultiTaskData
from ..errors import InvalidParameterError
from ..formulations.sparse import VARIANTS, SparseProblem
from ..result import FitResult
from ..solvers.bcd import fit_bcd
from .base import BOOLEAN, Interval, MTLEstimator, OneOf


class SparseMTL(MTLEstimator):
    """Sparse models per task that borrow strength through shared supports or values.

    Minimizes (DESIGN.md, ``mtl_opt.formulations.sparse``)::

        F = sum_k 1/(2 n_k) ||y_k - b_k - X_k beta_k||^2 + (lambda_ridge/2) sum_k ||beta_k||^2
            + (lambda_bbar/2) sum_k ||beta_k - beta_bar||^2 + (lambda_zbar/2) sum_k ||z_k - z_bar||^2
        s.t. ||beta_k||_0 <= s  (one shared support for the cs_* variants)

    Parameters
    ----------
    variant : {"l0l2", "cs_l2", "cs_bbar", "zbar_l2", "bbar", "zbar_bbar"}, default="zbar_l2"
    s : int, default=10
        Maximum support size per task.
    lambda_ridge, lambda_bbar, lambda_zbar : float, default=0.0
        Penalty weights; a variant without a term requires its weight to be 0.
    solver : {"bcd"}, default="bcd"
        Block coordinate descent + local search (``mtl_opt.solvers.bcd``).
    standardize : bool, default=True
        Fit on features standardized per task; coefficients are reported on
        the original scale, the objective on the standardized one (where it is minimized).
    fit_intercept : bool, default=True
    max_iter : int, default=1000
        Maximum IHT sweeps.
    local_search : bool, default=True
    seed : int or None
        Accepted for API symmetry; the BCD heuristic is deterministic.

    Attributes
    ----------
    coef_ : ndarray (K, p), intercept_ : ndarray (K,), support_ : ndarray (K, p) bool
    result_ : FitResult
        status ``heuristic``: BCD proves no bound (see the exact solvers).
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
        "solver": [OneOf(("bcd",))],
        "standardize": [BOOLEAN],
        "fit_intercept": [BOOLEAN],
        "max_iter": [Interval(1, None, integer=True)],
        "local_search": [BOOLEAN],
        "seed": [OneOf((None,)), Interval(0, None, integer=True)],
    }

    def __init__(self, *, variant="zbar_l2", s=10, lambda_ridge=0.0, lambda_bbar=0.0,
                 lambda_zbar=0.0, solver="bcd", standardize=True, fit_intercept=True,
                 max_iter=1000, local_search=True, seed=None):
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
        self.seed = seed

    def _fit(self, data: MultiTaskData, init: FitResult | None = None) -> FitResult:
        scaler = None
        if self.standardize:
            data, scaler = data.standardize(how="task", center=self.fit_intercept, scale=True)
        problem = SparseProblem.from_data(
            data, variant=self.variant, s=self.s, lambda_ridge=self.lambda_ridge,
            lambda_bbar=self.lambda_bbar, lambda_zbar=self.lambda_zbar,
            fit_intercept=self.fit_intercept)
        start = None if init is None else init.extra.get("coef_fitted")
        if start is not None and np.shape(start) != (data.n_tasks, data.n_features):
            raise InvalidParameterError(
                f"init has coefficients of shape {np.shape(start)}; this data needs "
                f"{(data.n_tasks, data.n_features)}.")
        B, log, n_iter = fit_bcd(problem, start, max_iter=self.max_iter,
                                 local_search=self.local_search)
        intercept = problem.intercepts(B)
        coef, intercept_orig = (scaler.coef_to_original(B, intercept) if scaler
                                else (B.copy(), intercept))
        self.support_ = coef != 0
        self.n_iter_ = n_iter
        return FitResult(
            method=self.method, coef=coef, intercept=intercept_orig,
            objective=problem.objective(B), lower_bound=None, status="heuristic",
            objective_name=f"F ({self.variant}" + (", standardized data)" if scaler else ")"),
            solver="bcd (mtl_opt)", solver_version=__version__, log=log,
            task_names=list(data.task_names), feature_names=list(data.feature_names),
            extra={"coef_fitted": B, "n_iter": n_iter})
