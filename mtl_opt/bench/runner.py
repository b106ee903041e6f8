"""Run every instance x solver x repeat, record each finished cell at once, skip recorded ones.

A cell is one fit, run by ``run_cell`` in a child process (``mtl_opt.bench.cell``)
that is killed at a hard wall-clock limit.  Cells run in local threads through
joblib (each thread only waits on its child process) or on a Dask cluster.
One run at a time writes to an output directory: ``run_bench`` holds its lock
(``outputs.exclusive``, a ``flock`` the kernel releases however the process ends) from
reading the rows recorded there to its last write, so concurrent runs never record a cell twice
nor lose one; a second run is refused, or waits (``wait=True``).  Every finished row is recorded
at once by rewriting ``results.jsonl`` and ``results.csv`` atomically (a temporary file renamed
over each), so a run interrupted at any moment (Ctrl-C, a kill, a full disk) leaves both files
whole, holding the rows finished before it, and loses only the cells that were running (Ctrl-C
kills them, and a killed parent takes them along: ``CellProcesses``).  A cell is identified
by (instance, solver, repeat, time_limit); cells already in ``results.jsonl``
are not run again, and its lines that are no row are dropped (with a warning).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InvalidParameterError
from ..instance import load_instance
from ..limits import MAX_REPEATS
from ..outputs import atomic_path, check_output_dir, exclusive
from ..result import relative_gap
from .cell import MARKER
from .solvers import BenchSolver, full_params

#: Columns of results.csv and of the printed table (results.jsonl adds ``trace``).
COLUMNS = ("instance", "method", "solver", "repeat", "time_limit", "status", "objective",
           "lower_bound", "abs_gap", "rel_gap", "time_s", "peak_mem_mb", "solve_mem_mb",
           "solver_version", "error")
#: Statuses of cells that produced no FitResult (besides the FitResult vocabulary).
NOT_APPLICABLE, CRASHED, HARD_TIMEOUT = "not_applicable", "crashed", "hard_timeout"
#: The longest hard limit a cell's wait can take: poll(2) counts its timeout in int32 milliseconds
#: (24.8 days; --time-limit 1e300 overflowed it).
MAX_HARD_LIMIT = (2**31 - 1) / 1000
#: Most cells at once on this machine: each is a process that computes, and more than the cores
#: only makes every cell's wall-clock limit measure the crowd (--jobs 100000 broke joblib's pool).
MAX_JOBS = os.cpu_count() or 1


def default_hard_limit(time_limit: float) -> float:
    """Kill a cell after 2 x time_limit + 30 s: solvers check their limit only between steps,
    and the child also starts an interpreter and reads its data."""
    return 2 * time_limit + 30


@dataclass(frozen=True)
class Cell:
    """One fit to run: what ``run_cell`` needs, picklable for Dask.

    ``instance`` is the path as given (it names the cell in the results);
    ``path`` is its absolute form, which the worker opens.  ``threads``: the
    solver's threads where the instance file does not set them (None: its default).
    ``files``: the instance file's and its data file's bytes, for a machine that cannot open
    ``path`` (a Dask worker: ``shipped``), or None.
    """

    instance: str
    path: str
    method: str
    solver: str
    params: dict
    repeat: int
    time_limit: float
    hard_limit: float
    threads: int | None = None
    files: tuple[bytes, bytes, str] | None = None

    @property
    def key(self) -> tuple:
        return (self.instance, self.solver, self.repeat, self.time_limit)


def row_key(row: dict) -> tuple:
    return (row["instance"], row["solver"], int(row["repeat"]), float(row["time_limit"]))


def plan(instances: list[str], solvers: list[BenchSolver], *, time_limit: float, repeats: int,
         hard_limit: float | None = None) -> tuple[list[Cell], list[dict]]:
    """Cells to run and ``not_applicable`` rows, in table order; bad instance files raise."""
    if not (math.isfinite(time_limit) and time_limit > 0) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidParameterError(
            f"need a finite time_limit > 0 and repeats from 1 to {MAX_REPEATS} (mtl_opt.limits); "
            f"got time_limit={time_limit}, repeats={repeats}.")
    hard = default_hard_limit(time_limit) if hard_limit is None else hard_limit
    if not (math.isfinite(hard) and 0 < hard <= MAX_HARD_LIMIT):
        raise InvalidParameterError(
            f"the hard limit must be > 0 and at most {MAX_HARD_LIMIT:.10g} seconds (24.8 days, the "
            f"longest wait for a cell); got {hard:g}"
            + (" (2 x time limit + 30): lower the time limit." if hard_limit is None else "."))
    if hard < time_limit:   # every cell that used its time would be killed, as a hard timeout
        raise InvalidParameterError(
            f"the hard limit ({hard:g} s) is below the time limit ({time_limit:g} s); a cell is "
            f"killed at the hard limit, so it must be at least the time limit (default 2 x time "
            f"limit + 30 = {default_hard_limit(time_limit):g} s).")
    files = [Path(path).resolve() for path in instances]
    repeated = sorted({str(file) for file in files if files.count(file) > 1})
    if repeated:   # their cells would run twice, and twice under one key
        raise InvalidParameterError(
            f"instance file(s) {', '.join(repeated)} listed more than once; list each once "
            f"(--repeats runs each cell several times).")
    cells, skipped = [], []
    for path in instances:
        instance = load_instance(path)
        data = instance.load_data()  # a broken data file is bad input, found before anything runs
        params = full_params(instance.method, instance.params)
        for solver in solvers:
            reason = solver.not_applicable(instance.method, params, data)
            for repeat in range(repeats):
                if reason is None:
                    cells.append(Cell(str(path), str(Path(path).resolve()), instance.method, solver.name,
                                      dict(solver.params), repeat, float(time_limit), float(hard)))
                else:
                    skipped.append(_row(str(path), instance.method, solver.name, repeat, time_limit,
                                        status=NOT_APPLICABLE, error=reason))
    return cells, skipped


class CellProcesses:
    """The cell processes running in this process, so that an interrupt can stop them all.

    Each cell runs in its own session, so a Ctrl-C at the terminal reaches only
    the parent, which then calls ``stop``: the running cells are killed and no
    new one starts (their rows are not recorded).  A killed parent takes its
    cells along by itself (``cell.die_with_parent``).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._stopped = False

    def start(self) -> subprocess.Popen | None:
        """A new cell process, or None once ``stop`` was called."""
        with self._lock:
            if self._stopped:
                return None
            child = subprocess.Popen([sys.executable, "-m", "mtl_opt.bench.cell"], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
            self._running.add(child)
            return child

    def finished(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(child)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for child in self._running:
                child.kill()

    def reset(self) -> None:
        with self._lock:
            self._stopped = False


CELLS = CellProcesses()


def shipped(cells: list[Cell]) -> list[Cell]:
    """The cells with their instance's files inside (instance file, data file, the data file's
    suffix; each instance read once), so that a worker on another machine needs no shared
    filesystem."""
    files = {}
    for path in dict.fromkeys(cell.path for cell in cells):
        instance = load_instance(path)
        files[path] = (instance.path.read_bytes(), instance.data_path.read_bytes(), instance.data_path.suffix)
    return [replace(cell, files=files[cell.path]) for cell in cells]


def run_cell(cell: Cell) -> dict | None:
    """Fit ``cell`` in a child process; a crash or a hard timeout becomes a row like any other
    (None if the bench was stopped: nothing ran, or the cell was killed by ``CELLS.stop``).
    A cell with its ``files`` runs on copies of them in a temporary directory."""
    if cell.files is None:
        return _run_cell(cell, cell.path, None)
    with tempfile.TemporaryDirectory(prefix="mtl-opt-cell-") as folder:
        toml, data = Path(folder, "instance.toml"), Path(folder, "data" + cell.files[2])
        toml.write_bytes(cell.files[0])
        data.write_bytes(cell.files[1])
        return _run_cell(cell, str(toml), str(data))


def _run_cell(cell: Cell, path: str, data_path: str | None) -> dict | None:
    payload = json.dumps({"instance": path, "data_path": data_path, "params": cell.params,
                          "time_limit": cell.time_limit, "threads": cell.threads, "parent": os.getpid()})
    start = time.perf_counter()
    child = CELLS.start()
    if child is None:
        return None
    try:
        stdout, stderr = child.communicate(payload, timeout=cell.hard_limit)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return _row(cell.instance, cell.method, cell.solver, cell.repeat, cell.time_limit,
                    status=HARD_TIMEOUT, time_s=time.perf_counter() - start,
                    error=f"killed after the hard limit of {cell.hard_limit:g} s")
    finally:
        CELLS.finished(child)
    if CELLS.stopped:
        return None
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
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
    """results.csv (the table) and results.jsonl (the table plus traces) in ``out``, both
    rewritten atomically from all the rows recorded whenever a row is added (``write``).  One
    writer at a time: ``run_bench`` writes only while it holds ``out``'s lock."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.csv_path, self.json_path = self.out / "results.csv", self.out / "results.jsonl"

    def load(self, warn=warnings.warn) -> list[dict]:
        """Every row recorded so far.  Lines that are no row (cut short by a kill, not JSON, or
        JSON from elsewhere) are left out and reported in one ``warn(message)`` call."""
        if not self.json_path.exists():
            return []
        rows, bad = [], []
        # bytes: a line that is no UTF-8 is one more line that is no row
        for number, line in enumerate(self.json_path.read_bytes().splitlines(), 1):
            row = _parse_row(line)
            if row is None:
                bad.append(number)
            else:
                rows.append(row)
        if bad:
            warn(f"{self.json_path}: ignored {len(bad)} line(s) that are not result rows "
                 f"(line{'s' * (len(bad) > 1)} {', '.join(map(str, bad))}); the file is rewritten "
                 f"without them.")
        return rows

    def write(self, rows) -> None:
        """Both files from ``rows``, each atomically: interrupted at any point, each holds its
        rows before or after, whole (results.jsonl first: it is what a resume reads)."""
        rows = list(rows)
        with atomic_path(self.json_path) as temporary:
            temporary.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        with (atomic_path(self.csv_path) as temporary,
              open(temporary, "w", newline="", encoding="utf-8") as fh):
            writer = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    def sweep(self) -> None:
        """Remove the temporary files a killed writer left beside the two (``atomic_path``'s
        names); only the holder of ``out``'s lock calls this, so no live writer owns one."""
        for path in (self.json_path, self.csv_path):
            for leftover in self.out.glob(f".{path.name}.*{path.suffix}"):
                leftover.unlink(missing_ok=True)


def _parse_row(line: bytes) -> dict | None:
    """The result row on ``line``, or None if it is none (not JSON, or a foreign object)."""
    try:
        row = json.loads(line)
        row_key(row)
    except (ValueError, TypeError, KeyError):  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        return None
    return row if set(COLUMNS) | {"trace"} <= row.keys() else None


def execute(cells: list[Cell], *, jobs: int = 1, scheduler: str | None = None):
    """Yield the row of every cell as it finishes: joblib threads locally, or a Dask cluster.
    Cells that share this machine (``jobs`` > 1) get one solver thread each (bnb's second
    process, SCIP's and HiGHS's threads), unless their instance file sets ``threads``."""
    if not cells:
        return
    if scheduler is None:
        from joblib import Parallel, delayed

        if jobs > 1:
            cells = [replace(cell, threads=1) for cell in cells]

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
    except (OSError, ValueError) as exc:   # unreachable, or no address (ValueError)
        raise InvalidParameterError(
            f"cannot reach the Dask scheduler at {scheduler!r} ({exc}); check the address "
            f"printed by 'dask scheduler'.") from None
    with client:   # the instances travel with the cells, the rows come back through the futures
        for future in as_completed(client.map(run_cell, shipped(cells), pure=False)):
            yield future.result()


#: What a run finding its output directory locked is told (``outputs.exclusive``).
BUSY = ("one mtl-opt bench at a time writes its results there: wait for it to finish, run with "
        "--wait to wait for it, or choose another --out")


def run_bench(instances: list[str], solvers: list[BenchSolver], *, time_limit: float,
              repeats: int = 1, jobs: int = 1, scheduler: str | None = None, out: Path | None = None,
              hard_limit: float | None = None, fresh: bool = False, retry_crashed: bool = False,
              wait: bool = False, progress=None, warn=warnings.warn) -> list[dict]:
    """Run the grid; return all its rows (recorded earlier or now) in table order.

    With ``out``, rows already in ``out/results.jsonl`` are kept and their
    cells skipped (``fresh=True`` discards them first; ``retry_crashed=True``
    runs ``crashed`` cells again, and the new row supersedes the old one);
    lines there that are no row are reported through ``warn(message)`` and
    dropped.  ``out`` is locked for the whole run: if another run holds it, an OutputError
    says so, or with ``wait`` this run waits for it (``warn`` says so) and then skips what it
    recorded.  ``progress(total)`` is called once, when the cells start, with the number of
    cells to run now, and what it returns with each row that finishes.
    A KeyboardInterrupt kills the running cells and keeps the rows recorded.
    """
    if not 1 <= jobs <= MAX_JOBS:
        raise InvalidParameterError(f"jobs must be >= 1 and at most {MAX_JOBS}, the CPU count of "
                                    f"this machine; got {jobs}.")
    instances = [str(path) for path in instances]
    cells, skipped = plan(instances, solvers, time_limit=time_limit, repeats=repeats,
                          hard_limit=hard_limit)
    if out is None:
        store, lock = None, contextlib.nullcontext()
    else:
        store = ResultStore(check_output_dir(out))
        lock = exclusive(store.out, wait=wait, busy=BUSY, warn=warn)
    with lock:   # from reading the rows recorded to the last write: one run at a time
        done = {}
        if store is not None:
            store.sweep()
            if not fresh:   # a later row supersedes an earlier one
                done = {row_key(row): row for row in store.load(warn)}
            if retry_crashed:
                done = {key: row for key, row in done.items() if row["status"] != CRASHED}
        for row in skipped:
            done.setdefault(row_key(row), row)
        if store is not None:   # exactly the rows done: no dropped lines, no superseded rows
            store.write(done.values())
        CELLS.reset()
        to_run = [c for c in cells if c.key not in done]
        finished = progress(len(to_run)) if progress is not None else None
        try:
            for row in execute(to_run, jobs=jobs, scheduler=scheduler):
                done[row_key(row)] = row
                if store is not None:
                    store.write(done.values())
                if finished is not None:
                    finished(row)
        except KeyboardInterrupt:
            CELLS.stop()
            raise KeyboardInterrupt("the running cells were stopped" + (
                "" if store is None else f"; the finished ones are kept in {store.json_path}")) from None
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
