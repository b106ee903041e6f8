"""MOLAR's algorithm (Algorithm 1 of the MOLAR paper): per-task OLS, the weighted median, thresholding.

``molar_fit`` runs it from per-task fits (``solvers.least_squares.per_task_ols``); the weighted
median is solved by a method of ``molar.methods`` (closed form, or an LP on a backend), each
with a proven lower bound.
``estimators.molar.MOLAR`` documents the rules (weights, thresholds, unidentified coordinates)
and assembles the result; ``molar_coefs`` is the array API the bandits use.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ...data import MultiTaskData
from ...deadline import Deadline
from ...errors import InvalidDataError, InvalidParameterError
from ...formulations import molar as formulation
from ...params import NONE, NONNEGATIVE, Interval, OneOf, SequenceOf, validate_params
from ..least_squares import TaskFits, per_task_ols
from ..method import Method, SolverRun
from .methods import METHODS, MedianProblem, solve_median
from ..options import SolveOptions


def noise_levels(sigma, fits: TaskFits, n_samples, task_names, owner: str = "MOLAR") -> np.ndarray:
    """sigma_m as given (one float or one per task), or sqrt(RSS_m / (n_m - d_m)) from the OLS residuals."""
    K = len(fits.fits)
    if sigma is None:
        dof = np.asarray(n_samples) - fits.dims
        estimate = np.array([np.sqrt(f.rss / df) for f, df in zip(fits.fits, dof)])
        exact = [name for name, s in zip(task_names, estimate) if s == 0]
        if exact:
            raise InvalidDataError(
                f"tasks {exact} are fitted exactly by OLS (zero residual variance), so their "
                f"weight n_m / sigma_m^2 is infinite; pass sigma= explicitly.")
        return estimate
    given = np.asarray(sigma, dtype=float)
    if given.ndim == 0:
        given = np.full(K, float(given))
    if given.shape != (K,) or not np.all(np.isfinite(given)) or np.any(given <= 0):
        raise InvalidParameterError(
            f"The 'sigma' parameter of {owner} must be a positive float or {K} positive floats "
            f"(one per task); got {sigma!r}.")
    return given


class MolarFit(NamedTuple):
    """Every stage of one MOLAR fit, on the stacked coefficient scale (intercept column included)."""

    local: np.ndarray          # (K, d) per-task OLS estimates (0 where not used)
    gram_inv_diag: np.ndarray  # (K, d) diag((A_S^T A_S)^{-1}) (NaN where not used)
    used: np.ndarray           # (K, d) bool: the coordinates each task identifies and fits
    n_samples: np.ndarray      # (K,)
    sigma: np.ndarray          # (K,) noise levels used
    weights: np.ndarray        # (K,) n_m / sigma_m^2
    median: SolverRun          # the global estimate (0 where no task identifies) and its certificate
    own: np.ndarray            # (K, d) local, offset-corrected for the filled coordinates
    coef: np.ndarray           # (K, d) after thresholding and filling
    log: list

    @property
    def entry_weights(self) -> np.ndarray:
        """(K, d) the weight of each task in each coordinate's median: w_m where used, else 0."""
        return np.where(self.used, self.weights[:, None], 0.0)

    @property
    def dims(self) -> np.ndarray:
        """(K,) d_m, the number of coefficients each task fits."""
        return self.used.sum(axis=1)


def molar_fit(fits: TaskFits, n_samples, sigma, *, c_gamma: float, threshold: str,
              method: Method = METHODS["closed_form"], backend=None,
              options: SolveOptions | None = None, deadline: Deadline | None = None,
              median: SolverRun | None = None) -> MolarFit:
    """Algorithm 1 from per-task fits: weighted median (by ``method``, a ``molar.methods``
    entry, on ``backend`` with the fit's ``options`` until its ``deadline``, which the closed
    form does not need; or ``median``, solved already), fill, then thresholding toward it.

    The one implementation behind ``MOLAR``, ``molar_coefs`` and ``MOLARLogistic``; the
    rule for coordinates a task does not use is in ``MOLAR``'s docstring.
    """
    local, gram_inv_diag, used = fits.coef, fits.gram_inv_diag, fits.used
    n = np.asarray(n_samples, dtype=float)
    weights = n / sigma**2
    clock = time.perf_counter()
    result = median if median is not None else solve_median(
        method, median_problem(fits, weights), options, deadline, backend)
    log = [{"stage": "median", "time": time.perf_counter() - clock}]
    clock = time.perf_counter()
    z = result.estimate
    own = local + fits.offset_correction(z)
    cut = formulation.thresholds(c_gamma, sigma, n, fits.dims, gram_inv_diag)
    final = np.where(used, formulation.shrink(own, z, cut, threshold), z[None, :])
    log.append({"stage": "threshold", "time": time.perf_counter() - clock})
    return MolarFit(local, gram_inv_diag, used, np.asarray(n_samples), sigma, weights, result, own,
                    final, log)


def median_problem(fits: TaskFits, weights) -> MedianProblem:
    """The weighted-median problem of the per-task fits, task m weighted ``weights[m]`` where it
    fits the coordinate."""
    return MedianProblem(fits.coef, np.where(fits.used, np.asarray(weights)[:, None], 0.0))


#: A known noise level: one for every task, or one per task (None: estimated).
SIGMA = [NONE, Interval(0.0, None, open_low=True), SequenceOf(Interval(0.0, None, open_low=True))]


@validate_params({"sigma": SIGMA, "c_gamma": NONNEGATIVE, "threshold": [OneOf(formulation.THRESHOLDS)]})
def molar_coefs(Xs, ys, *, sigma=None, c_gamma: float = 1.0, threshold: str = "hard") -> np.ndarray:
    """MOLAR (Algorithm 1, closed-form median) on per-task arrays, no intercept: an (M, d) array.

    ``sigma`` is the known noise level (one float or one per task), or None to
    estimate it from the OLS residuals; gamma_m = c_gamma sqrt(ln(min(n_total/n_m, d_m))) sigma_m.
    Same code path, and the same handling of coordinates a task does not identify,
    as ``MOLAR(fit_intercept=False)``.
    """
    data = MultiTaskData(Xs, ys)
    fits = per_task_ols(data, fit_intercept=False, residual_dof=int(sigma is None))
    levels = noise_levels(sigma, fits, data.n_samples, data.task_names, "molar_coefs")
    return molar_fit(fits, data.n_samples, levels, c_gamma=c_gamma, threshold=threshold).coef
