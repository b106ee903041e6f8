"""Sparse multi-task best subset (Behdin et al., arXiv 2212.08697, Section 6): five SparseMTL variants.

    python benchmarks/sparse_mtl.py                          # p=250, K=4, n_k=50, q in {10,14,20}, 20 reps
    python benchmarks/sparse_mtl.py --reps 2 --q 10          # a quick look
    python benchmarks/sparse_mtl.py --plot benchmarks/sparse_mtl.png
    python benchmarks/sparse_mtl.py --reps 0                 # only the speed table

After the CV comparison, a speed table times single fits of every method at
fixed mid-grid hyperparameters (``SPEED_PARAMS``) at the issue's sizes:
p=250, K=4, n_k=50 and p=5000, K=4, n_k=200 (``--speed-reps`` data sets each).

Every replicate draws ``smtl_simulation(p, K, n, s_true=10, q, rho=0.5, tau=1)``
(2n rows per task), splits each task 50/50 into train/test with
``data.train_test_split(0.5, seed)``, and tunes every method by 5-fold
cross-validation on the training half (``mtl_opt.cv.cross_validate``, rule
"min": the grid point of lowest mean validation RMSE; the same folds for all
methods). The refitted best model is scored on the test half: test RMSE
averaged over tasks, coefficient RMSE against the truth, support F1.
SparseMTL runs with standardize=True, fit_intercept=True (BCD heuristic).

Prints markdown tables per q (mean ± sd over replicates, median time of the
refitted best fit and of the whole CV), the hyperparameters CV selected, and
PASS/FAIL lines for the paper's headline: Zbar+L2 beats independent L0L2 on
test RMSE and support F1 when supports overlap (q = 10 and 14).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from importlib.metadata import version

import numpy as np

from mtl_opt import metrics
from mtl_opt.cv import cross_validate
from mtl_opt.estimators.sparse import SparseMTL
from mtl_opt.synthetic import smtl_simulation

S_GRID = [6, 8, 10, 12, 14]
RIDGE_GRID = [1e-2, 1e-1, 1.0, 10.0]
ZBAR_GRID = [1e-2, 5e-2, 2e-1, 1.0]
BBAR_GRID = [1e-1, 1.0, 10.0]

#: Hyperparameters of the speed table's single fits (mid-grid values of each axis).
SPEED_PARAMS = {"s": 10, "lambda_ridge": 0.1, "lambda_zbar": 0.05, "lambda_bbar": 1.0}
#: (p, K, n_k) of the speed table.
SPEED_SIZES = [(250, 4, 50), (5000, 4, 200)]

#: method -> extra grid axes (besides s and lambda_ridge), in path order of the cv module
METHODS = {
    "l0l2": {},
    "cs_l2": {},
    "zbar_l2": {"lambda_zbar": ZBAR_GRID},
    "bbar": {"lambda_bbar": BBAR_GRID},
    "zbar_bbar": {"lambda_zbar": ZBAR_GRID, "lambda_bbar": BBAR_GRID},
}
METRICS = ("test_rmse", "coef_rmse", "f1")
HEADLINE_Q = (10, 14)


def grid_for(method):
    return {"s": S_GRID, "lambda_ridge": RIDGE_GRID, **METHODS[method]}


def n_points(grid):
    return int(np.prod([len(values) for values in grid.values()]))


def run_replicate(args, q, rep, rule):
    """All methods on one simulated data set; returns {method: record}."""
    seed = 1000 * q + rep
    problem = smtl_simulation(p=args.p, K=args.K, n=args.n, s_true=args.s_true, q=q,
                              rho=args.rho, tau=args.tau, seed=seed)
    train, test = problem.data.train_test_split(0.5, seed)
    out = {}
    for method in args.methods:
        template = SparseMTL(variant=method, standardize=True, fit_intercept=True)
        start = time.perf_counter()
        cv = cross_validate(template, grid_for(method), train, n_splits=5, seed=seed, rule=rule,
                            n_jobs=args.n_jobs, progress=False)
        cv_time = time.perf_counter() - start
        model = cv.best_estimator
        out[method] = {
            "test_rmse": metrics.task_rmse(test.ys, model.predict(test)),
            "coef_rmse": metrics.coef_rmse(model.coef_, problem.coef),
            "f1": metrics.support_f1(model.coef_, problem.coef),
            "heterogeneity": metrics.support_heterogeneity(model.coef_),
            "fit_time": model.result_.wall_time,
            "cv_time": cv_time,
            "params": cv.best_params,
        }
    return out


def mean_sd(values):
    values = np.asarray(values, dtype=float)
    sd = values.std(ddof=1) if values.size > 1 else 0.0
    return f"{values.mean():.3f} ± {sd:.3f}"


def fmt_value(v):
    return f"{v:g}"


def print_tables(args, results, rule, elapsed):
    print(f"## sMTL simulation: p={args.p}, K={args.K}, n_k={args.n} train (+{args.n} test) rows "
          f"per task, s*={args.s_true}, rho={args.rho}, tau={args.tau}, q in "
          f"{{{', '.join(map(str, args.q))}}}, {args.reps} replicates\n")
    print(f"Tuning: 5-fold CV on the training half, rule={rule!r}, n_jobs={args.n_jobs}; grids "
          f"s={S_GRID}, lambda_ridge={RIDGE_GRID}, lambda_zbar={ZBAR_GRID} (zbar variants), "
          f"lambda_bbar={BBAR_GRID} (bbar variants); points per method: "
          + ", ".join(f"{m} {n_points(grid_for(m))}" for m in args.methods) + ".\n")
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{platform.system()}; Python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {version('scipy')}, joblib {version('joblib')}, mtl_opt {version('mtl_opt')}. "
          f"Total wall time {elapsed / 60:.1f} min.\n")
    for q in args.q:
        reps = results[q]
        print(f"### q = {q} (s*/q = {args.s_true / q:.2f})\n")
        print("| method | test RMSE | coef RMSE | support F1 | support heterogeneity | "
              "fit time, median (s) | CV time, median (s) |")
        print("|---|---|---|---|---|---|---|")
        for method in args.methods:
            col = {k: [r[method][k] for r in reps] for k in reps[0][method] if k != "params"}
            print(f"| {method} | {mean_sd(col['test_rmse'])} | {mean_sd(col['coef_rmse'])} | "
                  f"{mean_sd(col['f1'])} | {mean_sd(col['heterogeneity'])} | "
                  f"{np.median(col['fit_time']):.3f} | {np.median(col['cv_time']):.2f} |")
        print()
        print("| method | selected hyperparameters (value: count over replicates) |")
        print("|---|---|")
        for method in args.methods:
            names = list(grid_for(method))
            cells = []
            for name in names:
                counts = Counter(r[method]["params"][name] for r in reps)
                cells.append(f"{name} " + ", ".join(f"{fmt_value(v)}:{c}" for v, c in sorted(counts.items())))
            print(f"| {method} | {'; '.join(cells)} |")
        print()
    if "l0l2" in args.methods and "zbar_l2" in args.methods:
        print("### Headline check: zbar_l2 vs l0l2 (means over replicates)\n")
        for q in [q for q in HEADLINE_Q if q in args.q]:
            reps = results[q]
            for key, label, better in (("test_rmse", "test RMSE", np.less),
                                       ("f1", "support F1", np.greater)):
                z = np.array([r["zbar_l2"][key] for r in reps])
                l0 = np.array([r["l0l2"][key] for r in reps])
                ok = bool(better(z.mean(), l0.mean()))
                wins = int(np.sum(better(z, l0)))
                print(f"{'PASS' if ok else 'FAIL'}: q={q} {label}: zbar_l2 {z.mean():.3f} vs l0l2 "
                      f"{l0.mean():.3f} (zbar_l2 better in {wins}/{len(reps)} replicates)")
        print()


def speed_table(args):
    """Median wall time of single fits at SPEED_SIZES (training halves of fresh simulations)."""
    print(f"### Single-fit speed: {args.speed_reps} data sets per size, q=14, hyperparameters "
          f"{SPEED_PARAMS} (the penalties a method has), standardize and intercept on\n")
    print("| p | K | n_k | " + " | ".join(f"{m} (s)" for m in args.methods) + " |")
    print("|---|---|---|" + "---|" * len(args.methods))
    for p, K, n in SPEED_SIZES:
        times = {m: [] for m in args.methods}
        for rep in range(args.speed_reps):
            sim = smtl_simulation(p=p, K=K, n=n, s_true=args.s_true, q=14, rho=args.rho,
                                  tau=args.tau, seed=7000 + rep)
            train, _ = sim.data.train_test_split(0.5, rep)
            for method in args.methods:
                params = {k: v for k, v in SPEED_PARAMS.items() if k in grid_for(method)}
                times[method].append(SparseMTL(variant=method, **params).fit(train).result_.wall_time)
            print(f"speed p={p} data set {rep + 1}/{args.speed_reps} done", file=sys.stderr, flush=True)
        print(f"| {p} | {K} | {n} | " + " | ".join(f"{np.median(times[m]):.3f}" for m in args.methods) + " |")
    print()


def plot(args, results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    x = np.array([args.s_true / q for q in args.q])
    for ax, (key, label) in zip(axes, (("test_rmse", "test RMSE"), ("coef_rmse", "coefficient RMSE"),
                                       ("f1", "support F1"))):
        for i, method in enumerate(args.methods):
            vals = [np.array([r[method][key] for r in results[q]]) for q in args.q]
            mean = np.array([v.mean() for v in vals])
            se = np.array([v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0 for v in vals])
            ax.errorbar(x + (i - 2) * 0.006, mean, yerr=se, marker="o", capsize=3, label=method)
        ax.set_xlabel("s*/q (1 = identical supports)")
        ax.set_title(label + " (mean ± se)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"sMTL simulation: p={args.p}, K={args.K}, n_k={args.n}, {args.reps} replicates, "
                 "5-fold CV", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--q", type=int, nargs="+", default=[10, 14, 20])
    parser.add_argument("--p", type=int, default=250)
    parser.add_argument("--K", type=int, default=4)
    parser.add_argument("--n", type=int, default=50, help="training rows per task")
    parser.add_argument("--s-true", type=int, default=10)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--tau", type=float, default=1.0)
    parser.add_argument("--rule", choices=("min", "1se"), default="min")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--speed-reps", type=int, default=5, help="data sets per speed-table size (0: skip)")
    parser.add_argument("--plot", help="write a PNG of the three metrics against s*/q here")
    parser.add_argument("--json", help="write the per-replicate records here")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    results = {}
    for q in args.q:
        results[q] = []
        for rep in range(args.reps):
            t = time.perf_counter()
            results[q].append(run_replicate(args, q, rep, args.rule))
            print(f"q={q} replicate {rep + 1}/{args.reps} done in {time.perf_counter() - t:.1f} s",
                  file=sys.stderr, flush=True)
    if args.reps:
        print_tables(args, results, args.rule, time.perf_counter() - start)
    if args.speed_reps:
        speed_table(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({str(q): r for q, r in results.items()}, fh, indent=1)
    if args.plot and args.reps:
        plot(args, results, args.plot)


if __name__ == "__main__":
    main()
