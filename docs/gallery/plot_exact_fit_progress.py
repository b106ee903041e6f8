"""
Watching an exact fit close its gap
===================================

An exact ``SparseMTL`` fit keeps two numbers while it runs: the incumbent (the best objective
found so far) and a proven lower bound on the optimum. The gap between them is the
certificate. This example fits a small sparse multi-task problem from the shipped benchmark
library with multi-tree outer approximation on HiGHS for 12 seconds and draws both numbers
against time from the fit's progress log.
"""

# %%
# The data: a shipped benchmark instance
# --------------------------------------
# ``small_sparse_l0l2`` (3 tasks, 15 features, 50 rows per task) ships with mtl_opt in its bench
# library (``datasets.load("library/NAME")``). Its optimum is known: a brute force over every
# support wrote it to ``optima.csv`` beside it.
import matplotlib.pyplot as plt
import pandas as pd

from mtl_opt import SolveOptions, SparseMTL, datasets
from mtl_opt.plotting import plot_progress

library = datasets.folder() / "library"
data = datasets.load("library/small_sparse_l0l2").load_data()
optima = pd.read_csv(library / "optima.csv", index_col="instance")
known_optimum = optima.loc["small_sparse_l0l2", "optimum"]
print(data.n_tasks, "tasks,", data.n_features, "features, rows per task:", data.n_samples)

# %%
# An exact fit with a time limit
# ------------------------------
# ``algorithm="oa_multi_tree"`` starts from the heuristic (``bcd``) answer and re-solves a
# mixed-integer master problem between rounds of cuts; each master's dual bound is a proven
# lower bound. ``time_limit`` is the budget of the whole fit. When it runs out, the fit
# returns the incumbent and the bound proven so far, with status ``time_limit``.
model = SparseMTL(variant="l0l2", s=3, lambda_ridge=0.02, algorithm="oa_multi_tree",
                  solve_options=SolveOptions(time_limit=12, rel_gap=1e-4))
model.fit(data)
print(model.result_.summary())
print(f"incumbent - known optimum: {model.result_.objective - known_optimum:.1e}")

# %%
# The progress log
# ----------------
# ``result_.log`` holds one row at least every second, with ``time``, ``incumbent``,
# ``lower_bound``, ``gap`` and ``nodes``.
log = pd.DataFrame(model.result_.log)
print(log[["time", "incumbent", "lower_bound", "gap", "nodes"]].round(4).to_string(index=False))

# %%
# Incumbent and bound against time
# --------------------------------
# ``mtl_opt.plotting.plot_progress`` draws both as step lines. Give it an Axes from
# ``plt.subplots``; without one it draws on a new Figure that pyplot does not manage. On the
# right, the relative gap on a log scale. The incumbent is the heuristic's answer from the
# start, and it is already the known optimum. All the solver time goes into raising the bound
# toward it, which is what the certificate costs.
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
plot_progress(model.result_, ax=left)
left.axhline(known_optimum, color="gray", linewidth=5, alpha=0.4, zorder=0,
             label="known optimum (brute force)")
left.legend()
right.step(log["time"], log["gap"], where="post", color="tab:red")
right.set(yscale="log", xlabel="time (s)", ylabel="relative gap",
          title=f"final gap {model.result_.rel_gap:.2%}")
fig.suptitle("SparseMTL l0l2 on small_sparse_l0l2: outer approximation on HiGHS, 12 s")
plt.show()
