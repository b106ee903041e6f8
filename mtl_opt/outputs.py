"""Output files: where they go, checked before any work, written atomically.

Every file the CLI writes (results, bench tables, plots, exported models)
goes through this module:

- ``output_file(given, name, ...)`` turns what the user wrote for a command's one output file
  (``--out``, ``--plot``, an experiment file's ``plot``) into its target, by one rule for every
  command: a directory (one that exists, or a path ending in ``/``) receives the file under its
  default ``name`` (named after the input), created if missing; ``-`` is standard output where
  the output is one document that can go there (``STDOUT``), and refused with the reason where
  it cannot; anything else is the file.  ``output_directory`` is the same for a command that
  writes several files into a directory (``bench --out``): ``-`` is refused there.
- ``check_output(path, inputs=...)`` runs before the work that produces the
  file: it creates missing parent directories, proves the directory writable
  by creating a probe file there under the temporary name the write will use,
  and refuses a directory, a node that is no regular file (a device or FIFO: the
  rename would replace it) or one of the input files as the target.  A bad path
  costs nothing, not a finished fit.
- ``atomic_path(path)`` yields a temporary file beside ``path`` to write to;
  only a complete write is fsynced and renamed over ``path``, so a failure
  (a full disk, a crash) leaves the file that was there intact.  For ``STDOUT`` the complete
  file is copied to standard output; ``stdout_to_stderr()`` keeps everything else (summaries,
  progress rows, a native solver's log) off it meanwhile.
- ``exclusive(directory)`` locks an output directory for one writer (``flock`` on a lock file in
  it): ``mtl-opt bench`` holds it while it reads, runs and rewrites its results.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError

try:
    import fcntl
except ImportError:   # Windows, which mtl_opt does not claim: no lock (see exclusive)
    fcntl = None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Mode of a new file, as ``open`` would create it (mkstemp's files are private).
NEW_FILE_MODE = 0o666 & ~_umask()


class StandardOutput:
    """The output target ``-``: standard output (see ``output_file``).  Not a path: a writer
    that does not know about it fails at once instead of creating a file named "-"."""

    def __str__(self) -> str:
        return "standard output"

    def __repr__(self) -> str:
        return "STDOUT"


#: Where ``output_file`` sends a command's one document when the user writes ``-``.
STDOUT = StandardOutput()


def output_file(given: str | os.PathLike | None, name: str, *, default_dir: str | Path = "out",
                relative_to: str | Path | None = None, inputs: Iterable[str | Path] = (),
                what: str = "output file", stdout: bool | str = False) -> Path | StandardOutput:
    """The checked target (``check_output``) of a command's one output file, from ``given`` as
    the user wrote it (None: ``default_dir/name``); see the module doc for the rule.

    ``name`` is the file's default name (after the input: ``<instance>.json``); ``relative_to``
    is the folder a relative ``given`` starts from (an experiment file's, for its own keys);
    ``stdout`` is True where ``-`` may mean standard output, else the reason it may not.
    """
    if given is None:
        return check_output(Path(default_dir) / name, inputs=inputs, what=what)
    text = os.fspath(given)
    if text == "-":
        if stdout is True:
            return STDOUT
        raise OutputError(f"{what} cannot be standard output ('-'): {stdout or 'it is a file'}; "
                          f"give a file name (or a directory to write {name} in).")
    if not text:
        raise OutputError(f"{what} is an empty path; give a file name (or a directory to write "
                          f"{name} in).")
    path = Path(relative_to or "", text)   # an absolute text ignores relative_to
    if text.endswith(tuple(filter(None, (os.sep, os.altsep)))) or os.path.isdir(path):
        path = path / name
    return check_output(path, inputs=inputs, what=what)


def output_directory(given: str | os.PathLike, *, what: str = "output directory",
                     why_not_stdout: str = "it is a directory of files") -> Path:
    """The checked directory (created if missing, proven writable) a command writes several files
    into, from ``given`` as the user wrote it: ``-`` is refused (``why_not_stdout``), and so is
    an existing file that is no directory."""
    text = os.fspath(given)
    if text == "-":
        raise OutputError(f"{what} cannot be standard output ('-'): {why_not_stdout}; give a "
                          f"directory.")
    if not text:
        raise OutputError(f"{what} is an empty path; give a directory.")
    path = Path(text)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OutputError(f"{what} {path} exists and is no directory; give a directory (it is "
                          f"created if missing).")
    return check_output_dir(path, what=what)


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
    _temporary(path).unlink(missing_ok=True)   # the name atomic_path will write under can be made
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
def atomic_path(path: str | Path | StandardOutput) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers that go by it keep working);
    after the block it is fsynced and renamed over ``path``, or removed if the block failed.
    For ``STDOUT``: a temporary file elsewhere, copied to standard output once complete."""
    if path is STDOUT:
        with tempfile.TemporaryDirectory(prefix="mtl_opt-") as folder:
            temporary = Path(folder) / "output"
            temporary.touch()
            yield temporary
            _to_stdout(temporary.read_bytes())
        return
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


def _to_stdout(data: bytes) -> None:
    """``data`` on standard output, as bytes where the stream has a binary buffer."""
    try:
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:   # a text stream only (a test's StringIO)
            sys.stdout.write(data.decode())
        else:
            buffer.write(data)
        sys.stdout.flush()
    except OSError as exc:   # a closed pipe, a full disk behind a redirection
        raise OutputError(f"cannot write to standard output: {exc.strerror or exc}.") from None


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Inside the block, what goes to standard output goes to standard error instead: Python's
    prints (``sys.stdout``) and native code's (file descriptor 1: a solver's own log).  A command
    whose document goes to standard output (``-``) does its work in here, and writes the document
    after it, so that standard output holds the document alone."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        if stream is not None:
            stream.flush()
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:   # descriptor 1 or 2 closed by the caller: Python's streams only
        if saved is not None:
            os.close(saved)
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            if sys.__stdout__ is not None:   # what was written to descriptor 1 through it
                with contextlib.suppress(OSError, ValueError):
                    sys.__stdout__.flush()
            os.dup2(saved, 1)
            os.close(saved)


def _temporary(path: Path) -> Path:
    """A new empty file beside ``path``, named after it (``atomic_path`` writes there)."""
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None
    os.close(fd)
    return Path(name)


def write_text(path: str | Path | StandardOutput, text: str) -> None:
    """Replace the content of ``path`` with ``text`` atomically (UTF-8); ``STDOUT``: print it."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


#: The lock file ``exclusive`` keeps in the directory it locks while it holds it.
LOCK_NAME = ".results.lock"


@contextmanager
def exclusive(directory: str | Path, *, wait: bool = False, busy: str = "", warn=None
              ) -> Iterator[None]:
    """Hold ``directory``'s lock for the block: ``flock`` on ``directory/LOCK_NAME``.

    If another process holds it, raise OutputError (naming its pid and ``busy``, what to do),
    or with ``wait`` block until it is released (``warn(message)`` says so first).  The kernel
    releases a ``flock`` when its holder exits, however it exits (a kill included), so a lock is
    never left behind by a dead process; the file itself is removed on release (a writer waiting
    on it then sees it gone and locks the new one: ``_lock``).  The descriptor is not inherited
    by child processes.  Where there is no ``flock`` (Windows, a file system without locks), the
    block runs unlocked after ``warn(message)``.
    """
    lock = Path(directory) / LOCK_NAME
    try:
        fd = None if fcntl is None else _lock(lock, wait, busy, warn)
    except _NoLocks as exc:
        fd = None
        lock.unlink(missing_ok=True)
        if warn is not None:
            warn(f"cannot lock {directory} ({exc}): a second run writing there at the same time "
                 f"would not be detected.")
    else:
        if fd is None and warn is not None:
            warn(f"cannot lock {directory} on this platform (no fcntl.flock): a second run writing "
                 f"there at the same time would not be detected.")
    try:
        yield
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):   # still ours: only a holder removes the file
                lock.unlink()
            os.close(fd)


class _NoLocks(Exception):
    """The file system refuses ``flock`` (ENOLCK, EOPNOTSUPP...): run unlocked."""


def _lock(lock: Path, wait: bool, busy: str, warn) -> int:
    """A descriptor of ``lock`` holding its exclusive ``flock``, once the file it locks is the one
    at that path (a releasing holder unlinks it: a lock taken on the unlinked file is retried)."""
    told = False
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, NEW_FILE_MODE)
        except OSError as exc:
            raise OutputError(f"cannot create the lock file {lock}: {exc.strerror or exc}.") from None
        try:
            if not _flock(fd, block=False):
                message = f"{lock.parent} is in use by another process{_holder(lock)}"
                if not wait:
                    raise OutputError(f"{message}; {busy}." if busy else f"{message}.")
                if not told and warn is not None:
                    warn(f"{message}; waiting for it to finish.")
                    told = True
                _flock(fd, block=True)   # Ctrl-C interrupts the wait (KeyboardInterrupt)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock))
            except FileNotFoundError:
                same = False
            if same:
                with contextlib.suppress(OSError):   # the pid is for the message above only
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)   # the file was removed by its last holder: lock the one at the path now


def _flock(fd: int, *, block: bool) -> bool:
    """Take the exclusive lock of ``fd``: False if another holds it (only when not ``block``)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError as exc:   # ENOLCK, EOPNOTSUPP: no locks here (EINTR is retried by Python)
        raise _NoLocks(exc.strerror or str(exc)) from None
    return True


def _holder(lock: Path) -> str:
    """`` (pid N)`` from the lock file, where its holder has written it."""
    try:
        pid = lock.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""
