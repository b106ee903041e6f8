"""Data generators that follow the papers' simulation setups.

Every generator takes ``seed`` (or a ``numpy.random.Generator``) and returns
the data together with the true parameters, so tests and benchmarks can
measure estimation error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from .data import MultiTaskData
from .errors import InvalidParameterError
from .params import (NONE, NONNEGATIVE, NONNEGATIVE_INT, POSITIVE_INT, InstanceOf, Interval, OneOf, SequenceOf,
                     validate_params)

__all__ = ["ArmulSimulation", "SyntheticProblem", "armul_simulation", "multisite",
           "smtl_simulation", "sparse_deviation_coefs", "sparse_heterogeneity"]

SEED = [NONE, *NONNEGATIVE_INT, InstanceOf((np.random.Generator,), "a numpy Generator")]
UNIT = [Interval(0, 1)]


@dataclass(frozen=True)
class SyntheticProblem:
    """Generated data plus the truth it came from."""

    data: MultiTaskData
    coef: np.ndarray          # (K, p) true task coefficients
    global_coef: np.ndarray   # (p,) the shared parameter the tasks deviate from


@validate_params({"d": POSITIVE_INT, "M": POSITIVE_INT, "n": [*POSITIVE_INT, SequenceOf(POSITIVE_INT[0])],
                  "s": NONNEGATIVE_INT, "sigma": [*NONNEGATIVE, SequenceOf(NONNEGATIVE[0])], "seed": SEED})
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

    Examples
    --------
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> problem = sparse_heterogeneity(d=5, M=3, n=40, s=1, seed=0)
    >>> problem.data.n_samples.tolist(), problem.coef.shape
    ([40, 40, 40], (3, 5))
    """
    if s > d:
        raise InvalidParameterError(f"need 0 <= s <= d; got d={d}, s={s}.")
    n_samples = np.broadcast_to(np.asarray(n, dtype=int), (M,))
    sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (M,))
    rng = np.random.default_rng(seed)
    coef, global_coef = sparse_deviation_coefs(d, M, s, rng)
    Xs, ys = [], []
    for m in range(M):
        X = rng.standard_normal((n_samples[m], d))
        Xs.append(X)
        ys.append(X @ coef[m] + sigmas[m] * rng.standard_normal(n_samples[m]))
    data = MultiTaskData(Xs, ys, task_names=[f"task{m}" for m in range(M)])
    return SyntheticProblem(data=data, coef=coef, global_coef=global_coef)


def sparse_deviation_coefs(d: int, M: int, s: int,
                           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(coef (M, d), global_coef (d,)): the parameters of ``sparse_heterogeneity``, without data.

    Shared with the MOLARB bandit environments, which draw their instances'
    parameters the same way (the paper's Section 4.1).
    """
    global_coef = rng.standard_normal(d)
    global_coef /= np.linalg.norm(global_coef)
    coef = np.tile(global_coef, (M, 1))
    for m in range(M):
        block = rng.choice(d, size=s, replace=False)
        fresh = rng.standard_normal(s)
        coef[m, block] = fresh * (np.linalg.norm(global_coef[block]) / max(np.linalg.norm(fresh), 1e-300))
    return coef, global_coef


@validate_params({"p": POSITIVE_INT, "K": POSITIVE_INT, "n": POSITIVE_INT, "s_true": POSITIVE_INT,
                  "q": POSITIVE_INT, "rho": [Interval(0, 1, open_high=True)],
                  "tau": [Interval(0, None, open_low=True, note="noise variance scale")],
                  "sigma_beta": NONNEGATIVE, "seed": SEED})
def smtl_simulation(p: int = 250, K: int = 4, n: int = 50, s_true: int = 10, q: int = 10, *,
                    rho: float = 0.5, tau: float = 1.0, sigma_beta: float = 0.05,
                    seed: int | np.random.Generator | None = None) -> SyntheticProblem:
    """The sparse-MTL simulation (Behdin et al., arXiv 2212.08697, Section 6).

    1. q candidate positions are drawn once from the p features; each gets
       mu_j = (random sign) * U(0.2, 0.5).
    2. Each task k keeps s_true of the q candidates (without replacement) and
       gets beta_jk = mu_j + N(0, sigma_beta^2) there, 0 elsewhere. q = s_true
       gives identical supports; larger q (smaller s_true / q) more
       heterogeneous ones.
    3. Rows of X_k are N(0, Sigma) with Sigma_ij = rho^|i-j|, generated by the
       AR(1) recursion x_1 = e_1, x_j = rho x_{j-1} + sqrt(1 - rho^2) e_j
       (exactly this covariance in O(n p), no p x p factorization).
    4. y_k = X_k beta_k + N(0, tau_k) with the noise variance
       tau_k ~ U(tau/2, 2 tau) drawn once per task; no intercept.

    Every task gets ``2 n`` rows: the paper's n training rows plus as many
    test rows. Split them 50/50 with
    ``train, test = problem.data.train_test_split(0.5, seed)``.

    Parameters
    ----------
    p, K : int
        Number of features and of tasks.
    n : int
        Training rows per task (``2 n`` rows are generated).
    s_true : int
        Support size of every task, 1 <= s_true <= q.
    q : int
        Number of candidate positions, s_true <= q <= p.
    rho : float, default=0.5
        Correlation of adjacent features, 0 <= rho < 1.
    tau : float, default=1.0
        Centre of the noise-variance range [tau/2, 2 tau], tau > 0.
    sigma_beta : float, default=0.05
        Standard deviation of a task's coefficients around mu (the paper
        summary does not give it; 0.05 keeps values similar but not equal).
    seed : int, Generator or None

    Returns
    -------
    SyntheticProblem
        ``coef`` (K, p) the task coefficients; ``global_coef`` (p,) the mu
        vector (nonzero exactly at the q candidates).

    Examples
    --------
    >>> from mtl_opt.synthetic import smtl_simulation
    >>> problem = smtl_simulation(p=30, K=3, n=40, s_true=4, q=6, seed=0)
    >>> problem.data.n_tasks, problem.data.n_features, problem.coef.shape
    (3, 30, (3, 30))
    """
    if not s_true <= q <= p:
        raise InvalidParameterError(f"need 1 <= s_true <= q <= p; got s_true={s_true}, q={q}, p={p}.")
    rng = np.random.default_rng(seed)
    candidates = rng.choice(p, size=q, replace=False)
    mu = np.zeros(p)
    mu[candidates] = rng.choice([-1.0, 1.0], size=q) * rng.uniform(0.2, 0.5, size=q)
    coef = np.zeros((K, p))
    for k in range(K):
        support = rng.choice(candidates, size=s_true, replace=False)
        coef[k, support] = mu[support] + sigma_beta * rng.normal(size=s_true)
    noise_var = rng.uniform(tau / 2, 2 * tau, size=K)
    Xs = [_ar1_design(2 * n, p, rho, rng) for _ in range(K)]
    ys = [X @ b + np.sqrt(v) * rng.normal(size=2 * n) for X, b, v in zip(Xs, coef, noise_var)]
    return SyntheticProblem(data=MultiTaskData(Xs, ys), coef=coef, global_coef=mu)


def _ar1_design(n: int, p: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """An (n, p) matrix whose rows are N(0, Sigma), Sigma_ij = rho^|i-j|, by an AR(1) filter."""
    scale = np.sqrt(1.0 - rho**2)
    innovations = rng.normal(size=(n, p))
    innovations[:, 0] /= scale   # so that x_1 = e_1 has unit variance
    return lfilter([scale], [1.0, -rho], innovations, axis=1)


@dataclass(frozen=True)
class ArmulSimulation(SyntheticProblem):
    """ARMUL's Section 5.1 data; ``inliers`` is the set S of tasks that follow the structure."""

    inliers: np.ndarray = None   # (m,) bool


@validate_params({"structure": [OneOf(("vanilla", "clustered", "lowrank"))], "m": POSITIVE_INT,
                  "n": POSITIVE_INT, "d": [Interval(3, None, integer=True)], "delta": NONNEGATIVE,
                  "epsilon": UNIT, "sigma": NONNEGATIVE, "seed": SEED})
def armul_simulation(structure: str = "vanilla", *, m: int = 30, n: int = 200, d: int = 50,
                     delta: float = 0.0, epsilon: float = 0.0, sigma: float = 1.0,
                     seed: int | np.random.Generator | None = None) -> ArmulSimulation:
    """ARMUL's Section 5.1 simulation (Duan and Wang): m tasks, n rows each, x ~ N(0, I_d).

    vanilla:   theta_j = 2 e_1 + delta_j
    clustered: theta_j = 2 e_{z_j} + delta_j with z_j = j mod 3 (0-based: task j, cluster (j + 1) mod 3)
    lowrank:   theta_j = (e_1, e_2, e_3) z_j + delta_j with z_j ~ N(0, I_3)

    delta_j is uniform on the sphere of radius ``delta``; then ceil(epsilon m)
    tasks, drawn without replacement, get theta_j uniform on the sphere of
    radius 2 (the outliers, outside ``inliers``).  y = X theta_j + N(0, sigma^2).
    ``global_coef`` is 2 e_1 for vanilla and zero otherwise.

    Examples
    --------
    >>> from mtl_opt.synthetic import armul_simulation
    >>> sim = armul_simulation("clustered", m=6, n=30, d=3, seed=0)
    >>> sim.data.n_tasks, sim.data.n_features
    (6, 3)
    """
    rng = np.random.default_rng(seed)

    def sphere(count, radius):
        draws = rng.standard_normal((count, d))
        return radius * draws / np.linalg.norm(draws, axis=1, keepdims=True)

    eye = np.eye(d)
    if structure == "vanilla":
        base = np.tile(2 * eye[0], (m, 1))
    elif structure == "clustered":
        base = 2 * eye[(np.arange(m) + 1) % 3]
    else:
        base = rng.standard_normal((m, 3)) @ eye[:3]
    coef = base + sphere(m, delta)
    outliers = rng.choice(m, size=int(np.ceil(epsilon * m - 1e-9)), replace=False)
    coef[outliers] = sphere(len(outliers), 2.0)
    inliers = np.ones(m, dtype=bool)
    inliers[outliers] = False
    Xs = [rng.standard_normal((n, d)) for _ in range(m)]
    ys = [X @ theta + sigma * rng.standard_normal(n) for X, theta in zip(Xs, coef)]
    data = MultiTaskData(Xs, ys, task_names=[f"task{j}" for j in range(m)])
    global_coef = 2 * eye[0] if structure == "vanilla" else np.zeros(d)
    return ArmulSimulation(data=data, coef=coef, global_coef=global_coef, inliers=inliers)


@validate_params({"n_tasks": POSITIVE_INT, "n_features": POSITIVE_INT, "n": POSITIVE_INT,
                  "constant_share": UNIT, "small_tasks": NONNEGATIVE_INT, "sigma": NONNEGATIVE, "seed": SEED})
def multisite(n_tasks: int = 10, n_features: int = 5, *, n=40, constant_share=0.3,
              small_tasks: int = 2, sigma=0.5,
              seed: int | np.random.Generator | None = None) -> SyntheticProblem:
    """Data shaped like real multi-site data: some covariates do not vary inside some sites.

    Tasks share a global coefficient vector plus N(0, 0.3^2) deviations.  In the first
    ``round(constant_share * n_tasks)`` tasks feature ``k % n_features`` is held at one
    site-specific value (a single-sex school, a site-level variable), and the last
    ``small_tasks`` tasks have ``n_features`` rows (so n_k <= p + 1 with an intercept).
    Features have different scales (sd 1, 10, 100, ...) and the sites different levels.
    """
    if small_tasks > n_tasks:
        raise InvalidParameterError(f"small_tasks must be in [0, n_tasks]; got {small_tasks!r}.")
    rng = np.random.default_rng(seed)
    p = n_features
    global_coef = rng.standard_normal(p)
    coef = global_coef + 0.3 * rng.standard_normal((n_tasks, p))
    scales = 10.0 ** (np.arange(p) % 3)
    n_constant = round(constant_share * n_tasks)
    Xs, ys = [], []
    for k in range(n_tasks):
        rows = p if k >= n_tasks - small_tasks else n
        X = scales * (rng.standard_normal((rows, p)) + rng.normal(0.0, 2.0, size=p))
        if k < n_constant:
            X[:, k % p] = scales[k % p] * rng.normal(0.0, 2.0)
        Xs.append(X)
        ys.append(1.0 + X @ coef[k] + sigma * rng.standard_normal(rows))
    data = MultiTaskData(Xs, ys, task_names=[f"site{k}" for k in range(n_tasks)])
    return SyntheticProblem(data=data, coef=coef, global_coef=global_coef)
