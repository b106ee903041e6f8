"""A box the user knows (``coef_bound``) in bnb, beside L0BnB given the same box (issue 60).

K = 1, n = 500, p = 1000, 10 true coefficients equal to 1 at random columns, columns AR(1)
(rho 0.4) and standardized, y centred with noise at the given SNR; the box is M = 1.5 max|b_true|,
what L0BnB's authors give it.  Ours: ``SparseMTL(variant="l0l2", s=10, algorithm="bnb")`` with
and without ``coef_bound=M`` (threads 1, rel_gap 1e-4).  L0BnB (a separate venv: pass its python
with ``--l0bnb``) solves the penalized problem 1/2 ||y - X b||^2 + l0 ||b||_0 + l2 ||b||^2 with
|b_i| <= M; with l2 = n lambda_ridge / 2 its optimum with exactly 10 nonzeros is ours times n (a
penalized optimum with k nonzeros is the best of all k-sparse points), so each seed runs L0BnB
on a grid of l0 until one gives 10 nonzeros and reports that solve's time, at gap_tol 1e-4, and
the relative difference of the two certified optima (a second solver's check of ours).
OKRidge (``--okridge``, its own venv: ``pip install "numpy<2" okridge requests``) solves the same
instances without a box, its lambda2 = n lambda_ridge; the column is its gap on F at the limit
(issue 60's "without a box" row: OKRidge's lambda2 = 0.1 is ``--lambda-ridge 0.0002``).

    python benchmarks/box.py --l0bnb /path/to/l0bnb_venv/bin/python [--seeds 3] [--limit 60]
    python benchmarks/box.py --okridge /path/to/okridge_venv/bin/python --lambda-ridge 0.0002 --limit 120
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

N, P, K_TRUE = 500, 1000, 10
GAP = 1e-4
L0_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)

#: Runs in L0BnB's venv, once for every instance (its numba compile, ~90 s, is paid once): per
#: instance file, one solve per l0 of the grid until at most 10 nonzeros (one JSON line each).
L0BNB_RUN = """
import json, sys, time
import numpy as np
from l0bnb import BNBTree
limit, grid = float(sys.argv[1]), json.loads(sys.argv[2])
for path in sys.argv[3:]:
    data = np.load(path)
    x, y, l2, m = data["X"], data["y"], float(data["l2"]), float(data["m"])
    BNBTree(x[:100, :30], y[:100]).solve(1.0, l2, m, gap_tol=1e-2, time_limit=30)   # compiled
    for l0 in grid:
        start = time.perf_counter()
        sol = BNBTree(x, y, rel_tol=%g).solve(l0, l2, m, gap_tol=%g, time_limit=limit)
        seconds = time.perf_counter() - start
        beta = np.asarray(sol.beta)
        nnz = int(np.count_nonzero(np.abs(beta) > 1e-8))
        if nnz <= 10:
            break
    f = 0.5 * np.sum((y - x @ beta) ** 2) + l2 * np.sum(beta ** 2)
    print(json.dumps({"l0": l0, "nnz": nnz, "seconds": seconds, "gap": float(sol.gap),
                      "f": float(f)}), flush=True)
""" % (GAP, GAP)


#: Runs in OKRidge's venv: per instance file, one solve without a box (its BNBTree; 0.1.1 renamed
#: the ``lower_solve`` it still calls where n < p, hence the alias), its gap on our F.
OKRIDGE_RUN = """
import json, sys, time
import numpy as np
from okridge.node import Node
from okridge.tree import BNBTree
if not hasattr(Node, "lower_solve"):
    Node.lower_solve = Node.lower_solve_fast
limit = float(sys.argv[1])
for path in sys.argv[2:]:
    data = np.load(path)
    x, y, lam2 = data["X"], data["y"], float(data["l2"])
    n = len(y)
    start = time.perf_counter()
    _, beta, _, bound, _ = BNBTree(x, y, lambda2=lam2, gap_tol=%g, max_memory_GB=8).solve(
        %d, gap_tol=%g, time_limit=limit)
    seconds = time.perf_counter() - start
    r = y - x @ beta
    f = (r @ r + lam2 * beta @ beta) / (2 * n)   # our F; its cost is 2n (F - ||y||^2 / 2n)
    low = (bound + y @ y) / (2 * n)
    print(json.dumps({"seconds": seconds, "f": f, "gap": (f - low) / f}), flush=True)
""" % (GAP, K_TRUE, GAP)


def instance(seed: int, snr: float, rho: float = 0.4):
    """(X standardized, y centred, the box M = 1.5 max|b_true|)."""
    rng = np.random.default_rng(seed)
    X = np.empty((N, P))
    X[:, 0] = rng.standard_normal(N)
    for j in range(1, P):   # AR(1) columns: corr(x_i, x_j) = rho^|i - j|
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(N)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    b = np.zeros(P)
    b[rng.choice(P, K_TRUE, replace=False)] = 1.0
    signal = X @ b
    y = signal + rng.standard_normal(N) * np.sqrt(signal.var() / snr)
    return X, y - y.mean(), 1.5 * np.abs(b).max()


def ours(X, y, lam: float, box: float | None, limit: float) -> dict:
    from mtl_opt import MultiTaskData, SolveOptions, SparseMTL

    model = SparseMTL(variant="l0l2", s=K_TRUE, lambda_ridge=lam, algorithm="bnb", standardize=False,
                      fit_intercept=False, coef_bound=box,
                      solve_options=SolveOptions(time_limit=limit, threads=1, rel_gap=GAP))
    result = model.fit(MultiTaskData([X], [y])).result_
    return {"seconds": result.wall_time, "status": str(result.status),   # without the compile
            "gap": result.rel_gap, "f": result.objective, "nodes": result.log[-1]["nodes"]}


def anchor(python: str, script: str, arguments: list, cases, l2_scale: float) -> list:
    """A third-party solver's answer (a dict, or None when it failed) for each (X, y,
    lambda_ridge, box): ``script`` run by ``python`` (its venv) on the instances saved as files,
    its l2 = l2_scale n lambda_ridge."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"{i}.npz" for i in range(len(cases))]
        for path, (X, y, lam, box) in zip(paths, cases):
            np.savez(path, X=X, y=y, l2=l2_scale * N * lam, m=box)
        out = subprocess.run([python, "-c", script, *arguments, *map(str, paths)], capture_output=True, text=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return rows + [None] * (len(cases) - len(rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--l0bnb", help="the python of a venv with l0bnb installed")
    parser.add_argument("--okridge", help="the python of a venv with okridge installed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--limit", type=float, default=60.0)
    parser.add_argument("--lambda-ridge", type=float, nargs="+", default=[0.1, 0.001])
    parser.add_argument("--snr", type=float, default=100.0)
    args = parser.parse_args(argv)
    print(f"# K = 1, n = {N}, p = {P}, k = {K_TRUE}, AR(1) 0.4, SNR {args.snr:g}, gap {GAP:g}, "
          f"limit {args.limit:g} s; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")
    print("| lambda_ridge | seed | ours, no box | OKRidge, no box | ours, box M | L0BnB, box M (l0) "
          "| ours / L0BnB | rel. diff. of optima |")
    print("|---|---|---|---|---|---|---|---|")
    seeds = [(lam, seed) for lam in args.lambda_ridge for seed in range(args.seeds)]
    cases = [(X, y, lam, box) for lam, seed in seeds for X, y, box in [instance(seed, args.snr)]]
    limit = [str(args.limit)]
    anchors = (anchor(args.l0bnb, L0BNB_RUN, limit + [json.dumps(L0_GRID)], cases, 0.5) if args.l0bnb
               else [None] * len(cases))
    okridge = anchor(args.okridge, OKRIDGE_RUN, limit, cases, 1.0) if args.okridge else [None] * len(cases)
    for (X, y, lam, box), theirs, free_anchor, (_, seed) in zip(cases, anchors, okridge, seeds):
        free, boxed = ours(X, y, lam, None, args.limit), ours(X, y, lam, box, args.limit)
        cell = lambda r: (f"{r['status']} {r['seconds']:.2f} s, {r['nodes']} nodes"   # noqa: E731
                          + (f", gap {100 * r['gap']:.2f} %" if r["status"] != "optimal" else ""))
        if theirs is None:
            boxed_cell = ratio = diff = "not run"
        else:
            boxed_cell = (f"{theirs['seconds']:.2f} s, gap {100 * theirs['gap']:.3f} % "
                          f"(l0 {theirs['l0']:g}, {theirs['nnz']} nonzeros)")
            ratio = f"{boxed['seconds'] / theirs['seconds']:.1f}"
            diff = (f"{(boxed['f'] - theirs['f'] / N) / boxed['f']:.1e}"
                    if theirs["nnz"] == K_TRUE else "l0 gave fewer nonzeros")
        free_cell = ("not run" if free_anchor is None else
                     f"{free_anchor['seconds']:.2f} s, gap {100 * free_anchor['gap']:.2f} %")
        print(f"| {lam:g} | {seed} | {cell(free)} | {free_cell} | {cell(boxed)} | {boxed_cell} | {ratio} "
              f"| {diff} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
