"""Training examples for keypoint detectors: window positions on pyramid levels, never features.

An *example* is a window centre on one pyramid level of one training image, stored as a record
of :data:`EXAMPLE_DTYPE` (image number, level exponent k, integer column x and row y on that
level). Features are recomputed from positions when needed, so millions of mined negatives cost
8 bytes each instead of ~60k floats.

Rules (FSA paper, section 3.3):

- training levels of an image: levels whose nominal scale s = 2^(k/4) brings the face's
  inter-eye distance into ``ied_range`` (``[20, 40]`` px);
- positives: integer positions within ``pos_radius`` (1 px, Euclidean) of the keypoint mapped
  onto a training level;
- negatives: positions on the training levels at least ``neg_radius`` (0.5) x IED_level from
  the keypoint of every annotated face of the image.

Only window centres whose whole window lies inside the level are used: ``margin <= x <= w -
margin`` and the same for y (``margin = 12`` for the 24x24 windows of :mod:`cvfs.vision`).

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3 ("Training examples").
"""

import math

import numpy as np

from cvfs.base import check_random_state

__all__ = [
    "EXAMPLE_DTYPE",
    "LevelGeometry",
    "face_levels",
    "level_geometry",
    "negative_mask",
    "positive_examples",
    "random_negatives",
    "training_levels",
]

#: One example: image number, pyramid level exponent, window centre (column x, row y) on the level.
EXAMPLE_DTYPE = np.dtype([("image", "<i4"), ("level", "<i2"), ("x", "<i2"), ("y", "<i2")])


class LevelGeometry:
    """Shape and coordinate mapping of one pyramid level (no pixels).

    Follows :mod:`cvfs.vision.pyramid`: level size ``round(H s), round(W s)`` with nominal scale
    ``s = 2^(k / scales_per_octave)``, and centre-aligned mapping
    ``x_level = (x + 0.5) * scale_x - 0.5``.

    Parameters
    ----------
    image_shape : tuple of int
        ``(H, W)`` of the original image.
    index : int
        Level exponent k.
    scales_per_octave : int
    """

    def __init__(self, image_shape, index, scales_per_octave=4):
        H, W = int(image_shape[0]), int(image_shape[1])
        self.index = int(index)
        self.scale = 2.0 ** (self.index / scales_per_octave)
        h = max(1, int(round(H * self.scale)))
        w = max(1, int(round(W * self.scale)))
        self.shape = (h, w)
        self.scale_y = h / H
        self.scale_x = w / W

    def from_original(self, xy):
        """Original ``(x, y)`` -> level coordinates; array of shape (..., 2)."""
        xy = np.asarray(xy, dtype=np.float64)
        return (xy + 0.5) * np.array([self.scale_x, self.scale_y]) - 0.5

    def to_original(self, xy):
        """Level ``(x, y)`` -> original coordinates; array of shape (..., 2)."""
        xy = np.asarray(xy, dtype=np.float64)
        return (xy + 0.5) / np.array([self.scale_x, self.scale_y]) - 0.5


def level_geometry(image_shape, index, scales_per_octave=4):
    """:class:`LevelGeometry` of level ``index`` of an image of shape ``image_shape``."""
    return LevelGeometry(image_shape, index, scales_per_octave)


def training_levels(ied, ied_range=(20.0, 40.0), scales_per_octave=4):
    """Level exponents k whose nominal scale puts ``ied`` inside ``ied_range``.

    Parameters
    ----------
    ied : float
        Inter-eye distance in original pixels.
    ied_range : (float, float)
    scales_per_octave : int

    Returns
    -------
    levels : ndarray of int, decreasing (largest scale first); empty if ``ied`` is not finite.

    Raises
    ------
    ValueError
        If ``ied_range`` is not ``0 < low <= high``.
    """
    lo, hi = ied_range
    if not 0 < lo <= hi:
        raise ValueError(f"ied_range must be (low, high) with 0 < low <= high; got {ied_range}")
    if not (np.isfinite(ied) and ied > 0):
        return np.zeros(0, dtype=np.int64)
    kmin = math.ceil(scales_per_octave * math.log2(lo / ied) - 1e-9)
    kmax = math.floor(scales_per_octave * math.log2(hi / ied) + 1e-9)
    return np.arange(kmax, kmin - 1, -1, dtype=np.int64)


def _valid_box(shape, margin):
    # cvfs.vision: a 24x24 window centred at (x, y) needs 12 <= x <= w - 12 (same for y)
    h, w = shape
    return margin, w - margin + 1, margin, h - margin + 1  # x in [x0, x1), y in [y0, y1)


def positive_examples(points, ieds, image_shape, *, image_index=0, ied_range=(20.0, 40.0),
                      pos_radius=1.0, margin=12, scales_per_octave=4):
    """Positive window centres for one keypoint in one image.

    Parameters
    ----------
    points : array_like of shape (n_faces, 2)
        The keypoint ``(x, y)`` of every face (NaN: not annotated, skipped).
    ieds : array_like of shape (n_faces,)
        Inter-eye distances in original pixels.
    image_shape : tuple of int
        ``(H, W)``.
    image_index : int
        Stored in the records.
    ied_range, pos_radius, margin, scales_per_octave
        See the module docstring.

    Returns
    -------
    examples : ndarray of EXAMPLE_DTYPE
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ieds = np.asarray(ieds, dtype=np.float64).reshape(-1)
    out = []
    r = int(math.ceil(pos_radius))
    for p, ied in zip(pts, ieds, strict=True):
        if not np.isfinite(p).all():
            continue
        for k in training_levels(ied, ied_range, scales_per_octave):
            g = LevelGeometry(image_shape, k, scales_per_octave)
            x0, x1, y0, y1 = _valid_box(g.shape, margin)
            q = g.from_original(p)
            cx, cy = int(round(q[0])), int(round(q[1]))
            for y in range(cy - r, cy + r + 1):
                for x in range(cx - r, cx + r + 1):
                    if (x0 <= x < x1 and y0 <= y < y1
                            and math.hypot(x - q[0], y - q[1]) <= pos_radius):
                        out.append((image_index, k, x, y))
    return np.array(out, dtype=EXAMPLE_DTYPE)


def negative_mask(geometry, points, ieds, *, neg_radius=0.5, margin=12):
    """Where negatives may be taken on one level.

    Parameters
    ----------
    geometry : LevelGeometry or cvfs.vision.PyramidLevel
        Anything with ``shape``, ``scale_x``, ``scale_y`` and ``from_original``.
    points : array_like of shape (n_faces, 2)
        The keypoint of every face in original coordinates (NaN faces are ignored).
    ieds : array_like of shape (n_faces,)
    neg_radius : float
        Minimum distance to every face's keypoint, in units of that face's IED.
    margin : int
        Window half-size: centres closer to a border are excluded.

    Returns
    -------
    mask : ndarray of shape (h, w), bool
    """
    h, w = geometry.shape
    mask = np.zeros((h, w), dtype=bool)
    x0, x1, y0, y1 = _valid_box((h, w), margin)
    if x1 <= x0 or y1 <= y0:
        return mask
    mask[y0:y1, x0:x1] = True
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ieds = np.asarray(ieds, dtype=np.float64).reshape(-1)
    s = math.sqrt(geometry.scale_x * geometry.scale_y)
    yy, xx = np.mgrid[0:h, 0:w]
    for p, ied in zip(pts, ieds, strict=True):
        if not (np.isfinite(p).all() and np.isfinite(ied)):
            continue
        q = geometry.from_original(p)
        rad = neg_radius * ied * s
        mask &= (xx - q[0]) ** 2 + (yy - q[1]) ** 2 >= rad * rad
    return mask


def face_levels(points, ieds, ied_range=(20.0, 40.0), scales_per_octave=4):
    """Union of the training levels (:func:`training_levels`) of every annotated face.

    Parameters
    ----------
    points : array_like of shape (n_faces, 2)
        The keypoint of every face (NaN faces are skipped).
    ieds : array_like of shape (n_faces,)
    ied_range : (float, float)
    scales_per_octave : int

    Returns
    -------
    levels : list of int, decreasing
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ieds = np.asarray(ieds, dtype=np.float64).reshape(-1)
    return sorted({int(k) for p, ied in zip(pts, ieds, strict=True) if np.isfinite(p).all()
                   for k in training_levels(ied, ied_range, scales_per_octave)}, reverse=True)


def random_negatives(points, ieds, image_shape, n, *, image_index=0, ied_range=(20.0, 40.0),
                     neg_radius=0.5, margin=12, scales_per_octave=4, levels=None,
                     random_state=None):
    """Up to ``n`` negatives drawn uniformly from the windows of some levels of one image.

    Candidates follow :func:`negative_mask` on ``levels`` (default: the training levels of every
    annotated face, :func:`face_levels`).

    Returns
    -------
    examples : ndarray of EXAMPLE_DTYPE, at most ``n`` records, without repeats.
    """
    rng = check_random_state(random_state)
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ieds = np.asarray(ieds, dtype=np.float64).reshape(-1)
    if levels is None:
        levels = face_levels(pts, ieds, ied_range, scales_per_octave)
    cand = []
    for k in levels:
        g = LevelGeometry(image_shape, k, scales_per_octave)
        ys, xs = np.nonzero(negative_mask(g, pts, ieds, neg_radius=neg_radius, margin=margin))
        rec = np.empty(xs.size, dtype=EXAMPLE_DTYPE)
        rec["image"], rec["level"], rec["x"], rec["y"] = image_index, k, xs, ys
        cand.append(rec)
    if not cand:
        return np.zeros(0, dtype=EXAMPLE_DTYPE)
    cand = np.concatenate(cand)
    if cand.size <= n:
        return cand
    return cand[np.sort(rng.choice(cand.size, size=n, replace=False))]
