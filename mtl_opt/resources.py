"""What this machine can hold: a size check run before work starts, not a MemoryError after it."""

from __future__ import annotations

import os

from .errors import InvalidParameterError


def physical_memory() -> int | None:
    """Bytes of physical memory (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """Bytes available for new allocations (Linux ``MemAvailable``, else free pages); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def require_memory(nbytes: int, what: str, remedy: str) -> None:
    """Raise InvalidParameterError when ``what`` needs more than the available memory.

    ``nbytes`` is an up-front estimate of the arrays the run allocates; ``remedy``
    says which parameter to lower.
    """
    available = available_memory()
    if available is not None and nbytes > available:
        raise InvalidParameterError(
            f"{what} needs at least {_size(nbytes)} of memory but {_size(available)} is "
            f"available; {remedy}.")


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024:
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"
