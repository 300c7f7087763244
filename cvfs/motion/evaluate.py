"""Evaluation on Hopkins155: misclassification, video-level cross-validation, Table VII.

The protocol of the FSA paper (section 3.4): the 50 videos are split at random into 10 folds of 5
videos; a sequence and its ``_g12``/``_g13``/``_g23`` subsets stay together, and so do ``cars2`` and
``cars2B`` (shared raw footage). Each fold in turn is the test set; the ranker is trained on the
other nine. A sequence's *test* error is that of the candidate picked by the ranker trained without
its video; its *train* error is the mean over the nine rankers that saw it.

References
----------
Barbu et al., FSA paper, section 3.4, Table VII and Fig. 9.
"""

import logging

import numpy as np
from scipy.optimize import linear_sum_assignment

from cvfs.base import check_random_state

__all__ = ["CATEGORIES", "FEATURE_FAMILIES", "RESIDUAL_FEATURE", "misclassification",
           "video_folds", "summarise", "format_table", "cross_validate", "default_cache_path",
           "feature_columns", "FamilyRanker", "evaluate_hopkins155"]

log = logging.getLogger(__name__)

CATEGORIES = ("checkerboard", "traffic", "articulated")
# the unsupervised reference: lowest mean distance of the velocity vectors to K affine 3-D subspaces
RESIDUAL_FEATURE = "lik/vel/m3/mean"
# the feature sets of Table VII's ablation: every column, the likelihood or the prior family alone
FEATURE_FAMILIES = ("all", "likelihood", "prior")


def misclassification(labels, truth):
    """Misclassification rate after the best permutation of the labels (paper eq. 28).

    Parameters
    ----------
    labels : array_like of shape (P,) or (C, P)
        Predicted labels (any integer values); a 2-D array gives one rate per row.
    truth : array_like of shape (P,)
        Ground-truth labels.

    Returns
    -------
    rate : float or ndarray of shape (C,)
        Fraction of points misclassified, in [0, 1].

    Raises
    ------
    ValueError
        If the shapes disagree.
    """
    labels = np.asarray(labels)
    truth = np.asarray(truth).ravel()
    single = labels.ndim == 1
    labels = np.atleast_2d(labels)
    if labels.shape[1] != truth.size:
        raise ValueError(f"labels have {labels.shape[1]} points, truth has {truth.size}")
    _, t = np.unique(truth, return_inverse=True)
    out = np.empty(labels.shape[0])
    for i, row in enumerate(labels):
        _, p = np.unique(row, return_inverse=True)
        conf = np.zeros((p.max() + 1, t.max() + 1))
        np.add.at(conf, (p, t), 1)
        r, c = linear_sum_assignment(-conf)
        out[i] = 1.0 - conf[r, c].sum() / truth.size
    return float(out[0]) if single else out


def video_folds(videos, raw_footage, n_folds=10, random_state=0):
    """Assign sequences to folds by video, keeping shared raw footage together.

    Parameters
    ----------
    videos : sequence of str, length n_sequences
    raw_footage : sequence of str, length n_sequences
        Videos sharing raw footage go to the same fold.
    n_folds : int, default 10
    random_state : None, int or Generator, default 0

    Returns
    -------
    folds : ndarray of shape (n_sequences,), int64
        Fold index of each sequence; folds hold (nearly) equal numbers of videos.

    Raises
    ------
    ValueError
        If there are fewer videos than folds or the lengths differ.
    """
    videos = list(videos)
    raw_footage = list(raw_footage)
    if len(videos) != len(raw_footage):
        raise ValueError(f"videos ({len(videos)}) and raw_footage ({len(raw_footage)}) differ")
    groups = {}
    for v, r in zip(videos, raw_footage, strict=True):
        groups.setdefault(r, set()).add(v)
    n_videos = len(set(videos))
    if n_folds < 2 or n_videos < n_folds:
        raise ValueError(f"n_folds must be in [2, number of videos={n_videos}]; got {n_folds}")
    rng = check_random_state(random_state)
    names = sorted(groups)
    order = rng.permutation(len(names))
    # largest groups first, random order within a size; each to the fold with fewest videos
    order = sorted(order, key=lambda i: -len(groups[names[i]]))
    load = np.zeros(n_folds, dtype=int)
    fold_of = {}
    for i in order:
        f = int(np.argmin(load))
        for v in groups[names[i]]:
            fold_of[v] = f
        load[f] += len(groups[names[i]])
    return np.array([fold_of[v] for v in videos], dtype=np.int64)


def summarise(errors, categories, n_motions):
    """Average and median misclassification (percent) per category and motion count.

    Parameters
    ----------
    errors : array_like of shape (n_sequences,)
        Rates in [0, 1].
    categories : sequence of str
    n_motions : array_like of int

    Returns
    -------
    rows : dict
        Keys ``"<category>_two"``, ``"<category>_three"``, ``"two"``, ``"three"``, ``"all"``; each
        ``{"mean": %, "median": %, "n": count}``.
    """
    errors = 100.0 * np.asarray(errors, dtype=float)
    cats = np.asarray(categories)
    km = np.asarray(n_motions)
    rows = {}

    def row(mask):
        e = errors[mask]
        if e.size == 0:
            return {"mean": float("nan"), "median": float("nan"), "n": 0}
        return {"mean": float(e.mean()), "median": float(np.median(e)), "n": int(e.size)}

    for k, word in ((2, "two"), (3, "three")):
        for cat in CATEGORIES:
            rows[f"{cat}_{word}"] = row((cats == cat) & (km == k))
        rows[word] = row(km == k)
    rows["all"] = row(np.ones(errors.size, dtype=bool))
    return rows


def format_table(columns):
    """Text table in the layout of the paper's Table VII.

    Parameters
    ----------
    columns : dict of str -> dict
        Column title -> rows from :func:`summarise`.

    Returns
    -------
    text : str
    """
    titles = list(columns)
    width = max(10, *(len(t) for t in titles))
    head = f"{'':24s}" + "".join(f"{t:>{width + 1}s}" for t in titles)
    lines = [head, "-" * len(head)]
    blocks = [(f"{c.capitalize()} (2 motion)", f"{c}_two") for c in CATEGORIES]
    blocks += [("All (2 motion)", "two")]
    blocks += [(f"{c.capitalize()} (3 motion)", f"{c}_three") for c in CATEGORIES]
    blocks += [("All (3 motion)", "three"), ("All sequences combined", "all")]
    for title, key in blocks:
        n = columns[titles[0]][key]["n"]
        lines.append(f"{title} [n={n}]")
        for stat in ("mean", "median"):
            label = "  Average" if stat == "mean" else "  Median"
            lines.append(f"{label:24s}" + "".join(
                f"{columns[t][key][stat]:>{width + 1}.2f}" for t in titles))
    return "\n".join(lines)


def feature_columns(family):
    """Column indices of a feature family of :func:`cvfs.motion.features.feature_names`.

    Parameters
    ----------
    family : {"all", "likelihood", "prior"}
        ``"likelihood"``: the subspace-distance features (``lik/...``) with their relative blocks
        (``rel/lik/...``, ``z/lik/...``); ``"prior"``: the kNN cut fractions (``prior/...`` and
        their relative blocks); ``"all"``: every column, including the cluster-size and
        candidate-parameter features, which belong to neither family.

    Returns
    -------
    columns : ndarray of shape (n_columns,), int64

    Raises
    ------
    ValueError
        If ``family`` is unknown.
    """
    from cvfs.motion.features import feature_names

    if family not in FEATURE_FAMILIES:
        raise ValueError(f"family must be one of {FEATURE_FAMILIES}; got {family!r}")
    names = feature_names()
    if family == "all":
        return np.arange(len(names), dtype=np.int64)
    prefix = {"likelihood": "lik/", "prior": "prior/"}[family]
    base = [n.split("/", 1)[1] if n.startswith(("rel/", "z/")) else n for n in names]
    return np.array([i for i, n in enumerate(base) if n.startswith(prefix)], dtype=np.int64)


class FamilyRanker:
    """A candidate ranker that scores with some feature columns only (Table VII's ablation).

    The inner ranker sees ``X[:, columns]``; the cluster floor, a rule of the pipeline rather
    than a feature family, is learned and applied on the full candidate features as for the
    unrestricted rankers, so the columns compare the feature families alone.

    Parameters
    ----------
    ranker : RankBoost or MotionRanker
        Unfitted; its ``cluster_floor`` setting is honoured here.
    columns : array_like of int
        Columns of the candidate features the ranker may use (:func:`feature_columns`).
    """

    def __init__(self, ranker, columns):
        self.ranker = ranker
        self.columns = columns

    def fit(self, X, errors, groups):
        from cvfs.motion.ranking import learn_cluster_floor

        X = np.asarray(X, dtype=np.float64)
        cols = np.asarray(self.columns, dtype=np.int64)
        self.cluster_floor_ = (learn_cluster_floor(X, errors, groups)
                               if self.ranker.cluster_floor else None)
        self.ranker_ = self.ranker.__class__(**{**_ranker_params(self.ranker),
                                                "cluster_floor": False})
        self.ranker_.fit(X[:, cols], errors, groups)
        return self

    def decision_function(self, X):
        from cvfs.motion.ranking import apply_cluster_floor

        X = np.asarray(X, dtype=np.float64)
        scores = self.ranker_.decision_function(X[:, np.asarray(self.columns, dtype=np.int64)])
        return apply_cluster_floor(scores, X, self.cluster_floor_)

    def select(self, X, groups):
        from cvfs.motion.ranking import select_best

        return select_best(self.decision_function(X), groups)


def _ranker_params(ranker):
    """Constructor parameters of a RankBoost / MotionRanker (they store them under their names)."""
    import inspect

    return {k: getattr(ranker, k) for k in inspect.signature(type(ranker)).parameters}


def cross_validate(dataset, make_ranker, folds, *, verbose=False):
    """Cross-validate a candidate ranker.

    Parameters
    ----------
    dataset : RankingData
        Features, candidate errors and sequence groups (see :mod:`cvfs.motion.ranking`).
    make_ranker : callable
        ``make_ranker()`` returns an unfitted ranker with ``fit(X, errors, groups)`` and
        ``select(X, groups) -> chosen row index per group``.
    folds : ndarray of shape (n_sequences,)
        Fold of each sequence (from :func:`video_folds`).
    verbose : bool
        tqdm bar over folds.

    Returns
    -------
    test : ndarray of shape (n_sequences,)
        Test error (rate) of each sequence.
    train : ndarray of shape (n_sequences,)
        Mean training error of each sequence over the folds where it was in training.
    """
    from tqdm.auto import tqdm

    folds = np.asarray(folds)
    n_seq = dataset.n_sequences
    if folds.shape != (n_seq,):
        raise ValueError(f"folds must have shape ({n_seq},); got {folds.shape}")
    test = np.full(n_seq, np.nan)
    train_sum = np.zeros(n_seq)
    train_cnt = np.zeros(n_seq)
    for f in tqdm(np.unique(folds), desc="folds", disable=not verbose):
        tr = folds != f
        sub_tr = dataset.subset(np.flatnonzero(tr))
        ranker = make_ranker().fit(sub_tr.X, sub_tr.errors, sub_tr.groups)
        err = dataset.errors_of(ranker.select(dataset.X, dataset.groups))
        test[~tr] = err[~tr]
        train_sum[tr] += err[tr]
        train_cnt[tr] += 1
    return test, train_sum / np.maximum(train_cnt, 1)


def default_cache_path():
    """Where the feature cache goes: ``$CVFS_CACHE`` or ``~/.cache/cvfs`` (never the data home)."""
    import os
    from pathlib import Path

    from cvfs.motion.features import FEATURE_VERSION

    base = Path(os.environ.get("CVFS_CACHE") or Path.home() / ".cache" / "cvfs").expanduser()
    return base / f"hopkins155_motion_features_v{FEATURE_VERSION}.h5"


def evaluate_hopkins155(root=None, *, cache=None, n_folds=10, fold_seed=0, figures=None,
                        rankers=("rankboost", "fsa"), features=("all",), verbose=False):
    """Table VII: oracle, residual selector, RankBoost and FSA-Rank, 10-fold CV by video.

    Parameters
    ----------
    root : str or Path, optional
        Hopkins155 folder; default ``<data home>/hopkins155``.
    cache : str or Path, optional
        Feature cache (built if missing or stale); default :func:`default_cache_path`.
    n_folds : int, default 10
    fold_seed : int, default 0
        Seed of the video-to-fold assignment.
    figures : str or Path, optional
        Folder for ``motion_cdf.png`` (paper Fig. 9); None writes no figure.
    rankers : sequence of {"rankboost", "fsa"}
        Learned rankers to cross-validate.
    features : sequence of {"all", "likelihood", "prior"}, default ("all",)
        Feature sets each ranker is cross-validated on (:func:`feature_columns`); the columns of
        a family other than ``"all"`` are titled e.g. ``"FSA-Rank likelihood test"``.
    verbose : bool
        Progress bars.

    Returns
    -------
    result : dict
        JSON-ready: ``test``/``train`` rows of FSA-Rank (or the last ranker) on the first
        feature set from :func:`summarise` (percent), ``methods`` (every column),
        ``per_sequence``, ``folds``, ``timing`` and ``table`` (the text of
        :func:`format_table`).

    Raises
    ------
    FileNotFoundError
        If the dataset is missing.
    FileExistsError
        If ``cache`` exists and is not a feature cache, or cannot be written.
    ValueError
        If ``rankers`` names an unknown ranker or ``features`` an unknown feature set.
    """
    import time

    from cvfs.datasets.hopkins155 import list_sequences, load_hopkins155
    from cvfs.io import check_output_file
    from cvfs.motion.cache import build_cache, cache_matches, is_feature_cache, load_cache
    from cvfs.motion.ranking import ColumnSelector, MotionRanker, RankBoost

    known = {"rankboost": ("RankBoost", RankBoost), "fsa": ("FSA-Rank", MotionRanker)}
    for r in rankers:
        if r not in known:
            raise ValueError(f"rankers must be among {sorted(known)}; got {r!r}")
    family_cols = {f: feature_columns(f) for f in features}
    if not family_cols:
        raise ValueError("features must name at least one of "
                         f"{FEATURE_FAMILIES}; got {features!r}")
    cache = default_cache_path() if cache is None else cache
    if not is_feature_cache(cache):  # before anything is read: a non-cache is never replaced
        check_output_file(cache, replace=is_feature_cache, what="feature cache", label="cache")
    names = list_sequences(root)
    if not cache_matches(cache, names=names):
        log.info("building the feature cache %s (%d sequences)", cache, len(names))
        build_cache(load_hopkins155(root, names=names), cache, verbose=verbose)
    data, seconds = load_cache(cache, names=names)
    folds = video_folds(data.videos, data.raw_footage, n_folds, fold_seed)
    cols, per_seq, timing = {}, {}, {}
    per_seq["Oracle"] = data.oracle()
    residual = ColumnSelector(RESIDUAL_FEATURE).fit(data.X, data.errors, data.groups)
    per_seq["Residual"] = data.errors_of(residual.select(data.X, data.groups))
    last = None
    for family, fcols in family_cols.items():
        for r in rankers:
            title, cls = known[r]
            if family == "all":
                make = cls
            else:
                title = f"{title} {family}"

                def make(cls=cls, fcols=fcols):
                    return FamilyRanker(cls(), fcols)
            t0 = time.perf_counter()
            test, train = cross_validate(data, make, folds, verbose=verbose)
            key = r if family == "all" else f"{r}_{family}"
            timing[f"{key}_cv_seconds"] = time.perf_counter() - t0
            per_seq[f"{title} train"] = train
            per_seq[f"{title} test"] = test
            if family == next(iter(family_cols)):
                last = title
    for name, e in per_seq.items():
        cols[name] = summarise(e, data.categories, data.n_motions)
    timing["features_seconds_median"] = float(np.median(seconds))
    timing["features_seconds_mean"] = float(np.mean(seconds))
    table = format_table(cols)
    result = {
        "test": cols[f"{last} test"] if last else cols["Residual"],
        "train": cols[f"{last} train"] if last else cols["Residual"],
        "ranker": last,
        "methods": cols,
        "per_sequence": {name: {m: float(100 * e[i]) for m, e in per_seq.items()}
                         | {"category": data.categories[i], "n_motions": int(data.n_motions[i]),
                            "fold": int(folds[i]), "n_candidates": int(np.sum(data.groups == i))}
                         for i, name in enumerate(data.names)},
        "folds": {str(f): sorted({data.videos[i] for i in np.flatnonzero(folds == f)})
                  for f in np.unique(folds)},
        "n_candidates_mean": float(data.X.shape[0] / data.n_sequences),
        "n_features": int(data.X.shape[1]),
        "feature_sets": {f: int(c.size) for f, c in family_cols.items()},
        "residual_feature": RESIDUAL_FEATURE,
        "timing": timing,
        "table": table,
    }
    if figures is not None:
        from pathlib import Path

        from cvfs.viz.motion import save_error_cdfs

        shown = [c for c in per_seq if not c.endswith("train")]
        save_error_cdfs(Path(figures) / "motion_cdf.png",
                        {c: 100 * per_seq[c] for c in shown}, data.n_motions)
    return result
