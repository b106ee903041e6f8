"""matplotlib, an optional extra, loaded only when a plot is asked for."""

from __future__ import annotations

from .errors import InvalidParameterError


def pyplot():
    """matplotlib.pyplot on the Agg backend, or a clear error naming the extra to install."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidParameterError("plotting needs matplotlib: pip install 'mtl_opt[plot]'.") from None
    return plt
