"""The live log of an exact run: one row format on every path, a heartbeat, printed as it goes.

Every exact path (sparse bnb, multi- and single-tree OA, the MIQP; ARMUL's exact model; MOLAR's
LP) records its progress through one ``Progress``: the solve loops at their own iterations, and
inside a solver call the solver's own callbacks (``Backend.solve(progress=...)``: HiGHS's
interrupt callbacks, a SCIP event handler).  A row has the keys of ``method.LOG_KEYS``:

    time  (s since the run began)   incumbent   lower_bound   gap (relative)   nodes

``Progress.update`` keeps the latest figures and writes a row when one is due, at most one per
``EVERY`` seconds, or when forced (the first and last rows, an iteration of a loop); with
``verbose`` each row is printed as it is written, in the table of ``format_row``.  The rows are
the run's ``SolverRun.log`` (``FitResult.log``), which ``plotting.plot_progress`` draws.
"""

from __future__ import annotations

import math
import sys
import threading
import time

from ..result import relative_gap

#: Seconds between the heartbeat's rows (a row is written at most this often, unless forced).
EVERY = 1.0

_HEADER = f"{'time':>9} {'incumbent':>15} {'lower bound':>15} {'gap':>9} {'nodes':>10}"


class Progress:
    """The rows of one run (``rows``), written by ``update`` and printed when ``verbose``.

    ``scale`` multiplies the objective figures when printed (a run on a scaled twin prints in
    the units of the user's problem; its rows are mapped back with the run, ``reductions.Inverse.run``).
    """

    def __init__(self, verbose: bool = False, *, scale: float = 1.0, every: float | None = None):
        self.verbose, self.scale = verbose, scale
        self.every = EVERY if every is None else every
        self.start = time.perf_counter()
        self.rows: list[dict] = []
        self.incumbent = self.lower_bound = None
        self.nodes = 0
        self._stream = sys.stdout   # the console: a solver's own capture may replace sys.stdout
        self._last = -math.inf
        self._lock = threading.Lock()   # a solver's callbacks and the backend's heartbeat thread

    def due(self) -> bool:
        """Whether a row is due (the last one is ``every`` seconds old)."""
        return time.perf_counter() - self._last >= self.every

    def update(self, incumbent: float | None = None, lower_bound: float | None = None,
               nodes: int | None = None, *, force: bool = False, **extra) -> None:
        """Keep the figures given (None keeps the last one), and write a row when one is due or
        ``force``; ``extra`` keys (e.g. ``iteration``, ``cuts``) go on that row only."""
        with self._lock:
            self._update(incumbent, lower_bound, nodes, force, extra)

    def _update(self, incumbent, lower_bound, nodes, force, extra) -> None:
        if incumbent is not None and math.isfinite(incumbent):
            self.incumbent = float(incumbent)
        if lower_bound is not None and math.isfinite(lower_bound):
            self.lower_bound = float(lower_bound)
        if nodes is not None and nodes >= 0:
            self.nodes = int(nodes)
        if not (force or self.due()):
            return
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
            if len(self.rows) == 1:
                print(_HEADER, file=self._stream)
            print(format_row(row, self.scale), file=self._stream, flush=True)

    def heartbeat(self, *figures) -> None:
        """A ``Backend.solve(progress=...)`` callback for an LP: a row when due, the solver's
        figures ignored (an LP's are neither nodes nor, mid-solve, bounds)."""
        self.update()

    def solver_callback(self, lower_bound_of=lambda bound: None, nodes_before: int = 0):
        """A ``Backend.solve(progress=...)`` callback: the solver's (incumbent, bound, nodes) as a
        heartbeat here.  The solver's incumbent is not taken (the run's is the objective of a point
        it holds); its bound only through ``lower_bound_of`` (None: not a proven bound here)."""
        def seen(incumbent, bound, nodes):
            if self.due():
                lower = None if bound is None else lower_bound_of(bound)
                self.update(None, None if lower is None else max(lower, self.lower_bound or -math.inf),
                            None if nodes is None else nodes_before + nodes)
        return seen


def format_row(row: dict, scale: float = 1.0) -> str:
    """One row of the live table: time, incumbent, lower bound, gap (%), nodes ("-": none yet)."""
    def figure(value):
        return f"{value * scale:>15.8g}" if value is not None else f"{'-':>15}"
    gap = row.get("gap")
    gap = ("-" if gap is None else "Large" if gap >= 99.99 else f"{100 * gap:.3f}%")
    return (f"{row['time']:>8.1f}s {figure(row.get('incumbent'))} {figure(row.get('lower_bound'))} "
            f"{gap:>9} {row.get('nodes', 0):>10}")
