"""Stochastic multi-agent linear systems (AffPCL paper, Section 1.2).

Agent i = 1..n wants the fixed point of its expected system

    A_bar^i x_*^i = b_bar^i,   A_bar^i = E_{s~mu^i} A(s),   b_bar^i = E_{s~mu^i} b^i(s),

from samples s_t^i ~ mu^i.  All agents share the feature map A(s); the
objective is linearly parametrized, b^i(s) = Phi(s) theta^i with Phi(s) of
shape (d, k) (k = d in the paper).  A system knows its exact expectations
(``A_bar``, ``Phi_bar``), so x_*^i is a linear solve, not a Monte Carlo guess.

Three systems:

- ``GaussianSystem``: the paper's synthetic system (Appendix B),
  mu^i = N(m_i, I), A(s) = (I + eps_A s s^T) A_base, Phi(s) = (I + eps_b s s^T) Phi_base.
- ``FiniteStateSystem``: a finite state space with tables A(s), Phi(s) and
  distributions mu^i; ``random_finite_system`` builds a synthetic one.
- ``digits_system``: least squares on PCA features of scikit-learn's digits
  with mixed labels y_i = lam_i 1{digit in A} + (1 - lam_i) 1{digit in B}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ..errors import InvalidDataError
from ..params import NONE, NONNEGATIVE, NONNEGATIVE_INT, POSITIVE_INT, Interval, SequenceOf, validate_params


@dataclass(frozen=True)
class Sample:
    """One state per agent and the maps evaluated there (leading axes ``(..., n)``).

    ``A`` (..., n, d, d), ``Phi`` (..., n, d, k), ``b`` (..., n, d) with
    ``b[..., i, :] = Phi(s^i) theta^i``, and ``rho`` (..., n, n) with
    ``rho[..., i, j] = mu^i(s^j) / mu^0(s^j)``, or None when unknown.
    """

    states: np.ndarray
    A: np.ndarray
    Phi: np.ndarray
    b: np.ndarray
    rho: np.ndarray | None


class LinearSystem:
    """Base class: exact expectations and solutions; subclasses sample and evaluate.

    Subclasses implement ``sample_states(rng, size)`` -> states of shape
    (size, n, ...), ``features(states)`` -> (A, Phi) and, when the density
    ratios are known, ``density_ratio(states)``.
    """

    def __init__(self, A_bar, Phi_bar, theta):
        A_bar, Phi_bar, theta = (np.asarray(a, dtype=float) for a in (A_bar, Phi_bar, theta))
        if A_bar.ndim != 3 or A_bar.shape[1] != A_bar.shape[2]:
            raise InvalidDataError(f"A_bar must have shape (n, d, d); got {A_bar.shape}.")
        n, d = A_bar.shape[:2]
        if Phi_bar.ndim != 3 or Phi_bar.shape[:2] != (n, d):
            raise InvalidDataError(f"Phi_bar must have shape ({n}, {d}, k); got {Phi_bar.shape}.")
        if theta.shape != (n, Phi_bar.shape[2]):
            raise InvalidDataError(
                f"theta must have shape ({n}, {Phi_bar.shape[2]}) (agents x objective weights); "
                f"got {theta.shape}.")
        self.A_bar, self.Phi_bar, self.theta = A_bar, Phi_bar, theta

    @property
    def n_agents(self) -> int:
        return self.A_bar.shape[0]

    @property
    def dim(self) -> int:
        return self.A_bar.shape[1]

    @property
    def b_bar(self) -> np.ndarray:
        """(n, d): b_bar^i = Phi_bar^i theta^i."""
        return np.einsum("idk,ik->id", self.Phi_bar, self.theta)

    def solutions(self) -> np.ndarray:
        """(n, d): x_*^i = (A_bar^i)^-1 b_bar^i."""
        return np.linalg.solve(self.A_bar, self.b_bar[..., None])[..., 0]

    def central_solution(self) -> np.ndarray:
        """(d,): x_*^c = (mean_i A_bar^i)^-1 mean_i b_bar^i, the FedAvg fixed point (eq. 3)."""
        return np.linalg.solve(self.A_bar.mean(axis=0), self.b_bar.mean(axis=0))

    def strong_monotonicity(self) -> float:
        """lambda = min_i lambda_min(sym(A_bar^i)), the constant in the ln t/(lambda t) step."""
        sym = (self.A_bar + self.A_bar.transpose(0, 2, 1)) / 2
        return float(np.linalg.eigvalsh(sym)[:, 0].min())

    def center_agent(self) -> int:
        """The agent whose solution is closest to the central one: argmin_i ||x_*^i - x_*^c||."""
        return int(np.argmin(np.linalg.norm(self.solutions() - self.central_solution(), axis=1)))

    def draw(self, rng: np.random.Generator, size: int | None = None) -> Sample:
        """One state per agent (or ``size`` such rows) and the maps evaluated there."""
        states = self.sample_states(rng, 1 if size is None else size)
        if size is None:
            states = states[0]
        A, Phi = self.features(states)
        b = np.einsum("...idk,ik->...id", Phi, self.theta)
        return Sample(states, A, Phi, b, self.density_ratio(states))

    def sample_states(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement sample_states(rng, size).")

    def features(self, states) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} must implement features(states).")

    def density_ratio(self, states) -> np.ndarray | None:
        """rho[..., i, j] = mu^i(s^j) / mu^0(s^j) for states (..., n, ...); None if unknown."""
        return None


def _multiplicative(states: np.ndarray, eps: float, base: np.ndarray) -> np.ndarray:
    """(I + eps s s^T) base, for states (..., d)."""
    return base + eps * states[..., :, None] * (states @ base)[..., None, :]


def _random_unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.normal(size=(n, d))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _well_conditioned_pd(rng: np.random.Generator, d: int) -> np.ndarray:
    """Q diag(U[1, 2]) Q^T with Q a random rotation: positive definite, condition number <= 2."""
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (q * rng.uniform(1.0, 2.0, size=d)) @ q.T


LEVEL = [Interval(0, 1)]
SEED = [NONE, *NONNEGATIVE_INT]
DIGITS = SequenceOf(Interval(0, 9, integer=True))


class GaussianSystem(LinearSystem):
    """The paper's synthetic system (Appendix B), with exact Gaussian moments.

    mu^i = N(m_i, I), A(s) = (I + eps_A s s^T) A_base, Phi(s) = (I + eps_b s s^T) Phi_base.
    Since E_{mu^i} s s^T = I + m_i m_i^T,

        A_bar^i = (I + eps_A (I + m_i m_i^T)) A_base,   Phi_bar^i = (I + eps_b (I + m_i m_i^T)) Phi_base,

    and rho^i(s) = N(s; m_i, I) / (1/n sum_j N(s; m_j, I)) is known in closed form.
    """

    def __init__(self, means, theta, A_base, Phi_base, *, eps_A=1.0, eps_b=0.5):
        means = np.asarray(means, dtype=float)
        A_base, Phi_base = np.asarray(A_base, dtype=float), np.asarray(Phi_base, dtype=float)
        if means.ndim != 2:
            raise InvalidDataError(f"means must have shape (n, d); got {means.shape}.")
        d = means.shape[1]
        for name, base in (("A_base", A_base), ("Phi_base", Phi_base)):
            if base.shape != (d, d):
                raise InvalidDataError(f"{name} must have shape ({d}, {d}); got {base.shape}.")
        second = np.eye(d) + means[:, :, None] * means[:, None, :]
        eye = np.eye(d)
        super().__init__((eye + eps_A * second) @ A_base, (eye + eps_b * second) @ Phi_base, theta)
        self.means, self.A_base, self.Phi_base = means, A_base, Phi_base
        self.eps_A, self.eps_b = float(eps_A), float(eps_b)

    def sample_states(self, rng, size):
        return self.means + rng.normal(size=(size, *self.means.shape))

    def features(self, states):
        return (_multiplicative(states, self.eps_A, self.A_base),
                _multiplicative(states, self.eps_b, self.Phi_base))

    def density_ratio(self, states):
        # log N(s_j; m_i, I) up to a constant shared by all i: -||s_j - m_i||^2 / 2
        logp = -0.5 * ((states[..., None, :, :] - self.means[:, None, :]) ** 2).sum(-1)
        return np.exp(logp - logsumexp(logp, axis=-2, keepdims=True) + np.log(self.n_agents))


@validate_params({"n_agents": POSITIVE_INT, "dim": POSITIVE_INT, "delta_env": LEVEL,
                  "delta_obj": LEVEL, "eps_A": NONNEGATIVE, "eps_b": NONNEGATIVE, "seed": SEED})
def gaussian_system(n_agents=20, dim=5, *, delta_env=0.0, delta_obj=0.0, eps_A=1.0, eps_b=0.5,
                    seed=None) -> GaussianSystem:
    """The paper's instance: m_i = 4 delta_env v_i, theta^i = theta_base + delta_obj u_i.

    v_i, u_i are random unit vectors, theta_base ~ N(0, I); agent 0 is the
    paper's reference agent (m_0 = 0, theta^0 = theta_base).  A_base and
    Phi_base are random positive definite with condition number <= 2.
    """
    rng = np.random.default_rng(seed)
    means = 4.0 * delta_env * _random_unit(rng, n_agents, dim)
    theta_base = rng.normal(size=dim)
    theta = theta_base + delta_obj * _random_unit(rng, n_agents, dim)
    means[0], theta[0] = 0.0, theta_base
    A_base, Phi_base = _well_conditioned_pd(rng, dim), _well_conditioned_pd(rng, dim)
    return GaussianSystem(means, theta, A_base, Phi_base, eps_A=eps_A, eps_b=eps_b)


class FiniteStateSystem(LinearSystem):
    """A finite state space {0..S-1}: tables A(s) (S, d, d), Phi(s) (S, d, k), mu (n, S).

    A_bar^i = sum_s mu^i(s) A(s), Phi_bar^i = sum_s mu^i(s) Phi(s), and
    rho^i(s) = mu^i(s) / mean_j mu^j(s).
    """

    def __init__(self, A_table, Phi_table, theta, mu):
        A_table, Phi_table = np.asarray(A_table, dtype=float), np.asarray(Phi_table, dtype=float)
        mu = np.asarray(mu, dtype=float)
        if A_table.ndim != 3 or Phi_table.ndim != 3 or Phi_table.shape[:2] != A_table.shape[:2]:
            raise InvalidDataError(
                f"A_table must be (S, d, d) and Phi_table (S, d, k) with the same S and d; got "
                f"{A_table.shape} and {Phi_table.shape}.")
        if mu.ndim != 2 or mu.shape[1] != A_table.shape[0]:
            raise InvalidDataError(
                f"mu must have shape (n, {A_table.shape[0]}) (agents x states); got {mu.shape}.")
        if np.any(mu < 0) or not np.allclose(mu.sum(axis=1), 1.0):
            raise InvalidDataError("each row of mu must be a probability distribution over the states.")
        super().__init__(np.einsum("is,sab->iab", mu, A_table),
                         np.einsum("is,sab->iab", mu, Phi_table), theta)
        self.A_table, self.Phi_table, self.mu = A_table, Phi_table, mu
        self._cdf = np.cumsum(mu, axis=1)
        self._cdf[:, -1] = 1.0

    @property
    def n_states(self) -> int:
        return self.mu.shape[1]

    def sample_states(self, rng, size):
        """Inverse-CDF sampling for all agents at once (rows shifted by the agent index)."""
        n, S = self.mu.shape
        shift = np.arange(n)
        flat = (self._cdf + shift[:, None]).ravel()
        found = np.searchsorted(flat, rng.random((size, n)) + shift, side="right") - shift * S
        return np.minimum(found, S - 1)

    def features(self, states):
        return self.A_table[states], self.Phi_table[states]

    def density_ratio(self, states):
        return ratio_from_distributions(self.mu, states)


def ratio_from_distributions(mu: np.ndarray, states: np.ndarray) -> np.ndarray:
    """rho[..., i, j] = mu[i, s^j] / mean_k mu[k, s^j] for integer states (..., n)."""
    at = np.moveaxis(mu[:, states], 0, -2)  # (..., n_i, n_j)
    return at / at.mean(axis=-2, keepdims=True)


@validate_params({"n_agents": POSITIVE_INT, "dim": POSITIVE_INT, "n_states": POSITIVE_INT,
                  "delta_env": LEVEL, "delta_obj": LEVEL, "eps_A": NONNEGATIVE, "eps_b": NONNEGATIVE,
                  "seed": SEED})
def random_finite_system(n_agents=10, dim=3, n_states=20, *, delta_env=0.0, delta_obj=0.0,
                         eps_A=1.0, eps_b=0.5, seed=None) -> FiniteStateSystem:
    """A finite analogue of the Gaussian system.

    State s carries a fixed vector v_s ~ N(0, I): A(s) = (I + eps_A v_s v_s^T) A_base,
    Phi(s) = (I + eps_b v_s v_s^T) Phi_base; mu^i = (1 - delta_env) uniform + delta_env pi_i
    with pi_i ~ Dirichlet(1) (so ||mu^i - mu^j||_TV <= delta_env);
    theta^i = theta_base + delta_obj u_i.
    """
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_states, dim))
    A_base, Phi_base = _well_conditioned_pd(rng, dim), _well_conditioned_pd(rng, dim)
    mu = (1 - delta_env) / n_states + delta_env * rng.dirichlet(np.ones(n_states), size=n_agents)
    theta = rng.normal(size=dim) + delta_obj * _random_unit(rng, n_agents, dim)
    return FiniteStateSystem(_multiplicative(vectors, eps_A, A_base),
                             _multiplicative(vectors, eps_b, Phi_base), theta, mu)


@validate_params({"n_agents": POSITIVE_INT, "delta_obj": LEVEL,
                  "dim": [Interval(2, 65, integer=True, note="intercept + up to 64 PCA components")],
                  "set_a": [DIGITS], "set_b": [DIGITS]})
def digits_system(n_agents=10, dim=10, *, delta_obj=0.0, set_a=(0, 1, 2, 3, 4),
                  set_b=(0, 6, 8, 9)) -> FiniteStateSystem:
    """Least squares on scikit-learn's digits with mixed labels (the paper's FEMNIST task).

    Features phi(z) = [1, PCA_{dim-1}(z) whitened]; labels
    y_i(z) = lam_i 1{digit in set_a} + (1 - lam_i) 1{digit in set_b} with lam_i
    evenly spaced in [0.5 - delta_obj/2, 0.5 + delta_obj/2].  Every agent samples
    images uniformly from the whole set (shared environment, rho = 1), so
    A(z) = phi phi^T, b^i(z) = phi(z) y_i(z) = Phi(z) theta^i with
    Phi(z) = phi(z) [1{z in A}, 1{z in B}] (d x 2) and theta^i = (lam_i, 1 - lam_i),
    and x_*^i is the least-squares fit of y_i on phi over all 1797 images.
    """
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    images, digits = load_digits(return_X_y=True)
    pcs = PCA(n_components=dim - 1, whiten=True, svd_solver="full").fit_transform(images)
    phi = np.column_stack([np.ones(len(images)), pcs])
    labels = np.column_stack([np.isin(digits, set_a), np.isin(digits, set_b)]).astype(float)
    lam = 0.5 + delta_obj * (np.linspace(-0.5, 0.5, n_agents) if n_agents > 1 else np.zeros(1))
    mu = np.full((n_agents, len(images)), 1.0 / len(images))
    return FiniteStateSystem(phi[:, :, None] * phi[:, None, :], phi[:, :, None] * labels[:, None, :],
                             np.column_stack([lam, 1 - lam]), mu)
