"""Motion segmentation by learned ranking of candidate segmentations (FSA-Rank, Hopkins155).

``segment(points)`` is the one call a user needs: it chooses the number of motions K
(:mod:`~cvfs.motion.kselect`; ``segment(points, K)`` takes it given), builds candidates by velocity
clustering over a pool of (alpha, d) (:mod:`~cvfs.motion.candidates`), ~2500 ranking features per
candidate (:mod:`~cvfs.motion.features`), and the shipped FSA-Rank model picks the best
(:mod:`~cvfs.motion.ranking`). :mod:`~cvfs.motion.evaluate` reproduces the paper's Table VII.
``segment(points, K, camera="perspective")`` segments perspective footage by two-view geometry
instead (:mod:`~cvfs.motion.geometry`; K chosen: :mod:`~cvfs.motion.geometry_k`).

References
----------
Barbu, She, Ding, Gramajo, "Feature selection with annealing for computer vision and big data
learning", TPAMI 2017, section 3.4 and appendix "Ranking for Motion Segmentation".
"""

import logging
from pathlib import Path

import numpy as np

from cvfs.motion.candidates import (
    DEFAULT_ALPHAS,
    DEFAULT_REFINE,
    check_points,
    generate_candidates,
    velocity_matrix,
)
from cvfs.motion.features import FEATURE_VERSION, candidate_features, n_features
from cvfs.motion.kselect import (
    CAPPED_CAP,
    CAPPED_DIM_COST,
    choose_k,
    choose_k_capped,
    k_capped_costs,
    k_labellings_residuals,
    subspace_residual,
)

# the numbers of motions of the ranker's training sequences (Hopkins155: 2 and 3)
RANKED_K = (2, 3)
# complete trajectories needed to choose K on them alone (the smallest Hopkins155 sequence: 39)
MIN_COMPLETE_FOR_K = 40
# the camera models segment() knows ("auto": the combined pool, either camera)
CAMERAS = ("affine", "perspective", "auto")

__all__ = ["explained_by_one_motion", "load_default_ranker", "normalise_points",
           "one_motion_residuals", "rank_candidates", "segment"]

log = logging.getLogger(__name__)

_MODEL_NAME = "motion_ranker.h5"


def normalise_points(points, *, per_axis=False):
    """Centre trajectories on their bounding box and scale it into [-1, 1] (isotropic).

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
    per_axis : bool, default False
        Scale x and y separately, each into [-1, 1]: the result is then the same for any
        change of units ``(a x + b, c y + d)``, ``a, c > 0`` (pixels, or coordinates divided by
        the half image width and height as Hopkins155's normalised points are). An axis without
        spread takes the other axis' scale.

    Returns
    -------
    normalised : ndarray of shape (P, F, 2)

    Raises
    ------
    ValueError
        If the points do not spread (every coordinate equal, up to 1e-12 of their magnitude).
    """
    lo = points.reshape(-1, 2).min(axis=0)
    hi = points.reshape(-1, 2).max(axis=0)
    # halves first: (hi - lo) and (hi + lo) of finite coordinates near 1e308 would overflow
    halves = hi / 2.0 - lo / 2.0
    mag = np.maximum(np.abs(lo), np.abs(hi))
    half = float(np.max(halves))
    if not half > 1e-12 * float(np.max(mag)):
        raise ValueError("points: every trajectory stays at one position (no spread to "
                         "segment)")
    if per_axis:
        half = np.where(halves > 1e-12 * mag, halves, half)
    return (points - (lo / 2.0 + hi / 2.0)) / half


def one_motion_residuals(points):
    """Distance of each trajectory from the best single image motion of all trajectories.

    For every frame f an affine map from the first frame's positions to frame f's is fitted to
    all trajectories by least squares (6 parameters: a camera translating, rotating in the image
    plane or zooming over a static scene, or a frozen video, is explained exactly).

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Image coordinates in pixels.

    Returns
    -------
    residuals : ndarray of shape (P,)
        Largest distance (pixels) over the frames between a trajectory and the fitted maps.
    """
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    X = np.column_stack([points[:, 0], np.ones(n)])  # (P, 3)
    Y = points[:, 1:].reshape(n, -1)  # (P, 2 (F - 1))
    coef, *_ = np.linalg.lstsq(X, Y, rcond=None)
    res = (X @ coef - Y).reshape(n, -1, 2)
    return np.sqrt((res ** 2).sum(axis=2)).max(axis=1, initial=0.0)


def explained_by_one_motion(points, *, tol=1.0, min_points=4):
    """Whether one image motion explains all trajectories: no independent motion to segment.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Image coordinates in pixels.
    tol : float, default 1.0
        Residual (pixels, :func:`one_motion_residuals`) up to which a trajectory follows the
        common motion; the tracker's forward-backward threshold (1 px by default) bounds the
        error of a kept track.
    min_points : int, default 4
        Fewer trajectories off the common motion are taken as tracking noise, not a motion
        (:func:`segment` needs 4 trajectories per motion).

    Returns
    -------
    bool
    """
    return int(np.sum(one_motion_residuals(points) > tol)) < int(min_points)


def check_visible_tracks(points):
    """Validate trajectories before K is known: shape (P, F, 2), numeric, finite.

    Raises
    ------
    ValueError
        Wrong shape, fewer than 2 frames, non-numeric, or NaN/inf (whole NaN trajectories
        are named, with their indices).
    """
    arr = np.asarray(points)
    if arr.ndim != 3 or arr.shape[2] != 2:
        raise ValueError(f"points must have shape (P, F, 2) (trajectories x frames x xy); "
                         f"got shape {arr.shape}")
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"points must be numeric; got dtype {arr.dtype}") from exc
    dead = np.flatnonzero(np.isnan(arr).all(axis=(1, 2))) if arr.size else np.array([], int)
    if dead.size:
        raise ValueError(f"points: {dead.size} trajectories are NaN in every frame (indices "
                         f"{dead[:10].tolist()}{' ...' if dead.size > 10 else ''}): drop them")
    if arr.shape[1] < 2:
        raise ValueError(f"points must have at least 2 frames; got F={arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"points contains NaN or infinite values "
                         f"({int(np.sum(~np.isfinite(arr)))} entries): drop those trajectories")
    return arr


def load_default_ranker():
    """The shipped ranker, ``cvfs.datasets.models_dir() / "motion_ranker.h5"``.

    Raises
    ------
    FileNotFoundError
        If the model file is missing (train it with ``data_prep/train_motion_ranker.py``).
    """
    from cvfs.datasets import models_dir
    from cvfs.motion.ranking import load_ranker

    path = Path(models_dir()) / _MODEL_NAME
    if not path.is_file():
        raise FileNotFoundError(f"model: the shipped motion ranker {path} is missing; train it "
                                "with `python data_prep/train_motion_ranker.py`")
    return load_ranker(path)


def _resolve(model):
    from cvfs.motion.ranking import load_ranker

    if model is None:
        return load_default_ranker()
    if isinstance(model, (str, Path)):
        return load_ranker(model)
    if not hasattr(model, "decision_function"):
        raise TypeError("model must be None, a path to a motion-ranker file or a fitted ranker "
                        f"with decision_function; got {type(model).__name__}")
    return model


def rank_candidates(points, n_motions, *, model=None):
    """Candidates of one sequence and their ranking scores.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Image coordinates (any scale; normalised inside).
    n_motions : int
    model : None, str, Path or fitted ranker
        None loads the shipped ranker.

    Returns
    -------
    labels : ndarray of shape (C, P)
        Candidate segmentations.
    scores : ndarray of shape (C,)
        Higher = better. For a K outside the ranker's training motions (``RANKED_K``, 2 and 3
        for the shipped ranker) the score is minus the candidate's mean squared distance to its
        K affine 3-D subspaces (:func:`cvfs.motion.kselect.subspace_residual`).

    Raises
    ------
    ValueError, TypeError
        As :func:`segment`.
    """
    points, n_motions = check_points(points, n_motions)
    ranker = _resolve(model)
    settings = getattr(ranker, "settings_", {})
    if settings.get("feature_version", FEATURE_VERSION) != FEATURE_VERSION or \
            settings.get("n_features", n_features()) != n_features():
        raise ValueError(f"model was trained on feature version {settings.get('feature_version')} "
                         f"({settings.get('n_features')} features); this cvfs computes version "
                         f"{FEATURE_VERSION} ({n_features()}): retrain the ranker")
    alphas = tuple(settings.get("alphas", DEFAULT_ALPHAS))
    refine = tuple(settings.get("refine", DEFAULT_REFINE))
    pts = normalise_points(points)
    cand = generate_candidates(pts, n_motions, alphas=alphas, refine=refine,
                               random_state=int(settings.get("seed", 0)))
    if n_motions not in tuple(settings.get("ranked_k", RANKED_K)):
        # outside the K the ranker learned from: the rigid-motion model alone ranks
        Y = velocity_matrix(pts).T
        return cand.labels, -np.array([subspace_residual(Y, lab) for lab in cand.labels])
    X = candidate_features(pts, cand)
    return cand.labels, np.asarray(ranker.decision_function(X), dtype=np.float64)


def _complete(points, visible, n_motions):
    """Trajectories completed where ``visible`` is False (:mod:`cvfs.motion.missing`)."""
    if visible is None:
        return points
    from cvfs.motion.missing import complete_trajectories

    return complete_trajectories(points, visible, n_motions=n_motions)


def segment(points, n_motions=None, *, visible=None, model=None,
            candidates_k=tuple(range(2, 9)), camera="affine"):
    """Segment point trajectories by motion, with the number of motions K chosen or given.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Image coordinates (x, y) of P trajectories over F frames; any scale (they are centred and
        scaled into [-1, 1] inside). Without ``visible`` every trajectory must be complete (no
        NaN).
    n_motions : int or None, default None
        K >= 2; at least 4 trajectories per motion are needed (P >= 4K). None chooses K among
        ``candidates_k`` (those the points allow) by the robust subspace-cost rule
        :func:`cvfs.motion.kselect.choose_k_capped`: the K minimising
        ``log g_K + mu log q_K + lam K log(P) / P``, ``g_K`` the lowest robust cost
        (:func:`cvfs.motion.kselect.k_capped_costs`: capped residuals in units of the noise
        level, each cluster 2-, 3- or 4-D) over seeded K-subspaces and spectral labellings of
        K, ``q_K`` the planar residual of the lowest-residual labelling; then the ranker picks
        the labelling of that K as with K given. The K chosen is ``labels.max() + 1``. K is
        chosen on the tracks with x and y each scaled into [-1, 1] (:func:`normalise_points`
        with ``per_axis``, close to Hopkins155's points, which the rule was fitted on), so it
        is the same in pixels or any other units of x and y. With
        ``visible``, K is chosen on the trajectories observed in every frame when there are at
        least ``MIN_COMPLETE_FOR_K`` of them, otherwise on all of them completed at rank 12.
    visible : array_like of shape (P, F), bool, optional
        False where a trajectory is not observed (``points`` may hold NaN there); each
        trajectory must be observed in at least 2 frames. Tracks that start and stop (each
        observed over one interval of frames, as a tracker's) are segmented in overlapping time
        windows, each on the tracks observed in all its frames, and the windows' labellings
        merged by relabelling and voting (:func:`cvfs.motion.windows.segment_windows`; no
        completion). Missing entries scattered inside tracks, or too few complete tracks in
        every window, are filled by a rank-4K completion of the trajectory matrix
        (:func:`cvfs.motion.missing.complete_trajectories`) before the candidates are ranked.
    model : None, str, Path or fitted ranker, optional
        None loads the shipped ranker (``cvfs/models/motion_ranker.h5``); a path loads that file; an
        object with ``decision_function`` (e.g. a fitted :class:`~cvfs.motion.ranking.MotionRanker`)
        is used as it is.
    candidates_k : sequence of int, default 2..8
        The K tried when ``n_motions`` is None.
    camera : {"affine", "perspective", "auto"}, default "affine"
        "affine": the velocity and K-subspace candidates ranked by ``model`` (trajectories of a
        rigid motion span a 3-D affine subspace: a narrow field of view or distant objects, as
        Hopkins155). "perspective" (driving footage and other wide-angle, deep scenes): the
        candidates from two-view geometry (affine maps, homographies and fundamental matrices
        over frame pairs, on the observed entries only) and the one whose labelling cuts their
        affinities least (:func:`cvfs.motion.geometry.segment_perspective`, seed 0). With
        ``n_motions`` None, K is chosen among ``candidates_k`` by comparing each K's best
        labelling (:func:`cvfs.motion.geometry_k.segment_perspective_k`: the first K after
        which the mean normalised cut per cluster rises by more than
        ``geometry_k.CUT_RISE``). ``model`` is not used. "auto" (either camera): the affine
        and the two-view candidates in one pool, ranked by a ranker trained on Hopkins155 and
        KT3DMoSeg together (:func:`cvfs.motion.combined.segment_combined`; ``model``: that
        ranker, None the shipped ``motion_ranker_combined.h5``); with ``n_motions`` None, K by
        the affine rule (as for "affine"), then the pool of that K ranked.

    Returns
    -------
    labels : ndarray of shape (P,), int64
        Motion of each trajectory, in 0..K-1.

    Raises
    ------
    ValueError
        If ``points`` is not (P, F, 2), has NaN/inf (at a visible entry) or fewer than 2 frames,
        ``visible`` is not a (P, F) boolean mask or leaves a trajectory with fewer than 2
        observed frames, ``n_motions < 2`` or ``P < 4 n_motions`` (K chosen: fewer than 4
        trajectories per motion for every K of ``candidates_k``), or the model was trained on
        other features.
        With ``camera="perspective"`` and K chosen, ``candidates_k`` empty or with a K < 2;
        an unknown ``camera``.
    TypeError
        If ``n_motions`` is neither None nor an int, or ``model`` is of an unknown type; with
        ``camera="perspective"`` and K chosen, ``candidates_k`` not a sequence of ints.
    FileNotFoundError
        If the model file is missing.

    References
    ----------
    FSA paper, appendix, Algorithm 2.
    """
    if camera not in CAMERAS:
        raise ValueError(f"camera must be one of {CAMERAS}; got {camera!r}")
    if camera == "auto":
        from cvfs.motion.combined import segment_combined

        return segment_combined(points, n_motions, visible, model=model,
                                candidates_k=candidates_k)
    if camera == "perspective":
        if n_motions is None:
            from cvfs.motion.geometry_k import segment_perspective_k

            return segment_perspective_k(points, visible, candidates_k=candidates_k)
        from cvfs.motion.geometry import segment_perspective

        return segment_perspective(points, n_motions, visible)
    if n_motions is None:
        return _segment_tracks(points, None, visible=visible, model=model,
                               candidates_k=candidates_k)[0]
    if visible is not None:
        from cvfs.motion.missing import check_visible

        check_visible(points, visible, n_motions)
    return _ranked(points, visible, n_motions, _resolve(model))[0]


def _ranked(points, visible, n_motions, ranker, completed=None):
    """(labels, score): the ranker's pick among the candidates of K; partial trajectories
    (``visible`` not all True) are segmented window by window
    (:func:`cvfs.motion.windows.segment_windows`, score None), or completed at rank 4K when
    their missing entries are scattered or no window holds 4 complete tracks per motion
    (``completed``: that completion, when the caller has it already)."""

    def pick(pts, k):
        labels, scores = rank_candidates(pts, k, model=ranker)
        i = int(np.argmax(scores))
        return np.asarray(labels[i], dtype=np.int64), float(scores[i])

    if visible is not None and not np.asarray(visible, dtype=bool).all():
        from cvfs.motion.windows import segment_windows

        labels = segment_windows(points, n_motions, visible, lambda p, k: pick(p, k)[0])
        if labels is not None:
            return labels, None
        points = _complete(points, visible, n_motions) if completed is None else completed
    return pick(points, n_motions)


def _segment_tracks(points, n_motions=None, *, visible=None, model=None,
                    candidates_k=tuple(range(2, 9)), tau=None, return_scores=False,
                    completed=None):
    """:func:`segment` returning the K used too, with the K rule's threshold and residuals.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
    n_motions : int or None
        K; None chooses K among ``candidates_k`` (those the points allow, 4 trajectories per
        motion) by :func:`cvfs.motion.kselect.choose_k_capped`: the K minimising
        ``log g_K + mu log q_K + lam K log(P) / P``, ``g_K`` the lowest robust cost
        (:func:`cvfs.motion.kselect.k_capped_costs`: capped residuals in units of the noise
        level, each cluster 2-, 3- or 4-D) over the labellings of K, ``q_K`` the planar
        residual of the lowest-residual labelling (:func:`cvfs.motion.kselect.k_residuals`).
    visible : array_like of shape (P, F), bool, optional
        As :func:`segment`. With K chosen, K is chosen on the trajectories observed in every
        frame when there are at least ``MIN_COMPLETE_FOR_K`` of them (the rule is calibrated on
        complete trajectories; its penalty does not hold back a split background at thousands
        of completed partial tracks), otherwise on all of them completed at rank 12; then
        the trajectories are segmented as with K given.
    model : None, str, Path or fitted ranker
    candidates_k : sequence of int, default 2..8
    tau : float, optional
        None uses the robust-cost rule with the parameters of ``cvfs.motion.kselect``
        (``CAPPED_*``, fitted on Hopkins155, cross-validated in ``benchmarks/motion/motion_k.py``);
        a float uses the residual-ratio rule :func:`cvfs.motion.kselect.choose_k` with this
        threshold instead.
    return_scores : bool, default False
        Also return the best subspace residual ``r_K`` per K tried (K given: the chosen
        candidate's ranking score for that K alone, none for partial trajectories).
    completed : ndarray of shape (P, F, 2), optional
        With K given: the trajectories already completed at rank 4K, used when they are to be
        completed (scattered missing entries) instead of completing them again.

    Returns
    -------
    labels : ndarray of shape (P,), int64
    n_motions : int
        The K used.
    scores : dict of int to float
        Only with ``return_scores``.

    Raises
    ------
    ValueError
        As :func:`segment`; also if no K in ``candidates_k`` fits the number of points.
    """
    if visible is not None:
        from cvfs.motion.missing import check_visible

        check_visible(points, visible, n_motions)
    ranker = _resolve(model)
    tried = {}
    n_motions_given = n_motions is not None
    if n_motions is None:
        n_motions, tried = _choose_k(_k_basis(points, visible), candidates_k, tau)
    labels, score = _ranked(points, visible, n_motions, ranker,
                            completed if n_motions_given else None)
    out = (labels, int(n_motions))
    if not return_scores:
        return out
    return out + (tried or ({} if score is None else {int(n_motions): score}),)


def _k_basis(points, visible):
    """The trajectories K is chosen on: all of them when complete, else those observed in every
    frame when there are at least ``MIN_COMPLETE_FOR_K``, else all completed at rank 12."""
    if visible is None:
        return points
    whole = np.asarray(visible, dtype=bool).all(axis=1)
    if whole.sum() >= MIN_COMPLETE_FOR_K:
        return np.asarray(points, dtype=np.float64)[whole]
    return _complete(points, visible, 3)


def _affine_k(points, visible, candidates_k):
    """K by :func:`segment`'s affine rule (the robust subspace cost) on :func:`_k_basis`."""
    return _choose_k(_k_basis(points, visible), candidates_k, None)[0]


def _choose_k(points, candidates_k, tau):
    """(K, {K: best subspace residual r_K}) of :func:`segment`'s rule on complete
    trajectories."""
    arr = check_visible_tracks(points)
    n_pts = arr.shape[0]
    ks = sorted(int(k) for k in candidates_k if int(k) >= 2 and 4 * int(k) <= n_pts)
    if not ks:
        raise ValueError(f"points: {n_pts} trajectories are too few for any K in "
                         f"{tuple(candidates_k)} (4 per motion needed)")
    # per axis: the rule was fitted on Hopkins155's points, each axis already mapped to [-1, 1]
    # by the image size; this makes K the same for pixels or any other units of x and y
    pts = normalise_points(arr, per_axis=True)
    labellings, residuals, planar = k_labellings_residuals(pts, ks)
    tried = {kk: float(residuals[kk]) for kk in ks}
    if tau is None:
        costs = k_capped_costs(pts, ks, labellings=labellings, cap=CAPPED_CAP,
                               dim_cost=CAPPED_DIM_COST)
        k = choose_k_capped(costs, planar, n_pts)
    else:
        k = choose_k(tried, tau)
    log.info("K residuals %s: K=%d", tried, k)
    return int(k), tried
