"""Sparse multi-task best subset with Zbar / Bbar / ridge penalties (the reference objective).

For tasks k = 1..K with n_k samples, coefficients beta_k in R^p, intercepts b_k::

    F = sum_k 1/(2 n_k) ||y_k - b_k - X_k beta_k||^2
        + (lambda_ridge/2) sum_k ||beta_k||^2
        + (lambda_bbar/2)  sum_k ||beta_k - beta_bar||^2
        + (lambda_zbar/2)  sum_k ||z_k - z_bar||^2
    over beta and binary z, subject to
    sum_j z_jk <= s,  beta_jk = 0 where z_jk = 0,
    beta_bar = mean_k beta_k,  z_bar = mean_k z_k.

This is the one definition every path solves (bcd, outer approximation, the MIQP, bnb, the
brute-force references of the tests): z is a decision variable, and z_jk = 1 with beta_jk = 0 is
allowed (the paper's z >= 1(beta != 0)).  The two readings differ only in the Zbar term and only
where an optimal coefficient is exactly 0 on a support its neighbours share (a task whose y is 0
after centring, say): with z = 1(beta != 0) the infimum is approached by tiny coefficients and not
attained; here it is attained with beta = 0, z = 1.  So an estimate is a pair (B, z): the
objective takes z (``SparseProblem.objective(B, z)``; without z, the least z = B != 0 or included)
and estimators report it as ``support_``.

Intercepts are unpenalized, so they are profiled out exactly by centering
each task's X and y (b_k = mean(y_k) - mean(X_k) beta_k); ``SparseProblem``
stores the centered data and evaluates F with the optimal intercepts.  The data are centred
once (``reductions.centred``): by ``from_data``, or before it by ``standardize`` (SparseMTL,
which then builds the problem without intercept terms).

For binary z, sum_k ||z_k - z_bar||^2 = sum_j (S_j - S_j^2 / K) with
S_j = sum_k z_jk.  Variants fix which penalties may be non-zero and whether
all tasks share one support (``cs_*``).

Excluded pairs (``SparseProblem.excluded``): beta_jk = 0 is fixed for every (k, j) in the mask
(by default the pairs task k cannot identify, ``mtl_opt.identifiability``), so the problem is F
with those coefficients removed; beta_bar still averages over all K tasks, counting them as 0.
A shared support (``cs_*``) is a set of <= s columns; each task uses the shared columns it is
not excluded from (a column excluded in one task stays available to the others).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pyomo.environ as pyo
import scipy.linalg
import scipy.sparse.linalg

from ..data import MultiTaskData
from ..errors import InvalidParameterError
from ..deadline import Deadline
from ..reductions import centred
from .constraints import SideConstraints

#: variant -> (common support, lambda_bbar allowed, lambda_zbar allowed)
VARIANTS = {
    "l0l2": (False, False, False),
    "cs_l2": (True, False, False),
    "cs_bbar": (True, True, False),
    "zbar_l2": (False, False, True),
    "bbar": (False, True, False),
    "zbar_bbar": (False, True, True),
}

#: Designs wider than this skip the dense eigenvalue of ``SparseProblem.curvature`` (mu = 0).
MAX_CURVATURE_FEATURES = 2000
#: The exact paths refuse kappa_k = lambda_ridge + mu_k below this times the largest curvature
#: L (``SparseProblem.lipschitz``).  mu_k itself is only known to p eps L (``curvature``), the cut
#: slopes grow like L / kappa and the Big-M like sqrt(UB / kappa): below 1e-8, slopes of 1e8 times
#: the objective meet solver tolerances of 1e-9 and the bound carries no digit of the gap.
MIN_RELATIVE_CURVATURE = 1e-8
#: Cut slopes below this are folded into the cut's constant (``Cut.for_solver``): the solvers'
#: zero tolerance, on the normalized problem whose objective is near 1.
SMALL_SLOPE = 1e-9


def zbar_penalty(support: np.ndarray):
    """sum_k ||z_k - z_bar||^2 for a (K, p) boolean support, via sum_j (S_j - S_j^2 / K); one per
    support for a stack (..., K, p)."""
    counts = support.sum(axis=-2).astype(float)
    return np.sum(counts - counts**2 / support.shape[-2], axis=-1)


@dataclass(frozen=True)
class SparseProblem:
    """Data (centered when intercepts are fitted), variant and hyperparameters of F.

    ``excluded`` (K, p) bool: pairs (k, j) whose coefficient is fixed at 0 (module docstring);
    None means none.  Every solver honours it: bcd never selects such a pair, the refit pins
    it, the exact models fix its z (or, for a shared support, leave its z the column's
    indicator) and its beta, and curvature and bounds use the other columns only.
    """

    Xs: tuple
    ys: tuple
    x_means: np.ndarray      # (K, p), zeros without intercept
    y_means: np.ndarray      # (K,)
    variant: str
    s: int
    lambda_ridge: float
    lambda_bbar: float
    lambda_zbar: float
    excluded: np.ndarray | None = None
    task_names: tuple = ()   # for messages; the index stands in for a missing name
    side: SideConstraints | None = None   # built-in side constraints (None: none)

    def __post_init__(self):
        shape = (len(self.Xs), self.Xs[0].shape[1])
        excluded = np.zeros(shape, bool) if self.excluded is None else np.asarray(self.excluded, bool)
        if excluded.shape != shape:
            raise InvalidParameterError(f"excluded must be a {shape} boolean mask; got shape {excluded.shape}.")
        side = SideConstraints.none(shape) if self.side is None else self.side
        if np.any(side.include & excluded & ~side.exclude):
            raise InvalidParameterError(
                "a constraint includes a feature the data cannot identify in a task (constant "
                "there); drop the include for that task (result_.unidentified lists the pairs).")
        object.__setattr__(self, "excluded", excluded | side.exclude)
        object.__setattr__(self, "side", side)

    @classmethod
    def from_data(cls, data: MultiTaskData, *, variant="zbar_l2", s=10, lambda_ridge=0.0,
                  lambda_bbar=0.0, lambda_zbar=0.0, fit_intercept=True,
                  excluded=None, side=None) -> "SparseProblem":
        """Check the hyperparameters against the variant and center the data if needed.

        ``excluded`` defaults to the pairs ``data`` cannot identify (a column constant in the
        task, or all zero without intercept: ``identifiability.unidentified_mask``).  ``side``:
        the compiled side constraints (``formulations.constraints``), None: none; an
        InvalidParameterError when no support meets them (``SideConstraints.check_admits``).
        """
        if variant not in VARIANTS:
            raise InvalidParameterError(
                f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}.")
        _, bbar_ok, zbar_ok = VARIANTS[variant]
        p = data.n_features
        if not 1 <= s <= p:
            raise InvalidParameterError(f"s must be an int in [1, p] = [1, {p}]; got {s!r}.")
        for name, value, allowed in (("lambda_ridge", lambda_ridge, True),
                                     ("lambda_bbar", lambda_bbar, bbar_ok),
                                     ("lambda_zbar", lambda_zbar, zbar_ok)):
            if not (np.isfinite(value) and value >= 0):
                raise InvalidParameterError(f"{name} must be a finite float >= 0; got {value!r}.")
            if value and not allowed:
                raise InvalidParameterError(
                    f"variant {variant!r} has no {name[7:]} term, so {name} must be 0; got "
                    f"{value!r}. Pick a variant with that term ({', '.join(v for v in VARIANTS if name[7:] in v)}).")
        if fit_intercept:
            (x_means, Xs), (y_means, ys) = (zip(*map(centred, values)) for values in (data.Xs, data.ys))
            x_means, y_means = np.array(x_means), np.array(y_means)
        else:
            x_means, y_means = np.zeros((data.n_tasks, p)), np.zeros(data.n_tasks)
            Xs, ys = tuple(data.Xs), tuple(data.ys)
        if excluded is None:
            excluded = data.unidentified(fit_intercept, collinear=False)
        problem = cls(tuple(Xs), tuple(ys), x_means, y_means, variant, int(s), float(lambda_ridge),
                      float(lambda_bbar), float(lambda_zbar), excluded, tuple(data.task_names), side)
        problem.side.check_admits(problem.s, problem.allowed, problem.common_support, problem.task_names)
        return problem

    @property
    def n_tasks(self) -> int:
        return len(self.Xs)

    @property
    def n_features(self) -> int:
        return self.Xs[0].shape[1]

    @property
    def common_support(self) -> bool:
        return VARIANTS[self.variant][0]

    def objective(self, B: np.ndarray, z: np.ndarray | None = None) -> float:
        """F at coefficients B (K, p) and indicators z (K, p) bool, with optimal intercepts, in
        float64; constants kept.  z counts in the Zbar term as given, joined with B's nonzeros and
        the included pairs (``indicators``); None: those alone, the least z at B."""
        Zs = None if z is None else np.asarray(z, bool)[None]
        return float(self.objectives(np.asarray(B, float)[None], Zs)[0])

    def objectives(self, Bs: np.ndarray, Zs: np.ndarray | None = None) -> np.ndarray:
        """F at each of a stack of coefficients Bs (m, K, p) and indicators Zs (m, K, p) (None: the
        least), as ``objective``: the one statement of F, evaluated for many B at once (bnb ranks a
        node's candidate removals this way)."""
        total = 0.5 * self.lambda_ridge * np.sum(Bs**2, axis=(1, 2))
        for k, (X, y) in enumerate(zip(self.Xs, self.ys)):
            residuals = y[:, None] - X @ Bs[:, k].T     # (n_k, m)
            total += np.einsum("im,im->m", residuals, residuals) / (2 * len(y))
        if self.lambda_bbar:
            total += 0.5 * self.lambda_bbar * np.sum((Bs - Bs.mean(axis=1, keepdims=True)) ** 2, axis=(1, 2))
        if self.lambda_zbar:
            total += 0.5 * self.lambda_zbar * zbar_penalty(self.indicators(Bs, Zs))
        return total

    def intercepts(self, B: np.ndarray) -> np.ndarray:
        """The optimal (unpenalized) intercepts for B."""
        return self.y_means - np.einsum("kp,kp->k", self.x_means, B)

    @property
    def allowed(self) -> np.ndarray:
        """(K, p) bool: the pairs whose coefficient may be non-zero (not ``excluded``)."""
        return ~self.excluded

    def feasible(self, B: np.ndarray, z: np.ndarray | None = None) -> bool:
        """Whether (B, z) is a point of the problem: at most s indicators per task (for cs_*
        variants, one set of <= s columns for all tasks), no excluded pair non-zero, the side
        constraints hold (bounds exactly, counts and includes on the indicators).  z as in
        ``objective`` (None: the least z at B).

        A task may hold an exact zero on its support (a refit can give one on degenerate data,
        and an excluded pair always does): z, not each row's nonzeros, is the support.
        """
        if np.any((B != 0) & self.excluded):
            return False
        support = self.indicators(B, z)
        if self.side.active and (self.side.violation(B) > 0 or not self.side.support_ok(support)):
            return False
        if self.common_support:
            return int(support.any(axis=-2).sum()) <= self.s
        if np.any(support & self.excluded):
            return False
        return bool(np.all(support.sum(axis=-1) <= self.s))

    def indicators(self, B: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
        """The exact models' z at B (or at a stack of B): ``z`` (None: none) joined with B != 0 and
        the included pairs; for a shared support, every task's z on each shared column (also where
        the task is excluded from it: its z is then the column's indicator)."""
        support = self.side.support(B)
        if z is not None:
            support = support | np.asarray(z, bool)
        if self.common_support:
            support = np.broadcast_to(support.any(axis=-2, keepdims=True), support.shape).copy()
        return support

    def completed(self, B: np.ndarray) -> np.ndarray:
        """Indicators z >= ``indicators(B)`` with a Zbar term no larger: where more than half of
        the tasks use a column, a task that does not and has room left in its budget takes it too
        (z = 1, beta = 0), most used columns first.  Each such step lowers P(c) = c (K - c) / K
        (P(c + 1) - P(c) = (K - 2c - 1) / K < 0 for c > (K - 1) / 2), and the loss, ridge and Bbar
        terms do not see z.  Returned unchanged without a Zbar term, with a shared support, or
        where side constraints count supports (the step could break a count)."""
        support = self.indicators(B)
        if not self.lambda_zbar or self.common_support or self.side.counts or self.side.shared:
            return support
        K = self.n_tasks
        room = self.s - support.sum(axis=1)
        counts = support.sum(axis=0)
        for j in np.argsort(-counts, kind="stable"):
            for k in range(K):
                if counts[j] <= (K - 1) / 2:
                    break
                if not support[k, j] and room[k] > 0 and not self.excluded[k, j]:
                    support[k, j], room[k], counts[j] = True, room[k] - 1, counts[j] + 1
        return support

    def completed_point(self, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(B', z): z = ``completed(B)``, and B' the refit on z where that lowers F (z's new pairs
        are free coefficients there), else B.  Not refitted under bounds on the coefficients, which
        the refit ignores."""
        z = self.completed(B)
        if self.side.bounded or np.array_equal(z, self.indicators(B)):
            return B, z
        refit = self.refit(z)
        return (refit, z) if self.objective(refit, z) < self.objective(B, z) else (B, z)

    def refit(self, support: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
        """The exact minimizer of F's continuous part with supports fixed (K, p) bool.

        With ``z`` (K, p) in (0, 1] on the support, the ridge weight of beta_jk
        is (lambda_ridge + mu_k) / z_jk - mu_k (mu = ``curvature``): the
        minimizer of the strengthened perspective relaxation at a fractional z
        (where outer approximation takes its root cuts); it is lambda_ridge at z = 1.
        Excluded pairs in ``support`` stay exactly 0 (``coupled_system`` pins them).

        The selected coefficients solve one system, ``coupled_system``: block
        diagonal (one ridge regression per task) without Bbar, coupled across
        tasks through beta_bar with it; it has only sum_k |S_k| unknowns and is
        solved by one Cholesky factorization.
        """
        if z is None:
            ridge = np.full(support.shape, self.lambda_ridge)
        else:
            kappa = (self.lambda_ridge + self.curvature)[:, None]
            ridge = kappa / np.where(support, z, 1.0) - self.curvature[:, None]
        B = np.zeros(support.shape)
        H, rhs = self.coupled_system(support, ridge)
        B[support] = _solve_spd(H, rhs) if rhs.size else rhs
        B[self.excluded] = 0.0   # pinned; exact even where a singular H took least squares
        return B

    def coupled_system(self, support: np.ndarray, ridge: np.ndarray | None = None):
        """(H, r) of F's continuous part over the selected coefficients, ordered as ``B[support]``.

        The part is const - r^T beta + beta^T H beta / 2 with H = blockdiag_k(X_kS^T X_kS / n_k
        + diag(ridge_kS + lambda_bbar)) - (lambda_bbar / K) [same feature] and
        r = X_kS^T y_k / n_k; ``ridge`` (K, p) defaults to lambda_ridge everywhere.  An excluded
        pair in the support is pinned at 0: its row and column of H are those of the identity
        and its r is 0, so it is decoupled, 0 at the minimizer, and adds nothing to the value
        (a shared support keeps every task's rows the same size, ``bcd._swap_table``).
        """
        tasks, features = np.nonzero(support)
        ends = np.searchsorted(tasks, np.arange(self.n_tasks + 1))   # task k's rows: ends[k]:ends[k+1]
        ridge = np.full(support.shape, self.lambda_ridge) if ridge is None else ridge
        H = np.zeros((features.size, features.size))
        if self.lambda_bbar:
            H -= (self.lambda_bbar / self.n_tasks) * (features[:, None] == features[None, :])
        rhs = np.empty(features.size)
        for k in range(self.n_tasks):
            block, cols = slice(ends[k], ends[k + 1]), features[ends[k]:ends[k + 1]]
            Xs, n = self.Xs[k][:, cols], len(self.ys[k])
            H[block, block] += Xs.T @ Xs / n + np.diag(ridge[k, cols] + self.lambda_bbar)
            rhs[block] = Xs.T @ self.ys[k] / n
        pinned = np.flatnonzero(self.excluded[tasks, features])
        H[pinned, :], H[:, pinned], rhs[pinned] = 0.0, 0.0, 0.0
        H[pinned, pinned] = 1.0
        return H, rhs

    @cached_property
    def lipschitz(self) -> float:
        """An upper bound on the block Lipschitz constant of the smooth part's gradient.

        max_k lambda_max(X_kA^T X_kA) / n_k + lambda_ridge + lambda_bbar, over the allowed columns A.
        """
        spectral = max(_top_eigenvalue(np.where(allowed, X, 0.0)) / len(y)
                       for X, allowed, y in zip(self.Xs, self.allowed, self.ys))
        return float(spectral + self.lambda_ridge + self.lambda_bbar)

    @cached_property
    def lipschitz_ceiling(self) -> float:
        """A cheap bound above ``lipschitz``: the trace max_k ||X_k||_F^2 / n_k in place of lambda_max."""
        trace = max(np.sum(sq[allowed]) / len(y)
                    for sq, allowed, y in zip(self.column_sq_norms, self.allowed, self.ys))
        return float(trace + self.lambda_ridge + self.lambda_bbar)

    @cached_property
    def curvature(self) -> np.ndarray:
        """(K,) mu_k <= lambda_min(X_kA^T X_kA / n_k) over task k's allowed columns A, a proven
        lower bound (0 when n_k <= |A|): the coefficients live on A only.

        Moving mu_k ||beta_k||^2 / 2 from the loss into the ridge term keeps the
        loss convex and lets the perspective relaxation act on lambda_ridge + mu_k
        instead of lambda_ridge: a much tighter bound when the designs are well
        conditioned, and a valid one even at lambda_ridge = 0.  The dense
        eigenvalue is backward stable (error <= p eps lambda_max), so
        that much is subtracted.
        """
        mu = np.zeros(self.n_tasks)
        for k, (X, allowed) in enumerate(zip(self.Xs, self.allowed)):
            X = X[:, allowed]
            n, p = X.shape
            if n <= p or p > MAX_CURVATURE_FEATURES:
                continue
            eigenvalues = np.linalg.eigvalsh(X.T @ X) / n
            margin = 8 * p * np.finfo(float).eps * eigenvalues[-1]
            mu[k] = max(0.0, eigenvalues[0] - margin)
        return mu

    @cached_property
    def column_sq_norms(self) -> np.ndarray:
        """(K, p) squared column norms of the (centered) designs."""
        return np.array([np.sum(X**2, axis=0) for X in self.Xs])

    def with_params(self, **changes) -> "SparseProblem":
        """The same data with other hyperparameters; cached data-only quantities are kept."""
        return self._keeping_design_caches(replace(self, **changes))

    def scaled(self, root: float) -> "SparseProblem":
        """The twin problem whose objective is F / root^2 at B / root.

        y / root and lambda_zbar / root^2, lambda_ridge and lambda_bbar unchanged: every term of F
        is quadratic in (y, B) except the Zbar term, so F_twin(B / root) = F(B) / root^2 and the
        twin has the same minimizing supports.  Exact in floating point when ``root`` is a power of
        2 (only exponents change), so a bound on the twin times root^2 bounds min F exactly.
        """
        return self._keeping_design_caches(replace(
            self, ys=tuple(y / root for y in self.ys), y_means=self.y_means / root,
            lambda_zbar=self.lambda_zbar / root / root, side=self.side.scaled(root)))

    def _keeping_design_caches(self, other: "SparseProblem") -> "SparseProblem":
        """``other`` with this problem's cached quantities that depend on the designs only."""
        for data_only in ("column_sq_norms", "curvature"):
            if data_only in self.__dict__:
                other.__dict__[data_only] = self.__dict__[data_only]
        return other

    def exact_curvature(self) -> np.ndarray:
        """(K,) kappa_k = lambda_ridge + mu_k, the curvature the exact models rely on.

        Raises InvalidParameterError, naming the first such task (from ``task_names``, else its
        index) and lambda_ridge > 0, when some kappa_k is below ``MIN_RELATIVE_CURVATURE`` times
        the largest curvature (none to borrow, or too little for a bound that solver
        tolerances cannot invalidate).  Only the task's allowed columns count.
        """
        kappa = self.lambda_ridge + self.curvature
        flat = np.flatnonzero(kappa <= MIN_RELATIVE_CURVATURE * self.lipschitz)
        if flat.size:
            k = flat[0]
            name = repr(self.task_names[k]) if self.task_names else str(k)
            raise InvalidParameterError(
                f"the exact solvers need lambda_ridge > 0 here: task {name} has "
                f"{len(self.ys[k])} rows for {int(self.allowed[k].sum())} identifiable "
                f"feature(s) (n_k <= p, or a (nearly) rank-deficient design), so its curvature "
                f"lambda_ridge + mu_k = {kappa[k]:.3g} is below {MIN_RELATIVE_CURVATURE:g} times "
                f"the largest ({self.lipschitz:.3g}) and no bound is proven; set lambda_ridge > 0 "
                f"(e.g. 1e-3 times the largest), drop the task, or use algorithm='bcd'.")
        return kappa

    def restricted(self, columns: np.ndarray) -> "SparseProblem":
        """The same problem on a subset of the features (the others fixed at zero)."""
        return replace(self, Xs=tuple(X[:, columns] for X in self.Xs),
                       x_means=self.x_means[:, columns], excluded=self.excluded[:, columns],
                       side=self.side.restricted(columns))

    def task(self, k: int) -> "SparseProblem":
        """Task k alone (as a one-task problem of the same variant and hyperparameters)."""
        rows = slice(k, k + 1)
        return replace(self, Xs=self.Xs[rows], ys=self.ys[rows], x_means=self.x_means[rows],
                       y_means=self.y_means[rows], excluded=self.excluded[rows],
                       task_names=self.task_names[rows], side=self.side.task(k))


def _top_eigenvalue(X: np.ndarray) -> float:
    """lambda_max(X^T X), slightly rounded up.

    Small designs: a dense eigenvalue of the smaller Gram matrix.  Large ones:
    Lanczos on v -> X^T (X v) (never forming X^T X), from a fixed start so the
    result is reproducible, to relative tolerance 1e-4, then raised by 1e-3
    relative to cover its error (a step length for IHT, not a certificate).
    """
    if min(X.shape) <= 200:
        gram = X @ X.T if X.shape[0] < X.shape[1] else X.T @ X
        return float(np.linalg.eigvalsh(gram)[-1])
    p = X.shape[1]
    operator = scipy.sparse.linalg.LinearOperator((p, p), matvec=lambda v: X.T @ (X @ v), dtype=float)
    top = scipy.sparse.linalg.eigsh(operator, k=1, which="LA", tol=1e-4, v0=np.ones(p),
                                    return_eigenvectors=False)[0]
    return float(top) * (1 + 1e-3)


def _solve_spd(H: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve H x = rhs for symmetric positive (semi)definite H; least squares when singular."""
    try:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(H, rhs, rcond=None)[0]


# --- exact models: the perspective cut oracle, the OA master MILP and the Big-M MIQP ----------


def dual_bound_margin(model, dual_tolerance: float) -> float:
    """How far a solver's dual bound on ``model`` may lie above the true one.

    An LP relaxation's value is its dual objective: the sum over the bounds the basis holds
    (rows and columns at a finite bound) of that bound times its dual value or reduced cost
    (Neumaier and Shcherbina, Math. Prog. 2004).  A basis holds exactly n such bounds for n
    columns, and the solver accepts dual values of the wrong sign up to its dual-feasibility
    tolerance, so the value exceeds the relaxation's minimum by at most
    tolerance * n * max(1, largest finite bound): ``model.n_columns`` and ``model.largest_bound``,
    kept by ``build_master``, ``add_cut`` and ``build_miqp`` (and by whoever adds rows of its
    own).  Branch and bound reports the least such value over its open nodes, so the same margin
    covers its dual bound; integrality tolerances only loosen the relaxations.  The rows a solver
    derives itself are assumed valid, with right-hand sides within ``largest_bound``.
    """
    return dual_tolerance * model.n_columns * max(1.0, model.largest_bound)


def perspective_slack(model, primal_tolerance: float) -> float:
    """How far a solver's objective on the MIQP ``model`` may lie below F at its own point.

    Each perspective row beta^2 <= t z may be violated by ``primal_tolerance``, so at z = 1 its t
    may sit that much below beta^2, and t weighs (lambda_ridge + mu_k)/2 in the objective; at
    most s rows per task have z = 1: ``model.perspective_weight``, kept by ``build_miqp`` (a
    model without it, e.g. an ARMUL one, has no perspective rows and no such slack).  The
    solver measures its gap on that lowered value, so where this slack approaches our gap its
    "optimal" leaves ours open (measured: 1.1e-3 of F where the gap asked was 1e-4).
    """
    return primal_tolerance * getattr(model, "perspective_weight", 0.0)


def fitting_tolerance(cost: float, rel_gap: float, objective: float, usual: float,
                      tightest: float) -> float:
    """``usual``, unless ``cost`` (what a unit of tolerance costs our gap: ``dual_bound_margin`` or
    ``perspective_slack`` at 1) times it would take more than half of the gap asked for
    (``rel_gap`` times ``objective``): then the tolerance at which it takes a tenth of that gap,
    never below ``tightest`` (the solver's floor).

    The dual margin grows with the columns: at the usual 1e-9 it alone was 8.3e-6 of F on a bbar
    master of 1033 columns (129 schools, ``examples/sparse_language.py``), against the default
    1e-6.  Where the usual tolerance leaves room it stays: a tighter one changes SCIP's tree, and
    8.1e-10 instead of 1e-9 stalled sMTL l0l2 seed 1's bound from 120 s to 600 s (benchmarks/HISTORY.md).
    """
    gap = rel_gap * abs(objective)
    if cost * usual <= gap / 2:
        return usual
    return float(max(tightest, gap / (10 * cost)))


@dataclass(frozen=True)
class Cut:
    """An affine minorant of the continuous part c(z) valid on all of [0, 1]^(K x p).

    ``constant[k] + sum_j gradient[k, j] * z[k, j]`` bounds task k's part from
    below when the tasks decouple (no Bbar); with Bbar, ``constant`` has one
    entry and the cut bounds the whole of c(z).
    """

    constant: np.ndarray
    gradient: np.ndarray

    def value(self, z: np.ndarray) -> float:
        return float(np.sum(self.constant) + np.sum(self.gradient * z))

    def parts(self, z: np.ndarray) -> np.ndarray:
        """The bound per epigraph part at z: one per task, or one in all with Bbar."""
        if len(self.constant) == 1:
            return np.array([self.value(z)])
        return self.constant + np.sum(self.gradient * z, axis=1)

    def for_solver(self) -> "Cut":
        """The cut with every |slope| below ``SMALL_SLOPE`` folded into the constant at its worst z.

        Solvers drop such coefficients (HiGHS's small_matrix_value, SCIP's epsilon: 1e-9), which
        for a negative slope would strengthen the cut beyond what is proven, and SCIP's LP failed
        on them ("numerical troubles", with tasks on scales 1e-3 and 1e3).  g z >= min(g, 0) on
        [0, 1], so the folded cut is weaker, hence valid.
        """
        small = np.abs(self.gradient) < SMALL_SLOPE
        folded = np.where(small, np.minimum(self.gradient, 0.0), 0.0)
        extra = folded.sum() if len(self.constant) == 1 else folded.sum(axis=1)
        return Cut(self.constant + extra, np.where(small, 0.0, self.gradient))


def perspective_cut(problem: SparseProblem, B: np.ndarray) -> Cut:
    """The cut at any coefficients B, from the strengthened perspective form of c(z).

    With mu_k = ``problem.curvature`` and kappa_k = lambda_ridge + mu_k, write
    c(z) = min_beta G(beta) + sum_jk (kappa_k/2) beta_jk^2 / z_jk, where
    G = loss + Bbar term - sum_k (mu_k/2) ||beta_k||^2 is convex (mu_k is
    below the loss's curvature); at binary z this is exactly the continuous
    part of F.  Conjugating the perspective term gives, for every v,
    c(z) >= -G*(-v) - sum_jk z_jk v_jk^2 / (2 kappa_k); choosing
    v = -grad G(B) makes G*(-v) = -v.B - G(B) exact (Fenchel-Young), so

        c(z) >= G(B) + v.B - sum_jk z_jk v_jk^2 / (2 kappa_k)   for all z,

    tight at z = supp(B) when B is the refit there.  Needs every kappa_k > 0
    (``SparseProblem.exact_curvature``): lambda_ridge > 0, or n_k > p with a well-conditioned design.
    With excluded pairs everything lives on the allowed coordinates (B is 0 on the others,
    mu_k is the allowed columns' curvature, so G is convex there): their slopes are 0.
    """
    kappa = problem.exact_curvature()
    mean = B.mean(axis=0)
    losses, v = [], np.empty_like(B)
    for k, (X, y) in enumerate(zip(problem.Xs, problem.ys)):
        resid = y - X @ B[k]
        losses.append(resid @ resid / (2 * len(y)) - problem.curvature[k] / 2 * B[k] @ B[k])
        v[k] = (X.T @ resid / len(y) - problem.lambda_bbar * (B[k] - mean)
                + problem.curvature[k] * B[k])
    per_task = np.array(losses) + np.einsum("kp,kp->k", v, B)
    gradient = np.where(problem.excluded, 0.0, -v**2 / (2 * kappa[:, None]))
    if problem.lambda_bbar:
        bbar = 0.5 * problem.lambda_bbar * np.sum((B - mean) ** 2)
        return Cut(np.array([per_task.sum() + bbar]), gradient)
    return Cut(per_task, gradient)


def _support_model(problem: SparseProblem, name: str) -> pyo.ConcreteModel:
    """Binary supports z[k, j] with the cardinality (and common-support) rows, and the Zbar term.

    The Zbar term uses sum_k ||z_k - z_bar||^2 = (1/K) sum_{k<l} ||z_k - z_l||^2,
    exact for binaries with w[j, k, l] >= |z_jk - z_jl| (the objective pushes
    w down): ``model.zbar_cost`` is the expression (lambda_zbar/2) times it.
    An excluded pair's z gets the bounds [0, 0]; with a shared support (no Zbar term) it is
    left as the column's indicator, which the common rows tie to the other tasks' z.
    """
    K, p = problem.n_tasks, problem.n_features
    model = pyo.ConcreteModel(name=name)
    model.tasks = pyo.RangeSet(0, K - 1, doc="task indices k (the data's task order)")
    model.features = pyo.RangeSet(0, p - 1, doc="feature indices j (the data's feature order)")
    model.z = pyo.Var(model.tasks, model.features, within=pyo.Binary,
                      doc="z[k, j]: binary, 1 when beta[k, j] may be non-zero")
    if not problem.common_support:
        for k, j in np.argwhere(problem.excluded):
            model.z[int(k), int(j)].setub(0)
    model.cardinality = pyo.Constraint(
        model.tasks, rule=lambda m, k: sum(m.z[k, j] for j in m.features) <= problem.s,
        doc=f"cardinality[k]: sum_j z[k, j] <= s = {problem.s}")
    if problem.common_support:
        model.common = pyo.Constraint(model.tasks, model.features,
                                      rule=lambda m, k, j: m.z[k, j] == m.z[0, j] if k else pyo.Constraint.Skip,
                                      doc="common[k, j]: z[k, j] == z[0, j] (one shared support)")
    if problem.side.active:   # an unconstrained model stays exactly as it was
        _side_rows(model, problem.side)
    pairs = [(k, l) for k in range(K) for l in range(k + 1, K)] if problem.lambda_zbar else []
    model.pairs = pyo.Set(initialize=pairs, dimen=2, doc="task pairs (k, l), k < l, of the Zbar term")
    model.w = pyo.Var(model.features, model.pairs, within=pyo.NonNegativeReals,
                      doc="w[j, k, l] >= |z[k, j] - z[l, j]| (rows w_up, w_down): the Zbar term")
    model.w_up = pyo.Constraint(model.features, model.pairs,
                                rule=lambda m, j, k, l: m.w[j, k, l] >= m.z[k, j] - m.z[l, j],
                                doc="w_up[j, k, l]: w[j, k, l] >= z[k, j] - z[l, j]")
    model.w_down = pyo.Constraint(model.features, model.pairs,
                                  rule=lambda m, j, k, l: m.w[j, k, l] >= m.z[l, j] - m.z[k, j],
                                  doc="w_down[j, k, l]: w[j, k, l] >= z[l, j] - z[k, j]")
    model.zbar_cost = pyo.Expression(expr=problem.lambda_zbar / (2 * K) * sum(
        model.w[j, k, l] for j in model.features for (k, l) in pairs),
        doc="(lambda_zbar / 2K) sum w, the Zbar term" if pairs else None)
    return model


def _side_rows(model: pyo.ConcreteModel, side: SideConstraints) -> None:
    """The side constraints that act on z (``SideConstraints``): an included pair's z at 1, one
    ranged row per count (``counts``) and z_kj = z_(first task)j per shared support (``shared``);
    exclude is part of ``excluded`` already, and the bounds on beta are the MIQP's.

    They only remove supports, and every cut and perspective row holds on all of [0, 1]^(K x p),
    so the relaxations stay valid: at a forced z = 1 the continuous part still minimizes over a
    free beta (0 included), as F counts an included pair whatever its coefficient.
    """
    for k, j in np.argwhere(side.include):
        model.z[int(k), int(j)].setlb(1)
    counts = side.counts
    model.counts = pyo.Constraint(range(len(counts)), rule=lambda m, i: (
        counts[i].at_least, sum(m.z[counts[i].task, j] for j in counts[i].features), counts[i].at_most),
        doc="counts[i]: at_least <= (features of a group in a task's support) <= at_most")
    shared = [(k, tasks[0], j) for tasks, features in side.shared for k in tasks[1:] for j in features]
    model.shared = pyo.Constraint(range(len(shared)), rule=lambda m, i: (
        m.z[shared[i][0], shared[i][2]] == m.z[shared[i][1], shared[i][2]]),
        doc="shared[i]: z equal between tasks told to share a support")


def miqp_box(problem: SparseProblem, big_m: float) -> tuple[np.ndarray, np.ndarray]:
    """(L, U) (K, p): the MIQP's box at M, [-M, M] cut to the side constraints' bounds where they
    are tighter (``build_miqp``'s rows L z <= beta <= U z and beta's bounds)."""
    return np.maximum(-big_m, problem.side.lower), np.minimum(big_m, problem.side.upper)


def _row_bound(problem: SparseProblem) -> float:
    """The largest right-hand side of the support rows: s, or a count's (``dual_bound_margin``)."""
    return float(max([problem.s, *(max(row.at_least, row.at_most) for row in problem.side.counts)]))


def build_feasibility(problem: SparseProblem) -> pyo.ConcreteModel:
    """The support rows alone with the objective sum z: a MILP whose solution is a small support
    the constraints allow, or whose infeasibility proves that none exists."""
    model = _support_model(problem, "sparse_feasibility")
    model.obj = pyo.Objective(expr=sum(model.z.values()))
    return model


def build_master(problem: SparseProblem) -> pyo.ConcreteModel:
    """The outer-approximation master MILP: supports, Zbar exactly, epigraph variables, no cuts yet.

    Components: ``z``, ``w`` (Zbar), ``eta[t] >= 0`` (one per task without
    Bbar, one in all with it: c(z) >= 0 always), ``cuts`` (a ConstraintList
    that ``add_cut`` fills), objective ``obj = sum eta + zbar_cost``.
    """
    model = _support_model(problem, "sparse_oa_master")
    parts = 1 if problem.lambda_bbar else problem.n_tasks
    model.parts = pyo.RangeSet(0, parts - 1, doc="parts t of the smooth term (one per task, one with Bbar)")
    model.eta = pyo.Var(model.parts, within=pyo.NonNegativeReals,
                        doc="eta[t] >= the smooth part's cuts: its minimum over beta at support z")
    model.cuts = pyo.ConstraintList(doc="eta >= c(z*) + g . (z - z*), outer approximations")
    model.obj = pyo.Objective(expr=sum(model.eta[t] for t in model.parts) + model.zbar_cost,
                              doc="sum eta + zbar_cost, an outer approximation of F")
    # columns z, w, eta; finite bounds: z in [0, 1], the cardinality and count rows' right-hand
    # sides (``dual_bound_margin``)
    model.n_columns = len(model.z) + len(model.w) + parts
    model.largest_bound = _row_bound(problem)
    return model


def add_cut(model: pyo.ConcreteModel, cut: Cut) -> None:
    """Add eta >= cut(z) rows to a master from ``build_master`` (``Cut.for_solver``)."""
    K, p = cut.gradient.shape
    cut = cut.for_solver()
    model.largest_bound = max(model.largest_bound, float(np.max(np.abs(cut.constant))))
    if len(cut.constant) == 1:
        model.cuts.add(model.eta[0] >= float(cut.constant[0]) + sum(
            float(cut.gradient[k, j]) * model.z[k, j] for k in range(K) for j in range(p) if cut.gradient[k, j]))
        return
    for k in range(K):
        model.cuts.add(model.eta[k] >= float(cut.constant[k]) + sum(
            float(cut.gradient[k, j]) * model.z[k, j] for j in range(p) if cut.gradient[k, j]))


def master_support(model: pyo.ConcreteModel, shape) -> np.ndarray:
    """The (K, p) boolean support held by a solved model's z."""
    return np.array([[pyo.value(model.z[k, j]) > 0.5 for j in range(shape[1])]
                     for k in range(shape[0])])


def build_miqp(problem: SparseProblem, big_m: float, perspective: bool = True,
               deadline: Deadline | None = None) -> pyo.ConcreteModel:
    """The Big-M MIQP of F with a diagonal Hessian (never X^T X handed to the solver).

    Variables ``beta[k, j]`` (bounds [0, 0] where excluded), ``z``, ``w`` and, with Bbar,
    ``mean[j] = (1/K) sum_k beta_jk``; ``L z <= beta <= U z`` with U = min(M, the side
    constraints' upper bound), L = max(-M, their lower bound), which are beta's bounds too (a
    bound without 0 forces z = 1, ``compile_constraints``, so the rows are exact there).  Task k's loss is written with
    residual variables ``resid[k, i] = y_ki - x_ki . beta_k``, or, with
    ``perspective`` and curvature mu_k > 0 (``SparseProblem.curvature``), as
    (1/2) ||u_k||^2 - (X_k'y_k / n_k) . beta_k + ||y_k||^2 / (2 n_k) with
    ``u[k, i] = sqrt(w_i - mu_k) v_i . beta_k`` from the eigenpairs (w_i, v_i)
    of X_kA'X_kA / n_k over the allowed columns A: the loss minus (mu_k/2) ||beta_k||^2, which
    moves to the ridge term.  With ``perspective`` the ridge term (lambda_ridge + mu_k)/2
    sum_j beta_jk^2 is written as sum t_jk with beta_jk^2 <= t_jk z_jk: a
    tighter relaxation with the same integer solutions.

    Once ``deadline`` passes, the rows left are skipped (seconds of Pyomo work
    at p in the thousands): the model is then incomplete, and the caller must
    not solve it (``Backend.solve`` with the same deadline won't).
    """
    model = _support_model(problem, "sparse_miqp")
    K, p = problem.n_tasks, problem.n_features
    mu = problem.curvature if perspective else np.zeros(K)
    shifted = [k for k in range(K) if mu[k] > 0]
    rows = [(k, i) for k in range(K) if k not in shifted for i in range(len(problem.ys[k]))]
    model.rows = pyo.Set(initialize=rows, dimen=2, doc="rows (k, i) of the residuals")
    low, high = miqp_box(problem, big_m)
    model.beta = pyo.Var(model.tasks, model.features,
                         bounds=lambda m, k, j: (float(low[k, j]), float(high[k, j])),
                         doc="beta[k, j]: task k's coefficient of feature j")
    for k, j in np.argwhere(problem.excluded):
        model.beta[int(k), int(j)].setlb(0)
        model.beta[int(k), int(j)].setub(0)
    model.resid = pyo.Var(model.rows, doc="resid[k, i]: y_ki minus x_ki . beta_k (rows fit[k, i])")
    X, y = problem.Xs, problem.ys
    model.fit = pyo.Constraint(model.rows, rule=_until(deadline, lambda m, k, i: m.resid[k, i] == float(
        y[k][i]) - sum(float(X[k][i, j]) * m.beta[k, j] for j in m.features if X[k][i, j] != 0)),
        doc="fit[k, i]: resid[k, i] == y_ki - x_ki . beta_k")
    factors = {k: _shifted_factor(X[k], mu[k], problem.allowed[k]) for k in shifted}
    model.eigen = pyo.Set(initialize=[(k, i) for k in shifted for i in range(len(factors[k]))], dimen=2,
                          doc="eigen-directions (k, i) of the tasks whose loss lends curvature")
    model.u = pyo.Var(model.eigen, doc="u[k, i]: eigen-coordinates of task k's loss (rows eigen_fit[k, i])")
    model.eigen_fit = pyo.Constraint(model.eigen, rule=_until(deadline, lambda m, k, i: m.u[k, i] == sum(
        float(factors[k][i, j]) * m.beta[k, j] for j in m.features if factors[k][i, j] != 0)),
        doc="eigen_fit[k, i]: u[k, i] == sqrt(w_i - mu_k) v_i . beta_k")
    model.upper = pyo.Constraint(model.tasks, model.features,
                                 rule=_until(deadline, lambda m, k, j: m.beta[k, j] <= float(high[k, j]) * m.z[k, j]),
                                 doc=f"upper[k, j]: beta[k, j] <= U z[k, j], U = min(M = {big_m:g}, the bounds)")
    model.lower = pyo.Constraint(model.tasks, model.features,
                                 rule=_until(deadline, lambda m, k, j: m.beta[k, j] >= float(low[k, j]) * m.z[k, j]),
                                 doc="lower[k, j]: beta[k, j] >= L z[k, j], L = max(-M, the bounds)")
    loss = sum(model.resid[k, i] ** 2 / (2 * len(y[k])) for k, i in rows)
    for k in shifted:
        linear = X[k].T @ y[k] / len(y[k])
        loss += 0.5 * sum(model.u[k, i] ** 2 for i in range(len(factors[k]))) + float(y[k] @ y[k]) / (2 * len(y[k])) \
            - sum(float(linear[j]) * model.beta[k, j] for j in range(p))
    if perspective and (problem.lambda_ridge > 0 or shifted):
        model.t = pyo.Var(model.tasks, model.features, within=pyo.NonNegativeReals,
                          doc="t[k, j] >= beta[k, j]^2 / z[k, j] (rows perspective[k, j]): the ridge part")
        model.perspective = pyo.Constraint(model.tasks, model.features, rule=_until(
            deadline, lambda m, k, j: m.beta[k, j] ** 2 <= m.t[k, j] * m.z[k, j]),
            doc="perspective[k, j]: beta[k, j]^2 <= t[k, j] z[k, j]")
        ridge = sum((problem.lambda_ridge + mu[k]) / 2 * model.t[k, j] for k in range(K) for j in range(p))
    else:
        ridge = problem.lambda_ridge / 2 * sum(b**2 for b in model.beta.values())
    bbar = 0.0
    if problem.lambda_bbar:
        model.mean = pyo.Var(model.features, doc="mean[j]: beta averaged over the tasks (Bbar term)")
        model.mean_def = pyo.Constraint(model.features, rule=lambda m, j: problem.n_tasks * m.mean[j]
                                        == sum(m.beta[k, j] for k in m.tasks),
                                        doc="mean_def[j]: K mean[j] == sum_k beta[k, j]")
        bbar = problem.lambda_bbar / 2 * sum((model.beta[k, j] - model.mean[j]) ** 2
                                             for k in model.tasks for j in model.features)
    model.obj = pyo.Objective(expr=loss + ridge + bbar + model.zbar_cost,
                              doc=f"F ({problem.variant}), every term written out")
    # ``dual_bound_margin``: every column counts; finite bounds are M (beta), 1 (z), s
    # (cardinality), y (residual rows) and, for the rows SCIP derives from the objective, its
    # value at zero, F(0) = sum ||y_k||^2 / (2 n_k) (the perspective rows are homogeneous cones).
    model.n_columns = model.nvariables()
    model.largest_bound = max(big_m, _row_bound(problem), max(float(np.max(np.abs(y_k))) for y_k in y),
                              sum(y_k @ y_k / (2 * len(y_k)) for y_k in y))
    # ``perspective_slack``: the weight of t in the objective over the <= s rows per task at z = 1.
    model.perspective_weight = float(sum(
        (problem.lambda_ridge + mu[k]) / 2 * min(problem.s, int(problem.allowed[k].sum()))
        for k in range(K))) if perspective and (problem.lambda_ridge > 0 or shifted) else 0.0
    return model


def _until(deadline: Deadline | None, rule):
    """The constraint rule ``rule``, skipping every row once ``deadline`` has passed."""
    if deadline is None:
        return rule
    return lambda m, *index: pyo.Constraint.Skip if deadline.expired() else rule(m, *index)


def _shifted_factor(X: np.ndarray, mu: float, allowed: np.ndarray) -> np.ndarray:
    """F with F'F = X_A'X_A / n - mu I on the allowed columns A and zero columns elsewhere (PSD
    because mu <= lambda_min over A): rows sqrt(w_i - mu) v_i'."""
    X = X[:, allowed]
    eigenvalues, vectors = np.linalg.eigh(X.T @ X / len(X))
    factor = np.zeros((len(eigenvalues), len(allowed)))
    factor[:, allowed] = np.sqrt(np.maximum(eigenvalues - mu, 0.0))[:, None] * vectors.T
    return factor


def coefficient_bound(problem: SparseProblem, upper_bound: float) -> float | None:
    """A valid |beta_jk| bound at any solution with F <= upper_bound, or None if none is proven.

    Two arguments, the smaller wins: (lambda_ridge/2) beta_jk^2 <= F gives
    sqrt(2 UB / lambda_ridge); and the loss of task k is <= F, so
    ||X_k beta_k|| <= ||y_k|| + sqrt(2 n_k UB), while ||X_k beta_k||^2 >=
    n_k mu_k ||beta_k||^2 (mu = ``problem.curvature``).  No optimal solution
    is cut off.
    """
    bounds = [np.sqrt(2 * upper_bound / problem.lambda_ridge)] if problem.lambda_ridge > 0 else []
    if np.all(problem.curvature > 0):
        bounds.append(max((np.linalg.norm(y) + np.sqrt(2 * len(y) * upper_bound)) / np.sqrt(len(y) * mu)
                          for y, mu in zip(problem.ys, problem.curvature)))
    return float(min(bounds)) if bounds else None
