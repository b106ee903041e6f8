"""Instance files: a TOML description of data, method and solve options.

    [data]                      # where the data is, relative to this file
    path = "molar_demo.csv"
    task = "task"               # CSV: task and response columns,
    response = "y"              #      features = [...] (default: all others)
    # weight = "w"              # optional: a column (npz: an array) of per-row sample weights
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

import csv
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .data import MultiTaskData
from .data.io import _read_npz as read_npz_arrays
from .errors import InstanceFileError, InvalidParameterError
from .formulations.constraints import as_constraints
from .tomlfile import only_keys, read_tables
from .estimators import ESTIMATORS, MTLEstimator
from .solvers.options import SolveOptions

DATA_KEYS = {"csv": {"path", "task", "response", "features", "weight"},
             "npz": {"path", "X", "y", "task", "weight"}}
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
        """Read the data file the instance points to (a ``weight`` column is not a feature:
        ``sample_weight`` reads it)."""
        spec = dict(self.data_spec)
        spec.pop("path")
        weight = spec.pop("weight", None)
        data_path = self.data_path
        if data_path.suffix == ".npz":
            return MultiTaskData.from_npz(data_path, **spec)
        if weight is not None and spec.get("features") is None:
            spec["features"] = [c for c in _csv_header(data_path)
                                if c not in (spec["task"], spec["response"], weight)]
        return MultiTaskData.from_csv(data_path, **spec)

    def sample_weight(self, data: MultiTaskData) -> np.ndarray | None:
        """The ``weight`` column (npz: array) of the data file in the stacked task order of
        ``data`` (its ``load_data``), or None when [data] names none."""
        weight = self.data_spec.get("weight")
        if weight is None:
            return None
        if self.data_path.suffix == ".npz":
            arrays = read_npz_arrays(self.data_path)   # the checks load_data's reading made
            task = self.data_spec.get("task", "task")
            if weight not in arrays:
                raise InstanceFileError(f"{self.path}: [data] weight: the npz file holds no array "
                                        f"{weight!r}; it holds {sorted(arrays)}.")
            labels, values = np.asarray(arrays[task]).astype(str), np.asarray(arrays[weight], float)
        else:
            labels, values = _csv_weights(self.path, self.data_path, self.data_spec["task"], weight)
        if len(values) != data.n_total:
            raise InstanceFileError(f"{self.path}: [data] weight {weight!r} has {len(values)} "
                                    f"entries for {data.n_total} rows.")
        return np.concatenate([values[labels == name] for name in data.task_names])

    def fit(self, estimator: MTLEstimator, data: MultiTaskData) -> MTLEstimator:
        """``estimator.fit(data)``, with the file's sample weights where [data] names them."""
        weights = self._checked_weights(estimator, data)
        return estimator.fit(data) if weights is None else estimator.fit(data, sample_weight=weights)

    def _checked_weights(self, estimator: MTLEstimator, data: MultiTaskData) -> np.ndarray | None:
        from .estimators.base import SampleWeighted

        weights = self.sample_weight(data)
        if weights is not None and not isinstance(estimator, SampleWeighted):
            raise InstanceFileError(
                f"{self.path}: [data] weight: method {self.method!r} takes no sample weights; "
                f"remove weight, or use a method whose fit takes sample_weight.")
        return weights

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
        self._checked_weights(estimator, data)
        try:
            estimator.check(data)
        except InvalidParameterError as exc:
            raise InstanceFileError(f"{self.path}: {exc}") from None


def _csv_header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return next(csv.reader(fh), [])


def _csv_weights(instance: Path, path: Path, task: str, weight: str) -> tuple[np.ndarray, np.ndarray]:
    """(task labels, weights) of every row of the CSV file, in file order."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        if weight not in header:
            raise InstanceFileError(f"{instance}: [data] weight: {path} has no column {weight!r}; "
                                    f"its columns: {header}.")
        i, j = header.index(task), header.index(weight)
        labels, values = [], []
        for row in reader:
            if not row:
                continue
            try:
                values.append(float(row[j]))
            except ValueError:
                raise InstanceFileError(f"{path}: line {reader.line_num}, column {weight!r}: "
                                        f"{row[j]!r} is not a number (a sample weight).") from None
            labels.append(row[i])
    return np.asarray(labels, dtype=str), np.asarray(values)


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
