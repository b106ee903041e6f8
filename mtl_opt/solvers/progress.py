"""The live log of an exact run: one row format on every path, a heartbeat, logged as it goes.

Every exact path (sparse bnb, multi- and single-tree OA, the MIQP; ARMUL's exact model; MOLAR's
LP) records its progress through one ``Progress``: the solve loops at their own iterations, and
inside a solver call the solver's own callbacks (``Backend.solve(progress=...)``: HiGHS's
interrupt callbacks, a SCIP event handler).  A row has the keys of ``method.LOG_KEYS``:

    time  (s since the run began)   incumbent   lower_bound   gap (relative)   nodes

``Progress.update`` keeps the latest figures and writes a row when one is due, at most one per
``EVERY`` seconds, or when forced (the first and last rows, an iteration of a loop).  The rows are
the run's ``SolverRun.log`` (``FitResult.log``), which ``plotting.plot_progress`` draws.

With ``verbose`` each row is an INFO record of the ``mtl_opt.progress`` logger as it is written
(``LOGGER``; the table's header first, then a row per record, in the table of ``format_row``, the
row in the record's ``row``), shown on the console while logging is not configured for it
(``mtl_opt.logs.show``).  A fit's ``callback`` (``reporting``) receives every row, final: a
forced row that moves no figure is merged into the last one (a later time, its keys added), so a
row is passed once the next one is written, or when the fit ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import InvalidParameterError
from ..interrupts import Stop
from ..logs import show
from ..result import relative_gap

#: Seconds between the heartbeat's rows (a row is written at most this often, unless forced).
EVERY = 1.0

#: The logger of the rows (``verbose``): each an INFO record, the row in its ``row``.
LOGGER = logging.getLogger("mtl_opt.progress")

HEADER = f"{'time':>9} {'incumbent':>15} {'lower bound':>15} {'gap':>9} {'nodes':>10}"

Row = dict[str, Any]


class _Report:
    """A fit's ``callback``, handed each row of its runs once final; an exception it raises is
    kept (``error``) and stops the fit (its ``Stop``), and no row is passed after it."""

    def __init__(self, callback: Callable[[Row], object], stop: Stop):
        self.callback, self.stop = callback, stop
        self.error: Exception | None = None
        self.told: dict[Progress, int] = {}   # each run of the fit: its rows passed

    def add(self, run: Progress) -> None:
        """A new run of the fit: the ones before it are over."""
        self.flush()
        self.told[run] = 0

    def flush(self) -> None:
        """Pass every row not yet passed (the runs are over)."""
        for run in self.told:
            with run._lock:
                self.tell(run, len(run.rows))

    def tell(self, run: Progress, end: int) -> None:
        """Pass the rows of ``run`` before ``end`` not yet passed, in the user's units."""
        for row in run.rows[self.told[run]:end]:
            self._call(run.units(row))
        self.told[run] = max(self.told[run], end)

    def _call(self, row: Row) -> None:
        if self.error is None:
            try:
                self.callback(row)
            except Exception as exc:   # never into a solver's callback: the fit stops, raises it
                self.error = exc
                self.stop.ask()


_report: contextvars.ContextVar[_Report | None] = contextvars.ContextVar("mtl_opt_report",
                                                                          default=None)


@contextlib.contextmanager
def reporting(callback: Callable[[Row], object] | None, stop: Stop) -> Iterator[None]:
    """The region of a fit whose runs hand ``callback`` their rows (None: none), each once final
    (the last ones at the end); an exception the callback raised stops the fit (``stop``), and is
    raised here once the fit has ended, in place of what the fit raised then."""
    if callback is not None and not callable(callback):
        raise InvalidParameterError(
            f"fit(callback=...) takes a function of one row (a dict, as result_.log holds), or "
            f"None; got {type(callback).__name__}.")
    report = None if callback is None else _Report(callback, stop)
    token = _report.set(report)
    try:
        yield
    finally:
        _report.reset(token)
        if report is not None:
            report.flush()
            if report.error is not None:
                raise report.error from None


class Progress:
    """The rows of one run (``rows``), written by ``update``, logged when ``verbose``.

    ``units`` maps a row to the units of the user's problem (a run on a scaled twin logs in
    those: ``reductions.Inverse.row``; its rows are mapped back with the run,
    ``reductions.Inverse.run``): the rows logged and passed to a fit's callback.
    """

    def __init__(self, verbose: bool = False, *, units: Callable[[Row], Row] = dict,
                 every: float | None = None):
        self.verbose, self.units = verbose, units
        self.every = EVERY if every is None else every
        self.start = time.perf_counter()
        self.rows: list[Row] = []
        self.incumbent: float | None = None
        self.lower_bound: float | None = None
        self.nodes = 0
        self._stream = sys.stdout   # the console: a solver's own capture may replace sys.stdout
        self._last = -math.inf
        self._offered: tuple | None = None   # a solver's latest figures, for the next row
        self._lock = threading.Lock()   # a solver's callbacks and the backend's heartbeat thread
        self._report = _report.get()
        if self._report is not None:
            self._report.add(self)

    def due(self) -> bool:
        """Whether a row is due (the last one is ``every`` seconds old)."""
        return time.perf_counter() - self._last >= self.every

    def update(self, incumbent: float | None = None, lower_bound: float | None = None,
               nodes: int | None = None, *, force: bool = False, **extra) -> None:
        """Keep the figures given (None keeps the last one), and write a row when one is due or
        ``force``; ``extra`` keys (e.g. ``iteration``, ``cuts``) go on that row only."""
        with self._lock:
            self._update(incumbent, lower_bound, nodes, force, extra)

    def offer(self, incumbent: float | None = None, lower_bound: float | None = None,
              nodes: int | None = None) -> None:
        """A solver's latest figures, from its callback (called at every event, so it only keeps
        them): the next row takes them, whoever writes it, and one is written when due.  The
        backend's heartbeat thread writes most rows while a solver runs: figures taken only
        when a row was due at the solver's own call were lost to it (SCIP's rows had no bound
        until the solve ended).  A bound offered never lowers the one held."""
        self._offered = (incumbent, lower_bound, nodes)   # one assignment: no lock needed
        if self.due():
            self.update()

    def _update(self, incumbent, lower_bound, nodes, force, extra) -> None:
        offered, self._offered = self._offered, None
        if offered is not None:
            held, bound, count = offered
            if bound is not None and self.lower_bound is not None:
                bound = max(bound, self.lower_bound)
            self._keep(held, bound, count)
        self._keep(incumbent, lower_bound, nodes)
        if force or self.due():
            self._write(force, extra)

    def _keep(self, incumbent, lower_bound, nodes) -> None:
        """The figures given, as the latest (None keeps the last one)."""
        if incumbent is not None and math.isfinite(incumbent):
            self.incumbent = float(incumbent)
        if lower_bound is not None and math.isfinite(lower_bound):
            self.lower_bound = float(lower_bound)
        if nodes is not None and nodes >= 0:
            self.nodes = int(nodes)

    def _write(self, force, extra) -> None:
        """A row of the latest figures (a forced one that moves nothing only moves the last row)."""
        now = time.perf_counter()
        self._last = now
        row = {"time": now - self.start, "incumbent": self.incumbent,
               "lower_bound": self.lower_bound, "gap": relative_gap(self.incumbent, self.lower_bound),
               "nodes": self.nodes}
        last = self.rows[-1] if self.rows else {}
        if force and all(last.get(key) == value for key, value in row.items() if key != "time"):
            last.update(extra, time=row["time"])   # nothing moved since the last row: it is moved here
            return
        row.update(extra)
        self.rows.append(row)
        if self.verbose:
            shown = self.units(row)
            if len(self.rows) == 1:
                show(LOGGER, logging.INFO, HEADER, self._stream)
            show(LOGGER, logging.INFO, format_row(shown), self._stream, row=shown)
        if self._report is not None:
            self._report.tell(self, len(self.rows) - 1)   # the rows before this one are final

    def heartbeat(self, *figures) -> None:
        """A ``Backend.solve(progress=...)`` callback for an LP: a row when due, the solver's
        figures ignored (an LP's are neither nodes nor, mid-solve, bounds)."""
        self.update()

    def solver_callback(self, lower_bound_of=lambda bound: None, nodes_before: int = 0):
        """A ``Backend.solve(progress=...)`` callback: the solver's (incumbent, bound, nodes) as a
        heartbeat here.  The solver's incumbent is not taken (the run's is the objective of a point
        it holds); its bound only through ``lower_bound_of`` (None: not a proven bound here)."""
        def seen(incumbent, bound, nodes):
            if bound is None and nodes is None:   # the backend's heartbeat (``ticking``)
                if self.due():
                    self.update()
                return
            self.offer(None, None if bound is None else lower_bound_of(bound),
                       None if nodes is None else nodes_before + nodes)
        return seen


def format_row(row: Row) -> str:
    """One row of the live table: time, incumbent, lower bound, gap (%), nodes ("-": none yet)."""
    def figure(value: float | None) -> str:
        return f"{value:>15.8g}" if value is not None else f"{'-':>15}"
    gap = row.get("gap")
    shown = "-" if gap is None else "Large" if gap >= 99.99 else f"{100 * gap:.3f}%"
    return (f"{row['time']:>8.1f}s {figure(row.get('incumbent'))} {figure(row.get('lower_bound'))} "
            f"{shown:>9} {row.get('nodes', 0):>10}")
