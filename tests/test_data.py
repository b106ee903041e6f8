"""Tests for mtl_opt.data: validation, IO round trips, standardization, splits."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mtl_opt.data import MultiTaskData, Scaler
from mtl_opt.data.core import SMALLEST_SCALE
from mtl_opt.errors import InvalidDataError, InvalidParameterError


def make_data(n_samples=(6, 9, 4), p=3, seed=0, **kwargs):
    """Random tasks with task-specific feature means/scales, so standardization matters."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for k, n in enumerate(n_samples):
        X = rng.normal(loc=3.0 * k - 2.0, scale=1.0 + k, size=(n, p))
        Xs.append(X)
        ys.append(X @ rng.normal(size=p) + 5.0 * k + rng.normal(size=n))
    return MultiTaskData(Xs, ys, **kwargs)


def assert_same(a, b):
    """Exact equality of two data sets: names, shapes and every float bit."""
    assert a.task_names == b.task_names
    assert a.feature_names == b.feature_names
    for Xa, Xb, ya, yb in zip(a.Xs, b.Xs, a.ys, b.ys):
        np.testing.assert_array_equal(Xa, Xb)
        np.testing.assert_array_equal(ya, yb)
    assert len(a) == len(b)


# ---------------------------------------------------------------- construction
def test_defaults_properties_and_repr():
    d = make_data()
    assert d.n_tasks == len(d) == 3
    assert d.n_features == 3
    assert d.n_samples.tolist() == [6, 9, 4]
    assert d.n_total == 19
    assert d.task_names == ["task0", "task1", "task2"]
    assert d.feature_names == ["x0", "x1", "x2"]
    assert all(X.dtype == np.float64 for X in d.Xs)
    assert "n_tasks=3" in repr(d) and "'task1'" in repr(d)


def test_accepts_lists_and_copies_input():
    X = np.arange(6, dtype=np.int64).reshape(3, 2)
    y = [1, 2, 3]
    d = MultiTaskData([X], [y], task_names=["only"], feature_names=["a", "b"])
    X[0, 0] = 100
    assert d.Xs[0][0, 0] == 0.0
    assert d.Xs[0].dtype == np.float64 and d.ys[0].tolist() == [1.0, 2.0, 3.0]


def test_exposed_arrays_are_read_only():
    d = make_data()
    X, y = d.task(0)
    with pytest.raises(ValueError):
        d.Xs[0][0, 0] = 1.0
    with pytest.raises(ValueError):
        y[0] = 1.0
    with pytest.raises(ValueError):
        X.flags.writeable = True
    names = d.task_names
    names[0] = "changed"
    assert d.task_names[0] == "task0"


def test_task_by_index_and_name():
    d = make_data(task_names=["a", "b", "c"])
    X_b, y_b = d.task("b")
    np.testing.assert_array_equal(X_b, d.Xs[1])
    np.testing.assert_array_equal(d.task(-1)[1], d.ys[2])
    np.testing.assert_array_equal(d.task(np.int64(0))[0], d.Xs[0])
    with pytest.raises(InvalidParameterError, match="no task named 'z'"):
        d.task("z")
    with pytest.raises(InvalidParameterError, match="out of range"):
        d.task(3)
    with pytest.raises(InvalidParameterError, match="name .* or index"):
        d.task(1.0)


def test_subset_tasks_keeps_given_order():
    d = make_data(task_names=["a", "b", "c"])
    sub = d.subset_tasks(["c", 0])
    assert sub.task_names == ["c", "a"]
    np.testing.assert_array_equal(sub.Xs[0], d.Xs[2])
    np.testing.assert_array_equal(sub.ys[1], d.ys[0])
    assert d.subset_tasks("b").task_names == ["b"]
    with pytest.raises(InvalidParameterError, match="more than once"):
        d.subset_tasks(["a", 0])


def test_stacked():
    d = make_data()
    X, y, idx = d.stacked()
    assert X.shape == (19, 3) and y.shape == (19,)
    assert idx.tolist() == [0] * 6 + [1] * 9 + [2] * 4
    for k in range(3):
        np.testing.assert_array_equal(X[idx == k], d.Xs[k])
        np.testing.assert_array_equal(y[idx == k], d.ys[k])


X23 = np.ones((2, 3))
Y2 = np.ones(2)


def _nan_at(shape, row):
    a = np.ones(shape)
    a[row] = np.nan
    return a


@pytest.mark.parametrize(
    "Xs, ys, kwargs, phrase",
    [
        ([_nan_at((3, 2), 1)], [np.ones(3)], {}, r"task 'task0': X has 2 non-finite .* row 1"),
        ([np.ones((3, 2))], [np.array([1.0, np.inf, 2.0])], {},
         r"task 'task0': y has 1 non-finite .* row 1"),
        ([np.ones(3)], [np.ones(3)], {}, r"reshape\(-1, 1\)"),
        ([np.ones((3, 2, 1))], [np.ones(3)], {}, "got a 3-D array"),
        ([X23], [np.ones((2, 1))], {}, "y must be a 1-D array"),
        ([X23], [np.ones(3)], {}, "y has 3 entries but X has 2 rows"),
        ([X23, np.ones((2, 4))], [Y2, Y2], {"task_names": ["s1", "s3"]},
         "task 's3': X has 4 feature columns but task 's1' has 3; every task must have the "
         "same features"),
        ([X23, np.ones((0, 3))], [Y2, np.ones(0)], {}, "task 'task1' has no rows"),
        ([], [], {}, "no tasks given"),
        ([X23, X23], [Y2], {}, "got 2 designs .* but 1 responses"),
        ([X23, X23], [Y2, Y2], {"task_names": ["a", "a"]}, r"duplicate task names: \['a'\]"),
        ([X23], [Y2], {"task_names": ["a", "b"]}, "got 2 task names for 1 tasks"),
        ([X23], [Y2], {"feature_names": ["a", "b"]}, "got 2 feature names for 3 feature columns"),
        ([X23], [Y2], {"feature_names": ["a", "b", "a"]}, r"duplicate feature names: \['a'\]"),
        ([np.ones((2, 0))], [Y2], {}, "0 feature columns"),
        (np.ones((2, 3)), [Y2], {}, r"single 2-D array .* MultiTaskData\(\[X\], \[y\]\)"),
        ([[["a", "b"]]], [[1.0]], {}, "dtype <U1; expected real numbers .* strings are not numbers"),
    ],
)
def test_constructor_validation(Xs, ys, kwargs, phrase):
    with pytest.raises(InvalidDataError, match=phrase):
        MultiTaskData(Xs, ys, **kwargs)


# ------------------------------------------------------------------------- CSV
def test_csv_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    Xs = [rng.normal(size=(4, 2)) * 10.0 ** rng.integers(-99, 99, size=(4, 2)),   # the scales
          np.array([[0.1, -0.0], [1e-310, 2.0 / 3.0]])]                        # data accept
    d = MultiTaskData(Xs, [rng.normal(size=4), np.array([np.pi, -1e100])],
                      task_names=["b, with comma", 'a "quoted"'], feature_names=["f 1", "f2"])
    path = tmp_path / "data.csv"
    d.to_csv(path, task="school", response="score")
    back = MultiTaskData.from_csv(path, task="school", response="score")
    assert_same(d, back)


def test_from_csv_reads_a_file_that_starts_with_a_byte_order_mark(tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM, which made the first column "\ufefftask": "no
    column 'task'"."""
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufefftask,y,x0\na,1.5,2\nb,3,4\n".encode("utf-8"))
    d = MultiTaskData.from_csv(path, task="task", response="y")
    assert d.task_names == ["a", "b"] and d.feature_names == ["x0"]
    assert d.ys[0].tolist() == [1.5] and d.Xs[1].tolist() == [[4.0]]


def test_from_csv_feature_subset_and_task_order(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text(
        "a,grp,resp,b,c\n"
        "1,z,10,2,3\n"
        "4,y,11,5,6\n"
        "\n"
        "7,z,12,8,9\n"
    )
    d = MultiTaskData.from_csv(path, task="grp", response="resp", features=["c", "a"])
    assert d.task_names == ["z", "y"]
    assert d.feature_names == ["c", "a"]
    np.testing.assert_array_equal(d.Xs[0], [[3.0, 1.0], [9.0, 7.0]])
    np.testing.assert_array_equal(d.ys[0], [10.0, 12.0])
    np.testing.assert_array_equal(d.Xs[1], [[6.0, 4.0]])
    everything = MultiTaskData.from_csv(path, task="grp", response="resp")
    assert everything.feature_names == ["a", "b", "c"]


@pytest.mark.parametrize(
    "text, kwargs, phrase",
    [
        ("", {}, "the file is empty"),
        ("task,y,x\n", {}, "header but no data rows"),
        ("task,y,x\nA,1,2\n", {"response": "resp"},
         r"no column 'resp' \(the response column\); available columns: \['task', 'y', 'x'\]"),
        ("task,y,x\nA,1,2\n", {"features": ["x", "w"]}, "no column 'w'"),
        ("task,y,x\nA,1,2\nA,1,abc\n", {}, "line 3, column 'x': 'abc' is not a number"),
        ("task,y,x\nA,,2\n", {}, "line 2, column 'y': '' is not a number"),
        ("task,y,x\nA,1,nan\n", {}, "line 2, column 'x': 'nan' is not finite"),
        ("task,y,x\nA,1,2,3\n", {}, "line 2 has 4 fields but the header has 3"),
        ("task,y,x\nA,1,2\n", {"features": ["x", "x"]}, "'x' is listed more than once"),
        ("task,y,x\nA,1,2\n", {"features": ["x", "y"]}, "'y' is the response column"),
        ("task,y,x\nA,1,2\n", {"features": ["task", "x"]}, "'task' is the task column"),
        ("task,y,x,x\nA,1,2,3\n", {}, "line 1: column 'x' appears twice"),
        ("task,y\nA,1\n", {}, "no column is left for features"),
        ("task,y,x\nA,1,2\n", {"features": []},   # not "the header lacks feature columns"
         r"features is an empty list, which selects no column.*besides task and response are \['x'\]"),
        ("task,y\nA,1\n", {"features": []}, r"features is an empty list.*least one feature: list"),
        ("task,y,x\nA,1,2\n", {"features": 3}, "features must be a list of column names; got 3"),
    ],
)
def test_from_csv_errors(tmp_path, text, kwargs, phrase):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InvalidDataError, match=phrase) as info:
        MultiTaskData.from_csv(path, **kwargs)
    assert "bad.csv" in str(info.value)


def test_from_csv_missing_file(tmp_path):
    with pytest.raises(InvalidDataError, match="nope.csv: cannot read"):
        MultiTaskData.from_csv(tmp_path / "nope.csv")


def test_to_csv_refuses_clashing_column_names(tmp_path):
    d = make_data(feature_names=["y", "b", "c"])
    with pytest.raises(InvalidParameterError, match="must all differ"):
        d.to_csv(tmp_path / "out.csv")


# ------------------------------------------------------------------------- NPZ
def test_npz_round_trip_is_exact(tmp_path):
    d = make_data(task_names=["zeta", "alpha", "mid"], feature_names=["u", "v", "w"])
    path = tmp_path / "data.bin"  # no .npz suffix: written exactly where asked
    d.to_npz(path)
    assert path.exists()
    assert_same(d, MultiTaskData.from_npz(path))


def test_from_npz_without_names_and_with_custom_keys(tmp_path):
    path = tmp_path / "raw.npz"
    X = np.arange(10.0).reshape(5, 2)
    np.savez(path, feats=X, resp=np.arange(5.0), grp=np.array([7, 3, 7, 3, 3]))
    d = MultiTaskData.from_npz(path, X="feats", y="resp", task="grp")
    assert d.task_names == ["7", "3"]
    assert d.feature_names == ["x0", "x1"]
    np.testing.assert_array_equal(d.Xs[0], X[[0, 2]])
    np.testing.assert_array_equal(d.ys[1], [1.0, 3.0, 4.0])


def test_from_npz_task_names_fix_order(tmp_path):
    path = tmp_path / "ordered.npz"
    np.savez(path, X=np.ones((3, 1)), y=np.arange(3.0), task=np.array(["a", "b", "a"]),
             task_names=np.array(["b", "a"]))
    assert MultiTaskData.from_npz(path).task_names == ["b", "a"]


@pytest.mark.parametrize(
    "arrays, phrase",
    [
        ({"X": np.ones((2, 1)), "y": np.ones(2)}, r"missing array\(s\) \['task'\]; the file holds "
                                                  r"\['X', 'y'\]"),
        ({"X": np.ones(2), "y": np.ones(2), "task": np.zeros(2)}, "expected 'X' 2-D"),
        ({"X": np.ones((2, 1)), "y": np.ones(3), "task": np.zeros(2)}, "same number of rows"),
        ({"X": np.ones((2, 1)), "y": np.ones(2), "task": np.zeros(2),
          "task_names": np.array(["9"])}, r"task label\(s\) \['0.0'\] do not appear"),
        ({"X": np.full((2, 1), np.inf), "y": np.ones(2), "task": np.zeros(2)}, "non-finite"),
    ],
)
def test_from_npz_errors(tmp_path, arrays, phrase):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(InvalidDataError, match=phrase) as info:
        MultiTaskData.from_npz(path)
    assert "bad.npz" in str(info.value)


def test_from_npz_unreadable_files(tmp_path):
    with pytest.raises(InvalidDataError, match="cannot read"):
        MultiTaskData.from_npz(tmp_path / "nope.npz")
    text = tmp_path / "text.npz"
    text.write_text("task,y\n")
    with pytest.raises(InvalidDataError, match="not an npz"):
        MultiTaskData.from_npz(text)


# ------------------------------------------------------------- standardization
def test_standardize_taskwise_statistics():
    d = make_data()
    s, scaler = d.standardize()
    assert isinstance(scaler, Scaler) and scaler.x_mean.shape == (3, 3)
    for k in range(3):
        np.testing.assert_allclose(s.Xs[k].mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(s.Xs[k].std(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_allclose(s.ys[k].mean(), 0.0, atol=1e-12)
        np.testing.assert_allclose(scaler.x_scale[k], d.Xs[k].std(axis=0), rtol=1e-15)
    assert s.task_names == d.task_names and s.feature_names == d.feature_names


def test_standardize_pooled_statistics():
    d = make_data()
    s, scaler = d.standardize(how="pooled")
    X_all, y_all, _ = s.stacked()
    np.testing.assert_allclose(X_all.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X_all.std(axis=0), 1.0, rtol=1e-12)
    assert np.all(scaler.x_mean == scaler.x_mean[0])
    assert np.all(scaler.x_scale == scaler.x_scale[0])
    # y is centered with the pooled mean, so task means stay apart.
    assert abs(s.ys[2].mean() - s.ys[0].mean()) > 1.0
    np.testing.assert_allclose(y_all.mean(), 0.0, atol=1e-12)


def test_standardize_without_center_or_scale():
    d = make_data()
    s, scaler = d.standardize(center=False)
    assert np.all(scaler.x_mean == 0.0) and np.all(scaler.y_mean == 0.0)
    np.testing.assert_allclose(s.Xs[1], d.Xs[1] / d.Xs[1].std(axis=0))
    s, scaler = d.standardize(scale=False)
    assert np.all(scaler.x_scale == 1.0)
    np.testing.assert_allclose(s.Xs[1], d.Xs[1] - d.Xs[1].mean(axis=0))
    np.testing.assert_array_equal(d.standardize(center=False, scale=False)[0].Xs[0], d.Xs[0])


def test_scaler_is_immutable():
    _, scaler = make_data().standardize()
    with pytest.raises(ValueError):
        scaler.x_mean[0, 0] = 1.0
    with pytest.raises(AttributeError):
        scaler.how = "pooled"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    how=st.sampled_from(["task", "pooled"]),
    center=st.booleans(),
    scale=st.booleans(),
)
def test_standardize_inverse_round_trip(data, how, center, scale):
    p = data.draw(st.integers(1, 3))
    sizes = data.draw(st.lists(st.integers(2, 6), min_size=1, max_size=3))
    values = st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False).map(   # the data's
        lambda v: v if abs(v) >= SMALLEST_SCALE else 0.0)                         # scales
    Xs = [data.draw(arrays(np.float64, (n, p), elements=values)) for n in sizes]
    ys = [data.draw(arrays(np.float64, (n,), elements=values)) for n in sizes]
    d = MultiTaskData(Xs, ys)
    s, scaler = d.standardize(how=how, center=center, scale=scale)   # constant columns included
    back = scaler.inverse_transform(s)
    for X0, X1, y0, y1 in zip(d.Xs, back.Xs, d.ys, back.ys):
        np.testing.assert_allclose(X1, X0, rtol=1e-12, atol=1e-12 * (1 + np.abs(X0).max()))
        np.testing.assert_allclose(y1, y0, rtol=1e-12, atol=1e-12 * (1 + np.abs(y0).max()))
    np.testing.assert_array_equal(scaler.transform(d).Xs[0], s.Xs[0])


def _ols_with_intercept(X, y):
    """Least squares fit of y ~ b + X c; returns (c, b)."""
    sol = np.linalg.lstsq(np.column_stack([np.ones(len(y)), X]), y, rcond=None)[0]
    return sol[1:], sol[0]


@pytest.mark.parametrize("how", ["task", "pooled"])
@pytest.mark.parametrize("center, scale", [(True, True), (False, True), (True, False)])
def test_coef_to_original_matches_fit_on_original_data(how, center, scale):
    d = make_data(n_samples=(12, 15, 10), p=4, seed=3)
    s, scaler = d.standardize(how=how, center=center, scale=scale)
    fits_orig = [_ols_with_intercept(X, y) for X, y in zip(d.Xs, d.ys)]
    fits_std = [_ols_with_intercept(X, y) for X, y in zip(s.Xs, s.ys)]
    coef, intercept = scaler.coef_to_original(
        np.array([c for c, _ in fits_std]), np.array([b for _, b in fits_std]))
    np.testing.assert_allclose(coef, [c for c, _ in fits_orig], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(intercept, [b for _, b in fits_orig], rtol=1e-8, atol=1e-8)
    if center and scale:  # guards against a vacuous pass: the standardized fit really differs
        assert not np.allclose(np.array([c for c, _ in fits_std]), coef)


def test_coef_to_original_shape_error():
    _, scaler = make_data().standardize()
    with pytest.raises(InvalidParameterError, match=r"expected coef_std of shape \(3, 3\)"):
        scaler.coef_to_original(np.zeros((3, 2)), np.zeros(3))


def test_constant_feature_is_centred_and_left_unscaled():
    """As scikit-learn's StandardScaler: a column constant in a task becomes a zero column with
    scale 1 there; the other columns get unit variance; the inverse restores the data."""
    rng = np.random.default_rng(0)
    X0, X1 = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    X0[:, 1] = 2.0
    X1[:, 1] = 7.0  # constant within each task but varies across tasks
    d = MultiTaskData([X0, X1], [rng.normal(size=5), rng.normal(size=4)],
                      task_names=["s1", "s2"], feature_names=["a", "b", "c"])
    s, scaler = d.standardize()
    np.testing.assert_allclose(scaler.x_scale[:, 1], 1.0, rtol=0)
    for X_std in s.Xs:
        np.testing.assert_allclose(X_std[:, 1], 0.0, atol=1e-14)
        np.testing.assert_allclose(X_std[:, [0, 2]].std(axis=0), 1.0, rtol=1e-12)
    pooled, pooled_scaler = d.standardize(how="pooled")  # varies overall: scaled
    assert np.all(np.abs(pooled_scaler.x_scale[:, 1] - np.std([2.0] * 5 + [7.0] * 4)) < 1e-12)
    for X_back, X in zip(scaler.inverse_transform(s).Xs, d.Xs):
        np.testing.assert_allclose(X_back, X, rtol=1e-12, atol=1e-12)


def test_constant_feature_centres_to_exactly_zero():
    """A column whose values are all equal centres to exactly 0 (its exact mean is subtracted),
    not to the rounding noise of the float mean (np.mean of three 0.1 is 0.1 + 1.4e-17), which
    a LASSO or a rank test could pick up; ``Scaler.transform`` gives the same array."""
    rng = np.random.default_rng(1)
    X0, X1 = rng.normal(size=(3, 2)), rng.normal(size=(7, 2))
    X0[:, 0], X1[:, 0] = 0.1, 0.7
    assert X0[:, 0].mean() != 0.1 and X1[:, 0].mean() != 0.7   # the float means are off
    d = MultiTaskData([X0, X1], [rng.normal(size=3), rng.normal(size=7)])
    for scale in (True, False):
        s, scaler = d.standardize(how="task", scale=scale)
        for X_std, X_map in zip(s.Xs, scaler.transform(d).Xs):
            assert np.all(X_std[:, 0] == 0.0)
            np.testing.assert_array_equal(X_map, X_std)
    pooled = MultiTaskData([X0[:, :1], X0[:, :1]], [rng.normal(size=3)] * 2)
    assert np.all(pooled.standardize(how="pooled", scale=False)[0].Xs[1] == 0.0)


def test_standardize_parameter_errors():
    d = make_data()
    with pytest.raises(InvalidParameterError, match="how must be 'task' or 'pooled'"):
        d.standardize(how="global")
    with pytest.raises(InvalidParameterError, match="center must be True or False"):
        d.standardize(center="yes")


def test_scaler_applies_to_a_split_and_checks_names():
    d = make_data(n_samples=(10, 12, 8), task_names=["a", "b", "c"])
    train, test = d.train_test_split(seed=0)
    _, scaler = train.standardize()
    t = scaler.transform(test.subset_tasks(["c", "a"]))
    np.testing.assert_allclose(
        t.Xs[0], (test.Xs[2] - scaler.x_mean[2] - scaler.x_shift[2]) / scaler.x_scale[2], rtol=1e-15)
    with pytest.raises(InvalidDataError, match=r"task\(s\) \['q'\] were not seen"):
        scaler.transform(MultiTaskData([np.ones((2, 3))], [np.ones(2)], ["q"]))
    with pytest.raises(InvalidDataError, match="scaler was fitted on"):
        scaler.transform(make_data(task_names=["a", "b", "c"], feature_names=["u", "v", "w"]))


# ---------------------------------------------------------------------- splits
def _row_ids(d):
    """Identify each row by its (unique, continuous) y value, per task."""
    return [set(y.tolist()) for y in d.ys]


def test_train_test_split_partitions_each_task():
    d = make_data(n_samples=(20, 7, 2))
    train, test = d.train_test_split(test_size=0.25, seed=4)
    assert train.task_names == test.task_names == d.task_names
    assert test.n_samples.tolist() == [5, 2, 1]
    assert train.n_samples.tolist() == [15, 5, 1]
    for full, tr, te in zip(_row_ids(d), _row_ids(train), _row_ids(test)):
        assert tr.isdisjoint(te) and tr | te == full
    # rows keep their X with them, in their original order
    rows = np.flatnonzero(np.isin(d.ys[0], test.ys[0]))
    np.testing.assert_array_equal(test.Xs[0], d.Xs[0][rows])
    np.testing.assert_array_equal(test.ys[0], d.ys[0][rows])


def test_train_test_split_is_seeded():
    d = make_data(n_samples=(20, 20))
    a, b, c = (d.train_test_split(seed=s)[1] for s in (1, 1, 2))
    assert_same(a, b)
    assert _row_ids(a) != _row_ids(c)
    gen = d.train_test_split(seed=np.random.default_rng(1))[1]
    assert_same(a, gen)


@pytest.mark.parametrize("bad", [0, 1, -0.2, 1.5, "0.3", True, None])
def test_train_test_split_bad_size(bad):
    with pytest.raises(InvalidParameterError, match=r"test_size must be a float in \(0, 1\)"):
        make_data().train_test_split(test_size=bad)


def test_train_test_split_needs_two_rows():
    d = MultiTaskData([np.ones((3, 1)), np.ones((1, 1))], [np.arange(3.0), np.ones(1)],
                      task_names=["ok", "tiny"])
    with pytest.raises(InvalidDataError, match=r"at least 2 rows .* 'tiny' \(1 rows\)"):
        d.train_test_split()


def test_kfold_indices_partition_each_task():
    d = make_data(n_samples=(11, 5, 7))
    folds = d.kfold_indices(n_splits=5, seed=0)
    assert len(folds) == 5 and all(len(f) == 3 for f in folds)
    for k, n in enumerate(d.n_samples):
        parts = [folds[f][k] for f in range(5)]
        assert sorted(np.concatenate(parts).tolist()) == list(range(n))
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_kfold_pairs_match_indices():
    d = make_data(n_samples=(11, 5, 7))
    folds = d.kfold_indices(n_splits=4, seed=9)
    pairs = list(d.kfold(n_splits=4, seed=9))
    assert len(pairs) == 4
    seen = [set() for _ in range(d.n_tasks)]
    for (train, test), test_rows in zip(pairs, folds):
        for k in range(d.n_tasks):
            np.testing.assert_array_equal(test.Xs[k], d.Xs[k][test_rows[k]])
            np.testing.assert_array_equal(test.ys[k], d.ys[k][test_rows[k]])
            tr, te = set(train.ys[k].tolist()), set(test.ys[k].tolist())
            assert tr.isdisjoint(te) and tr | te == set(d.ys[k].tolist())
            seen[k] |= te
    assert seen == _row_ids(d)


def test_kfold_is_seeded():
    d = make_data(n_samples=(30, 30))
    same = [d.kfold_indices(3, seed=5) for _ in range(2)]
    other = d.kfold_indices(3, seed=6)
    for f in range(3):
        for k in range(2):
            np.testing.assert_array_equal(same[0][f][k], same[1][f][k])
    assert any(not np.array_equal(same[0][f][0], other[f][0]) for f in range(3))


@pytest.mark.parametrize("bad", [1, 0, 2.5, True, "3"])
def test_kfold_bad_n_splits(bad):
    with pytest.raises(InvalidParameterError, match="n_splits must be an int >= 2"):
        make_data().kfold(n_splits=bad)


def test_kfold_needs_n_splits_rows_per_task():
    d = make_data(n_samples=(6, 3))
    with pytest.raises(InvalidDataError, match=r"at least 4 rows .* 'task1' \(3 rows\).*n_splits"):
        d.kfold(n_splits=4)  # raised at call time, before iterating
