"""Scanning pyramid levels with keypoint classifiers: window scores, bands within a memory
budget, peaks per band or region.

A level is scored whole or in bands of rows (:mod:`cvfs.keypoints._tiling` sizes them), by the
classifiers' soft cascades (:class:`cvfs.keypoints._scan.ScanPlan`) or by every feature
(:class:`FullScorer`); :func:`pyramid_peaks` runs the bands of every level, in threads when
asked, and :func:`region_peaks` scores only the windows of a region (the top-down scan).
"""

import logging
import math
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from cvfs.keypoints._coarse import coarse_to_fine_scores
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints._tiling import (
    BandPlan,
    band_budget,
    band_bytes,
    image_bytes,
    level_bytes,
    split_rows,
)
from cvfs.keypoints.peaks import grid_peaks, parabolic_offsets
from cvfs.vision import HALF, N_HOG, WINDOW, LevelCache, level_bands, valid_centres

__all__ = ["CHUNK", "EVERY_WINDOW", "FullScorer", "UpsampledScan", "band_peaks", "cascade_hardness",
           "check_centres", "check_n_jobs", "level_scores", "pyramid_peaks", "region_peaks"]

log = logging.getLogger(__name__)

CHUNK = 16384  # windows per feature-computation chunk of the full scan


class UpsampledScan(NamedTuple):
    """How the upsampled pyramid levels (index > 0) are scanned.

    ``stride``: only the lattice of every ``stride``-th window row and column is scored
    (1: every window). ``margin``: with ``stride > 1``, None keeps the peaks of the lattice's
    grid; a float >= 0 makes the scan coarse-to-fine (:mod:`cvfs.keypoints._coarse`): the
    lattice windows passing the soft cascades with thresholds lowered by ``margin`` have their
    neighbours scored, and the peaks are those of every window's grid around them.
    """

    stride: int = 1
    margin: float | None = None


EVERY_WINDOW = UpsampledScan()  # the upsampled levels scanned like the others


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
    centres = check_centres(cache, centres)
    plan = plan or ScanPlan(pool, [model])
    _, depth, partial = plan.scores(cache, centres - HALF, reached=True)
    return depth[0] + (0.5 + np.arctan(partial[0]) / np.pi)


def check_centres(cache, centres):
    """``centres`` as int64 (n, 2), every window inside the level (else ValueError)."""
    centres = np.asarray(centres, dtype=np.int64).reshape(-1, 2)
    ok = valid_centres(cache.shape, centres)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"centres: window centred at {tuple(centres[i].tolist())} leaves the "
                         f"level of shape {tuple(cache.shape)}")
    return centres


def level_scores(pool, cache, centres, models, cascade, plan=None):
    """(n_models, n) scores of windows centred at ``centres``: the soft-cascade scan (``plan``,
    built from ``models`` when not given), or every feature of every window (``cascade=False``,
    computed by the pool in chunks)."""
    centres = check_centres(cache, centres)
    if cascade:
        return (plan or ScanPlan(pool, models)).scores(cache, centres - HALF)
    out = np.empty((len(models), len(centres)))
    for q, m in enumerate(models):
        for c0 in range(0, len(centres), CHUNK):
            X = pool.compute(cache, centres[c0:c0 + CHUNK], columns=m.features)
            out[q, c0:c0 + CHUNK] = m.decision_function(X)
    return out


class FullScorer:
    """Every feature of windows of one classifier, scored without the cascade: the pool's
    :class:`ColumnPlan` built once, so scoring a few windows of many small levels
    (:mod:`cvfs.keypoints.refine`) costs little beyond the features themselves.
    Scores equal ``model.decision_function(pool.compute(cache, centres, model.features))``."""

    def __init__(self, pool, model):
        self.model = model
        self.columns = pool.column_plan(model.features)

    def __call__(self, cache, centres):
        if len(centres) == 0:
            return np.zeros(0)
        tl = np.ascontiguousarray(centres - HALF, dtype=np.int64)
        return self.model.decision_function(self.columns(cache, tl))


def check_n_jobs(n_jobs):
    """Number of worker threads for ``n_jobs`` (an int >= 1, or -1 = every available core)."""
    if isinstance(n_jobs, (int, np.integer)) and not isinstance(n_jobs, bool) and (
            n_jobs >= 1 or n_jobs == -1):
        return len(os.sched_getaffinity(0)) if n_jobs == -1 else int(n_jobs)
    raise ValueError(f"n_jobs must be a positive int or -1 (every core); got {n_jobs!r}")


def band_peaks(pool, plan, models, band, rows, thr, refine, clear=True,
               upsampled=EVERY_WINDOW):
    """Score peaks of the windows of one band of a level: per model ``None`` or an ``(n, 3)``
    array of ``x, y, score`` in original-image pixels, in row-major order of the peaks.

    ``upsampled`` (:class:`UpsampledScan`) with ``stride > 1``, on an upsampled level (index >
    0): only the windows whose top-left row and column on the level are multiples of
    ``stride`` are scored, the peaks are those of that coarser grid and their sub-pixel offsets
    are scaled by ``stride``; with a ``margin`` (and a ``plan``) the scan is coarse-to-fine
    (:func:`cvfs.keypoints._coarse.coarse_to_fine_scores`): the peaks are those of every
    window's grid at the candidate windows. A band then needs ``stride`` rows of scores beyond
    its own rows on either side (:func:`pyramid_peaks` gives them), for the peaks of its own
    rows to be those of the whole level's scan.

    ``band`` is a :class:`LevelCache` (the whole level, ``rows.s == 0``) or a
    :class:`cvfs.vision.LevelBand` starting at level row ``rows.s``; windows of top-left rows
    ``rows.s .. rows.e - 1`` are scored and peaks kept in rows ``rows.k0 .. rows.k1 - 1``, whose
    neighbour rows are in the band, so they are the peaks of the whole level's score grid.
    ``plan``: the :class:`ScanPlan` of the soft cascade, or None for the full scan. The band's
    maps are dropped before returning (kept with ``clear=False``).
    """
    level = band.level
    stride, margin = upsampled
    st = int(stride) if stride > 1 and level.index > 0 else 1
    gw = level.shape[1] - 2 * HALF + 1
    nr = rows.e - rows.s
    r0 = (-rows.s) % st  # the first of the level's lattice rows in the band
    fine = st > 1 and margin is not None and plan is not None
    try:
        if fine:
            grids, candidate, _ = coarse_to_fine_scores(plan, band, nr, gw, r0, st,
                                                        float(margin))
            rr = np.arange(nr, dtype=np.int64)
            st = 1
        else:
            rr = np.arange(r0, nr, st, dtype=np.int64)
            cc = np.arange(0, gw, st, dtype=np.int64)
            tl = np.empty((rr.size * cc.size, 2), dtype=np.int64)
            tl[:, 0] = np.repeat(rr, cc.size)
            tl[:, 1] = np.tile(cc, rr.size)
            if plan is not None:
                scores = plan.scores(band, tl)
            else:
                scores = level_scores(pool, band, tl + HALF, models, False)
            grids = scores.reshape(-1, rr.size, cc.size)
            del tl, scores
    finally:
        if clear:
            band.clear()
    out = []
    for grid, t in zip(grids, thr, strict=True):
        r, c = grid_peaks(grid, t)
        own = (rr[r] >= rows.k0 - rows.s) & (rr[r] < rows.k1 - rows.s)
        if fine:
            own &= candidate[r, c]
        r, c = r[own], c[own]
        if r.size == 0:
            out.append(None)
            continue
        xy = np.column_stack([st * c, rr[r] + rows.s]).astype(np.float64) + HALF
        if refine:
            xy += st * parabolic_offsets(grid, r, c)
        out.append(np.column_stack([level.to_original(xy), grid[r, c]]))
    return out


def pyramid_peaks(pool, plan, models, rgb, pyramid, thr, refine, n_jobs, max_memory,
                   keep=None, upsampled=EVERY_WINDOW):
    """``(scale, peaks)`` of every band of every level, in order (see :func:`band_peaks`).

    ``pyramid = (levels, scales, blurred)``: an iterator of the levels (built when requested)
    and, per level, its nominal scale and whether building it blurs an octave base. The levels
    are scanned one after another within ``max_memory`` bytes (the memory model of
    :mod:`cvfs.keypoints._tiling`): a level that does not fit whole is scanned in bands of rows,
    each of at most ``1 / n_jobs`` of the budget left by the image and the level, or of
    :func:`cvfs.keypoints._tiling.band_floor` when that is less (then scanned one at a time,
    with a warning when the call exceeds ``max_memory``). With
    ``n_jobs > 1`` that many threads scan bands (of one or several levels; the numba kernels
    release the GIL), and a level or band starts only when the memory of those in flight
    leaves room for it. The peaks do not depend on the bands or on ``n_jobs``.

    ``plan``: the :class:`ScanPlan` of ``models``' soft cascades, or None for the full scan.
    ``keep``: a list that receives each level's :class:`LevelCache` with its maps (the caller
    checks that they fit the budget; ``n_jobs`` must be 1). ``upsampled``: see
    :func:`band_peaks`; with ``stride > 1`` the bands of an upsampled level score ``stride``
    rows beyond their own rows on either side (instead of one), so the peaks do not depend on
    the bands either.
    """
    feats = np.concatenate([m.features for m in models])
    per_pixel, fixed = band_bytes(models, bool((feats >= N_HOG).any()),
                                  bool((feats < N_HOG).any()), plan is not None)
    avail = max_memory - image_bytes(rgb.shape)
    levels, scales, blurred = pyramid
    warned = False
    stride = upsampled.stride

    def split(level, lv_bytes):
        nonlocal warned
        budget = band_budget(avail, lv_bytes, n_jobs, max_memory)
        parts, _ = split_rows(level.shape, budget, per_pixel, fixed)
        if stride > 1 and level.index > 0 and len(parts) > 1:  # lattice neighbours of own rows
            gh = parts[-1].e
            parts = [BandPlan(max(p.k0 - stride, 0), min(p.k1 + stride, gh), p.k0, p.k1)
                     for p in parts]
        rows = max(p.e - p.s for p in parts) + WINDOW - 1
        b_bytes = per_pixel * rows * level.shape[1] + fixed
        in_flight = max(1, min(n_jobs, int((avail - lv_bytes) // b_bytes)))  # as scheduled
        over = image_bytes(rgb.shape) + lv_bytes + in_flight * b_bytes - max_memory
        if over > 0 and not warned:
            log.warning("max_memory=%d bytes is too small for an image of shape %s at pyramid "
                        "scale %.3g: the scan takes about %d MiB more (lower max_scale or raise "
                        "max_memory)", max_memory, tuple(rgb.shape[:2]), level.scale,
                        over / 2**20)
            warned = True
        if len(parts) == 1:
            return [(LevelCache(level), parts[0])], b_bytes
        bands = level_bands(level, [p.pixel_rows for p in parts])
        return list(zip(bands, parts, strict=True)), b_bytes

    if n_jobs == 1:
        for scale in scales:
            level = next(levels)
            for band, rows in split(level, level_bytes(rgb.shape, scale, False))[0]:
                yield scale, band_peaks(pool, plan, models, band, rows, thr, refine,
                                         clear=keep is None, upsampled=upsampled)
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
                running.append((ex.submit(band_peaks, pool, plan, models, band, rows, thr,
                                          refine, True, upsampled), scale, rel))
                held += b_bytes
            del level, parts, band
        while running:
            fut, sc, _ = running.popleft()
            yield sc, fut.result()


def region_peaks(plan, band, scan, region, own, row0):
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
    r, c = grid_peaks(grid, -math.inf)
    keep = region[r + ra, c + ca] & (r + ra >= own[0]) & (r + ra < own[1])
    r, c = r[keep], c[keep]
    if r.size == 0:
        return None
    xy = np.column_stack([c + ca, r + ra + row0]).astype(np.float64) + HALF
    xy += parabolic_offsets(grid, r, c)
    return np.column_stack([band.level.to_original(xy), grid[r, c]])
