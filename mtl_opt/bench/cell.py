"""One benchmark fit in its own process: ``python -m mtl_opt.bench.cell`` (JSON in on stdin).

The input is ``{"instance": path, "params": {...}, "time_limit": seconds}``;
the last stdout line that starts with ``MARKER`` carries the outcome as JSON.
Running each fit in a fresh process lets the parent kill it at a hard
wall-clock limit, and makes the process's peak resident set size
(``getrusage``) the memory of this one fit, native solver memory included.
"""

from __future__ import annotations

import json
import resource
import sys
import time

MARKER = "MTL_OPT_BENCH_RESULT "


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fit(payload: dict) -> dict:
    """Load the instance, apply the solver's parameters, fit once; the numbers of the outcome."""
    from ..instance import load_instance

    instance = load_instance(payload["instance"])
    data = instance.load_data()
    estimator = instance.estimator(time_limit=payload["time_limit"])
    estimator.set_params(**payload["params"])
    before = peak_rss_mb()
    start = time.perf_counter()
    result = estimator.fit(data).result_
    elapsed = time.perf_counter() - start
    peak = peak_rss_mb()
    return {"status": result.status, "objective": result.objective, "lower_bound": result.lower_bound,
            "time_s": elapsed, "peak_mem_mb": peak, "solve_mem_mb": peak - before,
            "solver_version": f"{result.solver} {result.solver_version}".strip(),
            "trace": trace(result.log)}


def trace(log: list) -> list:
    """(time, lower bound, incumbent) per logged iteration, where the solver logs all three."""
    keys = ("time", "lower_bound", "incumbent")
    return [[row[k] for k in keys] for row in log
            if all(isinstance(row.get(k), (int, float)) for k in keys)]


def main() -> int:
    try:
        outcome = fit(json.loads(sys.stdin.read()))
    except Exception as exc:  # recorded as a crashed cell; the benchmark goes on
        outcome = {"status": "crashed", "error": f"{type(exc).__name__}: {exc}"}
    print(MARKER + json.dumps(outcome), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
