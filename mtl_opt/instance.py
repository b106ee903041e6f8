"""Instance files: a TOML description of data, method and solve options.

    [data]                      # where the data is, relative to this file
    path = "molar_demo.csv"
    task = "task"               # CSV: task and response columns,
    response = "y"              #      features = [...] (default: all others)
    # npz: X / y / task name the arrays (defaults "X", "y", "task")

    [method]
    name = "molar"              # a key of mtl_opt.estimators.ESTIMATORS
    threshold = "hard"          # any other key is a hyperparameter of that estimator

    [solve]                     # optional; only for methods that use a solver
    backend = "highs"
    time_limit = 60.0
    rel_gap = 1e-6
    seed = 0                    # also: abs_gap, threads, verbose, [solve.solver_options]

    [[constraints]]             # optional, sparse_mtl only: one table per side constraint
    kind = "include"            # the keys of mtl_opt.formulations.constraints.Constraint
    features = ["age", "sex"]

Unknown tables or keys are errors: a typo must never be silently ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path


from .data import MultiTaskData
from .errors import InstanceFileError, InvalidParameterError
from .formulations.constraints import as_constraints
from .tomlfile import only_keys, read_tables
from .estimators import ESTIMATORS, MTLEstimator
from .solvers.options import SolveOptions

DATA_KEYS = {"csv": {"path", "task", "response", "features"},
             "npz": {"path", "X", "y", "task"}}
#: Estimator parameters that come from [solve], not [method].
SOLVE_PARAMS = ("backend", "solve_options")
SOLVE_KEYS = {"backend"} | {f.name for f in dataclasses.fields(SolveOptions)}


@dataclass
class Instance:
    """A parsed instance file: data location, method, hyperparameters and solve options."""

    path: Path
    data_spec: dict
    method: str
    params: dict
    backend: str | None = None
    options: SolveOptions = field(default_factory=SolveOptions)

    @property
    def data_path(self) -> Path:
        """The data file, resolved against the instance file's directory."""
        return (self.path.parent / self.data_spec["path"]).resolve()

    @property
    def files(self) -> tuple[Path, Path]:
        """The files this instance reads (which no output may overwrite)."""
        return self.path, self.data_path

    def load_data(self) -> MultiTaskData:
        """Read the data file the instance points to."""
        spec = dict(self.data_spec)
        spec.pop("path")
        data_path = self.data_path
        if data_path.suffix == ".npz":
            return MultiTaskData.from_npz(data_path, **spec)
        return MultiTaskData.from_csv(data_path, **spec)

    def estimator(self, *, backend: str | None = None, algorithm: str | None = None,
                  **option_overrides) -> MTLEstimator:
        """The configured estimator; ``backend`` and options override the file's [solve] table,
        ``algorithm`` its [method] algorithm (e.g. "exact": a certified solve)."""
        cls = ESTIMATORS[self.method]
        params = dict(self.params)
        if algorithm is not None:
            if "algorithm" not in cls.param_names():
                raise InstanceFileError(
                    f"{self.path}: method {self.method!r} has one algorithm, so there is none to "
                    f"choose; drop the algorithm override.")
            params["algorithm"] = algorithm
        backend = backend or self.backend
        options = self.options.with_updates(**option_overrides)
        takes_solver = "solve_options" in cls.param_names()
        if not takes_solver and (backend is not None or options != SolveOptions()):
            raise InstanceFileError(
                f"{self.path}: method {self.method!r} uses no solver, so backend and solve "
                f"options have no effect; remove them.")
        extra = {"backend": backend, "solve_options": options} if takes_solver else {}
        estimator = cls(**params, **extra)
        estimator._check_params()
        return estimator

    def check(self, estimator: MTLEstimator, data: MultiTaskData) -> None:
        """``estimator.check(data)`` (every refusal before a fit); a refused parameter or
        constraint (e.g. a feature name the data does not have) names this file."""
        try:
            estimator.check(data)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{self.path}: {exc}") from None


def load_instance(path: str | Path) -> Instance:
    """Parse and check an instance file (data is not read; see ``Instance.load_data``)."""
    path = Path(path)
    raw = read_tables(path, "solve", ("solve",), ("constraints",))
    data_spec = _data_spec(path, raw["data"])
    method, params = _method(path, raw["method"])
    if "constraints" in raw:
        params["constraints"] = _constraints(path, method, raw["constraints"])
    solve = dict(raw.get("solve", {}))
    only_keys(path, "[solve]", solve, SOLVE_KEYS)
    backend = solve.pop("backend", None)
    try:
        options = SolveOptions(**solve)
    except (TypeError, InvalidParameterError) as exc:
        raise InstanceFileError(f"{path}: [solve]: {exc}") from None
    return Instance(path=path, data_spec=data_spec, method=method, params=params,
                    backend=backend, options=options)


def _data_spec(path: Path, table: dict) -> dict:
    if "path" not in table or not isinstance(table["path"], str):
        raise InstanceFileError(f"{path}: [data] needs path = \"<data file relative to the instance>\".")
    kind = "npz" if table["path"].endswith(".npz") else "csv"
    only_keys(path, f"[data] ({kind} file)", table, DATA_KEYS[kind])
    if kind == "csv" and not {"task", "response"} <= table.keys():
        raise InstanceFileError(f"{path}: [data] for a CSV file needs task and response column names.")
    return dict(table)


def _method(path: Path, table: dict) -> tuple[str, dict]:
    params = dict(table)
    name = params.pop("name", None)
    if name not in ESTIMATORS:
        raise InstanceFileError(
            f"{path}: [method] name must be one of {sorted(ESTIMATORS)}; got {name!r}.")
    allowed = set(ESTIMATORS[name].param_names()) - set(SOLVE_PARAMS) - {"constraints"}
    only_keys(path, f"[method] ({name})", params, allowed)
    return name, params


def _constraints(path: Path, method: str, tables) -> list:
    """The ``[[constraints]]`` tables as Constraint records, keys checked (names are checked
    against the data by the estimator's check)."""
    takers = [name for name, cls in ESTIMATORS.items() if "constraints" in cls.param_names()]
    if method not in takers:
        raise InstanceFileError(
            f"{path}: [[constraints]] tables apply to method {' or '.join(map(repr, takers))}; "
            f"method {method!r} takes none: remove them or change [method] name.")
    if not isinstance(tables, list):
        raise InstanceFileError(
            f"{path}: constraints must be [[constraints]] tables (one per constraint, with a "
            f"kind key); got a {type(tables).__name__}.")
    try:
        return list(as_constraints(tables))
    except InvalidParameterError as exc:
        raise InstanceFileError(f"{path}: [[constraints]] {exc}") from None
