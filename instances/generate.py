"""Regenerate the shipped example instances deterministically.

    python instances/generate.py

molar_demo: MOLAR's Section 4.1 setup scaled down (d=8 covariates, M=6
tasks, n=120 observations each, s=2 heterogeneous coordinates per task,
sigma=0.1, seed 2026), written as a long-format CSV plus its TOML instance.
The true coefficients are kept beside it in molar_demo_truth.csv.

sparse_demo: the sparse-MTL simulation (Behdin et al.) scaled down (p=30
features, K=4 tasks, 2 x 50 rows each, 5 true features per task drawn from
q=7 candidates, rho=0.5, tau=1, seed 2026), stored as .npz; the instances
sparse_zbar.toml and sparse_l0l2.toml fit it with and without the Zbar term.

armul_demo: ARMUL's Section 5.1 vanilla setup scaled down (m=8 tasks, n=60,
d=5, delta=0.3, one outlier task, seed 2026) as a long CSV; armul_demo.toml
fits vanilla ARMUL with a certified duality gap.
"""

from pathlib import Path

from mtl_opt.synthetic import armul_simulation, smtl_simulation, sparse_heterogeneity

HERE = Path(__file__).resolve().parent


def molar_demo() -> None:
    problem = sparse_heterogeneity(d=8, M=6, n=120, s=2, sigma=0.1, seed=2026)
    problem.data.to_csv(HERE / "molar_demo.csv", task="task", response="y")
    header = "task," + ",".join(problem.data.feature_names)
    rows = [f"{name}," + ",".join(repr(float(v)) for v in coef)
            for name, coef in zip(problem.data.task_names, problem.coef)]
    (HERE / "molar_demo_truth.csv").write_text("\n".join([header, *rows]) + "\n")


def sparse_demo() -> None:
    smtl_simulation(p=30, K=4, n=50, s_true=5, q=7, seed=2026).data.to_npz(HERE / "sparse_demo.npz")


def armul_demo() -> None:
    """ARMUL's Section 5.1 vanilla setup scaled down: m=8, n=60, d=5, delta=0.3, one outlier task."""
    armul_simulation("vanilla", m=8, n=60, d=5, delta=0.3, epsilon=0.125,
                     seed=2026).data.to_csv(HERE / "armul_demo.csv", task="task", response="y")


if __name__ == "__main__":
    molar_demo()
    sparse_demo()
    armul_demo()
