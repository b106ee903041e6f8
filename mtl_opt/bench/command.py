"""``mtl-opt bench INSTANCES...``: run solvers over instance files, print a table, write results.

``add_parser(subcommands)`` registers the subcommand; ``run(args)`` executes it
and returns an exit code (0), raising ``mtl_opt.errors`` exceptions on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import __version__
from ..argtypes import count, finite_float
from ..limits import MAX_REPEATS

EPILOG = """Every cell (instance x solver x repeat) runs in its own process, killed after
--hard-limit seconds (default 2 x time limit + 30; never below the time limit).
Each finished cell is recorded at once in OUT/results.csv and OUT/results.jsonl,
both rewritten atomically, so an interrupted run leaves them whole; running
again with the same OUT skips the cells already recorded (--fresh starts over,
--retry-crashed runs crashed cells again).  One bench at a time writes to an
OUT (a lock, OUT/.results.lock, released however the run ends): another run on
it exits 2, or with --wait waits for it and then runs only what is missing.
Solvers that do not apply to an instance are recorded as not_applicable.

solvers:"""


def solver_list() -> str:
    """One line per solver name: name, method, what it runs."""
    from .solvers import SOLVERS

    return "\n".join(f"  {s.name:<16} {s.method:<11} {s.description}" for s in SOLVERS.values())


class _Help(argparse.RawDescriptionHelpFormatter):
    """Ends the epilog with the solver list when the help is shown: naming the solvers imports
    every method table, which ``mtl-opt --help`` and the other commands need not wait for."""

    def add_text(self, text):
        super().add_text(f"{text}\n{solver_list()}" if text == EPILOG else text)


def add_parser(subcommands) -> argparse.ArgumentParser:
    """Add the ``bench`` subparser to ``subcommands`` (from ``add_subparsers``)."""
    parser = subcommands.add_parser(
        "bench", help="compare solver backends over instance files (table, CSV/JSON, plots)",
        epilog=EPILOG, formatter_class=_Help)
    parser.add_argument("instances", nargs="*", type=Path, metavar="INSTANCE", help="instance files (TOML)")
    parser.add_argument("--solvers", help="comma-separated solver names (default: all that apply)")
    parser.add_argument("--list-solvers", action="store_true", help="list the solver names and exit")
    parser.add_argument("--time-limit", type=finite_float, default=60.0,
                        help="each solver's own time limit in seconds (default 60)")
    parser.add_argument("--hard-limit", type=finite_float,
                        help="kill a cell after this many seconds (default 2 x time limit + 30; "
                             "at least the time limit)")
    parser.add_argument("--repeats", type=count(MAX_REPEATS), default=1,
                        help=f"runs per instance and solver (default 1, at most {MAX_REPEATS})")
    parser.add_argument("--jobs", type=int, default=1, help="cells run at once on this machine (default 1)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the cells on this Dask scheduler (e.g. tcp://host:8786) instead")
    parser.add_argument("--out", metavar="OUT", default="out/bench",
                        help="directory of results.csv / results.jsonl / plots (default out/bench, "
                             "created if missing); '-' is refused: these are several files")
    parser.add_argument("--wait", action="store_true",
                        help="if another bench is writing to OUT, wait for it to finish, then run "
                             "the cells it did not record (default: exit 2 at once)")
    parser.add_argument("--fresh", action="store_true", help="discard the results already in OUT")
    parser.add_argument("--retry-crashed", action="store_true",
                        help="run the cells recorded as crashed in OUT again")
    parser.add_argument("--plot", action="store_true",
                        help="write OUT/profile.png and OUT/gap_time.png (needs matplotlib)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def run(args) -> int:
    """Run the benchmark grid; print progress, the table and where the results are."""
    from ..errors import InvalidParameterError
    from ..instance import load_instance
    from ..outputs import atomic_path, check_output, output_directory
    from .runner import format_table, run_bench
    from .solvers import resolve

    if args.list_solvers:
        print(solver_list())
        return 0
    if not args.instances:
        raise InvalidParameterError("mtl-opt bench needs at least one instance file.")
    solvers = resolve(None if args.solvers is None else [s.strip() for s in args.solvers.split(",")])
    inputs = [file for path in args.instances for file in load_instance(path).files]
    out = output_directory(args.out, what="bench output directory",
                           why_not_stdout="bench writes several files there (results.csv, "
                                          "results.jsonl, plots)")
    plots = [out / "profile.png", out / "gap_time.png"] if args.plot else []
    for path in [out / "results.csv", out / "results.jsonl", *plots]:
        check_output(path, inputs=inputs)
    if args.plot:
        from ..plotting import new_axes

        new_axes()  # a missing matplotlib is reported before the run, not after it

    def start(total: int):   # the header once every check passed and OUT is ours: the run starts
        print(f"mtl-opt {__version__}  bench: {len(args.instances)} instance(s) x {len(solvers)} "
              f"solver(s) x {args.repeats} repeat(s), time limit {args.time_limit:g} s"
              + (f", scheduler {args.scheduler}" if args.scheduler else f", jobs {args.jobs}"),
              flush=True)
        return cell_progress(total)

    rows = run_bench(args.instances, solvers, time_limit=args.time_limit, repeats=args.repeats,
                     jobs=args.jobs, scheduler=args.scheduler, out=out, hard_limit=args.hard_limit,
                     fresh=args.fresh, retry_crashed=args.retry_crashed, wait=args.wait,
                     progress=None if args.quiet else start,
                     warn=lambda text: print(f"mtl-opt: warning: {text}", file=sys.stderr, flush=True))
    print()
    print(format_table(rows, markdown=args.markdown))
    print(f"\n  Results  {out / 'results.csv'}, {out / 'results.jsonl'}")
    if args.plot:
        from .plots import plot_gap_time, plot_profile

        for draw, path in zip((plot_profile, plot_gap_time), plots):
            with atomic_path(path) as temporary:
                draw(rows, temporary)
        print(f"  Plots    {', '.join(map(str, plots))}")
    return 0


def cell_progress(total: int):
    """A line per finished cell, with N/M and an ETA from the cells' rate so far, and on a terminal
    a tqdm bar below them (``run_bench``'s ``progress``)."""
    import time

    from tqdm import tqdm

    bar = tqdm(total=total, unit="cell", disable=total == 0 or not sys.stderr.isatty(), leave=False)
    start, n_done = time.monotonic(), 0

    def finished(row):
        nonlocal n_done
        n_done += 1
        eta = (time.monotonic() - start) / n_done * (total - n_done)
        bar.update()
        bar.write(f"  [{n_done}/{total}, eta {tqdm.format_interval(eta)}] {Path(row['instance']).stem} / "
                  f"{row['solver']} #{row['repeat']}: {row['status']}"
                  + (f" in {row['time_s']:.3g} s" if row["time_s"] is not None else ""), file=sys.stdout)
        if n_done == total:
            bar.close()
    return finished
