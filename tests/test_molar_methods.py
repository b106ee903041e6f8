"""MOLAR's method table (solvers/molar/methods.py): algorithm=/backend=, the recorded algorithm and backend, the fit's one deadline, declarative parameter checks."""

import time

import numpy as np
import pytest

import mtl_opt.estimators.molar as molar_module
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import (MOLAR, MedianLasso, MOLARHighDim, MOLARLogistic, PerTaskLasso,
                                PerTaskOLS, PooledOLS, RobustMultitask)
from mtl_opt.formulations.molar import median_objective
from mtl_opt.solvers.molar.lasso_debias import lasso_coefs, ml_coefs, rm_coefs
from mtl_opt.solvers.molar.estimate import molar_coefs
from mtl_opt.estimators.molar_variants import molar_hd_coefs
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import sparse_heterogeneity


@pytest.fixture(scope="module")
def data():
    return sparse_heterogeneity(d=4, M=5, n=40, s=1, sigma=0.1, seed=3).data


def test_molar_records_its_algorithm_and_backend_and_both_reach_the_optimum(data):
    closed = MOLAR().fit(data).result_
    lp = MOLAR(algorithm="lp", backend="scip").fit(data).result_
    assert (closed.algorithm, closed.backend) == ("closed_form", None)
    assert (lp.algorithm, lp.backend) == ("lp", "scip")
    # independent optimum: each covariate's median problem is minimized at one of its values
    fit = MOLAR().fit(data).molar_fit_
    w = fit.entry_weights
    optimum = sum(min(median_objective(np.array([c]), fit.local[:, [k]], w[:, [k]])
                      for c in fit.local[w[:, k] > 0, k]) for k in range(w.shape[1]) if w[:, k].any())
    for result in (closed, lp):
        assert result.objective == pytest.approx(optimum, rel=1e-9)
        assert result.lower_bound <= optimum * (1 + 1e-12) and result.status == "optimal"


def test_closed_form_on_a_backend_is_refused_before_any_work(data):
    with pytest.raises(InvalidParameterError, match="runs on mtl_opt itself"):
        MOLAR(backend="highs").check(data)


@pytest.mark.parametrize("estimator, algorithm", [
    (PerTaskOLS(), "ols"), (PooledOLS(), "ols"), (PerTaskLasso(), "lasso"),
    (RobustMultitask(), "lasso_debias"), (MedianLasso(), "lasso_debias"),
    (MOLARHighDim(), "lasso_debias")])
def test_every_estimator_of_the_family_records_its_one_algorithm(data, estimator, algorithm):
    result = estimator.fit(data).result_
    assert (result.algorithm, result.backend) == (algorithm, None)


def test_molar_logistic_records_the_closed_form_median():
    rng = np.random.default_rng(0)
    Xs = [rng.normal(size=(200, 2)) for _ in range(3)]
    ys = [(rng.random(200) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float) for X in Xs]
    result = MOLARLogistic().fit(MultiTaskData(Xs, ys)).result_
    assert (result.algorithm, result.backend) == ("closed_form", None)


def test_time_limit_is_the_whole_fit_budget_so_the_lp_gets_only_what_is_left(data, monkeypatch):
    """The OLS stage spends more than the whole budget: the LP must not start (it got its own
    full time_limit before), and the fit says time_limit with no bound."""
    ols = molar_module.per_task_ols

    def slow_ols(*args, **kwargs):
        time.sleep(0.5)
        return ols(*args, **kwargs)

    monkeypatch.setattr(molar_module, "per_task_ols", slow_ols)
    result = MOLAR(algorithm="lp", solve_options=SolveOptions(time_limit=0.2)).fit(data).result_
    assert result.status == "time_limit" and result.lower_bound is None
    fit = MOLAR().fit(data).molar_fit_   # the estimate kept is the closed-form median
    assert np.allclose(result.extra["global_coef"], fit.median.estimate[1:], rtol=0, atol=0)


def test_conf_int_rejects_nan_alpha_through_the_declared_constraint(data):
    model = MOLAR().fit(data)
    for alpha in (float("nan"), 0.0, 1.0, float("inf")):
        with pytest.raises(InvalidParameterError, match="The 'alpha' parameter of conf_int"):
            model.conf_int(alpha)


@pytest.mark.parametrize("call, name", [
    (lambda Xs, ys: molar_coefs(Xs, ys, c_gamma=float("nan")), "c_gamma"),
    (lambda Xs, ys: molar_coefs(Xs, ys, threshold="medium"), "threshold"),
    (lambda Xs, ys: lasso_coefs(Xs, ys, c_lambda=float("inf")), "c_lambda"),
    (lambda Xs, ys: rm_coefs(Xs, ys, zeta=float("nan")), "zeta"),
    (lambda Xs, ys: rm_coefs(Xs, ys, eta=0.5), "eta"),
    (lambda Xs, ys: ml_coefs(Xs, ys, c_lambda=float("nan")), "c_lambda"),
    (lambda Xs, ys: molar_hd_coefs(Xs, ys, c_lambda_local=float("nan")), "c_lambda_local"),
    (lambda Xs, ys: ml_coefs(Xs, ys, sigma=[0.1, float("nan")]), "sigma"),
])
def test_array_functions_check_parameters_declaratively(data, call, name):
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of "):
        call(data.Xs, data.ys)

