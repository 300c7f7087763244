"""Point trajectories from video frames with OpenCV's pyramidal Lucas-Kanade tracker.

Policy (full trajectories, as Hopkins155): corners are detected once, on the first frame
(Shi-Tomasi, ``cv2.goodFeaturesToTrack``) in each cell of a grid, with a quality threshold
relative to the cell's best corner, so that low-texture regions (a person before textured
trees) still get points; then they are tracked frame to frame. A trajectory is dropped for
good as soon as, in any frame, (a) LK reports it lost, (b) the forward-backward check fails
(tracking the new position back to the previous frame misses the old one by more than
``fb_threshold`` pixels), or (c) it leaves the image. Only trajectories that survive every frame
are returned; nothing is re-detected, so the number of points only decreases.

With ``partial=True`` a lost track keeps its observed frames, new corners are detected in every
frame (per grid cell, at least ``min_distance`` from the tracks still alive) and tracked from
there on, and the result is ``(points, visible)``: NaN and False outside each track's span. Such
partial tracks are what :func:`cvfs.motion.segment` takes with its ``visible`` mask.

References
----------
J.-Y. Bouguet, "Pyramidal implementation of the Lucas Kanade feature tracker", Intel, 2000.
Z. Kalal, K. Mikolajczyk, J. Matas, "Forward-backward error", ICPR 2010.
"""

import cv2
import numpy as np

__all__ = ["track_points"]


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


def _corners(gray, max_points, quality, min_distance, grid):
    """Shi-Tomasi corners, up to ``max_points`` in all: globally (``grid`` 0) or an equal quota
    in each of ``grid`` x ``grid`` cells, quality relative to the cell's best corner."""
    if not grid:
        p = cv2.goodFeaturesToTrack(gray, maxCorners=int(max_points), qualityLevel=quality,
                                    minDistance=min_distance, blockSize=7)
        return np.zeros((0, 2)) if p is None else p.reshape(-1, 2).astype(np.float64)
    h, w = gray.shape
    quota = max(1, int(max_points) // (grid * grid))
    out = []
    ys, xs = np.linspace(0, h, grid + 1).astype(int), np.linspace(0, w, grid + 1).astype(int)
    for r in range(grid):
        for c in range(grid):
            mask = np.zeros_like(gray)
            mask[ys[r]:ys[r + 1], xs[c]:xs[c + 1]] = 255
            p = cv2.goodFeaturesToTrack(gray, maxCorners=quota, qualityLevel=quality,
                                        minDistance=min_distance, blockSize=7, mask=mask)
            if p is not None:
                out.append(p.reshape(-1, 2))
    return np.concatenate(out).astype(np.float64) if out else np.zeros((0, 2))


def _new_corners(gray, alive_pts, max_points, quality, min_distance, grid):
    """Corners of ``gray`` at least ``min_distance`` from every alive track."""
    cand = _corners(gray, max_points, quality, min_distance, grid)
    if cand.size == 0 or alive_pts.size == 0:
        return cand
    d2 = ((cand[:, None, :] - alive_pts[None, :, :]) ** 2).sum(axis=2).min(axis=1)
    return cand[d2 >= float(min_distance) ** 2]


def track_points(frames, *, max_points=2000, quality=0.01, min_distance=6, win_size=15,
                 levels=3, fb_threshold=1.0, grid=16, partial=False, min_frames=2):
    """Track corners through all frames; keep the trajectories that survive every frame.

    Parameters
    ----------
    frames : iterable of ndarray
        RGB uint8 (H, W, 3) (as :func:`cvfs.io.video.open_source` yields them) or grey (H, W)
        images, at least 2, all the same size. Read one at a time: only the previous frame is
        held, so a generator streams a long video in constant memory.
    max_points : int, default 2000
        Corners detected on the first frame, at most.
    quality, min_distance : float
        ``cv2.goodFeaturesToTrack`` parameters (``quality`` relative to the best corner of the
        cell).
    grid : int, default 16
        Corners are detected in ``grid`` x ``grid`` cells, ``max_points / grid**2`` per cell;
        0 detects the ``max_points`` strongest corners of the whole frame. On Hopkins155's
        people2 the default puts 15 tracks on the walking woman (5 with ``grid=0``).
    win_size, levels : int
        LK window (pixels) and pyramid levels.
    fb_threshold : float, default 1.0
        Forward-backward error (pixels) above which a point is dropped.
    partial : bool, default False
        Keep lost tracks up to their loss and re-detect new corners in every frame (up to
        ``max_points`` alive tracks); return ``(points, visible)``.
    min_frames : int, default 2
        With ``partial``, tracks observed in fewer frames are dropped.

    Returns
    -------
    points : ndarray of shape (P, F, 2)
        Pixel coordinates (x = column, y = row) of the surviving trajectories, float64 (with
        ``partial``: of every track observed in ``min_frames`` frames or more, NaN where not
        observed).
    visible : ndarray of shape (P, F), bool
        Only with ``partial``: True where the track is observed.

    Raises
    ------
    ValueError
        Fewer than 2 frames, frames of different sizes, no corner found, or a negative grid.
    """
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 0:
        raise ValueError(f"grid must be an int >= 0; got {grid!r}")
    if isinstance(min_frames, bool) or not isinstance(min_frames, (int, np.integer)) \
            or min_frames < 2:
        raise ValueError(f"min_frames must be an int >= 2; got {min_frames!r}")
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
    p0 = _corners(prev_gray, max_points, quality, min_distance, grid)
    if len(p0) == 0:
        raise ValueError("no trackable corner found in the first frame")
    lk = dict(winSize=(win_size, win_size), maxLevel=levels,
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
            ok = ((st.ravel() == 1) & (st_b.ravel() == 1) & (fb <= fb_threshold)
                  & (q[:, 0] >= 0) & (q[:, 0] <= w - 1) & (q[:, 1] >= 0) & (q[:, 1] <= h - 1))
            col[idx] = q
            alive[idx[~ok]] = False
            if partial:
                col[idx[~ok]] = np.nan
        if partial and alive.sum() < max_points:
            new = _new_corners(gray, col[alive], max_points - int(alive.sum()), quality,
                               min_distance, grid)
            if len(new):
                cols = [np.vstack([c, np.full((len(new), 2), np.nan)]) for c in cols]
                col = np.vstack([col, new])
                alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])
        cols.append(col)
        prev_gray = gray
    if not partial:
        return np.stack(cols, axis=1)[alive]
    points = np.stack(cols, axis=1)
    visible = ~np.isnan(points[..., 0])
    keep = visible.sum(axis=1) >= min_frames
    return points[keep], visible[keep]
