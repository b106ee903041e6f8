"""``mtl-opt bandit FILE``: run a bandit experiment file and print its regret table.

``add_parser(subcommands)`` registers the subcommand; ``run(args)`` executes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__
from ..argtypes import count
from ..limits import MAX_HORIZON, MAX_REPEATS


def add_parser(subcommands) -> argparse.ArgumentParser:
    """Add the ``bandit`` subparser to ``subcommands`` (from ``add_subparsers``)."""
    parser = subcommands.add_parser(
        "bandit", help="run a contextual bandit experiment (MOLARB, Meta-Ban and baselines)")
    parser.add_argument("experiment", type=Path, help="experiment file (TOML)")
    parser.add_argument("--horizon", type=count(MAX_HORIZON),
                        help=f"override [run] horizon (rounds, 1 to {MAX_HORIZON})")
    parser.add_argument("--trials", type=count(MAX_REPEATS),
                        help=f"override [run] trials (1 to {MAX_REPEATS})")
    parser.add_argument("--seed", type=int, help="override [run] seed")
    parser.add_argument("--plot", metavar="PATH",
                        help="write the regret curves to this PNG (needs matplotlib; overrides [output] "
                             "plot); a directory (existing, or PATH ending in '/') gets "
                             "<experiment>.png inside it; '-' is refused (the table goes to stdout)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def run(args) -> int:
    """Run ``args.experiment``; print the setup and the table of final cumulative regrets."""
    from ..outputs import atomic_path
    from ..plotting import plot_target
    from .config import load_bandit_experiment
    from .runner import plot_regret

    experiment = load_bandit_experiment(args.experiment)
    target = plot_target(args.plot, experiment.plot, args.experiment)  # checked before the run
    result = experiment.execute(progress=not args.quiet, horizon=args.horizon,
                                trials=args.trials, seed=args.seed)
    env = experiment.environment
    print(f"mtl-opt {__version__}  experiment {args.experiment}")
    print(f"{type(env).__name__}: {env.n_users} users, {env.n_arms} arms, dim {env.dim}; "
          f"{result.regret.shape[1]} trials x {result.regret.shape[2]} rounds\n")
    print(result.table())
    if target is not None:
        with atomic_path(target) as temporary:
            plot_regret(result, temporary, title=args.experiment.stem)
        print(f"\n  Plot  {target}")
    return 0
