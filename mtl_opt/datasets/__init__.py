"""The demo files shipped with mtl_opt, from an installed package as from a checkout.

They are the repository's ``instances/`` (``instances`` here links to it, and the wheel carries
its files as package data): estimator instances (``mtl-opt demo NAME`` solves one), a bandit and
a collaborative-learning experiment, and ``library/``, the bench's instances.

    >>> from mtl_opt import datasets
    >>> instance = datasets.load("molar_demo")      # an Instance: .load_data(), .estimator()
    >>> datasets.path("molar_demo").name
    'molar_demo.toml'
    >>> datasets.frame("molar_demo").columns.tolist()[:4]   # its data as a long table (pandas)
    ['task', 'y', 'x0', 'x1']
    >>> datasets.load("library/small_sparse_l0l2").method    # the bench library, by name too
    'sparse_mtl'
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from ..errors import InvalidParameterError
from ..tomlfile import read_toml

__all__ = ["command", "folder", "frame", "load", "names", "path"]

#: The command that runs a demo file, by a top-level table only its kind of file has.
_COMMANDS = {"environment": "bandit", "system": "collab"}


def folder() -> Path:
    """The directory of the shipped files (their data files sit beside them)."""
    return Path(str(files(__name__) / "instances")).resolve()


def names(*, library: bool = False) -> list[str]:
    """The shipped demos' names (the stems of the TOML files), or with ``library`` the bench
    library's instances, each as ``"library/NAME"`` (tiny to medium, with known optima in
    ``folder() / "library" / "optima.csv"``)."""
    if library:
        return sorted(f"library/{file.stem}" for file in (folder() / "library").glob("*.toml"))
    return sorted(file.stem for file in folder().glob("*.toml"))


def path(name: str) -> Path:
    """The shipped file of demo ``name``, or of bench instance ``"library/NAME"``; an unknown name
    is an error listing the known ones."""
    library = name.startswith("library/")
    known = names(library=library)
    if name not in known:
        raise InvalidParameterError(
            f"no shipped bench instance {name!r}; the library holds: {', '.join(known)}." if library else
            f"no shipped demo {name!r}; the demos are: {', '.join(known)} (listed by `mtl-opt demo`; "
            f"the bench library's instances are 'library/NAME').")
    return folder() / f"{name}.toml"


def command(name: str) -> str:
    """The ``mtl-opt`` command that runs demo ``name``: ``solve``, ``bandit`` or ``collab``."""
    tables = read_toml(path(name), "demo file")
    return next((_COMMANDS[table] for table in tables if table in _COMMANDS), "solve")


def load(name: str):
    """Estimator demo ``name`` as an ``mtl_opt.instance.Instance``."""
    from ..instance import load_instance

    return load_instance(path(name))


def frame(name: str):
    """The data of estimator demo ``name`` as the long table it is stored as: a pandas DataFrame
    with one row per observation, its task, response and feature columns (``molar_demo``:
    ``task``, ``y``, ``x0`` ... ``x7``).  Needs pandas (``pip install 'mtl_opt[pandas]'``); a demo
    stored as arrays (``.npz``) is refused, naming ``load(name).load_data()``."""
    instance = load(name)
    if instance.data_path.suffix != ".csv":
        raise InvalidParameterError(
            f"demo {name!r} stores its data as arrays ({instance.data_path.name}), not a table: "
            f"use datasets.load({name!r}).load_data(), a MultiTaskData.")
    try:
        import pandas as pd
    except ImportError:
        raise InvalidParameterError("datasets.frame needs pandas: pip install 'mtl_opt[pandas]'.") from None
    return pd.read_csv(instance.data_path)
