"""Reading TOML configuration files strictly: a clear error for a missing or bad file or an unknown key."""

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
        return tomllib.loads(Path(path).read_text())
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


def read_tables(path: Path, what: str, required: tuple, optional: tuple = ()) -> dict:
    """The parsed file, with only the ``required`` and ``optional`` top-level tables, the required present."""
    raw = read_toml(path, what)
    only_keys(path, "the top level", raw, set(required) | set(optional))
    for table in required:
        if not isinstance(raw.get(table), dict):
            raise InstanceFileError(f"{path}: missing [{table}] table.")
    return raw
