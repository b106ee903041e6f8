"""The ``mtl-opt`` command: solve, validate and inspect instance files.

Errors become one line on stderr and an exit code (``ExitCode``, listed in
``mtl-opt --help``); a traceback means a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from . import __version__, interrupts
from .argtypes import finite_float
from .bandits import command as bandit_command
from .bench import command as bench_command
from .collab import command as collab_command
from .errors import (CapabilityError, InstanceFileError, InvalidDataError, InvalidParameterError,
                     MTLOptError, SolverError, SolverUnavailableError)
from .outputs import STDOUT, atomic_path, output_file, stdout_to_stderr


class ExitCode(enum.IntEnum):
    #: an estimate was produced
    OK = 0
    #: a bug in mtl_opt
    INTERNAL_ERROR = 1
    #: the instance, data or parameters are invalid
    INVALID_INPUT = 2
    #: the solver failed or returned no solution
    SOLVER_FAILURE = 3
    #: interrupted (Ctrl-C); finished work is kept
    INTERRUPTED = 130
    #: terminated (SIGTERM); finished work is kept
    TERMINATED = 143
    #: the reader of standard output closed it (``mtl-opt ... | head``): the run ends there,
    #: 128 + SIGPIPE as a shell tool's (outputs are atomic: written whole or not at all)
    BROKEN_PIPE = 141


ERROR_CODES = {
    InstanceFileError: ExitCode.INVALID_INPUT,
    InvalidDataError: ExitCode.INVALID_INPUT,
    InvalidParameterError: ExitCode.INVALID_INPUT,
    CapabilityError: ExitCode.INVALID_INPUT,
    SolverUnavailableError: ExitCode.SOLVER_FAILURE,
    SolverError: ExitCode.SOLVER_FAILURE,
    MTLOptError: ExitCode.INVALID_INPUT,
}

EPILOG = """exit codes:
  0  an estimate was produced (the report says whether its gap is proven)
  1  internal error (a bug in mtl-opt)
  2  invalid input: instance file, data, parameters, or a backend that cannot do the job
  3  solver failure: the solver is missing, failed, or found no solution
  130  interrupted (Ctrl-C): the work stops, child processes are stopped, finished work is
       kept (solve writes the best estimate and the bound proven by then, status
       'interrupted'); a second Ctrl-C exits at once
  143  terminated (SIGTERM): the same

output paths are checked before any work: missing directories are created; an
input file, a device or an unwritable place is an error (exit 2).  A directory
given for a file (one that exists, or a path ending in '/') receives the file
under its default name: solve --out results/ writes results/<instance>.json.
'-' is standard output where the output is one document (solve's JSON, export's
model; the messages then go to stderr), and an error elsewhere (bench --out,
--plot).  Files are written atomically: a failed write leaves the previous file
intact."""


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error shape: one line on stderr and exit 2 (no usage dump).

    Subcommand parsers are made from the same class, so every flag error is one line too."""

    def error(self, message):
        self.exit(ExitCode.INVALID_INPUT,
                  f"mtl-opt: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mtl-opt", description="Multi-task learning estimators with certified optimality gaps.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mtl-opt {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    solve = commands.add_parser("solve", aliases=["demo"],
                                help="solve an instance file and write a JSON result ('demo NAME': "
                                     "a demo shipped with mtl_opt; 'demo': list them)",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    solve.add_argument("instance", type=Path, nargs="?",
                       help="instance file (TOML); after 'demo', a shipped demo's name")
    solve.add_argument("--backend", help="override [solve] backend (names: `mtl-opt solvers`)")
    solve.add_argument("--algorithm", help="override [method] algorithm, e.g. 'exact' for a certified "
                                           "solve (sparse_mtl: the exact method that suits the instance)")
    solve.add_argument("--time-limit", type=finite_float, help="override [solve] time_limit (seconds)")
    solve.add_argument("--rel-gap", type=finite_float, help="override [solve] rel_gap")
    solve.add_argument("--out", metavar="PATH",
                       help="where to write the JSON result (default: out/<instance name>.json); a "
                            "directory (existing, or PATH ending in '/') gets <instance name>.json "
                            "inside it; '-' writes the JSON to standard output, and the summary "
                            "to stderr")
    solve.add_argument("--quiet", action="store_true", help="print nothing but errors")
    solve.add_argument("-v", "--verbose", action="store_true",
                       help="print the solver's progress as it goes: a row (time, incumbent, lower "
                            "bound, gap, nodes) at least every second (sets [solve] verbose)")

    validate = commands.add_parser("validate", help="check an instance file and its data without solving")
    validate.add_argument("instance", type=Path)
    validate.add_argument("--out", metavar="PATH",
                          help="also check that 'solve --out PATH' could write its result, by "
                               "solve's rule: a directory (existing, or PATH ending in '/') gets "
                               "<instance name>.json; '-' (standard output) is accepted")

    export = commands.add_parser("export", help="write a sparse_mtl instance's MIQP or OA master as LP/MPS")
    export.add_argument("instance", type=Path)
    export.add_argument("--format", choices=["lp", "mps"], default="mps",
                        help="mps (default) or lp (the master only: SCIP's LP reader rejects the MIQP's)")
    export.add_argument("--model", choices=["miqp", "master"], default="miqp",
                        help="the Big-M MIQP, or the outer-approximation master with its first cuts")
    export.add_argument("--out", metavar="PATH",
                        help="output file (default: out/<instance>.<model>.<format>); a directory "
                             "(existing, or PATH ending in '/') gets <instance>.<model>.<format> "
                             "inside it; '-' writes the model to standard output, and the "
                             "message to stderr")

    commands.add_parser("solvers", help="list solver backends, versions and capabilities")
    collab_command.add_parser(commands)
    bandit_command.add_parser(commands)
    bench_command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``mtl-opt ARGV``; the exit code.  Ctrl-C and SIGTERM: ``mtl_opt.interrupts``."""
    with interrupts.cli_signals():
        return _main(argv)


def run() -> None:
    """The console script: ``main``, then exit with its code, whatever signal comes while the
    interpreter shuts down (``interrupts.exit_on_signal``)."""
    with interrupts.cli_signals():
        code = _main(None)
        interrupts.exit_on_signal(code)
    sys.exit(code)


def _main(argv: list[str] | None) -> int:
    try:   # a command imports what it needs when it runs, inside this try: Ctrl-C is exit 130
        args = build_parser().parse_args(argv)
        commands = {"solve": _solve, "demo": _solve, "validate": _validate, "export": _export,
                    "solvers": _solvers, "collab": collab_command.run, "bandit": bandit_command.run,
                    "bench": bench_command.run}
        shown = set()

        def warning_line(message, *_):   # the CLI's shape: one line on stderr, each text once
            if str(message) not in shown:
                shown.add(str(message))
                print(f"mtl-opt: warning: {message}", file=sys.stderr)

        with warnings.catch_warnings():
            warnings.showwarning = warning_line
            return commands[args.command](args)
    except MTLOptError as exc:
        print(f"mtl-opt: error: {exc}", file=sys.stderr)
        return int(next(ERROR_CODES[cls] for cls in type(exc).__mro__ if cls in ERROR_CODES))
    except BrokenPipeError:   # Python's recipe: no more output, no traceback at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    except KeyboardInterrupt as exc:  # a command that keeps finished work says where in exc
        code = interrupts.exit_code()
        what = "terminated" if code == ExitCode.TERMINATED else "interrupted"
        print(f"mtl-opt: {what}{f'; {exc}' if str(exc) else ''}", file=sys.stderr)
        return code


def _solve(args) -> int:
    from .instance import load_instance

    if args.command == "demo":
        if args.instance is None:
            return _list_demos()
        args.instance = _demo_file(str(args.instance))
    elif args.instance is None:
        raise InvalidParameterError("solve: an instance file is required (or solve a shipped demo: "
                                    "mtl-opt demo NAME; mtl-opt demo lists them).")
    instance = load_instance(args.instance)
    out = output_file(args.out, f"{args.instance.stem}.json", inputs=instance.files, stdout=True)
    # --out -: standard output holds the JSON alone; whatever else is printed goes to stderr
    aside = stdout_to_stderr() if out is STDOUT else contextlib.nullcontext()
    try:
        with aside, _progress_table() as table:
            data = instance.load_data()
            from .estimators import ESTIMATORS

            # --verbose where there is a solver to watch (a method without one has no [solve] options)
            verbose = args.verbose and "solve_options" in ESTIMATORS[instance.method].param_names()
            estimator = instance.estimator(backend=args.backend, algorithm=args.algorithm,
                                           time_limit=args.time_limit, rel_gap=args.rel_gap,
                                           verbose=verbose or None)
            instance.check(estimator, data)  # refusals before any output, as in validate (fit takes its plan)
            if not args.quiet:
                params = {**instance.params, **({"algorithm": args.algorithm} if args.algorithm else {})}
                changed = ", ".join(f"{k}={v!r}" for k, v in params.items()) or "defaults"
                print(f"mtl-opt {__version__}  instance {args.instance}")
                print(f"{instance.method}  K={data.n_tasks} p={data.n_features} n={data.n_total}  "
                      f"parameters: {changed}\n")
            result = instance.fit(estimator, data).result_
    except interrupts.FitInterrupted as stop:
        if table.broken:   # stopped by the closed pipe: no result, the shell's 141
            raise BrokenPipeError from None
        if stop.result is None:
            raise KeyboardInterrupt(f"{stop}; no result written") from None
        stop.result.to_json(out)
        gap = stop.result.rel_gap
        raise KeyboardInterrupt(
            f"the best estimate and the bound proven by then ("
            f"{'no bound' if gap is None else f'gap {100 * gap:.4g}%'}) were written to {out}") from None
    result.to_json(out)
    if not args.quiet:
        report = sys.stderr if out is STDOUT else sys.stdout
        print(f"{chr(10) if verbose else ''}{result.summary()}", file=report)
        print(f"  {'Result':<12} {out}", file=report)
    return ExitCode.OK


class _TableHandler(logging.StreamHandler):
    """The live table's handler: each record's message alone.  A closed pipe (``-v | head``)
    ends the table and stops the fit softly, as Ctrl-C does, and the command then ends with
    ``ExitCode.BROKEN_PIPE``: raised here, often inside a solver's callback, BrokenPipeError
    crashed HiGHS (exit 139)."""

    broken = False

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], BrokenPipeError):
            self.broken = True
            self.stream = open(os.devnull, "w")   # the rows still to come go nowhere
            interrupts.request()
            return
        super().handleError(record)


@contextlib.contextmanager
def _progress_table() -> Iterator[_TableHandler]:
    """``solve -v``'s live table: mtl-opt is the application, so it configures the
    ``mtl_opt.progress`` logger for the command (restored after it): INFO, to ``_TableHandler``
    on standard output as it is now (stderr under ``--out -``), not passed to the root."""
    from .solvers.progress import LOGGER

    handler = _TableHandler(sys.stdout)
    saved = LOGGER.level, LOGGER.propagate
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    LOGGER.addHandler(handler)
    try:
        yield handler
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(saved[0])
        LOGGER.propagate = saved[1]


def _demo_file(name: str) -> Path:
    """The shipped file of demo ``name``, when ``solve`` runs it (an error naming the command that
    runs a bandit or collab experiment)."""
    from . import datasets

    path, command = datasets.path(name), datasets.command(name)
    if command != "solve":
        raise InvalidParameterError(f"demo {name!r} is a {command} experiment: run it with "
                                    f"mtl-opt {command} {path}")
    return path


def _list_demos() -> int:
    from . import datasets

    print(f"demos shipped with mtl_opt (in {datasets.folder()}):")
    for name in datasets.names():
        command = datasets.command(name)
        run = f"demo {name}" if command == "solve" else f"{command} {datasets.path(name)}"
        print(f"  {name:<22} mtl-opt {run}")
    return ExitCode.OK


def _validate(args) -> int:
    from .instance import load_instance

    instance = load_instance(args.instance)
    if args.out is not None:   # where solve --out OUT would write, by the same rule
        output_file(args.out, f"{args.instance.stem}.json", inputs=instance.files, stdout=True)
    data = instance.load_data()
    instance.check(instance.estimator(), data)
    print(f"{args.instance}: valid ({instance.method}, K={data.n_tasks} tasks, "
          f"p={data.n_features} features, n={data.n_total} observations)")
    return ExitCode.OK


def _export(args) -> int:
    from .instance import load_instance

    instance = load_instance(args.instance)
    estimator = instance.estimator()
    if instance.method != "sparse_mtl":
        raise InstanceFileError(f"{args.instance}: export needs a sparse_mtl instance; "
                                f"method {instance.method!r} has no exact model.")
    if (args.model, args.format) == ("miqp", "lp"):
        raise InvalidParameterError(
            "the MIQP cannot be exported as LP: Pyomo writes its quadratic terms as 'x ^ 2', which "
            "SCIP's LP reader rejects; use --format mps (or --model master for LP).")
    out = output_file(args.out, f"{args.instance.stem}.{args.model}.{args.format}",
                      inputs=instance.files, stdout=True)
    if "weight" in instance.data_spec:
        raise InvalidParameterError(
            f"export writes the model of the unweighted data; {args.instance} names a weight "
            f"column: remove it from [data] to export.")
    pyomo_format = {"lp": "cpxlp", "mps": "mps"}[args.format]
    with atomic_path(out) as temporary:   # STDOUT: copied there after the block, on its own
        with stdout_to_stderr() if out is STDOUT else contextlib.nullcontext():
            model = estimator.pyomo_model(instance.load_data(), kind=args.model, normalized=False).model
            model.write(str(temporary), format=pyomo_format, io_options={"symbolic_solver_labels": True})
    print(f"wrote {out} ({args.model}, {args.format.upper()})",
          file=sys.stderr if out is STDOUT else sys.stdout)
    return ExitCode.OK


def _solvers(args) -> int:
    from .solvers.backends import CAPABILITIES, list_backends

    header = f"{'backend':<8} {'available':<10} {'version':<25} " + " ".join(f"{c:<9}" for c in CAPABILITIES)
    print(header)
    rows = list_backends()
    for row in rows:
        caps = " ".join(f"{'yes' if row[c] else 'no':<9}" for c in CAPABILITIES)
        print(f"{row['name']:<8} {'yes' if row['available'] else 'no':<10} {row['version'] or '-':<25} {caps}")
    for row in rows:
        if row["reason"]:
            print(f"  {row['name']}: not available: {row['reason']}")
    return ExitCode.OK


if __name__ == "__main__":
    run()
