"""Track a video and segment its tracks by motion: the one implementation behind
``cvfs motion segment``, ``apps/motion_video.py`` and ``benchmarks/motion/motion_videos.py``."""

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from cvfs.motion.tracking import TrackerSettings, track_points

__all__ = ["VideoSegmentation", "segment_tracked", "segment_video"]

log = logging.getLogger(__name__)


@dataclass
class VideoSegmentation:
    """Tracks of a video and their motions.

    Attributes
    ----------
    points : ndarray of shape (P, F, 2)
        Track positions (x = column, y = row), NaN where not observed.
    visible : ndarray of shape (P, F), bool
        True where the track is observed (all True for full trajectories).
    labels : ndarray of shape (P,), int64
        Motion of each track, 0..K-1 (all 0 without independent motion).
    n_motions : int
        K (1 when one image motion explains every track).
    independent_motion : bool
    k_chosen : bool
        Whether K was chosen (``n_motions=None``) rather than given.
    k_residuals : dict of int to float
        When K was chosen: the best subspace residual per K tried (``camera="affine"``) or the
        selection score of each K's best candidate (``camera="perspective"``).
    tracker : TrackerSettings
    track_seconds, segment_seconds : float
    """

    points: np.ndarray
    visible: np.ndarray
    labels: np.ndarray
    n_motions: int
    independent_motion: bool
    k_chosen: bool
    tracker: TrackerSettings
    k_residuals: dict = field(default_factory=dict)
    track_seconds: float = 0.0
    segment_seconds: float = 0.0


def segment_video(frames, n_motions=None, *, tracker=None, model=None, tol=1.0, camera="affine"):
    """Track points through frames and segment the tracks by motion.

    Parameters
    ----------
    frames : iterable of ndarray
        RGB or grey frames (:func:`cvfs.motion.tracking.track_points`).
    n_motions : int or None
        K; None chooses K as :func:`cvfs.motion.segment` does.
    tracker : TrackerSettings, optional
        Default ``TrackerSettings()`` (full trajectories). With ``partial=True`` the partial
        tracks and their visibility reach :func:`cvfs.motion.segment`.
    model : None, str, Path or fitted ranker
        None loads the shipped ranker.
    tol : float, default 1.0
        When one image motion explains every track within ``tol`` pixels
        (:func:`cvfs.motion.explained_by_one_motion`, on the completed tracks) the result is
        "no independent motion": K = 1, every label 0.
    camera : {"affine", "perspective", "auto"}, default "affine"
        As :func:`cvfs.motion.segment` (K chosen under "perspective" by
        :func:`cvfs.motion.geometry_k.segment_perspective_k`; ``k_residuals`` then holds its
        scores; under "auto" by the affine rule, ``k_residuals`` empty).

    Returns
    -------
    result : VideoSegmentation

    Raises
    ------
    ValueError
        As :func:`~cvfs.motion.tracking.track_points` and :func:`~cvfs.motion.segment`
        (fewer than 2 frames, no corner, too few tracks for K, an unknown ``camera``); an
        unknown ``camera`` before any tracking.
    """
    _check_camera(camera, n_motions)
    tracker = TrackerSettings() if tracker is None else tracker
    t0 = time.perf_counter()
    out = track_points(frames, tracker)
    points, visible = out if tracker.partial else (out, np.ones(out.shape[:2], dtype=bool))
    return segment_tracked(points, visible, n_motions, tracker=tracker, model=model, tol=tol,
                           track_seconds=time.perf_counter() - t0, camera=camera)


def _check_camera(camera, n_motions):
    from cvfs.motion import CAMERAS

    if camera not in CAMERAS:
        raise ValueError(f"camera must be one of {CAMERAS}; got {camera!r}")


def segment_tracked(points, visible, n_motions=None, *, tracker=None, model=None, tol=1.0,
                    track_seconds=0.0, camera="affine"):
    """The segmentation step of :func:`segment_video` on tracks already computed
    (``points`` (P, F, 2), ``visible`` (P, F) bool), e.g. to segment the same tracks with
    several K; ``tracker`` and ``track_seconds`` are only recorded in the result."""
    from cvfs.motion import _segment_tracks, explained_by_one_motion, segment

    _check_camera(camera, n_motions)
    tracker = TrackerSettings() if tracker is None else tracker
    t1 = time.perf_counter()
    partial = not visible.all()
    complete = points
    if partial:
        from cvfs.motion.missing import complete_trajectories

        # completed at rank 4K (12 when K is chosen) for the one-motion check
        complete = complete_trajectories(points, visible,
                                         n_motions=3 if n_motions is None else n_motions)
    moving = not explained_by_one_motion(complete, tol=tol)
    scores = {}
    if moving and camera == "perspective" and n_motions is None:
        # two-view geometry on the observed entries (no completion); K by the cut rule
        from cvfs.motion.geometry_k import segment_perspective_k

        labels, k, scores = segment_perspective_k(points, visible, return_scores=True)
    elif moving and camera == "perspective":
        labels, k = segment(points, n_motions, visible=visible, camera=camera), n_motions
    elif moving and camera == "auto":
        from cvfs.motion.combined import segment_combined

        labels, k, _ = segment_combined(points, n_motions, visible, return_k=True,
                                        model=model)
    elif moving:
        # K given: the completion above is the one segment falls back to
        labels, k, scores = _segment_tracks(
            points, n_motions, visible=visible if partial else None, model=model,
            return_scores=True, completed=complete if partial and n_motions else None)
    else:
        labels, k = np.zeros(points.shape[0], dtype=np.int64), 1
    t2 = time.perf_counter()
    chosen = n_motions is None and moving
    log.info("%d tracks, K=%d%s", points.shape[0], k, " (chosen)" if chosen else "")
    return VideoSegmentation(points=points, visible=visible, labels=labels, n_motions=int(k),
                             independent_motion=bool(moving), k_chosen=chosen, tracker=tracker,
                             k_residuals={int(kk): float(v) for kk, v in scores.items()}
                             if chosen else {},
                             track_seconds=track_seconds, segment_seconds=t2 - t1)
