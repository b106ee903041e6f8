"""Issue 17 for ARMUL and the least-squares baselines: certificates that hold at every scale.

The data are scaled (y times 10^k, per-task 10^{+-3}, a common level 10^k with an intercept)
and every certified result is checked against an independent optimum: ARMUL's convex problem
solved by scipy's trust-region Newton over every split of the tasks into "at the center" and
"off the center" (each restriction is smooth near its minimizer, the optimum lies in one of
them), least squares by LAPACK's QR (``numpy.linalg.lstsq``).  The reference is solved on an
analytically scaled copy: a common level L is removed exactly (y - L is exact in float64 for
y within a factor 2 of L, Sterbenz) and y is divided by nu with the penalty caps divided by nu,
since F(theta; y, cap) = nu^2 F(theta / nu; y / nu, cap / nu).  Its Newton accuracy (~1e-12
relative) is far inside the 1e-7 relative tolerance of the checks.
"""

import itertools

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import ARMUL, DataPooling, IndependentTasks, PerTaskOLS, PooledOLS
from mtl_opt.formulations.armul import ArmulProblem
from mtl_opt.formulations.least_squares import ols
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.solvers.armul.prox import fista
from mtl_opt.deadline import Deadline

#: Relative slack of every comparison with the reference optimum (issue 17).
TOL = 1e-7


# --- instances -----------------------------------------------------------------------------


def base_tasks(seed, m, p, sizes, loss="squared"):
    """Gaussian designs and responses around a shared coefficient vector."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n, p)) for n in sizes]
    theta = rng.standard_normal(p) + 0.5 * rng.standard_normal((m, p))
    if loss == "squared":
        return Xs, [X @ t + rng.standard_normal(len(X)) for X, t in zip(Xs, theta)]
    return Xs, [(rng.random(len(X)) < expit(X @ t)).astype(float) for X, t in zip(Xs, theta)]


def transformed(ys, exponents, level):
    """y_k * 10^exponents[k] + level, as the user would pass them."""
    return [y * 10.0 ** e + level for y, e in zip(ys, exponents)]


def fitted_design(Xs, fit_intercept, standardize):
    """The design ARMUL's objective is stated on: pooled standardization, then a column of ones."""
    X_all = np.vstack(Xs)
    shift = X_all.mean(axis=0) if standardize and fit_intercept else 0.0
    scale = X_all.std(axis=0) if standardize else 1.0
    As = [(X - shift) / scale for X in Xs]
    return [np.hstack([np.ones((len(A), 1)), A]) for A in As] if fit_intercept else As


def normalized(ys, level):
    """(y - level) / nu and nu: the analytically scaled copy the references solve."""
    centred = [y - level for y in ys]
    nu = float(np.sqrt(np.mean(np.concatenate(centred) ** 2))) or 1.0
    return [y / nu for y in centred], nu


# --- independent optima --------------------------------------------------------------------


def _task_loss(A, y, theta, loss):
    """Value, gradient and Hessian of n_j f_j(theta) (w_j = n_j)."""
    z = A @ theta
    if loss == "squared":
        return 0.5 * np.sum((z - y) ** 2), A.T @ (z - y), A.T @ A
    prob = expit(z)
    return (np.sum(np.logaddexp(0.0, z) - y * z), A.T @ (prob - y),
            A.T @ ((prob * (1 - prob))[:, None] * A))


def armul_optimum(As, ys, caps, loss):
    """min over Theta, gamma of sum_j n_j f_j(theta_j) + cap_j ||theta_j - gamma||.

    The optimum lies in one of the subspaces "theta_j = gamma for j outside S"; on each, with
    theta_j = gamma + v_j (j in S) and ||v|| replaced by sqrt(||v||^2 + eps^2) - eps (<= ||v||,
    at most eps smaller), the problem is smooth and convex.  Trust-region Newton with exact
    derivatives follows eps = 1e-1, 1e-2, .. until eps sum(caps) <= 1e-12 M (warm starts); the
    smoothed minimum M and the true value U at its minimizer bracket the restricted optimum
    (M <= F*_S <= U), up to the Newton decrement g^T H^-1 g / 2 of the last point.  A set S
    whose minimizer has some ||v_j|| < 10 eps is left to the smaller set without j (same
    optimum, better conditioned).  Returns the bracket (lower, upper) of the set with the least U.
    """
    m, d = len(As), As[0].shape[1]
    best = (np.inf, None)
    for free in itertools.chain.from_iterable(
            itertools.combinations(range(m), size) for size in range(m + 1)):
        size = len(free)

        def parts(x, eps):
            gamma, V = x[:d], x[d:].reshape(size, d)
            value, grad, hess = 0.0, np.zeros(d * (size + 1)), np.zeros((d * (size + 1),) * 2)
            for j in range(m):
                slot = free.index(j) if j in free else None
                f, g, H = _task_loss(As[j], ys[j], gamma + (0.0 if slot is None else V[slot]), loss)
                value += f
                grad[:d] += g
                hess[:d, :d] += H
                if slot is not None:
                    v, b = V[slot], slice(d * (1 + slot), d * (2 + slot))
                    root = np.sqrt(v @ v + eps**2)
                    value += caps[j] * (root - eps)
                    grad[b] += g + caps[j] * v / root
                    hess[:d, b] += H
                    hess[b, :d] += H
                    hess[b, b] += H + caps[j] * (np.eye(d) - np.outer(v, v) / root**2) / root
            return value, grad, hess

        x, eps = np.zeros(d * (size + 1)), 0.1
        for _ in range(30):
            res = scipy.optimize.minimize(
                lambda x: parts(x, eps)[0], x, jac=lambda x: parts(x, eps)[1],
                hess=lambda x: parts(x, eps)[2], method="trust-exact",
                options={"gtol": 1e-12, "maxiter": 500})
            x = res.x
            degenerate = eps <= 1e-6 and any(np.linalg.norm(v) < 10 * eps
                                             for v in x[d:].reshape(size, d))
            if degenerate or eps * sum(caps[j] for j in free) <= 1e-12 * abs(res.fun):
                break
            eps /= 10
        if degenerate:
            continue
        _, g, H = parts(x, eps)
        upper = parts(x, 0.0)[0]
        if upper < best[0]:
            best = (upper, res.fun - 0.5 * g @ np.linalg.lstsq(H, g, rcond=None)[0])
    upper, lower = best
    null = sum(0.5 * float(y @ y) for y in ys) if loss == "squared" else 1.0
    assert upper - lower <= 1e-9 * max(abs(upper), 1e-12 * null), ("not converged", upper, lower)
    return lower, upper


def least_squares_optimum(As, ys):
    """sum_j 1/2 ||y_j - A_j b_j||^2 with each b_j by QR least squares."""
    return sum(0.5 * float(np.sum((y - A @ np.linalg.lstsq(A, y, rcond=None)[0]) ** 2))
               for A, y in zip(As, ys))


# --- the property ----------------------------------------------------------------------------


def check_certificate(result, optimum, rel_gap):
    """LB <= optimum <= objective (TOL relative); 'optimal' only within rel_gap; no guard fired.

    optimum: (lower, upper), a bracket of the true optimum from the reference.
    """
    lower, upper = optimum
    slack = TOL * abs(upper)
    assert np.isfinite(result.objective), result.summary()
    assert result.warnings == [], result.warnings
    assert result.objective >= lower - slack, (result.objective, optimum)
    if result.lower_bound is not None:
        assert result.lower_bound <= upper + slack, (result.lower_bound, optimum)
    if result.status == "optimal":
        assert result.objective - lower <= rel_gap * abs(result.objective) + slack, (
            result.objective, optimum)


def armul_case(seed, m, p, sizes, exponents, level, *, c=1.0, loss="squared",
               fit_intercept=True, standardize=True, x_scale=1.0, algorithm="prox"):
    """Fit vanilla ARMUL on the transformed data and check it against the reference optimum."""
    Xs, ys = base_tasks(seed, m, p, sizes, loss)
    Xs = [X * x_scale for X in Xs]
    if loss == "squared":
        ys = transformed(ys, exponents, level)
    rel_gap = 1e-6
    result = ARMUL(c=c, loss=loss, fit_intercept=fit_intercept, standardize=standardize, algorithm=algorithm,
                   solve_options=SolveOptions(rel_gap=rel_gap)).fit(MultiTaskData(Xs, ys)).result_
    As = fitted_design(Xs, fit_intercept, standardize)
    caps = c * np.sqrt(As[0].shape[1] * np.array(sizes, dtype=float))
    if loss == "squared":
        scaled, nu = normalized(ys, level)
        optimum = [nu**2 * v for v in armul_optimum(As, scaled, caps / nu, loss)]
    else:
        optimum = armul_optimum(As, ys, caps, loss)
    check_certificate(result, optimum, rel_gap)
    return result


def baseline_case(estimator, seed, m, p, sizes, exponents, level):
    """A certified least-squares baseline on transformed data against QR least squares."""
    Xs, ys = base_tasks(seed, m, p, sizes)
    ys = transformed(ys, exponents, level)
    result = estimator.fit(MultiTaskData(Xs, ys)).result_
    scaled, nu = normalized(ys, level)
    standardize = getattr(estimator, "standardize", False)
    As = fitted_design(Xs, estimator.fit_intercept, standardize)
    pooled = isinstance(estimator, (PooledOLS, DataPooling))
    optimum = nu**2 * (least_squares_optimum([np.vstack(As)], [np.concatenate(scaled)]) if pooled
                       else least_squares_optimum(As, scaled))
    if isinstance(estimator, PerTaskOLS):  # sum_k 1/(2 n_k) ||r_k||^2
        optimum = nu**2 * sum(least_squares_optimum([A], [y]) / len(y) for A, y in zip(As, scaled))
    elif isinstance(estimator, PooledOLS):
        optimum /= sum(sizes)
    check_certificate(result, (optimum, optimum), 1e-6)
    return result


# --- tests -------------------------------------------------------------------------------------

SCALES = st.sampled_from([-6, -4, -2, 0, 2, 4, 6])


@st.composite
def instances(draw, max_tasks=3, max_features=6):
    """(seed, m, p, sizes, exponents, level): y scaled, shifted or scaled per task."""
    m = draw(st.integers(2, max_tasks))
    p = draw(st.integers(3, max_features))
    sizes = draw(st.lists(st.integers(2, 3 * p), min_size=m, max_size=m))
    kind = draw(st.sampled_from(["scale", "level", "per_task"]))
    exponents, level = [0] * m, 0.0
    if kind == "scale":
        exponents = [draw(SCALES)] * m
    elif kind == "level":
        level = 10.0 ** draw(st.integers(0, 9))
    else:
        exponents = draw(st.lists(st.sampled_from([-3, 0, 3]), min_size=m, max_size=m))
    return draw(st.integers(0, 10**6)), m, p, sizes, exponents, level


@settings(max_examples=8, deadline=None, derandomize=True)
@given(instances(), st.sampled_from([0.2, 1.0, 2.0]))
def test_vanilla_armul_certificate_holds_at_every_scale(instance, c):
    armul_case(*instance, c=c)


@settings(max_examples=3, deadline=None, derandomize=True)
@given(st.integers(0, 10**6), st.integers(2, 3), st.sampled_from([-3, 0, 3]), st.booleans())
def test_logistic_armul_certificate_holds_for_scaled_features(seed, m, exponent, standardize):
    armul_case(seed, m, 3, [40] * m, None, 0.0, loss="logistic", standardize=standardize,
               x_scale=10.0**exponent)


@pytest.mark.parametrize("seed, m, p, sizes, exponents, level", [
    (141, 2, 3, [2, 2], [6, 6], 0.0),   # was 'optimal' at a relative gap of 1e9
    (225, 2, 3, [2, 2], [0, 0], 1.0),   # was a bound above the objective (guard fired)
])
def test_interpolating_data_is_never_falsely_optimal(seed, m, p, sizes, exponents, level):
    """Pooled n <= d: F* = 0, so no relative gap can be proven unless the fit is exact."""
    armul_case(seed, m, p, sizes, exponents, level)


@pytest.mark.parametrize("exponents, level", [((-6, -6, -6), 0.0), ((0, 0, 0), 1e9), ((6, 6, 6), 0.0),
                                               ((-3, 0, 3), 1e3)])
def test_vanilla_armul_on_scip_reports_our_safe_bound_at_every_scale(exponents, level):
    """SCIP's point, bounded by our dual bound (SCIP's own bound carries absolute cone tolerances)."""
    result = armul_case(3, 3, 3, (12, 9, 15), exponents, level, algorithm="exact")
    assert result.bound_source == "dual feasible point from SCIP's solution, polished by FISTA"
    assert result.status == "optimal", result.summary()   # SCIP's point alone: gap_limit


@pytest.mark.parametrize("estimator", [IndependentTasks, DataPooling, PerTaskOLS, PooledOLS])
@pytest.mark.parametrize("seed, m, p, sizes, exponents, level", [
    (834, 4, 6, [18, 23, 9, 15], [0] * 4, 1e9),
    (961, 2, 7, [19, 25], [0, 0], 1e9),
    (561, 2, 7, [25, 19], [0, 0], 1e8),
    (5, 3, 4, [12, 15, 20], [-6] * 3, 0.0),
    (6, 3, 4, [12, 15, 20], [6] * 3, 1e3),
    (7, 3, 4, [12, 15, 20], [-3, 0, 3], 0.0),
])
def test_certified_baselines_hold_at_every_scale(estimator, seed, m, p, sizes, exponents, level):
    baseline_case(estimator(), seed, m, p, sizes, exponents, level)


def test_dual_bound_is_safe_on_unscaled_data_with_a_large_level():
    """The formulation alone (no rescaling): the rounding allowance keeps the bound valid."""
    Xs, ys = base_tasks(834, 4, 6, [18, 23, 9, 15])
    As = fitted_design(Xs, True, True)
    for level, coupling in ((1e9, "independent"), (1e9, "pooled"), (1e6, "vanilla")):
        shifted = [y + level for y in ys]
        problem = ArmulProblem.from_tasks(As, shifted, c=0.0 if coupling != "vanilla" else 0.5)
        caps = problem.w * problem.lam
        if coupling == "vanilla":
            lower, upper = armul_optimum(As, ys, caps, "squared")
            theta = fista(ArmulProblem.from_tasks(As, ys, c=0.5), rel_gap=1e-12, deadline=Deadline()).theta
        elif coupling == "pooled":
            lower = upper = least_squares_optimum([np.vstack(As)], [np.concatenate(ys)])
            beta = np.linalg.lstsq(np.vstack(As), np.concatenate(ys), rcond=None)[0]
            theta = np.tile(beta, (4, 1))
        else:
            lower = upper = least_squares_optimum(As, ys)
            theta = np.array([np.linalg.lstsq(A, y, rcond=None)[0] for A, y in zip(As, ys)])
        theta[:, 0] += level
        bound = problem.dual_bound(theta, coupling)
        # least squares by QR is accurate to ~1e-15 here, the ARMUL bracket to 1e-9
        assert bound is not None and bound <= upper * (1 + 1e-9), (coupling, bound, upper)
        assert bound >= lower * (1 - 1e-3), (coupling, bound, lower)  # and not vacuous


def test_least_squares_bound_is_below_the_optimum_at_large_levels():
    """ols's bound against QR least squares on the level-free data (exact: the ones absorb it)."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n, p = int(rng.integers(8, 30)), int(rng.integers(2, 7))
        A = np.hstack([np.ones((n, 1)), rng.standard_normal((n, p))])
        y = A @ rng.standard_normal(p + 1) + rng.standard_normal(n)
        for level in (1e6, 1e9):
            shifted = y + level  # the data as stored; shifted - level is exact (Sterbenz)
            optimum = least_squares_optimum([A], [shifted - level]) / n
            fit = ols(A, shifted)
            assert fit.lower_bound <= optimum * (1 + 1e-12), (seed, level, fit.lower_bound, optimum)
            assert fit.objective - fit.lower_bound <= 1e-9 * fit.objective  # still tight


@pytest.mark.parametrize("exponents, level", [((-6,) * 4, 0.0), ((0,) * 4, 1e9), ((3, 3, 3, 3), 0.0)])
def test_clustered_armul_on_scip_is_certified_at_every_scale(exponents, level):
    """Clustered ARMUL's optimum is the least, over splits of the tasks into at most 2 groups,
    of the groups' vanilla optima; the reference brackets each group's with the Newton solver."""
    sizes, c, rel_gap = (12, 9, 15, 11), 1.0, 1e-6
    Xs, ys = base_tasks(3, 4, 2, sizes)
    ys = transformed(ys, exponents, level)
    result = ARMUL("clustered", n_components=2, c=c, algorithm="exact",
                   solve_options=SolveOptions(rel_gap=rel_gap)).fit(MultiTaskData(Xs, ys)).result_
    As = fitted_design(Xs, True, True)
    caps = c * np.sqrt(As[0].shape[1] * np.array(sizes, dtype=float))
    scaled, nu = normalized(ys, level)
    groups = {group: armul_optimum([As[j] for j in group], [scaled[j] for j in group],
                                   caps[list(group)] / nu, "squared")
              for size in range(1, 5) for group in itertools.combinations(range(4), size)}
    splits = [(tuple(j for j in range(4) if labels[j] == 0), tuple(j for j in range(4) if labels[j]))
              for labels in itertools.product((0, 1), repeat=4) if labels[0] == 0]
    optimum = [nu**2 * min(sum(groups[g][side] for g in split if g) for split in splits)
               for side in (0, 1)]
    check_certificate(result, optimum, rel_gap)
    assert result.status == "optimal", result.summary()
