"""The live log through ``logging`` (``mtl_opt.progress``) and a fit's ``callback``.

The fits run on a library instance none of the exact paths closes in a few seconds, its y times
1000, so the run's twin (objective ~1) differs from the user's problem by 2^20: rows logged or
passed to a callback in the twin's units would not equal the result's log.
"""

import logging
import threading
from pathlib import Path

import pytest

from mtl_opt import interrupts
from mtl_opt.cli import main
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.instance import load_instance
from mtl_opt.result import FitResult
from mtl_opt.solvers import progress
from mtl_opt.solvers.progress import HEADER, Progress, format_row, reporting

LIBRARY = Path(__file__).resolve().parent.parent / "instances" / "library"


@pytest.fixture
def heartbeat(monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.2)


def medium(time_limit: float, **options):
    """(an OA estimator on HiGHS, the medium Zbar instance with y times 1000)."""
    instance = load_instance(LIBRARY / "medium_sparse_zbar.toml")
    data = instance.load_data()
    estimator = instance.estimator(algorithm="oa_multi_tree", backend="highs",
                                   time_limit=time_limit, **options)
    return estimator, MultiTaskData(list(data.Xs), [1000 * y for y in data.ys])


def test_a_callback_receives_every_row_of_the_log_in_the_units_of_the_problem(heartbeat):
    estimator, data = medium(2.0)
    rows = []
    result = estimator.fit(data, callback=rows.append).result_
    assert result.objective > 1e5
    assert len(rows) == len(result.log) >= 3
    assert rows == result.log
    assert rows[-1]["incumbent"] == pytest.approx(result.objective, rel=1e-9)


def test_a_row_merged_after_it_was_written_reaches_the_callback_as_the_log_holds_it():
    got = []
    with reporting(got.append, interrupts.Stop()):
        log = Progress(every=3600.0)
        log.update(5.0, None, 0)                            # the first row
        log.update(4.0, 1.0, 3, force=True, iteration=1)    # the second: the first is final
        assert got == log.rows[:1]
        log.update(force=True, cuts=7)                      # moves nothing: merged into the second
        assert len(got) == 1
    assert got == log.rows and len(got) == 2 and got[-1]["cuts"] == 7


def test_a_raising_callback_stops_its_fit_alone_and_fit_raises_it(heartbeat):
    """A callback that raises in a fit run in a thread: that fit stops (``interrupted``, where a
    full run ends at its 60 s limit) and raises it; a fit running meanwhile in the main thread
    runs to its own limit; no stop is left for the next fit."""
    class Enough(Exception):
        pass

    running, seen, raised = threading.Event(), [], []

    def enough(row):
        seen.append(row)
        running.wait(30)   # the main thread's fit is running
        raise Enough

    def fit_in_thread():
        try:
            stopped.fit(stopped_data, callback=enough)
        except Enough as exc:
            raised.append(exc)

    stopped, stopped_data = medium(60.0)
    other, data = medium(2.0)
    thread = threading.Thread(target=fit_in_thread)
    thread.start()
    result = other.fit(data, callback=lambda row: running.set()).result_
    thread.join(60)
    assert not thread.is_alive() and len(raised) == 1
    assert len(seen) == 1   # no row after the one that raised
    assert stopped.result_.status == "interrupted"
    assert result.status == "time_limit"
    assert not interrupts.requested()
    with pytest.raises(InvalidParameterError, match=r"callback=.*function of one row.*got int"):
        other.fit(data, callback=1)


def test_logging_disable_silences_a_verbose_fit(capfd):
    estimator, data = medium(1.0, verbose=True)
    estimator.fit(data)
    assert HEADER in capfd.readouterr().out   # the control: verbose prints without it
    logging.disable(logging.CRITICAL)
    try:
        result = estimator.fit(data).result_
    finally:
        logging.disable(logging.NOTSET)
    assert result.log
    assert capfd.readouterr() == ("", "")


def test_an_application_s_handler_on_mtl_opt_receives_the_rows_and_the_console_none(capfd):
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    records, handler, package = [], Keep(), logging.getLogger("mtl_opt")
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        estimator, data = medium(1.0, verbose=True)
        result = estimator.fit(data).result_
    finally:
        package.removeHandler(handler)
        package.setLevel(logging.NOTSET)
    assert capfd.readouterr().out == ""
    header, rows = records[0], records[1:]
    assert header.name == "mtl_opt.progress" and header.getMessage() == HEADER
    assert all(r.levelno == logging.INFO for r in records)
    assert [r.getMessage() for r in rows] == [format_row(r.row) for r in rows]
    assert len(rows) == len(result.log)
    figures = ("incumbent", "lower_bound", "gap", "nodes")   # a merge moves only time and keys
    assert [[r.row[key] for key in figures] for r in rows] == [[row[key] for key in figures]
                                                              for row in result.log]


def test_mtl_opt_solve_verbose_keeps_its_table(tmp_path, capfd):
    """The header line, then one line per row of the result's log, in ``format_row``'s columns
    (the time of a row merged after it was printed is the one it had then)."""
    out = tmp_path / "r.json"
    assert main(["solve", str(LIBRARY / "tiny_sparse_l0l2.toml"), "--algorithm", "oa_multi_tree",
                 "--backend", "highs", "-v", "--out", str(out)]) == 0
    lines = capfd.readouterr().out.splitlines()
    log = FitResult.from_json(out).log
    table = lines[lines.index(HEADER) + 1:][:len(log)]
    assert len(log) >= 2 and len(table) == len(log)
    for line, row in zip(table, log):
        assert len(line) == len(HEADER) and line.split()[0].endswith("s")
        assert line.split()[1:] == format_row(row).split()[1:]
