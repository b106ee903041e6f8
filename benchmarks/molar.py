"""MOLAR against the paper's baselines (OLS, LASSO, Pool, RM, ML): Figure 2 and its middle point.

    python benchmarks/molar.py            # headline point (10 seeds) + Figure 2 on a reduced grid
    python benchmarks/molar.py --quick    # a small version (d=50) in well under a minute

1. Headline, the middle point of the paper's Figure 2 (d=300, s=20, M=30,
   n=5000, sigma=0.1, 10 seeds): averaged l1 error (mean +- sd over seeds) and
   fit time of every method, MOLAR's time split into OLS / weighted median /
   thresholding for the closed-form median and the LP on each backend (with the
   median problem's objective, bound and gap), and the check
   MOLAR < RM < OLS on the mean error, printed as PASS or FAIL.
2. Figure 2's three panels on a reduced grid (vary n at s=20, M=30; vary M
   at s=20, n=5000; vary s at M=30, n=5000), fewer seeds: a table of mean
   error and mean fit time per method and grid point, and
   benchmarks/molar_figure2.png.

fit_intercept=False, as in the paper's model.  Tuning constants as in
Appendix J.1 (LASSO c_lambda = 0.005, RM c_lambda = 0.035, zeta = eta = 0.1;
MOLAR hard thresholding, c_gamma = 1 i.e. gamma_m = sqrt(ln(min(M, d))) sigma_m,
sigma_m estimated); ML uses RM's c_lambda.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mtl_opt.estimators import (
    MOLAR,
    MedianLasso,
    PerTaskLasso,
    PerTaskOLS,
    PooledOLS,
    RobustMultitask,
)
from mtl_opt.plotting import pyplot
from mtl_opt.solvers.backends import get_backend
from mtl_opt.synthetic import sparse_heterogeneity

#: The paper's six methods, in the order of its legend.
METHODS = {
    "OLS": lambda: PerTaskOLS(fit_intercept=False),
    "LASSO": lambda: PerTaskLasso(fit_intercept=False),
    "Pool": lambda: PooledOLS(fit_intercept=False),
    "RM": lambda: RobustMultitask(fit_intercept=False),
    "ML": lambda: MedianLasso(fit_intercept=False),
    "MOLAR": lambda: MOLAR(fit_intercept=False),
}
FIGURE = Path(__file__).with_name("molar_figure2.png")


def l1_error(coef, truth):
    return float(np.abs(coef - truth).sum(axis=1).mean())


def run(methods, d, M, n, s, sigma, seeds):
    """{label: (errors, times)} over seeds for the (label, factory) pairs in ``methods``."""
    out = {label: ([], []) for label in methods}
    for seed in range(seeds):
        problem = sparse_heterogeneity(d=d, M=M, n=n, s=s, sigma=sigma, seed=seed)
        for label, make in methods.items():
            result = make().fit(problem.data).result_
            out[label][0].append(l1_error(result.coef, problem.coef))
            out[label][1].append(result)
    return out


def headline(args, backends):
    """The middle point of Figure 2, every method, with MOLAR's stage timings and certificates."""
    methods = dict(METHODS)
    methods["MOLAR soft"] = lambda: MOLAR(threshold="soft", fit_intercept=False)
    for backend in backends:
        methods[f"MOLAR hard, LP {backend}"] = lambda b=backend: MOLAR(algorithm="lp", backend=b,
                                                                       fit_intercept=False)
    start = time.perf_counter()
    out = run(methods, args.d, args.M, args.n, args.s, args.sigma, args.seeds)
    print(f"## Headline: d={args.d}, s={args.s}, M={args.M}, n={args.n}, sigma={args.sigma}, "
          f"{args.seeds} seeds ({time.perf_counter() - start:.0f} s)\n")
    print("| method | averaged l1 error (mean ± sd) | fit time, median (s) |")
    print("|---|---|---|")
    for label, (errors, results) in out.items():
        sd = np.std(errors, ddof=1) if len(errors) > 1 else 0.0
        print(f"| {label} | {np.mean(errors):.4f} ± {sd:.4f} | "
              f"{np.median([r.wall_time for r in results]):.3f} |")
    print("\n| MOLAR variant | OLS (ms) | median (ms) | threshold (ms) | median objective | "
          "lower bound | max rel gap | statuses |")
    print("|---|---|---|---|---|---|---|---|")
    for label, (_, results) in out.items():
        if not label.startswith("MOLAR"):
            continue
        stages = 1e3 * np.median([[r["time"] for r in res.log if "stage" in r] for res in results], axis=0)
        print(f"| {label} | {stages[0]:.1f} | {stages[1]:.2f} | {stages[2]:.2f} | "
              f"{np.median([r.objective for r in results]):.6g} | "
              f"{np.median([r.lower_bound for r in results]):.6g} | "
              f"{max(r.rel_gap for r in results):.2e} | "
              f"{', '.join(sorted({r.status for r in results}))} |")
    mean = {label: np.mean(out[label][0]) for label in ("MOLAR", "RM", "OLS")}
    verdict = "PASS" if mean["MOLAR"] < mean["RM"] < mean["OLS"] else "FAIL"
    print(f"\nheadline check MOLAR < RM < OLS (mean averaged l1 error): MOLAR {mean['MOLAR']:.4f}, "
          f"RM {mean['RM']:.4f}, OLS {mean['OLS']:.4f} -> {verdict}\n")
    return verdict


def panels(args):
    """Figure 2's three panels: {panel: (x name, grid values, {label: [(mean, se, time)]})}."""
    base = {"n": args.n, "M": args.M, "s": args.s}
    grids = {"n": args.grid_n, "M": args.grid_M, "s": args.grid_s}
    cache, out = {}, {}
    for axis, values in grids.items():
        rows = {label: [] for label in METHODS}
        for value in values:
            point = {**base, axis: value}
            key = (point["n"], point["M"], point["s"])
            if key not in cache:
                start = time.perf_counter()
                cache[key] = run(METHODS, args.d, point["M"], point["n"], point["s"], args.sigma,
                                 args.grid_seeds)
                print(f"  grid n={key[0]} M={key[1]} s={key[2]} done in "
                      f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
            for label, (errors, results) in cache[key].items():
                rows[label].append((np.mean(errors), np.std(errors, ddof=1) / np.sqrt(len(errors)),
                                    np.mean([r.wall_time for r in results])))
        out[axis] = (values, rows)
    return out


def print_panels(args, out):
    print(f"## Figure 2, reduced grid: d={args.d}, sigma={args.sigma}, {args.grid_seeds} seeds per "
          f"point; base point n={args.n}, M={args.M}, s={args.s}\n")
    print("averaged l1 error, mean over seeds (mean fit time in s)\n")
    for axis, (values, rows) in out.items():
        print(f"| {axis} | " + " | ".join(METHODS) + " |")
        print("|---" * (len(METHODS) + 1) + "|")
        for i, value in enumerate(values):
            cells = [f"{rows[label][i][0]:.3f} ({rows[label][i][2]:.2f})" for label in METHODS]
            print(f"| {value} | " + " | ".join(cells) + " |")
        print()


def plot_panels(args, out, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    titles = {"n": f"s={args.s}, M={args.M}, varying n", "M": f"s={args.s}, n={args.n}, varying M",
              "s": f"M={args.M}, n={args.n}, varying s"}
    for ax, (axis, (values, rows)) in zip(axes, out.items()):
        for label in METHODS:
            mean, se, _ = zip(*rows[label])
            ax.errorbar(values, mean, yerr=se, marker="o", ms=3, capsize=2, label=label)
        ax.set_xlabel(axis)
        ax.set_yscale("log")
        ax.set_title(titles[axis], fontsize=10)
    axes[0].set_ylabel("averaged l1 error")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"MOLAR Figure 2 (reduced grid): d={args.d}, sigma={args.sigma}, "
                 f"{args.grid_seeds} seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure written to {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="d=50, n=1000, 3 headline seeds, 2 grid seeds, a smaller grid")
    parser.add_argument("--seeds", type=int, default=None, help="headline seeds (default 10)")
    parser.add_argument("--no-figure", action="store_true", help="only the headline point")
    parser.add_argument("--figure", type=Path, default=None,
                        help=f"PNG path (default {FIGURE.name} here; --quick: in the temp directory)")
    args = parser.parse_args(argv)
    if args.quick:
        args.d, args.M, args.n, args.s, args.seeds = 50, 30, 1000, 5, args.seeds or 3
        args.grid_n, args.grid_M, args.grid_s, args.grid_seeds = [200, 1000], [10, 30], [2, 5, 20], 2
    else:
        args.d, args.M, args.n, args.s, args.seeds = 300, 30, 5000, 20, args.seeds or 10
        args.grid_n, args.grid_M = [1000, 2000, 5000, 10000], [5, 10, 20, 30, 50]
        args.grid_s, args.grid_seeds = [5, 20, 50, 100, 200], 3
    args.sigma = 0.1
    backends = [b for b in ("highs", "scip") if get_backend(b).available()]
    print(f"mtl_opt MOLAR benchmark; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}\n")
    verdict = headline(args, backends)
    if not args.no_figure:
        out = panels(args)
        print_panels(args, out)
        default = Path(tempfile.gettempdir()) / "molar_figure2_quick.png" if args.quick else FIGURE
        plot_panels(args, out, args.figure or default)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
