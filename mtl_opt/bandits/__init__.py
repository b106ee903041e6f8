"""Multi-task contextual bandits: MOLARB (Model-C / Model-P), Meta-Ban and their baselines.

``base`` fixes the environment / policy interface, ``runner`` runs policies
over seeded trials, ``registry`` names them for ``mtl-opt bandit`` files.
"""

from .base import Environment, Policy, Round
from .runner import BanditResult, plot_regret, run_bandit, run_policy

__all__ = ["BanditResult", "Environment", "Policy", "Round", "plot_regret", "run_bandit", "run_policy"]
