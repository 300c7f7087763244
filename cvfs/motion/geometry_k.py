"""The number of motions K of perspective footage, chosen by the cuts of each K's best labelling.

For every K tried, the two-view-geometry candidates
(:func:`cvfs.motion.geometry.candidate_pool`: each affinity spectrally clustered into K, and into
K + 2 merged back to K by two-view fit; the affinities computed once) are ranked by
:func:`cvfs.motion.geometry.selection_scores` (the geometric mean of their normalised cuts on the
affinities) and the best one's score ``s_K`` kept. A labelling that separates independent
motions cuts little affinity per cluster; once every motion has its own cluster, one more cluster
must split a motion, and the mean cut per cluster ``s_K / K`` rises. K is the first K after
which it rises by more than ``rise`` (:func:`choose_k_by_cuts`). Rationale and measurements:
``docs/methods.md`` and ``docs/results.md``.
"""

import logging

import numpy as np

from cvfs.motion.geometry import (
    _kmeans_seed,
    _options,
    _tracks,
    candidate_pool,
    geometric_affinities,
    selection_scores,
)

__all__ = ["CUT_RISE", "best_labellings_by_k", "choose_k_by_cuts", "segment_perspective_k"]

log = logging.getLogger(__name__)

# rise of the mean cut per cluster, s_(K+1) / (K + 1) - s_K / K, that stops K growing: fitted on
# KT3DMoSeg and Hopkins155 together, each set weighted equally, and cross-validated by
# sequence-split folds in benchmarks/motion/motion_perspective_k.py
CUT_RISE = 0.0055


def choose_k_by_cuts(scores, rise=CUT_RISE):
    """K from the selection score of each K's best labelling: the first K after which the mean
    cut per cluster rises by more than ``rise``.

    Parameters
    ----------
    scores : dict of int to float
        ``s_K``: the lowest :func:`cvfs.motion.geometry.selection_scores` among the candidates of
        K, for each K tried.
    rise : float, default ``CUT_RISE``
        The smallest K (in increasing order of the K tried) with
        ``s_K' / K' - s_K / K > rise`` for the next K' tried is chosen; the largest K tried when
        there is none.

    Returns
    -------
    k : int

    Raises
    ------
    ValueError
        If ``scores`` is empty or ``rise`` is not a finite number.
    """
    if not scores:
        raise ValueError("scores must hold the score of at least one K")
    rise = float(rise)
    if not np.isfinite(rise):
        raise ValueError(f"rise must be a finite number; got {rise}")
    ks = sorted(int(k) for k in scores)
    per_cluster = [float(scores[k]) / k for k in ks]
    for i in range(len(ks) - 1):
        if per_cluster[i + 1] - per_cluster[i] > rise:
            return ks[i]
    return ks[-1]


def _check_candidates_k(candidates_k, n_points):
    """The K of ``candidates_k`` that ``n_points`` tracks allow (4 per motion), sorted."""
    try:
        ks = [k for k in candidates_k]
    except TypeError as exc:
        raise TypeError(f"candidates_k must be a sequence of ints; got "
                        f"{type(candidates_k).__name__}") from exc
    if not ks:
        raise ValueError("candidates_k must hold at least one K")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"candidates_k must hold ints; got {k!r}")
        if k < 2:
            raise ValueError(f"candidates_k must hold ints >= 2; got {k}")
    fit = sorted({int(k) for k in ks if 4 * int(k) <= n_points})
    if not fit:
        raise ValueError(f"points: {n_points} trajectories are too few for any K in "
                         f"{tuple(int(k) for k in ks)} (4 per motion needed)")
    return fit


def best_labellings_by_k(points, visible=None, *, candidates_k=tuple(range(2, 9)),
                         random_state=0, **options):
    """The best two-view-geometry candidate of every K and its selection score.

    The affinities (:func:`cvfs.motion.geometry.geometric_affinities`) are computed once and
    clustered into every K with the same k-means seed; each K's candidates are ranked by
    :func:`cvfs.motion.geometry.selection_scores`. For an int ``random_state`` the labelling of
    K is the one ``segment_perspective(points, K, visible, random_state=random_state)`` gives.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels; entries not ``visible`` are ignored.
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite.
    candidates_k : sequence of int, default 2..8
        The K tried (those with at least 4 tracks per motion).
    random_state : None, int or numpy.random.Generator, default 0
        As :func:`cvfs.motion.geometry.geometric_candidates`.
    **options
        The other keywords of :func:`cvfs.motion.geometry.geometric_candidates`.

    Returns
    -------
    labels : dict of int to ndarray of shape (P,), int64
        Each K's best candidate, in 0..K-1.
    scores : dict of int to float
        Its selection score ``s_K``.

    Raises
    ------
    ValueError
        As :func:`cvfs.motion.geometry.geometric_candidates`; also ``candidates_k`` empty, with a
        K < 2, or with no K that leaves 4 tracks per motion.
    TypeError
        Unknown ``options``, or ``candidates_k`` not a sequence of ints.
    """
    kw = _options(options, "best_labellings_by_k")
    points, visible = _tracks(points, visible)
    ks = _check_candidates_k(candidates_k, points.shape[0])
    aff = geometric_affinities(points, visible, random_state=random_state, **kw)
    seed = _kmeans_seed(random_state)
    labels, scores = {}, {}
    for k in ks:
        pool = candidate_pool(points, visible, aff, k, seed, gaps=kw["gaps"])
        s = selection_scores(aff, pool)
        i = int(np.argmin(s))
        labels[k], scores[k] = pool[i].copy(), float(s[i])
    return labels, scores


def segment_perspective_k(points, visible=None, *, candidates_k=tuple(range(2, 9)),
                          rise=CUT_RISE, random_state=0, return_scores=False, **options):
    """Segment tracks by motion under a perspective camera, K chosen: each K's best candidate
    (:func:`best_labellings_by_k`), then K by :func:`choose_k_by_cuts`.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels; entries not ``visible`` are ignored.
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite.
    candidates_k : sequence of int, default 2..8
        The K tried (those with at least 4 tracks per motion).
    rise : float, default ``CUT_RISE``
        As :func:`choose_k_by_cuts`.
    random_state : None, int or numpy.random.Generator, default 0
        As :func:`cvfs.motion.geometry.geometric_candidates`.
    return_scores : bool, default False
        Also return the K chosen and ``{K: s_K}``.
    **options
        The other keywords of :func:`cvfs.motion.geometry.geometric_candidates`.

    Returns
    -------
    labels : ndarray of shape (P,), int64
        In 0..K-1; for an int ``random_state``, those of
        ``segment_perspective(points, K, visible, random_state=random_state)``.
    n_motions : int
        Only with ``return_scores``.
    scores : dict of int to float
        Only with ``return_scores``: the selection score of each K's best candidate.

    Raises
    ------
    ValueError
        As :func:`best_labellings_by_k`; also ``rise`` not finite.
    TypeError
        As :func:`best_labellings_by_k`.
    """
    if not np.isfinite(float(rise)):
        raise ValueError(f"rise must be a finite number; got {rise}")
    labels, scores = best_labellings_by_k(points, visible, candidates_k=candidates_k,
                                          random_state=random_state, **options)
    k = choose_k_by_cuts(scores, rise)
    log.info("perspective K scores %s: K=%d", scores, k)
    return (labels[k], k, scores) if return_scores else labels[k]
