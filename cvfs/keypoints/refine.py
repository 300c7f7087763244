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

__all__ = ["quadratic_peak", "refine_face_keypoints", "refine_points"]


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


def _level(crop, scale):
    """The crop resampled by ``scale`` as the pyramid does (bilinear when upsampling, Gaussian
    blur of sigma sqrt(f^2 - 1) / 2 before a downscale by f)."""
    h, w = crop.shape[:2]
    size = (max(WINDOW, int(round(h * scale))), max(WINDOW, int(round(w * scale))))
    img = crop
    if scale < 1.0:
        f = 1.0 / scale
        s = math.sqrt(f * f - 1.0) / 2.0
        img = cv2.GaussianBlur(img, (0, 0), sigmaX=s, sigmaY=s, borderType=cv2.BORDER_REFLECT_101)
    img = cv2.resize(img, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    img = np.clip(np.ascontiguousarray(img.reshape(size[0], size[1], 3), dtype=np.float32), 0, 1)
    return PyramidLevel(image=img, index=0, scale=float(scale), scale_y=size[0] / h,
                        scale_x=size[1] / w)


def _scan_at(detector, rgb, name, xy, radius, scale):
    """Best window of keypoint ``name`` within ``radius`` image pixels of ``xy`` on the image
    resampled by ``scale``: ``(x, y, score)`` in image pixels (sub-pixel), or None."""
    H, W = rgb.shape[:2]
    margin = radius + (HALF + 2) / scale
    x0, y0 = int(math.floor(xy[0] - margin)), int(math.floor(xy[1] - margin))
    x1, y1 = int(math.ceil(xy[0] + margin)) + 1, int(math.ceil(xy[1] + margin)) + 1
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, W), min(y1, H)
    if min(x1 - x0, y1 - y0) * scale < WINDOW + 2:
        return None
    level = _level(rgb[y0:y1, x0:x1], scale)
    cache = LevelCache(level)
    h, w = level.shape
    c = level.from_original(np.array([xy[0] - x0, xy[1] - y0]))
    r = radius * scale
    ys = np.arange(max(HALF, int(math.floor(c[1] - r)) - 1),
                   min(h - HALF, int(math.ceil(c[1] + r)) + 2))
    xs = np.arange(max(HALF, int(math.floor(c[0] - r)) - 1),
                   min(w - HALF, int(math.ceil(c[0] + r)) + 2))
    if ys.size < 3 or xs.size < 3:
        return None
    grid = np.stack(np.meshgrid(ys, xs, indexing="ij"), axis=-1).reshape(-1, 2)
    _, s = detector.score_level(cache, grid, [name], cascade=False)
    smap = s[name].reshape(ys.size, xs.size)
    gy, gx = np.meshgrid(ys, xs, indexing="ij")
    inside = np.hypot(gx - c[0], gy - c[1]) <= r
    inside[[0, -1], :] = False  # the maximum needs its 3 x 3 neighbourhood
    inside[:, [0, -1]] = False
    if not inside.any():
        return None
    masked = np.where(inside, smap, -np.inf)
    i, j = np.unravel_index(int(np.argmax(masked)), masked.shape)
    off = quadratic_peak(smap[i - 1:i + 2, j - 1:j + 2])
    pos = level.to_original(np.array([xs[j] + off[0], ys[i] + off[1]]))
    return float(pos[0] + x0), float(pos[1] + y0), float(smap[i, j])


def refine_points(detector, image, points, names, ieds, *, level_ied=28.0, n_scales=5,
                  scale_step=2.0 ** 0.25, radius=0.1, max_scale=4.0):
    """Refined positions of keypoints, each rescanned around its current position.

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
    level_ied : float
        IED in level pixels of the middle rescan scale.
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
    if not (int(n_scales) >= 1 and scale_step > 1.0 and np.all(radius > 0) and max_scale > 0
            and level_ied > 0):
        raise ValueError("need n_scales >= 1, scale_step > 1, radius > 0, max_scale > 0 and "
                         "level_ied > 0")
    out = np.column_stack([pts, np.full(len(pts), np.nan)])
    js = np.arange(int(n_scales)) - (int(n_scales) - 1) / 2.0
    for i, (xy, name, ied, rad) in enumerate(zip(pts, names, ieds, radius, strict=True)):
        if not (np.isfinite(xy).all() and np.isfinite(ied) and ied > 0):
            continue
        s0 = min(level_ied / ied, max_scale)
        found = [f for f in (_scan_at(detector, rgb, name, xy, rad * ied, s0 * scale_step ** j)
                             for j in js) if f is not None and np.isfinite(f[2])]
        if not found:
            continue
        f = np.array(found)
        w = np.maximum(f[:, 2], 0.0)
        if w.sum() > 0:
            out[i, :2] = (w[:, None] * f[:, :2]).sum(axis=0) / w.sum()
        else:
            out[i, :2] = f[np.argmax(f[:, 2]), :2]
        out[i, 2] = f[:, 2].max()
    return out


def refine_face_keypoints(detector, image, faces, names=None, probability=None, *,
                          fill_missing=None, fill_radius=0.25, **kwargs):
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
    ref = refine_points(detector, image, np.array([(r[2], r[3]) for r in rows]),
                        [r[1] for r in rows], np.array([r[4] for r in rows]), radius=radius,
                        **kwargs)
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
