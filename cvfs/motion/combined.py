"""Motion segmentation for any camera: the affine and the two-view-geometry candidates in one pool,
ranked by one ranker trained on Hopkins155 and KT3DMoSeg together.

The affine pipeline (:func:`cvfs.motion.candidates.generate_candidates`, velocity clustering and
K-subspaces) finds the right labelling of nearly affine footage (Hopkins155) and the two-view
candidates (:func:`cvfs.motion.geometry.candidate_pool`: affine maps, homographies and
fundamental matrices over frame pairs) that of perspective footage (driving clips, KT3DMoSeg).
Here both sets of candidates of one sequence (with, for tracks that start and stop, the affine
pipeline's time-window labelling) go into one pool, with more two-view candidates merged from
finer over-segmentations (:data:`MERGE_EXTRAS`: each affinity clustered into K + 4, K + 6 and
K + 8 and merged back to K by :func:`cvfs.motion.geometry_merge.merged_candidates`, which keeps
small objects that K + 2 clusters still merge into a background split by depth). Each is
described by the features
of :mod:`cvfs.motion.geometry_features` (two-view fit residuals on the observed entries, cuts
and sizes: nothing assumes an affine camera) and the shipped ranker
(``cvfs/models/motion_ranker_combined.h5``, :class:`~cvfs.motion.ranking.MotionRanker` trained by
``data_prep/train_motion_ranker.py --combined`` on every sequence of both sets) picks one. So the
ranker, not the user, decides which camera model a sequence follows.

With K chosen, K is the affine pipeline's choice (:func:`cvfs.motion.kselect.choose_k_capped`,
the robust subspace cost, on the complete tracks), and the combined pool of that K is ranked.
The cuts of the two-view candidates (:func:`cvfs.motion.geometry_k.choose_k_by_cuts`) choose K
better on driving clips but worse on Hopkins155, and no test of the camera tried here told the
two kinds of footage apart reliably enough to switch between the rules.
Measurements: ``docs/results.md``.
"""

from pathlib import Path

import numpy as np

from cvfs.motion.geometry import (
    _kmeans_seed,
    _tracks,
    candidate_pool,
    geometric_affinities,
    selection_scores,
)
from cvfs.motion.geometry_features import geometry_features, n_geometry_features

__all__ = ["MERGE_EXTRAS", "POOL", "CombinedSequence", "combined_candidates",
           "load_combined_ranker", "rank_combined", "segment_combined", "two_view_candidates"]

#: the name of the pool a combined ranker file was trained on (its ``pool`` setting)
POOL = "combined-v2"
#: clusters beyond K of the extra merged two-view candidates (the pool's K + 2 come from
#: :func:`cvfs.motion.geometry.candidate_pool`)
MERGE_EXTRAS = (4, 6, 8)
_MODEL_NAME = "motion_ranker_combined.h5"


def load_combined_ranker():
    """The shipped ranker of the combined pool, ``models_dir() / "motion_ranker_combined.h5"``.

    Raises
    ------
    FileNotFoundError
        If the model file is missing.
    """
    from cvfs.datasets import models_dir

    path = Path(models_dir()) / _MODEL_NAME
    if not path.is_file():
        raise FileNotFoundError(f"model: the shipped combined motion ranker {path} is missing; "
                                "train it with `python data_prep/train_motion_ranker.py "
                                "--combined`")
    return _checked(_load(path), path)


def _load(path):
    from cvfs.motion.ranking import load_ranker

    return load_ranker(path)


def _checked(ranker, where):
    settings = getattr(ranker, "settings_", None)
    if settings is None:  # a ranker fitted in this process: the caller knows its features
        return ranker
    if settings.get("pool") != POOL or settings.get("n_features") != n_geometry_features():
        raise ValueError(f"{where} was not trained on this cvfs's combined pool (pool "
                         f"{settings.get('pool')!r}, {settings.get('n_features')} features; "
                         f"expected {POOL!r}, {n_geometry_features()}): retrain it")
    return ranker


def _resolve(model):
    if model is None:
        return load_combined_ranker()
    if isinstance(model, (str, Path)):
        return _checked(_load(model), model)
    if not hasattr(model, "decision_function"):
        raise TypeError("model must be None, a path to a combined motion-ranker file or a "
                        f"fitted ranker with decision_function; got {type(model).__name__}")
    return _checked(model, type(model).__name__)


def affine_settings(ranker=None):
    """The affine candidates' settings (``alphas``, ``refine``, ``seed``): those stored with a
    combined ranker, else the shipped affine ranker's."""
    settings = getattr(ranker, "settings_", None) or {}
    if not all(k in settings for k in ("alphas", "refine", "seed")):
        from cvfs.motion import load_default_ranker

        settings = load_default_ranker().settings_
    return {"alphas": tuple(settings["alphas"]), "refine": tuple(settings["refine"]),
            "seed": int(settings["seed"])}


def affine_candidates(points, visible, n_motions, settings):
    """The affine pipeline's distinct candidates of K: for tracks that start and stop, first
    ``segment(points, K, visible=visible)``'s labelling from time windows
    (:func:`cvfs.motion.windows.segment_windows`, the shipped affine ranker's pick in each),
    then the candidates of the tracks completed at rank 4K
    (:func:`cvfs.motion.missing.complete_trajectories`)."""
    from cvfs.motion import load_default_ranker, normalise_points, rank_candidates
    from cvfs.motion.candidates import canonical_labels, generate_candidates

    rows = []
    if not visible.all():
        from cvfs.motion.missing import complete_trajectories
        from cvfs.motion.windows import segment_windows

        ranker = load_default_ranker()

        def best(p, k):
            labels, scores = rank_candidates(p, k, model=ranker)
            return labels[int(np.argmax(scores))]

        windows = segment_windows(points, n_motions, visible, best)
        if windows is not None:
            rows.append(windows)
        points = complete_trajectories(points, visible, n_motions=n_motions)
    cand = generate_candidates(normalise_points(points), n_motions, alphas=settings["alphas"],
                               refine=settings["refine"], random_state=settings["seed"])
    rows.extend(np.asarray(cand.labels))
    return np.unique(canonical_labels(np.asarray(rows)), axis=0)


def two_view_candidates(points, visible, affinities, n_motions, seed):
    """The pool's two-view candidates of K: :func:`cvfs.motion.geometry.candidate_pool`'s,
    then those merged back to K from K + e clusters for e in :data:`MERGE_EXTRAS` (each
    affinity; none where fewer than 4 tracks per cluster would remain).

    Parameters
    ----------
    points, visible : validated tracks
    affinities : dict
        :func:`cvfs.motion.geometry.geometric_affinities`.
    n_motions : int
    seed : int
        k-means seed (:func:`cvfs.motion.geometry._kmeans_seed` of the random state).

    Returns
    -------
    labels : ndarray of shape (C, P), int64
    """
    from cvfs.motion.geometry_merge import merged_candidates

    rows = [candidate_pool(points, visible, affinities, int(n_motions), seed)]
    rows += [merged_candidates(points, visible, affinities, int(n_motions), seed, extra=e)
             for e in MERGE_EXTRAS]
    return np.vstack(rows)


def combined_candidates(points, visible, n_motions, *, settings, affinities=None,
                        random_state=0, perspective=None):
    """The combined pool of one K: the two-view candidates, then the affine ones.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
    visible : ndarray of shape (P, F), bool
        Validated tracks (:func:`cvfs.motion.geometry._tracks`).
    n_motions : int
    settings : dict
        :func:`affine_settings`.
    affinities : dict, optional
        :func:`cvfs.motion.geometry.geometric_affinities` of the tracks (computed when None).
    random_state : int, default 0
        Seed of the hypothesis sampling and k-means.
    perspective : ndarray of shape (C', P), optional
        The two-view candidates of K (:func:`two_view_candidates` with these affinities and
        seed), when already computed.

    Returns
    -------
    labels : ndarray of shape (C, P), int64
    n_perspective : int
        The first ``n_perspective`` rows are the two-view candidates.
    affinities : dict
    """
    if affinities is None:
        affinities = geometric_affinities(points, visible, random_state=random_state)
    persp = perspective if perspective is not None else two_view_candidates(
        points, visible, affinities, int(n_motions), _kmeans_seed(random_state))
    affine = affine_candidates(points, visible, int(n_motions), settings)
    return np.vstack([persp, affine]), len(persp), affinities


def rank_combined(points, n_motions, visible=None, *, model=None, random_state=0,
                  affinities=None, perspective=None):
    """The combined pool of one sequence and K, with the ranker's scores.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels (any units); entries not ``visible`` are ignored.
    n_motions : int
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite.
    model : None, str, Path or fitted ranker
        None loads the shipped combined ranker.
    random_state : int, default 0
    affinities : dict, optional
        The tracks' geometric affinities, when already computed with ``random_state``.
    perspective : ndarray of shape (C', P), optional
        The two-view candidates of K, when already computed (with those affinities).

    Returns
    -------
    labels : ndarray of shape (C, P), int64
    scores : ndarray of shape (C,)
        Higher = better.
    n_perspective : int
        Rows below it are two-view candidates, the others affine ones.
    """
    ranker = _resolve(model)
    points, visible = _tracks(points, visible, n_motions)
    labels, n_persp, aff = combined_candidates(points, visible, n_motions,
                                               settings=affine_settings(ranker),
                                               affinities=affinities, random_state=random_state,
                                               perspective=perspective)
    X = geometry_features(points, labels, visible, affinities=aff)
    return labels, np.asarray(ranker.decision_function(X), dtype=np.float64), n_persp


def segment_combined(points, n_motions=None, visible=None, *, model=None,
                     candidates_k=tuple(range(2, 9)), random_state=0, return_k=False):
    """Segment tracks by motion for an affine or a perspective camera (``segment(...,
    camera="auto")``).

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels (any units); entries not ``visible`` are ignored.
    n_motions : int or None
        K; None chooses it (module docstring).
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite. Every track must be observed in >= 2 frames.
    model : None, str, Path or fitted ranker
        None loads the shipped combined ranker.
    candidates_k : sequence of int, default 2..8
        The K tried when ``n_motions`` is None.
    random_state : int, default 0
        Seed of the hypothesis sampling and k-means of the two-view candidates.
    return_k : bool, default False
        Also return the K used and whether the pick was an affine candidate.

    Returns
    -------
    labels : ndarray of shape (P,), int64
    n_motions : int
        Only with ``return_k``.
    affine : bool
        Only with ``return_k``: the pick is one of the affine candidates.
    """
    seq = CombinedSequence(points, visible, model=model, random_state=random_state,
                           n_motions=n_motions)
    if n_motions is not None:
        labels, affine = seq.pick(int(n_motions))
        return (labels, int(n_motions), affine) if return_k else labels
    k = seq.k_affine(seq.candidates_k(candidates_k))
    labels, affine = seq.pick(k)
    return (labels, k, affine) if return_k else labels


class CombinedSequence:
    """One sequence's tracks, affinities and pools, computed once for every K asked.

    Parameters
    ----------
    points, visible
        As :func:`segment_combined`.
    model : None, str, Path or fitted ranker
    random_state : int, default 0
    n_motions : int, optional
        Checked against the number of tracks when given.
    """

    def __init__(self, points, visible=None, *, model=None, random_state=0, n_motions=None):
        self.ranker = _resolve(model)
        self.points, self.visible = _tracks(points, visible, n_motions)
        self.random_state = random_state
        self.affinities = geometric_affinities(self.points, self.visible,
                                               random_state=random_state)
        self.perspective = {}

    def candidates_k(self, candidates_k):
        """The K of ``candidates_k`` that leave 4 tracks per motion (checked)."""
        from cvfs.motion.geometry_k import _check_candidates_k

        return _check_candidates_k(candidates_k, self.points.shape[0])

    def _pool(self, k):
        if k not in self.perspective:
            self.perspective[k] = two_view_candidates(self.points, self.visible,
                                                      self.affinities, k,
                                                      _kmeans_seed(self.random_state))
        return self.perspective[k]

    def pick(self, k):
        """(labels, affine): the ranker's pick in the combined pool of K, and whether it is an
        affine candidate."""
        labels, scores, n_persp = rank_combined(self.points, k, self.visible, model=self.ranker,
                                                random_state=self.random_state,
                                                affinities=self.affinities,
                                                perspective=self._pool(k))
        i = int(np.argmax(scores))
        return np.unique(labels[i], return_inverse=True)[1].astype(np.int64), i >= n_persp

    def k_affine(self, ks):
        """K by the affine pipeline's rule (:func:`cvfs.motion.segment`'s, K chosen)."""
        from cvfs.motion import _affine_k

        return int(_affine_k(self.points, None if self.visible.all() else self.visible, ks))

    def k_cut(self, ks):
        """K by the cuts of each K's best two-view candidate
        (:func:`cvfs.motion.geometry_k.choose_k_by_cuts`)."""
        from cvfs.motion.geometry_k import choose_k_by_cuts

        scores = {k: float(selection_scores(self.affinities, self._pool(k)).min()) for k in ks}
        return int(choose_k_by_cuts(scores))
