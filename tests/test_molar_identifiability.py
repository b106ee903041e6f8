"""MOLAR and the least-squares baselines on multi-site data (issue 19): coefficients a task cannot
identify are reported, filled from the global estimate (MOLAR) or 0 (per-task OLS), and the
weighted-median certificate stays proven with zero-weight entries."""

import math
from fractions import Fraction

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidDataError
from mtl_opt.estimators import (
    MOLAR,
    MedianLasso,
    MOLARHighDim,
    MOLARLogistic,
    PerTaskLasso,
    PerTaskOLS,
    PooledOLS,
    RobustMultitask,
)
from mtl_opt.deadline import Deadline
from mtl_opt.solvers.molar.methods import METHODS, MedianProblem
from mtl_opt.formulations import molar as F
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import multisite


@pytest.fixture(scope="module")
def sites():
    """8 sites, 4 features: x0 constant in site0, x1 in site1; site6 and site7 have 4 rows."""
    return multisite(8, 4, n=30, seed=3)


CONSTANT = [["site0", "x0"], ["site1", "x1"]]
#: 4 rows: OLS keeps intercept + 3 features (x3 left out); MOLAR also keeps a residual
#: degree of freedom for sigma_k (x2 and x3 left out).
OLS_SMALL = [["site6", "x3"], ["site7", "x3"]]
MOLAR_SMALL = [["site6", "x2"], ["site6", "x3"], ["site7", "x2"], ["site7", "x3"]]


@pytest.mark.parametrize(("estimator", "expected"), [
    (MOLAR(), CONSTANT + MOLAR_SMALL),
    (MOLAR(threshold="soft", algorithm="lp"), CONSTANT + MOLAR_SMALL),
    (MOLAR(sigma=0.5), CONSTANT + OLS_SMALL),
    (PerTaskOLS(), CONSTANT + OLS_SMALL),
    (PooledOLS(), []),
    (MOLARHighDim(), CONSTANT),
    (PerTaskLasso(c_lambda=1.0), CONSTANT),
    (RobustMultitask(), CONSTANT + OLS_SMALL),
    (MedianLasso(), CONSTANT + MOLAR_SMALL),
], ids=lambda x: repr(x)[:40] if not isinstance(x, list) else "")
def test_every_estimator_fits_multisite_data_and_reports_the_pairs_it_left_out(sites, estimator,
                                                                              expected):
    result = estimator.fit(sites.data).result_
    assert result.unidentified == expected
    assert np.all(np.isfinite(result.coef)) and np.all(np.isfinite(result.intercept))
    assert result.lower_bound is None or result.lower_bound <= result.objective


def weighted_median_by_brute_force(values, weights):
    """The minimizer of sum w |z - b| among the values (unique for continuous random data)."""
    return min(values, key=lambda c: sum(w * abs(c - b) for w, b in zip(weights, values)))


def test_fill_in_rule_matches_a_hand_computation():
    """3 tasks, 2 features, x1 = 2.5 in task 0: OLS on [1, x0] there, weight 0 in x1's median,
    x1 filled with the global value, the intercept shifted by -beta*_1 2.5, then thresholding."""
    rng = np.random.default_rng(7)
    n = [12, 15, 18]
    Xs = [rng.normal(size=(m, 2)) for m in n]
    Xs[0][:, 1] = 2.5
    truth = [np.array([1.0, 2.0, -1.0]), np.array([1.2, 2.1, -0.9]), np.array([0.6, 1.5, -1.4])]
    ys = [np.column_stack([np.ones(m), X]) @ b + 0.3 * rng.normal(size=m)
          for m, X, b in zip(n, Xs, truth)]
    model = MOLAR().fit(MultiTaskData(Xs, ys))

    local, var, sigma, kept = [], [], [], [[0, 1], [0, 1, 2], [0, 1, 2]]
    for X, y, cols in zip(Xs, ys, kept):
        A = np.column_stack([np.ones(len(y)), X])[:, cols]
        b, rss = np.linalg.lstsq(A, y, rcond=None)[:2]
        local.append(b)
        var.append(np.diag(np.linalg.inv(A.T @ A)))
        sigma.append(math.sqrt(rss[0] / (len(y) - len(cols))))
    w = np.array(n) / np.array(sigma) ** 2
    z = [weighted_median_by_brute_force([b[0] for b in local], w),
         weighted_median_by_brute_force([b[1] for b in local], w),
         weighted_median_by_brute_force([local[1][2], local[2][2]], w[1:])]  # task 0: weight 0
    own = [np.array([local[0][0] - z[2] * 2.5, local[0][1]]), local[1], local[2]]
    expected = []
    for m, cols in enumerate(kept):
        gamma = math.sqrt(math.log(min(sum(n) / n[m], len(cols)))) * sigma[m]
        row = np.array(z, dtype=float)
        for i, k in enumerate(cols):
            if abs(own[m][i] - z[k]) > gamma * math.sqrt(var[m][i]):
                row[k] = own[m][i]
        expected.append(row)
    expected = np.array(expected)
    assert model.result_.unidentified == [["task0", "x1"]]
    assert np.allclose(model.global_coef_, z[1:], rtol=1e-12, atol=0)
    assert np.allclose(model.intercept_, expected[:, 0], rtol=1e-10, atol=1e-12)
    assert np.allclose(model.coef_, expected[:, 1:], rtol=1e-10, atol=1e-12)
    assert model.coef_[0, 1] == model.global_coef_[1]
    kept_own = [expected[m, k] != z[k] for m, cols in enumerate(kept) for k in cols]
    assert any(kept_own) and not all(kept_own)  # both branches of the threshold are exercised
    # without thresholding, the fill does not move task 0's fitted values
    plain = MOLAR(c_gamma=0.0).fit(MultiTaskData(Xs, ys))
    A0 = np.column_stack([np.ones(n[0]), Xs[0][:, 0]])
    assert np.allclose(plain.predict([Xs[0], Xs[1], Xs[2]])[0], A0 @ local[0], rtol=0, atol=1e-10)


def exact_optimum(values, weights) -> Fraction:
    """min over z of sum_mk w_mk |z_k - b_mk| exactly: each minimum is at a value of positive weight."""
    total = Fraction(0)
    for k in range(values.shape[1]):
        present = [(Fraction(float(w)), Fraction(float(b)))
                   for w, b in zip(weights[:, k], values[:, k]) if w > 0]
        total += min(sum(w * abs(c - b) for w, b in present) for _, c in present)
    return total


@pytest.mark.parametrize("seed", range(4))
def test_lp_and_closed_form_agree_and_the_bound_holds_with_zero_weights(seed):
    """Absent entries carry far-off values (1e12): they must change neither the median nor the bound."""
    rng = np.random.default_rng(seed)
    values = 1e6 + rng.normal(size=(6, 4))
    weights = np.where(rng.random((6, 4)) < 0.4, 0.0, rng.uniform(0.5, 3.0, size=(6, 4)))
    weights[rng.integers(6, size=4), np.arange(4)] = 1.0  # each covariate keeps a positive weight
    values = np.where(weights > 0, values, 1e12)
    optimum = exact_optimum(values, weights)
    problem = MedianProblem(values, weights)
    for method, backend in ((METHODS["closed_form"], None), (METHODS["lp"], "highs"), (METHODS["lp"], "scip")):
        median = method.solve(problem, None, SolveOptions(), Deadline(), backend)
        objective = F.median_objective(median.estimate, values, weights)
        assert Fraction(median.lower_bound) <= optimum
        assert objective == pytest.approx(float(optimum), rel=1e-12)
        assert objective - median.lower_bound <= 1e-9 * objective
        assert np.all(np.abs(median.estimate - 1e6) < 10)


def test_per_task_ols_equals_least_squares_without_the_column(sites):
    data = sites.data
    result = PerTaskOLS().fit(data).result_
    drop = {0: [0], 1: [1], 6: [3], 7: [3]}
    optimum = 0.0
    for k, (X, y) in enumerate(zip(data.Xs, data.ys)):
        cols = [j for j in range(4) if j not in drop.get(k, [])]
        A = np.column_stack([np.ones(len(y)), X[:, cols]])
        b = np.linalg.lstsq(A, y, rcond=None)[0]
        optimum += np.sum((y - A @ b) ** 2) / (2 * len(y))
        assert result.intercept[k] == pytest.approx(b[0], rel=1e-9, abs=1e-9)
        assert np.allclose(result.coef[k, cols], b[1:], rtol=1e-8, atol=1e-9)
        assert np.all(result.coef[k, drop.get(k, [])] == 0.0)
    assert result.lower_bound <= optimum * (1 + 1e-12)
    assert result.objective == pytest.approx(optimum, rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_per_task_ols_certifies_features_on_scales_1_to_100(seed):
    """Columns on scales 1 / 10 / 100 with offsets left the bound ~4e-9 short (gap_limit):
    ols scales them by powers of two before solving, which keeps the bound exact."""
    data = multisite(seed=seed).data
    result = PerTaskOLS().fit(data).result_
    assert result.status == "optimal" and result.rel_gap <= 1e-9
    fitted = [np.column_stack([np.ones(len(X)), X[:, ~np.isin(np.arange(5), bad)]])
              for X, bad in zip(data.Xs, _left_out(result, data))]
    optimum = sum(np.sum((y - A @ np.linalg.lstsq(A, y, rcond=None)[0]) ** 2) / (2 * len(y))
                  for A, y in zip(fitted, data.ys))
    assert result.lower_bound <= optimum * (1 + 1e-12)


def _left_out(result, data):
    """Per task, the feature indices ``result.unidentified`` lists for it."""
    names = data.feature_names
    return [[names.index(f) for t, f in result.unidentified if t == task]
            for task in data.task_names]


def test_a_feature_no_task_identifies_is_zero_with_a_warning():
    """x1 is constant within every task (a site-level variable): MOLAR and pooled OLS warn."""
    rng = np.random.default_rng(1)
    Xs = [np.column_stack([rng.normal(size=20), np.full(20, float(k))]) for k in range(4)]
    ys = [X[:, 0] + 0.1 * rng.normal(size=20) for X in Xs]
    data = MultiTaskData(Xs, ys)
    for median in ("closed_form", "lp"):
        model = MOLAR(algorithm=median).fit(data)
        assert np.all(model.coef_[:, 1] == 0) and model.global_coef_[1] == 0
        assert model.result_.status == "optimal" and "['x1']" in model.result_.warnings[0]
        assert len(model.result_.unidentified) == 4
        lower, upper = model.conf_int()
        assert np.all(np.isnan(lower[:, 1])) and np.all(np.isfinite(upper[:, 0]))
    pooled_X = np.column_stack([rng.normal(size=(40, 1)), np.full(40, 3.0)])  # constant when pooled
    pooled_data = MultiTaskData([pooled_X[:20], pooled_X[20:]], [rng.normal(size=20)] * 2)
    pooled = PooledOLS().fit(pooled_data).result_
    A = np.column_stack([np.ones(40), pooled_X[:, 0]])
    b = np.linalg.lstsq(A, np.concatenate(pooled_data.ys), rcond=None)[0]
    assert np.allclose(pooled.coef, [[b[1], 0.0]] * 2) and np.allclose(pooled.intercept, b[0])
    assert pooled.unidentified == [["task0", "x1"], ["task1", "x1"]] and "['x1']" in pooled.warnings[0]


def test_high_dimensional_median_gives_a_constant_column_weight_zero(sites):
    """MOLARHighDim's global x0 is the median over the sites where x0 varies (not the 0 that
    site0's LASSO returns for its zero column), and site0 takes it."""
    data = sites.data
    model = MOLARHighDim().fit(data)
    from mtl_opt.solvers.molar.lasso_debias import lasso_coefs
    centred = data.standardize(how="task", center=True, scale=False)[0]
    local = lasso_coefs(centred.Xs, centred.ys, c_lambda=model.c_lambda_local)
    assert local[0, 0] == 0.0
    assert model.global_coef_[0] == weighted_median_by_brute_force(list(local[1:, 0]),
                                                                   list(data.n_samples[1:]))
    assert model.coef_[0, 0] == pytest.approx(model.global_coef_[0], abs=1e-12)


def test_molar_logistic_fills_a_constant_column_and_refuses_a_separable_small_task():
    rng = np.random.default_rng(2)
    Xs = [rng.normal(size=(300, 2)) for _ in range(4)]
    Xs[0][:, 1] = 1.5
    ys = [(rng.random(300) < 1 / (1 + np.exp(-(X @ [1.0, -1.0])))).astype(float) for X in Xs]
    model = MOLARLogistic(c_gamma=0.0).fit(MultiTaskData(Xs, ys))
    assert model.result_.unidentified == [["task0", "x1"]]
    assert model.coef_[0, 1] == model.global_coef_[1]
    A = np.column_stack([np.ones(300), Xs[0][:, 0]])  # task 0's linear predictor is its own MLE's
    eta = model.decision_function(MultiTaskData(Xs, ys))[0]
    own = np.linalg.lstsq(A, eta, rcond=None)[0]
    assert np.allclose(A @ own, eta, atol=1e-9) and np.allclose(own[1], model.mle_coef_[0, 0], atol=1e-9)
    small = MultiTaskData([rng.normal(size=(3, 2))] + Xs[1:], [np.array([0.0, 1.0, 1.0])] + ys[1:])
    with pytest.raises(InvalidDataError, match=r"task 'task0'.*separable.*ARMUL\(loss='logistic'\)"):
        MOLARLogistic().fit(small)


def test_conf_int_is_nan_exactly_where_a_task_does_not_identify(sites):
    lower, upper = MOLAR().fit(sites.data).conf_int()
    missing = np.zeros((8, 4), dtype=bool)
    for task, feature in CONSTANT + MOLAR_SMALL:
        missing[int(task[4:]), int(feature[1:])] = True
    assert np.array_equal(np.isnan(lower), missing) and np.array_equal(np.isnan(upper), missing)
    assert np.all(lower[~missing] < upper[~missing])
