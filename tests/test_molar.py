"""MOLAR and its baselines: accuracy on the paper's setup, certificates, errors."""

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.estimators import MOLAR, PerTaskOLS, PooledOLS
from mtl_opt.formulations.molar import median_objective
from mtl_opt.synthetic import sparse_heterogeneity

LP_BACKENDS = ["highs", "scip"]


def l1_error(coef, truth):
    return np.abs(coef - truth).sum(axis=1).mean()


@pytest.mark.parametrize("seed", range(5))
def test_molar_beats_ols_and_pooling_on_the_scaled_down_paper_setup(seed):
    problem = sparse_heterogeneity(d=20, M=10, n=400, s=2, sigma=0.1, seed=seed)
    ols = l1_error(PerTaskOLS(fit_intercept=False).fit(problem.data).coef_, problem.coef)
    pooled = l1_error(PooledOLS(fit_intercept=False).fit(problem.data).coef_, problem.coef)
    for threshold in ("hard", "soft"):
        molar = MOLAR(threshold=threshold, fit_intercept=False).fit(problem.data)
        assert l1_error(molar.coef_, problem.coef) < min(ols, pooled)


def test_ols_baselines_match_numpy_lstsq_and_are_certified():
    problem = sparse_heterogeneity(d=4, M=3, n=50, s=1, sigma=0.5, seed=0)
    data = problem.data
    fit = PerTaskOLS().fit(data)
    for k, (X, y) in enumerate(zip(data.Xs, data.ys)):
        ref = np.linalg.lstsq(np.column_stack([np.ones(len(y)), X]), y, rcond=None)[0]
        assert np.allclose(fit.intercept_[k], ref[0]) and np.allclose(fit.coef_[k], ref[1:])
    assert fit.result_.status == "optimal"
    assert fit.result_.lower_bound <= fit.result_.objective
    X, y = np.vstack(data.Xs), np.concatenate(data.ys)
    ref = np.linalg.lstsq(np.column_stack([np.ones(len(y)), X]), y, rcond=None)[0]
    pooled = PooledOLS().fit(data)
    assert np.allclose(pooled.coef_, ref[1:]) and np.allclose(pooled.intercept_, ref[0])


def test_least_squares_bound_is_below_the_optimum_at_a_perturbed_point():
    """The bound f - g^T H^-1 g / 2 is exact at any point of a quadratic: check it off the optimum."""
    from mtl_opt.formulations.least_squares import ols
    rng = np.random.default_rng(5)
    A, y = rng.normal(size=(30, 3)), rng.normal(size=30)
    fit = ols(A, y)
    ref = np.linalg.lstsq(A, y, rcond=None)[0]
    assert fit.lower_bound == pytest.approx(np.sum((y - A @ ref) ** 2) / 60, rel=1e-12)
    assert fit.gram_inv_diag == pytest.approx(np.diag(np.linalg.inv(A.T @ A)))


def test_molar_closed_form_follows_algorithm_1_step_by_step():
    problem = sparse_heterogeneity(d=3, M=5, n=40, s=1, sigma=0.3, seed=2)
    data = problem.data
    model = MOLAR(fit_intercept=False, c_gamma=1.5).fit(data)
    # independent recomputation with numpy only
    local, vdiag, sigma = [], [], []
    for X, y in zip(data.Xs, data.ys):
        b = np.linalg.solve(X.T @ X, X.T @ y)
        local.append(b)
        vdiag.append(np.diag(np.linalg.inv(X.T @ X)))
        sigma.append(np.sqrt(np.sum((y - X @ b) ** 2) / (len(y) - 3)))
    local, vdiag, sigma = map(np.array, (local, vdiag, sigma))
    w = 40 / sigma**2
    glob = np.empty(3)
    for k in range(3):  # weighted median by brute force over the candidate values
        glob[k] = min(local[:, k], key=lambda c: np.sum(w * np.abs(c - local[:, k])))
    gamma = 1.5 * np.sqrt(np.log(min(5, 3))) * sigma
    thr = gamma[:, None] * np.sqrt(vdiag)
    expected = np.where(np.abs(local - glob) <= thr, glob, local)
    assert np.allclose(model.sigma_, sigma)
    assert median_objective(model.global_coef_, local, w) == pytest.approx(
        median_objective(glob, local, w), rel=1e-12)
    assert np.allclose(model.coef_, expected)
    assert model.result_.status == "optimal"
    assert model.result_.lower_bound <= model.result_.objective + 1e-12


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_molar_lp_median_gives_the_closed_form_objective_and_a_certificate(backend):
    problem = sparse_heterogeneity(d=6, M=7, n=60, s=2, sigma=0.1, seed=4)
    closed = MOLAR().fit(problem.data).result_
    lp = MOLAR(algorithm="lp", backend=backend).fit(problem.data).result_
    assert lp.objective == pytest.approx(closed.objective, rel=1e-9)
    assert lp.lower_bound <= lp.objective + 1e-9
    assert lp.status == "optimal" and lp.rel_gap <= 1e-6
    assert lp.solver.lower().startswith(backend[:4])


def test_a_fit_tests_each_tasks_columns_for_identification_once(monkeypatch):
    """The rank test of each task's columns (a pivoted QR) ran three times a fit: in the check,
    the per-task OLS stage and the result, 1.4 of 3.5 s on the paper's 30 tasks of 5,000 x 300.
    The data keep it (``MultiTaskData.unidentified``)."""
    from mtl_opt import identifiability
    from mtl_opt.solvers import least_squares

    calls = []
    tested = identifiability.identified_columns

    def counted(X, fit_intercept=True):
        calls.append(X.shape)
        return tested(X, fit_intercept)
    monkeypatch.setattr(identifiability, "identified_columns", counted)
    monkeypatch.setattr(least_squares, "identified_columns", counted, raising=False)
    sim = sparse_heterogeneity(d=6, M=4, n=40, s=2, sigma=0.1, seed=0)
    MOLAR(fit_intercept=False).fit(sim.data)
    assert len(calls) == 4, calls


def test_a_stop_during_the_ols_stage_ends_the_fit_before_the_next_task(monkeypatch):
    """MOLAR has no estimate before every task's OLS fit; a Ctrl-C during that stage waited for all
    of them (100 tasks of 5,000 x 200: 5-8 s).  Now the stage stops at the next task and the fit
    raises FitInterrupted with no result."""
    from mtl_opt import interrupts
    from mtl_opt.solvers import least_squares

    calls = []
    fitted = least_squares.ols

    def stopped_at_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            interrupts.request()   # as the first Ctrl-C does inside a fit
        return fitted(*args, **kwargs)
    monkeypatch.setattr(least_squares, "ols", stopped_at_the_third)
    sim = sparse_heterogeneity(d=4, M=8, n=30, s=2, sigma=0.1, seed=0)
    with interrupts.stoppable(), pytest.raises(interrupts.FitInterrupted) as stop:
        MOLAR(fit_intercept=False).fit(sim.data)
    assert len(calls) == 3 and stop.value.result is None


def test_one_task_molar_is_ols():
    problem = sparse_heterogeneity(d=3, M=1, n=30, s=1, seed=0)
    assert np.allclose(MOLAR().fit(problem.data).coef_, PerTaskOLS().fit(problem.data).coef_)


def test_known_sigma_is_used_and_checked():
    data = sparse_heterogeneity(d=3, M=4, n=30, s=1, seed=0).data
    assert np.array_equal(MOLAR(sigma=0.2).fit(data).sigma_, np.full(4, 0.2))
    with pytest.raises(InvalidParameterError, match="one per task"):
        MOLAR(sigma=[0.1, 0.2]).fit(data)


def test_fewer_rows_than_features_fit_and_two_rows_are_refused_pointing_to_alternatives():
    """n_k <= p fits on the first n_k - 2 features (one residual degree of freedom for sigma_k);
    a task with 2 rows has no room for a feature once sigma is estimated: refused, naming it."""
    rng = np.random.default_rng(0)
    data = MultiTaskData([rng.normal(size=(5, 6)), rng.normal(size=(20, 6))],
                         [rng.normal(size=5), rng.normal(size=20)], task_names=["small", "big"])
    model = MOLAR().fit(data)
    assert model.result_.unidentified == [["small", f"x{j}"] for j in range(3, 6)]
    assert PerTaskOLS().fit(data).result_.unidentified == [["small", "x4"], ["small", "x5"]]
    tiny = MultiTaskData([rng.normal(size=(2, 3)), rng.normal(size=(20, 3))],
                         [rng.normal(size=2), rng.normal(size=20)], task_names=["tiny", "big"])
    with pytest.raises(InvalidDataError, match=r"\['tiny'\].*n_k >= 3.*sigma=.*MOLARHighDim"):
        MOLAR().fit(tiny)
    assert MOLAR(sigma=1.0).fit(tiny).result_.unidentified == [["tiny", "x1"], ["tiny", "x2"]]


def test_collinear_feature_is_filled_without_moving_the_tasks_fit():
    """x2 = x0 + x1 in task 0: (task0, x2) is reported, takes the global value, and with no
    thresholding (c_gamma = 0) task 0's fitted values are its own least-squares fit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    X = np.column_stack([X, X[:, 0] + X[:, 1]])
    Xs = [X] + [rng.normal(size=(20, 3)) for _ in range(3)]
    data = MultiTaskData(Xs, [x @ [1.0, 2.0, 3.0] + rng.normal(size=20) for x in Xs])
    model = MOLAR(c_gamma=0.0).fit(data)
    assert model.result_.unidentified == [["task0", "x2"]]
    assert model.coef_[0, 2] == model.global_coef_[2] != 0
    A = np.column_stack([np.ones(20), X])
    own_fit = A[:, :3] @ np.linalg.lstsq(A[:, :3], data.ys[0], rcond=None)[0]
    assert np.allclose(model.predict(data)[0], own_fit, rtol=0, atol=1e-9)


def test_backend_without_lp_median_is_refused():
    data = sparse_heterogeneity(d=3, M=2, n=30, s=1, seed=0).data
    with pytest.raises(InvalidParameterError, match="runs on mtl_opt itself"):
        MOLAR(backend="highs").fit(data)
