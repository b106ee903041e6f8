"""Data generators that follow the papers' simulation setups.

Every generator takes ``seed`` (or a ``numpy.random.Generator``) and returns
the data together with the true parameters, so tests and benchmarks can
measure estimation error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import MultiTaskData
from .errors import InvalidParameterError


@dataclass(frozen=True)
class SyntheticProblem:
    """Generated data plus the truth it came from."""

    data: MultiTaskData
    coef: np.ndarray          # (K, p) true task coefficients
    global_coef: np.ndarray   # (p,) the shared parameter the tasks deviate from


def sparse_heterogeneity(d: int, M: int, n, s: int, *, sigma=0.1,
                         seed: int | np.random.Generator | None = None) -> SyntheticProblem:
    """MOLAR's Section 4.1 setup: tasks that differ from a global parameter in s coordinates.

    beta* is uniform on the unit sphere S^{d-1}.  For each task m, s of the d
    coordinates are drawn uniformly at random and given new N(0, 1) values,
    rescaled so that the redrawn block keeps the norm it had in beta* (hence
    ||beta_m||_2 = ||beta*||_2 = 1 and ||beta_m - beta*||_0 <= s: the paper
    renormalizes to keep the norm, and rescaling only the redrawn block keeps
    the heterogeneity sparse as Condition 1 requires).  Features are i.i.d.
    N(0, 1), noise N(0, sigma_m^2); no intercept.

    Parameters
    ----------
    d, M : int
        Number of covariates and of tasks.
    n : int or sequence of int
        Observations per task (one number for all, or one per task).
    s : int
        Number of heterogeneous coordinates per task, 0 <= s <= d.
    sigma : float or sequence of float
        Noise standard deviation (one for all tasks, or one per task).
    seed : int, Generator or None
    """
    if d < 1 or M < 1 or not 0 <= s <= d:
        raise InvalidParameterError(f"need d >= 1, M >= 1 and 0 <= s <= d; got d={d}, M={M}, s={s}.")
    n_samples = np.broadcast_to(np.asarray(n, dtype=int), (M,))
    sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (M,))
    if np.any(n_samples < 1) or np.any(sigmas < 0):
        raise InvalidParameterError("need n >= 1 and sigma >= 0 for every task.")
    rng = np.random.default_rng(seed)
    global_coef = rng.standard_normal(d)
    global_coef /= np.linalg.norm(global_coef)
    coef = np.tile(global_coef, (M, 1))
    for m in range(M):
        block = rng.choice(d, size=s, replace=False)
        fresh = rng.standard_normal(s)
        coef[m, block] = fresh * (np.linalg.norm(global_coef[block]) / max(np.linalg.norm(fresh), 1e-300))
    Xs, ys = [], []
    for m in range(M):
        X = rng.standard_normal((n_samples[m], d))
        Xs.append(X)
        ys.append(X @ coef[m] + sigmas[m] * rng.standard_normal(n_samples[m]))
    data = MultiTaskData(Xs, ys, task_names=[f"task{m}" for m in range(M)])
    return SyntheticProblem(data=data, coef=coef, global_coef=global_coef)
