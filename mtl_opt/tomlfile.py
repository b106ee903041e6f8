"""Reading TOML configuration files strictly: a clear error for a missing or bad file or an unknown key.

Every TOML file mtl_opt reads (instance files, which ``mtl-opt bench`` reads too; bandit and collab
experiment files; the shipped demos) is read by ``read_toml``, as UTF-8 with an optional byte order
mark: Windows editors (Notepad) start a UTF-8 file with one, which TOML itself does not allow.
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from .errors import InstanceFileError


def read_toml(path: Path, what: str) -> dict:
    """The parsed file; ``what`` names the kind of file in the error ("instance file", ...)."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8-sig"))  # -sig: drops a BOM
    except FileNotFoundError:
        raise InstanceFileError(f"{what} {str(path)!r} does not exist.") from None
    except OSError as exc:  # a directory, no permission...
        raise InstanceFileError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}; "
                                f"expected a readable TOML file.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InstanceFileError(f"{path}: not valid TOML: {exc}.") from None


def only_keys(path: Path, where: str, table: dict, allowed: set) -> None:
    """Refuse keys outside ``allowed``: a typo must never be silently ignored."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise InstanceFileError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in {where}; "
            f"allowed: {', '.join(sorted(allowed))}.")


#: The kinds of TOML file, by the ``mtl-opt`` command that runs them: what the file is called
#: and the top-level tables it must have.
FILE_KINDS = {"solve": ("instance file", ("data", "method")),
              "bandit": ("experiment file", ("environment", "policies", "run")),
              "collab": ("experiment file", ("system", "run", "methods"))}


def read_tables(path: Path, command: str, optional: tuple = (), arrays: tuple = ()) -> dict:
    """The parsed file of ``command`` (``FILE_KINDS``): its required top-level tables present,
    the ``optional`` ones tables where present, ``arrays`` (arrays of tables, checked by the
    caller) allowed, nothing else.  Another command's file is named as such."""
    what, required = FILE_KINDS[command]
    raw = read_toml(path, what)
    for other, (_, tables) in FILE_KINDS.items():
        if other != command and set(tables) <= raw.keys() and not set(required) <= raw.keys():
            raise InstanceFileError(f"{path} is a file for 'mtl-opt {other}' (it has the tables "
                                    f"{', '.join(tables)}), not an {what}; run it with: "
                                    f"mtl-opt {other} {path}")
    only_keys(path, "the top level", raw, {*required, *optional, *arrays})
    for table in (*required, *optional):
        if table in raw and not isinstance(raw[table], dict):
            raise InstanceFileError(f"{path}: {table} must be a [{table}] table; got "
                                    f"{table} = {raw[table]!r} at the top level.")
    for table in required:
        if table not in raw:
            raise InstanceFileError(f"{path}: missing [{table}] table.")
    return raw


def output_plot(path: Path, raw: dict) -> str | None:
    """The ``plot`` key of an experiment file's optional ``[output]`` table (its one key), as
    written: ``outputs.output_file`` resolves it, relative to the file (None: no plot)."""
    output = raw.get("output", {})
    only_keys(path, "[output]", output, {"plot"})
    plot = output.get("plot")
    if plot is not None and not isinstance(plot, str):
        raise InstanceFileError(f"{path}: [output] plot must be a file name in quotes, e.g. "
                                f"plot = \"curves.png\"; got plot = {plot!r}.")
    return plot
