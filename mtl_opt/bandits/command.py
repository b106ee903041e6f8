"""``mtl-opt bandit FILE``: run a bandit experiment file and print its regret table.

``add_parser(subcommands)`` registers the subcommand; ``run(args)`` executes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__


def add_parser(subcommands) -> argparse.ArgumentParser:
    """Add the ``bandit`` subparser to ``subcommands`` (from ``add_subparsers``)."""
    parser = subcommands.add_parser(
        "bandit", help="run a contextual bandit experiment (MOLARB, Meta-Ban and baselines)")
    parser.add_argument("experiment", type=Path, help="experiment file (TOML)")
    parser.add_argument("--horizon", type=int, help="override [run] horizon (rounds)")
    parser.add_argument("--trials", type=int, help="override [run] trials")
    parser.add_argument("--seed", type=int, help="override [run] seed")
    parser.add_argument("--plot", type=Path, help="write the regret curves to this PNG (needs matplotlib)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def run(args) -> int:
    """Run ``args.experiment``; print the setup and the table of final cumulative regrets."""
    from ..outputs import atomic_path, check_output
    from ..plotting import pyplot
    from .config import load_bandit_experiment
    from .runner import plot_regret

    experiment = load_bandit_experiment(args.experiment)
    target = args.plot or experiment.plot
    if target is not None:  # a bad plot path or a missing matplotlib is found before the run
        check_output(target, inputs=[args.experiment], what="plot")
        pyplot()
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
