"""Sample weights from the shell: ``[data] weight = "w"`` in an instance file (mtl_opt.instance)."""

import csv

import numpy as np
import pytest
from cli_runner import run_cli

from mtl_opt.result import FitResult

FEATURES = ["a", "b", "c"]


def _rows(seed=0, n=12):
    rng = np.random.default_rng(seed)
    rows = []
    for task in ("north", "south", "east"):
        X = rng.normal(size=(n, 3))
        y = X @ [1.0, -0.5, 0.0] + 0.3 * rng.normal(size=n)
        w = rng.integers(0, 4, size=n)
        w[0] = 1
        rows += [[task, yi, *xi, wi] for xi, yi, wi in zip(X, y, w)]
    rng.shuffle(rows)   # tasks interleaved: the weights must follow their rows
    return rows


def _write(path, rows, weighted=True):
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["site", "y", *FEATURES, *(["w"] if weighted else [])])
        for row in rows:
            out.writerow(row if weighted else row[:-1])


def _instance(path, data, method, weight='weight = "w"\n'):
    path.write_text(f'[data]\npath = "{data.name}"\ntask = "site"\nresponse = "y"\n{weight}\n'
                    f'[method]\nname = "{method}"\n')
    return path


@pytest.mark.parametrize("method", ["molar", "sparse_mtl", "ols", "armul"])
def test_a_weight_column_equals_duplicated_rows(tmp_path, method):
    rows = _rows()
    _write(tmp_path / "w.csv", rows)
    _write(tmp_path / "dup.csv", [row for row in rows for _ in range(int(row[-1]))], weighted=False)
    weighted = _instance(tmp_path / "w.toml", tmp_path / "w.csv", method)
    repeated = _instance(tmp_path / "dup.toml", tmp_path / "dup.csv", method, weight="")
    for instance in (weighted, repeated):
        done = run_cli("solve", instance, "--out", tmp_path / f"{instance.stem}.json", "--quiet")
        assert done.returncode == 0, done.stderr
    a, b = (FitResult.from_json(tmp_path / f"{name}.json") for name in ("w", "dup"))
    assert a.feature_names == FEATURES == b.feature_names   # the weight is no feature
    assert abs(a.objective - b.objective) <= 1e-6 * abs(b.objective)
    if method != "armul":   # ARMUL's prox stops at its gap: its coefficients agree to that
        np.testing.assert_allclose(a.coef, b.coef, rtol=1e-8, atol=1e-8)
    assert "weighted by sample_weight" in a.objective_name


def test_a_method_without_weights_or_a_missing_column_is_one_line_exit_2(tmp_path):
    _write(tmp_path / "w.csv", _rows())
    lasso = _instance(tmp_path / "lasso.toml", tmp_path / "w.csv", "lasso")
    for command in ("solve", "validate"):
        done = run_cli(command, lasso, "--out", tmp_path / "x.json") if command == "solve" \
            else run_cli(command, lasso)
        assert done.returncode == 2 and "takes no sample weights" in done.stderr, done
    missing = _instance(tmp_path / "missing.toml", tmp_path / "w.csv", "molar", weight='weight = "v"\n')
    done = run_cli("solve", missing, "--out", tmp_path / "y.json")
    assert done.returncode == 2 and "no column 'v'" in done.stderr, done
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "y.json").exists()


def test_an_npz_weight_array_is_read_in_the_tasks_order(tmp_path):
    rows = _rows(1)
    labels = np.array([r[0] for r in rows])
    values = np.array([r[1:] for r in rows], dtype=float)
    np.savez(tmp_path / "w.npz", X=values[:, 1:4], y=values[:, 0], task=labels, w=values[:, 4])
    _write(tmp_path / "w.csv", rows)
    (tmp_path / "npz.toml").write_text('[data]\npath = "w.npz"\nweight = "w"\n\n[method]\nname = "ols"\n')
    csv_instance = _instance(tmp_path / "csv.toml", tmp_path / "w.csv", "ols")
    for instance in (tmp_path / "npz.toml", csv_instance):
        assert run_cli("solve", instance, "--out", tmp_path / f"{instance.stem}.json", "--quiet").returncode == 0
    a, b = (FitResult.from_json(tmp_path / f"{name}.json") for name in ("npz", "csv"))
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-12, atol=1e-12)


def test_export_refuses_a_weighted_instance(tmp_path):
    _write(tmp_path / "w.csv", _rows())
    instance = _instance(tmp_path / "s.toml", tmp_path / "w.csv", "sparse_mtl")
    done = run_cli("export", instance, "--out", tmp_path / "m.lp")
    assert done.returncode == 2 and "unweighted data" in done.stderr, done
