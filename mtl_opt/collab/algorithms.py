"""Collaborative learners for stochastic linear systems, vectorized over agents.

Every method is a stateless object holding its hyperparameters:
``start(system, horizon, rng) -> state`` (a dict of arrays) and
``step(state, sample, alpha, t)`` (updates ``state`` in place) and
``estimate(state) -> (n, d)``, the personalized decisions x^i.
With g^i(x) = A(s^i) x - b^i(s^i) (agent i's stochastic residual) and
g^0(x) = 1/n sum_i g^i(x):

    independent   x^i <- x^i - alpha g^i(x^i)
    fedavg        x   <- x   - alpha g^0(x)                      (one model for all)
    finetune      fedavg for the first ``switch`` steps, then independent
    pfedme        x^i <- x^i - alpha (g^i(x^i) + lam (x^i - w));  w <- w - alpha lam (w - mean_i x^i)
    ditto         w   <- w   - alpha g^0(w);  x^i <- x^i - alpha (g^i(x^i) + lam (x^i - w))
    ifca          agent i joins cluster argmin_j ||Ahat^i w_j - bhat^i|| (its running means),
                  w_j <- w_j - alpha mean_{i in cluster j} g^i(w_j)
    affpcl        Algorithm 1 of the paper (see ``AffPCL``)
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidParameterError
from ..params import Interval, OneOf, validate
from .systems import FiniteStateSystem, LinearSystem, Sample, ratio_from_distributions


def residual(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """g = A x - b per agent: A (n, d, d), b (n, d), x (n, d) or (d,) broadcast."""
    return np.einsum("...ab,...b->...a", A, x) - b


class Method:
    """Base class: checks hyperparameters against ``param_constraints`` (missing ones from
    ``defaults``) and stores them as attributes; the run state lives in ``start``'s dict."""

    name: str = ""
    param_constraints: dict = {}

    def __init__(self, **params):
        unknown = sorted(set(params) - set(self.param_constraints))
        if unknown:
            raise InvalidParameterError(
                f"{type(self).__name__} has no parameter(s) {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(sorted(self.param_constraints)) or 'none'}.")
        params = {**self.defaults, **params}
        validate(type(self).__name__, params, self.param_constraints)
        for name, value in params.items():
            setattr(self, name, value)

    defaults: dict = {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.param_constraints)
        return f"{type(self).__name__}({args})"

    def start(self, system: LinearSystem, horizon: int, rng: np.random.Generator) -> dict:
        return {"x": np.zeros((system.n_agents, system.dim))}

    def step(self, state: dict, sample: Sample, alpha: float, t: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement step().")

    def estimate(self, state: dict) -> np.ndarray:
        return state["x"]


def independent_step(x: np.ndarray, sample: Sample, alpha: float) -> None:
    """In place: x^i <- x^i - alpha (A(s^i) x^i - b^i(s^i))."""
    x -= alpha * residual(sample.A, sample.b, x)


def fedavg_step(x: np.ndarray, sample: Sample, alpha: float) -> None:
    """In place, every row set to x <- x - alpha 1/n sum_i (A(s^i) x - b^i(s^i)), x = row 0 (eq. 4)."""
    x[:] = x[0] - alpha * residual(sample.A, sample.b, x[0]).mean(axis=0)


class Independent(Method):
    """x^i <- x^i - alpha (A(s^i) x^i - b^i(s^i)): no communication."""

    name = "independent"

    def step(self, state, sample, alpha, t):
        independent_step(state["x"], sample, alpha)


class FedAvg(Method):
    """x <- x - alpha 1/n sum_i (A(s^i) x - b^i(s^i)); every agent uses x (eq. 4)."""

    name = "fedavg"

    def step(self, state, sample, alpha, t):
        fedavg_step(state["x"], sample, alpha)


class FineTuning(Method):
    """FedAvg for the first ``switch`` steps (default: half the horizon), then independent."""

    name = "finetune"
    param_constraints = {"switch": [Interval(0, None, integer=True), OneOf((None,))]}

    defaults = {"switch": None}

    def start(self, system, horizon, rng):
        switch = horizon // 2 if self.switch is None else self.switch
        return {**super().start(system, horizon, rng), "switch": switch}

    def step(self, state, sample, alpha, t):
        (fedavg_step if t < state["switch"] else independent_step)(state["x"], sample, alpha)


class PFedMe(Method):
    """pFedMe (T Dinh et al., 2020), one inner and one outer step per round.

    x^i <- x^i - alpha (g^i(x^i) + lam (x^i - w));   w <- w - alpha lam (w - mean_i x^i).
    """

    name = "pfedme"
    param_constraints = {"lam": [Interval(0, None)]}

    defaults = {"lam": 15.0}

    def start(self, system, horizon, rng):
        return {**super().start(system, horizon, rng), "w": np.zeros(system.dim)}

    def step(self, state, sample, alpha, t):
        x, w = state["x"], state["w"]
        x -= alpha * (residual(sample.A, sample.b, x) + self.lam * (x - w))
        w -= alpha * self.lam * (w - x.mean(axis=0))


class Ditto(PFedMe):
    """Ditto (Li et al., 2021): w <- w - alpha g^0(w);  x^i <- x^i - alpha (g^i(x^i) + lam (x^i - w))."""

    name = "ditto"

    def step(self, state, sample, alpha, t):
        x, w = state["x"], state["w"]
        x -= alpha * (residual(sample.A, sample.b, x) + self.lam * (x - w))
        w -= alpha * residual(sample.A, sample.b, w).mean(axis=0)


class IFCA(Method):
    """Clustered FL (Ghosh et al., 2020) with ``n_clusters`` models.

    Cluster models start at N(0, init_scale^2 I) (random, as in IFCA).  Each
    step agent i joins argmin_j ||Ahat^i w_j - bhat^i||, where Ahat^i, bhat^i
    are the running means of its own samples, then
    w_j <- w_j - alpha mean_{i in cluster j} g^i(w_j).
    """

    name = "ifca"
    param_constraints = {"n_clusters": [Interval(1, None, integer=True)],
                         "init_scale": [Interval(0, None)]}

    defaults = {"n_clusters": 10, "init_scale": 1.0}

    def start(self, system, horizon, rng):
        n, d = system.n_agents, system.dim
        return {"w": self.init_scale * rng.normal(size=(self.n_clusters, d)),
                "A_mean": np.zeros((n, d, d)), "b_mean": np.zeros((n, d)),
                "cluster": np.zeros(n, dtype=int)}

    def step(self, state, sample, alpha, t):
        state["A_mean"] += (sample.A - state["A_mean"]) / (t + 1)
        state["b_mean"] += (sample.b - state["b_mean"]) / (t + 1)
        fit = np.einsum("iab,jb->ija", state["A_mean"], state["w"]) - state["b_mean"][:, None, :]
        cluster = np.linalg.norm(fit, axis=2).argmin(axis=1)
        onehot = np.eye(self.n_clusters)[cluster]  # (n, clusters)
        g = np.einsum("iab,ib->ia", sample.A, state["w"][cluster]) - sample.b
        counts = onehot.sum(axis=0)
        state["w"] -= alpha * (onehot.T @ g) / np.maximum(counts, 1)[:, None]
        state["cluster"] = cluster

    def estimate(self, state):
        return state["w"][state["cluster"]]


def coe_residual(Phi: np.ndarray, b: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Central objective estimation residual per agent.

    Square Phi (k = d, the paper's eq. 7): Phi(s) theta - b(s).  Tall Phi
    (k < d): the normal equations Phi(s)^T (Phi(s) theta - b(s)).
    """
    r = np.einsum("...dk,...k->...d", Phi, theta) - b
    if Phi.shape[-1] == Phi.shape[-2]:
        return r
    return np.einsum("...dk,...d->...k", Phi, r)


def affpcl_direction(sample: Sample, x: np.ndarray, x_c: np.ndarray, theta_c: np.ndarray,
                     rho: np.ndarray | None) -> np.ndarray:
    """AffPCL's personalized direction (eq. 8), for any leading sample axes.

        g~^i = g^i(x^i) + g^{c=>i}(x^c) - g^{c->i}(x^c),
        g^{c->j}(x) = A(s^j) x - Phi(s^j) theta^c,
        g^{c=>i}(x) = 1/n sum_j rho^i(s^j) g^{c->j}(x)     (server-side importance correction)

    ``rho`` None means rho = 1 (shared environments).
    """
    bc = np.einsum("...dk,k->...d", sample.Phi, theta_c)
    to_agent = residual(sample.A, bc, x_c)  # g^{c->j}(x^c), (..., n, d)
    if rho is None:
        central = np.broadcast_to(to_agent.mean(axis=-2, keepdims=True), to_agent.shape)
    else:
        central = np.einsum("...ij,...jd->...id", rho, to_agent) / rho.shape[-1]
    return residual(sample.A, sample.b, x) + central - to_agent


class AffPCL(Method):
    """AffPCL, Algorithm 1 of the paper (Appendix C.1), all agents in parallel.

        x^c     <- x^c     - alpha 1/n sum_i (A(s^i) x^c - b^i(s^i))     central decision learning (4)
        theta^c <- theta^c - alpha 1/n sum_i (Phi(s^i) theta^c - b^i(s^i))   central objective (7)
        x^i     <- x^i     - alpha g~^i                                   personalized step (8)

    with g~^i from ``affpcl_direction`` (all terms at the old x^c, theta^c).
    ``ratios``: "known" uses the system's density ratios (rho = 1 if it has
    none); "estimated" (finite state spaces, Section 6.1) uses the naive
    Monte Carlo estimate rho^_t^i(s) = muhat^i(s) / mean_j muhat^j(s) from
    the visit counts of all samples so far, including the current one;
    "none" drops importance correction (rho = 1).
    """

    name = "affpcl"
    param_constraints = {"ratios": [OneOf(("known", "estimated", "none"))]}

    defaults = {"ratios": "known"}

    def start(self, system, horizon, rng):
        n, d = system.n_agents, system.dim
        state = {"x": np.zeros((n, d)), "x_c": np.zeros(d), "theta_c": np.zeros(system.theta.shape[1])}
        if self.ratios == "estimated":
            if not isinstance(system, FiniteStateSystem):
                raise InvalidParameterError(
                    "AffPCL(ratios='estimated') needs a finite state space (FiniteStateSystem); "
                    f"got {type(system).__name__}. Use ratios='known' or 'none'.")
            state["counts"] = np.zeros((n, system.n_states))
        return state

    def _ratios(self, state, sample):
        if self.ratios == "none":
            return None
        if self.ratios == "known":
            return sample.rho
        state["counts"][np.arange(len(sample.states)), sample.states] += 1
        return ratio_from_distributions(state["counts"], sample.states)

    def step(self, state, sample, alpha, t):
        x_c, theta_c = state["x_c"], state["theta_c"]
        direction = affpcl_direction(sample, state["x"], x_c, theta_c, self._ratios(state, sample))
        state["x"] -= alpha * direction
        state["x_c"] = x_c - alpha * residual(sample.A, sample.b, x_c).mean(axis=0)
        state["theta_c"] = theta_c - alpha * coe_residual(sample.Phi, sample.b, theta_c).mean(axis=0)


METHODS = {cls.name: cls for cls in (Independent, FedAvg, FineTuning, PFedMe, Ditto, IFCA, AffPCL)}


def make_method(name: str, **params) -> Method:
    """A method by its name in ``METHODS`` with hyperparameters checked."""
    if name not in METHODS:
        raise InvalidParameterError(f"unknown method {name!r}; choose from {', '.join(METHODS)}.")
    return METHODS[name](**params)


def step_size(kind: str, *, alpha: float | None = None, horizon: int | None = None,
              lam: float | None = None) -> float:
    """The constant step: ``alpha`` ("constant") or ln T / (lam T) ("log", Proposition 1)."""
    if kind == "constant":
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 < alpha < math.inf:
            raise InvalidParameterError(f"a constant step needs a finite alpha > 0; got {alpha!r}.")
        return float(alpha)
    if kind == "log":
        if not isinstance(horizon, int) or horizon < 2:
            raise InvalidParameterError(f"the ln T/(lam T) step needs a horizon T >= 2; got {horizon!r}.")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0 < lam < math.inf:
            raise InvalidParameterError(
                f"the ln T/(lam T) step needs lam > 0 (min_i lambda_min(sym A_bar^i)); got {lam!r}. "
                f"Give lam explicitly when the system is not strongly monotone.")
        return math.log(horizon) / (lam * horizon)
    raise InvalidParameterError(f"step must be 'constant' or 'log'; got {kind!r}.")
