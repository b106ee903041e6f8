"""Plots of benchmark rows: a Dolan-More performance profile and gap-versus-time per instance."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ..plotting import drawn, new_axes
from ..result import WITHIN_TOLERANCE, relative_gap
from .runner import NOT_APPLICABLE

#: Gaps below this are drawn at it (a log axis has no zero).
GAP_FLOOR = 1e-8
#: Solvers that tie draw on top of each other; styles keep them apart.
LINE_STYLES = ("-", "--", ":", "-.")


def performance_ratios(rows: list[dict]) -> dict[str, dict[str, float]]:
    """solver -> instance -> time / best time on that instance (Dolan and More 2002).

    A solver solves an instance when every repeat ends with a proven gap
    within the instance's tolerance (status ``optimal``); its
    time is then the median over repeats, otherwise infinity.  Only instances
    a solver applies to are listed for it.
    """
    times = defaultdict(list)
    solved = defaultdict(lambda: True)
    for r in rows:
        if r["status"] == NOT_APPLICABLE:
            continue
        key = (r["solver"], r["instance"])
        times[key].append(r["time_s"])
        solved[key] &= r["status"] in WITHIN_TOLERANCE
    best_time = {key: statistics.median(t) if solved[key] else math.inf for key, t in times.items()}
    best = defaultdict(lambda: math.inf)
    for (_, instance), t in best_time.items():
        best[instance] = min(best[instance], t)
    ratios = defaultdict(dict)
    for (solver, instance), t in best_time.items():
        ratios[solver][instance] = t / best[instance] if math.isfinite(t) else math.inf
    return dict(ratios)


def plot_profile(rows: list[dict], path: Path) -> None:
    """rho_s(tau) = share of the solver's instances solved within tau x the best time, one panel
    per method family (log2 tau axis); a solver that never solves stays at 0."""
    ratios = performance_ratios(rows)
    methods = {r["solver"]: r["method"] for r in rows if r["status"] != NOT_APPLICABLE}
    families = sorted({methods[s] for s in ratios})
    finite = [r for per in ratios.values() for r in per.values() if math.isfinite(r)]
    top = max(finite + [2.0]) * 1.5
    axes = new_axes((4.5 * len(families), 4), ncols=len(families), squeeze=False)
    fig = axes.flat[0].figure
    for ax, family in zip(axes.flat, families):
        solvers = [s for s in ratios if methods[s] == family]
        for solver, style in zip(solvers, itertools.cycle(LINE_STYLES)):
            values = sorted(ratios[solver].values())
            solved = [v for v in values if math.isfinite(v)]
            ys = [0.0] + [(i + 1) / len(values) for i in range(len(solved))]
            ax.step([1.0, *solved, top], [*ys, ys[-1]], where="post", linestyle=style, linewidth=1.8,
                    label=f"{solver} ({len(solved)}/{len(values)} solved)")
        ax.set_xscale("log", base=2)
        ax.set(xlim=(1, top), ylim=(-0.02, 1.02), title=family,
               xlabel="tau (time / best time on the instance)", ylabel="share solved within tau")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Performance profiles: time to a proven gap within tolerance", fontsize=10)
    drawn(axes.flat[0], path, dpi=110)


def plot_gap_time(rows: list[dict], path: Path) -> None:
    """Per instance, relative gap against time for each certifying solver (first repeat).

    Solvers that log their bounds per iteration (outer approximation) draw a
    step line; the others one point at their final time and gap.
    """
    by_instance = defaultdict(list)
    for r in rows:
        if r["repeat"] == 0 and r["rel_gap"] is not None:
            by_instance[Path(r["instance"]).stem].append(r)
    if not by_instance:  # still a file, as the command reports one
        ax = new_axes((4.2, 1.5))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no solver reported a gap", ha="center", va="center")
        drawn(ax, path, dpi=80)
        return
    cols = min(3, len(by_instance))
    nrows = math.ceil(len(by_instance) / cols)
    axes = new_axes((4.2 * cols, 3.2 * nrows), nrows=nrows, ncols=cols, squeeze=False)
    for ax, (name, runs) in zip(axes.flat, sorted(by_instance.items())):
        for r in runs:
            points = [(t, relative_gap(ub, lb)) for t, lb, ub in r["trace"]] or [(r["time_s"], r["rel_gap"])]
            shown = [(t, max(g, GAP_FLOOR)) for t, g in points
                     if g is not None and math.isfinite(g)]
            if shown:
                ax.step(*zip(*shown), where="post", marker="o", markersize=3, label=r["solver"])
        ax.set(yscale="log", xlim=(0, None), title=name, xlabel="time (s)",
               ylabel=f"relative gap (floor {GAP_FLOOR:g})")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(by_instance):]:
        ax.set_visible(False)
    drawn(axes.flat[0], path, dpi=80)
