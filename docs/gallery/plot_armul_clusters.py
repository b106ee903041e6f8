"""
ARMUL's clusters of tasks
=========================

Clustered ARMUL assumes that the tasks fall into a few groups and shrinks every task's
coefficients toward the center of its group. The penalty is the unsquared distance to that
center, so a task that belongs to no group is left almost alone. This example fits it on ARMUL's
own simulation, with three clusters and a few outlier tasks. The tree search over
task-to-cluster assignments proves the fit optimal. The figure shows the estimated
coefficients, colored by fitted cluster, with the centers.
"""

# %%
# Simulated tasks in three clusters
# ---------------------------------
# ``armul_simulation("clustered")`` gives task ``j`` the coefficients ``2 e_z + delta_j``, with
# cluster ``z = (j + 1) mod 3`` and ``delta_j`` a random vector of length ``delta``.
# ``epsilon = 0.1`` makes 3 of the 30 tasks outliers whose coefficients are drawn at random.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from mtl_opt import ARMUL, SolveOptions
from mtl_opt.estimators import IndependentTasks
from mtl_opt.synthetic import armul_simulation

sim = armul_simulation("clustered", m=30, n=100, d=10, delta=0.2, epsilon=0.1, seed=0)
print(f"{sim.data.n_tasks} tasks, {sim.data.n_features} features, {(~sim.inliers).sum()} outliers")

# %%
# Fit clustered ARMUL, and each task alone
# ----------------------------------------
# ``n_components`` is the number of clusters. ``algorithm="exact"`` runs a branch and bound
# over the assignments of tasks to clusters, starting from the seeded heuristic
# (``algorithm="prox"``, k-means++ restarts). It reports a proven lower bound, so the status
# says whether these clusters are optimal. ``IndependentTasks`` is per-task least squares,
# the estimates before any pooling.
armul = ARMUL("clustered", n_components=3, c=1.0, algorithm="exact", seed=0,
              solve_options=SolveOptions(time_limit=20)).fit(sim.data)
alone = IndependentTasks().fit(sim.data)
print(armul.result_.summary())
print("fitted labels:", armul.labels_)


def worst_error(coef):
    """Largest estimation error over the inlier tasks, max_j ||theta_hat_j - theta_j||."""
    return np.linalg.norm(coef - sim.coef, axis=1)[sim.inliers].max()


print(f"worst inlier error: tasks alone {worst_error(alone.coef_):.3f}, "
      f"clustered ARMUL {worst_error(armul.coef_):.3f}")

# %%
# The tasks in two dimensions
# ---------------------------
# The coefficients have 10 dimensions. The plot projects them on the first two principal
# components of ARMUL's estimates. A gray segment joins each task's own estimate (x) to its
# ARMUL estimate (dot, colored by fitted cluster). Stars are the cluster centers
# ``centers_``. Inlier tasks move onto their cluster's center. The outlier tasks (ringed) keep
# most of their own estimate: the unsquared penalty pulls them only a fixed distance.
pca = PCA(n_components=2, random_state=0).fit(armul.coef_)
own, pooled, centers = (pca.transform(c) for c in (alone.coef_, armul.coef_, armul.centers_))

fig, ax = plt.subplots(figsize=(7, 6), layout="constrained")
for a, b in zip(own, pooled):
    ax.plot([a[0], b[0]], [a[1], b[1]], color="gray", linewidth=0.7, zorder=1)
ax.scatter(*own.T, marker="x", color="gray", label="task alone (least squares)", zorder=2)
for k, color in enumerate(["tab:blue", "tab:orange", "tab:green"]):
    members = armul.labels_ == k
    ax.scatter(*pooled[members].T, color=color, s=30, zorder=3,
               label=f"ARMUL estimate, cluster {k} ({members.sum()} tasks)")
    ax.scatter(*centers[k], marker="*", s=400, color=color, edgecolors="black", zorder=4)
ax.scatter([], [], marker="*", s=200, color="white", edgecolors="black", label="cluster center")
ax.scatter(*pooled[~sim.inliers].T, s=220, facecolors="none", edgecolors="black",
           label="outlier task", zorder=3)
ax.set(xlabel="principal component 1", ylabel="principal component 2",
       title=f"Clustered ARMUL, 30 tasks in 3 clusters: status {armul.result_.status}")
ax.legend(loc="best")
plt.show()
