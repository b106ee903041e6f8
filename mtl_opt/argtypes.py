"""argparse ``type=`` converters shared by the ``mtl-opt`` subcommands: finite numbers, bounded counts."""

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


def count(maximum: int):
    """A count flag's type: a whole number from 1 to ``maximum`` (``mtl_opt.limits``); "1e3" is
    1000, and a count beyond the maximum is one line naming it, not a run that never ends."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            value = int(number) if math.isfinite(number) and number.is_integer() else None
        if value is None or not 1 <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {maximum}; got {text}")
        return value
    return parse
