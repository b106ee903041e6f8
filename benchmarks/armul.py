"""ARMUL's Section 5.1 simulation, and the speed of the certified vanilla solver.

    OPENBLAS_NUM_THREADS=1 python benchmarks/armul.py --jobs 2   # 20 seeds, all settings (long)
    OPENBLAS_NUM_THREADS=1 python benchmarks/armul.py --seeds 3    # a quick look
    OPENBLAS_NUM_THREADS=1 python benchmarks/armul.py --lowrank-gaps --seeds 3   # low-rank bounds only

The matrices are small (d=50): multi-threaded BLAS only adds overhead, and
under load it slows the timings by 10-20x, hence one BLAS thread.

Accuracy: m=30, n=200, d=50, sigma=1, delta in {0, 0.2, 0.5, 1}, epsilon in
{0, 0.2}; each ARMUL structure (K=3 for clustered / low-rank) with c chosen
by 5-fold CV (within tasks, mean over tasks of the validation MSE) over
c in {0.2, ..., 2.0}, lambda_j = c sqrt(d / n_j), against independent
learning, pooling and clustered / low-rank MTL.  Metric: mean over seeds of
max_j ||theta_hat_j - theta_j*||_2 over the inliers S and over all tasks.
No intercept, no standardization (the paper's model).

Low-rank gaps (``--lowrank-gaps``): low-rank ARMUL (K=3, c=1) on each setting's data, its
objective, proven bound and gap (squared loss; the bound is the independent-tasks bound plus the
rank floor, DESIGN.md claim 6).

Speed: vanilla ARMUL at c=1, delta=1, to a proven relative duality gap of
1e-6, against the paper's Algorithm 1 re-implemented here with a fixed 500
steps (step 1/L_j on each v_j, a 1/sum(w_j L_j)-scaled gradient step on the
center; no stopping test), whose excess objective is measured against our
certified optimum; and the time of a 10-value, 5-fold CV.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
from joblib import Parallel, delayed

from mtl_opt.estimators import ARMUL, ClusteredMTL, DataPooling, IndependentTasks, LowRankMTL
from mtl_opt.estimators.armul import cross_validate_armul
from mtl_opt.formulations.armul import ArmulProblem
from mtl_opt.solvers.armul.prox import block_soft_threshold, fista
from mtl_opt.synthetic import armul_simulation
from mtl_opt.deadline import Deadline

PLAIN = {"fit_intercept": False, "standardize": False}
#: Published-code means (100 seeds, epsilon = 0, set S) at delta = 0, 0.2, 0.5, 1.0.
REFERENCE = {
    ("vanilla", "ARMUL"): (.10, .24, .45, .61), ("vanilla", "independent"): (.71,) * 4,
    ("vanilla", "pooling"): (.09, .24, .54, 1.05),
    ("clustered", "ARMUL"): (.19, .30, .47, .62), ("clustered", "clustered MTL"): (.19, .30, .57, 1.07),
    ("lowrank", "ARMUL"): (.31, .36, .49, .62), ("lowrank", "low-rank MTL"): (.31, .37, .59, 1.06),
}


def methods(structure, seed):
    k = None if structure == "vanilla" else 3
    yield "ARMUL", ARMUL(structure, n_components=k, seed=seed, **PLAIN)
    yield "independent", IndependentTasks(**PLAIN)
    yield "pooling", DataPooling(**PLAIN)
    if structure == "clustered":
        yield "clustered MTL", ClusteredMTL(3, seed=seed, **PLAIN)
    if structure == "lowrank":
        yield "low-rank MTL", LowRankMTL(3, **PLAIN)


def one_setting(structure, epsilon, delta, seed):
    """Errors (max over S, max over all) of every method on one simulated data set."""
    sim = armul_simulation(structure, delta=delta, epsilon=epsilon, seed=seed)
    out = {}
    for label, est in methods(structure, seed):
        if label == "ARMUL":
            est = cross_validate_armul(est, sim.data, seed=seed).best_estimator
        else:
            est.fit(sim.data)
        err = np.linalg.norm(est.coef_ - sim.coef, axis=1)
        out[label] = (err[sim.inliers].max(), err.max())
    return (structure, epsilon, delta), out


def paper_fixed_steps(problem: ArmulProblem, steps=500):
    """Algorithm 1 with a fixed number of proximal-gradient steps and no stopping test."""
    L = problem.smoothness
    V, center = np.zeros((problem.m, problem.d)), np.zeros(problem.d)
    for _ in range(steps):
        G = problem.grads(center + V)
        V = block_soft_threshold(V - G / L[:, None], problem.lam / L)
        center = center - (problem.w[:, None] * problem.grads(center + V)).sum(0) / (problem.w * L).sum()
    return center + V, center


def speed(seeds):
    rows = []
    for seed in range(seeds):
        sim = armul_simulation("vanilla", delta=1.0, seed=seed)
        problem = ArmulProblem.from_tasks(sim.data.Xs, sim.data.ys, c=1.0)
        start = time.perf_counter()
        ours = fista(problem, rel_gap=1e-6, deadline=Deadline())
        t_ours = time.perf_counter() - start
        est = ARMUL(c=1.0, **PLAIN)
        t_est = est.fit(sim.data).result_.wall_time
        start = time.perf_counter()
        theta, center = paper_fixed_steps(problem)
        t_paper = time.perf_counter() - start
        excess = (problem.objective(theta, center) - ours.lower_bound) / ours.lower_bound
        start = time.perf_counter()
        cross_validate_armul(ARMUL(**PLAIN), sim.data, seed=seed)
        t_cv = time.perf_counter() - start
        rows.append((t_ours, t_est, ours.n_iter, (ours.objective - ours.lower_bound) / ours.objective,
                     t_paper, excess, t_cv))
    return np.array(rows)


def lowrank_gaps(seeds, deltas, epsilons):
    print("| delta | epsilon | seed | objective | proven bound | gap | time (s) |")
    print("|---|---|---|---|---|---|---|")
    for eps in epsilons:
        for delta in deltas:
            for seed in range(seeds):
                sim = armul_simulation("lowrank", delta=delta, epsilon=eps, seed=seed)
                result = ARMUL("lowrank", n_components=3, c=1.0, seed=0, **PLAIN).fit(sim.data).result_
                print(f"| {delta} | {eps} | {seed} | {result.objective:.2f} | {result.lower_bound:.2f} | "
                      f"{100 * result.rel_gap:.1f}% | {result.wall_time:.2f} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.0, 0.2, 0.5, 1.0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.0, 0.2])
    parser.add_argument("--structures", nargs="+", default=["vanilla", "clustered", "lowrank"])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--speed-seeds", type=int, default=10)
    parser.add_argument("--lowrank-gaps", action="store_true", help="only low-rank ARMUL's proven gaps")
    args = parser.parse_args(argv)
    if args.lowrank_gaps:
        return lowrank_gaps(args.seeds, args.deltas, args.epsilons)

    print(f"ARMUL Section 5.1: m=30, n=200, d=50, sigma=1, {args.seeds} seeds; "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}\n")
    s = speed(args.speed_seeds)
    print(f"Speed, vanilla, c=1, delta=1 ({args.speed_seeds} seeds, medians):")
    print("| solver | time (s) | iterations | certified rel gap | excess objective vs optimum |")
    print("|---|---|---|---|---|")
    print(f"| mtl_opt FISTA + duality gap (solver call) | {np.median(s[:, 0]):.4f} | "
          f"{np.median(s[:, 2]):.0f} | {np.max(s[:, 3]):.1e} (max) | <= gap |")
    print(f"| mtl_opt ARMUL.fit (whole estimator) | {np.median(s[:, 1]):.4f} | | | |")
    print(f"| Algorithm 1, fixed 500 steps (re-implemented) | {np.median(s[:, 4]):.4f} | 500 | none | "
          f"{np.median(s[:, 5]):.1e} (max {np.max(s[:, 5]):.1e}) |")
    print(f"\n10-value, 5-fold CV of vanilla ARMUL: median {np.median(s[:, 6]):.2f} s, "
          f"max {np.max(s[:, 6]):.2f} s\n", flush=True)

    jobs = [(st, eps, delta, seed) for st in args.structures for eps in args.epsilons
            for delta in args.deltas for seed in range(args.seeds)]
    start = time.perf_counter()
    results = Parallel(n_jobs=args.jobs)(delayed(one_setting)(*job) for job in jobs)
    print(f"({len(jobs)} simulated data sets in {time.perf_counter() - start:.0f} s)\n",
          file=sys.stderr)
    table = {}
    for key, out in results:
        for label, errs in out.items():
            table.setdefault((*key, label), []).append(errs)
    for st in args.structures:
        for eps in args.epsilons:
            labels = list(dict.fromkeys(lab for (s_, e_, _, lab) in table if s_ == st and e_ == eps))
            print(f"{st}, epsilon={eps}: mean max error over S / over all tasks "
                  f"(reference: published code, epsilon=0, S)")
            print("| method | " + " | ".join(f"delta={d}" for d in args.deltas) + " |")
            print("|---|" + "---|" * len(args.deltas))
            for lab in labels:
                cells = []
                for i, delta in enumerate(args.deltas):
                    errs = np.array(table[(st, eps, delta, lab)])
                    ref = REFERENCE.get((st, lab))
                    ref_text = (f" (ref {ref[[0.0, 0.2, 0.5, 1.0].index(delta)]:.2f})"
                                if ref and eps == 0 and delta in (0.0, 0.2, 0.5, 1.0) else "")
                    cells.append(f"{errs[:, 0].mean():.3f} / {errs[:, 1].mean():.3f}{ref_text}")
                print(f"| {lab} | " + " | ".join(cells) + " |")
            print(flush=True)


if __name__ == "__main__":
    main()
