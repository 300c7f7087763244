"""Point trajectories from video frames with OpenCV's pyramidal Lucas-Kanade tracker.

Corners (Shi-Tomasi, ``cv2.goodFeaturesToTrack``) are detected in square cells of ``cell``
pixels, up to ``per_cell`` in each, with a quality threshold relative to the cell's own best
corner, so that low-texture regions (a person before textured trees) still get points; then they
are tracked frame to frame. A track is lost when, in some frame, (a) LK reports it lost, (b) the
forward-backward check fails (tracking the new position back to the previous frame misses the old
one by more than ``fb_threshold`` pixels), or (c) it leaves the image. The first frame is also
searched ``moving_density`` times finer; those extra tracks are kept only where they leave the
frame's dominant motion (:func:`off_dominant_motion`), so independently moving regions get
points at the density of their own texture.

Full trajectories (``partial=False``, as Hopkins155): only tracks that survive every frame are
returned and nothing is re-detected. Partial tracks (``partial=True``): a lost track keeps its
observed frames, new corners are detected in every frame (per cell, at least ``min_distance``
from the tracks still alive) and tracked from there on, and the result is ``(points, visible)``
with NaN and False outside each track's span, as :func:`cvfs.motion.segment` takes them.
:class:`TrackerSettings` groups the settings shared by the CLI, the app and the benchmarks.

References
----------
J. Shi, C. Tomasi, "Good features to track", CVPR 1994.
J.-Y. Bouguet, "Pyramidal implementation of the Lucas Kanade feature tracker", Intel, 2000.
Z. Kalal, K. Mikolajczyk, J. Matas, "Forward-backward error", ICPR 2010.
"""

from dataclasses import asdict, dataclass, replace

import cv2
import numpy as np

__all__ = ["MOVING_REL", "MOVING_TOL", "TrackerSettings", "off_dominant_motion", "track_points"]

# Shi-Tomasi block size; a crop is widened by this much so corners at a cell border see the
# same neighbourhood as in the whole frame
_BLOCK = 7

# distance (pixels) from the dominant motion beyond which a track moves on its own: twice the
# default forward-backward threshold, which bounds a kept track's drift per frame
MOVING_TOL = 2.0
# ... plus this fraction of the dominant motion's displacement (parallax of a moving camera)
MOVING_REL = 0.1


@dataclass(frozen=True)
class TrackerSettings:
    """Settings of :func:`track_points` (one object for the CLI, the app and the benchmarks).

    Attributes
    ----------
    cell : int, default 40
        Side (pixels) of the square cells in which corners are detected; 0 detects the
        ``max_points`` strongest corners of the whole frame.
    per_cell : int, default 8
        Corners per cell, at most.
    quality : float, default 0.01
        Shi-Tomasi quality threshold, relative to the best corner of the cell.
    min_distance : float, default 6
        Minimum distance (pixels) between corners (and, with ``partial``, from a new corner to
        the alive tracks).
    max_points : int, default 2000
        Tracks alive at any time, at most.
    win_size, levels : int, default 15, 3
        LK window (pixels) and pyramid levels.
    fb_threshold : float, default 1.0
        Forward-backward error (pixels) above which a track is lost.
    partial : bool, default False
        Keep lost tracks up to their loss and re-detect new corners in every frame.
    min_frames : int or float, default 0.5
        With ``partial``, tracks observed in fewer frames are dropped: an int >= 2 is a number
        of frames, a float in (0, 1) a fraction of the clip's frames (at least 2). Short tracks
        carry little motion and their completion is poor (on a 12-frame synthetic clip with an
        occlusion, keeping tracks of 2 frames gives 38 % error, of half the clip 3 %).
    moving_density : int, default 3
        Extra density on independently moving regions: the first frame is also searched with
        ``min_distance / moving_density`` and ``per_cell * moving_density ** 2``; those extra
        tracks are kept only where they leave the frame's dominant motion (the RANSAC
        homography of the default-density tracks from the first frame,
        :func:`off_dominant_motion`) by more than ``MOVING_TOL`` pixels plus ``MOVING_REL`` of
        the dominant motion's displacement, and within ``max_points`` tracks in all. A small
        object moving before a textured background (a walker before trees) then gets points at
        the density of its own texture. 1 turns it off.
    """

    cell: int = 40
    per_cell: int = 8
    quality: float = 0.01
    min_distance: float = 6.0
    max_points: int = 2000
    win_size: int = 15
    levels: int = 3
    fb_threshold: float = 1.0
    partial: bool = False
    min_frames: float = 0.5
    moving_density: int = 3

    def __post_init__(self):
        m = self.min_frames
        if isinstance(m, bool) or not (
                (isinstance(m, (int, np.integer)) and m >= 2)
                or (isinstance(m, (float, np.floating)) and 0 < m < 1)):
            raise ValueError(f"min_frames must be an int >= 2 or a fraction in (0, 1); "
                             f"got {m!r}")
        for name in ("cell", "per_cell", "max_points", "win_size", "levels", "moving_density"):
            v = getattr(self, name)
            lo = {"cell": 0, "levels": 0, "win_size": 3}.get(name, 1)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}; got {v!r}")
        for name in ("quality", "min_distance", "fb_threshold"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) \
                    or not np.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number; got {v!r}")
        if self.quality >= 1:
            raise ValueError(f"quality must be in (0, 1); got {self.quality!r}")

    def as_dict(self):
        """The settings as a plain dict (for JSON summaries)."""
        return asdict(self)


def _gray(frame):
    frame = np.asarray(frame)
    if frame.ndim == 3:
        frame = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    if frame.dtype != np.uint8:
        frame = np.clip(np.asarray(frame, float) * (255.0 if frame.max() <= 1.0 else 1.0),
                        0, 255).astype(np.uint8)
    return frame


def _rest(taken, it):
    """The frames in the list ``taken`` (released as they are yielded), then those of ``it``."""
    while taken:
        yield taken.pop(0)
    yield from it


def _corners(gray, s, limit):
    """Shi-Tomasi corners, up to ``limit`` in all: the strongest of the frame (``s.cell`` 0) or
    up to ``s.per_cell`` in each cell, quality relative to the cell's best corner. Each cell is
    searched in its own crop (widened by the block size), so the cost is one pass over the
    frame."""
    if limit <= 0:
        return np.zeros((0, 2))
    if not s.cell:
        p = cv2.goodFeaturesToTrack(gray, maxCorners=int(limit), qualityLevel=s.quality,
                                    minDistance=s.min_distance, blockSize=_BLOCK)
        return np.zeros((0, 2)) if p is None else p.reshape(-1, 2).astype(np.float64)
    h, w = gray.shape
    out = []
    for y0 in range(0, h, s.cell):
        for x0 in range(0, w, s.cell):
            y1, x1 = min(y0 + s.cell, h), min(x0 + s.cell, w)
            cy0, cx0 = max(y0 - _BLOCK, 0), max(x0 - _BLOCK, 0)
            crop = gray[cy0:min(y1 + _BLOCK, h), cx0:min(x1 + _BLOCK, w)]
            mask = np.zeros(crop.shape, np.uint8)
            mask[y0 - cy0:y1 - cy0, x0 - cx0:x1 - cx0] = 255
            p = cv2.goodFeaturesToTrack(crop, maxCorners=s.per_cell, qualityLevel=s.quality,
                                        minDistance=s.min_distance, blockSize=_BLOCK, mask=mask)
            if p is not None:
                out.append(p.reshape(-1, 2) + (cx0, cy0))
    if not out:
        return np.zeros((0, 2))
    pts = np.concatenate(out).astype(np.float64)
    if len(pts) > limit:  # keep an even spread: a random subset would favour no region
        pts = pts[np.linspace(0, len(pts) - 1, int(limit)).astype(int)]
    return pts


def _far_from(cand, pts, min_distance):
    """The rows of ``cand`` at least ``min_distance`` from every row of ``pts``."""
    if cand.size == 0 or pts.size == 0:
        return cand
    from scipy.spatial import cKDTree

    d, _ = cKDTree(pts).query(cand, k=1)
    return cand[d >= float(min_distance)]


def off_dominant_motion(points, visible=None, *, fit=None, inlier_px=1.0, moving=False):
    """Distance of each track from the frame's dominant motion.

    For every frame f a homography from the first frame's positions to frame f's is fitted by
    RANSAC (``cv2.findHomography``, inliers within ``inlier_px``) to the tracks seen in both
    frames: the largest group moving as one plane (a static or panning camera's background).

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
    visible : ndarray of shape (P, F), bool, optional
        Default: where ``points`` is finite.
    fit : ndarray of shape (P,), bool, optional
        Tracks the homographies are fitted to (default all): evenly spread tracks make the
        dominant motion that of the largest area, not of the most textured object.
    inlier_px : float, default 1.0
    moving : bool, default False
        Return instead whether each track leaves the dominant motion: further than
        ``MOVING_TOL`` plus ``MOVING_REL`` times the dominant motion's median displacement in
        some frame (the parallax of a moving camera's background grows with its motion).

    Returns
    -------
    distance : ndarray of shape (P,)
        Largest distance (pixels) over the frames between a track and the dominant motion's
        image of its first position; 0 for tracks not seen in the first frame, and over frames
        where fewer than 8 tracks are seen (no fit). Bool with ``moving``.
    """
    points = np.asarray(points, dtype=np.float64)
    vis = np.isfinite(points[..., 0]) if visible is None else np.asarray(visible, bool)
    use = np.ones(points.shape[0], dtype=bool) if fit is None else np.asarray(fit, bool)
    out = np.zeros(points.shape[0])
    flag = np.zeros(points.shape[0], dtype=bool)
    for f in range(1, points.shape[1]):
        idx = np.flatnonzero(vis[:, 0] & vis[:, f])
        basis = idx[use[idx]]
        if basis.size < 8:
            continue
        H, _ = cv2.findHomography(points[basis, 0].astype(np.float32),
                                  points[basis, f].astype(np.float32), cv2.RANSAC,
                                  float(inlier_px))
        if H is None:
            continue
        src = points[idx, 0].astype(np.float32)
        dst = points[idx, f].astype(np.float32)
        proj = cv2.perspectiveTransform(src.reshape(-1, 1, 2), H).reshape(-1, 2)
        dist = np.linalg.norm(proj - dst, axis=1)
        out[idx] = np.maximum(out[idx], dist)
        # parallax and drift grow with the camera's own motion
        shift = np.median(np.linalg.norm(proj - src, axis=1))
        flag[idx] |= dist > MOVING_TOL + MOVING_REL * shift
    return flag if moving else out


def track_points(frames, settings=None, **kwargs):
    """Track corners through all frames: full trajectories, or partial ones with re-detection.

    Parameters
    ----------
    frames : iterable of ndarray
        RGB uint8 (H, W, 3) (as :func:`cvfs.io.video.open_source` yields them) or grey (H, W)
        images, at least 2, all the same size. Read one at a time: only the previous frame is
        held, so a generator streams a long video in constant memory.
    settings : TrackerSettings, optional
        Default ``TrackerSettings()``.
    **kwargs
        Fields of :class:`TrackerSettings` overriding ``settings`` (``cell``, ``per_cell``,
        ``quality``, ``min_distance``, ``max_points``, ``win_size``, ``levels``,
        ``fb_threshold``, ``partial``, ``min_frames``).

    Returns
    -------
    points : ndarray of shape (P, F, 2)
        Pixel coordinates (x = column, y = row), float64: the trajectories that survive every
        frame, or (``partial``) every track observed in ``min_frames`` frames or more, NaN where
        not observed.
    visible : ndarray of shape (P, F), bool
        Only with ``partial``: True where the track is observed.

    Raises
    ------
    ValueError
        Fewer than 2 frames, frames of different sizes, no corner found in the first frame, or
        an invalid setting.
    TypeError
        An unknown setting.
    """
    s = TrackerSettings() if settings is None else settings
    if not isinstance(s, TrackerSettings):
        raise TypeError(f"settings must be a TrackerSettings; got {type(s).__name__}")
    if kwargs:
        unknown = sorted(set(kwargs) - set(s.as_dict()))
        if unknown:
            raise TypeError(f"unknown tracker setting(s) {unknown}; expected some of "
                            f"{sorted(s.as_dict())}")
        s = TrackerSettings(**{**s.as_dict(), **kwargs})
    it = iter(frames)
    head = [f for _, f in zip(range(2), it)]
    if len(head) < 2:
        raise ValueError(f"frames must hold at least 2 images; got {len(head)}")
    prev_gray = _gray(head[0])
    shape = prev_gray.shape
    if np.shape(head[1])[:2] != shape:
        raise ValueError(f"frames must all have the same size; frame 1 is "
                         f"{np.shape(head[1])[:2]}, the first {shape}")
    it = _rest(head[1:], it)
    del head
    p0 = _corners(prev_gray, s, s.max_points)
    if len(p0) == 0:
        raise ValueError("no trackable corner found in the first frame")
    # extra candidates at a finer spacing, kept at the end only where they move on their own
    extra = np.zeros(len(p0), dtype=bool)
    if s.moving_density > 1:
        fine = replace(s, min_distance=s.min_distance / s.moving_density,
                       per_cell=s.per_cell * s.moving_density ** 2)
        more = _far_from(_corners(prev_gray, fine, s.max_points * s.moving_density ** 2), p0,
                         fine.min_distance)
        p0 = np.vstack([p0, more])
        extra = np.concatenate([extra, np.ones(len(more), dtype=bool)])
    lk = dict(winSize=(s.win_size, s.win_size), maxLevel=s.levels,
              criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    cols = [p0]  # positions per frame, NaN once lost
    alive = np.ones(cols[0].shape[0], dtype=bool)
    h, w = shape
    for frame in it:
        gray = _gray(frame)
        if gray.shape != shape:
            raise ValueError(f"frames must all have the same size; frame {len(cols)} is "
                             f"{gray.shape}, the first {shape}")
        col = np.full_like(cols[0], np.nan)
        idx = np.flatnonzero(alive)
        if idx.size:
            prev = cols[-1][idx].astype(np.float32).reshape(-1, 1, 2)
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(prev_gray, gray, prev, None, **lk)
            back, st_b, _ = cv2.calcOpticalFlowPyrLK(gray, prev_gray, nxt, None, **lk)
            fb = np.linalg.norm(back.reshape(-1, 2) - prev.reshape(-1, 2), axis=1)
            q = nxt.reshape(-1, 2)
            ok = ((st.ravel() == 1) & (st_b.ravel() == 1) & (fb <= s.fb_threshold)
                  & (q[:, 0] >= 0) & (q[:, 0] <= w - 1) & (q[:, 1] >= 0) & (q[:, 1] <= h - 1))
            col[idx] = q
            alive[idx[~ok]] = False
            if s.partial:
                col[idx[~ok]] = np.nan
        # re-detection sees the default-density tracks only: the extra ones cover the frame
        # until the end, where most are dropped
        base = alive & ~extra
        if s.partial and base.sum() < s.max_points:
            new = _far_from(_corners(gray, s, s.max_points), col[base], s.min_distance)
            new = new[: s.max_points - int(base.sum())]
            if len(new):
                cols = [np.vstack([c, np.full((len(new), 2), np.nan)]) for c in cols]
                col = np.vstack([col, new])
                alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])
                extra = np.concatenate([extra, np.zeros(len(new), dtype=bool)])
        cols.append(col)
        prev_gray = gray
    points = np.stack(cols, axis=1)
    if not s.partial:
        points, extra = points[alive], extra[alive]
        visible = np.ones(points.shape[:2], dtype=bool)
    else:
        visible = ~np.isnan(points[..., 0])
        n_frames = points.shape[1]
        need = s.min_frames if isinstance(s.min_frames, (int, np.integer)) \
            else max(2, int(np.ceil(s.min_frames * n_frames)))
        keep = visible.sum(axis=1) >= need
        points, visible, extra = points[keep], visible[keep], extra[keep]
    if extra.any():
        moving = np.flatnonzero(extra & off_dominant_motion(points, visible, fit=~extra,
                                                            moving=True))
        room = max(s.max_points - int((~extra).sum()), 0)
        if len(moving) > room:  # within max_points, evenly over the moving regions
            moving = moving[np.linspace(0, len(moving) - 1, room).astype(int)] if room else \
                moving[:0]
        keep = ~extra
        keep[moving] = True
        points, visible = points[keep], visible[keep]
    return (points, visible) if s.partial else points
