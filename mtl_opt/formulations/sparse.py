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

Its exact models (the cut oracle, the OA master, the MIQP) live in ``sparse_models``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.linalg.lapack
import scipy.sparse.linalg

from ..data import MultiTaskData
from ..errors import InvalidParameterError
from ..reductions import centred
from ..rounding import EPS
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
#: Most numbers ``SparseProblem.gram_columns`` keeps (32 MB): an outer-approximation run that
#: polishes many incumbents by swaps would otherwise cache up to K p^2 of them.
GRAM_CACHE_FLOATS = 2**22
#: The exact paths refuse kappa_k = lambda_ridge + mu_k below this times the largest curvature
#: L (``SparseProblem.lipschitz``).  mu_k itself is only known to p eps L (``curvature``), the cut
#: slopes grow like L / kappa and the Big-M like sqrt(UB / kappa): below 1e-8, slopes of 1e8 times
#: the objective meet solver tolerances of 1e-9 and the bound carries no digit of the gap.
MIN_RELATIVE_CURVATURE = 1e-8


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
        node's candidate removals this way).  X_k B_k uses only the columns some B_k holds: the Bs
        are sparse, and a wide X is costly to multiply whole."""
        total = 0.5 * self.lambda_ridge * np.sum(Bs**2, axis=(1, 2))
        for k, (X, y) in enumerate(zip(self.Xs, self.ys)):
            used = np.flatnonzero(Bs[:, k].any(axis=0))
            residuals = y[:, None] - X[:, used] @ Bs[:, k, used].T     # (n_k, m)
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
        Excluded pairs in ``support`` stay exactly 0 (``coupled_system`` pins them).  Under signs
        or bounds on the coefficients (``side``, ``coef_bound``) and without ``z``, the minimizer
        in the box (``_refit_in_box``).

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
        if z is None and self.side.bounded:
            B[support] = self._refit_in_box(support)
            return B
        H, rhs = self.coupled_system(support, ridge)
        B[support] = _solve_spd(H, rhs) if rhs.size else rhs
        B[self.excluded] = 0.0   # pinned; exact even where a singular H took least squares
        return B

    def _refit_in_box(self, support: np.ndarray) -> np.ndarray:
        """``B[support]`` minimizing F's continuous part with every coefficient in its box.

        A convex quadratic 0.5 b^T H b - r^T b (``coupled_system``) over a box: with H = V W V^T it is
        0.5 ||W^1/2 V^T b - W^-1/2 V^T r||^2 + const, a bounded least squares that BVLS (an active-set
        method) solves exactly; coefficients fixed by their box (lower = upper, an excluded pair at 0)
        are substituted first, and the answer is clipped so the box holds with no tolerance.
        """
        from scipy.optimize import lsq_linear   # only under a box: scipy.optimize is slow to import
        H, r = self.coupled_system(support)
        pinned = self.excluded[support]
        lower = np.where(pinned, 0.0, self.side.lower[support])
        upper = np.where(pinned, 0.0, self.side.upper[support])
        b = np.where(lower == upper, lower, 0.0)
        free = lower < upper
        rhs = r[free] - H[np.ix_(free, ~free)] @ b[~free]
        H_free = H[np.ix_(free, free)]
        x = _solve_spd(H_free, rhs) if rhs.size else rhs
        if np.any((x < lower[free]) | (x > upper[free])):
            w, V = np.linalg.eigh(H_free)
            keep = w > 1e-12 * max(w[-1], 0.0)
            root = np.sqrt(w[keep])
            x = lsq_linear(root[:, None] * V[:, keep].T, V[:, keep].T @ rhs / root,
                           bounds=(lower[free], upper[free]), method="bvls", tol=1e-14).x
        b[free] = np.clip(x, lower[free], upper[free])
        return b

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
        spectral = max(_top_eigenvalue(X if allowed.all() else np.where(allowed, X, 0.0)) / len(y)
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
            margin = 8 * p * EPS * eigenvalues[-1]
            mu[k] = max(0.0, eigenvalues[0] - margin)
        return mu

    @cached_property
    def correlations(self) -> np.ndarray:
        """(K, p) X_k^T y_k / n_k: minus the loss gradient at B = 0."""
        return np.array([y @ X / len(y) for X, y in zip(self.Xs, self.ys)])

    @cached_property
    def column_sq_norms(self) -> np.ndarray:
        """(K, p) squared column norms of the (centered) designs."""
        return np.array([np.einsum("ij,ij->j", X, X) for X in self.Xs])

    def gram_columns(self, k: int, columns) -> np.ndarray:
        """(p, len(columns)) X_k^T X_k[:, columns] / n_k, each column computed once per problem: bcd's
        swap search asks for the columns of each support it visits, mostly the same few.  The cache
        is emptied when it would hold more than ``GRAM_CACHE_FLOATS`` numbers."""
        cache = self.__dict__.setdefault("_gram_columns", {})
        X = self.Xs[k]
        missing = [int(j) for j in columns if (k, j) not in cache]
        if (len(cache) + len(missing)) * X.shape[1] > GRAM_CACHE_FLOATS:
            cache.clear()
            missing = [int(j) for j in columns]
        if missing:   # X_M^T X (then transposed): from row-major X twice as fast as X^T X_M
            for j, row in zip(missing, X[:, missing].T @ X / len(self.ys[k])):
                cache[k, j] = row
        return np.array([cache[k, j] for j in columns]).reshape(len(columns), X.shape[1]).T

    def with_params(self, **changes) -> "SparseProblem":
        """The same data with other hyperparameters; cached data-only quantities are kept."""
        other = self._keeping_design_caches(replace(self, **changes))
        if "correlations" in self.__dict__ and not {"Xs", "ys"} & changes.keys():
            other.__dict__["correlations"] = self.correlations
        return other

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
        for data_only in ("column_sq_norms", "curvature", "_gram_columns"):
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

    Small designs: the top eigenvalue alone of the smaller Gram matrix (LAPACK's ``dsyevr`` on one
    index: 0.14 against 0.24 ms for all of them at 90 columns, and bcd asks once per active set).
    Large ones: Lanczos on v -> X^T (X v) (never forming X^T X), from a fixed start so the
    result is reproducible, to relative tolerance 1e-4, then raised by 1e-3
    relative to cover its error (a step length for IHT, not a certificate).
    """
    if min(X.shape) <= 200:
        gram = X @ X.T if X.shape[0] < X.shape[1] else X.T @ X
        top, *_, info = scipy.linalg.lapack.dsyevr(gram, compute_v=0, range="I", il=len(gram),
                                                  iu=len(gram))
        return float(top[0]) if info == 0 else float(np.linalg.eigvalsh(gram)[-1])
    p = X.shape[1]
    operator = scipy.sparse.linalg.LinearOperator((p, p), matvec=lambda v: X.T @ (X @ v), dtype=float)
    top = scipy.sparse.linalg.eigsh(operator, k=1, which="LA", tol=1e-4, v0=np.ones(p),
                                    return_eigenvectors=False)[0]
    return float(top) * (1 + 1e-3)


def _solve_spd(H: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve H x = rhs for symmetric positive (semi)definite H; least squares when singular.

    LAPACK's Cholesky solve (``dposv``, what cho_factor + cho_solve run) called directly: at the
    size of a support scipy's wrappers cost 40x the solve, and bcd solves thousands of them.
    """
    _, x, info = scipy.linalg.lapack.dposv(H, rhs)
    return x if info == 0 else np.linalg.lstsq(H, rhs, rcond=None)[0]
