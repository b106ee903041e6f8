"""Whole-fit wall time with BLAS on the machine's threads against one thread for small tasks
(``mtl_opt.resources.blas_for``), default estimators, the machine's default BLAS threads:

    python benchmarks/blas_threads.py            # medians of 6: blocks of 3 fits, rules alternated

"before" is the rule switched off (``SMALL_TASKS = 0``: every fit on the threads it was given),
in the same process: blocks of 3 fits under one rule (a user's repeated fits; a block's history
matters, as BLAS threads left spinning by the last fit are what costs), before, now, before, now.  Run without OPENBLAS_NUM_THREADS, which would hide both.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np

from mtl_opt import resources
from mtl_opt.estimators import ARMUL, MOLAR
from mtl_opt.synthetic import armul_simulation, sparse_heterogeneity

CASES = [  # (label, data, estimator)
    ("MOLAR, 30 tasks of 500 x 50", lambda: sparse_heterogeneity(d=50, M=30, n=500, s=20, sigma=0.1, seed=0),
     lambda: MOLAR(fit_intercept=False)),
    ("MOLAR, 30 tasks of 5,000 x 300 (the paper's)",
     lambda: sparse_heterogeneity(d=300, M=30, n=5000, s=20, sigma=0.1, seed=0), lambda: MOLAR(fit_intercept=False)),
    ("MOLAR, 5 tasks of 20,000 x 1,000 (above the line)",
     lambda: sparse_heterogeneity(d=1000, M=5, n=20000, s=20, sigma=0.1, seed=0), lambda: MOLAR(fit_intercept=False)),
    ("ARMUL vanilla, 30 tasks of 200 x 50", lambda: armul_simulation("vanilla", m=30, n=200, d=50, seed=0),
     lambda: ARMUL()),
    ("ARMUL low-rank K = 3, 30 tasks of 200 x 50", lambda: armul_simulation("lowrank", m=30, n=200, d=50, seed=0),
     lambda: ARMUL(structure="lowrank", n_components=3)),
]


def main() -> None:
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}\n")
    print("| fit | before (s) | now (s) | before / now |\n|---|---|---|---|")
    line = resources.SMALL_TASKS
    for label, make, estimator in CASES:
        data = make().data
        times: dict[float, list[float]] = {0.0: [], line: []}
        for _ in range(2):
            for rule in times:
                resources.SMALL_TASKS = rule
                for _ in range(3):
                    start = time.perf_counter()
                    estimator().fit(data)
                    times[rule].append(time.perf_counter() - start)
        resources.SMALL_TASKS = line
        before, now = np.median(times[0.0]), np.median(times[line])
        print(f"| {label} | {before:.3f} | {now:.3f} | {before / now:.2f} |", flush=True)


if __name__ == "__main__":
    main()
