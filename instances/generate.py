"""Regenerate the shipped example instances deterministically.

    python instances/generate.py

molar_demo: MOLAR's Section 4.1 setup scaled down (d=8 covariates, M=6
tasks, n=120 observations each, s=2 heterogeneous coordinates per task,
sigma=0.1, seed 2026), written as a long-format CSV plus its TOML instance.
The true coefficients are kept beside it in molar_demo_truth.csv.
"""

from pathlib import Path

from mtl_opt.synthetic import sparse_heterogeneity

HERE = Path(__file__).resolve().parent


def molar_demo() -> None:
    problem = sparse_heterogeneity(d=8, M=6, n=120, s=2, sigma=0.1, seed=2026)
    problem.data.to_csv(HERE / "molar_demo.csv", task="task", response="y")
    header = "task," + ",".join(problem.data.feature_names)
    rows = [f"{name}," + ",".join(repr(float(v)) for v in coef)
            for name, coef in zip(problem.data.task_names, problem.coef)]
    (HERE / "molar_demo_truth.csv").write_text("\n".join([header, *rows]) + "\n")


if __name__ == "__main__":
    molar_demo()
