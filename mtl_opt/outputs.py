"""Output files: checked before any work, written atomically.

Every file the CLI writes (results, bench tables, plots, exported models)
goes through this module:

- ``check_output(path, inputs=...)`` runs before the work that produces the
  file: it creates missing parent directories, proves the directory writable
  by creating a probe file there under the temporary name the write will use,
  and refuses a directory, a node that is no regular file (a device or FIFO: the
  rename would replace it) or one of the input files as the target.  A bad path
  costs nothing, not a finished fit.
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
    try:
        directory, special = path.is_dir(), path.exists() and not path.is_file()
        source = next((s for s in inputs if path.exists() and Path(s).exists()
                       and os.path.samefile(path, s)), None)
    except OSError as exc:   # e.g. a name too long for the file system
        raise OutputError(f"cannot use {what} {path}: {exc.strerror or exc}. "
                          f"Choose another path.") from None
    if directory:
        raise OutputError(f"{what} {path} is a directory; give a file name inside it.")
    if special:   # the atomic rename would replace the device node or FIFO itself
        raise OutputError(f"{what} {path} is not a regular file (a device, FIFO or socket); "
                          f"give the path of a regular file.")
    if source is not None:
        raise OutputError(f"{what} {path} is the input file {source}; writing it would destroy "
                          f"the input. Choose another path.")
    check_output_dir(path.parent, what=f"the directory of {what} {path}")
    _temporary(path).unlink()   # the name atomic_path will write under can be created
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
    temporary = _temporary(path)
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


def _temporary(path: Path) -> Path:
    """A new empty file beside ``path``, named after it (``atomic_path`` writes there)."""
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None
    os.close(fd)
    return Path(name)


def write_text(path: str | Path, text: str) -> None:
    """Replace the content of ``path`` with ``text`` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text)
