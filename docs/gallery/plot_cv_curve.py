"""
Choosing the support size by cross-validation
=============================================

``mtl_opt.cross_validate`` scores every point of a hyperparameter grid by K-fold
cross-validation, with folds stratified by task, and selects one. This example tunes the
support size ``s`` of a ``SparseMTL`` fit on data simulated as in the sparse multi-task paper.
It draws the validation error with its standard error, marks the selected point, and checks the
choice against held-out rows and the true support size.
"""

# %%
# Simulated data with a known support size
# -----------------------------------------
# ``smtl_simulation`` draws 4 tasks whose coefficients have ``s_true = 5`` nonzeros each,
# picked from ``q = 8`` shared candidate positions among ``p = 50`` features. It generates
# ``2 n`` rows per task: half for training, half for testing.
import matplotlib.pyplot as plt
import numpy as np

from mtl_opt import SparseMTL, cross_validate
from mtl_opt.metrics import task_rmse
from mtl_opt.synthetic import smtl_simulation

sim = smtl_simulation(p=50, K=4, n=50, s_true=5, q=8, tau=0.25, seed=0)
train, test = sim.data.train_test_split(0.5, seed=0)

# %%
# Cross-validate over ``s``
# -------------------------
# The grid is one parameter. Each fold fits the whole grid as one warm-started path,
# from small ``s`` to large. The score is the validation RMSE averaged over tasks (lower is
# better). ``rule="1se"`` selects the smallest ``s`` whose mean is within one standard error of
# the best mean. ``cv.best_estimator`` is refitted on all the training rows.
grid = {"s": list(range(1, 13))}
template = SparseMTL(variant="zbar_l2", lambda_ridge=1e-2, lambda_zbar=1e-2)
cv = cross_validate(template, grid, train, n_splits=5, seed=0, rule="1se", progress=False)
print(cv.table())

# %%
# Held-out error of every grid point
# ----------------------------------
# To check the curve, fit each ``s`` on all the training rows and score it on the test rows
# that cross-validation never saw.
s_values = np.array([point["s"] for point in cv.points])
test_rmse = [task_rmse(test.ys, SparseMTL(variant="zbar_l2", s=int(s), lambda_ridge=1e-2,
                                          lambda_zbar=1e-2).fit(train).predict(test))
             for s in s_values]
print("held-out RMSE by s:", dict(zip(s_values.tolist(), np.round(test_rmse, 3).tolist())))
print("selected s =", cv.best_params["s"],
      "| supports of the refit:", cv.best_estimator.support_.sum(axis=1))

# %%
# The cross-validation curve
# --------------------------
# The error bars are one standard error over the 5 folds. The dotted line is the best mean plus
# its standard error, the threshold of the "1se" rule. The validation curve has the same shape
# as the held-out curve: both fall steeply up to the true support size and are flat or rise
# beyond it, so the rule keeps the smallest good model.
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
ax.errorbar(s_values, cv.mean, yerr=cv.se, marker="o", capsize=3,
            label="5-fold CV RMSE (mean ± SE)")
ax.plot(s_values, test_rmse, marker="s", linestyle="--", label="held-out RMSE")
best = int(np.argmin(cv.mean))
ax.axhline(cv.mean[best] + cv.se[best], color="gray", linestyle=":", label="best mean + 1 SE")
ax.axvline(5, color="tab:green", alpha=0.4, linewidth=6, label="true support size")
ax.plot(s_values[cv.best_index], cv.mean[cv.best_index], marker="*", markersize=18,
        color="tab:red", linestyle="none",
        label=f"selected (rule '1se'): s = {cv.best_params['s']}")
ax.set(xlabel="support size s per task", ylabel="RMSE averaged over tasks", xticks=s_values,
       title="SparseMTL zbar_l2: cross-validating s")
ax.legend()
plt.show()
