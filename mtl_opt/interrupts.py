"""One way every path stops: the first Ctrl-C (SIGINT), or SIGTERM under ``mtl-opt``, asks the
running work to stop; it never raises inside compiled or native code.

Python's own SIGINT handler raises KeyboardInterrupt wherever the main thread is: inside a numba
kernel's return (a SystemError), a HiGHS or SCIP callback (a crash), Pyomo's model construction
(an error printed on stdout), a ctypes callback of the numba compiler (swallowed).  Inside a
``stoppable()`` region the first signal only records the request (``requested()``).  Then:

- every ``Deadline`` has expired (``deadline.py``), so each loop (bcd, the trees, OA, FISTA)
  stops as at its time limit, with its incumbent and its proven bound;
- native solvers are stopped through their own mechanisms: HiGHS's interrupt callbacks
  (``user_interrupt``), SCIP from the thread that waits for it (``interruptSolve`` and its
  LP's interrupt, ``backends.scip.optimize_stoppably``), Gurobi by its own catch of SIGINT;
- the fit's status is ``interrupted`` (``method.final_status``) and ``fit`` raises
  ``FitInterrupted`` carrying that result (the estimator keeps it as ``result_``).

A second signal is not soft: in ``mtl-opt`` it kills the child processes and exits at once
(130, or 143 after SIGTERM); in Python it raises KeyboardInterrupt as Python would.  Child
processes (the bnb worker, cross-validation's workers) are killed when the work stops, and stop
by themselves when their parent is gone (``watch_parent``).

Outside a ``stoppable()`` region (pure Python and numpy: reading files, bandits, tables), SIGINT
raises KeyboardInterrupt as usual, and under ``mtl-opt`` so does SIGTERM.  Signals are taken
over in the main thread only; elsewhere (a worker thread) a region only holds its ``Stop``.

A region's work can also be stopped alone, from any thread, by its ``Stop`` (``stoppable()``
yields it; a fit's callback that raised, ``solvers.progress``): ``requested()`` is then true in
that region (a context variable: another thread's fit runs on), and the same story follows.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

#: Exit codes of a command stopped by a signal, as a shell reports a process it killed.
EXIT_CODES: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}


class FitInterrupted(KeyboardInterrupt):
    """A fit stopped by Ctrl-C (or SIGTERM under ``mtl-opt``): ``result`` is what it had (its best
    incumbent and proven bound, status ``interrupted``), or None when it stopped before an
    estimate (e.g. during the one-time compile of the bnb kernels).

    Examples
    --------
    >>> from mtl_opt import FitInterrupted, SparseMTL
    >>> try:                                               # Ctrl-C during a fit
    ...     pass   # SparseMTL(algorithm="exact", ...).fit(data)
    ... except FitInterrupted as stop:
    ...     result = stop.result   # the best estimate and the bound proven by then, or None
    >>> issubclass(FitInterrupted, KeyboardInterrupt)
    True
    """

    def __init__(self, result=None, where: str = ""):
        self.result, self.where = result, where
        super().__init__(where or "the fit was interrupted")


class _State:
    """The process's signal state: the first signal seen, how deep in regions, how to exit."""

    signum: int | None = None   # the first signal of the current request
    depth = 0                   # nested stoppable() regions entered
    hard_exit = False           # mtl-opt: a second signal exits at once
    installed = False
    final_code: int | None = None   # the command is over: a signal exits with this code
    terminal: int | None = None     # mtl-opt: a copy of its stderr, which native_streams may silence


_state = _State()


class Stop:
    """The stop of one ``stoppable()`` region's work alone (``ask``, from any thread)."""

    def __init__(self) -> None:
        self.asked = False

    def ask(self) -> None:
        self.asked = True


#: The ``Stop`` of the region this code runs in (None: outside any region).
_region: contextvars.ContextVar[Stop | None] = contextvars.ContextVar("mtl_opt_region", default=None)


def requested() -> bool:
    """Whether a stop has been asked (a signal, a native solver that caught one, or this
    region's ``Stop``)."""
    region = _region.get()
    return _state.signum is not None or (region is not None and region.asked)


def request(signum: int = signal.SIGINT) -> None:
    """Record a stop, as a signal does: where a native solver caught SIGINT itself (Gurobi), so
    the rest of the fit stops too."""
    if _state.signum is None:
        _state.signum = signum


def exit_code() -> int:
    """The exit code of the request: 130 after SIGINT, 143 after SIGTERM."""
    return EXIT_CODES.get(_state.signum or signal.SIGINT, 130)


def exit_on_signal(code: int) -> None:
    """The command is over (its exit code ``code``): a signal from now on exits at once with it,
    and once ``cli_signals`` ends, signals are ignored while the interpreter shuts down (Python's
    own handler would raise in the middle of it, and late in it Python resets SIGINT to its
    default, which kills the process with another code)."""
    _state.final_code = code


def _handler(signum, frame):
    if _state.final_code is not None:
        _exit_now(_state.final_code)
    if _state.signum is not None:          # the second signal: not soft
        if _state.hard_exit:
            kill_children()
            os.write(_state.terminal if _state.terminal is not None else 2,
                     b"mtl-opt: interrupted again: stopped at once\n")
            _exit_now(EXIT_CODES.get(signum, 130))
        raise KeyboardInterrupt
    if _state.depth > 0:
        _state.signum = signum
        return
    _state.signum = signum                 # outside a region: stop as Python would
    raise KeyboardInterrupt


#: The resource tracker's warning about named semaphores a killed worker left (``-W`` form).
TRACKER_WARNING = "ignore:resource_tracker:UserWarning"


@contextlib.contextmanager
def cli_signals():
    """``mtl-opt``'s whole run: SIGINT and SIGTERM through ``_handler``, a second one exits at
    once.  The previous handlers come back at exit.

    A worker killed on a stop (``LocalWorkers.close``) may leave a semaphore it made; the
    resource tracker unlinks it at its end, so nothing stays behind, but says so on the terminal
    after our one line (CI saw it once under load, after one Ctrl-C on the clustered tree).  The
    tracker, started later by this process, takes its ``-W`` options from ``sys.warnoptions``
    (``subprocess._args_from_interpreter_flags``, in Python's tracker and loky's), so that one
    warning is ignored there; its cleanup is not."""
    if TRACKER_WARNING not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_WARNING)
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in EXIT_CODES}
    _state.signum, _state.hard_exit, _state.installed = None, True, True
    _state.terminal = os.dup(2)
    for s in EXIT_CODES:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous if _state.final_code is None else signal.SIG_IGN)
        _state.signum, _state.hard_exit, _state.installed = None, False, False
        os.close(_state.terminal)
        _state.terminal = None


@contextlib.contextmanager
def stoppable() -> Iterator[Stop]:
    """A region whose work stops softly on the first SIGINT (see the module's docstring); yields
    its ``Stop`` (a region inside another is part of its work: the outer one's).

    In Python, SIGINT is taken over only while Python's own handler is in place (a program's or
    a notebook's own handler is left alone; ``requested()`` is then never set by a signal), and
    the request is cleared when the outermost region ends, so the next fit runs in full."""
    main = threading.current_thread() is threading.main_thread()
    own = (main and not _state.installed and _state.depth == 0
           and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    stop = _region.get() or Stop()
    token = _region.set(stop)
    if own:
        _state.signum = None
        signal.signal(signal.SIGINT, _handler)
    if main:
        _state.depth += 1
    try:
        yield stop
    finally:
        _region.reset(token)
        if main:
            _state.depth -= 1
        if own:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _state.signum = None


def kill_children() -> None:
    """Kill every descendant process of this one (the bnb worker, cross-validation's workers,
    bench cells) at once, when exiting at once: what an interrupted command must not leave
    behind.  Not loky's resource tracker, which exits by itself when this process is gone, after
    freeing the semaphores it tracks (killed, it leaves them behind)."""
    try:
        import psutil
    except ImportError:   # pragma: no cover - psutil is a dependency
        return
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        with contextlib.suppress(psutil.Error):
            if not any("resource_tracker" in part for part in child.cmdline()):
                child.kill()


def _exit_now(code: int) -> None:
    """Exit at once with ``code``, after unlinking the named semaphores this process created
    (a loky executor's queues hold seven): an exit skips the finalizers that would, and the
    resource tracker, finding them at its end, would warn about them on the terminal after our
    one line.  Only those finalizers run (``multiprocessing.util``'s registry, where loky and the
    standard library register them): unlinking a name never blocks, the others could."""
    from multiprocessing import util
    for finalizer in list(getattr(util, "_finalizer_registry", {}).values()):
        if getattr(getattr(finalizer, "_callback", None), "__qualname__", "") == "SemLock._cleanup":
            with contextlib.suppress(Exception):
                finalizer()
    os._exit(code)


def worker_init() -> None:
    """A pool's initializer: Python's own SIGINT handler (so a fit there stops softly on it,
    ``interrupt_workers``), and ``watch_parent``."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    watch_parent()


def interrupt_workers(executor, grace: float = 10.0) -> None:
    """Stop a loky executor's workers as this process was stopped: SIGINT to each (their fits
    stop softly, ``worker_init``), then shut the executor down, killing what is left after
    ``grace`` seconds.  Killed at once, a worker leaves the semaphores it registered to the
    resource tracker, which warns about them on the terminal."""
    for process in list(getattr(executor, "_processes", {}).values()):
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGINT)
    done = threading.Thread(target=executor.shutdown, kwargs={"wait": True}, daemon=True)
    done.start()
    done.join(grace)
    if done.is_alive():
        executor.shutdown(wait=False, kill_workers=True)


def watch_parent(interval: float = 0.25) -> None:
    """In a worker process: exit once the parent is gone (killed before it could stop us), from
    a daemon thread that checks every ``interval`` seconds.  A pool's initializer."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)
    threading.Thread(target=watch, name="mtl_opt-parent-watch", daemon=True).start()
