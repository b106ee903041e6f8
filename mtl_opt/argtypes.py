"""argparse ``type=`` converters shared by the ``mtl-opt`` subcommands."""

from __future__ import annotations

import argparse
import math


def finite_float(text: str) -> float:
    """A number flag: ``float()`` also accepts "nan" and "inf", which no option means."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give a finite value")
    return value
