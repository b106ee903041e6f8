"""Experiment files and the ``collab`` command: the shipped example, overrides, errors."""

import argparse
import math
from pathlib import Path

import pytest

from mtl_opt.collab import command
from mtl_opt.collab.config import load_experiment
from mtl_opt.errors import InstanceFileError, InvalidParameterError

EXAMPLE = Path(__file__).resolve().parents[1] / "instances" / "affpcl_synthetic.toml"

GOOD = """
[system]
kind = "{kind}"
n_agents = 4
dim = 3
{system}

[run]
horizon = 20
runs = 2
alpha = 0.01
{run}

[methods]
affpcl = {{}}
{methods}
{output}
"""


def write(tmp_path, kind="gaussian", system="", run="", methods="", output=""):
    path = tmp_path / "exp.toml"
    path.write_text(GOOD.format(kind=kind, system=system, run=run, methods=methods, output=output))
    return path


def cli(argv):
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    return command.run(parser.parse_args(["collab", *argv]))


def test_example_file_runs_through_the_command(capsys, tmp_path):
    png = tmp_path / "curves.png"
    assert cli([str(EXAMPLE), "--horizon", "30", "--runs", "2", "--quiet", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for name in ("independent", "fedavg", "finetune", "pfedme", "ditto", "ifca", "affpcl"):
        assert f"| {name} |" in out
    assert "2 runs x 30 steps" in out and png.stat().st_size > 1000


def test_experiment_overrides_and_systems(tmp_path):
    exp = load_experiment(write(tmp_path, methods="ifca = { n_clusters = 2 }"))
    system, result = exp.execute(progress=False, runs=3)
    assert result.mse.shape == (2, 3, 21, 4) and result.alpha == 0.01
    finite = load_experiment(write(tmp_path, kind="finite", system="n_states = 5\ndelta_env = 0.5",
                                   methods="ditto = { lam = 2.0 }"))
    assert finite.execute(progress=False)[1].mse.shape == (2, 2, 21, 4)
    log = load_experiment(write(tmp_path, run="step = \"log\"\nlam = 0.5"))
    assert log.alpha(log.build_system()) == pytest.approx(math.log(20) / (0.5 * 20), rel=1e-12)


@pytest.mark.parametrize("edit, match", [
    (dict(system="colour = 1"), "unknown key.*'colour'.*\\[system\\]"),
    (dict(run="epochs = 3"), "unknown key.*'epochs'.*\\[run\\]"),
    (dict(methods="scaffold = {}"), "unknown key.*'scaffold'.*\\[methods\\]"),
    (dict(methods="ditto = { lam = -1.0 }"), "'lam' parameter of Ditto"),
    (dict(methods="ditto = { mu = 1.0 }"), "Ditto has no parameter"),
    (dict(output="[output]\nfile = 'x'"), "unknown key.*\\[output\\]"),
    (dict(kind="mnist"), "kind must be one of"),
])
def test_bad_files_are_instance_file_errors(tmp_path, edit, match):
    with pytest.raises(InstanceFileError, match=match):
        load_experiment(write(tmp_path, **edit))


@pytest.mark.parametrize("edit, match", [
    (dict(run="step = \"log\"\nlam = -2.0"), "lam > 0"),
    (dict(system="delta_env = 2.0"), "delta_env"),
    (dict(kind="finite", system="n_states = 0"), "n_states"),
    (dict(system="eps_A = -1.0"), "eps_A"),
])
def test_bad_values_fail_before_running(tmp_path, edit, match):
    exp = load_experiment(write(tmp_path, **edit))
    with pytest.raises(InstanceFileError, match=match):
        exp.execute(progress=False)


def test_negative_step_size_and_missing_tables(tmp_path):
    path = write(tmp_path)
    path.write_text(path.read_text().replace("alpha = 0.01", "alpha = -0.01"))
    with pytest.raises(InstanceFileError, match="alpha > 0"):
        load_experiment(path).execute(progress=False)
    path.write_text("[system]\nkind = 'gaussian'\n[run]\nhorizon = 5\n")
    with pytest.raises(InstanceFileError, match="missing \\[methods\\]"):
        load_experiment(path)
    with pytest.raises(InstanceFileError, match="does not exist"):
        load_experiment(tmp_path / "nope.toml")
    with pytest.raises(InvalidParameterError, match="--last"):
        cli([str(EXAMPLE), "--last", "0", "--quiet"])
