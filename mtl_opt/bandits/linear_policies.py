"""Batched greedy policies for multitask linear bandits: MOLARB's frame and its baselines.

Every policy here runs Algorithm 2 of the MOLAR paper and differs only in
the estimator used at the end of a batch:

- rounds are split into doubling batches H_0 = [1, h0] and
  H_q = (2^(q-1) h0, 2^q h0], so estimates change at t = h0, 2 h0, 4 h0, ...;
- within a batch a served instance pulls argmax_a <x_a, beta_hat>, ties broken
  at random; beta_hat starts at 0, so play is uniformly random until an
  instance's first estimate (no other forced exploration: the paper relies on
  diverse contexts, Condition 9);
- at the end of a batch the instances with at least ``min_samples``
  observations gathered since their last update (the set C_q) are
  re-estimated from those observations and their buffers emptied; the others
  keep their estimate and carry their observations into the next batch.
  ``keep_history=True`` is the paper's "use_hist" variant (Appendix J.3.5).

Model-P (``env.per_arm``): each (instance, arm) pair has its own parameter,
buffer and eligibility, and estimators that pool instances (MOLAR, RM) pool
over the instances of one arm at a time (Algorithm 5).  Algorithm 5 states
C_q with an instance's pulls summed over arms but then re-estimates arm a
for the set C_{a,q}; we count each arm's own pulls, since its least-squares
fit needs more than d of them.

The clock t counts the rounds handed to the policy; the runner skips rounds
that serve nobody, which carry no decision.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from ..errors import InvalidParameterError
from ..params import BOOLEAN, Interval, OneOf, validate_attributes
from ..solvers.molar.lasso_debias import lasso_coefs, rm_coefs
from ..formulations.least_squares import ols
from .base import Environment, Policy, Round


def is_batch_end(t: int, h0: int) -> bool:
    """Whether round t (1-based) closes a batch: t = 2^q h0 for some q >= 0."""
    return t % h0 == 0 and (t // h0) & (t // h0 - 1) == 0


def greedy_arms(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise argmax of ``scores`` (b, K), ties broken uniformly at random."""
    best = scores == scores.max(axis=1, keepdims=True)
    return np.argmax(np.where(best, rng.random(scores.shape), -1.0), axis=1)


class BatchedGreedy(Policy):
    """Algorithm 2's batching, greedy play and eligibility rule around an estimator.

    Subclasses implement ``_estimate(Xs, ys, history)`` and set
    ``least_squares`` when it fits OLS per unit (then ``min_samples`` > d).

    Parameters
    ----------
    h0 : int, default=1
        Length of the first batch (the paper uses 1).
    min_samples : int or None, default=None
        Observations an instance (Model-P: an instance's arm) needs since its
        last update to be re-estimated (the eligibility rule C_q); None means
        d + 1, the fewest with which least squares is defined.  This is below
        the paper's rule n_m,q >= 2 C_b (ln(MT) + d ln(L ln(K) / mu)): Lemma 18
        only says C_b >= 2 (so the rule is at least 4 ln(MT), 43 for M = 20,
        T = 2000) and L, mu are not given for the experiments, so no value of
        the paper's can be used; BENCHMARKS.md shows the comparison with
        larger values.
    keep_history : bool, default=False
        Estimate from all of an instance's observations, not only the new ones.

    Attributes (after ``reset``)
    ----------
    coef_ : ndarray (n_units, d)
        Current estimates; a unit is an instance (Model-C) or an (instance, arm)
        pair, row m * K + a (Model-P).
    refits_ : list of (t, ndarray of int)
        The batch ends so far and the units re-estimated at each.
    """

    #: the estimator fits least squares per unit, so it needs more than d observations
    least_squares: bool = False

    param_constraints = {
        "h0": [Interval(1, None, integer=True)],
        "min_samples": [OneOf((None,)), Interval(1, None, integer=True)],
        "keep_history": [BOOLEAN],
    }

    def __init__(self, *, h0=1, min_samples=None, keep_history=False):
        self.h0, self.min_samples, self.keep_history = h0, min_samples, keep_history
        validate_attributes(self)   # a subclass's own parameters are set before this call

    def reset(self, env: Environment, horizon: int, rng: np.random.Generator) -> None:
        if self.least_squares and self.min_samples is not None and self.min_samples <= env.dim:
            raise InvalidParameterError(
                f"{type(self).__name__}: min_samples = {self.min_samples}, but least squares in "
                f"dimension {env.dim} needs at least {env.dim + 1} observations; raise it or leave it unset.")
        self._rng = rng
        self._per_arm = bool(getattr(env, "per_arm", False))
        self._n_arms, self._dim = env.n_arms, env.dim
        self._groups = self._n_arms if self._per_arm else 1
        self._min = self.min_samples if self.min_samples is not None else env.dim + 1
        self.coef_ = np.zeros((env.n_users * self._groups, env.dim))
        self.refits_ = []
        self._t = 0
        # observations: chunks of (unit, x, y, pending); consolidated at every batch end
        self._unit, self._X, self._y, self._pending = [], [], [], []

    def select(self, round_: Round) -> np.ndarray:
        x, users = round_.contexts, round_.users
        if self._per_arm:
            coef = self.coef_.reshape(-1, self._n_arms, self._dim)[users]     # (b, K, d)
            scores = np.einsum("bd,bkd->bk", x[:, 0], coef)
        else:
            scores = np.einsum("bkd,bd->bk", x, self.coef_[users])
        return greedy_arms(scores, self._rng)

    def update(self, round_: Round, arms: np.ndarray, rewards: np.ndarray) -> None:
        users = round_.users
        self._unit.append(users * self._n_arms + arms if self._per_arm else users)
        self._X.append(round_.contexts[np.arange(len(arms)), arms])
        self._y.append(np.asarray(rewards, dtype=float))
        self._pending.append(np.ones(len(arms), dtype=bool))
        self._t += 1
        if is_batch_end(self._t, self.h0):
            self._refit()

    def _refit(self) -> None:
        """End of a batch: re-estimate the eligible units (C_q) and empty their buffers."""
        unit, X, y, pending = (np.concatenate(chunks)
                               for chunks in (self._unit, self._X, self._y, self._pending))
        counts = np.bincount(unit[pending], minlength=len(self.coef_))
        eligible = counts >= self._min
        for group in range(self._groups):
            units = np.flatnonzero(eligible[group::self._groups]) * self._groups + group
            if len(units) == 0:
                continue
            new = [pending & (unit == u) for u in units]
            history = None
            if self.keep_history:
                every = [unit == u for u in units]
                history = ([X[rows] for rows in every], [y[rows] for rows in every])
            self.coef_[units] = self._estimate([X[rows] for rows in new], [y[rows] for rows in new], history)
        pending &= ~eligible[unit]
        keep = pending | self.keep_history
        self._unit, self._X, self._y, self._pending = [unit[keep]], [X[keep]], [y[keep]], [pending[keep]]
        self.refits_.append((self._t, np.flatnonzero(eligible)))

    @abstractmethod
    def _estimate(self, Xs: list, ys: list, history: tuple[list, list] | None) -> np.ndarray:
        """(n, d) estimates for n units from their new observations ``Xs``, ``ys``.

        ``history`` holds all their observations (the new ones included) when
        ``keep_history`` is set, else None.
        """


class EstimatorGreedy(BatchedGreedy):
    """Baselines: one estimator fitted to the units' new observations (all of them with ``keep_history``)."""

    def _estimate(self, Xs, ys, history):
        return self._coefs(*(history if history is not None else (Xs, ys)))

    @abstractmethod
    def _coefs(self, Xs: list, ys: list) -> np.ndarray:
        """(n, d) estimates from the units' observations."""


class OLSBandit(EstimatorGreedy):
    """OLSB: per-instance least squares in the batched greedy frame (Goldenshluger & Zeevi 2013).

    Parameters: ``h0``, ``min_samples`` (> d), ``keep_history`` (see ``BatchedGreedy``).
    """

    name = "ols"
    least_squares = True

    def _coefs(self, Xs, ys):
        return np.array([ols(X, y, name="OLSBandit unit").coef for X, y in zip(Xs, ys)])


class LassoBandit(EstimatorGreedy):
    """LASSOB: per-instance LASSO in the batched greedy frame (as in Ren & Zhou 2023).

    lambda_m = c_lambda sqrt(ln(d) / n_m) (``lasso_coefs``); the default
    c_lambda = 0.025 is the paper's tuned value for its bandit runs (sigma = 0.5).
    Other parameters: see ``BatchedGreedy``.
    """

    name = "lasso"
    param_constraints = {**BatchedGreedy.param_constraints, "c_lambda": [Interval(0.0, None, open_low=True)]}

    def __init__(self, *, c_lambda=0.025, h0=1, min_samples=None, keep_history=False):
        self.c_lambda = c_lambda
        super().__init__(h0=h0, min_samples=min_samples, keep_history=keep_history)

    def _coefs(self, Xs, ys):
        return lasso_coefs(Xs, ys, c_lambda=self.c_lambda)


class RMBandit(EstimatorGreedy):
    """RMB: the robust multitask estimator of Xu & Bastani (``rm_coefs``) in the batched greedy frame.

    Pools the eligible instances (per arm under Model-P): OLS, trimmed mean,
    LASSO debiasing.  Defaults (zeta, eta, c_lambda) = (0.1, 0.1, 0.175) are the
    paper's tuned values for its bandit runs.  min_samples must exceed d (OLS).
    """

    name = "rm"
    least_squares = True
    param_constraints = {**BatchedGreedy.param_constraints,
                         "c_lambda": [Interval(0.0, None, open_low=True)],
                         "zeta": [Interval(0.0, 1.0, open_low=True, open_high=True)],
                         "eta": [Interval(0.0, 0.5, open_high=True)]}

    def __init__(self, *, c_lambda=0.175, zeta=0.1, eta=0.1, h0=1, min_samples=None, keep_history=False):
        self.c_lambda, self.zeta, self.eta = c_lambda, zeta, eta
        super().__init__(h0=h0, min_samples=min_samples, keep_history=keep_history)

    def _coefs(self, Xs, ys):
        return rm_coefs(Xs, ys, c_lambda=self.c_lambda, zeta=self.zeta, eta=self.eta)
