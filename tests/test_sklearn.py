"""The estimators as scikit-learn and pandas citizens (issue 48): clone, scikit-learn's own
estimator checks, searches and pipelines on a long DataFrame, feature-name checks, tables.

Numbers are checked against fits on the same rows given as a MultiTaskData, and against R^2,
standardization and predictions computed here with numpy.
"""

import json
import sys

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from mtl_opt.cv import TaskKFold, cross_validate
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.estimators import (
    ARMUL,
    ESTIMATORS,
    MOLAR,
    ClusteredMTL,
    LowRankMTL,
    MOLARLogistic,
    PerTaskOLS,
    PooledOLS,
    SparseMTL,
)
from mtl_opt.result import FitResult
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import sparse_heterogeneity

CLASSES = sorted([*ESTIMATORS.values(), MOLARLogistic], key=lambda cls: cls.__name__)
FEATURES = ["age", "income", "score", "hours"]


#: The instances scikit-learn's checks run on: every estimator class with its defaults (they
#: fit any shape the checks use: s and n_components are capped at the data's features and
#: tasks), and the classifiers: MOLARLogistic's defaults and every GLM estimator with the
#: logistic loss, checked as classifiers.
INSTANCES = [cls() for cls in CLASSES] + [cls(loss="logistic") for cls in CLASSES
                                          if "loss" in cls.param_names()]

#: The checks that fit MOLARLogistic on labels the features separate (scikit-learn's blobs and
#: iris halves), where the logistic MLE of MOLAR-GLM does not exist: the fit is refused with an
#: InvalidDataError naming ARMUL(loss='logistic'); two checks catch it and assert.
SEPARABLE = {name: InvalidDataError for name in [
    "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_pipeline_consistency",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_classifiers_classes",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_dict_unchanged", "check_fit2d_predict1d"]} | {
    "check_positive_only_tag_during_fit": AssertionError, "check_fit2d_1feature": AssertionError}
if tuple(int(v) for v in sklearn.__version__.split(".")[:2]) < (1, 8):
    SEPARABLE["check_dtype_object"] = InvalidDataError   # its labels: a threshold of one feature

#: scikit-learn's sample-weight checks, which a logistic GLM estimator fails by design: it takes
#: sample_weight only with the squared loss (the weighted logistic loss is refused with our
#: InvalidParameterError); three checks catch that error and raise their own.
WEIGHTED_LOGISTIC = {name: InvalidParameterError for name in [
    "check_sample_weights_not_an_array",
    "check_sample_weights_list", "check_sample_weights_shape", "check_sample_weights_not_overwritten",
    "check_sample_weight_equivalence_on_dense_data"]} | {
    "check_sample_weights_pandas_series": ValueError,
    "check_all_zero_sample_weights_error": AssertionError,
    "check_classifiers_one_label_sample_weights": AssertionError}

#: The one list of scikit-learn checks that do not apply, with the reason and what they raise:
#: check name -> (reason, exception), for every estimator (key None) or one (its repr).  Each
#: runs as xfail(strict=True), so a check that starts passing fails here and leaves the list.
NOT_APPLICABLE = {
    None: {"check_array_api_input": (
        "mtl_opt computes in numpy float64 and claims no Array API support (scikit-learn skips "
        "this check unless SCIPY_ARRAY_API=1)", Exception)},
    "MOLARLogistic()": {name: ("separable labels: no logistic MLE exists, so the fit is refused",
                               raises) for name, raises in SEPARABLE.items()},
} | {repr(est): {name: ("sample_weight is refused with the logistic loss (not implemented)", raises)
                     for name, raises in WEIGHTED_LOGISTIC.items()}
     for est in INSTANCES if getattr(est, "loss", None) == "logistic"}


def _not_applicable(estimator, name: str):
    return {**NOT_APPLICABLE[None], **NOT_APPLICABLE.get(repr(estimator), {})}.get(name)


def _sklearn_checks():
    """``parametrize_with_checks`` over ``INSTANCES`` (its cases as a list: before 1.8 they are
    a generator, which pytest deprecates)."""
    mark = parametrize_with_checks(INSTANCES)
    return pytest.mark.parametrize(*mark.args[:1], list(mark.args[1]), *mark.args[2:], **mark.kwargs)


def _check_name(check) -> str:
    while hasattr(check, "func"):
        check = check.func
    return check.__name__


@_sklearn_checks()
def test_sklearn_estimator_checks(estimator, check, request):
    known = _not_applicable(estimator, _check_name(check))
    if known is not None:
        reason, raises = known
        request.applymarker(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    check(estimator)


def test_classifiers_are_classifiers_and_regressors_are_not():
    for est in INSTANCES:
        logistic = isinstance(est, MOLARLogistic) or getattr(est, "loss", None) == "logistic"
        assert sklearn.base.is_classifier(est) == logistic, est
        assert sklearn.base.is_regressor(est) != logistic, est
        assert hasattr(est, "predict_proba") == hasattr(est, "decision_function") == logistic, est


# ------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_clone_round_trips(cls):
    est = cls()
    if "solve_options" in cls.param_names():
        est.set_params(solve_options=SolveOptions(time_limit=5, solver_options={"a": 1}))
    twin = clone(est)
    assert twin is not est and type(twin) is cls
    assert twin.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    for name, value in est.get_params(deep=False).items():
        assert twin.get_params(deep=False)[name] == value, name
    assert repr(twin) == repr(est)
    assert "<style>" in est._repr_html_()
    assert sklearn.base.is_regressor(est) != (cls is MOLARLogistic)


def test_nested_solve_options_are_set_as_a_new_record():
    est = SparseMTL(s=3, solve_options=SolveOptions(rel_gap=0.01))
    before = est.solve_options
    est.set_params(solve_options__time_limit=3, s=2)
    assert est.s == 2 and est.solve_options.time_limit == 3.0 and est.solve_options.rel_gap == 0.01
    assert before.time_limit is None   # the record given is not changed
    assert est.get_params(deep=True)["solve_options__time_limit"] == 3.0
    est.set_params(solve_options__time_limit=None)   # a field can go back to None
    assert est.solve_options.time_limit is None
    assert MOLAR().set_params(solve_options__threads=1).solve_options == SolveOptions(threads=1)


@pytest.mark.parametrize("params, match", [
    ({"solve_options__nonsense": 1}, "SolveOptions has no field 'nonsense'"),
    ({"solve_options__time_limit": -1}, "time_limit"),
    ({"solve__time_limit": 1}, "no parameter 'solve__time_limit'"),
])
def test_bad_nested_parameters_are_refused(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        SparseMTL().set_params(**params)


def test_nested_keys_need_a_solve_options_parameter():
    with pytest.raises(InvalidParameterError, match="valid parameters: fit_intercept"):
        PerTaskOLS().set_params(solve_options__time_limit=1)


# ------------------------------------------------------------------------------ long format
@pytest.fixture(scope="module")
def frame():
    """Three sites in one long DataFrame, rows shuffled, plus the same rows as MultiTaskData."""
    data = sparse_heterogeneity(d=4, M=3, n=40, s=1, seed=0).data
    X, y, t = data.stacked()
    df = pd.DataFrame(X, columns=FEATURES)
    df.insert(0, "site", np.array(["north", "south", "east"])[t])
    df["y"] = y
    return df.sample(frac=1.0, random_state=1).reset_index(drop=True)


def _same_rows(df) -> MultiTaskData:
    """The MultiTaskData of ``df`` built here: sites by first appearance, rows in frame order."""
    sites = list(dict.fromkeys(df["site"]))
    return MultiTaskData([df.loc[df["site"] == s, FEATURES].to_numpy() for s in sites],
                         [df.loc[df["site"] == s, "y"].to_numpy() for s in sites], sites, FEATURES)


def test_from_frame_keeps_task_and_feature_names(frame):
    data = MultiTaskData.from_frame(frame, task="site")
    expected = _same_rows(frame)
    assert data.task_names == list(dict.fromkeys(frame["site"])) == expected.task_names
    assert data.feature_names == FEATURES
    for a, b, ya, yb in zip(data.Xs, expected.Xs, data.ys, expected.ys):
        assert np.array_equal(a, b) and np.array_equal(ya, yb)
    picked = MultiTaskData.from_frame(frame, task="site", features=["score", "age"])
    assert picked.feature_names == ["score", "age"]
    assert np.array_equal(picked.Xs[0], expected.Xs[0][:, [2, 0]])


def test_from_frame_refuses_missing_and_text_columns(frame):
    with pytest.raises(InvalidDataError, match=r"\['region'\] are not in the DataFrame"):
        MultiTaskData.from_frame(frame, task="region")
    with pytest.raises(InvalidDataError, match="not numeric"):
        MultiTaskData.from_frame(frame.assign(age=frame["age"].astype(str)), task="site")
    with pytest.raises(InvalidDataError, match="the DataFrame: features is an empty list"):
        MultiTaskData.from_frame(frame, task="site", features=[])   # as from_csv (was 0 columns of X)


@pytest.mark.parametrize("est", [MOLAR(), SparseMTL(s=2), ARMUL(), PooledOLS()], ids=repr)
def test_long_fit_equals_multitask_fit_and_predicts_in_row_order(est, frame):
    long = clone(est).fit(frame[FEATURES], frame["y"], task=frame["site"])
    ref = clone(est).fit(_same_rows(frame))
    np.testing.assert_allclose(long.coef_, ref.coef_, rtol=0, atol=1e-8)
    assert long.n_features_in_ == 4 and list(long.feature_names_in_) == FEATURES
    assert long.task_names_ == ref.task_names_
    rows = frame.iloc[::7]
    k = [ref.task_names_.index(s) for s in rows["site"]]
    by_hand = np.einsum("ij,ij->i", rows[FEATURES].to_numpy(), ref.coef_[k]) + ref.intercept_[k]
    np.testing.assert_allclose(long.predict(rows[FEATURES], task=rows["site"]), by_hand,
                               rtol=0, atol=1e-9)
    y = frame["y"].to_numpy()
    residual = y - long.predict(frame[FEATURES], task=frame["site"])
    r2 = 1 - residual @ residual / np.sum((y - y.mean()) ** 2)
    assert long.score(frame[FEATURES], frame["y"], task=frame["site"]) == pytest.approx(r2, rel=1e-12)
    assert ref.score(_same_rows(frame)) == pytest.approx(r2, rel=1e-12)


def test_without_task_all_rows_are_one_task(frame):
    one = MOLAR().fit(frame[FEATURES].to_numpy(), frame["y"].to_numpy())
    ref = MOLAR().fit(MultiTaskData([frame[FEATURES].to_numpy()], [frame["y"].to_numpy()]))
    np.testing.assert_allclose(one.coef_, ref.coef_, rtol=0, atol=1e-12)
    assert one.predict(frame[FEATURES].to_numpy()[:3]).shape == (3,)
    many = MOLAR().fit(frame[FEATURES], frame["y"], task=frame["site"])
    with pytest.raises(InvalidDataError, match="predict needs task="):
        many.predict(frame[FEATURES])


def test_reordered_or_missing_columns_are_refused(frame):
    est = MOLAR().fit(frame[FEATURES], frame["y"], task=frame["site"])
    with pytest.raises(InvalidDataError, match="same order as they were in fit"):
        est.predict(frame[FEATURES[::-1]], task=frame["site"])
    with pytest.raises(InvalidDataError, match="seen at fit time, yet now missing"):
        est.predict(frame[FEATURES[:3]], task=frame["site"])


def test_unseen_task_is_refused_or_given_the_global_model(frame):
    X = frame[FEATURES].iloc[:4]
    sites = ["north", "west", "west", "south"]
    est = MOLAR().fit(frame[FEATURES], frame["y"], task=frame["site"])
    with pytest.raises(InvalidDataError, match="task 'west' was not seen in fit.*unseen='global'"):
        est.predict(X, task=sites)
    out = est.predict(X, task=sites, unseen="global")
    glob = X.to_numpy() @ est.global_coef_ + est.global_intercept_
    np.testing.assert_allclose(out[1:3], glob[1:3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[[0, 3]], est.predict(X.iloc[[0, 3]], task=["north", "south"]))
    armul = ARMUL().fit(frame[FEATURES], frame["y"], task=frame["site"])
    np.testing.assert_allclose(armul.predict(X, task=sites, unseen="global")[1:3],
                               X.to_numpy()[1:3] @ armul.center_ + armul.center_intercept_)
    clustered = ARMUL("clustered", n_components=2, seed=0).fit(frame[FEATURES], frame["y"],
                                                                task=frame["site"])
    with pytest.raises(InvalidDataError, match="ARMUL has no global model"):
        clustered.predict(X, task=sites, unseen="global")
    with pytest.raises(InvalidDataError, match="PerTaskOLS has no global model"):
        PerTaskOLS().fit(frame[FEATURES], frame["y"], task=frame["site"]).predict(
            X, task=sites, unseen="global")


# ------------------------------------------------------------------ searches and pipelines
GRIDS = {MOLAR: {"c_gamma": [0.5, 2.0], "threshold": ["hard", "soft"]},
         SparseMTL: {"s": [1, 2], "lambda_ridge": [0.1]},   # SparseMTL() below: s=10 > p
         ARMUL: {"c": [0.2, 1.0]}}


@pytest.mark.parametrize("cls", list(GRIDS), ids=lambda c: c.__name__)
def test_grid_search_on_a_long_frame_equals_the_multitask_fit(cls, frame):
    cv = TaskKFold(3, shuffle=True, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(cls(), GRIDS[cls], cv=cv).fit(frame[FEATURES], frame["y"],
                                                            task=frame["site"])
    ref = cls(**search.best_params_).fit(MultiTaskData.from_frame(frame, task="site"))
    np.testing.assert_allclose(search.best_estimator_.coef_, ref.coef_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(search.best_estimator_.intercept_, ref.intercept_, rtol=0, atol=1e-8)
    # the first fold's score of the first point, recomputed here: folds hold every site
    train, test = next(cv.split(frame, task=frame["site"]))
    assert set(frame["site"].iloc[test]) == set(frame["site"])
    point = search.cv_results_["params"][0]
    fitted = cls(**point).fit(_same_rows(frame.iloc[train]))
    part = frame.iloc[test]
    k = [fitted.task_names_.index(s) for s in part["site"]]
    pred = np.einsum("ij,ij->i", part[FEATURES].to_numpy(), fitted.coef_[k]) + fitted.intercept_[k]
    y = part["y"].to_numpy()
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(r2, rel=1e-9)


@pytest.mark.parametrize("cls", list(GRIDS), ids=lambda c: c.__name__)
def test_pipeline_with_a_scaler_equals_the_fit_on_scaled_rows(cls, frame):
    pipe = Pipeline([("scale", StandardScaler()), ("est", cls(s=2) if cls is SparseMTL else cls())])
    with sklearn.config_context(enable_metadata_routing=True):
        pipe.fit(frame[FEATURES], frame["y"], task=frame["site"])
        predicted = pipe.predict(frame[FEATURES], task=frame["site"])
    X = frame[FEATURES].to_numpy()
    scaled = frame.copy()
    scaled[FEATURES] = (X - X.mean(axis=0)) / X.std(axis=0)
    ref = clone(pipe[-1]).fit(_same_rows(scaled))
    np.testing.assert_allclose(pipe[-1].coef_, ref.coef_, rtol=0, atol=1e-8)
    k = [ref.task_names_.index(s) for s in frame["site"]]
    by_hand = np.einsum("ij,ij->i", scaled[FEATURES].to_numpy(), ref.coef_[k]) + ref.intercept_[k]
    np.testing.assert_allclose(predicted, by_hand, rtol=0, atol=1e-8)


def test_mtl_cross_validate_takes_the_long_format(frame):
    grid = {"c_gamma": [0.5, 2.0]}
    long = cross_validate(MOLAR(), grid, frame[FEATURES], frame["y"], task=frame["site"],
                          n_splits=3, seed=0, progress=False)
    ref = cross_validate(MOLAR(), grid, MultiTaskData.from_frame(frame, task="site"),
                         n_splits=3, seed=0, progress=False)
    np.testing.assert_array_equal(long.scores, ref.scores)
    table = pd.DataFrame(long.cv_results_)
    np.testing.assert_allclose(table["mean_test_score"], -long.scores.mean(axis=1))
    np.testing.assert_allclose(table["mean_test_loss"], long.mean)
    np.testing.assert_allclose(table["split2_test_score"], -long.scores[:, 2])
    assert list(table["param_c_gamma"]) == [0.5, 2.0]
    best = int(np.argmax(table["mean_test_score"]))
    assert table["rank_test_score"][best] == 1 and long.best_index == best   # rule "min"


# ------------------------------------------------------------------------------- results
def test_to_frame_round_trips(frame):
    result = SparseMTL(s=2).fit(frame[FEATURES], frame["y"], task=frame["site"]).result_
    table = result.to_frame()
    assert list(table.index) == result.task_names and table.index.name == "task"
    assert list(table.columns) == ["intercept", *FEATURES]
    np.testing.assert_array_equal(table[FEATURES].to_numpy(), result.coef)
    np.testing.assert_array_equal(table["intercept"].to_numpy(), result.intercept)
    assert table.loc["south", "score"] == result.coef[result.task_names.index("south"), 2]


def test_equality_survives_a_json_round_trip(frame):
    result = MOLAR().fit(frame[FEATURES], frame["y"], task=frame["site"]).result_
    again = FitResult.from_json(result.to_json())
    assert again == result and not (again != result)
    assert FitResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    changed = FitResult.from_json(result.to_json())
    changed.coef[0, 0] += 1e-12
    assert changed != result
    nan = FitResult.from_json(result.to_json())
    nan.coef[:] = np.nan
    assert nan == FitResult.from_json(nan.to_json()) and nan != result


def test_to_frame_without_pandas_says_how_to_get_it(frame, monkeypatch):
    result = MOLAR().fit(frame[FEATURES], frame["y"], task=frame["site"]).result_
    monkeypatch.setitem(sys.modules, "pandas", None)   # import pandas fails
    with pytest.raises(ImportError, match=r"mtl_opt\[pandas\]"):
        result.to_frame()


def test_defaults_are_capped_at_the_data_shape(frame):
    """s >= p leaves every feature free (4 features here): SparseMTL(s=10) is s=4, which with no
    penalty is each task's own least squares, computed here with numpy; n_components is capped
    at the number of tasks (3 here)."""
    data = _same_rows(frame)
    capped = SparseMTL(variant="l0l2", s=10).fit(data)
    np.testing.assert_array_equal(capped.coef_, SparseMTL(variant="l0l2", s=4).fit(data).coef_)
    for k, (X, y) in enumerate(zip(data.Xs, data.ys)):
        A = np.column_stack([np.ones(len(X)), X])
        own = np.linalg.lstsq(A, y, rcond=None)[0]
        np.testing.assert_allclose(capped.coef_[k], own[1:], rtol=0, atol=1e-8)
        np.testing.assert_allclose(capped.intercept_[k], own[0], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(ClusteredMTL(7, seed=0).fit(data).coef_,
                                  ClusteredMTL(3, seed=0).fit(data).coef_)
