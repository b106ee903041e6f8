"""Bad values are refused at the boundary with mtl_opt's own errors (issue #18).

NaN, inf and -inf for every numeric parameter, complex/string/object data,
sizes beyond the machine, and diverging learners.  The generic sweep walks the
parameter tables themselves, so a new parameter is covered without a new test;
the CLI cases run the real ``mtl-opt`` process, as the issue measured them.
"""

import dataclasses
import inspect
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mtl_opt import resources
from mtl_opt.bandits import config as bandit_config
from mtl_opt.bandits.config import load_bandit_experiment
from mtl_opt.bandits.linear_envs import ModelC
from mtl_opt.bandits.linear_policies import OLSBandit
from mtl_opt.bandits.rec_envs import SyntheticGroups
from mtl_opt.bandits.registry import ENVIRONMENTS, POLICIES, build, resolve
from mtl_opt.bandits.runner import run_bandit
from mtl_opt.cli import build_parser
from mtl_opt.collab import config as collab_config
from mtl_opt.collab.algorithms import METHODS, make_method
from mtl_opt.collab.config import SYSTEMS, load_experiment
from mtl_opt.collab.runner import run_methods
from mtl_opt.collab.systems import gaussian_system
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import DivergenceError, InstanceFileError, InvalidDataError, InvalidParameterError
from mtl_opt.estimators import ESTIMATORS, MOLAR, SparseMTL
from mtl_opt.estimators.base import Interval, SequenceOf
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import sparse_heterogeneity

INSTANCES = Path(__file__).resolve().parents[1] / "instances"
NON_FINITE = [math.nan, math.inf, -math.inf]
DATA = sparse_heterogeneity(d=12, M=3, n=40, s=1, seed=0).data


def owners():
    """(name, constraint table, signature, make(**params)) of every estimator, environment, policy,
    collab method and collab system; ``make`` builds (an estimator: also fits) the owner."""
    for cls in ESTIMATORS.values():
        yield cls.__name__, cls.param_constraints, cls.__init__, lambda cls=cls, **p: cls(**p).fit(DATA)
    for table, kind in ((ENVIRONMENTS, "environment"), (POLICIES, "policy")):
        for key in table:
            cls = resolve(table, kind, key)
            yield key, cls.param_constraints, cls, lambda t=table, k=kind, key=key, **p: build(t, k, key, p)
    for key, cls in METHODS.items():
        yield key, cls.param_constraints, cls.__init__, lambda key=key, **p: make_method(key, **p)
    for key, factory in SYSTEMS.items():
        yield f"{key}_system", {}, factory, factory


def numeric_parameters(signature, constraints: dict) -> list[str]:
    """Parameters that take a number: an Interval constraint, a numeric default, or a seed."""
    params = inspect.signature(signature).parameters
    names = []
    for name in dict.fromkeys([*params, *constraints]):
        default = params[name].default if name in params else None
        if ((isinstance(default, (int, float)) and not isinstance(default, bool)) or name == "seed"
                or any(isinstance(c, Interval) for c in constraints.get(name, []))):
            names.append(name)
    return names


def sweep() -> dict:
    """'owner.parameter' -> callable(value) that builds the owner with that value."""
    cases = {f"{owner}.{name}": lambda v, make=make, name=name: make(**{name: v})
             for owner, table, signature, make in owners()
             for name in numeric_parameters(signature, table)}
    for field in dataclasses.fields(SolveOptions):  # annotated record: the type says "number"
        if re.search(r"\b(int|float)\b", str(field.type)):
            cases[f"SolveOptions.{field.name}"] = lambda v, name=field.name: SolveOptions(**{name: v})
    return cases


CASES = sweep()


def test_sweep_reaches_every_kind_of_owner():
    """The sweep is only as good as its reach: the parameters the issue measured must be in it."""
    for case in ("MOLAR.c_gamma", "ARMUL.c", "SparseMTL.lambda_ridge", "molarb.c_gamma", "metaban.lam",
                 "model_c.sigma", "pfedme.lam", "ifca.init_scale", "gaussian_system.eps_A",
                 "SolveOptions.time_limit", "SolveOptions.threads"):
        assert case in CASES
    assert len(CASES) > 80


@pytest.mark.parametrize("bad", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_numeric_parameter_refuses_non_finite_values(case, bad):
    name = case.split(".")[1]
    with pytest.raises(InvalidParameterError, match=rf"\b{name}\b"):
        CASES[case](bad)


#: Every parameter that takes a sequence of numbers, with a valid call to build its owner.
SEQUENCES = {
    "MOLAR.sigma": lambda v: MOLAR(sigma=[v, 1.0, 1.0]).fit(DATA),
    "SparseMTL.coef_bound": lambda v: SparseMTL(s=2, coef_bound=[v] + [1.0] * 11).fit(DATA),
    **{f"{kind}.activation": lambda v, kind=kind: build(ENVIRONMENTS, "environment", kind,
                                                        {"M": 2, "activation": [v, 0.5]})
       for kind in ("model_c", "model_p")},
}


def test_every_sequence_parameter_is_in_the_table():
    found = {f"{owner}.{name}" for owner, table, _, _ in owners() for name, allowed in table.items()
             if any(isinstance(c, SequenceOf) for c in allowed)}
    assert found == set(SEQUENCES)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1 + 1j, "x"], ids=["nan", "inf", "complex", "string"])
@pytest.mark.parametrize("case", sorted(SEQUENCES))
def test_sequence_parameters_refuse_bad_items(case, bad):
    with pytest.raises(InvalidParameterError, match=rf"'{case.split('.')[1]}' parameter of .*a sequence, each"):
        SEQUENCES[case](bad)


EXPERIMENTS = {  # the smallest experiment files; {run} is the [run] table
    "bandit": (load_bandit_experiment, bandit_config.RUN_KEYS, {"horizon": 5, "trials": 1},
               '[environment]\nkind = "model_c"\nd = 3\ns = 1\nM = 2\nK = 2\n'
               "[policies]\nols = {{}}\n[run]\n{run}\n"),
    "collab": (load_experiment, collab_config.RUN_KEYS - {"step"}, {"horizon": 3, "runs": 1, "alpha": 0.01},
               '[system]\nkind = "gaussian"\nn_agents = 3\ndim = 2\n'
               "[methods]\nindependent = {{}}\n[run]\n{run}\n"),
}


@pytest.mark.parametrize("bad", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("command, key", [(c, k) for c, e in EXPERIMENTS.items() for k in sorted(e[1])])
def test_every_numeric_run_key_of_an_experiment_file_refuses_non_finite_values(tmp_path, command, key, bad):
    """[run] values are checked when the run starts, before any round is played."""
    load, _, run, text = EXPERIMENTS[command]
    run = {**run, key: bad}
    if key == "lam":  # lam sets the step only with step = "log" (then alpha is not used)
        run = {**run, "step": "log"}
    path = tmp_path / "exp.toml"
    path.write_text(text.format(run="\n".join(f"{k} = {v!r}" for k, v in run.items())))
    with pytest.raises(InstanceFileError, match=rf"\[run\]: .*\b{key}\b"):
        load(path).execute(progress=False)


def test_interval_accepts_inf_only_where_it_is_an_explicit_end():
    assert Interval(0, None).accepts(1e308) and not Interval(0, None).accepts(math.inf)
    assert Interval(0, math.inf).accepts(math.inf) and not Interval(0, math.inf, open_high=True).accepts(math.inf)
    assert not Interval(None, None).accepts(-math.inf) and Interval(-math.inf, 0).accepts(-math.inf)
    for interval in (Interval(0, None), Interval(0, math.inf), Interval(None, None), Interval(0, 1)):
        assert not interval.accepts(math.nan) and not interval.accepts(np.float64("nan"))
    assert not Interval(0, None).accepts(1 + 0j)
    assert Interval(1, None, integer=True).accepts(10**400)  # a huge int is finite: no overflow


def test_threads_beyond_the_cpu_count_are_refused():
    cores = os.cpu_count()
    assert SolveOptions(threads=cores).threads == cores
    with pytest.raises(InvalidParameterError,
                       match=rf"'threads' parameter of SolveOptions must be an int in the range \[1, {cores}\]"):
        SolveOptions(threads=cores + 1)


# --------------------------------------------------------------------------- data


@pytest.mark.parametrize("X, kind", [
    (np.array([[1.0 + 2.0j, 0.0], [3.0, 1.0]]), "complex"),
    (np.array([[1.0 + 0.0j, 0.0], [3.0, 1.0]]), "complex"),   # a zero imaginary part is still complex data
    (np.array([["1.5", "2"], ["3", "4"]]), "strings"),
    (np.array([[1.0, 2.0], [3.0, None]], dtype=object), "object"),
    (np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object), "object"),
])
def test_data_refuses_values_that_are_not_real_numbers(X, kind):
    with pytest.raises(InvalidDataError, match=f"task 'task0': X has dtype .*{kind}"):
        MultiTaskData([X], [[1.0, 2.0]])
    with pytest.raises(InvalidDataError, match=f"task 'task0': y has dtype .*{kind}"):
        MultiTaskData([[[1.0], [2.0]]], [X[0]])


def test_files_and_predict_refuse_complex_values(tmp_path):
    path = tmp_path / "complex.npz"
    np.savez(path, X=np.array([[1.0 + 1j], [2.0]]), y=np.array([1.0, 2.0]), task=np.array(["a", "a"]))
    with pytest.raises(InvalidDataError, match=f"{re.escape(str(path))}: task 'a': X has dtype complex"):
        MultiTaskData.from_npz(path)
    csv = tmp_path / "complex.csv"
    csv.write_text("task,y,x0\na,1.0,1+2j\n")
    with pytest.raises(InvalidDataError, match="line 2, column 'x0': '1\\+2j' is not a number"):
        MultiTaskData.from_csv(csv)
    fitted = MOLAR().fit(DATA)
    X = DATA.Xs[0].astype(complex)
    X[0, 0] += 1j
    with pytest.raises(InvalidDataError, match="X has dtype complex"):
        fitted.predict([X, *DATA.Xs[1:]])


def _scaled(task: int, column: int | None, factor: float) -> MultiTaskData:
    """DATA with task ``task``'s feature ``column`` (None: its y) times ``factor``."""
    Xs, ys = [X.copy() for X in DATA.Xs], [y.copy() for y in DATA.ys]
    if column is None:
        ys[task] *= factor
    else:
        Xs[task][:, column] *= factor
    return MultiTaskData(Xs, ys)


@pytest.mark.parametrize("task, column, factor, phrase", [
    (0, None, 1e200, r"task 'task0': y holds a value of magnitude \S+e\+200, beyond 1e\+100"),
    (1, 3, 1e300, r"task 'task1': feature 'x3' holds a value of magnitude \S+e\+300"),
    (2, 5, 1e-300, r"task 'task2': feature 'x5' has no value above \S+e-30\d in magnitude, below "
                   r"1e-100: its squares underflow to 0, so it would look constant"),
])
def test_data_at_a_scale_float64_sums_of_squares_cannot_carry_is_refused(task, column, factor, phrase):
    """y x 1e200 gave 'Objective inf' and exit 0, a feature x 1e300 was silently zeroed, and one x
    1e-300 was called constant: each is refused where the data are built, naming the column."""
    with pytest.raises(InvalidDataError, match=phrase + r".* Rescale it"):
        _scaled(task, column, factor)
    fitted = SparseMTL(s=2, lambda_ridge=0.1).fit(_scaled(task, column, factor ** 0.3))  # 1e60, 1e90, 1e-90
    assert np.isfinite(fitted.result_.objective) and np.isfinite(fitted.coef_).all()


def test_predict_refuses_non_finite_values():
    fitted = MOLAR().fit(DATA)
    X = DATA.Xs[0].copy()
    X[3, 1] = np.nan
    with pytest.raises(InvalidDataError, match="task 'task0': X has 1 non-finite value.* row 3"):
        fitted.predict([X, *DATA.Xs[1:]])


def test_bool_and_integer_data_are_still_accepted_exactly():
    data = MultiTaskData([np.array([[True, 2], [False, 5]], dtype=np.int64)], [np.array([1, 0], dtype=bool)])
    assert data.Xs[0].dtype == np.float64 and data.Xs[0].tolist() == [[1.0, 2.0], [0.0, 5.0]]
    assert data.ys[0].tolist() == [1.0, 0.0]


# ------------------------------------------------------------ sizes and divergence


def test_a_bandit_run_beyond_memory_is_refused_before_allocating(monkeypatch):
    """A horizon beyond mtl_opt.limits is refused as such (issue 57); within it, the arrays are
    checked against the memory available (here made small, so that no machine runs it)."""
    with pytest.raises(InvalidParameterError, match=r"'horizon' parameter of run_bandit must be an "
                                                    r"int in the range \[1, 1e\+06\]"):
        run_bandit(ModelC(d=3, s=1, M=2, K=2), OLSBandit(), 10**12, trials=3, progress=False)
    with monkeypatch.context() as patch:
        patch.setattr(resources, "available_memory", lambda: 2**20)
        with pytest.raises(InvalidParameterError,
                           match=r"3 trials x \(1000000 rounds \+ 2 users\) .* MiB of memory"):
            run_bandit(ModelC(d=3, s=1, M=2, K=2), OLSBandit(), 10**6, trials=3, progress=False)
    users = SyntheticGroups(n_users=10**12)  # its reset would allocate groups for every user
    with pytest.raises(InvalidParameterError, match=r"\(10 rounds \+ 1000000000000 users\)"):
        run_bandit(users, OLSBandit(), 10, progress=False)


def test_a_bandit_round_beyond_memory_is_refused_before_running():
    """M = 1e8 users hung: a round holds every served user's arm features, and the environment
    one parameter per user."""
    with pytest.raises(InvalidParameterError, match=r"a round of 100000000 users x 2 arms x 1000 "
                                                    r"features needs at least .* of memory"):
        run_bandit(ModelC(d=1000, s=1, M=10**8, K=2), OLSBandit(), 10, progress=False)


def test_a_collab_horizon_beyond_memory_is_refused_before_allocating(monkeypatch):
    system = gaussian_system(n_agents=3, dim=2, seed=0)
    methods = {"independent": make_method("independent")}
    with pytest.raises(InvalidParameterError, match=r"'horizon' parameter of run_methods must be an "
                                                    r"int in the range \[1, 1e\+06\]"):
        run_methods(system, methods, horizon=10**12, alpha=0.01, runs=1, progress=False)
    monkeypatch.setattr(resources, "available_memory", lambda: 2**20)
    with pytest.raises(InvalidParameterError, match=r"1 runs x 1000000 steps .* MiB of memory"):
        run_methods(system, methods, horizon=10**6, alpha=0.01, runs=1, progress=False)


def test_a_diverging_collab_method_is_named_with_its_agent_and_step():
    """alpha = 1e6 on a system whose A has eigenvalues near 1: |1 - alpha lambda| >> 1, so x blows up."""
    system = gaussian_system(n_agents=3, dim=2, seed=0)
    with pytest.raises(DivergenceError, match=r"method 'fedavg' diverged: agent \d+'s estimate is not finite "
                                              r"after step \d+ with step size alpha=1e\+06\. Lower alpha"):
        run_methods(system, {"fedavg": make_method("fedavg")}, horizon=400, alpha=1e6, runs=1,
                    progress=False)
    stable = run_methods(system, {"fedavg": make_method("fedavg")}, horizon=50, alpha=0.05, runs=1,
                         progress=False)
    assert np.isfinite(stable.mse).all()


# ------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("command, flag, value", [
    ("solve", "--time-limit", "nan"), ("solve", "--rel-gap", "inf"),
    ("bench", "--time-limit", "-inf"), ("bench", "--hard-limit", "NaN"),
])
def test_float_flags_refuse_non_finite_values(command, flag, value, capsys):
    with pytest.raises(SystemExit) as stop:  # "=": argparse reads a lone "-inf" as an option name
        build_parser().parse_args([command, "x.toml", f"{flag}={value}"])
    assert stop.value.code == 2
    assert f"argument {flag}: '{value}' is not a finite number" in capsys.readouterr().err


def mtl_opt(*args, cwd):
    """The console entry point in a fresh process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mtl_opt.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _copy_instance(tmp_path, name, old, new):
    shutil.copy(INSTANCES / f"{name}.csv", tmp_path)
    text = (INSTANCES / f"{name}.toml").read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new))
    return path


def assert_one_line_error(run, *phrases):
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtl-opt: error: "), run.stderr
    for phrase in phrases:
        assert phrase in lines[0]


@pytest.mark.parametrize("name, old, new, phrase", [
    ("molar_demo", "c_gamma = 1.0", "c_gamma = nan", "The 'c_gamma' parameter of MOLAR"),
    ("armul_demo", "c = 1.0 ", "c = inf ", "The 'c' parameter of ARMUL"),
    ("armul_demo", "c = 1.0 ", "c = nan ", "The 'c' parameter of ARMUL"),
    ("molar_demo", "rel_gap = 1e-6", "rel_gap = 1e-6\nthreads = 100000",
     "'threads' parameter of SolveOptions must be an int in the range [1, "),
])
def test_solve_refuses_non_finite_and_impossible_values(tmp_path, name, old, new, phrase):
    run = mtl_opt("solve", _copy_instance(tmp_path, name, old, new), "--out", tmp_path / "r.json", cwd=tmp_path)
    assert_one_line_error(run, phrase)
    assert "Objective" not in run.stdout and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_bench_refuses_a_non_finite_time_limit(tmp_path, value):
    run = mtl_opt("bench", INSTANCES / "molar_demo.toml", "--time-limit", value, "--out", tmp_path, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert (f"argument --time-limit: '{value}' is not a finite number; give a finite value"
            in run.stderr.strip().splitlines()[-1])
    assert not (tmp_path / "results.jsonl").exists()


def test_collab_with_a_diverging_step_size_stops_with_a_named_error(tmp_path):
    path = tmp_path / "exp.toml"
    text = (INSTANCES / "affpcl_synthetic.toml").read_text()
    assert 'step = "log"' in text
    path.write_text(text.replace('step = "log"', 'step = "constant"\nalpha = 1e6'))
    run = mtl_opt("collab", path, "--horizon", "50", "--runs", "1", "--quiet", cwd=tmp_path)
    assert_one_line_error(run, "[run]: method '", "diverged: agent ", "alpha=1e+06. Lower alpha")
    assert "nan" not in run.stdout


def test_bandit_horizon_beyond_its_maximum_is_refused_at_once(tmp_path):
    run = mtl_opt("bandit", INSTANCES / "molarb_model_c.toml", "--horizon", "1000000000000", "--quiet",
                  cwd=tmp_path)
    assert_one_line_error(run, "argument --horizon: must be a whole number from 1 to 1000000; got "
                               "1000000000000")
