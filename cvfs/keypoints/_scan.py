"""Soft-cascade scan of one pyramid level by several additive classifiers at once.

The kernel visits every window once and runs each classifier's features in the classifier's
order, adding ``g_j(x_j)`` to the partial score and stopping as soon as the partial score falls
below the threshold after that feature (Bourdev and Brandt's soft cascade: a rejection threshold
after every feature). Features are computed only when reached:

- a Haar column is a weighted sum of at most 9 integral-image corners (as
  :class:`cvfs.vision.FeaturePool` computes it, bitwise);
- a HOG column reads one of the window's 27 (channel, block) slots; a slot is computed once per
  window, when a classifier first needs it, and shared by all classifiers of the window: from the
  pixels (:func:`cvfs.vision.hog_direct.block_from_pixels`) while few blocks of the level have been
  needed, from the level's gradient maps (:attr:`cvfs.vision.LevelCache.gradients`) once more
  blocks were needed than building the maps costs.

Feature values are rounded to float32 before the classifier reads them, as
:meth:`cvfs.vision.FeaturePool.compute` returns them, so a window's score equals
``model.decision_function(pool.compute(...))`` (bitwise for Haar columns; HOG columns from the
pixels may differ from the maps' by one float32 ulp).

References
----------
Bourdev and Brandt, "Robust object detection via soft cascade", CVPR 2005.
"""

import math

import numpy as np
from numba import njit

from cvfs.vision.haar import MAX_TERMS, haar_terms
from cvfs.vision.hog import N_HOG, N_ORIENT
from cvfs.vision.hog_direct import (
    N_BLOCK_SLOTS,
    block_from_gradients,
    block_from_pixels,
    hog_slots,
)

__all__ = ["ScanPlan"]

_CHUNK = 65536  # windows per kernel call (between calls the HOG source may switch to maps)
_GROUP = 1024  # windows scanned together, feature by feature
_MIN_RUN = 64  # shortest run of adjacent windows scanned as one group
_MAP_COST = 256  # level pixels whose gradient maps cost as much as one block from the pixels


@njit(cache=True)
def _pl(x, lo, scale, table, nb, step, j):
    """g_j(x): the piecewise function of :class:`AdditiveModel` (same arithmetic)."""
    u = (x - lo[j]) * scale[j]
    if u <= 0.0:
        u = 0.0
    elif u >= nb:
        u = nb
    b = int(u)
    if b >= nb:
        b = nb - 1
    if step:
        return table[j, b]
    a = u - b
    return table[j, b] * (1.0 - a) + table[j, b + 1] * a


@njit(cache=True)
def _compute_block(level, grad, r0, c0, s, cell_buf, out32):
    """Block slot ``s`` of the window at (r0, c0) into ``out32``."""
    rgb, _, _, window_border, use_maps = level
    if use_maps:
        block_from_gradients(grad, s, r0, c0, window_border, cell_buf, out32)
    else:
        block_from_pixels(rgb, s, r0, c0, window_border, cell_buf, out32)


@njit(cache=True)
def _scan_kernel(level, grad, top_left, feats, pl, casc, out):
    """Scores ``out[q, i]`` of window ``i`` by classifier ``q`` (-inf once rejected).

    ``level = (rgb, flat, w1, window_border, use_maps)`` with ``flat`` the raveled
    ``(3, H + 1, W + 1)`` integral image of rows of ``w1``; ``grad`` the level's gradient maps
    (:attr:`cvfs.vision.LevelCache.gradients`, read only when ``use_maps``);
    ``feats = (kind, off, weight, slot, within)``: Haar features (``kind == 0``) are 9 corner
    terms (unused ones with weight 0), HOG features (``kind == 1``) a block slot and a position in
    it; ``pl = (lo, scale, table, n_bins, step)`` the piecewise functions; ``casc = (thr, ptr,
    intercept)``: the threshold after each feature, classifier ``q`` owning features
    ``ptr[q]:ptr[q + 1]``.

    Windows go in groups of ``_GROUP``; within a group each classifier runs feature by feature
    over the list of windows still alive, which is compacted after every feature. Returns the
    number of HOG blocks computed.
    """
    _, flat, width, _, _ = level
    kind, off, weight, slot, within = feats
    lo, scale, table, n_bins, step = pl
    thr, ptr, intercept = casc
    n = top_left.shape[0]
    nq = ptr.shape[0] - 1
    base = np.empty(_GROUP, dtype=np.int64)
    alive = np.empty(_GROUP, dtype=np.int64)
    z = np.empty(_GROUP)
    val = np.empty(_GROUP)
    store = np.empty((_GROUP, N_BLOCK_SLOTS), dtype=np.int64)
    stamp = np.full((_GROUP, N_BLOCK_SLOTS), -1, dtype=np.int64)
    blocks = np.empty((256, 32))
    cell_buf = np.empty((2, 2, N_ORIENT))
    total = 0
    g0 = 0
    while g0 < n:
        # a run of horizontally adjacent windows (contiguous corners), else any _GROUP windows
        g1 = g0 + 1
        while (g1 < n and g1 - g0 < _GROUP and top_left[g1, 0] == top_left[g0, 0]
               and top_left[g1, 1] == top_left[g0, 1] + (g1 - g0)):
            g1 += 1
        contiguous = g1 - g0 >= _MIN_RUN
        if not contiguous:
            g1 = min(n, g0 + _GROUP)
        ng = g1 - g0
        for i in range(ng):
            base[i] = top_left[g0 + i, 0] * width + top_left[g0 + i, 1]
        n_blocks = 0
        for q in range(nq):
            na = ng
            for i in range(ng):
                alive[i] = i
                z[i] = intercept[q]
                out[q, g0 + i] = -math.inf
            for j in range(ptr[q], ptr[q + 1]):
                if na == 0:
                    break
                th = thr[j]
                nb = n_bins[j]
                st = step[j]
                kept = 0
                if kind[j] == 0:
                    o0, o1, o2, o3, o4, o5, o6, o7, o8 = off[j]
                    w0, w1, w2, w3, w4, w5, w6, w7, w8 = weight[j]
                    if contiguous and na == ng:  # every window: contiguous loads (SIMD)
                        p0 = base[0]
                        for a in range(na):
                            p = p0 + a
                            val[a] = (w0 * flat[p + o0] + w1 * flat[p + o1] + w2 * flat[p + o2]
                                      + w3 * flat[p + o3] + w4 * flat[p + o4]
                                      + w5 * flat[p + o5] + w6 * flat[p + o6]
                                      + w7 * flat[p + o7] + w8 * flat[p + o8])
                    else:
                        for a in range(na):
                            p = base[alive[a]]
                            val[a] = (w0 * flat[p + o0] + w1 * flat[p + o1] + w2 * flat[p + o2]
                                      + w3 * flat[p + o3] + w4 * flat[p + o4]
                                      + w5 * flat[p + o5] + w6 * flat[p + o6]
                                      + w7 * flat[p + o7] + w8 * flat[p + o8])
                    for a in range(na):
                        i = alive[a]
                        v = val[a]
                        zi = z[i] + _pl(np.float64(np.float32(v)), lo, scale, table, nb, st, j)
                        z[i] = zi
                        alive[kept] = i  # branch-free compaction
                        kept += zi >= th
                else:
                    s = slot[j]
                    for a in range(na):
                        i = alive[a]
                        if stamp[i, s] != g0:  # first use of this block by this window
                            if n_blocks == blocks.shape[0]:
                                bigger = np.empty((2 * n_blocks, 32))
                                bigger[:n_blocks] = blocks
                                blocks = bigger
                            _compute_block(level, grad, top_left[g0 + i, 0],
                                           top_left[g0 + i, 1], s, cell_buf, blocks[n_blocks])
                            store[i, s] = n_blocks
                            stamp[i, s] = g0
                            n_blocks += 1
                        v = blocks[store[i, s], within[j]]
                        zi = z[i] + _pl(np.float64(np.float32(v)), lo, scale, table, nb, st, j)
                        z[i] = zi
                        alive[kept] = i  # branch-free compaction
                        kept += zi >= th
                na = kept
            for a in range(na):
                out[q, g0 + alive[a]] = z[alive[a]]
        total += n_blocks
        g0 = g1
    return total


class ScanPlan:
    """Everything the scan kernel needs about a list of classifiers on one feature pool.

    Parameters
    ----------
    pool : cvfs.vision.FeaturePool
    models : list of cvfs.keypoints._additive.AdditiveModel
    cascade : bool
        Use the models' cascade thresholds (else every window gets its full score).
    """

    def __init__(self, pool, models, cascade=True):
        self.window_border = pool.hog_border == "window"
        feats = np.concatenate([m.features for m in models])
        self.ptr = np.concatenate([[0], np.cumsum([m.n_features for m in models])]).astype(
            np.int64)
        self.intercept = np.array([m.intercept for m in models], dtype=np.float64)
        n = feats.size
        self.kind = (feats < N_HOG).astype(np.int64)
        self.slot, self.within = hog_slots(np.where(feats < N_HOG, feats, 0))
        haar = feats[feats >= N_HOG] - N_HOG
        hpc = pool.haar_per_channel
        self.channel = np.zeros(n, dtype=np.int64)
        self.dy = np.zeros((n, MAX_TERMS), dtype=np.int64)
        self.dx = np.zeros_like(self.dy)
        self.weight = np.zeros((n, MAX_TERMS))
        if haar.size:
            sel = feats >= N_HOG
            self.channel[sel] = haar // hpc
            self.dy[sel], self.dx[sel], self.weight[sel], _ = haar_terms(pool.haar[haar % hpc])
        width = max(m.table.shape[1] for m in models)
        self.table = np.zeros((n, width))
        self.lo = np.concatenate([m.lo for m in models])
        self.scale = np.concatenate([m.scale for m in models])
        self.step = np.concatenate([np.full(m.n_features, m.kind == "step") for m in models])
        self.n_bins = np.empty(n, dtype=np.int64)
        self.thr = np.full(n, -np.inf)
        for q, m in enumerate(models):
            a = self.ptr[q]
            self.table[a:a + m.n_features, :m.table.shape[1]] = m.table
            self.n_bins[a:a + m.n_features] = m.table.shape[1] - (0 if m.kind == "step" else 1)
            if cascade and m.cascade_ends.size:
                self.thr[a + m.cascade_ends - 1] = m.cascade_thresholds

    def scores(self, cache, top_left):
        """Scores of windows of one level.

        Parameters
        ----------
        cache : cvfs.vision.LevelCache
        top_left : ndarray of shape (n, 2), int64
            Window top-left pixels (inside the level; not checked).

        Returns
        -------
        scores : ndarray of shape (n_models, n)
            Full score of each window that passes every threshold, -inf for the others.
        """
        n = len(top_left)
        out = np.empty((self.ptr.size - 1, n))
        if n == 0:
            return out
        integral = cache.integral
        _, h1, w1 = integral.shape
        off = (self.channel[:, None] * (h1 * w1) + self.dy * w1 + self.dx).astype(np.int64)
        flat = integral.reshape(-1)
        tl = np.ascontiguousarray(top_left, dtype=np.int64)
        budget = cache.shape[0] * cache.shape[1] // _MAP_COST
        done = 0
        for c0 in range(0, n, _CHUNK):
            use_maps = cache.has_hog or done > budget
            grad = cache.gradients if use_maps else _NO_MAPS
            done += _scan_kernel(
                (cache.image, flat, w1, self.window_border, use_maps), grad, tl[c0:c0 + _CHUNK],
                (self.kind, off, self.weight, self.slot, self.within),
                (self.lo, self.scale, self.table, self.n_bins, self.step),
                (self.thr, self.ptr, self.intercept), out[:, c0:c0 + _CHUNK])
        return out


_NO_MAPS = (np.zeros((1, 1, 1), dtype=np.int8), np.zeros((1, 1, 1), dtype=np.float32),
            np.zeros((1, 1, 1), dtype=np.float32), np.zeros((1, 1, 1), dtype=np.float32))
