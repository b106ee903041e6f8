"""Cross-validation: path order, warm starts, scores, selection rules, reproducibility."""

import numpy as np
import pytest

from mtl_opt import cv as cv_module
from mtl_opt.cv import CVResult, cross_validate, default_simplicity, expand_grid
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import MOLAR, PerTaskOLS
from mtl_opt.estimators.base import MTLEstimator
from mtl_opt.result import FitResult
from mtl_opt.synthetic import sparse_heterogeneity

#: The recording estimator predicts the constant OFFSETS[s] in every task.
OFFSETS = {1: 0.3, 2: 0.0, 3: 2.0}


class RecordingEstimator(MTLEstimator):
    """Predicts a constant set by ``s``; records each fit's training data and warm start."""

    method = "recording"
    supports_warm_start = True
    calls: list = []

    def __init__(self, *, lam=0.0, lambda_pen=0.0, s=2):
        self.lam = lam
        self.lambda_pen = lambda_pen
        self.s = s

    def _fit(self, data, init=None):
        train = float(sum(y.sum() for y in data.ys))  # identifies the training rows
        point = {"lam": self.lam, "lambda_pen": self.lambda_pen, "s": self.s}
        self.calls.append({"train": train, "point": point,
                           "init": None if init is None else init.extra})
        return FitResult(
            method=self.method, coef=np.zeros((data.n_tasks, data.n_features)),
            intercept=np.full(data.n_tasks, OFFSETS[self.s]), objective=0.0,
            lower_bound=None, status="heuristic", extra={"train": train, "point": point})


class ColdRecordingEstimator(RecordingEstimator):
    supports_warm_start = False


@pytest.fixture(autouse=True)
def clear_calls():
    RecordingEstimator.calls.clear()


@pytest.fixture(scope="module")
def data():
    return sparse_heterogeneity(d=3, M=3, n=30, s=1, sigma=1.0, seed=0).data


def run(estimator, grid, data, **kwargs):
    kwargs = {"n_splits": 3, "seed": 0, "progress": False, **kwargs}
    return cross_validate(estimator, grid, data, **kwargs)


# ------------------------------------------------------------ path order


def test_product_grid_sorts_penalties_down_and_other_values_up_first_key_outermost():
    points = expand_grid({"lam": [2, 0, 1], "lambda_pen": [0.1, 1.0]})
    assert [(p["lam"], p["lambda_pen"]) for p in points] == [
        (0, 1.0), (0, 0.1), (1, 1.0), (1, 0.1), (2, 1.0), (2, 0.1)]


def test_explicit_points_keep_their_order():
    grid = [{"lam": 2}, {"lam": 0, "s": 1}]
    assert expand_grid(grid) == grid


def test_warm_starts_follow_the_path_within_each_fold_and_never_cross_folds(data):
    grid = {"lam": [1.0, 0.0], "lambda_pen": [0.5, 2.0]}
    result = run(RecordingEstimator(), grid, data, refit=False)
    n_points = len(result.points)
    calls = RecordingEstimator.calls
    assert len(calls) == 3 * n_points
    folds = [calls[f * n_points:(f + 1) * n_points] for f in range(3)]
    assert len({fold[0]["train"] for fold in folds}) == 3
    for fold in folds:
        assert [c["point"] for c in fold] == [{"s": 2, **p} for p in result.points]
        assert fold[0]["init"] is None
        for previous, current in zip(fold, fold[1:]):
            assert current["init"] == {"train": previous["train"], "point": previous["point"]}
            assert current["train"] == fold[0]["train"]


def test_estimators_without_warm_start_fit_every_point_cold(data):
    run(ColdRecordingEstimator(), {"lam": [0.0, 1.0, 2.0]}, data, refit=False)
    assert len(RecordingEstimator.calls) == 9
    assert all(c["init"] is None for c in RecordingEstimator.calls)


def test_refit_uses_all_the_data_and_a_clone(data):
    template = RecordingEstimator()
    result = run(template, {"lam": [0.0, 1.0]}, data)
    last = RecordingEstimator.calls[-1]
    assert last["train"] == pytest.approx(sum(y.sum() for y in data.ys))
    assert last["init"] is None
    assert result.best_estimator is not template
    assert result.best_estimator.lam == result.best_params["lam"]
    assert not hasattr(template, "result_")


# ---------------------------------------------------------------- scores


def test_molar_scores_match_a_manual_cross_validation(data):
    c_gammas = [2.0, 0.5, 1.0]
    result = run(MOLAR(), {"c_gamma": c_gammas}, data, refit=False)
    folds = data.kfold_indices(3, 0)
    manual = np.empty((3, 3))
    for i, c_gamma in enumerate(sorted(c_gammas)):
        for f, test_rows in enumerate(folds):
            train_rows = [np.setdiff1d(np.arange(n), r) for n, r in zip(data.n_samples, test_rows)]
            model = MOLAR(c_gamma=c_gamma).fit(data._take(train_rows))
            rmses = [np.sqrt(np.mean((X[r] @ b + b0 - y[r]) ** 2))
                     for X, y, r, b, b0 in zip(data.Xs, data.ys, test_rows,
                                               model.coef_, model.intercept_)]
            manual[i, f] = np.mean(rmses)
    assert [p["c_gamma"] for p in result.points] == [0.5, 1.0, 2.0]
    np.testing.assert_allclose(result.scores, manual, rtol=1e-12)
    np.testing.assert_allclose(result.mean, manual.mean(axis=1))
    np.testing.assert_allclose(result.se, manual.std(axis=1, ddof=1) / np.sqrt(3))


@pytest.mark.parametrize("workers_after", [0.0, 1.0])
def test_parallel_folds_give_the_same_scores(data, monkeypatch, workers_after):
    """Workers from the start (each takes folds from the back while this process takes them from the
    front), or after a second (this small grid is done here first)."""
    monkeypatch.setattr(cv_module, "WORKERS_AFTER", workers_after)
    grid = {"c_gamma": [0.5, 1.0]}
    serial = run(MOLAR(), grid, data, refit=False)
    parallel = run(MOLAR(), grid, data, refit=False, n_jobs=2)
    # the same folds fitted in worker processes: equal up to last-bit differences
    np.testing.assert_allclose(parallel.scores, serial.scores, rtol=1e-9, atol=1e-12)


def test_a_worker_that_fails_leaves_its_fold_to_this_process(data, monkeypatch):
    """A fold a worker fails on is fitted here: its error (here, none) is this process's."""
    monkeypatch.setattr(cv_module, "WORKERS_AFTER", 0.0)

    class Broken:
        def submit(self, *args):
            raise RuntimeError("a worker died")
    monkeypatch.setattr(cv_module, "get_memmapping_executor", lambda *args, **kwargs: Broken())
    grid = {"c_gamma": [0.5, 1.0]}
    serial = run(MOLAR(), grid, data, refit=False)
    parallel = run(MOLAR(), grid, data, refit=False, n_jobs=2)
    np.testing.assert_array_equal(parallel.scores, serial.scores)


def test_this_process_fits_on_one_blas_thread_while_workers_may_start(data, monkeypatch):
    """Workers are forked from other threads, and OpenBLAS shuts its thread pool down at a fork:
    a threaded BLAS call here at that moment waited forever (CI's oldest pass, numpy 1.24 with
    joblib 1.4).  So folds fitted here while workers may start see one BLAS thread, and the
    limit is put back after; a serial run keeps the caller's threads."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=0)

    seen = []
    original = cv_module._fold_scores

    def recording(*args):
        seen.append(blas_threads())
        return original(*args)

    monkeypatch.setattr(cv_module, "_fold_scores", recording)
    monkeypatch.setattr(cv_module, "WORKERS_AFTER", 60.0)   # the grid is done here first
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("this BLAS runs one thread only: no limit to observe")
        run(MOLAR(), {"c_gamma": [0.5, 1.0]}, data, refit=False, n_jobs=2)
        assert seen and set(seen) == {1}, seen
        assert blas_threads() == 2
        seen.clear()
        run(MOLAR(), {"c_gamma": [0.5, 1.0]}, data, refit=False, n_jobs=1)
        assert seen and set(seen) == {2}, seen


def test_joblib_parallel_works_after_a_parallel_cross_validation(data, monkeypatch):
    """The workers' executor is joblib's own, so a user's joblib.Parallel (a scikit-learn search
    with n_jobs) runs after it: loky's plain one, reused there, raised AttributeError
    ('_temp_folder_manager')."""
    import joblib

    monkeypatch.setattr(cv_module, "WORKERS_AFTER", 0.0)
    run(MOLAR(), {"c_gamma": [0.5, 1.0]}, data, refit=False, n_jobs=2)
    assert joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(i) for i in range(-2, 2)) == [2, 1, 0, 1]


def test_same_seed_same_result_different_seed_different_folds(data):
    a, b, c = (run(PerTaskOLS(), {"fit_intercept": [True, False]}, data, seed=s)
               for s in (5, 5, 6))
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.best_params == b.best_params
    assert not np.array_equal(a.scores, c.scores)


def test_custom_scoring_callable(data):
    result = run(PerTaskOLS(), {"fit_intercept": [True]}, data,
                 scoring=lambda ys, preds: float(len(ys)))
    np.testing.assert_array_equal(result.scores, np.full((1, 3), data.n_tasks))


# ------------------------------------------------------------- selection


def test_min_takes_the_argmin_and_1se_the_simplest_point_within_one_se(data):
    grid = {"s": [3, 2, 1]}
    by_min = run(RecordingEstimator(), grid, data, n_splits=5)
    by_1se = run(RecordingEstimator(), grid, data, n_splits=5, rule="1se")
    np.testing.assert_array_equal(by_min.scores, by_1se.scores)
    s_values = [p["s"] for p in by_min.points]
    best = int(np.argmin(by_min.mean))
    # the construction: s=2 has the lowest mean, s=1 is within one se of it
    assert s_values[best] == 2
    assert by_min.mean[s_values.index(1)] <= by_min.mean[best] + by_min.se[best]
    assert by_min.best_index == best and by_min.best_params == {"s": 2}
    assert by_1se.best_params == {"s": 1} and by_1se.rule == "1se"
    assert by_1se.best_estimator.s == 1


def test_simplicity_is_overridable(data):
    # every lam scores the same: "1se" keeps all; the key decides
    grid = {"lam": [0.0, 1.0, 2.0]}
    default = run(RecordingEstimator(), grid, data, rule="1se", refit=False)
    custom = run(RecordingEstimator(), grid, data, rule="1se", refit=False,
                 simplicity=lambda p: -p["lam"])
    assert default.best_params == {"lam": 0.0}  # tie: first in path order
    assert custom.best_params == {"lam": 2.0}


def test_default_simplicity_prefers_small_s_then_large_penalties():
    assert default_simplicity({"s": 3, "lambda_a": 1.0, "lambda_b": 2.0, "c": 9}) == (3, -3.0)
    points = [{"s": 2, "lambda_z": 1.0}, {"s": 1, "lambda_z": 0.1}, {"s": 1, "lambda_z": 5.0}]
    assert min(points, key=default_simplicity) == {"s": 1, "lambda_z": 5.0}


# ------------------------------------------------------- errors, no mutation


@pytest.mark.parametrize("grid, kwargs, match", [
    ({"c_gama": [1.0]}, {}, r"\['c_gama'\].*valid names: threshold, c_gamma"),
    ({"c_gamma": []}, {}, "empty"),
    ({"c_gamma": 1.0}, {}, "list of values"),
    ([], {}, "empty"),
    ("c_gamma", {}, "dict"),
    ({"c_gamma": [1.0]}, {"rule": "2se"}, "rule must be one of"),
    ({"c_gamma": [1.0]}, {"n_jobs": 0}, "n_jobs"),
    ({"c_gamma": [1.0]}, {"n_splits": 1}, "n_splits"),
    ({"c_gamma": [1.0]}, {"scoring": "mae"}, "scoring"),
    ({"c_gamma": [1.0]}, {"simplicity": "small"}, "simplicity"),
])
def test_bad_arguments_are_clear_errors(data, grid, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        run(MOLAR(), grid, data, **kwargs)


def test_the_users_estimator_is_not_mutated(data):
    template = MOLAR(c_gamma=1.0, threshold="soft")
    before = template.get_params()
    result = run(template, {"c_gamma": [0.5, 2.0]}, data)
    assert template.get_params() == before
    assert not hasattr(template, "result_")
    assert result.best_estimator.threshold == "soft"


def test_table_and_progress_bar(data, capsys):
    result = run(PerTaskOLS(), {"fit_intercept": [False, True]}, data, progress=True)
    assert isinstance(result, CVResult)
    table = result.table()
    assert "fit_intercept" in table and "mean" in table and "best" in table
    assert len(table.splitlines()) == 2 + len(result.points)
    assert "cross-validation" in capsys.readouterr().err


def test_one_blas_thread_limits_the_blas_loaded_after_its_module():
    """``resources`` imported before numpy and scipy (a fresh process): the limit still reaches
    both BLAS libraries loaded afterwards (a controller made at import found none)."""
    import subprocess
    import sys

    code = ("import mtl_opt.resources as r, numpy, scipy.linalg\n"
            "from threadpoolctl import threadpool_info\n"
            "with r.one_blas_thread():\n"
            "    print(max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
