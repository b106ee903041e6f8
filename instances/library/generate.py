"""Regenerate the benchmark instance library deterministically.

    python instances/library/generate.py              # tiny, small and medium, here
    python instances/library/generate.py --out DIR    # the same files into DIR
    python instances/library/generate.py --large DIR  # also the large tier (not shipped)

Every instance is a TOML file plus a long-format CSV (CSV, not .npz: a zip
archive stores write times, so its bytes would change on every run).  The
data come from ``mtl_opt.synthetic``, seeded per instance, following the
papers' setups scaled down.  ``optima.csv`` lists the known optimum of every
instance that has one: brute force over all supports for the sparse
instances where that takes at most ``BRUTE_FORCE_REFITS`` refits (all tiny
ones, small l0l2 and cs_l2), the closed-form weighted median for MOLAR (its
objective is minimized exactly by sorting).  Values are rounded to 10 significant digits
so BLAS rounding differences never change the file.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np

from mtl_opt.estimators import MOLAR
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.synthetic import armul_simulation, smtl_simulation, sparse_heterogeneity

HERE = Path(__file__).resolve().parent
SEED = 2026
#: Sparse instances get a brute-force optimum when it takes at most this many refits.
BRUTE_FORCE_REFITS = 20_000

#: data set -> (generator family, generator kwargs); several instances may share one.
DATASETS = {
    "tiny_sparse_a": ("sparse", dict(p=6, K=2, n=20, s_true=2, q=3)),
    "tiny_sparse_b": ("sparse", dict(p=6, K=3, n=20, s_true=2, q=4)),
    "tiny_molar": ("molar", dict(d=3, M=4, n=30, s=1)),
    "tiny_armul": ("armul", dict(structure="vanilla", m=4, n=20, d=3, delta=0.3)),
    "small_sparse": ("sparse", dict(p=15, K=3, n=25, s_true=3, q=5)),
    "small_molar": ("molar", dict(d=6, M=6, n=60, s=2)),
    "small_armul": ("armul", dict(structure="vanilla", m=8, n=40, d=5, delta=0.3, epsilon=0.125)),
    "small_armul_clusters": ("armul", dict(structure="clustered", m=6, n=40, d=3, delta=0.3)),
    "medium_sparse": ("sparse", dict(p=40, K=4, n=25, s_true=4, q=8)),
    "medium_molar": ("molar", dict(d=10, M=8, n=60, s=3)),
    "medium_armul": ("armul", dict(structure="vanilla", m=12, n=40, d=6, delta=0.3, epsilon=0.125)),
    "medium_armul_clusters": ("armul", dict(structure="clustered", m=9, n=40, d=4, delta=0.3)),
    "large_sparse": ("sparse", dict(p=250, K=4, n=50, s_true=10, q=14)),
    "large_molar": ("molar", dict(d=50, M=30, n=500, s=5)),
    "large_armul": ("armul", dict(structure="vanilla", m=30, n=200, d=50, delta=0.3, epsilon=0.1)),
}
SPARSE_SOLVE = {"rel_gap": 1e-4}
#: instance -> (data set, [method] table, [solve] table); the tier is the name's prefix.
LIBRARY = {
    "tiny_sparse_l0l2": ("tiny_sparse_a", dict(variant="l0l2", s=2, lambda_ridge=0.05), SPARSE_SOLVE),
    "tiny_sparse_bbar": ("tiny_sparse_a", dict(variant="bbar", s=2, lambda_ridge=0.05, lambda_bbar=0.1),
                         SPARSE_SOLVE),
    "tiny_sparse_zbar": ("tiny_sparse_b", dict(variant="zbar_l2", s=2, lambda_ridge=0.05, lambda_zbar=0.05),
                         SPARSE_SOLVE),
    "tiny_sparse_cs": ("tiny_sparse_b", dict(variant="cs_l2", s=2, lambda_ridge=0.05), SPARSE_SOLVE),
    "tiny_molar": ("tiny_molar", dict(algorithm="lp"), {}),
    "tiny_armul_vanilla": ("tiny_armul", dict(structure="vanilla"), {}),
    "small_sparse_l0l2": ("small_sparse", dict(variant="l0l2", s=3, lambda_ridge=0.02), SPARSE_SOLVE),
    "small_sparse_zbar": ("small_sparse", dict(variant="zbar_l2", s=3, lambda_ridge=0.02, lambda_zbar=0.02),
                          SPARSE_SOLVE),
    "small_sparse_cs": ("small_sparse", dict(variant="cs_l2", s=3, lambda_ridge=0.02), SPARSE_SOLVE),
    "small_molar": ("small_molar", dict(algorithm="lp"), {}),
    "small_armul_vanilla": ("small_armul", dict(structure="vanilla"), {}),
    "small_armul_clustered": ("small_armul_clusters", dict(structure="clustered", n_components=3, seed=0), {}),
    "medium_sparse_l0l2": ("medium_sparse", dict(variant="l0l2", s=4, lambda_ridge=0.01), SPARSE_SOLVE),
    "medium_sparse_zbar": ("medium_sparse", dict(variant="zbar_l2", s=4, lambda_ridge=0.01, lambda_zbar=0.01),
                           SPARSE_SOLVE),
    "medium_molar": ("medium_molar", dict(algorithm="lp"), {}),
    "medium_armul_vanilla": ("medium_armul", dict(structure="vanilla"), {}),
    "medium_armul_clustered": ("medium_armul_clusters", dict(structure="clustered", n_components=3, seed=0),
                               {}),
}
#: The paper-sized tier, written only on request (about 23 MB of CSV).
LARGE = {
    "large_sparse_zbar": ("large_sparse", dict(variant="zbar_l2", s=10, lambda_ridge=0.01, lambda_zbar=0.01),
                          SPARSE_SOLVE),
    "large_molar": ("large_molar", dict(algorithm="lp"), {}),
    "large_armul_vanilla": ("large_armul", dict(structure="vanilla"), {}),
}
GENERATORS = {"sparse": smtl_simulation, "molar": sparse_heterogeneity, "armul": armul_simulation}
METHODS = {"sparse": "sparse_mtl", "molar": "molar", "armul": "armul"}


def write_instance(out: Path, name: str, spec, data) -> float | None:
    """Write ``name``.toml into ``out``; return the instance's known optimum, if any.

    Sparse optima are on the standardized data, as SparseMTL (standardize=True,
    fit_intercept=True, the defaults) reports its objective.
    """
    dataset, method, solve = spec
    family, tier = DATASETS[dataset][0], name.split("_")[0]
    lines = [(f"# {tier} {METHODS[family]} instance (K={data.n_tasks} tasks, p={data.n_features} "
              f"features, n={data.n_total} rows); regenerate with: python instances/library/generate.py"),
             "[data]", f'path = "{dataset}.csv"', 'task = "task"', 'response = "y"', "",
             "[method]", f'name = "{METHODS[family]}"', *_toml_lines(method)]
    if solve:
        lines += ["", "[solve]", *_toml_lines(solve)]
    (out / f"{name}.toml").write_text("\n".join(lines) + "\n")
    if family == "molar":
        return MOLAR(algorithm="closed_form").fit(data).result_.objective
    if family == "sparse":
        return sparse_optimum(data.standardize(how="task", center=True, scale=True)[0], method)
    return None


def sparse_optimum(data, method: dict) -> float | None:
    """min F by brute force when that takes at most BRUTE_FORCE_REFITS refits, else None.

    l0l2 tasks are independent (F = sum_k F_k), so each is enumerated alone.
    """
    problem = SparseProblem.from_data(data, **method)
    K, p, s = problem.n_tasks, problem.n_features, problem.s
    subsets = sum(math.comb(p, r) for r in range(s + 1))
    if method["variant"] == "l0l2":
        if K * subsets > BRUTE_FORCE_REFITS:
            return None
        return sum(brute_force_sparse(SparseProblem.from_data(data.subset_tasks([k]), **method))
                   for k in range(K))
    if (subsets if problem.common_support else subsets**K) > BRUTE_FORCE_REFITS:
        return None
    return brute_force_sparse(problem)


def brute_force_sparse(problem: SparseProblem) -> float:
    """min F over every feasible support (all sizes 0..s, per task or common), by refitting each."""
    K, p = problem.n_tasks, problem.n_features
    subsets = [c for r in range(problem.s + 1) for c in itertools.combinations(range(p), r)]
    choices = ([(c,) * K for c in subsets] if problem.common_support
               else itertools.product(subsets, repeat=K))
    best = np.inf
    for rows in choices:
        support = np.zeros((K, p), dtype=bool)
        for k, cols in enumerate(rows):
            support[k, list(cols)] = True
        best = min(best, problem.objective(problem.refit(support)))
    return best


def _toml_lines(table: dict) -> list[str]:
    return [f"{key} = " + (f'"{value}"' if isinstance(value, str) else repr(value))
            for key, value in table.items()]


def generate(out: Path, instances: dict) -> None:
    """Write ``instances``, their data sets and their ``optima.csv`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    datasets, rows = {}, []
    for name, spec in instances.items():
        dataset = spec[0]
        if dataset not in datasets:
            family, kwargs = DATASETS[dataset]
            datasets[dataset] = GENERATORS[family](**kwargs, seed=SEED).data
            datasets[dataset].to_csv(out / f"{dataset}.csv", task="task", response="y")
        optimum = write_instance(out, name, spec, datasets[dataset])
        if optimum is not None:
            how = "brute force over supports" if DATASETS[dataset][0] == "sparse" else "closed-form weighted median"
            rows.append(f"{name},{optimum:.10g},{how}")
    (out / "optima.csv").write_text("\n".join(["instance,optimum,how", *rows]) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory (default: next to this script)")
    parser.add_argument("--large", type=Path, help="also write the large tier into this directory")
    args = parser.parse_args()
    generate(args.out, LIBRARY)
    if args.large is not None:
        generate(args.large, LARGE)
