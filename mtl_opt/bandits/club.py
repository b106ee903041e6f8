"""CLUB (Gentile, Li and Zappella 2014) and SCLUB (Li, Chen, Li and Leung 2019): clustering of linear bandits.

CLUB keeps per-user ridge statistics (``linucb.Ridge``) and a user graph
(networkx), complete at the start.  The served user's cluster is its connected
component; arms are scored with the cluster's pooled ridge statistics,

    x' w_C + alpha sqrt(x' M_C^-1 x log(t + 1)).

After user u's update, each edge (u, v) is deleted when

    ||w_u - w_v|| > alpha2 (CB(T_u) + CB(T_v)),   CB(T) = sqrt((1 + ln(1 + T)) / (1 + T)),

with T the user's number of pulls (Gentile et al., Algorithm 1).
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ..params import NONNEGATIVE, POSITIVE, validate_attributes
from ._support import ucb_argmax
from .base import Policy
from .linucb import Ridge


def confidence_width(pulls) -> np.ndarray:
    """CLUB's CB(T) = sqrt((1 + ln(1 + T)) / (1 + T))."""
    pulls = np.asarray(pulls, dtype=float)
    return np.sqrt((1 + np.log1p(pulls)) / (1 + pulls))


def divergence(a: Ridge, i: int, b: Ridge, js: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(||w_j - w_i||, CB(T_i) + CB(T_j)) between model ``i`` of ``a`` and models ``js`` of ``b``."""
    gap = np.linalg.norm(b.estimates(js) - a.estimates([i]), axis=1)
    return gap, confidence_width(a.pulls[i]) + confidence_width(b.pulls[js])


class CLUB(Policy):
    """Online clustering of bandits on a user graph whose edges are cut when estimates diverge."""

    name = "club"
    param_constraints = {"alpha": NONNEGATIVE, "alpha2": NONNEGATIVE, "lam": POSITIVE}

    def __init__(self, *, alpha=0.1, alpha2=1.0, lam=1.0):
        self.alpha, self.alpha2, self.lam = alpha, alpha2, lam
        validate_attributes(self)

    def reset(self, env, horizon, rng):
        self.ridge = Ridge(env.n_users, env.dim, self.lam)
        self.graph = nx.complete_graph(env.n_users)
        self.t = 0

    def cluster(self, user: int) -> set[int]:
        """The users currently clustered with ``user`` (its connected component)."""
        return nx.node_connected_component(self.graph, user)

    def _scores(self, user: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ridge (mean, width) of the arms ``X`` with the statistics of ``user``'s cluster."""
        return self.ridge.scores(sorted(self.cluster(user)), X)

    def select(self, round_):
        self.t += 1
        mean, bonus = self._scores(int(round_.users[0]), round_.contexts[0])
        return np.array([ucb_argmax(mean, bonus * math.sqrt(math.log(self.t + 1)), self.alpha)])

    def update(self, round_, arms, rewards):
        user = int(round_.users[0])
        self.ridge.add(user, round_.contexts[0, arms[0]], float(rewards[0]))
        self.prune(user)

    def prune(self, user: int) -> None:
        """Delete the edges (user, v) whose estimate gap exceeds alpha2 (CB(T_user) + CB(T_v))."""
        neighbors = np.fromiter(self.graph.neighbors(user), dtype=int)
        if len(neighbors) == 0:
            return
        gap, width = divergence(self.ridge, user, self.ridge, neighbors)
        self.graph.remove_edges_from((user, int(v)) for v in neighbors[gap > self.alpha2 * width])


class SCLUB(CLUB):
    """SCLUB's split-and-merge clustering on sets of users (a simplified, phase-free version).

    Clusters are sets with their own pooled ridge statistics.  After user u in
    cluster C is updated, u is split off into a new cluster when
    ||w_u - w_C|| > alpha2 (CB(T_u) + CB(T_C)); then every cluster C' with
    ||w_C - w_C'|| < alpha2 / 2 (CB(T_C) + CB(T_C')) is merged into C.  The
    original algorithm runs these checks in doubling phases on sampled users;
    here they run every round for the served user.
    """

    name = "sclub"

    def reset(self, env, horizon, rng):
        self.ridge = Ridge(env.n_users, env.dim, self.lam)       # per user
        self.clusters = Ridge(env.n_users, env.dim, self.lam)    # slot c = cluster c
        self.label = np.zeros(env.n_users, dtype=int)
        self.t = 0

    def cluster(self, user: int) -> set[int]:
        return set(np.flatnonzero(self.label == self.label[user]).tolist())

    def _scores(self, user, X):
        return self.clusters.scores([self.label[user]], X)

    def update(self, round_, arms, rewards):
        user = int(round_.users[0])
        x, r = round_.contexts[0, arms[0]], float(rewards[0])
        self.ridge.add(user, x, r)
        self.clusters.add(self.label[user], x, r)
        self.split(user)
        self.merge(self.label[user])

    def split(self, user: int) -> None:
        """Move ``user`` to a cluster of its own if its estimate left its cluster's."""
        c, eye = self.label[user], self.lam * np.eye(self.ridge.A.shape[1])
        if (self.label == c).sum() == 1:
            return
        gap, width = divergence(self.ridge, user, self.clusters, np.array([c]))
        if gap[0] > self.alpha2 * width[0]:
            new = int(np.setdiff1d(np.arange(len(self.label)), self.label)[0])
            C, U = self.clusters, self.ridge
            C.assign(c, C.A[c] - U.A[user] + eye, C.b[c] - U.b[user], C.pulls[c] - U.pulls[user])
            C.assign(new, U.A[user].copy(), U.b[user].copy(), U.pulls[user])
            self.label[user] = new

    def merge(self, c: int) -> None:
        """Merge into cluster ``c`` every cluster whose estimate is close to it."""
        others = np.setdiff1d(np.unique(self.label), [c])
        if len(others) == 0:
            return
        gap, width = divergence(self.clusters, c, self.clusters, others)
        C, eye = self.clusters, self.lam * np.eye(self.ridge.A.shape[1])
        for o in others[gap < self.alpha2 / 2 * width]:
            C.assign(c, C.A[c] + C.A[o] - eye, C.b[c] + C.b[o], C.pulls[c] + C.pulls[o])
            self.label[self.label == o] = c
