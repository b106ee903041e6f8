"""mtl-opt's ``main`` run inside the test process, returning what ``subprocess.run`` would.

A fresh interpreter spends over a second importing numpy, scipy and Pyomo on every call, about a
minute of the suite over all CLI tests.  Only tests that need a real process (Ctrl-C, concurrent
runs, the console script as a user starts it) start one.
"""

import contextlib
import io
import os
import subprocess

from mtl_opt.cli import main


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``mtl-opt ARGS`` in this process: exit code, stdout and stderr (from ``cwd`` if given)."""
    argv = [str(a) for a in args]
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as stop:   # argparse's flag errors and --help
                code = stop.code
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["mtl-opt", *argv], int(code or 0), out.getvalue(), err.getvalue())
