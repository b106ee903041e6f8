"""ARMUL: adaptive and robust multi-task learning (Duan and Wang), stated, not solved.

For tasks j = 1..m with designs X_j (n_j x d), responses y_j, weights w_j > 0
and penalties lambda_j >= 0::

    F(Theta, Gamma) = sum_j w_j [ f_j(theta_j) + lambda_j ||theta_j - gamma_j||_2 ]
    minimized over Theta and Gamma in Omega

    squared loss:   f_j(theta) = 1/(2 n_j) ||y_j - X_j theta||^2
    logistic loss:  f_j(theta) = 1/n_j sum_i [log(1 + exp(x_ji^T theta)) - y_ji x_ji^T theta]

Omega: one shared center (vanilla, jointly convex), K centers with one label
per task (clustered, mixed-integer) or Gamma = B Z of rank K (low-rank,
biconvex).  Defaults w_j = n_j, lambda_j = c sqrt(d / n_j).  An intercept is
a column of ones in X_j (coefficient 0), penalized and shared like the others.

Certificate (vanilla and its limits).  Writing each loss as
sum_i phi_ji(x_ji^T theta), any dual point s (one entry per observation) with
sum_j X_j^T s_j = 0 and ||X_j^T s_j||_2 <= w_j lambda_j gives the lower bound
``-sum_ji phi_ji^*(s_ji)`` (Fenchel duality; u_j = -X_j^T s_j).
``dual_bound`` builds s from the gradients at any iterate, repairs the sum by
a least-squares correction and the norms by a common scaling, and evaluates
the conjugates in float64 (squared: s y + s^2 / (2c); logistic: c h(a) with
h(a) = a log a + (1-a) log(1-a), a = |s| / c in [0, 1] the probability of the
other label, c = w_j / n_j).

Safe in floating point: every sum of N terms is within gamma_N sum |terms|,
gamma_N = N eps / (1 - N eps) (Higham, Thm 3.1; as in Neumaier and Shcherbina,
Math. Prog. 2004), and the bound subtracts (1) that allowance on the conjugate
sum, (2) the exact constraints' violation by the float s (X_j^T s_j within
gamma_n |X_j|^T |s_j| of its computed value) times a proven radius of the
optimal coefficients (from F* <= F at a feasible point and the smallest
eigenvalue of the Gram matrix, ``_radius``).  For the logistic loss no such
radius is known (the loss does not bound the scores), so term (2) is not
covered there: its bound is safe up to that violation, ~eps relative on
standardized data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.linalg
from scipy.special import expit, xlogy

from .._lazy import pyo
from ..errors import InvalidDataError, InvalidParameterError
from ..rounding import EPS, rounding_factor, safe_min_eigenvalue

LOSSES = ("squared", "logistic")
STRUCTURES = ("vanilla", "clustered", "lowrank")
#: How tasks are tied in a certificate (see ``dual_bound``).
COUPLINGS = ("vanilla", "pooled", "independent", "fixed")


#: ``ArmulProblem``'s cached per-task arrays, indexed by task first (``ArmulProblem.subset``).
PER_TASK = ("n", "row_weight", "gram", "xty", "yy", "smoothness", "active", "_root_trace",
            "_task_min_eigenvalues")


@dataclass(frozen=True, eq=False)
class ArmulProblem:
    """One ARMUL instance: padded designs (m, n_max, d), responses, weights and penalties.

    Rows beyond n_j of task j are zero and masked out.
    """

    X: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    w: np.ndarray
    lam: np.ndarray
    loss: str

    @classmethod
    def from_tasks(cls, Xs, ys, *, loss="squared", c=1.0, weights=None, counts=None,
                   intercept=False) -> "ArmulProblem":
        """Pad the tasks; w_j = n_j unless ``weights``; lambda_j = c sqrt(d / n_j); with
        ``intercept``, a column of ones first (written in place: no widened copy of X_j).
        ``counts``: the n_j of w_j and lambda_j when they are not the rows' (the twin of
        weighted data, ``MultiTaskData.counts``: the tasks' total weights)."""
        if loss not in LOSSES:
            raise InvalidParameterError(f"loss must be one of {LOSSES}; got {loss!r}.")
        n = np.array([len(y) for y in ys])
        m, d = len(Xs), Xs[0].shape[1] + bool(intercept)
        X, y = np.zeros((m, n.max(), d)), np.zeros((m, n.max()))
        mask = np.zeros((m, n.max()), dtype=bool)
        for j, (Xj, yj) in enumerate(zip(Xs, ys)):
            X[j, :n[j], d - Xj.shape[1]:], y[j, :n[j]], mask[j, :n[j]] = Xj, yj, True
        if intercept:
            X[:, :, 0] = mask
        if loss == "logistic" and not np.all((y[mask] == 0) | (y[mask] == 1)):
            raise InvalidDataError("logistic loss needs labels in {0, 1}; got other values in y.")
        size = n if counts is None else np.asarray(counts, dtype=float)
        w = size.astype(float) if weights is None else np.asarray(weights, dtype=float)
        return cls(X, y, mask, w, c * np.sqrt(d / size), loss)

    @property
    def m(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[2]

    @cached_property
    def n(self) -> np.ndarray:
        return self.mask.sum(axis=1)

    @cached_property
    def row_weight(self) -> np.ndarray:
        """c_j = w_j / n_j, the weight of every observation of task j."""
        return self.w / self.n

    @cached_property
    def gram(self) -> np.ndarray:
        """X_j^T X_j / n_j, shape (m, d, d)."""
        return np.array([X.T @ X for X in self.X]) / self.n[:, None, None]

    @cached_property
    def xty(self) -> np.ndarray:
        return self._transposed(self.y) / self.n[:, None]

    @cached_property
    def yy(self) -> np.ndarray:
        """||y_j||^2 / n_j, shape (m,)."""
        return np.einsum("mi,mi->m", self.y, self.y) / self.n

    @cached_property
    def smoothness(self) -> np.ndarray:
        """Lipschitz constant of grad f_j: lambda_max(X_j^T X_j / n_j) (times 1/4 for logistic)."""
        top = np.linalg.eigvalsh(self.gram)[:, -1]
        return top / 4 if self.loss == "logistic" else top

    def subset(self, tasks) -> "ArmulProblem":
        """The problem of the tasks ``tasks``; it takes this one's per-task quantities computed so far
        (``PER_TASK``: each is computed task by task, so a slice is what it would compute)."""
        tasks = np.asarray(tasks)
        out = ArmulProblem(self.X[tasks], self.y[tasks], self.mask[tasks], self.w[tasks],
                           self.lam[tasks], self.loss)
        cached = self.__dict__
        out.__dict__.update({key: cached[key][tasks] for key in PER_TASK if key in cached})
        if "_task_factors" in cached:
            out.__dict__["_task_factors"] = [cached["_task_factors"][j] for j in tasks]
        return out

    def for_subsets(self) -> "ArmulProblem":
        """This problem with its per-task quantities computed, for the many ``subset`` calls of
        a tree (each group's solve then slices them: no Gram matrix, factor or eigenvalue twice)."""
        for key in (*PER_TASK, "_task_factors"):
            getattr(self, key)
        return self

    def with_response(self, y) -> "ArmulProblem":
        """The same problem with responses y (m, n_max) (squared loss: a shifted target)."""
        out = ArmulProblem(self.X, np.where(self.mask, y, 0.0), self.mask, self.w, self.lam, self.loss)
        out.__dict__.update({key: self.__dict__[key] for key in ("gram", "smoothness")
                             if key in self.__dict__})  # cached, independent of y
        return out

    def with_lam(self, lam) -> "ArmulProblem":
        return ArmulProblem(self.X, self.y, self.mask, self.w, np.broadcast_to(lam, (self.m,)),
                            self.loss)

    # --- losses --------------------------------------------------------------------

    def scores(self, Theta) -> np.ndarray:
        """Linear predictors x_ji^T theta_j, shape (m, n_max)."""
        return _products(self.X, Theta)

    def _transposed(self, s) -> np.ndarray:
        """X_j^T s_j for every task, shape (m, d)."""
        return (np.asarray(s, dtype=float)[:, None, :] @ self.X)[:, 0, :]

    def losses(self, Theta) -> np.ndarray:
        """f_j(theta_j) for every task, from residuals/scores (keeps constants)."""
        z = self.scores(Theta)
        if self.loss == "squared":
            per_row = 0.5 * (self.y - z) ** 2
        else:
            per_row = np.logaddexp(0.0, z) - self.y * z
        return np.where(self.mask, per_row, 0.0).sum(axis=1) / self.n

    def grads(self, Theta) -> np.ndarray:
        """grad f_j(theta_j), shape (m, d)."""
        if self.loss == "squared":
            return _products(self.gram, Theta) - self.xty
        resid = np.where(self.mask, expit(self.scores(Theta)) - self.y, 0.0)
        return self._transposed(resid) / self.n[:, None]

    def objective(self, Theta, Gamma) -> float:
        """F(Theta, Gamma) with Gamma of shape (m, d) (one center per task) or (d,)."""
        Theta = np.asarray(Theta, dtype=float)
        dist = row_norms(Theta - np.broadcast_to(Gamma, Theta.shape))
        return float(np.sum(self.w * (self.losses(Theta) + self.lam * dist)))

    # --- certificate ---------------------------------------------------------------

    def dual_point(self, Theta) -> np.ndarray:
        """s_ji = phi_ji'(x_ji^T theta_j): the gradient-based dual candidate, (m, n_max)."""
        z = self.scores(Theta)
        link = z if self.loss == "squared" else expit(z)
        return np.where(self.mask, self.row_weight[:, None] * (link - self.y), 0.0)

    def conjugate_sum(self, s) -> tuple[float, float] | None:
        """sum_ji phi_ji^*(s_ji) and a rounding allowance (the exact sum is at most their sum),
        or None when s is outside the domain (logistic)."""
        c = self.row_weight[:, None]
        if self.loss == "squared":
            terms = np.where(self.mask, s * self.y + s**2 / (2 * c), 0.0)
            size = np.where(self.mask, np.abs(s * self.y) + s**2 / (2 * c), 0.0)
            return float(np.sum(terms)), rounding_factor(self.mask.sum() + 5) * float(np.sum(size))
        a = self._other_label_probability(s)
        if np.any(a < 0) or np.any(a > 1):
            return None
        terms = c * (xlogy(a, a) + xlogy(1 - a, 1 - a))
        # a carries one rounding: |h(a) - h(a~)| <= eps a max|h'|, h'(a) = log(a / (1 - a)).
        slope = 2 + np.abs(np.log(np.maximum(a, 1e-300))) + np.abs(np.log(np.maximum(1 - a, 1e-300)))
        allowance = (rounding_factor(self.mask.sum() + 5) * float(np.sum(np.abs(terms)))
                     + 4 * EPS * float(np.sum(c * a * slope)))
        return float(np.sum(terms)), allowance

    @cached_property
    def _pooled_factor(self):
        """Cholesky factor of sum_j c_j X_j^T X_j, or None when singular."""
        return _cholesky(np.einsum("m,mik->ik", self.w, self.gram))

    @cached_property
    def active(self) -> np.ndarray:
        """(m, d) bool: the columns not identically zero in each task (a zero column's
        coefficient does not enter that task's loss)."""
        return np.any(self.X != 0.0, axis=1)

    @cached_property
    def _task_factors(self):
        """Cholesky factors of each task's Gram matrix on its active columns (None if singular)."""
        return [_cholesky(G[np.ix_(a, a)]) for G, a in zip(self.gram, self.active)]

    @cached_property
    def _provable_tasks(self) -> np.ndarray:
        """(m,) bool: the tasks whose own minimum the independent bound can prove (a Gram matrix
        nonsingular on the active columns, also by its safe smallest eigenvalue)."""
        return np.array([f is not None for f in self._task_factors]) & (
            self._task_min_eigenvalues > 0)

    def _in_domain(self, s) -> np.ndarray:
        """(m,) bool: the tasks whose s_j lies in the conjugate's domain (logistic: the
        probabilities ``_other_label_probability`` in [0, 1]; every task for the squared loss)."""
        if self.loss == "squared":
            return np.ones(self.m, dtype=bool)
        a = self._other_label_probability(s)
        return np.all((a >= 0) & (a <= 1), axis=1)

    def _other_label_probability(self, s) -> np.ndarray:
        """a = (1 - 2 y) s / c: the logistic conjugate's argument (0 off the mask)."""
        return np.where(self.mask, (1 - 2 * self.y) * s / self.row_weight[:, None], 0.0)

    def restricted(self, columns) -> "ArmulProblem":
        """The problem with task j's columns outside ``columns[j]`` ((m, d) bool) set to zero:
        the same objective at any Theta that is 0 there, and a task design of full rank when
        ``columns`` are the ones it identifies, so the independent certificate applies."""
        return ArmulProblem(self.X * np.asarray(columns, dtype=bool)[:, None, :], self.y,
                            self.mask, self.w, self.lam, self.loss)

    def dual_bound(self, Theta, coupling="vanilla", centers=None, *,
                   needed=-np.inf) -> float | None:
        """A proven lower bound on the optimum from the iterate Theta, or None.

        coupling: "vanilla" (one free center), "pooled" (theta_j all equal),
        "independent" (lambda = 0: each task's own minimum; a task whose Gram matrix is singular
        on its nonzero columns, or whose projected dual point leaves the logistic conjugate's
        domain, adds its trivial bound 0 (s_j = 0: its loss is >= 0), and ``restricted``
        makes a task's design full rank) or "fixed" (centers Gamma given, (m, d)).
        needed: the least bound worth proving.  When the dual value is below it before its
        float-safety terms (``_violation``, the linear term's rounding: they only lower it),
        they are skipped, about half the cost, and the answer is None: a gap check that cannot
        close needs no proof.
        """
        if coupling not in COUPLINGS:
            raise InvalidParameterError(f"coupling must be one of {COUPLINGS}; got {coupling!r}.")
        if coupling == "vanilla" and not np.any(self.lam):
            coupling = "independent"  # lambda = 0: the tasks separate
        s = self.dual_point(Theta)
        if coupling in ("vanilla", "pooled"):
            if self._pooled_factor is None:
                return None
            r = self._transposed(s).sum(axis=0)
            s = s - self.row_weight[:, None] * self.scores(
                np.tile(_factor_solve(self._pooled_factor, r), (self.m, 1)))
        elif coupling == "independent":
            r = self._transposed(s)
            step = np.zeros_like(r)  # zero columns: X_j^T s_j is exactly 0 there already
            proven = self._provable_tasks
            for j in np.flatnonzero(proven):
                a = self.active[j]
                step[j, a] = _factor_solve(self._task_factors[j], r[j, a]) / self.n[j]
            projected = s - self.scores(step)
            s = np.where((proven & self._in_domain(projected))[:, None], projected, 0.0)
        u_norm = row_norms(self._transposed(s))
        cap = self.w * self.lam
        ratio = np.divide(cap, u_norm, out=np.ones_like(cap), where=u_norm > cap)
        if coupling == "vanilla":
            s = s * min(1.0, float(ratio.min()))
        elif coupling == "fixed":
            s = s * np.minimum(ratio, 1.0)[:, None]
        conj = self.conjugate_sum(s)
        if conj is None:
            return None
        value = -sum(conj)
        if coupling == "fixed":
            value += float(np.sum(s * self.scores(centers)))
        if not value >= needed:
            return None
        abs_u = self._abs_transposed(s)
        violation = self._violation(Theta, s, coupling, centers, abs_u)
        if violation is None:
            return None
        if coupling == "fixed":   # the rounding of the linear term: sum |s| |X| |centers|
            violation += rounding_factor(self.mask.sum() + self.d + 2) * float(np.sum(
                np.abs(centers) * abs_u))
        return value - violation

    def rank_floor(self, k: int, theta: np.ndarray, centers: np.ndarray, deadline=None) -> float:
        """A proven lower bound on what Gamma's rank <= k adds to the independent-tasks minimum
        sum_j w_j min f_j, for the squared loss (0 for the logistic one): DESIGN.md, claim 6.

        Whatever the centers' span (Q its projector, of rank k), any u_j with ||u_j|| <= lambda_j
        makes task j pay at least w_j [-u_j'(I - Q) theta_j* - ||(I - Q) u_j||^2_(G_j^-1) / 2]
        (its cost's dual), which is at least c(u) + tr(Q A(u)); the least over Q is c(u) plus the
        sum of A(u)'s k smallest eigenvalues (Ky Fan).  u starts at the incumbent's dual point
        (``theta``, ``centers``) and climbs ``FLOOR_STEPS`` projected gradient steps (until the
        ``deadline``); the best u is scored safely (``_scored_floor``).  Over the tasks whose own
        minimizer is unique (a Gram matrix positive definite, by its safe smallest eigenvalue)."""
        tasks = np.flatnonzero(self._provable_tasks & self.active.all(axis=1))
        if self.loss != "squared" or len(tasks) <= k or k >= self.d:
            return 0.0
        star, delta = self._own_minimizers(tasks)
        inverse = np.array([_factor_solve(self._task_factors[j], np.eye(self.d)) for j in tasks])
        mu, w, lam = self._task_min_eigenvalues[tasks], self.w[tasks], self.lam[tasks]
        span = np.linalg.svd(np.asarray(centers, dtype=float)[tasks].T, full_matrices=False)[0][:, :k]
        u = _products(self.gram[tasks], np.asarray(theta, dtype=float)[tasks] - star)
        u = _in_balls(u - (u @ span) @ span.T, lam)
        value, gradient = _climbed_value(u, star, inverse, mu, w, k)
        step = 0.1 * lam.max() / max(row_norms(gradient).max(), 1e-300)
        for _ in range(FLOOR_STEPS):
            if deadline is not None and deadline.expired():
                break
            trial = _in_balls(u + step * gradient, lam)
            trial_value, trial_gradient = _climbed_value(trial, star, inverse, mu, w, k)
            if trial_value >= value:
                u, value, gradient, step = trial, trial_value, trial_gradient, 1.2 * step
            else:
                step /= 2
        return self._scored_floor(tasks, u, star, delta, k)

    def _own_minimizers(self, tasks) -> tuple[np.ndarray, np.ndarray]:
        """(computed minimizers theta~_j of the tasks' own losses, delta_j >= ||theta~_j - theta_j*||).

        delta_j = ||G_j^-1 X_j^T (X_j theta~_j - y_j)|| / n_j, the gradient's rounding bounded (the
        residual's, then the product's), divided by the safe smallest eigenvalue."""
        theta = np.array([_factor_solve(self._task_factors[j], self.xty[j]) for j in tasks])
        Xt, yt = self.X[tasks], self.y[tasks]   # padded rows are zero
        residual = np.einsum("jid,jd->ji", Xt, theta) - yt
        gradient = np.einsum("jid,ji->jd", Xt, residual)
        size = np.abs(residual) + np.einsum("jid,jd->ji", np.abs(Xt), np.abs(theta)) + np.abs(yt)
        error = rounding_factor(Xt.shape[1] + self.d + 2) * np.einsum("jid,ji->jd", np.abs(Xt), size)
        norm = (np.linalg.norm(gradient, axis=1) + np.linalg.norm(error, axis=1)) / self.n[tasks]
        return theta, norm * (1 + rounding_factor(self.d + 4)) / self._task_min_eigenvalues[tasks]

    def _scored_floor(self, tasks, u, star, delta, k: int) -> float:
        """c(u) + the k smallest eigenvalues of A(u) (``_floor_terms``), lowered below the exact
        value at the exact minimizers (claim 6, "Floating point"): G_j^-1 u_j is a solve a_j within
        e_j = ||u_j - G_j a_j|| / mu_j, the computed minimizers within delta_j, c's and A's sums
        within gamma terms, LAPACK's eigenvalues within a multiple of d eps ||A||_F."""
        d, X, n = self.d, self.X[tasks], self.n[tasks]
        mu, w, lam = self._task_min_eigenvalues[tasks], self.w[tasks], self.lam[tasks]
        a = np.array([_factor_solve(self._task_factors[j], u_j) for j, u_j in zip(tasks, u)])
        Xa = np.einsum("jid,jd->ji", X, a)
        residual = u - np.einsum("jid,ji->jd", X, Xa) / n[:, None]
        size = np.abs(u) + np.einsum("jid,ji->jd", np.abs(X), np.einsum("jid,jd->ji", np.abs(X), np.abs(a))) / n[:, None]
        error = rounding_factor(X.shape[1] + d + 3) * size
        e = (row_norms(residual) + row_norms(error)) * (1 + rounding_factor(d + 4)) / mu
        c, A = _floor_terms(u, star, a, mu, w)
        smallest = np.linalg.eigvalsh(A)[:k]
        value = c + float(np.sum(smallest))
        wu, wa, wq = w[:, None] * np.abs(u), w[:, None] * np.abs(a), (w / (2 * mu))[:, None] * np.abs(u)
        c_error = rounding_factor(len(tasks) * d + 4) * float(np.sum(wu * np.abs(star)) + np.sum(wa * np.abs(u)) / 2)
        cross = wu.T @ np.abs(star) + wa.T @ np.abs(u)
        entries = rounding_factor(len(tasks) + 6) * ((cross + cross.T) / 2 + wq.T @ np.abs(u))
        frobenius = np.sqrt(np.sum(A * A))
        eigen = (d * d + 2 * d) * EPS * frobenius + np.sqrt(np.sum(entries * entries))
        spent = float(np.sum(w * lam * (delta + 1.5 * e)))
        floor = value - c_error - k * eigen * (1 + rounding_factor(d + 4)) - spent * (1 + rounding_factor(3 * len(tasks)))
        slack = rounding_factor(k + 10) * (abs(c) + float(np.sum(np.abs(smallest))) + c_error + k * eigen + spent)
        return max(0.0, floor - slack)

    def gap_estimate(self, Theta, center) -> tuple[float, float, float] | None:
        """F(Theta, center), the dual value ``dual_bound`` finds (vanilla, before its safety
        terms) and an allowance for how far their rounding can set the difference apart from
        this one's, from the Gram matrices alone: no pass over the rows, about two iterations'
        cost.  None where there is no such form (logistic loss, lambda = 0, a singular pooled Gram
        matrix).  A screen for gap checks (``prox.fista``), not a bound.

        The squared loss is quadratic: with g_j = G_j theta_j - b_j (G_j = X_j^T X_j / n_j,
        b_j = X_j^T y_j / n_j, q_j = ||y_j||^2 / n_j), ``dual_bound``'s point is s_j = t c_j
        (X_j delta_j - y_j), delta_j = theta_j - beta, beta = (sum_j w_j G_j)^-1 sum_j w_j g_j,
        and its value -sum_j w_j [t (delta_j^T b_j - q_j) + t^2/2 (delta_j^T G_j delta_j
        - 2 delta_j^T b_j + q_j)].  Every such term is at most (sqrt(tr G_j) ||v|| + sqrt(q_j))^2
        for v = theta_j or delta_j (|v^T G v| <= tr(G) ||v||^2, ||b_j|| <= sqrt(tr(G_j) q_j)),
        which scales the allowance.
        """
        if self.loss != "squared" or not np.any(self.lam) or self._pooled_factor is None:
            return None
        Theta = np.asarray(Theta, dtype=float)
        fitted = _products(self.gram, Theta)
        u = self.w[:, None] * (fitted - self.xty)
        beta = _factor_solve(self._pooled_factor, u.sum(axis=0))
        fitted_beta = self.gram @ beta
        u_norm = row_norms(u - self.w[:, None] * fitted_beta)
        cap = self.w * self.lam
        t = min(1.0, float(np.min(np.divide(cap, u_norm, out=np.ones_like(cap),
                                            where=u_norm > cap))))
        delta = Theta - beta
        linear = np.einsum("md,md->m", delta, self.xty)
        square = np.einsum("md,md->m", delta, fitted - fitted_beta) - 2 * linear + self.yy
        dual = -float(np.sum(self.w * (t * (linear - self.yy) + t * t / 2 * square)))
        loss = (np.einsum("md,md->m", Theta, fitted) - 2 * np.einsum("md,md->m", Theta, self.xty)
                + self.yy) / 2
        penalty = self.w * self.lam * row_norms(Theta - center)
        primal = float(np.sum(self.w * loss + penalty))
        root_trace = self._root_trace
        sizes = [(root_trace * row_norms(v) + np.sqrt(self.yy)) ** 2
                 for v in (Theta, delta)]
        magnitude = float(np.sum(self.w * (sizes[0] + 3 * sizes[1]) + penalty))
        return primal, dual, 8 * rounding_factor(self.mask.shape[1] + 2 * self.d + 8) * magnitude

    def _violation(self, Theta, s, coupling, centers, abs_u) -> float | None:
        """How much the float dual point's violation of its exact constraints can lower the
        dual value (0 when exact), or None when it cannot be bounded (``abs_u``:
        ``_abs_transposed(s)``).

        The Lagrangian gives F* >= -sum phi^* - sum_j excess_j ||theta_j* - gamma_j*||
        - |r^T gamma*| (vanilla; r = sum_j X_j^T s_j, excess_j by which ||X_j^T s_j|| may
        exceed w_j lambda_j), |r^T beta*| (pooled) or sum_j |u_j^T theta_j*| (independent).
        """
        u = self._transposed(s)
        u_error = rounding_factor(self.X.shape[1] + 1) * abs_u
        upper = self._upper_value(Theta, coupling, centers)
        total = 0.0
        if coupling in ("vanilla", "fixed"):
            cap = self.w * self.lam
            norm = (row_norms(u) * (1 + rounding_factor(self.d + 3))
                    + row_norms(u_error))
            excess = np.maximum(norm - cap, 0.0)
            if np.any(excess > 0):
                if np.any(cap[excess > 0] <= 0):
                    return None
                total += float(np.sum(excess[excess > 0] * upper / cap[excess > 0]))
        if coupling == "fixed":
            return total
        if coupling == "independent":
            residual = row_norms(np.abs(u) + u_error)
        else:
            residual = np.linalg.norm(np.abs(u.sum(axis=0)) + u_error.sum(axis=0)
                                      + rounding_factor(self.m) * np.abs(u).sum(axis=0))
        if not np.any(residual) or self.loss != "squared":
            return total  # logistic: no radius is known, this term is not covered (docstring)
        radius = self._radius(coupling, upper)
        if radius is None:
            return None
        terms = np.multiply(residual, radius, out=np.zeros_like(residual), where=residual > 0)
        return total + float(np.sum(terms)) if np.all(np.isfinite(terms)) else None

    def _upper_value(self, Theta, coupling, centers) -> float:
        """An upper bound on the optimum of the coupled problem: F at a feasible point from
        Theta, inflated past its rounding (a sum of nonnegative terms: relative error
        <= gamma_N)."""
        Theta = np.asarray(Theta, dtype=float)
        if coupling == "fixed":
            value = self.objective(Theta, centers)
        elif coupling == "independent":
            value = float(np.sum(self.w * self.losses(Theta)))
        else:
            center = np.average(Theta, axis=0, weights=self.w)
            point = np.tile(center, (self.m, 1)) if coupling == "pooled" else Theta
            value = self.objective(point, center)
        return value * (1 + rounding_factor(self.mask.sum() + 4 * self.d + 8))

    def _abs_transposed(self, s) -> np.ndarray:
        """|X_j|^T |s_j| for every task, (m, d): what bounds the rounding of X_j^T s_j.  Task by
        task, so no |X| as large as X is kept (a proven bound is computed about once a fit)."""
        return np.array([np.abs(s_j) @ np.abs(X_j) for s_j, X_j in zip(s, self.X)])

    @cached_property
    def _root_trace(self) -> np.ndarray:
        """(m,) sqrt(tr G_j): ``gap_estimate``'s scale of each task's terms."""
        return np.sqrt(np.trace(self.gram, axis1=1, axis2=2))

    @cached_property
    def _task_min_eigenvalues(self) -> np.ndarray:
        """Safe lower bounds on each task's smallest Gram eigenvalue, on its active columns."""
        return np.array([safe_min_eigenvalue(G[np.ix_(a, a)], n)
                         for G, a, n in zip(self.gram, self.active, self.n)])

    @cached_property
    def _pooled_min_eigenvalue(self) -> float:
        """A safe lower bound on the smallest eigenvalue of sum_j w_j X_j^T X_j / n_j."""
        return safe_min_eigenvalue(np.einsum("m,mik->ik", self.w, self.gram),
                                   int(self.n.max()) + self.m)

    def _radius(self, coupling, upper) -> np.ndarray | float | None:
        """A bound on ||gamma*|| (vanilla), ||beta*|| (pooled) or ||theta_j*|| per task
        (independent) at an optimum of the squared loss (None when the Gram matrix is singular).

        sum_j c_j ||y_j - X_j theta_j||^2 / 2 <= F* <= upper bounds the fits, and
        w_j lambda_j ||theta_j - gamma|| <= upper the distances to the center; the Gram matrix's
        smallest eigenvalue (less a bound on its rounding) turns ||X theta|| into ||theta||.
        Doubled to cover its own rounding (it multiplies terms of order eps).
        """
        weighted_y = np.sqrt(self.row_weight) * np.linalg.norm(self.y, axis=1)
        fit = np.sqrt(2 * upper)
        if coupling == "independent":  # on active columns: u_j is exactly 0 on the others
            eig = self._task_min_eigenvalues   # none where it is not > 0 (there s_j = 0 exactly)
            return np.divide(2 * (weighted_y + fit), np.sqrt(self.w * np.maximum(eig, 0.0)),
                             out=np.full(self.m, np.inf), where=eig > 0)
        eig = self._pooled_min_eigenvalue
        if eig <= 0:
            return None
        spread = 0.0
        if coupling == "vanilla":
            trace = np.trace(self.gram, axis1=1, axis2=2)
            spread = upper * np.sqrt(np.sum(self.w * trace / (self.w * self.lam) ** 2))
        return 2 * (np.linalg.norm(weighted_y) + fit + spread) / np.sqrt(eig)


def row_norms(A: np.ndarray) -> np.ndarray:
    """Each row's 2-norm: ``np.linalg.norm(A, axis=1)``'s own sum and root, without its overhead
    (the vanilla solves of clustered ARMUL's tree, and their prox steps, take it thousands of times)."""
    return np.sqrt(np.add.reduce(A * A, axis=1))


#: Projected gradient steps of the rank floor's dual climb (``ArmulProblem.rank_floor``): on ARMUL's
#: simulation it settles within 50-100 (BENCHMARKS.md, "Low-rank ARMUL's bound"), each one
#: eigendecomposition of a d x d matrix.
FLOOR_STEPS = 100


def _in_balls(u: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Each row of u scaled into the ball of its radius, a little inside, so that the exact norm of
    the float row stays within it (the norm's and the scaling's rounding)."""
    norms = row_norms(u)
    scale = np.minimum(1.0, radius * (1 - rounding_factor(2 * u.shape[1] + 8)) / np.maximum(norms, 1e-300))
    return u * scale[:, None]


def _floor_terms(u, star, a, mu, w) -> tuple[float, np.ndarray]:
    """(c(u), A(u)) of claim 6, from the solves a_j = G_j^-1 u_j:
    c = sum_j w_j (-u_j'theta_j* - u_j'a_j / 2),
    A = sum_j w_j [sym(u_j theta_j*') + sym(a_j u_j') - u_j u_j' / (2 mu_j)]."""
    wu = w[:, None] * u
    c = -float(np.sum(wu * star) + np.sum(wu * a) / 2)
    cross = wu.T @ star + (w[:, None] * a).T @ u
    return c, (cross + cross.T) / 2 - ((w / (2 * mu))[:, None] * u).T @ u


def _climbed_value(u, star, inverse, mu, w, k: int):
    """What the rank floor's climb maximizes, c(u) + the k smallest eigenvalues of A(u), and its
    gradient in u (``inverse``: the G_j^-1, so a step costs one batched product)."""
    a = _products(inverse, u)
    c, A = _floor_terms(u, star, a, mu, w)
    eigenvalues, vectors = np.linalg.eigh(A)
    V = vectors[:, :k]
    Q = V @ V.T
    Qu = u @ Q
    gradient = w[:, None] * (-star - a + star @ Q + a @ Q + _products(inverse, Qu) - Qu / mu[:, None])
    return c + float(np.sum(eigenvalues[:k])), gradient


def _products(A, Theta) -> np.ndarray:
    """A_j theta_j for every task j: (m, r, d) and (m, d) -> (m, r) (a batched BLAS product,
    about twice as fast as the same einsum)."""
    return (A @ np.asarray(Theta, dtype=float)[:, :, None])[:, :, 0]


def _factor_solve(factor, rhs: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve(factor, rhs)``'s one LAPACK call (potrs), without its argument
    checks: they cost ten times the solve at a task's size, and the tree solves thousands."""
    c, lower = factor
    solution, _ = scipy.linalg.lapack.dpotrs(c, rhs, lower=lower)
    return solution


def _cholesky(matrix):
    eig = np.linalg.eigvalsh(matrix)
    if eig[0] <= 1e-12 * max(eig[-1], 1e-300):
        return None
    return scipy.linalg.cho_factor(matrix)


# --- exact models for SCIP --------------------------------------------------------------


def _add_tasks(model, problem: ArmulProblem) -> None:
    """theta[j, k], dist[j] >= 0, scores, the loss (epigraph for logistic) and the objective."""
    m, d = problem.m, problem.d
    rows = [(j, i) for j in range(m) for i in range(int(problem.n[j]))]
    model.J = pyo.RangeSet(0, m - 1, doc="task indices j (the data's task order)")
    model.K = pyo.RangeSet(0, d - 1, doc="coefficient indices k (the intercept first, if fitted)")
    model.R = pyo.Set(initialize=rows, doc="observations (j, i)")
    model.theta = pyo.Var(model.J, model.K, doc="theta[j, k]: task j's coefficient k")
    model.dist = pyo.Var(model.J, domain=pyo.NonNegativeReals,
                         doc="dist[j] >= distance of task j to its center (rows cone)")
    model.score = pyo.Var(model.R, doc="score[j, i] = x_ji . theta_j (rows score_def)")
    model.score_def = pyo.Constraint(model.R, rule=lambda b, j, i: b.score[j, i] == sum(
        float(problem.X[j, i, k]) * b.theta[j, k] for k in range(d)),
        doc="score_def[j, i]: score[j, i] == x_ji . theta_j")
    c = problem.row_weight
    if problem.loss == "squared":
        data_term = sum(0.5 * c[j] * (model.score[j, i] - float(problem.y[j, i])) ** 2
                        for j, i in rows)
    else:
        # softplus[j, i] >= log(1 + exp(score)) in the convex form SCIP recognizes.
        # softplus >= max(0, score) is implied, but keeps the LP relaxation bounded.
        model.softplus = pyo.Var(model.R, domain=pyo.NonNegativeReals,
                                 doc="softplus[j, i] >= log(1 + exp(score[j, i]))")
        model.softplus_max = pyo.Constraint(model.R, rule=lambda b, j, i: b.softplus[j, i] >= b.score[j, i])
        model.softplus_def = pyo.Constraint(model.R, rule=lambda b, j, i: pyo.exp(
            -b.softplus[j, i]) + pyo.exp(b.score[j, i] - b.softplus[j, i]) <= 1)
        data_term = sum(c[j] * (model.softplus[j, i] - float(problem.y[j, i]) * model.score[j, i])
                        for j, i in rows)
    model.obj = pyo.Objective(expr=data_term + sum(
        float(problem.w[j] * problem.lam[j]) * model.dist[j] for j in range(m)),
        doc=f"the ARMUL objective ({problem.loss} loss)")


def build_vanilla_model(problem: ArmulProblem) -> pyo.ConcreteModel:
    """Vanilla ARMUL as a convex program: cones ||theta_j - center||^2 <= dist_j^2.

    SCIP's feasibility tolerance applies to the squared form, so a task at
    its center (dist_j = 0) may sit ~sqrt(feastol) away: SCIP's point can be
    ~1e-5 (relative) worse than its own bound; objectives are recomputed.

    Components: ``theta[j, k]``, ``center[k]``, ``dist[j]``, ``score[j, i]``
    (and ``softplus[j, i]`` for the logistic loss), ``cone[j]``, ``obj``.
    """
    model = pyo.ConcreteModel(name="armul_vanilla")
    model.center = pyo.Var(range(problem.d), doc="center[k]: the shared center, units of theta")
    _add_tasks(model, problem)
    model.cone = pyo.Constraint(model.J, rule=lambda b, j: sum(
        (b.theta[j, k] - b.center[k]) ** 2 for k in b.K) <= b.dist[j] ** 2,
        doc="cone[j]: ||theta_j - center||^2 <= dist[j]^2")
    return model


def coefficient_radius(problem: ArmulProblem) -> float:
    """R with |theta_jk|, |center_k| <= R at some optimum of clustered ARMUL (squared loss).

    F(0, 0) bounds every term: ||X_j theta_j|| <= ||y_j|| + sqrt(2 n_j F0 / w_j) bounds
    theta_j through lambda_min(X_j^T X_j), and an occupied center lies within
    F0 / (w_j lambda_j) of its task (an empty one can be moved to 0).
    """
    if problem.loss != "squared" or np.any(problem.lam <= 0):
        raise InvalidParameterError(
            "the exact clustered model needs the squared loss and c > 0 (its big-M comes from them).")
    F0 = problem.objective(np.zeros((problem.m, problem.d)), np.zeros(problem.d))
    eig_min = np.linalg.eigvalsh(problem.gram * problem.n[:, None, None])[:, 0]
    if np.any(eig_min <= 0):
        raise InvalidDataError("the exact clustered model needs full-rank designs in every task.")
    y_norm = np.linalg.norm(problem.y, axis=1)
    theta_radius = (y_norm + np.sqrt(2 * problem.n * F0 / problem.w)) / np.sqrt(eig_min)
    return float(np.max(theta_radius + F0 / (problem.w * problem.lam)))


def build_clustered_model(problem: ArmulProblem, n_clusters: int) -> pyo.ConcreteModel:
    """Clustered ARMUL as a convex MIQCP with binary assignments ``assign[j, g]``.

    theta_j - centers_g = near[j, g] + far[j, g] with ||near[j, g]||^2 <= gap[j, g]^2
    (a convex cone) and |far[j, g, k]| <= 2 R (1 - assign[j, g]); the penalty is
    sum_g gap[j, g], so an assigned pair pays the whole distance and the others
    nothing.  R bounds |theta| and |centers| (``coefficient_radius``); task 0
    sits in cluster 0 (symmetry breaking).
    """
    radius = coefficient_radius(problem)
    model = pyo.ConcreteModel(name="armul_clustered")
    model.G = pyo.RangeSet(0, n_clusters - 1, doc="cluster indices g")
    _add_tasks(model, problem)
    model.centers = pyo.Var(model.G, model.K, bounds=(-radius, radius),
                            doc=f"centers[g, k]: cluster g's center, units of theta; |.| <= R = {radius:.6g}")
    for var in model.theta.values():
        var.setlb(-radius)
        var.setub(radius)
    model.assign = pyo.Var(model.J, model.G, domain=pyo.Binary,
                           doc="assign[j, g]: binary, 1 when task j is in cluster g")
    model.one_cluster = pyo.Constraint(model.J, rule=lambda b, j: sum(b.assign[j, g] for g in b.G) == 1,
                                       doc="one_cluster[j]: each task in one cluster")
    model.assign[0, 0].fix(1)
    model.near = pyo.Var(model.J, model.G, model.K, doc="near[j, g, k]: the part of theta_j - centers_g paid for")
    model.far = pyo.Var(model.J, model.G, model.K, bounds=(-2 * radius, 2 * radius),
                        doc="far[j, g, k]: the part free when task j is not in cluster g")
    model.gap = pyo.Var(model.J, model.G, domain=pyo.NonNegativeReals,
                        doc="gap[j, g] >= ||near[j, g]|| (rows cone)")
    model.split = pyo.Constraint(model.J, model.G, model.K, rule=lambda b, j, g, k: (
        b.theta[j, k] - b.centers[g, k] == b.near[j, g, k] + b.far[j, g, k]),
        doc="split[j, g, k]: theta_j - centers_g == near + far")
    model.far_up = pyo.Constraint(model.J, model.G, model.K, rule=lambda b, j, g, k: (
        b.far[j, g, k] <= 2 * radius * (1 - b.assign[j, g])),
        doc="far_up[j, g, k]: far <= 2 R (1 - assign[j, g])")
    model.far_down = pyo.Constraint(model.J, model.G, model.K, rule=lambda b, j, g, k: (
        -b.far[j, g, k] <= 2 * radius * (1 - b.assign[j, g])),
        doc="far_down[j, g, k]: -far <= 2 R (1 - assign[j, g])")
    model.cone = pyo.Constraint(model.J, model.G, rule=lambda b, j, g: sum(
        b.near[j, g, k] ** 2 for k in b.K) <= b.gap[j, g] ** 2,
        doc="cone[j, g]: ||near[j, g]||^2 <= gap[j, g]^2")
    model.dist_def = pyo.Constraint(model.J, rule=lambda b, j: b.dist[j] == sum(b.gap[j, g] for g in b.G),
                                    doc="dist_def[j]: dist[j] == sum_g gap[j, g]")
    return model
