"""scikit-learn's scorers, splitters and searches on the estimators (issue 58), with metadata
routing off and on: the task label travels in X (``task_column``), a new task is scored by the
global model (``unseen="global"``), and what cannot be scored is refused with our error, never
a NaN score.

Every score is compared with a loop written here over the same folds: the fold's rows grouped by
site into a MultiTaskData by hand, the estimator fitted on that, predictions made from its
``coef_`` / ``intercept_`` (the global model's for a new site) and the metric computed in numpy.
"""

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.inspection import permutation_importance
from sklearn.metrics import make_scorer, mean_squared_error
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    KFold,
    LeaveOneGroupOut,
    cross_val_score,
    cross_validate,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from mtl_opt.cv import TaskKFold
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidDataError, InvalidParameterError
from mtl_opt.estimators import ARMUL, ESTIMATORS, MOLAR, MOLARLogistic, PerTaskOLS, PooledOLS, SparseMTL
from mtl_opt.synthetic import sparse_heterogeneity

#: A failed score is a UserWarning in scikit-learn (its NaN): here, a test failure.
pytestmark = pytest.mark.filterwarnings("error::UserWarning")

FEATURES = ["age", "income", "score", "hours"]
TOL = 1e-10   # scores: the same fit on the same rows, summed in another order


@pytest.fixture(scope="module")
def frame():
    """Four sites in one long DataFrame (the site a column of X), rows shuffled; and y."""
    data = sparse_heterogeneity(d=4, M=4, n=30, s=1, seed=3).data
    X, y, t = data.stacked()
    df = pd.DataFrame(X, columns=FEATURES)
    df.insert(2, "site", np.array(["north", "south", "east", "west"])[t])
    order = np.random.default_rng(1).permutation(len(df))
    return df.iloc[order].reset_index(drop=True), y[order]


@pytest.fixture(params=[False, True], ids=["routing_off", "routing_on"])
def routing(request):
    with sklearn.config_context(enable_metadata_routing=request.param):
        yield request.param


def _global(est):
    """The global / centre model by its documented attributes (coef (p,), intercept)."""
    if isinstance(est, (MOLAR, MOLARLogistic)):
        return est.global_coef_, est.global_intercept_
    if isinstance(est, ARMUL):
        return est.center_, est.center_intercept_
    return est.coef_[0], est.intercept_[0]   # pooled: every site's model


def _fit_predict(est, df_train, y_train, df_test):
    """``est`` (without task_column) fitted on the training rows grouped by site here, and its
    predictions of the test rows by hand."""
    sites = list(dict.fromkeys(df_train["site"]))
    data = MultiTaskData([df_train.loc[df_train["site"] == s, FEATURES].to_numpy() for s in sites],
                         [y_train[(df_train["site"] == s).to_numpy()] for s in sites], sites, FEATURES)
    fitted = clone(est).set_params(task_column=None).fit(data)
    rows = []
    for s, x in zip(df_test["site"], df_test[FEATURES].to_numpy()):
        coef, b = ((fitted.coef_[sites.index(s)], fitted.intercept_[sites.index(s)])
                   if s in sites else _global(fitted))
        rows.append(x @ coef + b)
    return np.array(rows)


METRICS = {
    "r2": lambda y, p: 1 - np.sum((y - p) ** 2) / np.sum((y - y.mean()) ** 2),
    "neg_mean_squared_error": lambda y, p: -np.mean((y - p) ** 2),
    "neg_mean_absolute_error": lambda y, p: -np.mean(np.abs(y - p)),
    "neg_root_mean_squared_error": lambda y, p: -np.sqrt(np.mean((y - p) ** 2)),
}


def _by_hand(est, df, y, folds, metric, transform=None):
    """The score of every fold, computed here (``transform``: train, test -> scaled frames)."""
    out = []
    for train, test in folds:
        tr, te = df.iloc[train], df.iloc[test]
        if transform is not None:
            tr, te = transform(tr, te)
        out.append(METRICS[metric](y[test], _fit_predict(est, tr, y[train], te)))
    return np.array(out)


#: SparseMTL, MOLAR, ARMUL and a baseline, reading the site from X; a new site gets the global
#: model where there is one (SparseMTL has none).
ESTIMATORS_UNDER_TEST = [SparseMTL(s=2, task_column="site"),
                         MOLAR(task_column="site", unseen="global"),
                         ARMUL(task_column="site", unseen="global"),
                         PooledOLS(task_column="site", unseen="global")]
ids = [type(e).__name__ for e in ESTIMATORS_UNDER_TEST]
CV = KFold(3, shuffle=True, random_state=0)   # every site in every training fold


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST, ids=ids)
def test_cross_val_score_with_scoring_strings_equals_a_hand_loop(est, frame, routing):
    df, y = frame
    folds = list(CV.split(df))
    for metric in ["r2", "neg_mean_squared_error", "neg_mean_absolute_error"]:
        scores = cross_val_score(est, df, y, cv=CV, scoring=metric)
        assert np.isfinite(scores).all()
        np.testing.assert_allclose(scores, _by_hand(est, df, y, folds, metric), rtol=0, atol=TOL)


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST, ids=ids)
def test_cross_validate_with_a_list_of_scorers_equals_a_hand_loop(est, frame, routing):
    df, y = frame
    metrics = ["r2", "neg_root_mean_squared_error"]
    out = cross_validate(est, df, y, cv=CV, scoring=metrics, return_train_score=True)
    folds = list(CV.split(df))
    for metric in metrics:
        np.testing.assert_allclose(out[f"test_{metric}"], _by_hand(est, df, y, folds, metric),
                                   rtol=0, atol=TOL)
        train_by_hand = [METRICS[metric](y[tr], _fit_predict(est, df.iloc[tr], y[tr], df.iloc[tr]))
                         for tr, _ in folds]
        np.testing.assert_allclose(out[f"train_{metric}"], train_by_hand, rtol=0, atol=TOL)


GRIDS = {SparseMTL: {"s": [1, 3]}, MOLAR: {"c_gamma": [0.5, 2.0]}, ARMUL: {"c": [0.05, 1.0]},
         PooledOLS: {"fit_intercept": [False, True]}}


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST, ids=ids)
def test_grid_search_with_a_scoring_string_equals_a_hand_loop(est, frame, routing):
    df, y = frame
    grid = GRIDS[type(est)]
    search = GridSearchCV(est, grid, cv=CV, scoring="neg_mean_squared_error").fit(df, y)
    folds = list(CV.split(df))
    means = []
    for i, point in enumerate(search.cv_results_["params"]):
        hand = _by_hand(clone(est).set_params(**point), df, y, folds, "neg_mean_squared_error")
        split = [search.cv_results_[f"split{j}_test_score"][i] for j in range(len(folds))]
        np.testing.assert_allclose(split, hand, rtol=0, atol=TOL)
        means.append(hand.mean())
    assert search.best_params_ == search.cv_results_["params"][int(np.argmax(means))]
    assert search.best_score_ == pytest.approx(max(means), abs=TOL)


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST[1:], ids=ids[1:])
@pytest.mark.parametrize("splitter", [LeaveOneGroupOut(), GroupKFold(2)], ids=repr)
def test_leave_task_out_scores_the_new_task_by_the_global_model(est, splitter, frame, routing):
    df, y = frame
    groups = df["site"].to_numpy()
    kwargs = {"params": {"groups": groups}} if routing else {"groups": groups}
    scores = cross_val_score(est, df, y, cv=splitter, scoring="neg_mean_absolute_error", **kwargs)
    folds = list(splitter.split(df, y, groups))
    assert all(not set(groups[te]) & set(groups[tr]) for tr, te in folds)   # sites left out
    np.testing.assert_allclose(scores, _by_hand(est, df, y, folds, "neg_mean_absolute_error"),
                               rtol=0, atol=TOL)


@pytest.mark.parametrize("est", [SparseMTL(s=2, task_column="site"), MOLAR(task_column="site")],
                         ids=["SparseMTL", "MOLAR-raise"])
def test_leave_task_out_without_a_global_model_is_our_error(est, frame, routing):
    df, y = frame
    groups = df["site"].to_numpy()
    kwargs = {"params": {"groups": groups}} if routing else {"groups": groups}
    with pytest.raises(ValueError, match="(?s)All the 4 fits failed.*InvalidDataError: the test "
                                         "rows of this cross-validation split hold tasks"):
        cross_val_score(est, df, y, cv=LeaveOneGroupOut(), scoring="r2", **kwargs)
    with pytest.raises(InvalidParameterError, match="SparseMTL has none"):
        SparseMTL(task_column="site", unseen="global").fit(df, y)


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST, ids=ids)
def test_permutation_importance_equals_a_hand_loop(est, frame, routing):
    df, y = frame
    fitted = clone(est).fit(df, y)
    n_repeats = 2
    out = permutation_importance(fitted, df, y, scoring="r2", n_repeats=n_repeats, random_state=0)
    # scikit-learn's documented procedure: one seed, each column's rows shuffled n_repeats times
    seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max + 1)
    base = METRICS["r2"](y, _fit_predict(est, df, y, df))
    for j, column in enumerate(df.columns):
        rng, idx, permuted = np.random.RandomState(seed), np.arange(len(df)), df.copy()
        drops = []
        for _ in range(n_repeats):
            rng.shuffle(idx)
            permuted[column] = permuted[column].to_numpy()[idx]
            drops.append(base - METRICS["r2"](y, _fit_predict(est, df, y, permuted)))
        np.testing.assert_allclose(out.importances[j], drops, rtol=0, atol=TOL)
    assert np.isfinite(out.importances).all()


@pytest.mark.parametrize("est", ESTIMATORS_UNDER_TEST, ids=ids)
def test_pipeline_with_a_column_transformer_equals_a_hand_loop(est, frame, routing):
    df, y = frame
    scale = ColumnTransformer([("scale", StandardScaler(), FEATURES)], remainder="passthrough",
                              verbose_feature_names_out=False).set_output(transform="pandas")
    pipe = Pipeline([("prep", scale), ("est", est)])
    scores = cross_val_score(pipe, df, y, cv=CV, scoring="neg_mean_squared_error")

    def transform(train, test):   # the training rows' mean and (population) std, here
        mean, std = train[FEATURES].mean(), train[FEATURES].std(ddof=0)
        return [part.assign(**((part[FEATURES] - mean) / std)) for part in (train, test)]

    hand = _by_hand(est, df, y, list(CV.split(df)), "neg_mean_squared_error", transform)
    np.testing.assert_allclose(scores, hand, rtol=0, atol=TOL)


def test_an_int_task_column_reads_an_array(frame, routing):
    df, y = frame
    array = df.to_numpy(dtype=object)   # the site (column 2) beside the floats
    est = MOLAR(task_column=2)
    scores = cross_val_score(est, array, y, cv=CV, scoring="r2")
    by_name = cross_val_score(MOLAR(task_column="site"), df, y, cv=CV, scoring="r2")
    np.testing.assert_allclose(scores, by_name, rtol=0, atol=TOL)
    assert est.fit(array, y).n_features_in_ == 4 and est.task_names_ == list(dict.fromkeys(df["site"]))
    np.testing.assert_array_equal(MOLAR(task_column=-3).fit(array, y).coef_, est.coef_)


# ------------------------------------------------------------------- the task= keyword path
def test_task_keyword_without_a_scorer_that_gets_it_is_our_error(frame, routing):
    df, y = frame
    X, site = df[FEATURES], df["site"]
    with pytest.raises(ValueError, match="(?s)All the 6 fits failed.*predictions for the score will not get task"):
        GridSearchCV(MOLAR(), {"c_gamma": [0.5, 1.0]}, cv=CV,
                     scoring="neg_mean_squared_error").fit(X, y, task=site)
    with pytest.raises(ValueError, match="(?s)All the 3 fits failed.*task_column"):
        cross_val_score(MOLAR(), X, y, cv=CV, scoring="r2", params={"task": site})
    # a scorer that requests task hands it to its metric, not to predict
    scorer = make_scorer(mean_squared_error, greater_is_better=False)
    if routing:
        scorer = scorer.set_score_request(task=True)
    with pytest.raises(ValueError, match="(?s)All the 3 fits failed.*not the estimator's own score"):
        cross_val_score(MOLAR(), X, y, cv=CV, scoring=scorer, params={"task": site})
    if routing:   # the default scoring (the estimator's score) is handed task: it works
        scores = cross_val_score(MOLAR(), X, y, cv=CV, params={"task": site})
        np.testing.assert_allclose(scores, _by_hand(MOLAR(), df, y, list(CV.split(df)), "r2"),
                                   rtol=0, atol=TOL)
    else:
        with pytest.raises(ValueError, match="(?s)All the 3 fits failed.*enable_metadata_routing"):
            cross_val_score(MOLAR(), X, y, cv=CV, params={"task": site})


def test_a_multitask_fit_predicted_without_labels_says_how(frame):
    df, y = frame
    est = MOLAR().fit(df[FEATURES], y, task=df["site"])
    with pytest.raises(InvalidDataError, match=r"fitted on 4 tasks.*MOLAR\(task_column=\.\.\.\)"):
        permutation_importance(est, df[FEATURES], y, scoring="r2", n_repeats=1, random_state=0)


def test_task_column_refusals_name_the_fix(frame):
    df, y = frame
    with pytest.raises(InvalidDataError, match=r"X has no column 'region'.*task_column=None"):
        MOLAR(task_column="region").fit(df, y)
    with pytest.raises(InvalidDataError, match="pass one of them"):
        MOLAR(task_column="site").fit(df, y, task=df["site"])
    with pytest.raises(InvalidDataError, match="names a DataFrame column, but X is a ndarray"):
        MOLAR(task_column="site").fit(df[FEATURES].to_numpy(), y)
    with pytest.raises(InvalidDataError, match="X has 5 columns"):
        MOLAR(task_column=5).fit(df.to_numpy(dtype=object), y)
    fitted = MOLAR(task_column="site").fit(df, y)
    with pytest.raises(InvalidDataError, match="X has no column 'site'"):
        fitted.predict(df[FEATURES])
    with pytest.raises(InvalidParameterError, match="'task_column' parameter of MOLAR"):
        MOLAR(task_column=1.5).fit(df, y)
    with pytest.raises(InvalidParameterError, match="'unseen' parameter of MOLAR"):
        MOLAR(unseen="nearest").fit(df, y)


def test_task_column_fit_equals_the_keyword_fit(frame):
    df, y = frame
    column = SparseMTL(s=2, task_column="site").fit(df, y)
    keyword = SparseMTL(s=2).fit(df[FEATURES], y, task=df["site"])
    np.testing.assert_array_equal(column.coef_, keyword.coef_)
    assert list(column.feature_names_in_) == FEATURES and column.n_features_in_ == 4
    assert column.result_.lower_bound == keyword.result_.lower_bound
    np.testing.assert_array_equal(column.predict(df), keyword.predict(df[FEATURES], task=df["site"]))
    new = df.assign(site="central").iloc[:3]
    glob = MOLAR(task_column="site", unseen="global").fit(df, y)
    np.testing.assert_allclose(glob.predict(new), new[FEATURES].to_numpy() @ glob.global_coef_
                               + glob.global_intercept_, rtol=0, atol=1e-12)
    with pytest.raises(InvalidDataError, match="'central' was not seen in fit"):
        glob.predict(new, unseen="raise")   # the keyword still overrides


@pytest.mark.parametrize("cls", sorted([*ESTIMATORS.values(), MOLARLogistic], key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_every_estimator_takes_task_column_and_unseen(cls):
    est = cls(task_column="site", unseen="raise")
    assert est.get_params()["task_column"] == "site" and est.get_params()["unseen"] == "raise"
    assert clone(est).task_column == "site"


# ---------------------------------------------------------------------------- classifiers
@pytest.fixture(scope="module")
def labels_frame():
    """Four sites of pass / fail outcomes from per-site logistic models (not separable)."""
    rng = np.random.default_rng(5)
    parts = []
    for k, site in enumerate(["north", "south", "east", "west"]):
        X = rng.normal(size=(60, 2))
        eta = X @ np.array([1.0, -0.5 + 0.3 * k]) + 0.2 * k
        passed = rng.random(60) < 1 / (1 + np.exp(-eta))
        parts.append(pd.DataFrame({"site": site, "x0": X[:, 0], "x1": X[:, 1],
                                   "outcome": np.where(passed, "pass", "fail")}))
    df = pd.concat(parts).sample(frac=1.0, random_state=2).reset_index(drop=True)
    return df[["site", "x0", "x1"]], df["outcome"].to_numpy()


def _auc(y01, score):
    """ROC AUC by brute force over all (positive, negative) pairs, ties counting 1/2."""
    pos, neg = score[y01 == 1], score[y01 == 0]
    return np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))


@pytest.mark.parametrize("est", [MOLARLogistic(task_column="site"),
                                 ARMUL(loss="logistic", task_column="site")], ids=["MOLARLogistic", "ARMUL"])
def test_classifier_scorers_equal_a_hand_loop(est, labels_frame, routing):
    X, outcome = labels_frame
    metrics = ["accuracy", "roc_auc", "neg_log_loss"]
    out = cross_validate(est, X, outcome, cv=CV, scoring=metrics)
    y01 = (outcome == "pass").astype(float)   # classes_ = ["fail", "pass"]: "pass" is 1
    for i, (train, test) in enumerate(CV.split(X)):
        tr, te = X.iloc[train], X.iloc[test]
        sites = list(dict.fromkeys(tr["site"]))
        data = MultiTaskData([tr.loc[tr["site"] == s, ["x0", "x1"]].to_numpy() for s in sites],
                             [y01[train][(tr["site"] == s).to_numpy()] for s in sites], sites)
        fitted = clone(est).set_params(task_column=None).fit(data)
        k = [sites.index(s) for s in te["site"]]
        eta = np.einsum("ij,ij->i", te[["x0", "x1"]].to_numpy(), fitted.coef_[k]) + fitted.intercept_[k]
        p = 1 / (1 + np.exp(-eta))
        y = y01[test]
        assert out["test_accuracy"][i] == pytest.approx(np.mean((eta > 0) == (y == 1)), abs=TOL)
        assert out["test_roc_auc"][i] == pytest.approx(_auc(y, eta), abs=TOL)
        log_loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        assert out["test_neg_log_loss"][i] == pytest.approx(-log_loss, abs=1e-9)
    fitted = clone(est).fit(X, outcome)
    assert list(fitted.classes_) == ["fail", "pass"]
    assert set(fitted.predict(X)) <= {"fail", "pass"}
    proba = fitted.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-fitted.decision_function(X))),
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fitted.predict(X), np.where(proba[:, 1] > 0.5, "pass", "fail"))


def test_task_kfold_reads_the_task_column(frame, routing):
    df, y = frame
    cv = TaskKFold(3, shuffle=True, random_state=0, task_column="site")
    folds = list(cv.split(df))
    for train, test in folds:   # every site in every fold
        assert set(df["site"].iloc[test]) == set(df["site"]) == set(df["site"].iloc[train])
    assert [t.tolist() for _, t in folds] == [t.tolist() for _, t in TaskKFold(
        3, shuffle=True, random_state=0).split(df, task=df["site"])]
    scores = cross_val_score(MOLAR(task_column="site"), df, y, cv=cv, scoring="r2")
    np.testing.assert_allclose(scores, _by_hand(MOLAR(), df, y, folds, "r2"), rtol=0, atol=TOL)
    with pytest.raises(InvalidDataError, match=r"TaskKFold\(task_column=\.\.\.\)"):
        list(TaskKFold(3).split(df))


def test_the_global_model_list_in_messages_is_the_estimators_own():
    """WITH_GLOBAL_MODEL (quoted by the refusals) names exactly the estimators whose
    parameters give a global / centre model, which unseen='global' then uses."""
    from mtl_opt.estimators.base import WITH_GLOBAL_MODEL

    named = {part.split("(")[0].strip() for part in WITH_GLOBAL_MODEL.replace(" and ", ", ").split(",")}
    with_one = {cls.__name__ for cls in [*ESTIMATORS.values(), MOLARLogistic] if cls()._has_global_model()}
    assert named == with_one
    assert not ARMUL("clustered", n_components=2)._has_global_model()
