"""``mtl-opt collab FILE``: run a collaborative-learning experiment file and print its table.

``add_parser(subcommands)`` registers the subcommand on the CLI's argparse
subparsers; ``run(args)`` executes it and returns an exit code (0), raising
``mtl_opt.errors`` exceptions on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__
from ..argtypes import count
from ..limits import MAX_HORIZON, MAX_REPEATS


def add_parser(subcommands) -> argparse.ArgumentParser:
    """Add the ``collab`` subparser to ``subcommands`` (from ``add_subparsers``)."""
    parser = subcommands.add_parser(
        "collab", help="run a personalized collaborative learning experiment (AffPCL and FL baselines)")
    parser.add_argument("experiment", type=Path, help="experiment file (TOML)")
    parser.add_argument("--horizon", type=count(MAX_HORIZON),
                        help=f"override [run] horizon (steps, 1 to {MAX_HORIZON})")
    parser.add_argument("--runs", type=count(MAX_REPEATS), help=f"override [run] runs (1 to {MAX_REPEATS})")
    parser.add_argument("--seed", type=int, help="override [run] seed")
    parser.add_argument("--plot", metavar="PATH",
                        help="write the MSE curves to this PNG (needs matplotlib; overrides [output] "
                             "plot); a directory (existing, or PATH ending in '/') gets "
                             "<experiment>.png inside it; '-' is refused (the table goes to stdout)")
    parser.add_argument("--last", type=int, default=1,
                        help="average the table over the last LAST steps (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def run(args) -> int:
    """Run ``args.experiment``; print the setup and the table of final MSEs."""
    from ..errors import InvalidParameterError
    from ..outputs import atomic_path
    from ..plotting import plot_target
    from .config import load_experiment
    from .runner import plot

    experiment = load_experiment(args.experiment)
    if args.last < 1:
        raise InvalidParameterError(f"--last must be >= 1; got {args.last}.")
    target = plot_target(args.plot, experiment.plot, args.experiment)  # checked before the run
    system, result = experiment.execute(progress=not args.quiet, horizon=args.horizon,
                                        runs=args.runs, seed=args.seed)
    params = ", ".join(f"{k}={v!r}" for k, v in experiment.system_params.items()) or "defaults"
    print(f"mtl-opt {__version__}  experiment {args.experiment}")
    print(f"{experiment.system_kind} system  n={system.n_agents} d={system.dim}  {params}")
    print(f"{result.mse.shape[1]} runs x {result.mse.shape[2] - 1} steps, alpha={result.alpha:.4g}, "
          f"center agent {result.center_agent}; MSE averaged over the last {args.last} step(s)\n")
    print(result.table(args.last))
    if target is not None:
        with atomic_path(target) as temporary:
            plot(result, temporary, title=f"{args.experiment.stem}")
        print(f"\n  Plot  {target}")
    return 0
