"""Point trajectories from video frames with OpenCV's pyramidal Lucas-Kanade tracker.

Corners (Shi-Tomasi, ``cv2.goodFeaturesToTrack``) are detected in square cells of ``cell``
pixels, up to ``per_cell`` in each, with a quality threshold relative to the cell's own best
corner, so that low-texture regions (a person before textured trees) still get points; then they
are tracked frame to frame. A track is lost when, in some frame, (a) LK reports it lost, (b) the
forward-backward check fails (tracking the new position back to the previous frame misses the old
one by more than ``fb_threshold`` pixels), (c) its appearance drifts: the ``win_size`` patch of the
frame where it was detected, aligned by an affine warp to the current frame around the track
(Shi and Tomasi's feature monitoring, :func:`patch_ncc`), correlates with the current frame by
less than ``min_ncc`` (a background point that a passing occluder carries off), or (d) it leaves
the image. The first frame is also searched ``moving_density`` times finer; those extra tracks
are kept only where they leave the frame's dominant motion (:func:`off_dominant_motion`), so
independently moving regions get points at the density of their own texture.

Full trajectories (``partial=False``, as Hopkins155): only tracks that survive every frame are
returned and nothing is re-detected. Partial tracks (``partial=True``): a lost track keeps its
observed frames, new corners are detected in every frame (per cell, at least ``min_distance``
from the tracks still alive) and tracked from there on, and the result is ``(points, visible)``
with NaN and False outside each track's span, as :func:`cvfs.motion.segment` takes them.
:class:`TrackerSettings` groups the settings shared by the CLI, the app and the benchmarks.

References
----------
J. Shi, C. Tomasi, "Good features to track", CVPR 1994 (Sec. 4: dissimilarity under an
affine warp).
S. Baker, I. Matthews, "Lucas-Kanade 20 years on: a unifying framework", IJCV 2004 (the
inverse compositional algorithm).
J.-Y. Bouguet, "Pyramidal implementation of the Lucas Kanade feature tracker", Intel, 2000.
Z. Kalal, K. Mikolajczyk, J. Matas, "Forward-backward error", ICPR 2010.
"""

from dataclasses import asdict, dataclass, replace

import cv2
import numpy as np

from cvfs.motion import _patch_align as _pa

__all__ = ["MOVING_REL", "MOVING_TOL", "PatchTemplates", "TrackerSettings", "off_dominant_motion",
           "patch_ncc", "track_points"]

# Shi-Tomasi block size; a crop is widened by this much so corners at a cell border see the
# same neighbourhood as in the whole frame
_BLOCK = 7

# distance (pixels) from the dominant motion beyond which a track moves on its own: twice the
# default forward-backward threshold, which bounds a kept track's drift per frame
MOVING_TOL = 2.0
# ... plus this fraction of the dominant motion's displacement (parallax of a moving camera)
MOVING_REL = 0.1


# appearance check (PatchTemplates): patches per cv2.remap call (its maps stay a few MB)
_REMAP_PATCHES = 2000
# inverse compositional steps per frame (warm-started from the previous frame's warp; a track
# stops once its update is below _ALIGN_TOL); Levenberg-Marquardt damping (a fraction of the
# Hessian's diagonal) and step caps keep weakly textured patches from diverging
_ALIGN_ITERS = 10
_ALIGN_TOL = 1e-3
_ALIGN_DAMPING = 0.1
_ALIGN_STEP = (0.1, 1.0)  # largest change per step: linear part, translation (pixels)
# bounds of the warp: a track whose feature is further than this from its position, or
# scaled beyond these factors, is compared with the nearest warp within them
_ALIGN_MAX_SHIFT = 3.0  # pixels from the track's position
_ALIGN_SCALES = (0.5, 2.0)  # singular values of the linear part


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
    min_ncc : float, default 0.5
        Appearance check: in every frame the ``win_size`` patch of the frame where the track was
        detected is aligned to the current frame by an affine warp (:func:`patch_ncc`); a track
        whose normalised cross-correlation with it falls below ``min_ncc`` is lost. In [-1, 1);
        -1 turns the check off. 0.5 is the correlation of two views of a patch that each carry
        an independent change (noise, occluder, shading) as strong as the patch's own contrast
        (NCC = s^2 / (s^2 + n^2) with n = s): below it a patch is more something else than
        itself. Cleanly tracked background stays far above it (median of the per-track minimum
        over the clip 0.91-0.99 on the five shared Hopkins155 videos,
        ``benchmarks/motion/motion_track_ncc.py``).
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
    min_ncc: float = 0.5
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
        v = self.min_ncc
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) \
                or not np.isfinite(v) or not -1 <= v < 1:
            raise ValueError(f"min_ncc must be a number in [-1, 1) (-1: no appearance check); "
                             f"got {v!r}")

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


def _warp_maps(centres, A, d, u, v):
    """Sampling positions ``centres + A @ (u, v) + d``: x and y maps of shape (N, m), float32,
    for N centres and m offsets (u, v of shape (1, m), float32)."""
    t = (np.asarray(centres, np.float64) + d).astype(np.float32)
    A = np.asarray(A, np.float32)
    return (t[:, :1] + A[:, 0, :1] * u + A[:, 0, 1:] * v,
            t[:, 1:] + A[:, 1, :1] * u + A[:, 1, 1:] * v)


def _sample(image, mx, my):
    """``image`` (float32) at the positions ``mx``, ``my`` (N, m), bilinear, edges replicated:
    ndarray of shape (N, m), float32."""
    out = np.empty(mx.shape, np.float32)
    for i in range(0, len(mx), _REMAP_PATCHES):
        sl = slice(i, i + _REMAP_PATCHES)
        out[sl] = cv2.remap(image, mx[sl], my[sl], cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REPLICATE)
    return out


def _inside(shape, mx, my):
    """Where the positions ``mx``, ``my`` fall inside an image of ``shape`` (H, W)."""
    h, w = shape
    return (mx >= 0) & (mx <= w - 1) & (my >= 0) & (my <= h - 1)


def _ncc(a, b, weight=None):
    """Row-wise normalised cross-correlation of two (N, m) arrays, over the entries where
    ``weight`` (N, m, bool; default all) is True (1 where a row is flat). The NumPy form of
    :func:`cvfs.motion._patch_align.ncc_rows`, for unaligned patches
    (``benchmarks/motion/motion_track_ncc.py --no-warp``) and as the kernel's reference in the
    tests."""
    w = np.ones(a.shape, bool) if weight is None else weight
    n = np.maximum(w.sum(axis=1, keepdims=True), 1)
    a = np.where(w, a - (a * w).sum(axis=1, keepdims=True) / n, 0.0)
    b = np.where(w, b - (b * w).sum(axis=1, keepdims=True) / n, 0.0)
    den = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    return np.where(den > 0, (a * b).sum(axis=1) / np.where(den > 0, den, 1.0), 1.0)


def _templates(image, points, size):
    """The ``size`` x ``size`` patches at ``points`` (N, 2) of ``image`` (N, size^2, float32),
    which of their pixels lie inside the image (N, size^2, bool), and their Gauss-Newton step
    matrices J = sd H^-1 (N, size^2, 6, float64) for :class:`PatchTemplates`."""
    image = np.asarray(image, np.float32)
    points = np.asarray(points, np.float64).reshape(-1, 2)
    n, k = len(points), size + 2
    o = np.arange(size, dtype=np.float32) - (size - 1) / 2
    u, v = (a.reshape(1, -1) for a in np.meshgrid(o, o))
    # the patch with a one-pixel border, for central-difference gradients
    ob = np.arange(k, dtype=np.float32) - (k - 1) / 2
    bu, bv = (a.reshape(1, -1) for a in np.meshgrid(ob, ob))
    eye = np.broadcast_to(np.eye(2), (n, 2, 2))
    big = _sample(image, *_warp_maps(points, eye, np.zeros((n, 2)), bu, bv)).reshape(n, k, k)
    seen = _inside(image.shape, *_warp_maps(points, eye, np.zeros((n, 2)), u, v))
    T = big[:, 1:-1, 1:-1].reshape(n, -1)
    gx = (0.5 * (big[:, 1:-1, 2:] - big[:, 1:-1, :-2])).reshape(n, -1)
    gy = (0.5 * (big[:, 2:, 1:-1] - big[:, :-2, 1:-1])).reshape(n, -1)
    # steepest-descent images of the warp parameters (a11-1, a12, a21, a22-1, dx, dy)
    sd = np.stack([gx * u, gx * v, gy * u, gy * v, gx, gy], axis=2)
    H = np.einsum("nmi,nmj->nij", sd, sd, dtype=np.float64)
    H += _ALIGN_DAMPING * np.einsum("nii->ni", H)[:, :, None] * np.eye(6) + 1e-6 * np.eye(6)
    # a Gauss-Newton step is dp = err @ J, J = sd H^-1 (H symmetric)
    return T, seen, np.matmul(sd.astype(np.float64), np.linalg.inv(H))


def _bound_warps(A, d):
    """The warps (A (N, 2, 2), d (N, 2)) moved to the nearest within the bounds: singular
    values of A in ``_ALIGN_SCALES``, shifts up to ``_ALIGN_MAX_SHIFT``, non-finite ones reset
    (directions a patch does not constrain, such as the scale of a corner of straight edges,
    wander there harmlessly). ``A`` and ``d`` are changed in place where not finite."""
    bad = ~(np.isfinite(A).all(axis=(1, 2)) & np.isfinite(d).all(axis=1))
    A[bad], d[bad] = np.eye(2), 0.0
    U, sv, Vt = np.linalg.svd(A)
    A = U * np.clip(sv, *_ALIGN_SCALES)[:, None, :] @ Vt
    shift = np.linalg.norm(d, axis=1, keepdims=True)
    return A, d * np.minimum(1.0, _ALIGN_MAX_SHIFT / np.maximum(shift, 1e-12))


class PatchTemplates:
    """Reference patches of tracks, aligned to later frames by an affine warp.

    Each track's ``size`` x ``size`` patch in the frame where it was detected is the template
    T; in a later frame the warp ``x -> q + A x + d`` (q the track's position there) that best
    maps T onto the frame, after the patch's gain and bias are normalised, is found by
    inverse compositional Gauss-Newton steps (all tracks at once), and the normalised
    cross-correlation of T with the warped patch measures how far the track's appearance has
    drifted (Shi and Tomasi's dissimilarity, made insensitive to gain and bias). The warps are
    kept, so each frame starts from the previous one's.

    Parameters
    ----------
    image : ndarray of shape (H, W)
        Grey frame where the tracks were detected.
    points : ndarray of shape (N, 2)
        Their positions (x, y).
    size : int
        Patch side (pixels).

    References
    ----------
    J. Shi, C. Tomasi, "Good features to track", CVPR 1994, Sec. 4.
    S. Baker, I. Matthews, "Lucas-Kanade 20 years on", IJCV 2004, Sec. 3.2 (inverse
    compositional algorithm), Sec. 4.3 (Levenberg-Marquardt).
    """

    def __init__(self, image, points, size):
        o = np.arange(size, dtype=np.float32) - (size - 1) / 2
        u, v = np.meshgrid(o, o)
        self.size = int(size)
        self._u, self._v = u.reshape(1, -1), v.reshape(1, -1)
        # rows [0, len(self)) of these arrays hold the templates; their capacity doubles as
        # tracks are added
        self._n = 0
        self._T = np.zeros((0, u.size), np.float32)
        self._mu = np.zeros((0, 1), np.float32)  # each template's mean and standard deviation
        self._sig = np.zeros((0, 1), np.float32)
        self._seen = np.zeros((0, u.size), bool)
        self._J = np.zeros((0, u.size, 6), np.float32)
        self._A = np.zeros((0, 2, 2))
        self._d = np.zeros((0, 2))
        self.extend(image, points)

    def __len__(self):
        return self._n

    def _reserve(self, n):
        """Room for ``n`` more templates (the capacity at least doubles when it grows)."""
        need = self._n + n
        if need <= len(self._T):
            return
        cap = max(need, 2 * len(self._T))
        for name in ("_T", "_mu", "_sig", "_seen", "_J", "_A", "_d"):
            old = getattr(self, name)
            new = np.zeros((cap,) + old.shape[1:], old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def extend(self, image, points):
        """Add the templates of new tracks at ``points`` (N, 2) of ``image``; their index
        continues the existing ones."""
        T, seen, J = _templates(image, points, self.size)
        n = len(T)
        self._reserve(n)
        new = slice(self._n, self._n + n)
        self._T[new] = T
        self._mu[new] = T.mean(axis=1, keepdims=True)
        self._sig[new] = T.std(axis=1, keepdims=True)
        self._seen[new] = seen
        self._J[new] = J
        self._A[new] = np.eye(2)
        self._d[new] = 0.0
        self._n += n

    def align(self, image, points, index=None):
        """Align the templates ``index`` to ``image`` around ``points`` and correlate them.

        Parameters
        ----------
        image : ndarray of shape (H, W)
        points : ndarray of shape (N, 2)
            The tracks' positions in ``image``.
        index : ndarray of shape (N,), int, optional
            Their templates (default all, in order).

        Returns
        -------
        ncc : ndarray of shape (N,)
            Normalised cross-correlation of each template with its warped patch, in [-1, 1].
        """
        image = np.asarray(image, np.float32)
        h, w = image.shape
        c = np.asarray(points, np.float64).reshape(-1, 2)
        idx = np.arange(len(self)) if index is None else np.asarray(index, np.int64)
        A, d = self._A[idx], self._d[idx]
        u, v = self._u[0], self._v[0]
        # the elementwise work and row sums are numba kernels (_patch_align); the products
        # and inverses of matrices are NumPy's
        act = np.arange(len(idx))
        J = self._J[idx]  # the active tracks' rows (gathered again when some stop)
        for _ in range(_ALIGN_ITERS):
            if act.size == 0:
                break
            ids = idx[act]
            mx, my = np.empty((2, act.size, u.size), np.float32)
            _pa.warp_maps(c, A, d, act, u, v, mx, my)
            cur = _sample(image, mx, my)
            # gain and bias normalised residual; pixels outside either frame (the replicated
            # border) do not pull the warp
            err = np.empty(cur.shape, np.float32)
            _pa.residuals(cur, mx, my, ids, self._T, self._mu, self._sig, self._seen, h, w, err)
            dp = np.matmul(err[:, None, :], J)[:, 0].astype(np.float64)
            # compose the warp with the inverse of the (clipped) step: W <- W o W(dp)^-1
            Wd, W = np.zeros((2, act.size, 3, 3))
            keep = np.empty(act.size, bool)
            _pa.step_matrices(dp, A, d, act, _ALIGN_STEP[0], _ALIGN_STEP[1], _ALIGN_TOL, Wd, W,
                              keep)
            W = W @ np.linalg.inv(Wd)
            A[act], d[act] = W[:, :2, :2], W[:, :2, 2]
            if not keep.all():
                act, J = act[keep], J[keep]
        A, d = _bound_warps(A, d)
        self._A[idx], self._d[idx] = A, d
        # over the pixels inside both frames (the replicated border is no part of the scene)
        mx, my = np.empty((2, len(idx), u.size), np.float32)
        _pa.warp_maps(c, A, d, np.arange(len(idx)), u, v, mx, my)
        ncc = np.empty(len(idx))
        _pa.ncc_rows(self._T, _sample(image, mx, my), idx, self._seen, mx, my, h, w, ncc)
        return ncc


def patch_ncc(reference, image, ref_points, points, size=15):
    """Normalised cross-correlation of patches after an affine alignment (one pair of frames).

    Parameters
    ----------
    reference, image : ndarray of shape (H, W) or (H, W, 3)
        Frame where the points were detected and a later frame (grey or RGB, uint8 or float).
    ref_points, points : ndarray of shape (N, 2)
        The points' positions (x, y) in each.
    size : int, default 15
        Patch side (pixels), the tracker's ``win_size``.

    Returns
    -------
    ncc : ndarray of shape (N,)
        In [-1, 1]: 1 where the patch of ``image`` at ``points`` is an affine warp of that of
        ``reference`` at ``ref_points`` up to gain and bias (:class:`PatchTemplates`).

    Raises
    ------
    ValueError
        ``ref_points`` and ``points`` of different shapes, or ``size`` < 3.
    """
    ref_points = np.asarray(ref_points, np.float64)
    points = np.asarray(points, np.float64)
    if ref_points.shape != points.shape or ref_points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"ref_points and points must both be of shape (N, 2); got "
                         f"{ref_points.shape} and {points.shape}")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 3:
        raise ValueError(f"size must be an int >= 3; got {size!r}")
    t = PatchTemplates(_gray(reference), ref_points, size)
    return t.align(_gray(image), points)


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
        ``fb_threshold``, ``min_ncc``, ``partial``, ``min_frames``, ``moving_density``).

    Returns
    -------
    points : ndarray of shape (P, F, 2)
        Pixel coordinates (x = column, y = row), float64: the trajectories that survive every
        frame (lost by no check), or (``partial``) every track observed in ``min_frames``
        frames or more, NaN where not observed.
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
    # appearance check: each track's patch where it was detected, aligned to every frame
    check = s.min_ncc > -1
    templates = PatchTemplates(prev_gray, p0, s.win_size) if check else None
    lk = dict(winSize=(s.win_size, s.win_size), maxLevel=s.levels,
              criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    # positions per frame, NaN once lost; a frame's column holds the tracks that exist by then
    # (the later ones are NaN there when the columns are stacked at the end)
    cols = [p0]
    alive = np.ones(len(p0), dtype=bool)
    h, w = shape
    for frame in it:
        gray = _gray(frame)
        if gray.shape != shape:
            raise ValueError(f"frames must all have the same size; frame {len(cols)} is "
                             f"{gray.shape}, the first {shape}")
        col = np.full((len(alive), 2), np.nan)
        idx = np.flatnonzero(alive)
        if idx.size:
            prev = cols[-1][idx].astype(np.float32).reshape(-1, 1, 2)
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(prev_gray, gray, prev, None, **lk)
            back, st_b, _ = cv2.calcOpticalFlowPyrLK(gray, prev_gray, nxt, None, **lk)
            fb = np.linalg.norm(back.reshape(-1, 2) - prev.reshape(-1, 2), axis=1)
            q = nxt.reshape(-1, 2)
            ok = ((st.ravel() == 1) & (st_b.ravel() == 1) & (fb <= s.fb_threshold)
                  & (q[:, 0] >= 0) & (q[:, 0] <= w - 1) & (q[:, 1] >= 0) & (q[:, 1] <= h - 1))
            if check and ok.any():
                at = np.flatnonzero(ok)
                ok[at] = templates.align(gray, q[at], idx[at]) >= s.min_ncc
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
                col = np.vstack([col, new])
                alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])
                extra = np.concatenate([extra, np.zeros(len(new), dtype=bool)])
                if check:
                    templates.extend(gray, new)
        cols.append(col)
        prev_gray = gray
    points = np.full((len(alive), len(cols), 2), np.nan)
    for f, col in enumerate(cols):
        points[: len(col), f] = col
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
