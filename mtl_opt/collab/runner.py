"""Run several methods on one system over seeded runs and record per-agent MSE curves.

In run r all methods see the same samples (common random numbers: the
sample stream is seeded by (seed, r), each method's own randomness, e.g.
IFCA's initial models, by (seed, r, method index)).  MSE^i_t = ||x_t^i - x_*^i||^2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

from ..errors import DivergenceError, InvalidParameterError
from ..params import BOOLEAN, HORIZON, NONNEGATIVE_INT, POSITIVE_INT, REPEATS, Interval, validate_params
from ..plotting import drawn, new_axes
from ..resources import require_memory
from .algorithms import Method
from .systems import LinearSystem


@dataclass
class CollabResult:
    """``mse[m, r, t, i]`` = ||x_t^i - x_*^i||^2 of method m, run r, agent i, t = 0..horizon."""

    methods: list[str]
    mse: np.ndarray
    alpha: float
    center_agent: int
    info: dict = field(default_factory=dict)

    def mean_mse(self) -> np.ndarray:
        """(methods, horizon + 1): MSE^0_t = 1/n sum_i MSE^i_t, averaged over runs."""
        return self.mse.mean(axis=(1, 3))

    def center_mse(self) -> np.ndarray:
        """(methods, horizon + 1): MSE of the agent closest to the center, averaged over runs."""
        return self.mse[:, :, :, self.center_agent].mean(axis=1)

    def final(self, last: int = 1) -> dict[str, tuple[float, float]]:
        """method -> (mean MSE^0, center-agent MSE) averaged over the last ``last`` steps."""
        mean, center = self.mean_mse()[:, -last:].mean(axis=1), self.center_mse()[:, -last:].mean(axis=1)
        return {m: (float(a), float(c)) for m, a, c in zip(self.methods, mean, center)}

    def table(self, last: int = 1) -> str:
        """A markdown table of ``final(last)``, with each method's ratio to the best mean MSE."""
        rows = self.final(last)
        best = min(a for a, _ in rows.values())
        lines = ["| method | mean MSE over agents | MSE of center agent | / best |", "|---|---|---|---|"]
        lines += [f"| {m} | {a:.4g} | {c:.4g} | {a / best:.3f} |" for m, (a, c) in rows.items()]
        return "\n".join(lines)


def _one_run(system: LinearSystem, methods: list[Method], horizon: int, alpha: float,
             seed: int, run: int) -> np.ndarray:
    rng = np.random.default_rng([seed, run])
    states = [m.start(system, horizon, np.random.default_rng([seed, run, k]))
              for k, m in enumerate(methods)]
    truth = system.solutions()
    mse = np.empty((len(methods), horizon + 1, system.n_agents))
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported by _raise_if_diverged
        for t in range(horizon + 1):
            for k, (method, state) in enumerate(zip(methods, states)):
                mse[k, t] = ((method.estimate(state) - truth) ** 2).sum(axis=1)
                _raise_if_diverged(mse[k, t], method, alpha, t)
            if t < horizon:
                sample = system.draw(rng)
                for method, state in zip(methods, states):
                    method.step(state, sample, alpha, t)
    return mse


def _raise_if_diverged(mse: np.ndarray, method: Method, alpha: float, t: int) -> None:
    """Raise DivergenceError naming the method, step and agent if an estimate stopped being finite."""
    bad = np.flatnonzero(~np.isfinite(mse))
    if len(bad):
        raise DivergenceError(
            f"method {method.name!r} diverged: agent {bad[0]}'s estimate is not finite after "
            f"step {t} with step size alpha={alpha:g}. Lower alpha, or use step = \"log\".")


@validate_params({"horizon": HORIZON, "runs": REPEATS, "seed": NONNEGATIVE_INT,
                  "alpha": [Interval(0, None, open_low=True, note="the constant step size")],
                  "n_jobs": [Interval(None, -1, integer=True, note="-1: all cores"), *POSITIVE_INT],
                  "progress": [BOOLEAN]})
def run_methods(system: LinearSystem, methods: dict[str, Method], *, horizon: int, alpha: float,
                runs: int = 10, seed: int = 0, n_jobs: int = 1, progress: bool = True) -> CollabResult:
    """Run every method ``runs`` times for ``horizon`` steps with constant step ``alpha``.

    Examples
    --------
    >>> from mtl_opt.collab import gaussian_system, make_method, run_methods
    >>> system = gaussian_system(5, 3, delta_env=0.2, delta_obj=0.2, seed=0)
    >>> result = run_methods(system, {m: make_method(m) for m in ("independent", "affpcl")},
    ...                      horizon=50, alpha=0.05, runs=2, seed=0, progress=False)
    >>> result.mean_mse().shape          # (methods, steps)
    (2, 51)
    """
    if not methods:
        raise InvalidParameterError("give at least one method to run.")
    require_memory(8 * len(methods) * (runs + 1) * (horizon + 1) * system.n_agents,
                   f"{len(methods)} methods x {runs} runs x {horizon} steps x {system.n_agents} agents of MSE",
                   "lower the horizon or the number of runs")
    jobs = (delayed(_one_run)(system, list(methods.values()), horizon, float(alpha), seed, r)
            for r in range(runs))
    bar = tqdm(Parallel(n_jobs=n_jobs, return_as="generator")(jobs), total=runs, unit="run",
               disable=not progress, desc=f"{len(methods)} methods x {horizon} steps")
    mse = np.stack(list(bar), axis=1)
    return CollabResult(list(methods), mse, float(alpha), system.center_agent())


def plot_curves(result: CollabResult, ax, *, title: str = "") -> None:
    """On ``ax``: mean MSE over agents per method (solid) and AffPCL's center agent (dashed)."""
    steps = np.arange(result.mse.shape[2])
    for k, name in enumerate(result.methods):
        line, = ax.plot(steps, result.mean_mse()[k], label=name, lw=1.2)
        if name == "affpcl":
            ax.plot(steps, result.center_mse()[k], ls="--", color=line.get_color(),
                    label=f"{name}, center agent {result.center_agent}")
    ax.set(yscale="log", xlabel="step t", ylabel="MSE", title=title)


def plot(result: CollabResult, path=None, *, title: str = "", ax=None):
    """``plot_curves`` of ``result`` on ``ax`` (a new Figure's when None), written to the image
    ``path`` when given; returns the Axes."""
    ax = new_axes() if ax is None else ax
    plot_curves(result, ax, title=title)
    ax.legend(fontsize=7)
    return drawn(ax, path)
