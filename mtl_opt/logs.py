"""mtl_opt's logging: the ``mtl_opt`` logger hierarchy, left to the application to configure.

As the logging HOWTO asks of a library, the ``mtl_opt`` logger has a ``NullHandler`` and nothing
else: where records go, and which, is the application's choice.  A few lines are not ordinary
records, though: the rows of the live log that ``verbose=True`` asked for
(``mtl_opt.progress``), a notice of a long wait, a solver's status we do not know.  They were
printed before mtl_opt logged, and ``show`` still puts them on the console while logging is not
configured for them, as ``logging.lastResort`` does for warnings but at every level (a verbose
row is INFO, which the root's default WARNING drops):

- logging is configured for ``mtl_opt`` when an ``mtl_opt`` logger on the record's way up has a
  level, a handler (beside the NullHandler) or ``propagate`` off: logging's rules then decide;
- else when the root's handlers would take the record (its level lets it through): they do;
- else the line goes to the console stream ``show`` is given, unless ``logging.disable`` covers
  its level.

So an application routes the rows with a handler and a level on ``logging.getLogger("mtl_opt")``
(or the root at INFO), and silences them with a level above INFO there, or ``logging.disable``.
"""

from __future__ import annotations

import logging
from typing import Any, TextIO

#: The package's logger, the parent of every ``mtl_opt.*`` logger.
PACKAGE = logging.getLogger("mtl_opt")
_QUIET = logging.NullHandler()
PACKAGE.addHandler(_QUIET)


class _Console(logging.StreamHandler):
    """``logging.lastResort`` for ``show``'s lines: the message alone, on the stream each record
    names (``record.console``: the console of the caller, which a solver's capture of
    ``sys.stdout`` must not swallow)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = record.__dict__["console"]   # under the handler's lock (``Handler.handle``)
        super().emit(record)


_CONSOLE = _Console()


def configured(log: logging.Logger) -> bool:
    """Whether the application configured ``log`` or an ``mtl_opt`` logger above it: a level, a
    handler beside the package's NullHandler, or ``propagate`` off."""
    node: logging.Logger | None = log
    while node is not None and node is not logging.root:
        if node.level or not node.propagate or any(h is not _QUIET for h in node.handlers):
            return True
        node = node.parent
    return False


def show(log: logging.Logger, level: int, message: str, console: TextIO, **extra: Any) -> None:
    """Log ``message`` at ``level`` on ``log`` (an ``mtl_opt`` logger; ``extra``: attributes of
    its record), a line the user asked for or must see: through logging where it is configured
    for the record, else on ``console`` (the module's docstring has the rule)."""
    own = configured(log)
    if log.isEnabledFor(level) and (own or logging.root.handlers):
        log.log(level, message, extra=extra, stacklevel=2)
    elif not own and log.manager.disable < level:
        _CONSOLE.handle(log.makeRecord(log.name, level, "", 0, message, (), None,
                                       extra={**extra, "console": console}))
