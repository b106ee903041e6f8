"""AffPCL against independent learning and federated baselines (paper Section 7 / Appendix B).

    python benchmarks/affpcl.py               # full run: 10 runs, t = 60 and t = 2000, plots
    python benchmarks/affpcl.py --runs 2      # a quick look

Synthetic system: n = 20, d = 5, (delta_env, delta_obj) in {(0,0), (.05,.05), (.2,.2), (.5,.5)},
eps_A = 1, eps_b = 0.5.  Digits system: n = 10 agents, d = 10 (intercept + 9 whitened PCA
components), delta_obj in {0, .2, .6, 1}, shared environment.  Horizons: t = 60 with
alpha = 0.01 (the paper's figure) and t = 2000 with alpha = ln T / (lambda T)
(Proposition 1).  Tables give mean MSE over agents (MSE^0) at the final step, averaged
over runs, and the MSE of the agent closest to the center; then the criteria of issue 7;
then the rate (slope of log MSE^0 against log T for T in 250..2000 with alpha = ln T/(lambda T));
then asynchronous density ratio estimation on a finite state space.  The exact squared
bias of E x_t (shared by independent learning and AffPCL) shows how much of the
MSE is the deterministic decay of the initial error rather than variance.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from mtl_opt.collab import (AffPCL, digits_system, gaussian_system, make_method, METHODS,
                            random_finite_system, run_methods, step_size)
from mtl_opt.collab.algorithms import IFCA
from mtl_opt.collab.runner import plot_curves
from mtl_opt.plotting import pyplot

HERE = Path(__file__).resolve().parent
SYNTHETIC = [(0.0, 0.0), (0.05, 0.05), (0.2, 0.2), (0.5, 0.5)]
DIGITS = [0.0, 0.2, 0.6, 1.0]
PAPER = {"pfedme": {"lam": 15.0}, "ditto": {"lam": 15.0}, "ifca": {"n_clusters": 10}}


def methods():
    out = {name: make_method(name, **PAPER.get(name, {})) for name in METHODS}
    out["ifca (init 0.01)"] = IFCA(n_clusters=10, init_scale=0.01)  # control: IFCA's random start
    return out


def horizons(system):
    lam = system.strong_monotonicity()
    return {"t=60, alpha=0.01": (60, 0.01),
            "t=2000, alpha=ln T/(lambda T)": (2000, step_size("log", horizon=2000, lam=lam))}


def squared_bias(system, T, alpha):
    """mean_i ||E x_T^i - x_*^i||^2 = mean_i ||(I - alpha A_bar^i)^T x_*^i||^2 (x_0 = 0), exact.

    Independent learning and AffPCL share it: both directions are unbiased for
    A_bar^i x^i - b_bar^i, so E x_t^i follows the same deterministic recursion.
    """
    decay = np.linalg.matrix_power(np.eye(system.dim) - alpha * system.A_bar, T)
    return float((np.einsum("iab,ib->ia", decay, system.solutions()) ** 2).sum(axis=1).mean())


def run_grid(build, labels, runs):
    """label -> horizon name -> CollabResult."""
    results = {}
    for label in labels:
        system = build(label)
        results[label] = {}
        for name, (T, alpha) in horizons(system).items():
            start = time.perf_counter()
            result = run_methods(system, methods(), horizon=T, alpha=alpha, runs=runs, seed=0,
                                 progress=False)
            result.info["bias2"] = squared_bias(system, T, alpha)
            results[label][name] = result
            print(f"  {label} {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return results


def print_tables(title, results):
    labels = list(results)
    for horizon in next(iter(results.values())):
        res = {lab: results[lab][horizon] for lab in labels}
        print(f"\n{title}, {horizon}; cell = mean MSE over agents / MSE of the center agent\n")
        print("| method | " + " | ".join(labels) + " |")
        print("|---" * (len(labels) + 1) + "|")
        for m in res[labels[0]].methods:
            cells = [res[lab].final()[m] for lab in labels]
            print(f"| {m} | " + " | ".join(f"{a:.3g} / {c:.3g}" for a, c in cells) + " |")
        print_criteria(res, labels)


def print_criteria(res, labels):
    rows = {"AffPCL / best other method (mean MSE)": [], "AffPCL / FedAvg": [],
            "AffPCL / independent (1/n = %.3f)" % (1 / res[labels[0]].mse.shape[3]): [],
            "AffPCL center agent / independent center agent": []}
    for lab in labels:
        final = res[lab].final()
        aff = final["affpcl"][0]
        best = min(v[0] for k, v in final.items() if k != "affpcl")
        rows["AffPCL / best other method (mean MSE)"].append(aff / best)
        rows["AffPCL / FedAvg"].append(aff / final["fedavg"][0])
        list(rows.values())[2].append(aff / final["independent"][0])
        rows["AffPCL center agent / independent center agent"].append(
            final["affpcl"][1] / final["independent"][1])
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    print("| squared bias of independent and AffPCL (exact) / independent's mean MSE | "
          + " | ".join(f"{res[lab].info['bias2'] / res[lab].final()['independent'][0]:.3f}"
                       for lab in labels) + " |")


def rates(runs):
    """Slope of log MSE^0(T) vs log T with alpha = ln T / (lambda T), synthetic (0.2, 0.2) and (0, 0)."""
    print("\nRate: final MSE^0 for horizon T with alpha = ln T/(lambda T), synthetic system; "
          "slope = least-squares slope of log MSE^0 on log T\n")
    grid = [250, 500, 1000, 2000]
    names = ["independent", "fedavg", "affpcl"]
    print("| setting | method | " + " | ".join(f"T={T}" for T in grid) + " | slope |")
    print("|---" * (len(grid) + 3) + "|")
    for delta in [(0.0, 0.0), (0.2, 0.2)]:
        system = gaussian_system(20, 5, delta_env=delta[0], delta_obj=delta[1], seed=0)
        lam = system.strong_monotonicity()
        mse = {m: [] for m in names}
        for T in grid:
            res = run_methods(system, {m: make_method(m) for m in names}, horizon=T,
                              alpha=step_size("log", horizon=T, lam=lam), runs=runs, seed=1, progress=False)
            for m, (a, _) in res.final().items():
                mse[m].append(a)
        for m in names:
            slope = np.polyfit(np.log(grid), np.log(mse[m]), 1)[0]
            print(f"| {delta} | {m} | " + " | ".join(f"{v:.3g}" for v in mse[m]) + f" | {slope:.2f} |")


def dre(runs):
    print("\nAsynchronous density ratio estimation (finite state space, n=20, d=5, 30 states, "
          "delta_env = delta_obj = 0.3, t=2000, alpha = ln T/(lambda T)); final mean MSE over agents\n")
    system = random_finite_system(20, 5, 30, delta_env=0.3, delta_obj=0.3, seed=0)
    alpha = step_size("log", horizon=2000, lam=system.strong_monotonicity())
    variants = {"independent": make_method("independent"), "fedavg": make_method("fedavg"),
                "affpcl, known ratios": AffPCL(ratios="known"),
                "affpcl, estimated ratios": AffPCL(ratios="estimated"),
                "affpcl, no importance correction": AffPCL(ratios="none")}
    res = run_methods(system, variants, horizon=2000, alpha=alpha, runs=runs, seed=0, progress=False)
    print(res.table())


def save_plots(title, results, path):
    plt = pyplot()
    for horizon in next(iter(results.values())):
        fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.6), sharey=True)
        for ax, (label, res) in zip(axes, results.items()):
            plot_curves(res[horizon], ax, title=f"{label}")
        axes[0].legend(fontsize=6)
        fig.suptitle(f"{title}, {horizon}")
        fig.tight_layout()
        out = path.with_name(f"{path.stem}_t{res[horizon].mse.shape[2] - 1}.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        print(f"plot: {out.relative_to(HERE.parent)}", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"AffPCL benchmark: {args.runs} runs per setting; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")
    synthetic = run_grid(lambda d: gaussian_system(20, 5, delta_env=d[0], delta_obj=d[1], seed=0),
                         SYNTHETIC, args.runs)
    synthetic = {f"({e}, {o})": r for (e, o), r in zip(SYNTHETIC, synthetic.values())}
    print_tables("Synthetic system (delta_env, delta_obj)", synthetic)
    digits = run_grid(lambda d: digits_system(10, 10, delta_obj=d), DIGITS, args.runs)
    digits = {f"delta_obj={d}": r for d, r in digits.items()}
    print_tables("Digits system", digits)
    rates(args.runs)
    dre(args.runs)
    if not args.no_plots:
        save_plots("Synthetic system", synthetic, HERE / "affpcl_synthetic.png")
        save_plots("Digits system", digits, HERE / "affpcl_digits.png")
    print(f"\ntotal time {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
