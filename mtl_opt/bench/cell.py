"""One benchmark fit in its own process: ``python -m mtl_opt.bench.cell`` (JSON in on stdin).

The input is ``{"instance": path, "params": {...}, "time_limit": seconds,
"threads": n or None, "parent": pid}`` (``threads`` applies where the instance file
sets none); the last stdout line that starts with ``MARKER`` carries the outcome as JSON.
The cell dies with its parent (``die_with_parent``).  Running each fit in a fresh process
lets the parent kill it at a hard wall-clock limit, and makes the process's peak resident
set size (``getrusage``) the memory of this one fit, native solver memory included.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time

MARKER = "MTL_OPT_BENCH_RESULT "
#: prctl option: the signal this process gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """On Linux, be killed (SIGKILL) when the parent dies, so that a killed ``mtl-opt bench``
    leaves no orphaned fit running; elsewhere nothing happens."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fit(payload: dict) -> dict:
    """Load the instance, apply the solver's parameters, fit once; the numbers of the outcome."""
    from ..instance import load_instance

    instance = load_instance(payload["instance"])
    if payload.get("data_path"):   # a shipped cell: its data file's copy (``runner.shipped``)
        instance.data_spec["path"] = payload["data_path"]
    data = instance.load_data()
    threads = payload.get("threads") if instance.options.threads is None else None
    estimator = instance.estimator(time_limit=payload["time_limit"], threads=threads)
    estimator.set_params(**payload["params"])
    before = peak_rss_mb()
    start = time.perf_counter()
    result = instance.fit(estimator, data).result_
    elapsed = time.perf_counter() - start
    peak = peak_rss_mb()
    return {"status": result.status, "objective": result.objective, "lower_bound": result.lower_bound,
            "time_s": elapsed, "peak_mem_mb": peak, "solve_mem_mb": peak - before,
            "solver_version": f"{result.solver} {result.solver_version}".strip(),
            "trace": trace(result.log)}


def trace(log: list) -> list:
    """(time, lower bound, incumbent) per logged row (``solvers.progress``), where it has all three."""
    keys = ("time", "lower_bound", "incumbent")
    return [[row[k] for k in keys] for row in log
            if all(isinstance(row.get(k), (int, float)) for k in keys)]


def main() -> int:
    try:
        payload = json.loads(sys.stdin.read())
        die_with_parent(payload["parent"])
        outcome = fit(payload)
    except Exception as exc:  # recorded as a crashed cell; the benchmark goes on
        outcome = {"status": "crashed", "error": f"{type(exc).__name__}: {exc}"}
    print(MARKER + json.dumps(outcome), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
