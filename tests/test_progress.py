"""The live log of every exact path (``solvers.progress``): rows, heartbeat, printing, plotting.

Runs last a few seconds on library instances that do not finish that fast, with a heartbeat
of 0.2 s: a row between the first and the last proves the heartbeat fired during the solve
(nothing here counts rows or times them: the suite runs under load).
"""

import math
import sys
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
import pytest

from mtl_opt.bench.command import cell_progress
from mtl_opt.cli import main
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.instance import load_instance
from mtl_opt.plotting import plot_progress
from mtl_opt.solvers import progress
from mtl_opt.solvers.backends import get_backend
from mtl_opt.solvers.method import LOG_KEYS
from mtl_opt.solvers.progress import Progress

LIBRARY = Path(__file__).resolve().parent.parent / "instances" / "library"
#: (instance, algorithm, backend): every exact path, on an instance none of them closes in 3 s
#: (clustered ARMUL's tree closes every library instance sooner: test_armul_tree cuts it at 100 tasks).
PATHS = [("medium_sparse_zbar", "bnb", None), ("medium_sparse_zbar", "oa_multi_tree", "highs"),
         ("medium_sparse_zbar", "oa_multi_tree", "scip"),
         ("medium_sparse_zbar", "oa_single_tree", "scip"), ("medium_sparse_zbar", "miqp", "scip"),
         ("medium_sparse_zbar", "exact", None)]


@pytest.fixture
def heartbeat(monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.2)


def fitted(name, algorithm, backend, time_limit, **options):
    instance = load_instance(LIBRARY / f"{name}.toml")
    estimator = instance.estimator(algorithm=algorithm, backend=backend, time_limit=time_limit,
                                   **options)
    return estimator.fit(instance.load_data()).result_


@pytest.mark.parametrize("name, algorithm, backend", PATHS)
def test_every_exact_path_logs_rows_through_its_run_and_plots_them(heartbeat, tmp_path, name,
                                                                    algorithm, backend):
    result = fitted(name, algorithm, backend, 3.0)
    assert result.status == "time_limit"   # the run lasted its limit: > 2 s
    rows = result.log
    assert all(set(LOG_KEYS) <= set(row) for row in rows)
    times = [row["time"] for row in rows]
    assert times == sorted(times)
    assert any(times[0] < t < times[-1] for t in times)   # a heartbeat row inside the run
    nodes = [row["nodes"] for row in rows]
    assert nodes == sorted(nodes) and all(isinstance(n, int) and n >= 0 for n in nodes)
    assert isinstance(result.native["nodes"], int) and result.native["nodes"] >= 0
    # every figure is one of the run's own: a bound below, an incumbent above the final objective
    tolerance = 1e-9 * abs(result.objective)
    assert all(row["lower_bound"] is None or row["lower_bound"] <= result.objective + tolerance
               for row in rows)
    assert all(row["incumbent"] is None or row["incumbent"] >= result.objective - tolerance
               for row in rows)
    assert rows[-1]["incumbent"] == pytest.approx(result.objective, rel=1e-9)
    # a bound the log shows is one the result keeps
    assert all(row["lower_bound"] is None or row["lower_bound"] <= result.lower_bound + tolerance
               for row in rows)

    ax = plot_progress(result)
    assert len(ax.lines) == 2 and len(ax.lines[0].get_xdata()) == len(rows)
    ax.figure.savefig(tmp_path / "progress.png")
    assert (tmp_path / "progress.png").stat().st_size > 1000


@pytest.mark.parametrize("algorithm", ["oa_single_tree", "miqp"])
def test_scip_s_bound_reaches_the_rows_the_heartbeat_writes(algorithm):
    """At the default row interval the backend's heartbeat thread writes every row while SCIP
    runs (its ticks keep the rows' phase): SCIP's figures, taken only when a row was due at its
    own event, never reached a row, and the log showed no bound until the solve ended."""
    result = fitted("medium_sparse_zbar", algorithm, "scip", 8.0)   # rows from 1 s idle; margin for load
    assert result.status == "time_limit"
    inside = [row for row in result.log[1:-1] if row["nodes"] > 0 or row["lower_bound"] is not None]
    assert inside and all(row["lower_bound"] is not None for row in inside)
    assert all(row["lower_bound"] <= result.lower_bound * (1 + 1e-12) for row in inside)


def test_an_edited_model_logs_its_heartbeat(heartbeat):
    """The README's edit-the-model route (``fit(data, model=spec)``): rows through the solve."""
    instance = load_instance(LIBRARY / "medium_sparse_zbar.toml")
    data = instance.load_data()
    estimator = instance.estimator(algorithm="miqp", backend="scip", time_limit=3.0)
    spec = estimator.pyomo_model(data)
    spec.model.user = pyo.Constraint(expr=spec.model.beta[0, 0] + spec.model.beta[1, 0] >= -1e6)
    result = estimator.fit(data, model=spec).result_
    times = [row["time"] for row in result.log]
    assert all(set(LOG_KEYS) <= set(row) for row in result.log)
    assert any(times[0] < t < times[-1] for t in times)
    assert result.log[-1]["nodes"] == result.native["nodes"] >= 0


def test_molar_lp_logs_its_rows():
    result = fitted("medium_molar", "lp", "highs", 30.0)
    rows = [row for row in result.log if "nodes" in row]   # the stages' rows follow
    assert rows and all(set(LOG_KEYS) <= set(row) for row in rows)
    assert rows[-1]["incumbent"] == pytest.approx(result.objective, rel=1e-9)
    assert rows[-1]["lower_bound"] == pytest.approx(result.lower_bound, rel=1e-9)
    assert result.native["nodes"] == 0


def test_verbose_prints_the_rows_in_the_units_of_the_problem(heartbeat, capfd):
    """The sparse paths solve a normalized twin (objective ~1): the printed figures are the
    user's (y times 1000 here, so the twin's objective is 2^-20 times the result's)."""
    instance = load_instance(LIBRARY / "medium_sparse_zbar.toml")
    data = instance.load_data()
    data = MultiTaskData([X for X in data.Xs], [1000 * y for y in data.ys])
    estimator = instance.estimator(algorithm="bnb", time_limit=2.5, verbose=True)
    result = estimator.fit(data).result_
    assert result.objective > 1e5
    printed = [line.split() for line in capfd.readouterr().out.splitlines()]
    header = printed.index(["time", "incumbent", "lower", "bound", "gap", "nodes"])
    table = printed[header + 1:header + 1 + len(result.log)]
    assert len(table) == len(result.log) >= 3
    assert float(table[-1][1]) == pytest.approx(result.objective, rel=1e-7)
    assert [int(row[-1]) for row in table] == [row["nodes"] for row in result.log]


def test_mtl_opt_solve_verbose_prints_the_table(tmp_path, capfd):
    instance = LIBRARY / "tiny_sparse_l0l2.toml"
    assert main(["solve", str(instance), "--algorithm", "bnb", "-v", "--out", str(tmp_path / "r.json")]) == 0
    out = capfd.readouterr().out
    assert "incumbent     lower bound" in out and "Status" in out
    assert main(["solve", str(instance), "--algorithm", "bnb", "--out", str(tmp_path / "r.json")]) == 0
    assert "lower bound       gap" not in capfd.readouterr().out


def test_progress_writes_when_due_or_forced_and_merges_a_forced_row_that_moved_nothing():
    log = Progress(every=3600.0)
    log.update(5.0, None, 0)              # the first row is due
    log.update(4.0, 1.0, 3)               # not due: kept, not written
    assert len(log.rows) == 1 and log.rows[0]["incumbent"] == 5.0 and log.rows[0]["gap"] is None
    log.update(force=True, iteration=1)
    assert log.rows[-1] == {"time": log.rows[-1]["time"], "incumbent": 4.0, "lower_bound": 1.0,
                            "gap": pytest.approx(0.75), "nodes": 3, "iteration": 1}
    log.update(math.inf, -math.inf, None, force=True, cuts=7)   # no finite news: the last row
    assert len(log.rows) == 2 and log.rows[-1]["cuts"] == 7
    seen = log.solver_callback(lambda bound: bound - 0.5, nodes_before=10)
    log.every = 0.0
    seen(0.5, 2.0, 4)                     # the solver's incumbent is not the run's
    assert log.rows[-1]["incumbent"] == 4.0 and log.rows[-1]["lower_bound"] == 1.5
    assert log.rows[-1]["nodes"] == 14


def test_plot_progress_refuses_a_log_without_figures_and_names_the_missing_extra(monkeypatch):
    with pytest.raises(InvalidParameterError, match="no progress log"):
        plot_progress([{"time": 0.1, "phase": "bcd"}])
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(InvalidParameterError, match=r"mtl_opt\[plot\]"):
        plot_progress([{"time": 0.1, "incumbent": 1.0, "lower_bound": 0.5}])


def test_scip_version_is_scip_s_own_beside_pyscipopt_s():
    pyscipopt = pytest.importorskip("pyscipopt")
    scip = pyscipopt.Model()
    version = get_backend("scip").version()
    assert version.startswith(f"{scip.getMajorVersion()}.{scip.getMinorVersion()}.")
    assert version.endswith(f"(PySCIPOpt {pyscipopt.__version__})")
    assert math.isclose(float(".".join(version.split(".")[:2])), scip.version())


def test_bench_prints_n_of_m_and_an_eta(capsys):
    finished = cell_progress(2)
    row = {"instance": "a/b.toml", "solver": "bnb", "repeat": 0, "status": "optimal", "time_s": 1.0}
    finished(row)
    finished(row)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("  [1/2, eta ") and lines[1].startswith("  [2/2, eta 00:00] b / bnb #0")
    assert np.all(["optimal in 1 s" in line for line in lines])
