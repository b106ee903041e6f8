"""The CLI never loses work nor shows a traceback (issue #18), through the real ``mtl-opt`` process:
output paths checked before any work, atomic writes, bad instance paths, Ctrl-C and a killed
bench, resume over a damaged results.jsonl, validate refusing what solve refuses, exports the
solvers read back.  Independent invocations run concurrently to keep the file fast."""

import csv
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli

from mtl_opt.result import FitResult

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "instances" / "library"
OPTIMA = {r["instance"]: float(r["optimum"])
          for r in csv.DictReader((LIB / "optima.csv").read_text().splitlines())}
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "PYTHONDONTWRITEBYTECODE": "1"}
#: A cell that runs until killed: clustered ARMUL, whose fit ``ENDLESS_HOOK`` makes sleep in the cell.
ENDLESS = f"""[data]
path = "{LIB / 'tiny_armul.csv'}"
task = "task"
response = "y"

[method]
name = "armul"
structure = "clustered"
n_components = 2
"""


#: A sitecustomize for the bench's processes: a clustered ARMUL fit sleeps, ignoring every time
#: limit (the real one honours time_limit), so only Ctrl-C or a kill ends its cell.
ENDLESS_HOOK = """import time
from mtl_opt.estimators import ARMUL
_fit = ARMUL._fit
ARMUL._fit = lambda self, data, init=None: (time.sleep(10**6) if self.structure == "clustered"
                                           else _fit(self, data, init))
"""


def _default_sigint():
    """In the child before exec: SIGINT unblocked and at its default action, whatever code that
    ran earlier in the test process did to its mask or disposition (a child inherits both, and
    Python installs KeyboardInterrupt only where SIGINT is not ignored)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args, cwd=None, env=ENV, preexec_fn=None, **popen):
    def prepare():
        _default_sigint()
        if preexec_fn is not None:
            preexec_fn()
    return subprocess.Popen([sys.executable, "-m", "mtl_opt.cli", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=prepare, **popen)


def run_all(*commands, cwd=None):
    """Run the CLI invocations concurrently; (returncode, stdout, stderr) of each, in order."""
    procs = [start(*args, cwd=cwd) for args in commands]
    outputs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, *output) for p, output in zip(procs, outputs)]


def one_line_error(rc, out, err, code=2):
    """Exit ``code``, nothing on stdout (no work was reported), one 'mtl-opt: error:' line."""
    assert (rc, out) == (code, ""), (rc, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("mtl-opt: error: "), err
    return err


def copy_instance(name: str, into: Path) -> Path:
    """A library instance and its data file copied to ``into`` (tests may try to overwrite them)."""
    toml = into / f"{name}.toml"
    shutil.copy(LIB / toml.name, toml)
    data = next(line.split('"')[1] for line in toml.read_text().splitlines() if line.startswith("path"))
    shutil.copy(LIB / data, into / data)
    return toml


def test_bad_output_paths_fail_before_any_work_and_leave_the_inputs_alone(tmp_path):
    molar, sparse = copy_instance("tiny_molar", tmp_path), copy_instance("tiny_sparse_l0l2", tmp_path)
    collab = shutil.copy(ROOT / "instances" / "affpcl_synthetic.toml", tmp_path)
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    inputs = {p: p.read_bytes() for p in tmp_path.iterdir()}
    unwritable = Path("/proc")  # no process, not even root's, can create a file there
    cases = [
        ("solve", molar, "--out", unwritable / "r.json"),
        ("solve", molar, "--out", tmp_path / "tiny_molar.csv"),
        ("validate", molar, "--out", unwritable / "r.json"),
        ("export", sparse, "--out", sparse),
        ("bench", molar, "--solvers", "median-sort", "--out", a_file),
        ("collab", collab, "--horizon", 50, "--runs", 1, "--quiet", "--plot", collab),
    ]
    for case, outcome in zip(cases, run_all(*cases)):
        message = one_line_error(*outcome)
        assert str(case[-1]) in message, case
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == inputs


def test_outputs_that_are_no_regular_file_or_no_valid_name_fail_before_any_work(tmp_path):
    """As root, --out /dev/full replaced the device node with a JSON file (the atomic rename), and a
    300-character name ended in a traceback.  A FIFO stands for every device: it is safe to try."""
    molar = copy_instance("tiny_molar", tmp_path)
    fifo, long_name = tmp_path / "fifo", tmp_path / ("r" * 300 + ".json")
    os.mkfifo(fifo)
    errors = [one_line_error(*outcome) for outcome in run_all(("solve", molar, "--out", fifo),
                                                              ("solve", molar, "--out", long_name))]
    assert f"output file {fifo} is not a regular file" in errors[0]
    assert "File name too long" in errors[1]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)   # still the FIFO
    assert sorted(os.listdir(tmp_path)) == ["fifo", "tiny_molar.csv", "tiny_molar.toml"]


def test_files_the_cli_misread_are_one_line_errors_or_warnings(tmp_path):
    """Issue 49: a string where [solve] goes was a traceback; validate on a bandit or collab file
    listed their tables as unknown keys; export --model master dropped a bounds constraint that
    solve refuses; an old spelling in an instance file never warned on the CLI (removed in 0.5.0,
    it is now an unknown key, a one-line error)."""
    molar = copy_instance("tiny_molar", tmp_path)
    sparse = copy_instance("tiny_sparse_l0l2", tmp_path)
    fast, old, bounded = tmp_path / "fast.toml", tmp_path / "old.toml", tmp_path / "bounded.toml"
    fast.write_text('solve = "fast"\n' + molar.read_text())
    assert 'algorithm = "lp"' in molar.read_text()
    old.write_text(molar.read_text().replace('algorithm = "lp"', 'median = "lp"'))
    bounded.write_text(sparse.read_text() + '[[constraints]]\nkind = "bounds"\nfeatures = ["x0"]\n'
                                            'lower = -0.5\nupper = 0.5\n')
    instances = ROOT / "instances"
    fast_run, bandit, collab, master, solve_master, old_run = run_all(
        ("solve", fast, "--out", tmp_path / "r.json"),
        ("validate", instances / "molarb_model_c.toml"), ("validate", instances / "affpcl_synthetic.toml"),
        ("export", bounded, "--model", "master", "--out", tmp_path / "m.mps"),
        ("solve", bounded, "--algorithm", "oa_multi_tree", "--out", tmp_path / "r.json"),
        ("solve", old, "--out", tmp_path / "old.json", "--quiet"))
    assert "solve must be a [solve] table; got solve = 'fast'" in one_line_error(*fast_run)
    assert (f"is a file for 'mtl-opt bandit' (it has the tables environment, policies, run), not an "
            f"instance file; run it with: mtl-opt bandit {instances / 'molarb_model_c.toml'}"
            in one_line_error(*bandit))
    assert "run it with: mtl-opt collab" in one_line_error(*collab)
    refusal = "cannot enforce sign or bound constraints on the coefficients"
    assert refusal in one_line_error(*master) and refusal in one_line_error(*solve_master)
    assert "unknown key(s) 'median' in [method]" in one_line_error(*old_run)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".json", ".mps")) == []


def test_a_missing_plot_directory_is_created_before_the_run(tmp_path):
    target = tmp_path / "new" / "dir" / "regret.png"
    (rc, out, err), = run_all(("bandit", ROOT / "instances" / "molarb_model_c.toml", "--horizon", 30,
                               "--trials", 1, "--quiet", "--plot", target))
    assert rc == 0 and err == "", err
    assert "molarb" in out and f"Plot  {target}" in out  # the table, then the plot
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(target.parent) == ["regret.png"]  # no temporary file left behind


def test_a_failed_write_leaves_the_previous_result_intact(tmp_path):
    """A file-size limit makes every write past 64 bytes fail with EFBIG, as a full disk would."""
    molar = copy_instance("tiny_molar", tmp_path)
    result = tmp_path / "result.json"
    previous = {"objective": 1.0, "note": "an earlier result"}
    result.write_text(json.dumps(previous))

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by SIGXFSZ
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    proc = start("solve", molar, "--out", result, "--quiet", preexec_fn=limit_file_size)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and str(result) in err and "unchanged" in err, err
    assert json.loads(result.read_text()) == previous   # still the earlier result, whole
    assert sorted(os.listdir(tmp_path)) == ["result.json", "tiny_molar.csv", "tiny_molar.toml"]


def test_an_instance_path_that_is_no_readable_file_is_a_one_line_error(tmp_path):
    unreadable = "/proc/self/mem"  # exists, but reading it at offset 0 fails (EIO) for every user
    paths = [tmp_path, tmp_path / "missing.toml", unreadable]
    for path, outcome in zip(paths, run_all(*[("validate", path) for path in paths])):
        assert str(path) in one_line_error(*outcome)


def _children(pid: int) -> list[int]:
    """The live (not zombie) child processes of ``pid``, from /proc."""
    tasks = Path(f"/proc/{pid}/task")
    kids = [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]
    return [k for k in kids if _alive(k)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _bench_until_a_cell_runs(tmp_path, *instances):
    """Start a bench on ``instances`` (prox), wait for the finished ones and the running cell."""
    endless = tmp_path / "endless.toml"
    endless.write_text(ENDLESS)
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(ENDLESS_HOOK)
    proc = start("bench", *instances, endless, "--solvers", "prox", "--time-limit", 1,
                 "--out", tmp_path / "out",
                 env={**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hook"), ENV["PYTHONPATH"]])})
    assert proc.stdout.readline().startswith("mtl-opt")
    for _ in instances:  # their progress lines: those cells finished
        assert "optimal" in proc.stdout.readline()
    deadline = time.monotonic() + 120
    while not _children(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    # A finished cell may still be exiting: wait until the endless one is in its fit (it
    # sleeps, so waiting costs nothing) and return the children then.
    time.sleep(2.0)
    return proc, _children(proc.pid)


def _gone(cells, within: float) -> bool:
    deadline = time.monotonic() + within
    while any(map(_alive, cells)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(map(_alive, cells))


def test_ctrl_c_stops_the_bench_keeps_finished_rows_and_exits_130(tmp_path):
    proc, cells = _bench_until_a_cell_runs(tmp_path, LIB / "tiny_armul_vanilla.toml")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert len(err.strip().splitlines()) == 1 and err.startswith("mtl-opt: interrupted"), err
    assert _gone(cells, within=10)
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [(Path(r["instance"]).stem, r["status"]) for r in rows] == [("tiny_armul_vanilla", "optimal")]


def test_a_killed_bench_takes_its_running_cell_along_and_releases_its_lock(tmp_path):
    from mtl_opt.outputs import exclusive

    proc, cells = _bench_until_a_cell_runs(tmp_path)
    with pytest.raises(OSError, match="is in use by another process"):   # held while it runs
        with exclusive(tmp_path / "out"):
            pass
    proc.kill()
    proc.communicate(timeout=60)
    assert _gone(cells, within=10)
    with exclusive(tmp_path / "out"):   # SIGKILL ran no cleanup: the kernel released the flock
        pass
    with open(tmp_path / "out" / "results.csv") as fh:   # whole: its header, no row cut short
        assert next(csv.reader(fh))[0] == "instance" and list(fh) == []


def test_resume_drops_and_reports_cut_and_foreign_lines_and_runs_only_what_is_missing(tmp_path):
    molar = copy_instance("tiny_molar", tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    kept = {"instance": str(molar), "method": "molar", "solver": "median-sort", "repeat": 0,
            "time_limit": 60.0, "status": "optimal", "objective": 1.0, "lower_bound": 1.0,
            "abs_gap": 0.0, "rel_gap": 0.0, "time_s": 123.0, "peak_mem_mb": 1.0, "solve_mem_mb": 0.0,
            "solver_version": "marker row", "error": None, "trace": []}
    (out / "results.jsonl").write_bytes(   # a row, a foreign object, no UTF-8, a cut row
        (json.dumps(kept) + '\n{"comment": "not a row"}\n').encode() + b"\xff\xfe\x00 latin?\n"
        + json.dumps(kept)[:40].encode())
    (rc, stdout, err), = run_all(("bench", molar, "--solvers", "median-sort,median-lp-highs",
                                  "--out", out, "--quiet"))
    assert rc == 0, err
    assert err.strip().splitlines() == [
        f"mtl-opt: warning: {out / 'results.jsonl'}: ignored 3 line(s) that are not result rows "
        f"(lines 2, 3, 4); the file is rewritten without them."]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows[0] == kept  # kept as it was, not run again
    assert [(r["solver"], r["status"]) for r in rows] == [("median-sort", "optimal"),
                                                         ("median-lp-highs", "optimal")]
    with open(out / "results.csv") as fh:
        assert [r["solver"] for r in csv.DictReader(fh)] == ["median-sort", "median-lp-highs"]


SPARSE_DATA = '[data]\npath = "tiny_sparse_a.csv"\ntask = "task"\nresponse = "y"\n'
BAD_FOR_SOLVE = {  # instance -> a setting solve refuses at fit time
    "sparse_miqp_on_highs": SPARSE_DATA + '[method]\nname = "sparse_mtl"\nvariant = "l0l2"\ns = 2\n'
                            'lambda_ridge = 0.05\nalgorithm = "miqp"\n[solve]\nbackend = "highs"\n',
    "sparse_penalty_the_variant_lacks": SPARSE_DATA + '[method]\nname = "sparse_mtl"\nvariant = "l0l2"\n'
                                        's = 2\nlambda_ridge = 0.05\nlambda_zbar = 0.1\n',
    "sparse_oa_without_ridge_and_n_le_p": '[data]\npath = "wide.npz"\n[method]\nname = "sparse_mtl"\n'
                                          'variant = "l0l2"\ns = 2\nalgorithm = "oa_multi_tree"\n',
    "armul_lowrank_on_scip": '[data]\npath = "tiny_armul.csv"\ntask = "task"\nresponse = "y"\n'
                             '[method]\nname = "armul"\nstructure = "lowrank"\nn_components = 2\n'
                             'algorithm = "exact"\n',
    "molar_with_two_rows": '[data]\npath = "wide.npz"\n[method]\nname = "molar"\n',
}


def test_validate_refuses_what_solve_refuses_with_the_same_error(tmp_path, capsys):
    from mtl_opt.cli import main
    from mtl_opt.data import MultiTaskData

    for name in ("tiny_sparse_l0l2", "tiny_armul_vanilla"):
        copy_instance(name, tmp_path)
    rng = np.random.default_rng(0)
    MultiTaskData([rng.normal(size=(2, 6)) for _ in range(2)],  # n_k = 2: no room for sigma_k
                  [rng.normal(size=2) for _ in range(2)]).to_npz(tmp_path / "wide.npz")
    for name, text in BAD_FOR_SOLVE.items():
        (tmp_path / f"{name}.toml").write_text(text)
    outcomes = run_all(*[("validate", tmp_path / f"{name}.toml") for name in BAD_FOR_SOLVE])
    for name, validate in zip(BAD_FOR_SOLVE, outcomes):  # solve in this process: the same refusal
        assert main(["solve", str(tmp_path / f"{name}.toml"), "--out", str(tmp_path / "r.json")]) == 2
        assert one_line_error(*validate) == capsys.readouterr().err, name


def test_export_writes_files_scip_reads_back_and_refuses_an_lp_it_would_reject(tmp_path):
    import pyscipopt

    sparse = copy_instance("tiny_sparse_l0l2", tmp_path)
    default, master = tmp_path / "default", tmp_path / "master.lp"
    made, master_made, refused = run_all(("export", sparse, "--out", default),
                                         ("export", sparse, "--model", "master", "--format", "lp",
                                          "--out", master),
                                         ("export", sparse, "--format", "lp", "--out", tmp_path / "x.lp"))
    assert made[0] == master_made[0] == 0, (made, master_made)
    assert "--format mps" in one_line_error(*refused) and not (tmp_path / "x.lp").exists()
    for path, variables in ((default, 2 * 6 * 2), (master, 2 * 6)):
        model = pyscipopt.Model()
        model.hideOutput()
        model.readProblem(str(path), "mps" if path == default else "lp")
        assert model.getNVars() > variables  # beta and z per task and feature, and more
        model.optimize()
        if path == default:  # the MIQP is the instance: its optimum is the brute-force one
            assert model.getObjVal() == pytest.approx(OPTIMA["tiny_sparse_l0l2"], rel=1e-6)
        else:  # the master is a relaxation: a lower bound on it
            assert model.getObjVal() <= OPTIMA["tiny_sparse_l0l2"] * (1 + 1e-6)


def test_flag_errors_are_one_line_with_exit_2():
    """argparse's usage dump is replaced by the CLI's one-line error shape, for every subcommand."""
    demo = ROOT / "instances" / "molar_demo.toml"
    results = run_all(("solve", demo, "--time-limit", "nan"), ("bench", demo, "--time-limit", "inf"),
                      ("frobnicate",), ("solve",))
    for result, phrase in zip(results, ["not a finite number", "not a finite number",
                                        "invalid choice", "required"]):
        assert phrase in one_line_error(*result)


def test_ctrl_c_inside_a_scip_lp_stops_the_fit_at_once_with_exit_130(tmp_path):
    """SCIP catches SIGINT itself and stopped with 'userinterrupt', which the fit reported as a
    finished run (exit 0, a 67% gap); the interrupt is now recorded (``interrupts.request``), the
    fit stops with status 'interrupted' and the bound SCIP had proven, which the result keeps.

    SCIP looks at a stop between LPs only: at 4 s this MIQP is inside a root LP that ran 37 s
    more after Ctrl-C.  Now the LP is stopped too (``optimize_stoppably``): 0.4 s here."""
    from mtl_opt.synthetic import smtl_simulation

    smtl_simulation(p=200, K=5, n=100, s_true=10, q=14, seed=0).data.to_npz(tmp_path / "hard.npz")
    (tmp_path / "hard.toml").write_text(
        '[data]\npath = "hard.npz"\n\n[method]\nname = "sparse_mtl"\nvariant = "l0l2"\ns = 10\n'
        'lambda_ridge = 0.001\nalgorithm = "miqp"\n\n[solve]\ntime_limit = 300\n')
    proc = start("solve", tmp_path / "hard.toml", "--out", tmp_path / "r.json", cwd=tmp_path)
    assert proc.stdout.readline().startswith("mtl-opt ")   # the header: the fit is under way
    time.sleep(4)                                          # bcd (< 1 s) and the build are done
    signalled = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    took = time.perf_counter() - signalled
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert took < 15, took
    assert len(err.strip().splitlines()) == 1 and err.startswith("mtl-opt: interrupted"), err
    result = FitResult.from_json((tmp_path / "r.json").read_text())
    assert result.status == "interrupted" and str(tmp_path / "r.json") in err
    assert result.lower_bound is None or result.lower_bound <= result.objective


# --- issue 57: one rule for a directory and for '-', in every command that writes a file ----------

BANDIT, COLLAB = ROOT / "instances" / "molarb_model_c.toml", ROOT / "instances" / "affpcl_synthetic.toml"
SHORT = {"bandit": ("--horizon", 20, "--trials", 1, "--quiet"),
         "collab": ("--horizon", 20, "--runs", 1, "--quiet")}


def _file_commands(tmp_path):
    """(command and its arguments but --out/--plot, the flag, the file's default name) of every
    command that writes one file."""
    molar, sparse = copy_instance("tiny_molar", tmp_path), copy_instance("tiny_sparse_l0l2", tmp_path)
    return [(("solve", molar, "--quiet"), "--out", "tiny_molar.json"),
            (("validate", molar), "--out", "tiny_molar.json"),
            (("export", sparse), "--out", "tiny_sparse_l0l2.miqp.mps"),
            (("bandit", BANDIT, *SHORT["bandit"]), "--plot", "molarb_model_c.png"),
            (("collab", COLLAB, *SHORT["collab"]), "--plot", "affpcl_synthetic.png")]


def test_a_directory_for_an_output_file_receives_it_under_its_default_name(tmp_path):
    """``--out newdir/`` wrote a file named newdir, and an existing directory was refused in some
    commands: a directory (existing, or a path ending in '/') now gets the file named after the
    input, in solve, validate (which checks, writing nothing), export and bandit/collab --plot."""
    pytest.importorskip("matplotlib")
    for args, flag, name in _file_commands(tmp_path):
        new, existing = tmp_path / f"new_{args[0]}", tmp_path / f"existing_{args[0]}"
        existing.mkdir()
        for target in (f"{new}/", existing):
            proc = run_cli(*args, flag, target)
            assert proc.returncode == 0, (args, proc.stderr)
            written = sorted(os.listdir(target))
            assert written == ([] if args[0] == "validate" else [name]), (args, written)
        assert new.is_dir()   # made by the check, before any work (validate included)
    assert not (tmp_path / "new_solve" / "tiny_molar.json").is_dir()
    assert FitResult.from_json(tmp_path / "new_solve" / "tiny_molar.json").method == "molar"


def test_an_experiment_files_plot_key_follows_the_same_rule(tmp_path):
    pytest.importorskip("matplotlib")
    for command, source in (("bandit", BANDIT), ("collab", COLLAB)):
        experiment = tmp_path / source.name
        experiment.write_text(source.read_text() + '\n[output]\nplot = "figures/"\n')
        proc = run_cli(command, experiment, *SHORT[command])
        assert proc.returncode == 0, proc.stderr
        assert os.listdir(tmp_path / "figures") == [f"{source.stem}.png"]   # beside the file
        os.remove(tmp_path / "figures" / f"{source.stem}.png")
        experiment.write_text(source.read_text() + '\n[output]\nplot = 3\n')
        assert "[output] plot must be a file name in quotes" in one_line_error(
            *_outcome(run_cli(command, experiment, *SHORT[command])))


def _outcome(proc):
    return proc.returncode, proc.stdout, proc.stderr


def test_dash_is_standard_output_where_the_output_is_one_document(tmp_path):
    """``--out -`` wrote a file named '-'.  solve writes its JSON there (stdout holds the JSON
    alone: the summary goes to stderr), export its model; validate accepts it; nothing is
    written to the working directory."""
    molar, sparse = copy_instance("tiny_molar", tmp_path), copy_instance("tiny_sparse_l0l2", tmp_path)
    before = sorted(os.listdir(tmp_path))
    solve = run_cli("solve", molar, "--out", "-", cwd=tmp_path)
    assert solve.returncode == 0, solve.stderr
    assert FitResult.from_json(solve.stdout).method == "molar"   # stdout is one JSON document
    assert "Status       optimal" in solve.stderr and "Result       standard output" in solve.stderr
    quiet = run_cli("solve", molar, "--out", "-", "--quiet", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert FitResult.from_json(quiet.stdout).objective == FitResult.from_json(solve.stdout).objective
    export = run_cli("export", sparse, "--out", "-", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    assert export.stdout.startswith(("NAME", "*")) and "ENDATA" in export.stdout
    assert export.stderr.startswith("wrote standard output (miqp, MPS)")
    validate = run_cli("validate", molar, "--out", "-", cwd=tmp_path)
    assert validate.returncode == 0 and "valid" in validate.stdout, validate.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_dash_is_refused_in_one_line_where_the_output_cannot_be_standard_output(tmp_path):
    """A plot (a PNG, beside the table on stdout) and bench's directory of files."""
    molar = copy_instance("tiny_molar", tmp_path)
    cases = {("bandit", BANDIT, *SHORT["bandit"], "--plot", "-"): "the table is printed there",
             ("collab", COLLAB, *SHORT["collab"], "--plot", "-"): "the table is printed there",
             ("bench", molar, "--solvers", "median-sort", "--out", "-"): "several files"}
    for args, reason in cases.items():
        message = one_line_error(*_outcome(run_cli(*args, cwd=tmp_path)))
        assert "cannot be standard output ('-')" in message and reason in message, message
    assert not (tmp_path / "-").exists()


def test_dash_keeps_the_progress_rows_and_a_native_solver_log_off_standard_output(tmp_path):
    """A real process: SCIP's own log is written by C code to descriptor 1, which the CLI points
    at stderr while it works; stdout is still the JSON alone."""
    sparse = copy_instance("tiny_sparse_l0l2", tmp_path)
    loud = tmp_path / "loud.toml"
    loud.write_text(sparse.read_text().replace("[solve]", 'algorithm = "miqp"\n\n[solve]\nbackend = "scip"')
                    + '\n[solve.solver_options]\n"display/verblevel" = 4\n')
    (rc, out, err), = run_all(("solve", loud, "--verbose", "--out", "-"), cwd=tmp_path)
    assert rc == 0, err
    assert FitResult.from_json(out).status == "optimal"
    assert "presolving" in err and "lower bound" in err   # SCIP's log and mtl_opt's rows
    assert sorted(os.listdir(tmp_path)) == ["loud.toml", "tiny_sparse_a.csv", "tiny_sparse_l0l2.toml"]


@pytest.mark.parametrize("args, maximum", [
    (("bandit", BANDIT, "--horizon", "1e9"), 10**6), (("bandit", BANDIT, "--trials", 0), 1000),
    (("collab", COLLAB, "--runs", 1001), 1000), (("collab", COLLAB, "--horizon", "2.5"), 10**6),
])
def test_count_flags_beyond_their_documented_maximum_are_one_line_errors(args, maximum):
    """A count flag is bounded (mtl_opt.limits, stated in --help), not a run for days."""
    flag, value = args[-2:]
    assert (f"argument {flag}: must be a whole number from 1 to {maximum}; got {value}"
            in one_line_error(*_outcome(run_cli(*args))))
    assert f"1 to {maximum})" in " ".join(run_cli(args[0], "--help").stdout.split())


@pytest.mark.parametrize("command, source, line, phrase", [
    ("bandit", BANDIT, "horizon = 1000", "The 'horizon' parameter of run_bandit must be an int in the range [1, 1e+06]"),
    ("bandit", BANDIT, "trials = 3", "The 'trials' parameter of run_bandit must be an int in the range [1, 1000]"),
    ("collab", COLLAB, "runs = 10", "The 'runs' parameter of run_methods must be an int in the range [1, 1000]"),
])
def test_counts_in_experiment_files_have_the_same_maximum(tmp_path, command, source, line, phrase):
    key = line.split(" =")[0]
    experiment = tmp_path / source.name
    experiment.write_text(source.read_text().replace(line, f"{key} = 1000000000"))
    message = one_line_error(*_outcome(run_cli(command, experiment, "--quiet")))
    assert f"{experiment}: [run]: {phrase}" in message and "got 1000000000" in message


def test_a_count_flag_takes_a_whole_number_in_exponent_form():
    proc = run_cli("bandit", BANDIT, "--horizon", "2e1", "--trials", 1, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "1 trials x 20 rounds" in proc.stdout



# --- issue 57: one bench at a time on an --out ----------------------------------------------------

def _bench_rows(out: Path):
    """The keys of results.jsonl's rows and of results.csv's, in file order."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    with open(out / "results.csv") as fh:
        table = list(csv.DictReader(fh))
    return ([(r["instance"], r["solver"], int(r["repeat"])) for r in rows],
            [(r["instance"], r["solver"], int(r["repeat"])) for r in table])


def test_a_bench_on_an_out_another_bench_holds_exits_2_and_touches_nothing(tmp_path):
    from mtl_opt.outputs import exclusive

    molar, out = copy_instance("tiny_molar", tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("rows of the run that holds the lock\n")
    with exclusive(out):   # as a running bench holds it
        rc, stdout, err = _outcome(run_cli("bench", molar, "--solvers", "median-sort", "--out", out))
    assert one_line_error(rc, stdout, err) == (
        f"mtl-opt: error: {out} is in use by another process (pid {os.getpid()}); one mtl-opt bench "
        f"at a time writes its results there: wait for it to finish, run with --wait to wait for "
        f"it, or choose another --out.\n")
    assert os.listdir(out) == ["results.jsonl"]   # no row, no lock file left: the holder's is gone
    assert (out / "results.jsonl").read_text() == "rows of the run that holds the lock\n"


def test_concurrent_benches_on_one_out_record_every_cell_once(tmp_path):
    """Two concurrent runs on one --out recorded 60 rows, 15 keys twice.  Here two real
    processes run with --wait while this test holds the lock, so both are past their checks and
    contending when it is released: one runs the grid, the other waits for it and then finds
    every cell recorded.  Every cell runs once, and each file holds each row once."""
    from mtl_opt.outputs import exclusive

    molar, out = copy_instance("tiny_molar", tmp_path), tmp_path / "out"
    out.mkdir()
    args = ("bench", molar, "--solvers", "median-sort", "--repeats", 2, "--time-limit", 30,
            "--out", f"{out}/", "--wait")
    with exclusive(out):
        procs = [start(*args) for _ in range(2)]
        for proc in procs:   # each says it waits (its first line on stderr that is about OUT)
            line = next((line for line in iter(proc.stderr.readline, "") if str(out) in line), "")
            assert line == (f"mtl-opt: warning: {out} is in use by another process (pid "
                            f"{os.getpid()}); waiting for it to finish.\n"), line
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    ran = [line for stdout, _ in outputs for line in stdout.splitlines() if "median-sort #" in line]
    assert len(ran) == 2, ran   # two cells, each run by one of the two processes
    expected = [(str(molar), "median-sort", repeat) for repeat in (0, 1)]
    jsonl, table = _bench_rows(out)
    assert sorted(jsonl) == sorted(table) == expected   # nothing lost, nothing twice
    assert sorted(os.listdir(out)) == ["results.csv", "results.jsonl"]   # no lock, no temporary


def test_a_reader_that_closes_stdout_ends_the_run_quietly_with_141(tmp_path):
    """``mtl-opt solve ... -v | head -1``: the pipe breaks while the run prints (its progress rows
    or its report, as the machine's speed has it): the run ends with the shell's convention
    (128 + SIGPIPE) and no traceback; a result file written before is whole."""
    out = tmp_path / "result.json"
    proc = start("solve", LIB / "tiny_sparse_l0l2.toml", "-v", "--out", out)
    proc.stdout.readline()
    proc.stdout.close()   # what head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert not out.exists() or FitResult.from_json(out).objective is not None


@pytest.mark.parametrize("instance", ["molar_demo", "oa_multi_tree", "oa_single_tree"])
def test_a_pipe_closed_while_a_solver_runs_stops_the_fit_and_exits_141(tmp_path, instance):
    """``-v | head``: the next row, often written from inside HiGHS's or SCIP's callback, finds
    the pipe closed.  Raised there, BrokenPipeError made HiGHS fail (the MOLAR demo's LP: exit 3,
    "HiGHS returned no solution", 3 runs in 3) or crash (exit 139); now the fit stops as after
    Ctrl-C and the run ends 141 at once, with nothing on stderr.  The sparse fits would run for
    minutes."""
    if instance == "molar_demo":
        argv = ["demo", "molar_demo"]
    else:
        from mtl_opt.synthetic import smtl_simulation

        smtl_simulation(p=250, K=4, n=50, s_true=10, q=14, seed=0).data.to_npz(tmp_path / "sparse.npz")
        (tmp_path / "long.toml").write_text(
            '[data]\npath = "sparse.npz"\n\n[method]\nname = "sparse_mtl"\nvariant = "zbar_l2"\ns = 10\n'
            f'lambda_ridge = 0.1\nlambda_zbar = 0.1\nalgorithm = "{instance}"\n\n[solve]\ntime_limit = 300\n')
        argv = ["solve", tmp_path / "long.toml"]
    out = tmp_path / "result.json"
    clock = time.monotonic()
    run = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" -m mtl_opt.cli "$@" | head -3 > /dev/null',
                          sys.executable, *map(str, argv), "-v", "--out", str(out)],
                         env=ENV, capture_output=True, text=True, timeout=120, preexec_fn=_default_sigint)
    assert run.returncode == 141, run.stderr
    assert time.monotonic() - clock < 60 and run.stderr == "", run.stderr
    # a fit done before the pipe closed (the demo's LP, on a fast machine) wrote its result
    # before the report found the pipe closed: whole, never cut short
    assert not out.exists() or FitResult.from_json(out).objective is not None
