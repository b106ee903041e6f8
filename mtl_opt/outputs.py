"""Output files: checked before any work, written atomically.

Every file the CLI writes (results, bench tables, plots, exported models)
goes through this module:

- ``check_output(path, inputs=...)`` runs before the work that produces the
  file: it creates missing parent directories, proves the directory writable
  by creating a probe file there, and refuses a directory or one of the input
  files as the target.  A bad path costs nothing, not a finished fit.
- ``atomic_path(path)`` yields a temporary file beside ``path`` to write to;
  only a complete write is fsynced and renamed over ``path``, so a failure
  (a full disk, a crash) leaves the file that was there intact.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Mode of a new file, as ``open`` would create it (mkstemp's files are private).
NEW_FILE_MODE = 0o666 & ~_umask()


def check_output(path: str | Path, *, inputs: Iterable[str | Path] = (), what: str = "output file"
                 ) -> Path:
    """``path`` as a Path, once it is known that a file can be written there (see module doc)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a directory; give a file name inside it.")
    for source in inputs:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise OutputError(f"{what} {path} is the input file {source}; writing it would destroy "
                              f"the input. Choose another path.")
    check_output_dir(path.parent, what=f"the directory of {what} {path}")
    return path


def check_output_dir(directory: str | Path, *, what: str = "output directory") -> Path:
    """``directory`` as a Path, created if missing and proven writable by a probe file."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as exc:
        raise OutputError(f"cannot write to {what} ({directory}): {exc.strerror or exc}. "
                          f"Choose a writable directory.") from None
    return directory


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers that go by it keep working);
    after the block it is fsynced and renamed over ``path``, or removed if the block failed."""
    path = Path(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else NEW_FILE_MODE)
        os.replace(temporary, path)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}; "
                          f"the file that was there (if any) is unchanged.") from None
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """Replace the content of ``path`` with ``text`` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text)
