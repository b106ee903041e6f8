"""MOLARB: the MOLAR paper's multitask bandit (Algorithm 2, Model-C; Algorithm 5, Model-P).

The batching, greedy play and eligibility rule are ``BatchedGreedy``'s; at
the end of a batch MOLAR (Algorithm 1) runs on the eligible instances' new
observations, over all instances at once (Model-C) or one arm at a time
(Model-P).  With ``keep_history`` (the paper's "use_hist", Appendix J.3.5)
the weighted median still comes from the new batch only, which keeps it
independent of earlier estimates, while the thresholding step shrinks each
instance's OLS estimate from all its observations.
"""

from __future__ import annotations

import numpy as np

from ..data import MultiTaskData
from ..params import Interval, OneOf
from ..formulations.molar import shrink, thresholds
from ..solvers.molar.lasso_debias import pooled_median
from ..solvers.least_squares import per_task_ols
from ..solvers.molar.estimate import molar_coefs, noise_levels
from .linear_policies import BatchedGreedy


class MOLARB(BatchedGreedy):
    """Batched greedy multitask bandit whose estimates come from MOLAR.

    Parameters
    ----------
    c_gamma : float, default=1.0
        Threshold scale, gamma_m = c_gamma sqrt(ln(min(n_total / n_m, d))) sigma_m
        (``molar_coefs``).  The paper's bandit runs use c_gamma = 0.5 = sigma in a
        convention that folds sigma into the constant, i.e. 1.0 here, which is
        also the smallest constant Theorem 1 allows.  Appendix J.1 prints the
        threshold as gamma_m = c_gamma ln((n_[M] / n_m) ^ d) / n_m, which taken
        literally is far below the OLS noise (MOLAR would return OLS), so a
        root was lost; we follow Theorem 1.  Reading it as
        c_gamma ln(.) sqrt([(X^T X)^{-1}]_kk) instead would mean
        c_gamma = sqrt(ln(min(n_total / n_m, d))) (about 1.5-1.8) here.
    threshold : {"hard", "soft"}, default="hard"
        Hard thresholding, as in the paper's synthetic bandit runs.
    sigma : float or None, default=None
        Known noise standard deviation (the paper assumes it known); None
        estimates sigma_m from each instance's OLS residuals.
    h0, min_samples, keep_history
        See ``BatchedGreedy`` (first batch length, the eligibility rule C_q,
        the "use_hist" variant).  min_samples must exceed d (OLS per instance).
    """

    name = "molarb"
    least_squares = True

    param_constraints = {
        **BatchedGreedy.param_constraints,
        "c_gamma": [Interval(0.0, None)],
        "threshold": [OneOf(("hard", "soft"))],
        "sigma": [OneOf((None,)), Interval(0.0, None, open_low=True)],
    }

    def __init__(self, *, c_gamma=1.0, threshold="hard", sigma=None, h0=1, min_samples=None,
                 keep_history=False):
        self.c_gamma, self.threshold, self.sigma = c_gamma, threshold, sigma
        super().__init__(h0=h0, min_samples=min_samples, keep_history=keep_history)

    def _estimate(self, Xs, ys, history):
        if history is None:
            return molar_coefs(Xs, ys, sigma=self.sigma, c_gamma=self.c_gamma, threshold=self.threshold)
        batch, every = MultiTaskData(Xs, ys), MultiTaskData(*history)
        batch_fits = per_task_ols(batch, False)
        every_fits = per_task_ols(every, False, residual_dof=int(self.sigma is None))
        sigma = noise_levels(self.sigma, every_fits, every.n_samples, every.task_names, "MOLARB")
        center = pooled_median(batch_fits.coef,
                               np.where(batch_fits.used, (batch.n_samples / sigma**2)[:, None], 0.0))
        cut = thresholds(self.c_gamma, sigma, every.n_samples, every_fits.dims,
                         every_fits.gram_inv_diag)
        shrunk = shrink(every_fits.coef + every_fits.offset_correction(center), center, cut,
                        self.threshold)
        return np.where(every_fits.used, shrunk, center[None, :])
