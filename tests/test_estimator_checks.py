"""Shared API checks run over every estimator class (sklearn's common-checks idea)."""

import numpy as np
import pytest

from mtl_opt.errors import InvalidDataError, InvalidParameterError, NotFittedError
from mtl_opt.estimators import ESTIMATORS
from mtl_opt.synthetic import sparse_heterogeneity

CLASSES = sorted(ESTIMATORS.values(), key=lambda cls: cls.method)
ids = [cls.__name__ for cls in CLASSES]


@pytest.fixture(scope="module")
def data():
    return sparse_heterogeneity(d=12, M=3, n=40, s=1, seed=0).data


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_init_only_stores_parameters(cls):
    est = cls()
    assert est.get_params() == {name: getattr(est, name) for name in cls.param_names()}
    assert not [name for name in vars(est) if name.endswith("_")]


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_fit_returns_self_and_sets_shapes(cls, data):
    est = cls()
    assert est.fit(data) is est
    assert est.coef_.shape == (3, 12) and est.intercept_.shape == (3,)
    assert est.result_.lower_bound is None or est.result_.lower_bound <= est.result_.objective + 1e-9
    predictions = est.predict(data)
    assert [len(p) for p in predictions] == list(data.n_samples)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_predict_before_fit_raises(cls, data):
    with pytest.raises(NotFittedError, match="fit"):
        cls().predict(data)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_fit_is_deterministic(cls, data):
    assert np.array_equal(cls().fit(data).coef_, cls().fit(data).coef_)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
@pytest.mark.parametrize("name", ["fit_intercept"])
def test_bad_parameter_error_names_it(cls, name, data):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of {cls.__name__}"):
        cls(**{name: "yes"}).fit(data)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_fit_rejects_raw_arrays(cls):
    with pytest.raises(InvalidDataError, match="MultiTaskData"):
        cls().fit([np.zeros((3, 2))])


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_set_params_rejects_unknown_names(cls):
    with pytest.raises(InvalidParameterError, match="valid parameters"):
        cls().set_params(nonsense=1)


def test_predict_matches_tasks_by_name(data):
    est = ESTIMATORS["ols"]().fit(data)
    reordered = data.subset_tasks([2, 0])
    out = est.predict(reordered)
    assert np.allclose(out[0], data.Xs[2] @ est.coef_[2] + est.intercept_[2])
