"""Instance files and the CLI: round trips, validation errors, exit codes."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli
from tables import assert_same_arrays, assert_same_csv
from test_sparse import random_problem

from mtl_opt.cli import ExitCode, main
from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import ARMUL, MOLAR, IndependentTasks, SparseMTL
from mtl_opt.errors import InstanceFileError, InvalidDataError, InvalidParameterError
from mtl_opt.instance import load_instance
from mtl_opt.result import FitResult
from mtl_opt.synthetic import sparse_heterogeneity

DEMO = Path(__file__).resolve().parents[1] / "instances" / "molar_demo.toml"

GOOD = """
[data]
path = "data.csv"
task = "task"
response = "y"

[method]
name = "molar"
{method}

[solve]
{solve}
"""


@pytest.fixture
def workdir(tmp_path):
    problem = sparse_heterogeneity(d=3, M=4, n=30, s=1, seed=0)
    problem.data.to_csv(tmp_path / "data.csv")
    return tmp_path


def write(workdir, method='algorithm = "lp"', solve='backend = "highs"', text=None):
    path = workdir / "inst.toml"
    path.write_text(text if text is not None else GOOD.format(method=method, solve=solve))
    return path


def run_console(*args):
    """The console entry point in a fresh process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mtl_opt.cli", *map(str, args)],
                          capture_output=True, text=True)


def test_instance_solve_json_round_trip(workdir, capsys):
    out = workdir / "result.json"
    assert main(["solve", str(write(workdir)), "--out", str(out)]) == ExitCode.OK
    printed = capsys.readouterr().out
    result = FitResult.from_json(out)
    assert _equal(FitResult.from_json(result.to_json()), result)
    assert result.method == "molar" and result.status == "optimal"
    assert "Lower bound" in printed and "optimal" in printed
    direct = load_instance(workdir / "inst.toml")
    refit = direct.estimator().fit(direct.load_data())
    assert np.array_equal(refit.coef_, result.coef)


def _equal(a, b):
    return (np.array_equal(a.coef, b.coef) and np.array_equal(a.intercept, b.intercept)
            and a.objective == b.objective and a.lower_bound == b.lower_bound)


def test_json_is_lossless_to_the_bit():
    problem = sparse_heterogeneity(d=3, M=4, n=30, s=1, seed=1)
    from mtl_opt.estimators import MOLAR
    result = MOLAR().fit(problem.data).result_
    again = FitResult.from_json(result.to_json())
    assert _equal(result, again)
    assert np.array_equal(again.extra["global_coef"], result.extra["global_coef"])
    assert again.log == result.log and again.params == result.params
    assert json.loads(result.to_json())["rel_gap"] == result.rel_gap


@pytest.mark.parametrize("method, solve, error, phrase", [
    ('algorithm = "lp"\nc_gamam = 1.0', "", InstanceFileError, "c_gamam"),
    ('threshold = "medium"', "", InvalidParameterError, "threshold"),
    ("", 'backend = "highs"\ntime_limt = 3', InstanceFileError, "time_limt"),
    ("", "rel_gap = -1.0", InstanceFileError, "rel_gap"),
    ('algorithm = "lp"', 'backend = "cplex"', InvalidParameterError, "cplex"),
])
def test_bad_instances_through_api_and_cli(workdir, method, solve, error, phrase):
    path = write(workdir, method, solve)
    with pytest.raises(error, match=phrase):
        instance = load_instance(path)
        instance.estimator()
    proc = run_cli("validate", path)
    assert proc.returncode == ExitCode.INVALID_INPUT
    assert proc.stderr.count("\n") == 1 and phrase in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("text, phrase", [
    ("[data]\npath='data.csv'\ntask='task'\nresponse='y'\n", "missing [method]"),
    ("[data]\npath='data.csv'\ntask='task'\nresponse='y'\n[method]\nname='nope'\n", "name must be one of"),
    ("[data]\npath='data.csv'\ntask='task'\nresponse='y'\n[method]\nname='molar'\n[solver]\n", "'solver'"),
    ("[data]\npath='data.csv'\ntask='task'\nresponse='y'\nsep=';'\n[method]\nname='molar'\n", "sep"),
    ("[data]\npath='missing.csv'\ntask='task'\nresponse='y'\n[method]\nname='molar'\n", "missing.csv"),
    ("[data]\npath='data.csv'\ntask='school'\nresponse='y'\n[method]\nname='molar'\n", "school"),
    ("[data\n", "not valid TOML"),
    ("[data]\npath='data.csv'\ntask='task'\nresponse='y'\n[method]\nname='ols'\n[solve]\nbackend='highs'\n", "uses no solver"),
])
def test_malformed_instance_files_exit_2_with_one_line(workdir, text, phrase):
    proc = run_cli("validate", write(workdir, text=text))
    assert proc.returncode == ExitCode.INVALID_INPUT, proc.stderr
    assert phrase in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_data_errors_reach_the_cli_as_exit_2(workdir):
    csv = workdir / "data.csv"
    lines = csv.read_text().splitlines()
    lines[5] = ",".join(lines[5].split(",")[:-1] + ["nan"])
    csv.write_text("\n".join(lines) + "\n")
    proc = run_cli("solve", write(workdir), "--out", workdir / "r.json")
    assert proc.returncode == ExitCode.INVALID_INPUT
    assert "line" in proc.stderr and proc.stderr.count("\n") == 1


def test_data_that_molar_cannot_fit_exits_2(tmp_path):
    rng = np.random.default_rng(0)
    from mtl_opt.data import MultiTaskData
    MultiTaskData([rng.normal(size=(2, 4)), rng.normal(size=(9, 4))],  # 2 rows: no room for sigma
                  [rng.normal(size=2), rng.normal(size=9)]).to_csv(tmp_path / "data.csv")
    proc = run_cli("solve", write(tmp_path), "--out", tmp_path / "r.json")
    assert proc.returncode == ExitCode.INVALID_INPUT and "MOLARHighDim" in proc.stderr
    with pytest.raises(InvalidDataError):
        instance = load_instance(tmp_path / "inst.toml")
        instance.estimator().fit(instance.load_data())


def test_cli_overrides_backend_and_options(workdir):
    out = workdir / "r.json"
    proc = run_cli("solve", write(workdir), "--backend", "scip", "--time-limit", "30", "--out", out, "--quiet")
    assert proc.returncode == ExitCode.OK and proc.stdout == ""
    assert FitResult.from_json(out).solver == "SCIP"


def test_shipped_demo_solves(tmp_path):
    proc = run_console("solve", DEMO, "--out", tmp_path / "demo.json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    result = FitResult.from_json(tmp_path / "demo.json")
    assert result.status == "optimal" and result.rel_gap <= 1e-6


def test_shipped_demo_is_what_the_generator_writes(tmp_path):
    """The committed instance data are reproducible from the documented generator."""
    shutil.copy(DEMO.parent / "generate.py", tmp_path / "generate.py")
    subprocess.run([sys.executable, str(tmp_path / "generate.py")], check=True)
    for name in ("molar_demo.csv", "molar_demo_truth.csv", "armul_demo.csv"):
        assert_same_csv(tmp_path / name, DEMO.parent / name)
    fresh, shipped = (MultiTaskData.from_npz(d / "sparse_demo.npz") for d in (tmp_path, DEMO.parent))
    assert (fresh.task_names, fresh.feature_names) == (shipped.task_names, shipped.feature_names)
    assert_same_arrays(fresh.Xs + fresh.ys, shipped.Xs + shipped.ys, "sparse_demo.npz")


def test_solvers_command_lists_both_backends():
    proc = run_cli("solvers")
    assert proc.returncode == ExitCode.OK
    assert "highs" in proc.stdout and "scip" in proc.stdout and "miqp" in proc.stdout


def _npz_instance(tmp_path, **arrays):
    np.savez(tmp_path / "data.npz", **arrays)
    path = tmp_path / "inst.toml"
    path.write_text('[data]\npath = "data.npz"\n[method]\nname = "ols"\n')
    return path


def _csv_instance(tmp_path, text, features=None):
    (tmp_path / "data.csv").write_text(text)
    extra = f"features = {features!r}\n".replace("'", '"') if features else ""
    path = tmp_path / "inst.toml"
    path.write_text(f'[data]\npath = "data.csv"\ntask = "task"\nresponse = "y"\n{extra}'
                    '[method]\nname = "ols"\n')
    return path


X3 = np.arange(12.0).reshape(6, 2) ** 1.5


@pytest.mark.parametrize("make, phrase", [
    (lambda t: _csv_instance(t, "task,y,x0\na,1,2\na,2,inf\n"), "not finite"),
    (lambda t: _csv_instance(t, "task,y,x0\na,1,2\na,2,abc\n"), "abc"),
    (lambda t: _csv_instance(t, "task,y,x0\na,1,2\n", features=["x0", "x0"]), "more than once"),
    (lambda t: _csv_instance(t, "task,y,x0\na,1,2\n", features=["x9"]), "x9"),
    (lambda t: _csv_instance(t, ""), "empty"),
    (lambda t: _npz_instance(t, X=X3, y=np.ones(6)), "task"),
    (lambda t: _npz_instance(t, X=X3, y=np.ones(5), task=np.array(list("aaabbb"))), "rows"),
    (lambda t: _npz_instance(t, X=X3, y=np.ones(6), task=np.array(list("aaabbb")),
                             task_names=np.array(["a", "b", "a"])), "duplicate"),
    (lambda t: _npz_instance(t, X=np.vstack([X3, [[np.nan, 1.0]]]), y=np.ones(7),
                             task=np.array(list("aaabbbb"))), "non-finite"),
])
def test_each_data_error_exits_2_with_one_line(tmp_path, make, phrase):
    proc = run_cli("solve", make(tmp_path), "--out", tmp_path / "r.json")
    assert proc.returncode == ExitCode.INVALID_INPUT, proc.stderr
    assert phrase in proc.stderr.lower() and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


SPARSE = DEMO.parent / "sparse_zbar.toml"


@pytest.mark.parametrize("instance", ["sparse_zbar.toml", "sparse_l0l2.toml"])
def test_shipped_sparse_instances_solve(tmp_path, instance):
    proc = run_cli("solve", DEMO.parent / instance, "--out", tmp_path / "r.json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    result = FitResult.from_json(tmp_path / "r.json")
    assert result.status == "heuristic" and result.lower_bound is None
    assert np.all(np.count_nonzero(result.coef, axis=1) <= 5)


@pytest.mark.parametrize("line, phrase", [
    ("s = 0", "'s' parameter"),
    ("lambda_ridge = -0.1", "'lambda_ridge' parameter"),
    ('variant = "lasso"', "'variant' parameter"),
    ("lambda_bbar = 0.1", "has no bbar term"),
])
def test_bad_sparse_hyperparameters_exit_2(tmp_path, line, phrase):
    text = SPARSE.read_text().replace('path = "sparse_demo.npz"', f'path = "{DEMO.parent / "sparse_demo.npz"}"')
    key = line.split(" =")[0]
    text = "\n".join(l for l in text.splitlines() if not l.startswith(key + " ")) + f"\n{line}\n"
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = run_cli("solve", path, "--out", tmp_path / "r.json")
    assert proc.returncode == ExitCode.INVALID_INPUT, proc.stderr
    assert phrase in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr



@pytest.mark.parametrize("backend, option", [("scip", "limits/tyme"), ("highs", "mip_rel_gapp")])
def test_a_solver_option_typo_exits_2_naming_it_on_either_backend(tmp_path, capsys, backend, option):
    """On SCIP the sparse OA is single-tree, which once set options itself: a typo was exit 1."""
    tiny = DEMO.parent / "library" / "tiny_sparse_cs.toml"
    algorithm = {"scip": "oa_single_tree", "highs": "oa_multi_tree"}[backend]
    text = tiny.read_text().replace('path = "', f'path = "{tiny.parent}/').replace(
        "[solve]", f'algorithm = "{algorithm}"\n\n[solve]')
    path = tmp_path / "typo.toml"
    path.write_text(text + f'backend = "{backend}"\n\n[solve.solver_options]\n"{option}" = 5\n')
    assert main(["solve", str(path), "--out", str(tmp_path / "r.json")]) == ExitCode.INVALID_INPUT
    assert option in capsys.readouterr().err


# --- issue 19: real multi-site data (a feature constant within a task, tasks without signal) ---


def _sites(tmp_path, rows=12, constant=(), collinear=False, method="armul"):
    """An instance on three sites 'a', 'b', 'c' with two features: the (task, feature) pairs in
    ``constant`` held at 1.5, site 'c' cut to ``rows`` rows (and x1 = 2 x0 there if
    ``collinear``)."""
    rng = np.random.default_rng(0)
    Xs = [rng.normal(size=(12, 2)) for _ in range(3)]
    Xs[2] = Xs[2][:rows]
    for k, j in constant:
        Xs[k][:, j] = 1.5
    if collinear:
        Xs[2][:, 1] = 2.0 * Xs[2][:, 0]
    ys = [X @ [1.0, -1.0] + rng.normal(size=len(X)) for X in Xs]
    MultiTaskData(Xs, ys, task_names=["a", "b", "c"]).to_csv(tmp_path / "data.csv")
    path = tmp_path / "inst.toml"
    path.write_text(f'[data]\npath = "data.csv"\ntask = "task"\nresponse = "y"\n'
                    f'[method]\nname = "{method}"\n')
    return path


@pytest.mark.parametrize("method, pairs", [
    ("armul", [["b", "x0"]]),                 # ARMUL lists constant features
    ("itl", [["b", "x0"], ["c", "x1"]]),      # least squares also lists collinear ones
])
def test_solve_prints_unidentified_pairs_and_the_json_keeps_them(tmp_path, capsys, method, pairs):
    path = _sites(tmp_path, constant=[(1, 0)], collinear=True, method=method)
    out = tmp_path / "r.json"
    assert main(["solve", str(path), "--out", str(out)]) == ExitCode.OK
    printed = capsys.readouterr().out
    line = next(row for row in printed.splitlines() if row.strip().startswith("Unidentified"))
    assert f"{len(pairs)} (task, feature) pair(s)" in line
    assert all(f"{t}/{f}" in line for t, f in pairs)
    result = FitResult.from_json(out)
    assert result.unidentified == pairs and result.status == "optimal"


NO_SIGNAL = [(1, (), "1 row(s)"), (12, [(2, 0), (2, 1)], "every feature is constant")]


@pytest.mark.parametrize("command", ["solve", "validate"])
@pytest.mark.parametrize("rows, constant, phrase", NO_SIGNAL)
def test_a_task_without_signal_is_a_one_line_error_with_exit_2(tmp_path, capsys, command, rows,
                                                                 constant, phrase):
    path = _sites(tmp_path, rows=rows, constant=constant)
    assert main([command, str(path), "--out", str(tmp_path / "r.json")]) == ExitCode.INVALID_INPUT
    captured = capsys.readouterr()
    assert captured.out == "" and not (tmp_path / "r.json").exists()
    assert captured.err.count("\n") == 1 and captured.err.startswith("mtl-opt: error: ")
    assert "'c'" in captured.err and phrase in captured.err


@pytest.mark.parametrize("estimator", [MOLAR(), SparseMTL(s=2), ARMUL(), IndependentTasks()],
                         ids=["molar", "sparse_mtl", "armul", "itl"])
@pytest.mark.parametrize("rows, constant, phrase", NO_SIGNAL)
def test_every_family_refuses_a_task_without_signal_in_python(tmp_path, estimator, rows,
                                                                constant, phrase):
    data = load_instance(_sites(tmp_path, rows=rows, constant=constant)).load_data()
    with pytest.raises(InvalidDataError, match=re.escape(phrase)) as error:
        estimator.fit(data)
    assert "'c'" in str(error.value) and not hasattr(estimator, "result_")


def test_cli_algorithm_override_runs_a_certified_solve(tmp_path):
    """--algorithm exact turns a bcd instance into a certified one (the method that suits it);
    a name the method does not have (MOLAR's are closed_form and lp) is exit 2 with one line."""
    problem, _ = random_problem("l0l2", 11, K=2, p=6, n=15, s=2)
    MultiTaskData(list(problem.Xs), list(problem.ys)).to_npz(tmp_path / "tiny.npz")
    path = tmp_path / "tiny.toml"
    path.write_text('[data]\npath = "tiny.npz"\n[method]\nname = "sparse_mtl"\nvariant = "l0l2"\n'
                    's = 2\nlambda_ridge = 0.1\n')
    proc = run_cli("solve", path, "--algorithm", "exact", "--out", tmp_path / "r.json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "algorithm='exact'" in proc.stdout
    result = FitResult.from_json(tmp_path / "r.json")
    assert result.status == "optimal" and result.algorithm == "oa_single_tree"   # n_k > p
    proc = run_cli("solve", DEMO, "--algorithm", "exact", "--out", tmp_path / "m.json")
    assert proc.returncode == ExitCode.INVALID_INPUT and len(proc.stderr.strip().splitlines()) == 1
    ols = tmp_path / "ols.toml"   # one algorithm: nothing to choose
    ols.write_text(f'[data]\npath = "{DEMO.parent / "molar_demo.csv"}"\ntask = "task"\nresponse = "y"\n'
                   f'[method]\nname = "ols"\n')
    proc = run_cli("solve", ols, "--algorithm", "exact", "--out", tmp_path / "o.json")
    assert proc.returncode == ExitCode.INVALID_INPUT and "one algorithm" in proc.stderr


# --- issue 57: files and flags a user tried -----------------------------------------------------

BOM = "\ufeff"   # what Notepad writes first in a UTF-8 file; TOML itself does not allow it
ROOT = DEMO.parent.parent
LIB = ROOT / "instances" / "library"


@pytest.mark.parametrize("command", ["validate", "bench", "bandit", "collab"])
def test_toml_files_that_start_with_a_byte_order_mark_are_read(tmp_path, command):
    """Every kind of TOML file (an instance file, which bench reads too; bandit and collab
    experiment files) was 'Invalid statement' with a BOM: read_toml reads them as utf-8-sig."""
    source = {"validate": LIB / "tiny_molar.toml", "bench": LIB / "tiny_molar.toml",
              "bandit": ROOT / "instances" / "molarb_model_c.toml",
              "collab": ROOT / "instances" / "affpcl_synthetic.toml"}[command]
    path = tmp_path / source.name
    path.write_text(BOM + source.read_text().replace('path = "', f'path = "{source.parent}/'),
                    encoding="utf-8")
    assert path.read_bytes()[:3] == b"\xef\xbb\xbf"
    extra = {"validate": [], "bench": ["--solvers", "median-sort", "--out", tmp_path / "b", "--quiet"],
             "bandit": ["--horizon", 20, "--trials", 1, "--quiet"],
             "collab": ["--horizon", 20, "--runs", 1, "--quiet"]}[command]
    proc = run_cli(command, path, *extra)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "Invalid statement" not in proc.stderr and "not valid TOML" not in proc.stderr


def test_an_empty_features_list_is_refused_as_such(tmp_path):
    """``features = []`` selected no column, and the error said the header had no feature
    columns although it had two; an explicit empty list is now invalid input, named as such."""
    path = _csv_instance(tmp_path, "task,y,x0,x1\na,1,2,3\na,2,3,5\nb,1,1,2\nb,3,3,1\n")
    path.write_text(path.read_text().replace('response = "y"\n', 'response = "y"\nfeatures = []\n'))
    for command in ("validate", "solve"):
        proc = run_cli(command, path, "--out", tmp_path / "r.json")
        assert proc.returncode == ExitCode.INVALID_INPUT and proc.stderr.count("\n") == 1, proc.stderr
        assert "features is an empty list, which selects no column" in proc.stderr
        assert "['x0', 'x1']" in proc.stderr and "leave features out" in proc.stderr
        assert "header" not in proc.stderr
    assert not (tmp_path / "r.json").exists()
    path.write_text(path.read_text().replace("features = []", "features = 3"))
    proc = run_cli("validate", path)   # was a TypeError traceback (exit 1)
    assert proc.returncode == ExitCode.INVALID_INPUT and "features must be a list" in proc.stderr
