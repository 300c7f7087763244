"""Top-down scan of :meth:`cvfs.keypoints.KeypointDetector.detect_faces`: the eyes everywhere,
the other keypoints only where an eye pair, or an eye without a partner, puts them.

The face assembly (:func:`cvfs.keypoints.faces.assemble_faces`) uses a keypoint detection only
near the position the face model predicts for it, at a pyramid scale within the keypoint's
``scale_range`` for the face's inter-eye distance. So once the eyes are detected, every pair of
a left-eye and a right-eye candidate (the pairs :func:`cvfs.keypoints.faces.assemble_faces`
makes hypotheses of) fixes, for each other keypoint, a square of positions (centred on the
predicted position, half-side ``radius_k + MARGIN`` inter-eye distances plus the suppression
radius) and a range of pyramid levels (``scale_range`` widened by one level on each side). Only
the windows of those squares on those levels are scanned, plus a one-window ring whose scores
make the peaks inside the squares exactly the peaks of the full scan.

A face with one eye missed (a profile, a closed or occluded eye) has no eye pair: a probable eye
candidate in no valid pair places the face up to its size and roll
(:func:`single_eye_hypotheses`), and where no eye candidate places any face the detector scans
the other keypoints over the whole pyramid, so a face seen without its eyes can still be
assembled from its nose and mouth corners.

The peaks inside the regions equal the full scan's; those outside are not found, so a face
placed by no eye candidate while another face in the image is loses its other keypoints, and a
region's detection is no longer suppressed or merged by a stronger peak just outside it.
"""

import numpy as np

from cvfs._jit import njit
from cvfs.keypoints.faces import _candidates, _hypotheses
from cvfs.vision import HALF

__all__ = ["MARGIN", "band_rows", "eye_pairs", "level_regions", "single_eye_hypotheses"]

#: Inter-eye distances added to a keypoint's search radius: room for the refit of the face
#: model (similarity and shape modes through every inlier) to move the prediction. With 0.25
#: the face AP equals the full scan's (``benchmarks/keypoints/keypoints_evaluate.py --faces``).
MARGIN = 0.25
EYES = ("left_eye_center", "right_eye_center")


def eye_pairs(found, scales, model, max_per_keypoint=60):
    """Similarity transforms ``(c, t)`` (complex, model frame -> image) of the face model's mean
    shape through every valid pair of eye candidates, as :func:`assemble_faces` makes them.

    Parameters
    ----------
    found : dict of str -> ndarray of shape (n, 3)
        Eye detections ``x, y, score`` (raw scores).
    scales : dict of str -> ndarray of shape (n,)
        Pyramid scale of each detection.
    model : cvfs.keypoints.faces.FaceModel
    max_per_keypoint : int
        Most probable candidates per eye (as :func:`assemble_faces`).

    Returns
    -------
    c, t : ndarray of complex, shape (h,)
    """
    eyes = {k: found[k] for k in EYES if k in found}
    cands = _candidates(eyes, scales, model, int(max_per_keypoint))
    return _hypotheses(model, cands)


def single_eye_hypotheses(found, scales, model, c, t, *, p_min=0.5, max_per_keypoint=10,
                          n_ied=4, n_roll=3):
    """Face hypotheses ``(c, t)`` around eye candidates that are in no valid eye pair.

    An eye whose partner is missed (a profile, a closed or occluded eye) fixes the face only up
    to its size and roll: for each such candidate with calibrated probability ``>= p_min``
    (among the ``max_per_keypoint`` most probable of its eye), the mean shape is placed through
    it at ``n_ied`` inter-eye distances spanning the eye's ``scale_range`` at the pyramid scale
    it was found at, times ``n_roll`` rolls spanning the training roll range. The regions of
    these hypotheses (:func:`level_regions`, whose squares overlap between the samples) let
    the other keypoints, and so :func:`cvfs.keypoints.faces.assemble_faces`' hypotheses from
    pairs such as an eye and a mouth corner, be found.

    Parameters
    ----------
    found, scales, model :
        As :func:`eye_pairs`.
    c, t : ndarray of complex
        The eye-pair hypotheses (:func:`eye_pairs`): candidates they pass through are skipped.
    p_min : float
    max_per_keypoint : int
    n_ied, n_roll : int

    Returns
    -------
    c, t : ndarray of complex, shape (h,)
    """
    names = model.shape.names
    eyes = {k: found[k] for k in EYES if k in found}
    cands = _candidates(eyes, scales, model, int(max_per_keypoint))
    lo_r, hi_r = np.radians(model.shape.roll_range)
    rolls = np.exp(1j * np.linspace(lo_r, hi_r, int(n_roll)))
    cs, ts = [], []
    for k in EYES:
        i = names.index(k)
        zm = model.shape.mean[i, 0] + 1j * model.shape.mean[i, 1]
        lo, hi = model.scale_range[k]
        paired = c * zm + t  # where the pair hypotheses put this eye: their candidates
        for x, y, p, s in cands[i]:
            z = x + 1j * y
            if p < p_min or not np.isfinite(s) or (paired.size and np.abs(paired - z).min()
                                                  < 1e-6):
                continue
            ied = np.geomspace(max(lo / s, 2.0), max(hi / s, 2.0), int(n_ied))
            cc = (ied[:, None] * rolls[None, :]).ravel()
            cs.append(cc)
            ts.append(z - cc * zm)
    if not cs:
        return np.zeros(0, complex), np.zeros(0, complex)
    return np.concatenate(cs), np.concatenate(ts)


@njit(cache=True)
def _paint(mask, r0, r1, c0, c1):
    """Set ``mask[r0[i]:r1[i], c0[i]:c1[i]]`` for every i (bounds already clipped)."""
    for i in range(r0.size):
        for r in range(r0[i], r1[i]):
            for c in range(c0[i], c1[i]):
                mask[r, c] = True


def level_regions(level, grid, names, model, c, t, *, scales_per_octave, pad):
    """Windows of one pyramid level to scan per keypoint: the keypoint's region and a ring.

    Parameters
    ----------
    level : cvfs.vision.PyramidLevel
    grid : tuple of int
        ``(gh, gw)``: window top-left rows and columns of the level.
    names : list of str
        Keypoints of ``model`` to place.
    model : cvfs.keypoints.faces.FaceModel
    c, t : ndarray of complex, shape (h,)
        Face hypotheses (:func:`eye_pairs`).
    scales_per_octave : int
        Of the pyramid: the scale range of a keypoint is widened by one level on each side.
    pad : float
        Level pixels added to every region's radius (the suppression radius).

    Returns
    -------
    regions : dict of str -> ndarray of bool, shape (gh, gw) or None
        Windows whose peaks are kept (None: no window of the level).
    scan : dict of str -> ndarray of bool, shape (gh, gw) or None
        ``regions`` grown by one window in every direction: the windows scored.
    """
    gh, gw = grid
    ied = np.abs(c)
    step = 2.0 ** (1.0 / scales_per_octave)
    s = level.scale
    regions, scan = {}, {}
    sx, sy = level.scale_x, level.scale_y
    for name in names:
        k = model.shape.names.index(name)
        lo, hi = model.scale_range[name]
        use = (ied * s * step >= lo) & (ied * s / step <= hi)
        if not use.any():
            regions[name] = scan[name] = None
            continue
        m = model.shape.mean[k]
        z = c[use] * (m[0] + 1j * m[1]) + t[use]
        rad = (model.radius[k] + MARGIN) * ied[use]
        # window top-left = level centre - HALF; level x = (x + 0.5) * sx - 0.5
        cx = (z.real + 0.5) * sx - 0.5 - HALF
        cy = (z.imag + 0.5) * sy - 0.5 - HALF
        rx, ry = rad * sx + pad, rad * sy + pad
        # np.minimum(np.maximum()) is np.clip without its per-call overhead (tiny arrays)
        r0 = np.minimum(np.maximum(np.floor(cy - ry), 0), gh).astype(np.int64)
        r1 = np.minimum(np.maximum(np.ceil(cy + ry) + 1, 0), gh).astype(np.int64)
        c0 = np.minimum(np.maximum(np.floor(cx - rx), 0), gw).astype(np.int64)
        c1 = np.minimum(np.maximum(np.ceil(cx + rx) + 1, 0), gw).astype(np.int64)
        keep = (r1 > r0) & (c1 > c0)
        if not keep.any():
            regions[name] = scan[name] = None
            continue
        reg = np.zeros((gh, gw), dtype=np.bool_)
        _paint(reg, r0[keep], r1[keep], c0[keep], c1[keep])
        big = np.zeros((gh, gw), dtype=np.bool_)
        _paint(big, np.maximum(r0[keep] - 1, 0), np.minimum(r1[keep] + 1, gh),
               np.maximum(c0[keep] - 1, 0), np.minimum(c1[keep] + 1, gw))
        regions[name], scan[name] = reg, big
    return regions, scan


def band_rows(scan, gap):
    """Runs ``[(r0, r1), ...]`` of window rows holding every scanned window of any keypoint,
    split where more than ``gap`` rows in a row hold none (a band of level rows
    ``r0 .. r1 + WINDOW - 2`` holds the pixels of a run)."""
    masks = [m for m in scan.values() if m is not None]
    if not masks:
        return []
    rows = np.flatnonzero(np.logical_or.reduce([m.any(axis=1) for m in masks]))
    if rows.size == 0:
        return []
    cut = np.flatnonzero(np.diff(rows) > gap + 1)
    starts = np.r_[rows[0], rows[cut + 1]]
    ends = np.r_[rows[cut], rows[-1]] + 1
    return list(zip(starts.tolist(), ends.tolist(), strict=True))
