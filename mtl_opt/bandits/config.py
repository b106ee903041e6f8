"""Experiment files (TOML) for ``mtl-opt bandit``.

    [environment]              # kind = a name in registry.ENVIRONMENTS; other keys are
    kind = "model_c"           # the environment's constructor arguments
    dim = 30

    [policies]                 # one entry per policy (a name in registry.POLICIES)
    molarb = {}                # with its hyperparameters
    ols = {}

    [run]
    horizon = 2000
    trials = 20
    seed = 0

    [output]                   # optional
    plot = "regret.png"        # relative to this file; needs matplotlib (mtl_opt[plot])

Unknown tables or keys are errors: a typo must never be silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InstanceFileError, InvalidDataError, InvalidParameterError
from ..tomlfile import only_keys, output_plot, read_tables
from .base import Environment, Policy
from .registry import ENVIRONMENTS, POLICIES, build
from .runner import BanditResult, run_bandit

RUN_KEYS = {"horizon", "trials", "seed"}


@dataclass
class BanditExperiment:
    """A parsed experiment file: environment, policies and how long to run them."""

    path: Path
    environment: Environment
    policies: list[Policy]
    run: dict
    plot: str | None = None     # [output] plot as written, relative to the file

    def execute(self, *, progress: bool = True, **overrides) -> BanditResult:
        """Run the policies; ``overrides`` replace [run] keys (None means keep the file's)."""
        run = {**self.run, **{k: v for k, v in overrides.items() if v is not None}}
        try:
            return run_bandit(self.environment, self.policies, run["horizon"], run.get("seed", 0),
                              trials=run.get("trials", 1), progress=progress)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{self.path}: [run]: {exc}") from None


def load_bandit_experiment(path: str | Path) -> BanditExperiment:
    """Parse the file and build the environment and policies (nothing is run)."""
    path = Path(path)
    raw = read_tables(path, "bandit", ("output",))
    env_params = dict(raw["environment"])
    kind = env_params.pop("kind", None)
    if kind is None:
        raise InstanceFileError(f"{path}: [environment] needs kind = one of {sorted(ENVIRONMENTS)}.")
    try:
        environment = build(ENVIRONMENTS, "environment", kind, env_params)
    except (InvalidParameterError, InvalidDataError) as exc:
        raise InstanceFileError(f"{path}: [environment]: {exc}") from None
    if not raw["policies"]:
        raise InstanceFileError(f"{path}: [policies] is empty; list at least one of {', '.join(POLICIES)}.")
    policies = []
    for name, params in raw["policies"].items():
        if not isinstance(params, dict):
            raise InstanceFileError(f"{path}: [policies] {name} must be a table of hyperparameters, "
                                    f"e.g. {name} = {{}}; got {params!r}.")
        try:
            policies.append(build(POLICIES, "policy", name, params))
        except (InvalidParameterError, InvalidDataError) as exc:
            raise InstanceFileError(f"{path}: [policies] {name}: {exc}") from None
    only_keys(path, "[run]", raw["run"], RUN_KEYS)
    if "horizon" not in raw["run"]:
        raise InstanceFileError(f"{path}: [run] needs horizon = <number of rounds>.")
    return BanditExperiment(path, environment, policies, dict(raw["run"]), output_plot(path, raw))
