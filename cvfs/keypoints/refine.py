"""Sub-pixel refinement of keypoint positions: a dense local rescan at the face's own scale.

:meth:`KeypointDetector.detect` scans a fixed pyramid (4 levels per octave, stride 1 level
pixel). Once a face is found, its inter-eye distance (IED) fixes the scale at which its
keypoints look like the training examples (IED ``level_ied`` level pixels, the middle of the
detectors' training range). :func:`refine_face_keypoints` rescans a small neighbourhood of each
keypoint of a face at that scale and at ``n_scales`` steps around it (``scale_step`` apart;
by default five levels a pyramid step apart, which cover the training range of 20-40 level
pixels), every window of the neighbourhood scored by the full classifier (no cascade), and
moves the keypoint to the score-weighted mean of the per-scale maxima, each refined to sub-pixel
by the vertex of a quadratic fitted to its 3 x 3 neighbourhood (:func:`quadratic_peak`).

Every rescan scale resamples the image on one grid, so the keypoints of a face share one small
piece of each level (its integral images and HOG maps built once), and only the windows within
the search radius, then the missing neighbours of the best one, are scored.

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3.
"""

import math

import cv2
import numpy as np

from cvfs.vision import HALF, WINDOW, as_float_rgb
from cvfs.vision.pyramid import PyramidLevel
from cvfs.vision.windows import LevelCache

__all__ = ["DEFAULT_LEVEL_IED", "LEVEL_IED", "quadratic_peak", "refine_face_keypoints",
           "refine_points"]

#: IED (level pixels) of the middle rescan scale: the middle of the detectors' training range.
DEFAULT_LEVEL_IED = 28.0
#: The same per keypoint in :func:`refine_face_keypoints` (others: ``DEFAULT_LEVEL_IED``).
#: Chosen on held-out MTFL training faces (``benchmarks/keypoints/keypoints_refine.py
#: --level-ied``): the nose tip, a smooth blob, localises better on a finer level.
LEVEL_IED = {"nose_center": 40.0}


def quadratic_peak(patch):
    """Sub-pixel offset of the maximum of a 3 x 3 score patch centred on a local maximum.

    Least-squares fit of ``f(x, y) = a + b x + c y + d x^2 + e x y + g y^2`` to the nine values
    (x, y in {-1, 0, 1}); the offset is the fit's stationary point when the fit is a maximum
    (negative definite Hessian); otherwise the per-axis parabola vertices (0 on an axis without
    curvature). Clipped to [-1, 1] per axis, the extent of the patch.

    Parameters
    ----------
    patch : ndarray of shape (3, 3)
        Scores, ``patch[1, 1]`` the maximum (rows = y).

    Returns
    -------
    offset : ndarray of shape (2,)
        ``(dx, dy)``.

    Raises
    ------
    ValueError
        If ``patch`` is not 3 x 3 and finite.
    """
    p = np.asarray(patch, dtype=np.float64)
    if p.shape != (3, 3) or not np.isfinite(p).all():
        raise ValueError(f"patch must be a finite 3 x 3 array; got shape {p.shape}")
    # closed-form least-squares coefficients on the 3 x 3 grid
    b = (p[:, 2].sum() - p[:, 0].sum()) / 6.0
    c = (p[2, :].sum() - p[0, :].sum()) / 6.0
    d = (p[:, 0].sum() + p[:, 2].sum() - 2.0 * p[:, 1].sum()) / 6.0
    g = (p[0, :].sum() + p[2, :].sum() - 2.0 * p[1, :].sum()) / 6.0
    e = (p[0, 0] + p[2, 2] - p[0, 2] - p[2, 0]) / 4.0
    det = 4.0 * d * g - e * e
    if d < 0 and det > 0:
        dx = (e * c - 2.0 * g * b) / det
        dy = (e * b - 2.0 * d * c) / det
    else:
        dx = -b / (2.0 * d) if d < 0 else 0.0
        dy = -c / (2.0 * g) if g < 0 else 0.0
    return np.clip(np.array([dx, dy]), -1.0, 1.0)


def _blur_radius(sigma):
    """Half-width of OpenCV's Gaussian kernel for a float image (``ksize = round(8 sigma + 1)``,
    made odd)."""
    return (int(round(sigma * 8.0 + 1.0)) | 1) // 2


def _sub_level(rgb, scale, r0, c0, h, w):
    """Rows ``r0 .. r0 + h - 1`` and columns ``c0 .. c0 + w - 1`` of the image resampled by
    ``scale`` on the grid ``x_level = (x + 0.5) * scale - 0.5``, as the pyramid resamples (Gaussian
    blur of sigma ``sqrt(f^2 - 1) / 2`` before a downscale by ``f``, then bilinear
    interpolation; borders replicated after a reflecting blur). Only the pixels the rectangle
    reads are blurred, with the kernel's support around them, so a rectangle's values do not
    depend on where it starts: levels of neighbouring keypoints share one grid."""
    H, W = rgb.shape[:2]

    def taps(n0, n, size):  # source pixels and weights of level pixels n0 .. n0 + n - 1
        src = np.clip((np.arange(n0, n0 + n) + 0.5) / scale - 0.5, 0.0, size - 1.0)
        i0 = np.minimum(np.floor(src).astype(np.int64), max(size - 2, 0))
        return i0, src - i0, np.minimum(i0 + 1, size - 1)

    y0, fy, y1 = taps(r0, h, H)
    x0, fx, x1 = taps(c0, w, W)
    pad = 0
    if scale < 1.0:
        f = 1.0 / scale
        sigma = math.sqrt(f * f - 1.0) / 2.0
        pad = _blur_radius(sigma) + 1
    ya, yb = max(int(y0.min()) - pad, 0), min(int(y1.max()) + pad + 1, H)
    xa, xb = max(int(x0.min()) - pad, 0), min(int(x1.max()) + pad + 1, W)
    src = rgb[ya:yb, xa:xb]
    if pad:
        src = cv2.GaussianBlur(src, (0, 0), sigmaX=sigma, sigmaY=sigma,
                               borderType=cv2.BORDER_REFLECT_101).reshape(src.shape)
    y0, y1, x0, x1 = y0 - ya, y1 - ya, x0 - xa, x1 - xa
    fx, fy = fx[None, :, None], fy[:, None, None]
    top = src[y0][:, x0] * (1.0 - fx) + src[y0][:, x1] * fx
    bot = src[y1][:, x0] * (1.0 - fx) + src[y1][:, x1] * fx
    img = top * (1.0 - fy) + bot * fy
    return np.clip(np.ascontiguousarray(img, dtype=np.float32), 0, 1)


def _scan_group(detector, rgb, names, xys, radii, scale):
    """Best window of keypoint ``names[i]`` within ``radii[i]`` image pixels of ``xys[i]`` on
    the image resampled by ``scale``, every point scored on one shared level: per point
    ``(x, y, score)`` in image pixels (sub-pixel), or None.

    A window qualifies when its centre lies within the radius and its 3 x 3 neighbours are
    windows of the level; only those windows are scored, then the missing neighbours of each
    point's best one (for :func:`quadratic_peak`)."""
    H, W = rgb.shape[:2]
    hl, wl = int(round(H * scale)), int(round(W * scale))  # the resampled image's grid
    cands, out = [], [None] * len(names)
    for xy, r in zip(xys, radii * scale, strict=True):
        c = (np.asarray(xy, np.float64) + 0.5) * scale - 0.5
        ys = np.arange(max(int(math.ceil(c[1] - r)), HALF + 1),
                       min(int(math.floor(c[1] + r)), hl - HALF - 1) + 1)
        xs = np.arange(max(int(math.ceil(c[0] - r)), HALF + 1),
                       min(int(math.floor(c[0] + r)), wl - HALF - 1) + 1)
        gy, gx = np.meshgrid(ys, xs, indexing="ij")
        inside = np.hypot(gx - c[0], gy - c[1]) <= r
        cands.append(np.column_stack([gy[inside], gx[inside]]))  # row-major
    if not any(len(q) for q in cands):
        return out
    allc = np.concatenate([q for q in cands if len(q)])
    r0, c0 = allc.min(axis=0) - 1 - HALF
    r1, c1 = allc.max(axis=0) + 1 + HALF
    img = _sub_level(rgb, scale, int(r0), int(c0), int(r1 - r0), int(c1 - c0))
    cache = LevelCache(PyramidLevel(image=img, index=0, scale=float(scale), scale_y=scale,
                                    scale_x=scale))
    origin = np.array([r0, c0])

    def score(pts_per_point):
        """Scores of lists of level centres, one list per point, batched by keypoint."""
        res = [None] * len(names)
        for name in dict.fromkeys(names):
            idx = [i for i, n in enumerate(names) if n == name and len(pts_per_point[i])]
            if not idx:
                continue
            cat = np.concatenate([pts_per_point[i] for i in idx]) - origin
            _, s = detector.score_level(cache, cat, [name], cascade=False)
            s = np.asarray(s[name], np.float64)
            ends = np.cumsum([len(pts_per_point[i]) for i in idx])
            for i, part in zip(idx, np.split(s, ends[:-1]), strict=True):
                res[i] = part
        return res

    first = score(cands)
    best, extra = [None] * len(names), [np.zeros((0, 2), np.int64)] * len(names)
    nb = np.array([(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    for i, (q, s) in enumerate(zip(cands, first, strict=True)):
        if s is None:
            continue
        k = int(np.argmax(s))
        around = q[k] + nb
        known = {tuple(p): v for p, v in zip(q.tolist(), s, strict=True)}
        best[i] = (q[k], around, known)
        extra[i] = np.array([p for p in around.tolist() if tuple(p) not in known],
                            np.int64).reshape(-1, 2)
    second = score(extra)
    for i, b in enumerate(best):
        if b is None:
            continue
        peak, around, known = b
        if second[i] is not None:
            known.update(zip(map(tuple, extra[i].tolist()), second[i], strict=True))
        patch = np.array([known[tuple(p)] for p in around.tolist()]).reshape(3, 3)
        v = patch[1, 1]
        if not np.isfinite(patch).all():
            off = np.zeros(2)
        else:
            off = quadratic_peak(patch)
        x = (peak[1] + off[0] + 0.5) / scale - 0.5
        y = (peak[0] + off[1] + 0.5) / scale - 0.5
        out[i] = (float(x), float(y), float(v))
    return out


def _groups(pts, s0, ieds, shared):
    """Points rescanned on common levels: the same scales (equal ``s0``) and linked by
    distances below two inter-eye distances (one face's keypoints); singletons without
    ``shared``."""
    ok = np.flatnonzero(np.isfinite(s0))
    if not shared:
        return [[int(i)] for i in ok]
    groups = []
    for v in np.unique(s0[ok]):
        idx = ok[s0[ok] == v]
        label = np.arange(idx.size)
        d = np.hypot(*(pts[idx, None, :] - pts[None, idx, :]).transpose(2, 0, 1))
        near = d <= 2.0 * ieds[idx][:, None]
        for _ in range(idx.size):  # single linkage: propagate the smallest label
            new = np.where(near, label[None, :], idx.size).min(axis=1)
            if np.array_equal(new, label):
                break
            label = new
        groups += [idx[label == g].tolist() for g in np.unique(label)]
    return groups


def refine_points(detector, image, points, names, ieds, *, level_ied=DEFAULT_LEVEL_IED,
                  n_scales=5, scale_step=2.0 ** 0.25, radius=0.1, max_scale=4.0, shared=True):
    """Refined positions of keypoints, each rescanned around its current position.

    The image is resampled at each rescan scale on one grid (``x_level = (x + 0.5) * scale -
    0.5``); with ``shared`` the keypoints of one face (points with the same scale within two
    inter-eye distances of each other) are scored on one piece of that level per scale, which
    gives the same windows as one piece per keypoint (``shared=False``) at a fraction of the
    set-up cost.

    Parameters
    ----------
    detector : KeypointDetector
    image : ndarray of shape (H, W, 3)
        RGB, uint8/uint16 or float in [0, 1].
    points : ndarray of shape (n, 2)
        Current ``(x, y)`` positions (rows with a NaN are returned unchanged).
    names : sequence of str
        Keypoint name of each point (a detector keypoint).
    ieds : ndarray of shape (n,)
        Inter-eye distance (image pixels) of each point's face.
    level_ied : float or ndarray of shape (n,)
        IED in level pixels of the middle rescan scale (one for all points, or per point).
    n_scales : int
        Scales rescanned per point: ``level_ied / ied`` times ``scale_step ** j`` for ``j``
        centred on 0. The defaults (28 px, 5 scales a pyramid step ``2 ** (1/4)`` apart) put the
        face at IED 20-40 level pixels, the detectors' training range.
    scale_step : float
    radius : float or ndarray of shape (n,)
        Search radius around the current position, in IED (one for all points, or per point).
    max_scale : float
        Largest middle rescan scale (faces smaller than ``level_ied / max_scale`` are rescanned
        around this scale).
    shared : bool, default=True
        Score the keypoints of one face on one level per scale (else one level per keypoint;
        the windows, and so the results, are the same up to float rounding).

    Returns
    -------
    refined : ndarray of shape (n, 3)
        ``x, y`` and the best window score (score-weighted mean position of the per-scale maxima
        with positive scores; NaN score and the input position where no window scores).

    Raises
    ------
    ValueError
        If the shapes disagree, a name is not one of the detector's keypoints, or a setting is
        out of range.
    """
    rgb = as_float_rgb(image, min_size=WINDOW)
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ieds = np.asarray(ieds, dtype=np.float64).reshape(-1)
    names = list(names)
    if len(names) != len(pts) or len(ieds) != len(pts):
        raise ValueError(f"points, names and ieds must have one row each; got {len(pts)}, "
                         f"{len(names)}, {len(ieds)}")
    bad = [k for k in set(names) if k not in detector.classifiers]
    if bad:
        raise ValueError(f"unknown keypoints {bad}; the detector finds {detector.keypoints}")
    try:
        radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), (len(pts),))
    except ValueError:
        raise ValueError(f"radius must be a number or one per point ({len(pts)}); got shape "
                         f"{np.shape(radius)}") from None
    try:
        level_ied = np.broadcast_to(np.asarray(level_ied, dtype=np.float64), (len(pts),))
    except ValueError:
        raise ValueError(f"level_ied must be a number or one per point ({len(pts)}); got shape "
                         f"{np.shape(level_ied)}") from None
    if not (int(n_scales) >= 1 and scale_step > 1.0 and np.all(radius > 0) and max_scale > 0
            and np.all(level_ied > 0)):
        raise ValueError("need n_scales >= 1, scale_step > 1, radius > 0, max_scale > 0 and "
                         "level_ied > 0")
    out = np.column_stack([pts, np.full(len(pts), np.nan)])
    js = np.arange(int(n_scales)) - (int(n_scales) - 1) / 2.0
    ok = np.isfinite(pts).all(axis=1) & np.isfinite(ieds) & (ieds > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s0 = np.where(ok, np.minimum(level_ied / ieds, max_scale), np.nan)
    found = [[] for _ in range(len(pts))]
    for g in _groups(pts, s0, ieds, shared):
        for j in js:
            res = _scan_group(detector, rgb, [names[i] for i in g], pts[g],
                              radius[g] * ieds[g], float(s0[g[0]] * scale_step ** j))
            for i, f in zip(g, res, strict=True):
                if f is not None and np.isfinite(f[2]):
                    found[i].append(f)
    for i, fi in enumerate(found):
        if not fi:
            continue
        f = np.array(fi)
        w = np.maximum(f[:, 2], 0.0)
        if w.sum() > 0:
            out[i, :2] = (w[:, None] * f[:, :2]).sum(axis=0) / w.sum()
        else:
            out[i, :2] = f[np.argmax(f[:, 2]), :2]
        out[i, 2] = f[:, 2].max()
    return out


def refine_face_keypoints(detector, image, faces, names=None, probability=None, *,
                          fill_missing=None, fill_radius=0.25, level_ied=None, **kwargs):
    """Faces with their keypoints moved by :func:`refine_points`.

    Parameters
    ----------
    detector : KeypointDetector
    image : ndarray of shape (H, W, 3)
    faces : list of cvfs.keypoints.faces.Face
    names : sequence of str, optional
        Keypoints refined (default: every keypoint of the faces the detector finds).
    probability : callable, optional
        ``probability(name, scores)``: a refined keypoint's score becomes that of its best
        rescanned window (e.g. :meth:`FaceModel.probability`); default: scores unchanged.
    fill_missing : callable, optional
        ``fill_missing(name, scores)`` (e.g. :meth:`FaceModel.probability`): a keypoint the face
        lacks (NaN) is searched within ``fill_radius`` IED of its position in the fitted face
        model (``Face.predicted``) and takes the best window there, scored by this
        probability, so every face reports every keypoint its model places; default: missing
        keypoints stay NaN.
    fill_radius : float
        Search radius (IED) around a missing keypoint's predicted position.
    level_ied : float or dict, optional
        IED (level pixels) of the middle rescan scale: one for every keypoint, or keypoint name
        -> value (``DEFAULT_LEVEL_IED`` for keypoints not listed); default :data:`LEVEL_IED`.
    **kwargs
        Passed to :func:`refine_points`; ``radius`` may also be a dict of keypoint name ->
        radius (IED).

    Returns
    -------
    faces : list of Face
        New faces, in the same order.
    """
    from dataclasses import replace

    if fill_missing is not None and not callable(fill_missing):
        raise ValueError(f"fill_missing must be a callable (name, scores) -> probabilities or "
                         f"None; got {fill_missing!r}")
    if not fill_radius > 0:
        raise ValueError(f"fill_radius must be > 0; got {fill_radius!r}")
    rows, fill = [], []
    for fi, f in enumerate(faces):
        for k, (x, y, _) in f.keypoints.items():
            if not ((names is None or k in names) and k in detector.classifiers):
                continue
            if math.isfinite(x):
                rows.append((fi, k, x, y, f.ied))
            elif fill_missing is not None and k in getattr(f, "predicted", {}):
                fill.append((fi, k, *f.predicted[k], f.ied))
    if not rows and not fill:
        return list(faces)
    radius = kwargs.pop("radius", 0.1)
    if isinstance(radius, dict):
        radius = np.array([radius[r[1]] for r in rows], float)
    radius = np.concatenate([np.broadcast_to(np.asarray(radius, float), (len(rows),)),
                             np.full(len(fill), float(fill_radius))])
    rows = rows + fill
    if level_ied is None:
        level_ied = LEVEL_IED
    if isinstance(level_ied, dict):
        level_ied = np.array([level_ied.get(r[1], DEFAULT_LEVEL_IED) for r in rows], float)
    ref = refine_points(detector, image, np.array([(r[2], r[3]) for r in rows]),
                        [r[1] for r in rows], np.array([r[4] for r in rows]), radius=radius,
                        level_ied=level_ied, **kwargs)
    out = [replace(f, keypoints=dict(f.keypoints)) for f in faces]
    for i, ((fi, k, _, _, _), (x, y, s)) in enumerate(zip(rows, ref, strict=True)):
        if i >= len(rows) - len(fill):  # a missing keypoint: kept only where a window scored
            if math.isfinite(s):
                out[fi].keypoints[k] = (float(x), float(y), float(fill_missing(k, s)))
            continue
        p = out[fi].keypoints[k][2]
        if probability is not None and math.isfinite(s):
            p = float(probability(k, s))
        out[fi].keypoints[k] = (float(x), float(y), p)
    return out
