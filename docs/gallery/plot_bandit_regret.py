"""
Regret of multi-task bandits: MOLARB against per-instance baselines
===================================================================

In a multi-task contextual bandit, many bandit instances (users, stores, patients) share most
of their reward model. MOLARB plays greedily and re-estimates all instances at the end of each
batch with MOLAR, so an instance that is rarely active borrows strength from the others.
This example runs it with per-instance OLS and LASSO bandits and the robust multi-task
baseline RMB on the paper's Model-C environment. It draws the cumulative regret over the
rounds, and the regret of each instance against how often that instance was active.
"""

# %%
# Environment and policies
# ------------------------
# ``ModelC``: ``M = 20`` instances with ``K = 3`` arms, contexts in ``d = 30`` dimensions, and
# parameters that differ from a global one in ``s = 2`` coordinates. Each round, instance ``m``
# is active with probability ``p_m``, drawn uniformly in each trial. These are the paper's
# sizes, also in the shipped experiment ``mtl_opt.datasets.path("molarb_model_c")``, which
# ``mtl-opt bandit`` runs. The policies' defaults are the paper's tuned constants.
import matplotlib.pyplot as plt
import numpy as np

from mtl_opt.bandits import run_bandit
from mtl_opt.bandits.linear_envs import ModelC
from mtl_opt.bandits.linear_policies import LassoBandit, OLSBandit, RMBandit
from mtl_opt.bandits.molarb import MOLARB

env = ModelC(d=30, s=2, M=20, K=3, sigma=0.5)
policies = [MOLARB(sigma=0.5), OLSBandit(), LassoBandit(), RMBandit()]

# %%
# Run them
# --------
# ``run_bandit`` runs every policy for ``trials`` seeded trials. Within a trial all policies
# see the same parameters, contexts and reward noise, so their regrets compare round by round.
# ``regret[k, trial, t]`` is policy ``k``'s regret in round ``t``, and ``user_regret[k, trial, m]``
# is its total on instance ``m``.
result = run_bandit(env, policies, horizon=2000, seed=0, trials=5, progress=False)
print(result.table())

# %%
# Cumulative regret, and who gains from pooling
# ---------------------------------------------
# Left: mean cumulative regret over the trials, with a band of one standard deviation. Both
# multi-task policies, MOLARB and RMB, beat the per-instance OLS and LASSO bandits. RMB's
# regret is lower than MOLARB's, as in this package's full-size benchmark (BENCHMARKS.md), and
# unlike the paper's Figure 4. Right: each instance's regret in each trial against its
# activation probability ``p_m`` (``result.info[trial]["activation"]``). An instance that is
# rarely active has little regret under any policy. At every activation level, most of
# MOLARB's points lie below OLS's.
cumulative = result.cumulative()
rounds = np.arange(1, cumulative.shape[2] + 1)
activation = np.array([info["activation"] for info in result.info])      # (trials, M)
ols, molarb = (result.user_regret[result.policies.index(name)] for name in ("ols", "molarb"))
print(f"MOLARB below OLS on {(molarb < ols).sum()} of {ols.size} (instance, trial) pairs")

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
for k, name in enumerate(result.policies):
    mean, sd = cumulative[k].mean(axis=0), cumulative[k].std(axis=0)
    left.plot(rounds, mean, label=name)
    left.fill_between(rounds, mean - sd, mean + sd, alpha=0.15)
left.set(xlabel="round", ylabel="cumulative regret", title="Model-C, d=30, M=20, K=3: 5 trials")
left.legend()
for name, regret, marker in [("ols", ols, "x"), ("molarb", molarb, "o")]:
    right.scatter(activation.ravel(), regret.ravel(), marker=marker, alpha=0.6, label=name,
                  color=f"C{result.policies.index(name)}")   # the color of its curve on the left
right.set(xlabel="activation probability p_m of the instance",
          ylabel="regret of the instance over 2000 rounds", title="Per instance, all trials")
right.legend()
plt.show()
