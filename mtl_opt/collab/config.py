"""Experiment files (TOML) for ``mtl-opt collab``.

    [system]                   # kind = gaussian | finite | digits; other keys are
    kind = "gaussian"          # the arguments of gaussian_system / random_finite_system /
    n_agents = 20              # digits_system
    delta_env = 0.2
    seed = 0

    [run]
    horizon = 60
    runs = 10
    seed = 0
    step = "constant"          # "constant": alpha; "log": ln T / (lam T), lam defaults to
    alpha = 0.01               # min_i lambda_min(sym A_bar^i) of the system
    n_jobs = 1

    [methods]                  # one entry per method to run, with its hyperparameters
    affpcl = {}
    pfedme = { lam = 15.0 }

    [output]                   # optional
    plot = "curves.png"        # relative to this file; needs matplotlib (mtl_opt[plot])

Unknown tables or keys are errors: a typo must never be silently ignored.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path


from ..errors import InstanceFileError, InvalidDataError, InvalidParameterError
from ..tomlfile import only_keys, output_plot, read_tables
from .algorithms import METHODS, Method, make_method, step_size
from .runner import CollabResult, run_methods
from .systems import LinearSystem, digits_system, gaussian_system, random_finite_system

SYSTEMS = {"gaussian": gaussian_system, "finite": random_finite_system, "digits": digits_system}
RUN_KEYS = {"horizon", "runs", "seed", "step", "alpha", "lam", "n_jobs"}


@dataclass
class Experiment:
    """A parsed experiment file: the system, the methods and how to run them."""

    path: Path
    system_kind: str
    system_params: dict
    methods: dict[str, Method]
    run: dict
    plot: str | None = None     # [output] plot as written, relative to the file

    def build_system(self) -> LinearSystem:
        try:
            return SYSTEMS[self.system_kind](**self.system_params)
        except (InvalidParameterError, InvalidDataError) as exc:
            raise InstanceFileError(f"{self.path}: [system]: {exc}") from None

    def alpha(self, system: LinearSystem) -> float:
        """The constant step size of [run] for this system."""
        lam = self.run.get("lam")
        try:
            return step_size(self.run.get("step", "constant"), alpha=self.run.get("alpha"),
                             horizon=self.run["horizon"],
                             lam=system.strong_monotonicity() if lam is None else lam)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{self.path}: [run]: {exc}") from None

    def execute(self, *, progress: bool = True, **overrides) -> tuple[LinearSystem, CollabResult]:
        """Build the system and run the methods; ``overrides`` replace [run] keys (e.g. horizon)."""
        run = {**self.run, **{k: v for k, v in overrides.items() if v is not None}}
        experiment = Experiment(self.path, self.system_kind, self.system_params, self.methods, run)
        system = experiment.build_system()
        try:
            result = run_methods(system, self.methods, horizon=run["horizon"],
                                 alpha=experiment.alpha(system), runs=run.get("runs", 10),
                                 seed=run.get("seed", 0), n_jobs=run.get("n_jobs", 1),
                                 progress=progress)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{self.path}: [run]: {exc}") from None
        return system, result


def load_experiment(path: str | Path) -> Experiment:
    """Parse and check an experiment file (nothing is run)."""
    path = Path(path)
    raw = read_tables(path, "collab", ("output",))
    system = dict(raw["system"])
    kind = system.pop("kind", None)
    if kind not in SYSTEMS:
        raise InstanceFileError(f"{path}: [system] kind must be one of {sorted(SYSTEMS)}; got {kind!r}.")
    only_keys(path, f"[system] ({kind})", system, set(inspect.signature(SYSTEMS[kind]).parameters))
    only_keys(path, "[run]", raw["run"], RUN_KEYS)
    if "horizon" not in raw["run"]:
        raise InstanceFileError(f"{path}: [run] needs horizon = <number of steps>.")
    return Experiment(path, kind, system, _methods(path, raw["methods"]), dict(raw["run"]),
                      output_plot(path, raw))


def _methods(path: Path, table: dict) -> dict[str, Method]:
    only_keys(path, "[methods]", table, set(METHODS))
    if not table:
        raise InstanceFileError(f"{path}: [methods] is empty; list at least one of {', '.join(METHODS)}.")
    methods = {}
    for name, params in table.items():
        if not isinstance(params, dict):
            raise InstanceFileError(f"{path}: [methods] {name} must be a table of hyperparameters, "
                                    f"e.g. {name} = {{}}; got {params!r}.")
        try:
            methods[name] = make_method(name, **params)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{path}: [methods] {name}: {exc}") from None
    return methods
