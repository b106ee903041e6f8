"""Run every instance x solver x repeat, record each finished cell at once, skip recorded ones.

A cell is one fit, run by ``run_cell`` in a child process (``mtl_opt.bench.cell``)
that is killed at a hard wall-clock limit.  Cells run in local threads through
joblib (each thread only waits on its child process) or on a Dask cluster.
The parent appends every finished row to ``results.jsonl`` and ``results.csv``
as it arrives (each write closes, and so flushes, the file), so an
interrupted run loses only the cells that were running.  A cell is identified
by (instance, solver, repeat, time_limit); cells already in ``results.jsonl``
are not run again, and ``results.csv`` is rewritten from it on resume.
"""

from __future__ import annotations

import csv
import json
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidParameterError
from ..instance import load_instance
from ..result import relative_gap
from .cell import MARKER
from .solvers import BenchSolver, full_params

#: Columns of results.csv and of the printed table (results.jsonl adds ``trace``).
COLUMNS = ("instance", "method", "solver", "repeat", "time_limit", "status", "objective",
           "lower_bound", "abs_gap", "rel_gap", "time_s", "peak_mem_mb", "solve_mem_mb",
           "solver_version", "error")
#: Statuses of cells that produced no FitResult (besides the FitResult vocabulary).
NOT_APPLICABLE, CRASHED, HARD_TIMEOUT = "not_applicable", "crashed", "hard_timeout"


def default_hard_limit(time_limit: float) -> float:
    """Kill a cell after 2 x time_limit + 30 s: solvers check their limit only between steps,
    and the child also starts an interpreter and reads its data."""
    return 2 * time_limit + 30


@dataclass(frozen=True)
class Cell:
    """One fit to run: what ``run_cell`` needs, picklable for Dask.

    ``instance`` is the path as given (it names the cell in the results);
    ``path`` is its absolute form, which the worker opens.
    """

    instance: str
    path: str
    method: str
    solver: str
    params: dict
    repeat: int
    time_limit: float
    hard_limit: float

    @property
    def key(self) -> tuple:
        return (self.instance, self.solver, self.repeat, self.time_limit)


def row_key(row: dict) -> tuple:
    return (row["instance"], row["solver"], int(row["repeat"]), float(row["time_limit"]))


def plan(instances: list[str], solvers: list[BenchSolver], *, time_limit: float, repeats: int,
         hard_limit: float | None = None) -> tuple[list[Cell], list[dict]]:
    """Cells to run and ``not_applicable`` rows, in table order; bad instance files raise."""
    if time_limit <= 0 or repeats < 1:
        raise InvalidParameterError(
            f"need time_limit > 0 and repeats >= 1; got time_limit={time_limit}, repeats={repeats}.")
    hard = default_hard_limit(time_limit) if hard_limit is None else hard_limit
    if hard <= 0:
        raise InvalidParameterError(f"the hard limit must be > 0 seconds; got {hard}.")
    cells, skipped = [], []
    for path in instances:
        instance = load_instance(path)
        instance.load_data()  # a broken data file is bad input, found before anything runs
        params = full_params(instance.method, instance.params)
        for solver in solvers:
            reason = solver.not_applicable(instance.method, params)
            for repeat in range(repeats):
                if reason is None:
                    cells.append(Cell(str(path), str(Path(path).resolve()), instance.method, solver.name,
                                      dict(solver.params), repeat, float(time_limit), float(hard)))
                else:
                    skipped.append(_row(str(path), instance.method, solver.name, repeat, time_limit,
                                        status=NOT_APPLICABLE, error=reason))
    return cells, skipped


def run_cell(cell: Cell) -> dict:
    """Fit ``cell`` in a child process; a crash or a hard timeout becomes a row like any other."""
    payload = json.dumps({"instance": cell.path, "params": cell.params,
                          "time_limit": cell.time_limit})
    start = time.perf_counter()
    try:
        child = subprocess.run([sys.executable, "-m", "mtl_opt.bench.cell"], input=payload,
                               capture_output=True, text=True, timeout=cell.hard_limit, check=False)
    except subprocess.TimeoutExpired:
        return _row(cell.instance, cell.method, cell.solver, cell.repeat, cell.time_limit,
                    status=HARD_TIMEOUT, time_s=time.perf_counter() - start,
                    error=f"killed after the hard limit of {cell.hard_limit:g} s")
    lines = [line for line in child.stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        tail = child.stderr.strip().splitlines()[-1:] or ["no output"]
        how = (f"killed by {signal.Signals(-child.returncode).name}" if child.returncode < 0
               else f"exited with code {child.returncode}")
        outcome = {"status": CRASHED, "time_s": time.perf_counter() - start,
                   "error": f"worker {how}: {tail[0]}"}
    else:
        outcome = json.loads(lines[-1][len(MARKER):])
    return _row(cell.instance, cell.method, cell.solver, cell.repeat, cell.time_limit, **outcome)


def _row(instance, method, solver, repeat, time_limit, **values) -> dict:
    row = {**dict.fromkeys(COLUMNS), "trace": []}
    row.update(instance=instance, method=method, solver=solver, repeat=repeat,
               time_limit=float(time_limit), **values)
    objective, bound = row["objective"], row["lower_bound"]
    if objective is not None and bound is not None:
        row["abs_gap"], row["rel_gap"] = objective - bound, relative_gap(objective, bound)
    return row


class ResultStore:
    """results.csv (the table) and results.jsonl (the table plus traces) in ``out``, appended per row."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.csv_path, self.json_path = self.out / "results.csv", self.out / "results.jsonl"

    def load(self) -> list[dict]:
        """Every complete row recorded so far (a line cut short by a kill is ignored)."""
        if not self.json_path.exists():
            return []
        rows = []
        for line in self.json_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def append(self, row: dict) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.json_path, "a") as fh:
            _end_cut_line(fh)
            fh.write(json.dumps(row) + "\n")
        self._write_csv([row], mode="a")

    def rewrite_csv(self, rows: list[dict]) -> None:
        """results.csv from scratch: on resume it mirrors results.jsonl, the record of what is done."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._write_csv(rows, mode="w")

    def _write_csv(self, rows: list[dict], mode: str) -> None:
        header = mode == "w" or not self.csv_path.exists()
        with open(self.csv_path, mode, newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
            if header:
                writer.writeheader()
            writer.writerows(rows)

    def clear(self) -> None:
        for path in (self.csv_path, self.json_path):
            path.unlink(missing_ok=True)


def _end_cut_line(fh) -> None:
    """Start on a new line if a killed run left half a line at the end of the file."""
    if fh.tell() > 0:
        with open(fh.name, "rb") as check:
            check.seek(-1, 2)
            if check.read(1) != b"\n":
                fh.write("\n")


def execute(cells: list[Cell], *, jobs: int = 1, scheduler: str | None = None):
    """Yield the row of every cell as it finishes: joblib threads locally, or a Dask cluster."""
    if not cells:
        return
    if scheduler is None:
        from joblib import Parallel, delayed

        yield from Parallel(n_jobs=jobs, backend="threading", return_as="generator_unordered")(
            delayed(run_cell)(cell) for cell in cells)
        return
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InvalidParameterError(
            "--scheduler needs dask.distributed: pip install 'mtl_opt[dask]'.") from None
    try:
        client = Client(scheduler)
    except OSError as exc:
        raise InvalidParameterError(
            f"cannot reach the Dask scheduler at {scheduler!r} ({exc}); check the address "
            f"printed by 'dask scheduler'.") from None
    with client:
        for future in as_completed(client.map(run_cell, cells, pure=False)):
            yield future.result()


def run_bench(instances: list[str], solvers: list[BenchSolver], *, time_limit: float,
              repeats: int = 1, jobs: int = 1, scheduler: str | None = None, out: Path | None = None,
              hard_limit: float | None = None, fresh: bool = False, retry_crashed: bool = False,
              progress=None) -> list[dict]:
    """Run the grid; return all its rows (recorded earlier or now) in table order.

    With ``out``, rows already in ``out/results.jsonl`` are kept and their
    cells skipped (``fresh=True`` discards them first; ``retry_crashed=True``
    runs ``crashed`` cells again, and the new row supersedes the old one).
    ``progress(row)`` is called for every row that finishes now.
    """
    if jobs < 1:
        raise InvalidParameterError(f"jobs must be >= 1; got {jobs}.")
    instances = [str(path) for path in instances]
    cells, skipped = plan(instances, solvers, time_limit=time_limit, repeats=repeats,
                          hard_limit=hard_limit)
    store = ResultStore(out) if out is not None else None
    if store is not None and fresh:
        store.clear()
    done = {}
    if store is not None:
        done = {row_key(row): row for row in store.load()}  # a later row supersedes an earlier one
        if retry_crashed:
            done = {key: row for key, row in done.items() if row["status"] != CRASHED}
        store.rewrite_csv(list(done.values()))
    for row in skipped:
        if row_key(row) not in done:
            done[row_key(row)] = row
            if store is not None:
                store.append(row)
    for row in execute([c for c in cells if c.key not in done], jobs=jobs, scheduler=scheduler):
        done[row_key(row)] = row
        if store is not None:
            store.append(row)
        if progress is not None:
            progress(row)
    names = [s.name for s in solvers]
    return sorted((done[key] for key in [c.key for c in cells] + [row_key(r) for r in skipped]),
                  key=lambda r: (instances.index(r["instance"]), names.index(r["solver"]), r["repeat"]))


def format_table(rows: list[dict], markdown: bool = False) -> str:
    """The results as an aligned text table, or a Markdown one; not-applicable rows are left out."""
    header = ("instance", "solver", "rep", "status", "objective", "lower bound", "rel gap",
              "time s", "peak MB", "solver version")
    lines = []
    for r in rows:
        if r["status"] == NOT_APPLICABLE:
            continue
        lines.append((Path(r["instance"]).stem, r["solver"], str(r["repeat"]), r["status"],
                      _num(r["objective"], ".8g"), _num(r["lower_bound"], ".8g"),
                      _num(None if r["rel_gap"] is None else 100 * r["rel_gap"], ".3g", "%"),
                      _num(r["time_s"], ".3g"), _num(r["peak_mem_mb"], ".0f"),
                      r["solver_version"] or (r["error"] or "")[:60]))
    if markdown:
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                         + ["| " + " | ".join(line) + " |" for line in lines])
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip()
                     for line in [header, *lines])


def _num(value, spec: str, suffix: str = "") -> str:
    if value is None:
        return "-"
    return ("inf" if math.isinf(value) else format(value, spec)) + suffix
