"""Peaks of score maps and greedy non-maximum suppression across pyramid levels.

The scans of :mod:`cvfs.keypoints.level_scan` keep, per level, the local maxima of each
classifier's score grid (:func:`grid_peaks`) with sub-pixel offsets (:func:`parabolic_offsets`);
:func:`merge_levels` maps them to the original image and suppresses the peaks of neighbouring
levels (:func:`nms`, :func:`suppress`).
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["grid_peaks", "merge_levels", "nms", "parabolic_offsets", "suppress"]


@njit(cache=True)
def _greedy_nms(xs, ys, radius):
    """Keep detections (already sorted by decreasing score) with no kept one within their own
    radius. Returns the keep mask and, per detection, the row among the kept detections of the
    one that suppressed it (its own row if kept)."""
    n = xs.size
    keep = np.zeros(n, dtype=np.bool_)
    owner = np.empty(n, dtype=np.int64)
    kx = np.empty(n)
    ky = np.empty(n)
    nk = 0
    for i in range(n):
        r2 = radius[i] * radius[i]
        owner[i] = -1
        for j in range(nk):
            dx = xs[i] - kx[j]
            dy = ys[i] - ky[j]
            if dx * dx + dy * dy < r2:
                owner[i] = j
                break
        if owner[i] < 0:
            keep[i] = True
            owner[i] = nk
            kx[nk] = xs[i]
            ky[nk] = ys[i]
            nk += 1
    return keep, owner


@njit(cache=True)
def grid_peaks(grid, threshold):
    """Rows and columns of the entries of ``grid`` above ``threshold`` that are >= their 8
    neighbours (neighbours outside the grid count as -inf)."""
    h, w = grid.shape
    rows = []
    cols = []
    for r in range(h):
        for c in range(w):
            v = grid[r, c]
            if not v > threshold:
                continue
            peak = True
            for dr in range(-1, 2):
                for dc in range(-1, 2):
                    rr = r + dr
                    cc = c + dc
                    if 0 <= rr < h and 0 <= cc < w and grid[rr, cc] > v:
                        peak = False
            if peak:
                rows.append(r)
                cols.append(c)
    return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


def parabolic_offsets(smap, rows, cols):
    """Sub-pixel (dx, dy) of peaks at (rows, cols) of a score map: the vertex of the parabola
    through each peak and its two neighbours per axis (0 where a neighbour is missing)."""
    h, w = smap.shape
    out = np.zeros((rows.size, 2))
    for axis, (dr, dc) in enumerate(((0, 1), (1, 0))):
        r0, c0 = rows - dr, cols - dc
        r1, c1 = rows + dr, cols + dc
        ok = (r0 >= 0) & (c0 >= 0) & (r1 < h) & (c1 < w)
        a = np.where(ok, smap[np.maximum(r0, 0), np.maximum(c0, 0)], np.nan)
        b = smap[rows, cols]
        c = np.where(ok, smap[np.minimum(r1, h - 1), np.minimum(c1, w - 1)], np.nan)
        den = a - 2.0 * b + c
        with np.errstate(invalid="ignore", divide="ignore"):
            off = np.where(np.isfinite(den) & (den < 0), 0.5 * (a - c) / den, 0.0)
        out[:, axis] = np.minimum(np.maximum(off, -0.5), 0.5)
    return out


def nms(detections, radius, merge=False, merge_radius=None):
    """Greedy non-maximum suppression in original-image coordinates.

    Parameters
    ----------
    detections : ndarray of shape (n, 3)
        x, y, score.
    radius : ndarray of shape (n,)
        Suppression radius of each detection (its level's radius mapped to the original).
    merge : bool, default=False
        Move each kept detection to the mean position of itself and the detections it
        suppressed (the peaks of neighbouring pyramid levels), weighted by the positive part
        of their scores; scores are unchanged. The merge raises the shipped eye detector's AP
        on the MTFL test crops (``benchmarks/keypoints/keypoints_evaluate.py``).
    merge_radius : ndarray of shape (n,), optional
        With ``merge``: a suppressed detection joins the mean only if it lies within its own
        ``merge_radius`` of the kept one (default: every suppressed detection).

    Returns
    -------
    kept : ndarray of shape (m, 3)
        Sorted by decreasing score.
    """
    return suppress(detections, radius, merge, merge_radius)[0]


def suppress(detections, radius, merge=False, merge_radius=None, scale=None):
    """:func:`nms`, and the score-weighted geometric mean of ``scale`` (n,) over each kept
    detection and the detections merged into it (``None`` without ``scale``)."""
    if detections.shape[0] == 0:
        return detections, (np.zeros(0) if scale is not None else None)
    order = np.lexsort((detections[:, 1], detections[:, 0], -detections[:, 2]))
    d = detections[order]
    keep, owner = _greedy_nms(d[:, 0].copy(), d[:, 1].copy(),
                              np.asarray(radius, np.float64)[order])
    out = d[keep]
    w = np.maximum(d[:, 2], 0.0) if merge else np.zeros(d.shape[0])
    if merge and merge_radius is not None:
        dist = np.hypot(d[:, 0] - out[owner, 0], d[:, 1] - out[owner, 1])
        w[dist > np.asarray(merge_radius, np.float64)[order]] = 0.0
    w[keep] = np.maximum(w[keep], 1e-300)  # a kept detection always counts
    wsum = np.bincount(owner, w, minlength=out.shape[0])
    if merge:
        for c in (0, 1):
            out[:, c] = np.bincount(owner, w * d[:, c], minlength=out.shape[0]) / wsum
    if scale is None:
        return out, None
    logs = np.log(np.asarray(scale, np.float64)[order])
    return out, np.exp(np.bincount(owner, w * logs, minlength=out.shape[0]) / wsum)


def merge_levels(level_peaks, names, radius, merge_radius, refine):
    """Detections per keypoint from the peaks of every level: :func:`suppress` over the
    levels' ``(scale, [peaks per keypoint])``; returns ``(detections, scales)`` dicts."""
    found = {k: [] for k in names}
    radii = {k: [] for k in names}
    found_scale = {k: [] for k in names}
    for scale, peaks in level_peaks:
        for k, p in zip(names, peaks, strict=True):
            if p is None:
                continue
            found[k].append(p)
            radii[k].append(np.full(p.shape[0], radius / scale))
            found_scale[k].append(np.full(p.shape[0], scale))
    out, scale = {}, {}
    for k in names:
        if found[k]:
            sc = np.concatenate(found_scale[k])
            out[k], scale[k] = suppress(np.concatenate(found[k]), np.concatenate(radii[k]),
                                         refine, merge_radius / sc, sc)
        else:
            out[k], scale[k] = np.zeros((0, 3)), np.zeros(0)
    return out, scale
