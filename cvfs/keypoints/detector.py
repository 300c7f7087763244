"""Bottom-up keypoint detectors: scan every pyramid level, score windows, suppress non-maxima.

A :class:`KeypointDetector` holds one classifier per keypoint (an additive piecewise model on a
few columns of a :class:`cvfs.vision.FeaturePool`, trained by FSA or LogitBoost, see
:mod:`cvfs.keypoints.train`). :meth:`KeypointDetector.detect` builds the Gaussian pyramid
(4 levels per octave, upsampled levels up to ``max_scale`` for small faces) one level at a time,
computes only the selected feature columns at every window centre of every level, scores them,
keeps per-level local maxima above the threshold, maps them to original-image coordinates and
applies a greedy non-maximum suppression across levels. A level too large for the memory budget
is scanned in overlapping bands of rows with the same results (:mod:`cvfs.keypoints._tiling`).

Model files are written by :func:`cvfs.io.save_model` (kind ``"keypoint-detector"``) and read
by :func:`load_detector`; a reloaded detector gives identical detections.

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3.
"""

import logging
import math
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cvfs._jit import njit
from cvfs.datasets import models_dir
from cvfs.datasets.faces import KEYPOINTS
from cvfs.io import load_model, save_model
from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints._tiling import (
    band_bytes,
    check_max_memory,
    image_bytes,
    level_bytes,
    split_rows,
)
from cvfs.keypoints._topdown import (
    EYES,
    band_rows,
    eye_pairs,
    level_regions,
    single_eye_hypotheses,
)
from cvfs.keypoints.context import PairModel, pair_rescore
from cvfs.vision import (
    HALF,
    N_HOG,
    WINDOW,
    FeaturePool,
    LevelCache,
    as_float_rgb,
    iter_pyramid,
    level_bands,
    pyramid_scales,
    valid_centres,
    window_centres,
)
from cvfs.vision.hog import _COS, _SIN, _hog_into, _hog_plan, _orient_bin, _windows_kernel

__all__ = ["KIND", "KeypointDetector", "cascade_hardness", "load_detector", "nms"]

log = logging.getLogger(__name__)

KIND = "keypoint-detector"
_CHUNK = 16384  # windows per feature-computation chunk


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
def _grid_peaks(grid, threshold):
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


def _parabolic_offsets(smap, rows, cols):
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
        on the MTFL test crops (``benchmarks/keypoints_evaluate.py``).
    merge_radius : ndarray of shape (n,), optional
        With ``merge``: a suppressed detection joins the mean only if it lies within its own
        ``merge_radius`` of the kept one (default: every suppressed detection).

    Returns
    -------
    kept : ndarray of shape (m, 3)
        Sorted by decreasing score.
    """
    return _suppress(detections, radius, merge, merge_radius)[0]


def _suppress(detections, radius, merge=False, merge_radius=None, scale=None):
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


def cascade_hardness(pool, cache, centres, model, plan=None):
    """How far windows of one level get through ``model``'s soft cascade: the hard-negative
    ranking of mining.

    ``hardness = depth + (1/2 + arctan(partial) / pi)``, with ``depth`` the features computed
    before rejection (the rejecting one included; all ``k`` for a window that passes) and
    ``partial`` the score there, so windows sort by depth, then by partial score: every window
    that passes outranks every rejected one, and passing windows sort by their full score.
    Unlike the scores (-inf once rejected), this ranks every window, so mining finds its
    hardest negatives however few windows a strict cascade lets through.

    ``plan``: a :class:`ScanPlan` of ``[model]`` built once for many levels (else built here).

    Returns
    -------
    hardness : ndarray of shape (n,)

    Raises
    ------
    ValueError
        If a window leaves the level.
    """
    centres = _check_centres(cache, centres)
    plan = plan or ScanPlan(pool, [model])
    _, depth, partial = plan.scores(cache, centres - HALF, reached=True)
    return depth[0] + (0.5 + np.arctan(partial[0]) / np.pi)


def _check_centres(cache, centres):
    """``centres`` as int64 (n, 2), every window inside the level (else ValueError)."""
    centres = np.asarray(centres, dtype=np.int64).reshape(-1, 2)
    ok = valid_centres(cache.shape, centres)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"centres: window centred at {tuple(centres[i].tolist())} leaves the "
                         f"level of shape {tuple(cache.shape)}")
    return centres


def _level_scores(pool, cache, centres, models, cascade, plan=None):
    """(n_models, n) scores of windows centred at ``centres``: the soft-cascade scan (``plan``,
    built from ``models`` when not given), or every feature of every window (``cascade=False``,
    computed by the pool in chunks)."""
    centres = _check_centres(cache, centres)
    if cascade:
        return (plan or ScanPlan(pool, models)).scores(cache, centres - HALF)
    out = np.empty((len(models), len(centres)))
    for q, m in enumerate(models):
        for c0 in range(0, len(centres), _CHUNK):
            X = pool.compute(cache, centres[c0:c0 + _CHUNK], columns=m.features)
            out[q, c0:c0 + _CHUNK] = m.decision_function(X)
    return out


class _FullScorer:
    """Every feature of windows of one classifier, scored without the cascade: the pool's
    column plan (HOG blocks, Haar corner tables) built once, so scoring a few windows of many
    small levels (:mod:`cvfs.keypoints.refine`) costs little beyond the features themselves.
    Scores equal ``model.decision_function(pool.compute(cache, centres, model.features))``."""

    def __init__(self, pool, model):
        cols = np.asarray(model.features, dtype=np.int64)
        self.model = model
        self.n = cols.size
        self.hog_pos = np.flatnonzero(cols < N_HOG)
        self.hog_plan = _hog_plan(cols[self.hog_pos]) if self.hog_pos.size else None
        self.window_border = pool.hog_border == "window"
        # orientation bins of the window-border pixels (gradient across the border zeroed)
        self.b_row0 = _orient_bin(1.0, 0.0, _COS, _SIN)
        self.b_col0 = _orient_bin(0.0, 1.0, _COS, _SIN)
        self.hog_cols = cols[self.hog_pos]
        self.haar_pos = np.flatnonzero(cols >= N_HOG)
        self.haar = pool._haar_plan.take(cols[self.haar_pos] - N_HOG)

    def __call__(self, cache, centres):
        tl = np.ascontiguousarray(centres - HALF, dtype=np.int64)
        out = np.empty((len(tl), self.n), dtype=np.float32)
        if len(tl) == 0:
            return np.zeros(0)
        if self.hog_pos.size:
            if self.window_border:
                _windows_kernel(*_hog_maps(cache.hog), tl, *self.hog_plan, out, self.hog_pos,
                                self.b_row0, self.b_col0)
            else:
                _hog_into(cache.hog, tl, self.hog_cols, out, self.hog_pos, False)
        if self.haar_pos.size:
            self.haar.run(cache.integral, tl, out, self.haar_pos)
        return self.model.decision_function(out)


def _hog_maps(hl):
    return hl.cells, hl.bins, hl.mag, hl.abs_g_row, hl.abs_g_col


def _check_n_jobs(n_jobs):
    """Number of worker threads for ``n_jobs`` (an int >= 1, or -1 = every available core)."""
    if isinstance(n_jobs, (int, np.integer)) and not isinstance(n_jobs, bool) and (
            n_jobs >= 1 or n_jobs == -1):
        return len(os.sched_getaffinity(0)) if n_jobs == -1 else int(n_jobs)
    raise ValueError(f"n_jobs must be a positive int or -1 (every core); got {n_jobs!r}")


def _band_peaks(pool, plan, models, band, rows, thr, refine, clear=True):
    """Score peaks of the windows of one band of a level: per model ``None`` or an ``(n, 3)``
    array of ``x, y, score`` in original-image pixels, in row-major order of the peaks.

    ``band`` is a :class:`LevelCache` (the whole level, ``rows.s == 0``) or a
    :class:`cvfs.vision.LevelBand` starting at level row ``rows.s``; windows of top-left rows
    ``rows.s .. rows.e - 1`` are scored and peaks kept in rows ``rows.k0 .. rows.k1 - 1``, whose
    neighbour rows are in the band, so they are the peaks of the whole level's score grid.
    ``plan``: the :class:`ScanPlan` of the soft cascade, or None for the full scan. The band's
    maps are dropped before returning (kept with ``clear=False``).
    """
    level = band.level
    gw = level.shape[1] - 2 * HALF + 1
    nr = rows.e - rows.s
    tl = np.empty((nr * gw, 2), dtype=np.int64)
    tl[:, 0] = np.repeat(np.arange(nr, dtype=np.int64), gw)
    tl[:, 1] = np.tile(np.arange(gw, dtype=np.int64), nr)
    try:
        if plan is not None:
            scores = plan.scores(band, tl)
        else:
            scores = _level_scores(pool, band, tl + HALF, models, False)
    finally:
        if clear:
            band.clear()
    del tl
    out = []
    for s, t in zip(scores, thr, strict=True):
        grid = s.reshape(nr, gw)
        r, c = _grid_peaks(grid, t)
        own = (r >= rows.k0 - rows.s) & (r < rows.k1 - rows.s)
        r, c = r[own], c[own]
        if r.size == 0:
            out.append(None)
            continue
        xy = np.column_stack([c, r + rows.s]).astype(np.float64) + HALF
        if refine:
            xy += _parabolic_offsets(grid, r, c)
        out.append(np.column_stack([level.to_original(xy), grid[r, c]]))
    return out


def _pyramid_peaks(pool, plan, models, rgb, pyramid, thr, refine, n_jobs, max_memory,
                   keep=None):
    """``(scale, peaks)`` of every band of every level, in order (see :func:`_band_peaks`).

    ``pyramid = (levels, scales, blurred)``: an iterator of the levels (built when requested)
    and, per level, its nominal scale and whether building it blurs an octave base. The levels
    are scanned one after another within ``max_memory`` bytes (the memory model of
    :mod:`cvfs.keypoints._tiling`): a level that does not fit whole is scanned in bands of rows,
    each of at most ``1 / n_jobs`` of the budget left by the image and the level. With
    ``n_jobs > 1`` that many threads scan bands (of one or several levels; the numba kernels
    release the GIL), and a level or band starts only when the memory of those in flight
    leaves room for it. The peaks do not depend on the bands or on ``n_jobs``.

    ``plan``: the :class:`ScanPlan` of ``models``' soft cascades, or None for the full scan.
    ``keep``: a list that receives each level's :class:`LevelCache` with its maps (the caller
    checks that they fit the budget; ``n_jobs`` must be 1).
    """
    feats = np.concatenate([m.features for m in models])
    per_pixel, fixed = band_bytes(models, bool((feats >= N_HOG).any()),
                                  bool((feats < N_HOG).any()), plan is not None)
    avail = max_memory - image_bytes(rgb.shape)
    levels, scales, blurred = pyramid
    warned = False

    def split(level, lv_bytes):
        nonlocal warned
        budget = (avail - lv_bytes) / n_jobs
        parts, fits = split_rows(level.shape, budget, per_pixel, fixed)
        if not fits and not warned:
            log.warning("max_memory=%d bytes is too small for an image of shape %s: levels "
                        "are scanned in bands of one window row, which may exceed it",
                        max_memory, tuple(rgb.shape[:2]))
            warned = True
        rows = max(p.e - p.s for p in parts) + WINDOW - 1
        b_bytes = per_pixel * rows * level.shape[1] + fixed
        if len(parts) == 1:
            return [(LevelCache(level), parts[0])], b_bytes
        bands = level_bands(level, [p.pixel_rows for p in parts])
        return list(zip(bands, parts, strict=True)), b_bytes

    if n_jobs == 1:
        for scale in scales:
            level = next(levels)
            for band, rows in split(level, level_bytes(rgb.shape, scale, False))[0]:
                yield scale, _band_peaks(pool, plan, models, band, rows, thr, refine,
                                         clear=keep is None)
            if keep is not None:
                keep.append(band if isinstance(band, LevelCache) else None)
            del level, band
        return
    with ThreadPoolExecutor(max_workers=n_jobs) as ex:
        running, held = deque(), 0  # (future, scale, bytes released when it is collected)
        for scale, blur in zip(scales, blurred, strict=True):
            lv_bytes = level_bytes(rgb.shape, scale, False)
            while running and (held + level_bytes(rgb.shape, scale, blur) > avail
                               or len(running) > n_jobs):
                fut, sc, rel = running.popleft()
                yield sc, fut.result()
                held -= rel
            level = next(levels)
            held += lv_bytes
            parts, b_bytes = split(level, lv_bytes)
            for i, (band, rows) in enumerate(parts):
                while running and (held + b_bytes > avail or len(running) > n_jobs):
                    fut, sc, rel = running.popleft()
                    yield sc, fut.result()
                    held -= rel
                rel = b_bytes + (lv_bytes if i == len(parts) - 1 else 0)
                running.append((ex.submit(_band_peaks, pool, plan, models, band, rows, thr,
                                          refine), scale, rel))
                held += b_bytes
            del level, parts, band
        while running:
            fut, sc, _ = running.popleft()
            yield sc, fut.result()


def _region_peaks(plan, band, scan, region, own, row0):
    """Refined peaks ``(n, 3)`` (``x, y, score`` in original pixels; None if none) of one
    classifier over the windows ``scan`` ``(rows, gw)`` of a band whose first window row is
    ``row0`` on the level (``band``: a :class:`LevelBand` or the level's :class:`LevelCache`),
    kept where ``region`` is set and in band rows ``own[0] .. own[1] - 1``. ``scan`` holds
    ``region`` and its 8 neighbours, so the peaks and their sub-pixel offsets equal those of a
    scan of the whole level. Only the bounding box of ``scan`` is scored and searched (windows
    outside it are unscored, -inf, on the whole level as well)."""
    rows = np.flatnonzero(scan.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(scan.any(axis=0))
    ra, ca = rows[0], cols[0]
    box = scan[ra:rows[-1] + 1, ca:cols[-1] + 1]
    r, c = np.nonzero(box)
    grid = np.full(box.shape, -math.inf)
    r_band = r + (ra + row0 - getattr(band, "row0", 0))  # window rows on the band
    grid[r, c] = plan.scores(band, np.column_stack([r_band, c + ca]).astype(np.int64))[0]
    r, c = _grid_peaks(grid, -math.inf)
    keep = region[r + ra, c + ca] & (r + ra >= own[0]) & (r + ra < own[1])
    r, c = r[keep], c[keep]
    if r.size == 0:
        return None
    xy = np.column_stack([c + ca, r + ra + row0]).astype(np.float64) + HALF
    xy += _parabolic_offsets(grid, r, c)
    return np.column_stack([band.level.to_original(xy), grid[r, c]])


def _merge_levels(level_peaks, names, radius, merge_radius, refine):
    """Detections per keypoint from the peaks of every level: :func:`_suppress` over the
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
            out[k], scale[k] = _suppress(np.concatenate(found[k]), np.concatenate(radii[k]),
                                         refine, merge_radius / sc, sc)
        else:
            out[k], scale[k] = np.zeros((0, 3)), np.zeros(0)
    return out, scale


class KeypointDetector:
    """Detectors of named face keypoints sharing one feature pool.

    Parameters
    ----------
    classifiers : dict of str -> AdditiveModel
        One classifier per keypoint name (names from :data:`cvfs.datasets.faces.KEYPOINTS`).
    pool_params : dict
        ``FeaturePool(**pool_params)`` rebuilds the training feature pool.
    thresholds : dict of str -> float, optional
        Default score threshold per keypoint (default: 0.0 for every keypoint).
    scales_per_octave : int
    max_scale : float
        Largest pyramid scale scanned (2.0 adds an upsampled octave for small faces).
    nms_radius : float
        Suppression radius in level pixels (mapped to the original as ``nms_radius / scale``).
    merge_radius : float
        With ``detect(refine=True)``: only suppressed peaks within this many level pixels of
        the kept one move it (default 3, chosen on training images, see :meth:`detect`).
    info : dict, optional
        Training description kept in the model file.

    Raises
    ------
    ValueError
        If a name is not a keypoint, or there are no classifiers.
    """

    def __init__(self, classifiers, pool_params, *, thresholds=None, scales_per_octave=4,
                 max_scale=2.0, nms_radius=6.0, merge_radius=3.0, info=None):
        if not classifiers:
            raise ValueError("classifiers must map at least one keypoint name to a classifier")
        bad = [n for n in classifiers if n not in KEYPOINTS]
        if bad:
            raise ValueError(f"unknown keypoint names {bad}; expected names from {list(KEYPOINTS)}")
        self.classifiers = dict(classifiers)
        self.pool_params = dict(pool_params)
        self.pool = FeaturePool(**self.pool_params)
        self.thresholds = {n: float((thresholds or {}).get(n, 0.0)) for n in self.classifiers}
        self.scales_per_octave = int(scales_per_octave)
        self.max_scale = float(max_scale)
        self.nms_radius = float(nms_radius)
        self.merge_radius = float(merge_radius)
        self.info = dict(info or {})

    @property
    def keypoints(self):
        """list of str: the keypoint names this detector finds."""
        return list(self.classifiers)

    def score_level(self, cache, centres=None, keypoints=None, *, cascade=True):
        """Classifier scores of windows on one level.

        Parameters
        ----------
        cache : cvfs.vision.LevelCache
        centres : ndarray of shape (n, 2) of (row, col), optional
            Default: every valid centre (stride 1).
        keypoints : list of str, optional
            Default: all.
        cascade : bool
            Use the classifiers' soft cascades: windows rejected at a stage get score -inf.

        Returns
        -------
        centres : ndarray of shape (n, 2)
        scores : dict of str -> ndarray of shape (n,)
        """
        names = self.keypoints if keypoints is None else list(keypoints)
        if centres is None:
            centres = window_centres(cache.shape)
        centres = np.asarray(centres, dtype=np.int64).reshape(-1, 2)
        if cascade:
            s = _level_scores(self.pool, cache, centres, [self.classifiers[k] for k in names],
                              True)
            return centres, dict(zip(names, s, strict=True))
        centres = _check_centres(cache, centres)
        full = self.__dict__.setdefault("_full_scorers", {})
        for k in names:
            if k not in full:
                full[k] = _FullScorer(self.pool, self.classifiers[k])
        return centres, {k: full[k](cache, centres) for k in names}

    def detect(self, image, *, threshold=None, max_scale=None, min_scale=0.0, nms_radius=None,
               refine=True, cascade=True, n_jobs=1, merge_radius=None, pairs=None,
               max_memory=None):
        """Detect every keypoint over the whole pyramid.

        Parameters
        ----------
        image : ndarray of shape (H, W, 3)
            RGB, uint8/uint16 or float in [0, 1].
        threshold : float or dict of str -> float, optional
            Minimum score of a detection (default: the detector's thresholds).
        max_scale : float, optional
            Largest pyramid scale (default: the detector's ``max_scale``).
        min_scale : float
            Smallest pyramid scale scanned (levels below it are skipped).
        nms_radius : float, optional
            Suppression radius in level pixels (default: the detector's).
        refine : bool
            Sub-pixel peak positions from a parabola through the 3x3 neighbourhood, and each
            kept detection moved to the score-weighted mean of the peaks it suppressed within
            ``merge_radius`` (:func:`nms` with ``merge=True``).
        merge_radius : float, optional
            In level pixels (default: the detector's, 3). Chosen on training images (MTFL
            training faces 1,000-2,499, not used to train the shipped detectors, at their size
            and downscaled 2x and 3x) among 1.5-6: merging every suppressed peak (6, the
            suppression radius) gave mean eye AP 0.677 there, 3 gave 0.699.
        pairs : bool or PairModel, optional
            Rescore the eye detections by their partner (:func:`cvfs.keypoints.context.
            pair_rescore`): a left eye without a right-eye detection about one inter-eye
            distance to its right loses up to ``weight * cap`` (and vice versa), which demotes
            isolated background peaks. ``True`` uses ``PairModel()``, fitted on training
            images for the shipped eye detector. Off by default: it raises the AP of each eye
            but not of "eyes as one class" on the MTFL crops (see the README).
        cascade : bool
            Early rejection with the classifiers' soft cascades (when they have one).
        n_jobs : int, default=1
            Threads scanning pyramid levels (or bands of a level) in parallel (-1: one per
            available core); they share ``max_memory``. The detections do not depend on it.
        max_memory : int, optional
            Bytes this call may allocate for the image copy, the pyramid and the scan (default
            :data:`cvfs.keypoints._tiling.MAX_MEMORY`, 640 MiB), whatever the image size: the
            levels are built one at a time and a level whose maps do not fit is scanned in
            overlapping bands of rows (memory model in :mod:`cvfs.keypoints._tiling`; at least
            the image copy, one level image and one window row of maps). The detections do not
            depend on it.

        Returns
        -------
        detections : dict of str -> ndarray of shape (n, 3)
            ``x, y, score`` in original-image pixels (x = column), sorted by decreasing score.

        Raises
        ------
        TypeError
            If ``image`` is not an ndarray or has an unsupported dtype, or ``pairs`` is not a
            bool, None or a PairModel.
        ValueError
            If ``image`` is empty, grayscale, not RGB, smaller than 24x24, or float outside
            [0, 1], ``n_jobs`` is not a positive int or -1, or ``max_memory`` is not a positive
            number.
            If ``pairs`` names a keypoint this detector does not find.
        """
        return self._detect(image, threshold=threshold, max_scale=max_scale,
                            min_scale=min_scale, nms_radius=nms_radius, refine=refine,
                            cascade=cascade, n_jobs=n_jobs, merge_radius=merge_radius,
                            pairs=pairs, max_memory=max_memory)[0]

    def detect_faces(self, image, *, threshold=None, max_scale=None, face_model=None,
                     n_jobs=1, max_memory=None, max_faces=50, top_down=False,
                     refine=True):
        """Detect faces: the face model fitted to the keypoint detections, best first.

        The keypoints are detected (:meth:`detect` with ``threshold=-inf``: every window the
        soft cascades keep), their scores become calibrated probabilities and the face shape
        model is fitted to them by :func:`cvfs.keypoints.faces.assemble_faces`. By default
        every keypoint is scanned everywhere. With ``top_down`` (for video frames) the eyes
        are detected over the whole pyramid and the other keypoints only where a pair of eye
        candidates, or a probable eye without a partner, places them
        (:mod:`cvfs.keypoints._topdown`), and everywhere when no eye candidate places a face:
        about twice as fast on a 640x480 frame with a face, with the same peaks inside those
        regions, but it misses faces whose eyes are weak (on Caltech WebFaces, whose faces are
        small, it finds about a tenth fewer).
        With ``refine``, each keypoint of a face is then rescanned at the face's own scale
        (:func:`cvfs.keypoints.refine.refine_face_keypoints`; the keypoints of a face share
        one small level per rescan scale).

        Parameters
        ----------
        image : ndarray of shape (H, W, 3)
            RGB, uint8/uint16 or float in [0, 1].
        threshold : float, optional
            Minimum face probability in [0, 1] (default: the face model's, chosen so that
            images without faces give none).
        max_scale : float, optional
            Largest pyramid scale (default: the detector's).
        face_model : FaceModel or str or Path, optional
            Default: the shipped ``faces.h5`` (:func:`cvfs.keypoints.faces.load_face_model`).
        n_jobs, max_memory :
            As :meth:`detect`.
        max_faces : int, default=50
        top_down : bool, default=False
            Scan the keypoints other than the eyes only around eye pairs and unpaired probable
            eyes, or everywhere when there is none (else always everywhere).
        refine : bool, default=True
            Move each keypoint of a found face to the sub-pixel maximum of a dense rescan of
            its neighbourhood on levels that bring the face to the detectors' training size.

        Returns
        -------
        faces : list of cvfs.keypoints.faces.Face
            ``score``, ``box (x0, y0, x1, y1)``, ``keypoints {name: (x, y, probability)}``
            (NaN where a keypoint is not found), sorted by decreasing score.

        Raises
        ------
        TypeError, ValueError
            As :meth:`detect`; ValueError if ``threshold`` is not in [0, 1] or the face model
            uses a keypoint this detector does not find.
        """
        from cvfs.keypoints.faces import FaceModel, assemble_faces, load_face_model

        if face_model is None:
            if getattr(self, "_face_model", None) is None:
                self._face_model = load_face_model()
            face_model = self._face_model
        elif not isinstance(face_model, FaceModel):
            face_model = load_face_model(face_model)
        missing = [k for k in face_model.shape.names if k not in self.classifiers]
        if missing:
            raise ValueError(f"the face model needs detectors of {missing}; this detector "
                             f"finds {self.keypoints}")
        if threshold is not None and not (isinstance(threshold, (int, float, np.number))
                                          and not isinstance(threshold, bool)
                                          and 0.0 <= float(threshold) <= 1.0):
            raise ValueError(f"threshold must be a face probability in [0, 1]; got "
                             f"{threshold!r}")
        found, scale = self._face_detections(image, face_model, max_scale=max_scale,
                                             n_jobs=n_jobs, max_memory=max_memory,
                                             top_down=top_down)
        faces = assemble_faces(found, face_model, scales=scale, threshold=threshold,
                               max_faces=max_faces)
        if refine:
            from cvfs.keypoints.refine import refine_face_keypoints

            faces = refine_face_keypoints(self, image, faces,
                                          fill_missing=face_model.probability)
        return faces

    def _face_detections(self, image, face_model, *, max_scale, n_jobs, max_memory,
                         top_down):
        """Detections and scales of the face model's keypoints for :meth:`detect_faces`."""
        kw = dict(threshold=-math.inf, max_scale=max_scale, min_scale=0.0, nms_radius=None,
                  refine=True, cascade=True, n_jobs=n_jobs, merge_radius=None, pairs=None,
                  max_memory=max_memory)
        names = list(face_model.shape.names)
        if not top_down:
            return self._detect(image, names=names, **kw)
        image = as_float_rgb(image, min_size=self.pool.window)  # checked once, reused
        eyes = [k for k in names if k in EYES]
        others = [k for k in names if k not in EYES]
        # the eye scan keeps every level's maps for the second scan when they fit the budget
        keep = [] if n_jobs == 1 and self._maps_fit(image, max_scale, others,
                                                     max_memory) else None
        found, scale = self._detect(image, names=eyes, keep=keep, **kw)
        c, t = eye_pairs(found, scale, face_model)
        c1, t1 = single_eye_hypotheses(found, scale, face_model, c, t)
        c, t = np.concatenate([c, c1]), np.concatenate([t, t1])
        if len(c) == 0:  # no eye candidate places a face: the other keypoints everywhere
            more, more_scale = self._detect(image, names=others, **kw)
            found.update(more)
            scale.update(more_scale)
            return found, scale
        more, more_scale = self._detect_in_regions(image, others, face_model, c, t,
                                                   max_scale=max_scale, max_memory=max_memory,
                                                   caches=keep)
        found.update(more)
        scale.update(more_scale)
        return found, scale

    def _maps_fit(self, image, max_scale, names, max_memory):
        """Whether the level images, integral images and HOG maps of every pyramid level and
        the scan of keypoints ``names`` on the largest level fit ``max_memory`` together."""
        rgb_shape = np.shape(image)[:2]
        _, scales = pyramid_scales(rgb_shape, scales_per_octave=self.scales_per_octave,
                                   min_size=self.pool.window,
                                   max_scale=self.max_scale if max_scale is None else max_scale)
        px = float(rgb_shape[0]) * float(rgb_shape[1])
        maps = (12 + 24 + 135) * px * float((scales ** 2).sum())
        per_pixel, fixed = band_bytes([self.classifiers[k] for k in names] or
                                      list(self.classifiers.values())[:1], True, True, True)
        scan = per_pixel * px * float(scales.max() ** 2) + fixed if scales.size else 0.0
        return image_bytes(rgb_shape) + maps + scan <= check_max_memory(max_memory)

    def _detect_in_regions(self, image, names, face_model, c, t, *, max_scale, max_memory,
                           caches=None):
        """Detections (``threshold=-inf``, refined) of keypoints ``names`` inside the regions
        the face hypotheses ``(c, t)`` give them (:func:`cvfs.keypoints._topdown.level_regions`)
        on each level: on the levels' ``caches`` (:class:`LevelCache` per level, from the eye
        scan) when given, else on the pyramid built again one level at a time, in bands of the
        rows holding a region (split further when they exceed ``max_memory``)."""
        rgb = as_float_rgb(image, min_size=self.pool.window)
        max_memory = check_max_memory(max_memory)
        if caches is not None and any(cc is None for cc in caches):
            caches = None
        levels, scales, _ = self._pyramid(rgb, max_scale, 0.0)
        if caches is not None:
            levels = iter([cc.level for cc in caches])
        plans = {k: self._scan_plan([k]) for k in names}
        models = [self.classifiers[k] for k in names]
        feats = np.concatenate([m.features for m in models]) if models else np.zeros(0, int)
        per_pixel, fixed = band_bytes(models or [self.classifiers[self.keypoints[0]]],
                                      bool((feats >= N_HOG).any()), bool((feats < N_HOG).any()),
                                      True)
        avail = max_memory - image_bytes(rgb.shape)

        def level_peaks():
            if not names or len(c) == 0:
                return
            for scale in scales:
                level = next(levels)
                h, w = level.shape
                grid = (h - WINDOW + 1, w - WINDOW + 1)
                regions, scan = level_regions(level, grid, names, face_model, c, t,
                                              scales_per_octave=self.scales_per_octave,
                                              pad=self.nms_radius)
                if caches is not None:  # the level's maps are all there
                    cache = caches.pop(0)
                    out = []
                    for k in names:
                        out.append(None if scan[k] is None else _region_peaks(
                            plans[k], cache, scan[k], regions[k], (0, grid[0]), 0))
                    cache.clear()
                    yield scale, out
                    continue
                budget = avail - level_bytes(rgb.shape, scale, False)
                # separate bands for row runs further apart than a window: their maps overlap
                for r0, r1 in band_rows(scan, WINDOW):
                    parts, _ = split_rows((r1 - r0 + WINDOW - 1, w), budget, per_pixel, fixed)
                    for p in parts:
                        s, e = r0 + p.s, r0 + p.e
                        band = level_bands(level, [(s, e + WINDOW - 1)])[0]
                        out = []
                        for k in names:
                            out.append(None if scan[k] is None else _region_peaks(
                                plans[k], band, scan[k][s:e], regions[k][s:e],
                                (r0 + p.k0 - s, r0 + p.k1 - s), s))
                        band.clear()
                        yield scale, out

        return _merge_levels(level_peaks(), names, self.nms_radius, self.merge_radius, True)

    def _pyramid(self, rgb, max_scale, min_scale):
        """``(levels, scales, blurred)`` of the pyramid scanned (see :func:`_pyramid_peaks`)."""
        spo = self.scales_per_octave
        kw = dict(scales_per_octave=spo, min_size=self.pool.window,
                  max_scale=self.max_scale if max_scale is None else max_scale)
        indices, scales = pyramid_scales(rgb.shape, **kw)
        n_levels = int((scales >= min_scale).sum())
        scales, indices = scales[:n_levels], indices[:n_levels]
        levels = iter_pyramid(rgb, max_levels=n_levels, **kw) if n_levels else iter(())
        return levels, scales, (indices < 0) & (indices % spo != 0)

    def _detect(self, image, *, threshold, max_scale, min_scale, nms_radius, refine, cascade,
                n_jobs, merge_radius, pairs, max_memory, names=None, keep=None):
        """:meth:`detect`, and per keypoint the pyramid scale of each detection (the
        score-weighted geometric mean over the peaks merged into it), ndarray of shape (n,).
        ``names``: the keypoints detected (default: all); ``keep``: see
        :func:`_pyramid_peaks`."""
        rgb = as_float_rgb(image, min_size=self.pool.window)
        names = self.keypoints if names is None else list(names)
        thr = self._thresholds(threshold)
        n_jobs = _check_n_jobs(n_jobs)
        max_memory = check_max_memory(max_memory)
        pyramid = self._pyramid(rgb, max_scale, min_scale)
        radius = self.nms_radius if nms_radius is None else float(nms_radius)
        mrad = self.merge_radius if merge_radius is None else float(merge_radius)
        pair, out_thr = self._pair_model(pairs), thr
        if pair is not None:  # partners scoring below the model's floor never change a score
            thr = {k: min(v, pair.floor) if k in (pair.left, pair.right) else v
                   for k, v in thr.items()}
        models = [self.classifiers[k] for k in names]
        plan = self._scan_plan(names) if cascade else None
        peaks = _pyramid_peaks(self.pool, plan, models, rgb, pyramid,
                               [thr[k] for k in names], refine, n_jobs, max_memory, keep)
        out, scale = _merge_levels(peaks, names, radius, mrad, refine)
        if pair is not None:
            new = pair_rescore(*(np.column_stack([out[n], scale[n]])
                                 for n in (pair.left, pair.right)), pair)
            for n, s in zip((pair.left, pair.right), new, strict=True):
                keep = s >= out_thr[n]
                d, sc = np.column_stack([out[n][:, :2], s])[keep], scale[n][keep]
                order = np.argsort(-d[:, 2], kind="stable")
                out[n], scale[n] = d[order], sc[order]
        return out, scale

    def _scan_plan(self, names):
        """The :class:`ScanPlan` of the soft cascades of keypoints ``names``, built once per
        detector (again if a classifier of ``self.classifiers`` is replaced)."""
        plans = self.__dict__.setdefault("_scan_plans", {})
        models = [self.classifiers[k] for k in names]
        cached = plans.get(tuple(names))
        if cached is None or any(a is not b for a, b in zip(cached[0], models, strict=True)):
            cached = plans[tuple(names)] = (models, ScanPlan(self.pool, models))
        return cached[1]

    def _pair_model(self, pairs):
        if pairs is None or pairs is False:
            return None
        model = PairModel() if pairs is True else pairs
        if not isinstance(model, PairModel):
            raise TypeError("pairs must be a bool, None or a PairModel; got "
                            f"{type(pairs).__name__}")
        missing = [n for n in (model.left, model.right) if n not in self.classifiers]
        if missing:
            raise ValueError(f"pairs needs detectors of {model.left!r} and {model.right!r}; "
                             f"this detector lacks {missing} (it finds {self.keypoints})")
        return model

    def _thresholds(self, threshold):
        if threshold is None:
            return dict(self.thresholds)
        if isinstance(threshold, dict):
            return {k: float(threshold.get(k, self.thresholds[k])) for k in self.keypoints}
        if not math.isfinite(float(threshold)) and float(threshold) != -math.inf:
            raise ValueError(f"threshold must be a number or -inf; got {threshold!r}")
        return {k: float(threshold) for k in self.keypoints}

    def save(self, path):
        """Write the detector to an HDF5 model file (atomic; see :func:`cvfs.io.save_model`).

        Returns
        -------
        path : Path
        """
        arrays = {}
        for i, m in enumerate(self.classifiers.values()):
            arrays.update(m.to_arrays(f"clf{i}"))
        settings = {
            "keypoints": self.keypoints,
            "pool": self.pool_params,
            "thresholds": self.thresholds,
            "scales_per_octave": self.scales_per_octave,
            "max_scale": self.max_scale,
            "nms_radius": self.nms_radius,
            "merge_radius": self.merge_radius,
            "window": int(self.pool.window),
        }
        return save_model(path, KIND, arrays, params=self.info.get("params", {}),
                          settings=settings, training=self.info.get("training", {}),
                          random_state=self.info.get("random_state"))

    @classmethod
    def from_saved(cls, model):
        """Build from a :class:`cvfs.io.SavedModel` of kind ``"keypoint-detector"``.

        Every setting, array name, shape, feature index and value range is checked first
        (:func:`_check_saved`), so the scan kernels, which do not check bounds, only ever see
        indices inside the feature pool.

        Raises
        ------
        ValueError
            Naming the file and the failed check.
        """
        s, pool = _check_saved(model)
        where = model.path or "keypoint model"
        try:
            clfs = {name: AdditiveModel.from_arrays(model.arrays, f"clf{i}")
                    for i, name in enumerate(s["keypoints"])}
            info = {"params": model.params, "training": model.training,
                    "random_state": model.meta.get("random_state"), "meta": model.meta}
            return cls(clfs, pool, thresholds=s["thresholds"],
                       scales_per_octave=s.get("scales_per_octave", 4),
                       max_scale=s.get("max_scale", 2.0), nms_radius=s.get("nms_radius", 6.0),
                       merge_radius=s.get("merge_radius", 3.0), info=info)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from exc


_CLF_ARRAYS = ("features", "lo", "scale", "table", "intercept", "step")
_CLF_OPTIONAL = ("cascade_ends", "cascade_thresholds")
_BOUND = 1e100  # |lo| and scale of a stored classifier: (x - lo) * scale stays finite


def _real(value, lo, hi, *, strict_lo=False):
    """True if ``value`` is a real number (not bool) in [lo, hi] ((lo, hi] with strict_lo)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and (value > lo if strict_lo else value >= lo)
            and value <= hi)


def _check_classifier(arrays, prefix, name, n_features, fail):
    """Check the arrays ``<prefix>/...`` of one keypoint classifier (an AdditiveModel of
    :meth:`~cvfs.keypoints._additive.AdditiveModel.to_arrays`); ``fail(message)`` raises."""
    a = {f: arrays.get(f"{prefix}/{f}") for f in _CLF_ARRAYS + _CLF_OPTIONAL}
    miss = [f"{prefix}/{f}" for f in _CLF_ARRAYS if a[f] is None]
    if miss:
        fail(f"the classifier of {name} lacks the arrays {miss}")
    feats, table = a["features"], a["table"]
    if feats.ndim != 1 or feats.dtype.kind not in "iu" or feats.size == 0:
        fail(f"{prefix}/features must be a non-empty 1-D integer array; got {feats.dtype} "
             f"{feats.shape}")
    if feats.min() < 0 or feats.max() >= n_features:
        fail(f"{prefix}/features holds indices outside the feature pool [0, {n_features})")
    k = feats.size
    for f in ("lo", "scale"):
        if a[f].shape != (k,) or a[f].dtype.kind != "f":
            fail(f"{prefix}/{f} must be float of shape ({k},); got {a[f].dtype} {a[f].shape}")
    if np.abs(a["lo"]).max() > _BOUND or a["scale"].min() < 0 or a["scale"].max() > _BOUND:
        fail(f"{prefix}: lo must lie in [-{_BOUND:g}, {_BOUND:g}] and scale in "
             f"[0, {_BOUND:g}]")
    if table.ndim != 2 or table.dtype.kind != "f" or table.shape[0] != k \
            or not 1 <= table.shape[1] <= 4096:
        fail(f"{prefix}/table must be float of shape ({k}, T), 1 <= T <= 4096; got "
             f"{table.dtype} {table.shape}")
    for f in ("intercept", "step"):
        if a[f].shape != (1,):
            fail(f"{prefix}/{f} must have shape (1,); got {a[f].shape}")
    if a["step"].dtype.kind not in "biu" or a["step"][0] not in (0, 1):
        fail(f"{prefix}/step must be a bool; got {a['step']!r}")
    ends, cthr = a["cascade_ends"], a["cascade_thresholds"]
    if (ends is None) != (cthr is None):
        fail(f"{prefix} needs both cascade_ends and cascade_thresholds, or neither")
    if ends is not None and (ends.ndim != 1 or ends.dtype.kind not in "iu"
                             or cthr.shape != ends.shape or cthr.dtype.kind != "f"):
        fail(f"{prefix}/cascade_ends must be 1-D integers and cascade_thresholds floats of "
             f"the same shape; got {ends.dtype} {ends.shape} and {cthr.dtype} {cthr.shape}")


def _check_saved(model):
    """Check a keypoint-detector model's settings and arrays; returns (settings, pool params).

    Raises
    ------
    ValueError
        Naming the file and the failed check.
    """
    where = model.path or "keypoint model"

    def fail(msg):
        raise ValueError(f"{where}: {msg}")

    s = model.settings
    for key in ("keypoints", "pool", "thresholds"):
        if key not in s:
            fail(f"the keypoint model file lacks the setting {key!r}")
    names = s["keypoints"]
    if not isinstance(names, list) or not names or len(set(map(str, names))) != len(names) \
            or any(not isinstance(n, str) or n not in KEYPOINTS for n in names):
        fail(f"setting 'keypoints' must list distinct names from {list(KEYPOINTS)}; got "
             f"{names!r}")
    pool = s["pool"]
    if not isinstance(pool, dict) or not set(pool) <= {"haar_per_channel", "hog_border"}:
        fail(f"setting 'pool' must hold haar_per_channel and hog_border; got {pool!r}")
    try:
        n_features = FeaturePool(**pool).n_features
    except (TypeError, ValueError) as exc:
        fail(f"setting 'pool' is not a valid feature pool ({exc})")
    thr = s["thresholds"]
    if not isinstance(thr, dict) or not set(thr) <= set(names) or not all(
            _real(v, -_BOUND, _BOUND) for v in thr.values()):
        fail(f"setting 'thresholds' must map the file's keypoints to finite numbers; got {thr!r}")
    checks = {"scales_per_octave": (1, 32, False), "max_scale": (0.0, 8.0, True),
              "nms_radius": (0.0, 1e3, True), "merge_radius": (0.0, 1e3, False)}
    for key, (lo, hi, strict) in checks.items():
        if key in s and not (_real(s[key], lo, hi, strict_lo=strict) and (
                key != "scales_per_octave" or isinstance(s[key], int))):
            fail(f"setting {key!r} must be a number in {'(' if strict else '['}{lo:g}, {hi:g}]"
                 f"{' (an int)' if key == 'scales_per_octave' else ''}; got {s[key]!r}")
    if "window" in s and s["window"] != FeaturePool.window:
        fail(f"setting 'window' is {s['window']!r}; this cvfs scans {FeaturePool.window}-pixel "
             "windows")
    allowed = {f"clf{i}/{f}" for i in range(len(names)) for f in _CLF_ARRAYS + _CLF_OPTIONAL}
    extra = sorted(set(model.arrays) - allowed)
    if extra:
        fail(f"unexpected arrays {extra[:5]}; a detector of {len(names)} keypoints holds "
             f"clf0..clf{len(names) - 1}/{{{', '.join(_CLF_ARRAYS + _CLF_OPTIONAL)}}}")
    for i, name in enumerate(names):
        _check_classifier(model.arrays, f"clf{i}", name, n_features, fail)
    return s, pool


def load_detector(path=None):
    """Load a keypoint detector.

    Parameters
    ----------
    path : str or Path, optional
        A model file written by :meth:`KeypointDetector.save`. Default: every
        ``keypoints_*.h5`` in :func:`cvfs.datasets.models_dir` (the shipped models), merged into
        one detector (they must share the feature pool; a keypoint in several files comes from
        the first file in name order).

    Returns
    -------
    detector : KeypointDetector

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist, or no shipped model is found.
    ValueError
        If a file is not a keypoint-detector model, fails a check of :func:`cvfs.io.load_model`
        (checksums, layout) or of the detector (settings, array names, shapes, feature indices
        inside the pool, finite values), or shipped models use different pools.
    """
    if path is not None:
        return KeypointDetector.from_saved(load_model(path, kind=KIND))
    files = sorted(Path(models_dir()).glob("keypoints_*.h5"))
    if not files:
        raise FileNotFoundError(
            f"no shipped keypoint models (keypoints_*.h5) in {models_dir()}; train one with "
            "`cvfs keypoints train` or pass a path"
        )
    dets = [KeypointDetector.from_saved(load_model(f, kind=KIND)) for f in files]
    if len(dets) == 1:
        return dets[0]
    first = dets[0]
    clfs, thr = {}, {}
    for f, d in zip(files, dets, strict=True):
        if d.pool_params != first.pool_params:
            raise ValueError(f"{f} uses feature pool {d.pool_params}, {files[0]} uses "
                             f"{first.pool_params}: shipped models must share one pool")
        for k in d.keypoints:
            if k not in clfs:
                clfs[k] = d.classifiers[k]
                thr[k] = d.thresholds[k]
    return KeypointDetector(clfs, first.pool_params, thresholds=thr,
                            scales_per_octave=first.scales_per_octave,
                            max_scale=first.max_scale, nms_radius=first.nms_radius,
                            merge_radius=first.merge_radius, info=first.info)
