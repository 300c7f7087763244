"""Point trajectories from video frames with OpenCV's pyramidal Lucas-Kanade tracker.

Policy (full trajectories, as Hopkins155): corners are detected once, on the first frame
(Shi-Tomasi, ``cv2.goodFeaturesToTrack``), and tracked frame to frame. A trajectory is dropped for
good as soon as, in any frame, (a) LK reports it lost, (b) the forward-backward check fails
(tracking the new position back to the previous frame misses the old one by more than
``fb_threshold`` pixels), or (c) it leaves the image. Only trajectories that survive every frame
are returned; nothing is re-detected, so the number of points only decreases.

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


def track_points(frames, *, max_points=500, quality=0.01, min_distance=6, win_size=15,
                 levels=3, fb_threshold=1.0):
    """Track corners through all frames; keep the trajectories that survive every frame.

    Parameters
    ----------
    frames : sequence of ndarray
        RGB uint8 (H, W, 3) (as :func:`cvfs.io.video.read_frames` returns them) or grey (H, W)
        images, at least 2, all the same size.
    max_points : int, default 500
        Corners detected on the first frame.
    quality, min_distance : float
        ``cv2.goodFeaturesToTrack`` parameters.
    win_size, levels : int
        LK window (pixels) and pyramid levels.
    fb_threshold : float, default 1.0
        Forward-backward error (pixels) above which a point is dropped.

    Returns
    -------
    points : ndarray of shape (P, F, 2)
        Pixel coordinates (x = column, y = row) of the surviving trajectories, float64.

    Raises
    ------
    ValueError
        Fewer than 2 frames, frames of different sizes, or no corner found.
    """
    frames = list(frames)
    if len(frames) < 2:
        raise ValueError(f"frames must hold at least 2 images; got {len(frames)}")
    grays = [_gray(f) for f in frames]
    shape = grays[0].shape
    if any(g.shape != shape for g in grays):
        raise ValueError("frames must all have the same size")
    p0 = cv2.goodFeaturesToTrack(grays[0], maxCorners=int(max_points), qualityLevel=quality,
                                 minDistance=min_distance, blockSize=7)
    if p0 is None or len(p0) == 0:
        raise ValueError("no trackable corner found in the first frame")
    lk = dict(winSize=(win_size, win_size), maxLevel=levels,
              criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    n = p0.shape[0]
    traj = np.full((n, len(grays), 2), np.nan)
    traj[:, 0] = p0.reshape(-1, 2)
    alive = np.ones(n, dtype=bool)
    h, w = shape
    for f in range(1, len(grays)):
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        prev = traj[idx, f - 1].astype(np.float32).reshape(-1, 1, 2)
        nxt, st, _ = cv2.calcOpticalFlowPyrLK(grays[f - 1], grays[f], prev, None, **lk)
        back, st_b, _ = cv2.calcOpticalFlowPyrLK(grays[f], grays[f - 1], nxt, None, **lk)
        fb = np.linalg.norm(back.reshape(-1, 2) - prev.reshape(-1, 2), axis=1)
        q = nxt.reshape(-1, 2)
        ok = ((st.ravel() == 1) & (st_b.ravel() == 1) & (fb <= fb_threshold)
              & (q[:, 0] >= 0) & (q[:, 0] <= w - 1) & (q[:, 1] >= 0) & (q[:, 1] <= h - 1))
        traj[idx, f] = q
        alive[idx[~ok]] = False
    return traj[alive]
