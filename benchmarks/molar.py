"""MOLAR against per-task and pooled OLS at the middle point of the paper's Figure 2.

    python benchmarks/molar.py                 # d=300, s=20, M=30, n=5000, sigma=0.1, 10 seeds
    python benchmarks/molar.py --seeds 2 --n 1000    # a quick look

Prints two markdown tables: averaged l1 error (mean +- sd over seeds) per
method, and MOLAR's time split into OLS / weighted median / thresholding for
the closed-form median and the LP on each backend, with the median problem's
objective, bound and gap.  fit_intercept=False, as in the paper's model.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from mtl_opt.estimators import MOLAR, PerTaskOLS, PooledOLS
from mtl_opt.solvers.backends import get_backend
from mtl_opt.synthetic import sparse_heterogeneity


def l1_error(coef, truth):
    return float(np.abs(coef - truth).sum(axis=1).mean())


def estimators(backends):
    """(label, estimator) pairs; LP variants are there for their timings and certificates."""
    yield "OLS (per task)", PerTaskOLS(fit_intercept=False)
    yield "Pooled OLS", PooledOLS(fit_intercept=False)
    for threshold in ("hard", "soft"):
        yield f"MOLAR {threshold}", MOLAR(threshold=threshold, fit_intercept=False)
    for backend in backends:
        yield f"MOLAR hard, LP {backend}", MOLAR(median="lp", backend=backend, fit_intercept=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=300)
    parser.add_argument("--s", type=int, default=20)
    parser.add_argument("--M", type=int, default=30)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--sigma", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    backends = [b for b in ("highs", "scip") if get_backend(b).available()]

    errors, times, stages, certs = {}, {}, {}, {}
    for seed in range(args.seeds):
        start = time.perf_counter()
        problem = sparse_heterogeneity(d=args.d, M=args.M, n=args.n, s=args.s,
                                       sigma=args.sigma, seed=seed)
        for label, est in estimators(backends):
            result = est.fit(problem.data).result_
            errors.setdefault(label, []).append(l1_error(result.coef, problem.coef))
            times.setdefault(label, []).append(result.wall_time)
            if label.startswith("MOLAR"):
                stages.setdefault(label, []).append([r["time"] for r in result.log])
                certs.setdefault(label, []).append((result.objective, result.lower_bound,
                                                    result.rel_gap, result.status))
        print(f"seed {seed + 1}/{args.seeds} done in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)

    print(f"MOLAR Figure 2 middle point: d={args.d}, s={args.s}, M={args.M}, n={args.n}, "
          f"sigma={args.sigma}, {args.seeds} seeds; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}\n")
    print("| method | averaged l1 error (mean ± sd) | fit time, median (s) |")
    print("|---|---|---|")
    for label, values in errors.items():
        print(f"| {label} | {np.mean(values):.4f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f} "
              f"| {np.median(times[label]):.3f} |")
    best = min(errors, key=lambda k: np.mean(errors[k]))
    print(f"\nmost accurate: {best}\n")
    print("| MOLAR variant | OLS (ms) | median (ms) | threshold (ms) | median objective | lower bound | "
          "max rel gap | statuses |")
    print("|---|---|---|---|---|---|---|---|")
    for label, split in stages.items():
        med = 1e3 * np.median(np.array(split), axis=0)
        obj, lb, gap, status = zip(*certs[label])
        print(f"| {label} | {med[0]:.1f} | {med[1]:.2f} | {med[2]:.2f} | {np.median(obj):.6g} | "
              f"{np.median(lb):.6g} | {max(gap):.2e} | {', '.join(sorted(set(status)))} |")


if __name__ == "__main__":
    main()
