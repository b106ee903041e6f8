"""Exact sparse multi-task solvers: time to a certified gap, per path, and OKRidge at K = 1.

    OPENBLAS_NUM_THREADS=1 python benchmarks/sparse_exact.py [--time-limit 60] [--full]

Instances follow the published sMTL demo: rows N(0, Sigma), Sigma_ij = rho^|i-j|
(rho = 0.4), per task 5 nonzero coefficients equal to 1, four on a support
shared by all tasks and one task-specific, noise variance set by the SNR
(var(x'beta) / sigma^2), features standardized per task; the zbar_l2 variant
with lambda_zbar = 0.01 and s = 5 unless a table says otherwise.

Paths: ``oa-highs`` (multi-tree OA, HiGHS master), ``oa-scip`` (single-tree OA,
SCIP constraint handler), ``miqp-scip`` (Big-M MIQP), all started from the bcd
answer.  Each cell: seconds to rel_gap 1e-4 (``optimal``) or the gap left at
the time limit.  "bcd opt" says whether the heuristic's answer was already
the certified optimum.  Sections:

1. grid: p x K x n_k x lambda_ridge (reduced by default; ``--full`` runs the
   issue's whole grid: p in {50, 100, 200, 500, 1000}, K in {2, 5}, s in {5, 10},
   n_k in {100, 500}, lambda_ridge in {1e-3, 1e-1}; ``--instance p,K,s,n_k,lambda_ridge``
   runs chosen rows, e.g. at a longer time limit; ``--variant l0l2`` or ``cs_l2``
   drops the Zbar term, and ``--paths ... bnb`` adds our branch and bound, ``exact`` the path
   ``SparseMTL(algorithm="exact")`` chooses, ``sparse_methods.choose``);
2. agreement: the three paths' objectives on 10 instances with K=3, p=30, s=5;
3. K = 1 against OKRidge (``pip install okridge requests``: okridge 0.1.1 imports requests
   without declaring it; skipped, saying why, when it cannot be imported): the same cardinality-constrained ridge problem (OKRidge's lambda2 = n lambda_ridge),
   OKRidge's answer re-scored on our objective and gap, beside our OA paths and
   ``bnb`` (branch and bound with perspective-dual node bounds).  OKRidge's
   gap_tol is relative to its cost, which leaves out ||y||^2, so 1e-4 there is a
   looser gap on F (printed as "its gap on F"); OKRidge is run a second time
   with gap_tol = 1e-4 F / (||y||^2 / 2n - F) (F: the bcd objective), which is
   1e-4 on F, the tolerance our paths are held to.
4. smtl (issue 22): the sparse multi-task paper's own simulation where its users fit it, the
   training half of ``smtl_simulation(p=250, K=4, n=50, s_true=10, q=14, seed)`` (n_k = 50 <
   p = 250), standardized per task with intercepts as ``SparseMTL`` fits it, each variant at
   the penalties 5-fold CV selects most often there (benchmarks/HISTORY.md, "q = 14": ``SMTL_PARAMS``),
   seeds 0-4.  Every certifying method of ``sparse_methods.METHODS`` that accepts the variant
   runs through ``run_exact`` (the estimator's own route: normalized objective, fallback bound)
   from the same bcd answer, once, with the longest ``--checkpoints`` limit (default 10 and
   60 s; add 600): the gap at a shorter limit is read from the run's log where it logs on
   past that limit (``checkpoint_gaps``), else taken from a run with that time_limit; a limit
   after the path certified is left blank, and "to 1e-4" is the wall time of the run that
   certified.  ``--paths`` chooses the paths here too (add ``bnb``: it runs where it accepts
   the variant).  The issue's frontier: ``--penalty lambda_ridge=0.01``, and ``--smtl-p 1000``.
5. pooled (issue 22): the lambda_ridge = 0.1 bbar rows' pooled limit (lambda_bbar -> infinity,
   one beta for all tasks: ``pooled_problem``), a plain K = 1 best-subset ridge problem with
   n = 200 < p = 250, for bnb (``--checkpoints`` as in section 4) and OKRidge (held to 1e-4 on F,
   at the longest checkpoint): what the best certified solvers reach on this simpler relative
   of those rows (250 indicators instead of 1000).  ``--penalty`` and ``--seeds`` as in section 4.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time

import numpy as np
from tqdm import tqdm

from mtl_opt.bench.cell import trace
from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.result import relative_gap
from mtl_opt.solvers.backends import get_backend
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.sparse.bnb import solve_bnb
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.sparse.oa import solve_miqp, solve_oa
from mtl_opt.solvers.sparse.oa_scip import solve_oa_single_tree
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.solvers.sparse.methods import METHODS, choose, run_exact
from mtl_opt.synthetic import _ar1_design, smtl_simulation

def _path(solve, backend: str | None = None):
    """``solve(problem, [backend,] options, start)`` with its whole run's Deadline of the time limit."""
    def run(problem, options, start):
        backends = () if backend is None else (get_backend(backend),)
        return solve(problem, *backends, options, start, deadline=Deadline(options.time_limit))
    return run


PATHS = {"oa-highs": _path(solve_oa, "highs"), "oa-scip": _path(solve_oa_single_tree),
         "miqp-scip": _path(solve_miqp, "scip")}
GRID_PATHS = {**PATHS, "bnb": _path(solve_bnb),
              "exact": lambda problem, options, start: run_exact(   # SparseMTL(algorithm="exact")
                  choose(problem, None), problem, start, options, Deadline(options.time_limit), None)}
REL_GAP = 1e-4


def demo_data(p: int, K: int, n: int, *, rho: float = 0.4, snr: float = 10.0, seed: int = 0):
    """The sMTL demo: 4 shared + 1 task-specific nonzero (value 1) per task, AR(1) rows."""
    rng = np.random.default_rng(seed)
    shared = rng.choice(p, 4, replace=False)
    Xs, ys = [], []
    for _ in range(K):
        beta = np.zeros(p)
        beta[shared] = 1.0
        beta[rng.choice(np.setdiff1d(np.arange(p), shared))] = 1.0
        X = _ar1_design(n, p, rho, rng)
        signal = X @ beta
        ys.append(signal + rng.normal(scale=np.sqrt(signal.var() / snr), size=n))
        Xs.append(X)
    data, _ = MultiTaskData(Xs, ys).standardize(how="task", center=True, scale=True)
    return data


def problem_for(data, *, s=5, lambda_ridge=1e-3, lambda_zbar=0.01, variant="zbar_l2"):
    return SparseProblem.from_data(data, variant=variant, s=s, lambda_ridge=lambda_ridge,
                                   lambda_zbar=lambda_zbar if variant.startswith("zbar") else 0.0)


def run_paths(problem, time_limit, paths=PATHS, threads=None):
    """{path: (seconds, status, objective, lower bound, gap)} plus the bcd objective; ``threads``
    as SolveOptions takes it (None: every core)."""
    start = time.perf_counter()
    B = fit_bcd(problem, deadline=Deadline()).coef
    bcd_time, bcd_objective = time.perf_counter() - start, problem.objective(B)
    out = {}
    for name, solve in paths.items():
        start = time.perf_counter()
        result = solve(problem, SolveOptions(time_limit=time_limit, rel_gap=REL_GAP, threads=threads), B)
        out[name] = (time.perf_counter() - start, final_status(result, REL_GAP), result.objective, result.lower_bound,
                     relative_gap(result.objective, result.lower_bound))
    return bcd_time, bcd_objective, out


def cell(entry):
    seconds, status, _, _, gap = entry
    if status == "optimal":
        return f"{seconds:.1f} s"
    return f"gap {100 * gap:.2g}% ({status})" if gap is not None else f"no bound ({status})"


def grid_instance(text: str) -> tuple:
    """'p,K,s,n_k,lambda_ridge' -> (int, int, int, int, float), for --instance."""
    try:
        p, K, s, n, lr = text.split(",")
        return int(p), int(K), int(s), int(n), float(lr)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected p,K,s,n_k,lambda_ridge such as 50,2,5,100,0.1; got {text!r}")


def penalty(text: str) -> tuple:
    """'name=value' -> (name, float), for --penalty."""
    name, _, value = text.partition("=")
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected name=value such as lambda_ridge=1; got {text!r}")


def okridge_case(text: str) -> tuple:
    """'p,SNR,lambda2' -> (int, float, float), for --okridge-case."""
    try:
        p, snr, lambda2 = text.split(",")
        return int(p), float(snr), float(lambda2)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected p,SNR,lambda2 such as 1000,100,0.1; got {text!r}")


def grid(args):
    if args.instance:
        configs = args.instance
    elif args.full:
        configs = list(itertools.product([50, 100, 200, 500, 1000], [2, 5], [5, 10], [100, 500],
                                         [1e-3, 1e-1]))
    else:
        configs = [(50, 3, 5, 100, 1e-3), (50, 3, 5, 100, 1e-1), (100, 2, 5, 100, 1e-3),
                   (100, 5, 5, 500, 1e-3), (200, 5, 5, 500, 1e-3), (200, 5, 5, 500, 1e-1),
                   (500, 2, 5, 500, 1e-3), (1000, 2, 5, 500, 1e-1)]
    zbar = ", lambda_zbar=0.01" if args.variant.startswith("zbar") else ""
    print(f"## 1. Time to rel_gap {REL_GAP:g} (limit {args.time_limit:g} s), {args.variant}{zbar}, "
          f"SNR {args.snr:g}\n")
    paths = {name: GRID_PATHS[name] for name in args.paths}
    print("| p | K | s | n_k | lambda_ridge | bcd s | " + " | ".join(paths) + " | bcd opt |")
    print("|---|---|---|---|---|---|" + "---|" * len(paths) + "---|")
    for p, K, s, n, lr in tqdm(configs, desc="grid", unit="instance", leave=False):
        problem = problem_for(demo_data(p, K, n, snr=args.snr, seed=args.seed), s=s, lambda_ridge=lr,
                              variant=args.variant)
        bcd_time, bcd_objective, out = run_paths(problem, args.time_limit, paths, args.threads)
        proven = [e for e in out.values() if e[1] == "optimal"]
        bcd_opt = ("yes" if proven and bcd_objective <= min(e[2] for e in proven) * (1 + 1e-9)
                   else "no" if proven else "?")
        tqdm.write(f"| {p} | {K} | {s} | {n} | {lr:g} | {bcd_time:.2f} | "
                   + " | ".join(cell(out[name]) for name in paths) + f" | {bcd_opt} |")


def agreement(args):
    print(f"\n## 2. Agreement: K=3, p=30, s=5, n_k=100, lambda_ridge=1e-3, 10 instances "
          f"(limit {args.time_limit:g} s)\n")
    print("| seed | " + " | ".join(PATHS) + " | max rel. difference of proven optima |")
    print("|---|" + "---|" * len(PATHS) + "---|")
    for seed in tqdm(range(10), desc="agreement", unit="instance", leave=False):
        problem = problem_for(demo_data(30, 3, 100, snr=args.snr, seed=100 + seed))
        _, _, out = run_paths(problem, args.time_limit, threads=args.threads)
        proven = [e[2] for e in out.values() if e[1] == "optimal"]
        spread = (max(proven) - min(proven)) / min(proven) if len(proven) > 1 else float("nan")
        tqdm.write(f"| {100 + seed} | " + " | ".join(cell(out[name]) for name in PATHS)
                   + f" | {spread:.1e} ({len(proven)} proven) |")


OKRIDGE_CASES = [(200, 100.0, 0.1), (200, 100.0, 1e-3), (200, 2.0, 0.1), (200, 2.0, 1e-3),
                 (1000, 100.0, 0.1), (1000, 2.0, 0.1)]   # (p, SNR, lambda2): the measurements


def okridge_tree():
    """OKRidge's BNBTree, or None when okridge is not installed.

    OKRidge 0.1.1 (PyPI) tunes its ADMM step when X'X is singular (n < p) by
    calling ``Node.lower_solve``, a method it renamed ``lower_solve_fast``, and
    crashes with AttributeError; the alias restores the call it meant.
    """
    try:
        from okridge.node import Node
        from okridge.tree import BNBTree
    except ImportError as exc:   # okridge 0.1.1 also needs requests, which it does not declare
        print(f"okridge could not be imported ({exc}): its rows are skipped", file=sys.stderr)
        return None
    if not hasattr(Node, "lower_solve"):
        Node.lower_solve = Node.lower_solve_fast
    return BNBTree


def okridge_tolerance(problem: SparseProblem, F: float) -> float:
    """The gap_tol on OKRidge's cost 2n (F - ||y||^2 / 2n) that is REL_GAP on F near F (K = 1, centered)."""
    y = problem.ys[0]
    return REL_GAP * F / (y @ y / (2 * len(y)) - F)


def okridge_on_f(BNBTree, problem: SparseProblem, s: int, tol: float, time_limit: float):
    """OKRidge on a K = 1 ``problem`` (centered, as our objective profiles the intercept; its lambda2
    is n lambda_ridge), held to ``tol`` on its own cost 2n (F - ||y||^2 / 2n): (seconds, F at its
    answer, its lower bound on F), or "failed: <exception>" when the third-party solver crashed."""
    X, y = problem.Xs[0], problem.ys[0]
    n = len(y)
    start = time.perf_counter()
    try:
        tree = BNBTree(X, y, lambda2=n * problem.lambda_ridge, gap_tol=tol, max_memory_GB=8)
        _, beta, _, bound, _ = tree.solve(s, gap_tol=tol, time_limit=time_limit)
    except Exception as exc:   # report it and keep going
        return f"failed: {type(exc).__name__}"
    return time.perf_counter() - start, problem.objective(beta[None]), bound / (2 * n) + y @ y / (2 * n)


def okridge_section(args):
    BNBTree = okridge_tree()
    if BNBTree is None:
        print("\n## 3. K = 1 against OKRidge: skipped (pip install okridge requests)")
        return
    ours = {name: GRID_PATHS[name] for name in args.paths}   # --paths chooses them here too
    print(f"\n## 3. K = 1 against OKRidge (n=500, rho=0.4, s=5, limit {args.time_limit:g} s)\n")
    print("| p | SNR | lambda2 | seed | OKRidge s (gap_tol 1e-4) | its gap on F | OKRidge s (1e-4 on F) | "
          + " | ".join(f"{name} s" for name in ours) + " | best ours / OKRidge time (1e-4 on F) |")
    print("|---" * (len(ours) + 8) + "|")
    for (p, snr, lambda2), seed in itertools.product(args.okridge_case or OKRIDGE_CASES, args.okridge_seeds):
        data = demo_data(p, 1, 500, snr=snr, seed=seed)
        n = data.n_total
        problem = problem_for(data, lambda_ridge=lambda2 / n, variant="l0l2")
        F = problem.objective(fit_bcd(problem, deadline=Deadline()).coef)
        runs, ok_time = [], float("nan")
        for tol in (REL_GAP, okridge_tolerance(problem, F)):   # the ratio uses the second
            okridge = okridge_on_f(BNBTree, problem, 5, tol, args.time_limit)
            if isinstance(okridge, str):
                runs.append(okridge)
                continue
            ok_time = okridge[0]
            runs.append(f"{ok_time:.1f}" if ok_time < args.time_limit else f"{ok_time:.0f} (limit)")
        guarantee = REL_GAP * REL_GAP / okridge_tolerance(problem, F)   # gap_tol REL_GAP, as a gap on F
        _, _, out = run_paths(problem, args.time_limit, ours, args.threads)
        best = min((e[0] for e in out.values() if e[1] == "optimal"), default=float("nan"))
        print(f"| {p} | {snr:g} | {lambda2:g} | {seed} | {runs[0]} | {guarantee:.1e} | {runs[1]} | "
              + " | ".join(cell(out[name]) for name in ours) + f" | {best / ok_time:.2f} |", flush=True)


#: variant -> the penalties CV selects most often on the q = 14 simulation (benchmarks/HISTORY.md,
#: "Sparse multi-task simulation", q = 14; bbar's lambda_ridge 1 and 0.1 were 9 and 8 of 20).
SMTL_PARAMS = {
    "zbar_l2": {"s": 10, "lambda_ridge": 1.0, "lambda_zbar": 1.0},
    "bbar": {"s": 10, "lambda_ridge": 0.1, "lambda_bbar": 10.0},
    "zbar_bbar": {"s": 10, "lambda_ridge": 0.1, "lambda_zbar": 0.01, "lambda_bbar": 10.0},
    "cs_l2": {"s": 14, "lambda_ridge": 1.0},
    "l0l2": {"s": 14, "lambda_ridge": 10.0},
}
#: (label, method, backend): the exact paths the smtl section tries.
SMTL_PATHS = (("oa-highs", "oa_multi_tree", "highs"), ("oa-scip", "oa_single_tree", "scip"),
              ("miqp-scip", "miqp", "scip"), ("bnb", "bnb", None))


def smtl_problem(variant: str, seed: int, params: dict, p: int = 250) -> SparseProblem:
    """``smtl_data`` as ``SparseMTL`` (intercept) fits it, with the penalties ``params``
    (``SMTL_PARAMS[variant]``, or as ``--penalty`` changes them); ``p`` other than the paper's 250
    is for the frontier (``--smtl-p``)."""
    return SparseProblem.from_data(smtl_data(seed, p), variant=variant, fit_intercept=True, **params)


def smtl_data(seed: int, p: int = 250) -> MultiTaskData:
    """The training half of the paper's simulation, standardized per task as ``SparseMTL`` does."""
    train, _ = smtl_simulation(p=p, K=4, n=50, s_true=10, q=14, seed=seed).data.train_test_split(0.5, seed)
    return train.standardize(how="task", center=True, scale=True)[0]


def smtl(args):
    limits = sorted(args.checkpoints)
    print(f"\n## 4. The paper's simulation where CV fits it (p={args.smtl_p}, K=4, n_k=50, q=14; seeds "
          f"{args.seeds}; gap at each time limit, time to rel_gap {REL_GAP:g})\n")
    print("| variant | penalties | seed | bcd F | path | " + " | ".join(f"gap at {t:g} s" for t in limits)
          + " | to 1e-4 |")
    print("|---" * (6 + len(limits)) + "|")
    for variant in args.variants:
        params = {**SMTL_PARAMS[variant], **dict(args.penalty)}
        penalties = ", ".join(f"{k}={v:g}" for k, v in params.items())
        for seed in args.seeds:
            problem = smtl_problem(variant, seed, params, args.smtl_p)
            B = fit_bcd(problem, deadline=Deadline()).coef
            for label, name, backend in SMTL_PATHS:
                if label not in args.paths or METHODS[name].refusal(problem, backend) is not None:
                    continue
                gaps, certified = checkpoint_gaps(METHODS[name], problem, B, backend, limits, args.threads)
                print(f"| {variant} | {penalties} | {seed} | {problem.objective(B):.6g} | {label} | "
                      + " | ".join(gaps) + f" | {certified} |", flush=True)


def pooled_problem(seed: int, params: dict, p: int = 250) -> SparseProblem:
    """The bbar row's pooled limit (lambda_bbar -> infinity: one beta for every task), a K = 1
    best-subset ridge problem: ``smtl_problem("bbar", ...)``'s tasks stacked, rows weighted so that
    its F at beta is the bbar row's F at (beta, ..., beta) over K (the tasks are centered already)."""
    data = smtl_data(seed, p)
    X, y, task = data.stacked()
    weights = np.sqrt(len(y) / (data.n_tasks * data.n_samples))[task]
    return SparseProblem.from_data(MultiTaskData([weights[:, None] * X], [weights * y]), variant="l0l2",
                                   s=params["s"], lambda_ridge=params["lambda_ridge"], fit_intercept=False)


def pooled(args):
    """Section 5: bnb and OKRidge on the bbar rows' pooled limit (``pooled_problem``)."""
    BNBTree = okridge_tree()
    limits = sorted(args.checkpoints)
    params = {**SMTL_PARAMS["bbar"], **dict(args.penalty)}
    print(f"\n## 5. The bbar rows' pooled limit: K=4 tasks of n_k=50 stacked, one beta (p={args.smtl_p}, "
          f"{', '.join(f'{k}={v:g}' for k, v in params.items() if k != 'lambda_bbar')}; gap on F)\n")
    print("| seed | bcd F | " + " | ".join(f"bnb at {t:g} s" for t in limits) + " | bnb to 1e-4 | "
          + f"OKRidge at {limits[-1]:g} s | OKRidge F |")
    print("|---" * (len(limits) + 5) + "|")
    for seed in args.seeds:
        problem = pooled_problem(seed, params, args.smtl_p)
        B = fit_bcd(problem, deadline=Deadline()).coef
        F = problem.objective(B)
        gaps, certified = checkpoint_gaps(METHODS["bnb"], problem, B, None, limits, args.threads)
        okridge = ("not installed" if BNBTree is None
                   else okridge_on_f(BNBTree, problem, params["s"], okridge_tolerance(problem, F), limits[-1]))
        if isinstance(okridge, str):
            ok_cells = f"{okridge} | -"
        else:
            seconds, ok_f, ok_bound = okridge
            gap = relative_gap(ok_f, max(ok_bound, 0.0))
            stopped = f" (stopped at {seconds:.0f} s)" if seconds < limits[-1] else ""   # its memory cap
            ok_cells = (f"{seconds:.1f} s" if gap <= REL_GAP else f"{100 * gap:.3g}%{stopped}") + f" | {ok_f:.6g}"
        print(f"| {seed} | {F:.6g} | " + " | ".join(gaps) + f" | {certified} | {ok_cells} |", flush=True)


def checkpoint_gaps(method, problem, B, backend, limits, threads=None):
    """(the gap at each time limit, as table cells; the seconds to rel_gap, or "-").

    One run at the longest limit.  A shorter limit t reads the last log row at or before t when
    the run logged on past t (bnb logs each second, multi-tree OA each iteration), with the
    bound floored at 0 as ``run_exact`` floors the final one; otherwise (a log of the final row
    only) a run of its own with time_limit t.  Limits after the run certified are left blank.
    """
    def run_until(limit):
        start = time.perf_counter()
        run = run_exact(method, problem, B, SolveOptions(time_limit=limit, rel_gap=REL_GAP, threads=threads),
                        Deadline(limit), backend)
        return run, time.perf_counter() - start

    longest, seconds = run_until(limits[-1])
    status = final_status(longest, REL_GAP)
    certified = f"{seconds:.1f} s" if status == "optimal" else "-"
    points = trace(longest.log)   # (time, lower bound, incumbent) per logged row
    cells = []
    for limit in limits:
        if limit == limits[-1] or (status == "optimal" and seconds <= limit):
            cells.append(gap_cell(longest))
            break
        if points and points[0][0] <= limit < points[-1][0]:
            _, bound, incumbent = [point for point in points if point[0] <= limit][-1]
            cells.append(f"{100 * relative_gap(incumbent, max(bound, 0.0)):.3g}%")
        else:
            cells.append(gap_cell(run_until(limit)[0]))
    return cells + [""] * (len(limits) - len(cells)), certified


def gap_cell(run) -> str:
    """The run's gap, with its status unless it is optimal or hit the time limit."""
    status = final_status(run, REL_GAP)
    return (f"{100 * relative_gap(run.objective, run.lower_bound):.3g}%"
            + ("" if status in ("optimal", "time_limit") else f" ({status})"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--snr", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="our paths' threads (default: every core); 1 runs bnb on one core, as "
                             "OKRidge runs")
    parser.add_argument("--full", action="store_true", help="the issue's whole grid (hours with every path)")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(GRID_PATHS),
                        help="exact paths of the grid and smtl sections")
    parser.add_argument("--variant", default="zbar_l2", choices=["zbar_l2", "l0l2", "cs_l2"],
                        help="objective of the grid section")
    parser.add_argument("--instance", type=grid_instance, action="append",
                        help="a grid row p,K,s,n_k,lambda_ridge (repeatable; replaces the grid)")
    parser.add_argument("--sections", nargs="+", default=["grid", "agreement", "okridge"],
                        choices=["grid", "agreement", "okridge", "smtl", "pooled"])
    parser.add_argument("--checkpoints", nargs="+", type=float, default=[10.0, 60.0],
                        help="smtl section: the time limits each path runs with (seconds)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(5)),
                        help="smtl section: simulation seeds")
    parser.add_argument("--okridge-case", type=okridge_case, action="append",
                        help="okridge section: p,SNR,lambda2 (repeatable; default: OKRIDGE_CASES)")
    parser.add_argument("--okridge-seeds", nargs="+", type=int, default=[0],
                        help="okridge section: data seeds (default 0)")
    parser.add_argument("--variants", nargs="+", default=list(SMTL_PARAMS), choices=list(SMTL_PARAMS),
                        help="smtl section: variants")
    parser.add_argument("--penalty", type=penalty, action="append", default=[],
                        help="smtl section: name=value in place of SMTL_PARAMS' (repeatable), e.g. "
                             "lambda_ridge=1, bbar's other CV choice")
    parser.add_argument("--smtl-p", type=int, default=250,
                        help="smtl section: features (the paper's 250; 1000 for the frontier)")
    args = parser.parse_args(argv)
    print(f"# Exact sparse solvers; {platform.machine()}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}\n", flush=True)
    for section in args.sections:
        {"grid": grid, "agreement": agreement, "okridge": okridge_section, "smtl": smtl,
         "pooled": pooled}[section](args)


if __name__ == "__main__":
    main()
