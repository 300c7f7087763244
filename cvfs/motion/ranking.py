"""Learning to rank candidate segmentations: FSA-Rank, RankBoost and fixed selectors.

Training pairs are formed only within a sequence: for candidates i, j of the same sequence,
``r_ij = 1`` if i has the lower misclassification, ``1/2`` if equal, ``0`` otherwise (the paper).
:class:`MotionRanker` uses these targets by default (``min_gap=None``); ``min_gap=0.005`` keeps
only the pairs whose errors differ by more than half a percentage point. With the default
candidate pool (K-subspace refined candidates) and the cluster floor the paper's targets test
better over fold seeds 0-9 (``benchmarks/motion/motion_fold_seeds.py --nested``, which also runs an
inner cross-validation choosing between the two; ``docs/results.md``). RankBoost uses the
strict pairs (``r_ij = 1``), as in Freund et al. A ranker's ``select`` returns, per sequence, the
row of its best-scored candidate.

Both learned rankers also learn a *cluster floor* (``cluster_floor=True``): the smallest
cluster-size fraction (feature ``size/min_frac``) of the best candidate of any training sequence.
Candidates whose smallest cluster is below it are ranked after all others of their sequence.
Splitting off a handful of points lets the rest of a sequence fit K affine subspaces better, and
the likelihood features reward that: in ``cars10`` every ranker preferred a 26%-error candidate
that merges the two cars and cuts off 13 of 297 points; on Hopkins155 every candidate with a
cluster under 5% of the points has an error above 5%, and no ground-truth motion is that small.

References
----------
Barbu et al., FSA paper, section 3.4 and appendix "Training the Ranking Function" and "The RankBoost
Algorithm". Y. Freund, R. Iyer, R. Schapire, Y. Singer, "An efficient boosting algorithm for
combining preferences", JMLR 4, 2003.
"""

import logging
from dataclasses import dataclass

import numpy as np

from cvfs._jit import njit
from cvfs.motion.features import feature_names

__all__ = ["RankingData", "MotionRanker", "RankBoost", "ColumnSelector", "OracleSelector",
           "select_best", "stump_gains", "save_ranker", "load_ranker", "MODEL_KIND",
           "learn_cluster_floor", "apply_cluster_floor"]

MODEL_KIND = "motion-ranker"
_SIZE_FEATURE = "size/min_frac"

log = logging.getLogger(__name__)


@dataclass
class RankingData:
    """Candidates of many sequences, stacked.

    Attributes
    ----------
    X : ndarray of shape (N, M)
        Features of every candidate.
    errors : ndarray of shape (N,)
        Misclassification rate of every candidate.
    groups : ndarray of shape (N,), int64
        Sequence index (0..n_sequences-1) of every candidate.
    labels : list of ndarray
        Per sequence, the (C_s, P_s) candidate labels.
    params : ndarray of shape (N, 3)
        (alpha, d, refined) of every candidate (see :class:`~cvfs.motion.candidates.Candidates`).
    names, categories, videos, raw_footage : list of str
        Per sequence.
    n_motions : ndarray of shape (n_sequences,)
    """

    X: np.ndarray
    errors: np.ndarray
    groups: np.ndarray
    labels: list
    params: np.ndarray
    names: list
    categories: list
    videos: list
    raw_footage: list
    n_motions: np.ndarray

    @property
    def n_sequences(self):
        return len(self.names)

    def subset(self, seqs):
        """The data of the sequences ``seqs`` (renumbered 0..len(seqs)-1)."""
        seqs = np.asarray(seqs, dtype=np.int64)
        new = np.full(self.n_sequences, -1)
        new[seqs] = np.arange(seqs.size)
        rows = np.flatnonzero(np.isin(self.groups, seqs))
        rows = rows[np.argsort(new[self.groups[rows]], kind="stable")]
        pick = [int(s) for s in seqs]
        return RankingData(
            X=self.X[rows], errors=self.errors[rows], groups=new[self.groups[rows]],
            labels=[self.labels[s] for s in pick], params=self.params[rows],
            names=[self.names[s] for s in pick], categories=[self.categories[s] for s in pick],
            videos=[self.videos[s] for s in pick], raw_footage=[self.raw_footage[s] for s in pick],
            n_motions=self.n_motions[seqs])

    def errors_of(self, rows):
        """Error of the chosen row of each sequence."""
        return self.errors[np.asarray(rows, dtype=np.int64)]

    def oracle(self):
        """Best achievable error per sequence (lowest-error candidate)."""
        return self.errors_of(select_best(-self.errors, self.groups))


def select_best(scores, groups):
    """Row index of the highest score within each group (first one on ties).

    Parameters
    ----------
    scores : ndarray of shape (N,)
    groups : ndarray of shape (N,), int in 0..G-1

    Returns
    -------
    rows : ndarray of shape (G,), int64
    """
    scores = np.asarray(scores, dtype=float)
    groups = np.asarray(groups)
    order = np.lexsort((np.arange(scores.size), -scores, groups))
    first = np.ones(order.size, dtype=bool)
    first[1:] = groups[order[1:]] != groups[order[:-1]]
    return order[first]


class OracleSelector:
    """Picks the lowest-error candidate (the upper bound of any ranker over the pool)."""

    def fit(self, X, errors, groups):
        return self

    def select(self, X, groups, errors=None):
        return select_best(-np.asarray(errors), groups)


class ColumnSelector:
    """Unsupervised selector: the candidate with the smallest (or largest) value of one feature.

    ``ColumnSelector("lik/traj/m3/mean")`` is the residual selector: the candidate whose
    trajectories lie closest to K affine 3-D subspaces.

    Parameters
    ----------
    name : str
        A name from :func:`cvfs.motion.features.feature_names`.
    lower_is_better : bool, default True
    """

    def __init__(self, name, lower_is_better=True):
        self.name = name
        self.lower_is_better = lower_is_better

    def fit(self, X, errors, groups):
        names = feature_names()
        if self.name not in names:
            raise ValueError(f"name must be a feature name; got {self.name!r}")
        self.column_ = names.index(self.name)
        return self

    def decision_function(self, X):
        x = np.asarray(X)[:, self.column_]
        return -x if self.lower_is_better else x

    def select(self, X, groups):
        return select_best(self.decision_function(X), groups)


def _size_column(X):
    names = feature_names()
    if X.shape[1] != len(names):
        raise ValueError(f"cluster_floor needs the {len(names)} candidate features of "
                         f"cvfs.motion.features (it reads {_SIZE_FEATURE!r}); X has "
                         f"{X.shape[1]} columns: pass cluster_floor=False")
    return names.index(_SIZE_FEATURE)


def learn_cluster_floor(X, errors, groups):
    """Smallest cluster-size fraction among the best candidates of the training sequences.

    Parameters
    ----------
    X : ndarray of shape (N, n_features())
        Candidate features (:func:`cvfs.motion.features.candidate_features`).
    errors : ndarray of shape (N,)
    groups : ndarray of shape (N,)

    Returns
    -------
    floor : float
        ``min`` over sequences of ``size/min_frac`` of the lowest-error candidate.

    Raises
    ------
    ValueError
        If ``X`` does not have the candidate-feature layout.
    """
    col = _size_column(X)
    return float(X[select_best(-np.asarray(errors, dtype=float), groups), col].min())


def apply_cluster_floor(scores, X, floor):
    """Lower the scores of candidates whose smallest cluster is below ``floor``.

    The offset exceeds the spread of all scores, so within a sequence every candidate at or above
    the floor ranks first, each subset keeping its order; a sequence with no candidate at or above
    the floor keeps its ranking.

    Parameters
    ----------
    scores : ndarray of shape (N,)
    X : ndarray of shape (N, n_features())
    floor : float or None
        None returns ``scores`` unchanged.

    Returns
    -------
    scores : ndarray of shape (N,)
    """
    scores = np.asarray(scores, dtype=np.float64)
    if floor is None or scores.size == 0:
        return scores
    below = X[:, _size_column(X)] < floor
    return scores - below * (np.ptp(scores) + 1.0)


@njit(cache=True)
def stump_gains(bins, v, n_bins):
    """Sum of ``v`` over samples above each threshold, for every feature.

    Parameters
    ----------
    bins : ndarray of shape (N, M), uint8
        Bin index of each sample and feature (0..n_bins-1).
    v : ndarray of shape (N,)
        Per-sample potential.
    n_bins : int

    Returns
    -------
    gains : ndarray of shape (M, n_bins)
        ``gains[m, t] = sum of v[n] over n with bins[n, m] > t``.
    """
    n, m = bins.shape
    hist = np.zeros((m, n_bins))
    for i in range(n):
        vi = v[i]
        for j in range(m):
            hist[j, bins[i, j]] += vi
    out = np.zeros((m, n_bins))
    for j in range(m):
        acc = 0.0
        for t in range(n_bins - 1, -1, -1):
            out[j, t] = acc
            acc += hist[j, t]
    return out


def _pairs(errors, groups):
    """Crucial pairs (better, worse) within each group: strictly different errors."""
    better, worse = [], []
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        e = errors[rows]
        i, j = np.nonzero(e[:, None] < e[None, :])
        better.append(rows[i])
        worse.append(rows[j])
    if not better:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(better), np.concatenate(worse)


class RankBoost:
    """RankBoost with threshold stumps ``h(x) = 1[x_f > theta]`` (the paper's baseline).

    Parameters
    ----------
    n_rounds : int, default 100
        Boosting rounds (weak rankers).
    n_thresholds : int, default 64
        Candidate thresholds per feature (quantiles of the training values).
    cluster_floor : bool, default True
        Learn the cluster floor (:func:`learn_cluster_floor`) and rank candidates below it last;
        needs the candidate-feature layout of :mod:`cvfs.motion.features`.

    Attributes
    ----------
    features_ : ndarray of shape (n_rounds,)
    thresholds_ : ndarray of shape (n_rounds,)
    alphas_ : ndarray of shape (n_rounds,)
    cluster_floor_ : float or None

    References
    ----------
    Freund et al., JMLR 2003 (RankBoost.B with {0, 1} weak rankers, third method for alpha);
    FSA paper appendix "The RankBoost Algorithm" (eq. 29).
    """

    def __init__(self, n_rounds=100, n_thresholds=64, cluster_floor=True):
        self.n_rounds = n_rounds
        self.n_thresholds = n_thresholds
        self.cluster_floor = cluster_floor

    def fit(self, X, errors, groups):
        if not (isinstance(self.n_rounds, (int, np.integer)) and self.n_rounds >= 1):
            raise ValueError(f"n_rounds must be a positive int; got {self.n_rounds!r}")
        if not (isinstance(self.n_thresholds, (int, np.integer)) and
                2 <= self.n_thresholds <= 255):
            raise ValueError(f"n_thresholds must be an int in [2, 255]; got {self.n_thresholds!r}")
        X = np.asarray(X, dtype=np.float64)
        errors = np.asarray(errors, dtype=np.float64)
        groups = np.asarray(groups)
        self.cluster_floor_ = (learn_cluster_floor(X, errors, groups) if self.cluster_floor
                               else None)
        n_thr = self.n_thresholds
        qs = np.linspace(0, 1, n_thr + 2)[1:-1]
        edges = np.quantile(X, qs, axis=0).T  # (M, n_thr), thresholds per feature
        bins = np.empty(X.shape, dtype=np.uint8)
        for m in range(X.shape[1]):
            bins[:, m] = np.searchsorted(edges[m], X[:, m], side="left")
        # bins[n, m] > t  <=>  X[n, m] > edges[m, t]
        better, worse = _pairs(errors, groups)
        D = np.full(better.size, 1.0 / max(better.size, 1))
        feats, thrs, alphas = [], [], []
        for _ in range(self.n_rounds):
            if better.size == 0:
                break
            v = np.bincount(better, D, X.shape[0]) - np.bincount(worse, D, X.shape[0])
            gains = stump_gains(bins, v, n_thr + 1)[:, :n_thr]
            m, t = np.unravel_index(np.argmax(np.abs(gains)), gains.shape)
            r = float(np.clip(gains[m, t], -1 + 1e-10, 1 - 1e-10))
            alpha = 0.5 * np.log((1 + r) / (1 - r))
            h = (bins[:, m] > t).astype(np.float64)
            D = D * np.exp(alpha * (h[worse] - h[better]))
            D /= D.sum()
            feats.append(m)
            thrs.append(edges[m, t])
            alphas.append(alpha)
        self.features_ = np.array(feats, dtype=np.int64)
        self.thresholds_ = np.array(thrs, dtype=np.float64)
        self.alphas_ = np.array(alphas, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X):
        X = np.asarray(X, dtype=np.float64)
        scores = (X[:, self.features_] > self.thresholds_).astype(float) @ self.alphas_
        return apply_cluster_floor(scores, X, self.cluster_floor_)

    def select(self, X, groups):
        return select_best(self.decision_function(X), groups)


class MotionRanker:
    """FSA-Rank over candidate features (piecewise-linear responses, pairs within a sequence).

    Parameters
    ----------
    k : int, default 40
        Selected features.
    bins : int, default 4
        Piecewise-linear bins B.
    n_iter : int, default 300
    mu : float, default 300
    learning_rate : float or None, default None
        None lets FSARanker derive a stable step (the paper's eta = 0.5 is on its scaling).
    shrinkage : float, default 0.01
        The paper's lambda.
    prior : {"shrinkage", "second_order"}, default "shrinkage"
    smoothness : float, default 0.0
        c of the second-order prior (paper eq. 13), ``prior="second_order"`` only.
    min_gap : float or None, default None
        None uses every pair of candidates of a sequence with the paper's targets (r = 1, 1/2,
        0). A number keeps only the pairs whose misclassification rates differ by more than
        ``min_gap`` (0.005 = half a percentage point): near-equal candidates are not ordered.
    pair_weights : {"uniform", "group"}, default "uniform"
        Every pair alike, or every sequence alike (see :class:`cvfs.estimators.FSARanker`).
    cluster_floor : bool, default True
        Learn the cluster floor (:func:`learn_cluster_floor`) and rank candidates below it last;
        needs the candidate-feature layout of :mod:`cvfs.motion.features`.
    random_state : None, int or Generator, default 0

    Attributes
    ----------
    estimator_ : cvfs.estimators.FSARanker
        The fitted ranker (``.get_support(indices=True)``: the selected feature columns).
    cluster_floor_ : float or None
        The learned floor (None if ``cluster_floor=False``).

    References
    ----------
    FSA paper, eq. (9) and section 3.4 (B=4, k=40, N_iter=300, eta=0.5, mu=300, lambda=0.01).
    """

    def __init__(self, k=40, bins=4, n_iter=300, mu=300, learning_rate=None, shrinkage=0.01,
                 prior="shrinkage", smoothness=0.0, min_gap=None, pair_weights="uniform",
                 cluster_floor=True, random_state=0):
        self.k = k
        self.bins = bins
        self.n_iter = n_iter
        self.mu = mu
        self.learning_rate = learning_rate
        self.shrinkage = shrinkage
        self.prior = prior
        self.smoothness = smoothness
        self.min_gap = min_gap
        self.pair_weights = pair_weights
        self.cluster_floor = cluster_floor
        self.random_state = random_state

    def _make(self):
        from cvfs.estimators import FSARanker

        return FSARanker(k=self.k, bins=self.bins, n_iter=self.n_iter, mu=self.mu,
                         learning_rate=self.learning_rate, prior=self.prior,
                         shrinkage=self.shrinkage, smoothness=self.smoothness,
                         min_gap=self.min_gap, pair_weights=self.pair_weights,
                         random_state=self.random_state)

    def fit(self, X, errors, groups):
        """Fit on candidate features; higher score = lower misclassification.

        Parameters
        ----------
        X : ndarray of shape (N, M)
        errors : ndarray of shape (N,)
        groups : ndarray of shape (N,)
            Sequence of each candidate; pairs are formed only within a sequence.
        """
        X = np.asarray(X, dtype=np.float64)
        errors = np.asarray(errors, dtype=np.float64)
        groups = np.asarray(groups)
        self.cluster_floor_ = (learn_cluster_floor(X, errors, groups) if self.cluster_floor
                               else None)
        self.estimator_ = self._make().fit(X, -errors, groups=groups)
        return self

    def decision_function(self, X):
        X = np.asarray(X, dtype=np.float64)
        return apply_cluster_floor(self.estimator_.decision_function(X), X, self.cluster_floor_)

    def select(self, X, groups):
        return select_best(self.decision_function(X), groups)


def save_ranker(path, ranker, *, settings, training=None):
    """Write a fitted :class:`MotionRanker` to a model file (HDF5, atomic, no pickle).

    The file is an ``FSARanker`` model file (:func:`cvfs.io.save_estimator`) whose settings say
    that it ranks motion candidates (``application = "motion-ranker"``) and record the candidate
    pool and feature version it was trained on, and the learned cluster floor.

    Parameters
    ----------
    path : str or Path
    ranker : MotionRanker
        Fitted.
    settings : dict
        Candidate pool and feature settings the ranker was trained with (``alphas``, ``refine``,
        ``feature_version``, ``n_features``, ``seed``); :func:`cvfs.motion.segment` reuses them.
    training : dict, optional
        Description of the training data.

    Returns
    -------
    path : Path
    """
    from cvfs.io import save_estimator

    settings = dict(settings, application=MODEL_KIND, cluster_floor=ranker.cluster_floor_)
    return save_estimator(path, ranker.estimator_, settings=settings, training=training or {})


def load_ranker(path):
    """Read a ranker written by :func:`save_ranker`.

    Returns
    -------
    ranker : MotionRanker
        Fitted; ``ranker.settings_`` holds the candidate/feature settings.

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ValueError
        If it is not a motion-ranker model file, fails a check of
        :func:`cvfs.io.load_estimator` (checksums, array names, index ranges, finite values),
        or its settings are missing or invalid (the message names the file and the setting).
    """
    from cvfs.io import load_estimator

    est, model = load_estimator(path, kind="FSARanker")
    if model.settings.get("application") != MODEL_KIND:
        raise ValueError(f"{path} holds an FSARanker that is not a motion ranker "
                         f"(settings.application = {model.settings.get('application')!r})")
    _check_settings(path, model.settings, est)
    p = est.get_params()
    ranker = MotionRanker(k=p["k"], bins=p["bins"], n_iter=p["n_iter"], mu=p["mu"],
                          learning_rate=p["learning_rate"], shrinkage=p["shrinkage"],
                          prior=p["prior"], smoothness=p["smoothness"],
                          min_gap=p["min_gap"], pair_weights=p["pair_weights"],
                          cluster_floor=model.settings.get("cluster_floor") is not None,
                          random_state=p["random_state"])
    ranker.estimator_ = est
    ranker.cluster_floor_ = model.settings.get("cluster_floor")
    ranker.settings_ = dict(model.settings)
    return ranker


def _check_settings(path, settings, est):
    """Settings of a motion-ranker file: present, of the right types, and agreeing with the
    estimator's ``n_features_in_``."""
    import numbers

    from cvfs.motion.candidates import REFINE_SPACES

    def real(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v)

    missing = [k for k in ("feature_version", "n_features", "alphas", "refine", "seed")
               if k not in settings]
    if missing:
        raise ValueError(f"{path}: the motion-ranker file lacks the setting(s) {missing}")
    checks = {
        "feature_version": isinstance(settings["feature_version"], int),
        "n_features": settings["n_features"] == est.n_features_in_,
        "alphas": isinstance(settings["alphas"], list) and 0 < len(settings["alphas"]) <= 64
        and all(real(a) and 0 < a <= 1e6 for a in settings["alphas"]),
        "refine": isinstance(settings["refine"], list)
        and all(r in REFINE_SPACES for r in settings["refine"]),
        "seed": isinstance(settings["seed"], int) and not isinstance(settings["seed"], bool)
        and 0 <= settings["seed"] < 2**63,
        "cluster_floor": settings.get("cluster_floor") is None
        or real(settings["cluster_floor"]),
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise ValueError(f"{path}: invalid motion-ranker setting(s) "
                         f"{ {k: settings.get(k) for k in bad} } (n_features must equal the "
                         f"ranker's n_features_in_ = {est.n_features_in_})")
