"""matplotlib, an optional extra, loaded only when a plot is asked for."""

from __future__ import annotations

import math
from pathlib import Path

from .errors import InvalidParameterError

__all__ = ["plot_progress"]

_MISSING = "plotting needs matplotlib: pip install 'mtl_opt[plot]'."


def new_axes(figsize=(6, 4), **subplots):
    """Axes of a new matplotlib Figure that no pyplot state tracks (``ax.figure.savefig(path)``
    writes it; in a notebook, ``ax.figure`` shows it), or a clear error naming the extra to
    install.  No backend is chosen: a notebook's or a script's own stays in force."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise InvalidParameterError(_MISSING) from None
    return Figure(figsize=figsize, layout="constrained").subplots(**subplots)


def drawn(ax, path, dpi: int = 120):
    """``ax`` (as ``new_axes`` made it when None), its figure written to ``path`` when given."""
    if path is not None:
        ax.figure.savefig(path, dpi=dpi)
    return ax


#: Why a plot cannot go to standard output ('-'), where bandit and collab print their table.
NO_STDOUT = "the table is printed there, and a plot is a PNG image"


def plot_target(flag: str | None, key: str | None, experiment: Path):
    """Where ``mtl-opt bandit`` or ``collab`` draws its plot (None: nowhere): the ``--plot`` flag,
    else the experiment file's ``[output] plot`` (relative to the file), by ``outputs.output_file``'s
    rule (a directory gets ``<experiment>.png``; '-' is refused).  Checked, and matplotlib
    loaded, before the run: a bad path or a missing extra costs nothing."""
    from .outputs import output_file

    if flag is None and key is None:
        return None
    target = output_file(flag if flag is not None else key, f"{Path(experiment).stem}.png",
                         relative_to=None if flag is not None else Path(experiment).parent,
                         inputs=[experiment], what="plot", stdout=NO_STDOUT)
    new_axes()
    return target


def plot_progress(result, ax=None):
    """The incumbent and the lower bound of a fit against time, from its log (``result.log``: a
    FitResult, or the rows themselves); the Axes drawn on (a new Figure's when ``ax`` is None:
    save it with ``ax.figure.savefig(path)``).

    Every exact path logs rows of time, incumbent, lower_bound, gap and nodes
    (``solvers.progress``); a figure not known yet (e.g. no bound before the first one) is a gap
    in its line.  A log without such rows (a heuristic fit) is an InvalidParameterError.

    Examples
    --------
    >>> from mtl_opt import SolveOptions, SparseMTL
    >>> from mtl_opt.plotting import plot_progress
    >>> from mtl_opt.synthetic import smtl_simulation
    >>> data = smtl_simulation(p=8, K=2, n=40, s_true=2, q=3, seed=0).data
    >>> fit = SparseMTL(s=2, lambda_ridge=0.1, algorithm="oa_multi_tree",
    ...                 solve_options=SolveOptions(time_limit=30)).fit(data)
    >>> ax = plot_progress(fit.result_)
    >>> ax.figure.savefig("progress.png")       # or show ax.figure in a notebook
    """
    rows = [row for row in getattr(result, "log", result) if _number(row.get("time"))]
    lines = {key: [row[key] if _number(row.get(key)) else math.nan for row in rows]
             for key in ("incumbent", "lower_bound")}
    if not any(_number(v) for values in lines.values() for v in values):
        raise InvalidParameterError(
            "this result has no progress log to plot (rows with time, incumbent and lower_bound): "
            "its method logs none; exact algorithms do (e.g. algorithm='exact').")
    ax = new_axes() if ax is None else ax
    times = [row["time"] for row in rows]
    ax.step(times, lines["incumbent"], where="post", label="incumbent", color="tab:blue")
    ax.step(times, lines["lower_bound"], where="post", label="lower bound", color="tab:orange")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("objective")
    name = " ".join(str(getattr(result, key, "")) for key in ("method", "algorithm", "status")).strip()
    if name:
        ax.set_title(name)
    ax.legend()
    return ax


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
