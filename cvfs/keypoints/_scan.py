"""Soft-cascade scan of one pyramid level by several additive classifiers at once.

The kernel visits every window once and runs each classifier's features in the classifier's
order, adding ``g_j(x_j)`` to the partial score and stopping as soon as the partial score falls
below the threshold after that feature (Bourdev and Brandt's soft cascade: a rejection threshold
after every feature). Features are computed only when reached:

- a Haar column is a weighted sum of at most 9 integral-image corners, added in
  :func:`cvfs.vision.haar.haar_terms` order as :class:`cvfs.vision.FeaturePool` adds them. A
  classifier's leading Haar features, which most windows of a row still reach, are computed for a
  whole run of adjacent windows at once (contiguous loads, no per-window branching; a rejected
  window is only marked), the later ones for the surviving windows only;
- a HOG column reads one of the window's 27 (channel, block) slots; a slot is computed once per
  window, when a classifier first needs it, and shared by all classifiers of the window, from the
  level's cell-histogram maps (:attr:`cvfs.vision.LevelCache.hog`, built once per level when a
  classifier has HOG columns: cheaper than computing the blocks from the pixels on every level,
  measured in ``benchmarks/keypoints/keypoints_speed.py``), or with ``hog_blocks="pixels"``
  from the window's own pixels (:func:`cvfs.vision.hog_direct.block_from_pixels`), which skips
  the maps: cheaper when few windows reach a HOG feature, as in the shipped detectors, whose
  leading features are Haar columns (``benchmarks/keypoints/keypoints_faces_speed.py``).

Feature values are rounded to float32 before the classifier reads them, as
:meth:`cvfs.vision.FeaturePool.compute` returns them, so a window's score equals
``model.decision_function(pool.compute(...))`` bitwise (HOG with ``hog_border='window'``: the
blocks are those of :func:`cvfs.vision.hog_windows`; with ``'image'`` they may differ from the
pool's by a float32 ulp, the pool folding the normalisation into per-level factors; HOG blocks
from the pixels differ from the maps' by float rounding).

References
----------
Bourdev and Brandt, "Robust object detection via soft cascade", CVPR 2005.
"""

import math

import numpy as np

from cvfs._jit import njit
from cvfs.vision.haar import MAX_TERMS, haar_terms
from cvfs.vision.hog import N_HOG, N_ORIENT, HogLevel
from cvfs.vision.hog_direct import N_BLOCK_SLOTS, block_from_cells, block_from_pixels, hog_slots

if MAX_TERMS != 9:  # the Haar loops of the scan kernel are unrolled over 9 terms
    raise ImportError(f"the scan kernel expects 9 Haar terms; cvfs.vision.haar has {MAX_TERMS}")

__all__ = ["ScanPlan"]

_GROUP = 1024  # windows scanned together, feature by feature
_MIN_RUN = 64  # shortest run of adjacent windows scanned as one group
_DENSE_MIN = 0.5  # dense (vectorised) Haar stages while at least this fraction of windows lives


@njit(cache=True)
def _pl(x, lo, scale, table, nb, step, j):
    """g_j(x): the piecewise function of :class:`AdditiveModel` (same arithmetic, without
    branches: the clipping compiles to min/max)."""
    u = min(max((x - lo[j]) * scale[j], 0.0), np.float64(nb))
    b = min(int(u), nb - 1)
    if step:
        return table[j, b]
    a = u - b
    return table[j, b] * (1.0 - a) + table[j, b + 1] * a


@njit(cache=True)
def _haar_run(flat, p0, off, weight, nt, val, ng):
    """``val[a]`` = Haar value of the window whose top-left corner is ``flat[p0 + a]``, for a run
    of ``ng`` adjacent windows: every term in one pass (contiguous loads, one store per window),
    added in :func:`cvfs.vision.haar.haar_terms` order. Only the first 6, 8 or 9 terms are
    read, the smallest count that holds the feature's ``nt`` terms: the others are padding
    (weight 0, offset 0), and adding 0 times a finite integral leaves the sum exact, so every
    count gives the same value."""
    # slices indexed from 0: ``flat[o + a]`` keeps numba's negative-index wraparound, and on
    # AVX-512 LLVM then loads with gathers (about 4x slower per term; keypoints_speed.py)
    s0 = flat[p0 + off[0]:p0 + off[0] + ng]
    s1 = flat[p0 + off[1]:p0 + off[1] + ng]
    s2 = flat[p0 + off[2]:p0 + off[2] + ng]
    s3 = flat[p0 + off[3]:p0 + off[3] + ng]
    s4 = flat[p0 + off[4]:p0 + off[4] + ng]
    s5 = flat[p0 + off[5]:p0 + off[5] + ng]
    w0, w1, w2, w3, w4, w5 = weight[0], weight[1], weight[2], weight[3], weight[4], weight[5]
    if nt <= 6:
        for a in range(ng):
            v = w0 * s0[a]
            v += w1 * s1[a]
            v += w2 * s2[a]
            v += w3 * s3[a]
            v += w4 * s4[a]
            v += w5 * s5[a]
            val[a] = v
        return
    s6 = flat[p0 + off[6]:p0 + off[6] + ng]
    s7 = flat[p0 + off[7]:p0 + off[7] + ng]
    w6, w7 = weight[6], weight[7]
    if nt <= 8:
        for a in range(ng):
            v = w0 * s0[a]
            v += w1 * s1[a]
            v += w2 * s2[a]
            v += w3 * s3[a]
            v += w4 * s4[a]
            v += w5 * s5[a]
            v += w6 * s6[a]
            v += w7 * s7[a]
            val[a] = v
        return
    s8 = flat[p0 + off[8]:p0 + off[8] + ng]
    w8 = weight[8]
    for a in range(ng):
        v = w0 * s0[a]
        v += w1 * s1[a]
        v += w2 * s2[a]
        v += w3 * s3[a]
        v += w4 * s4[a]
        v += w5 * s5[a]
        v += w6 * s6[a]
        v += w7 * s7[a]
        v += w8 * s8[a]
        val[a] = v


@njit(cache=True, nogil=True)
def _scan_kernel(level, hl, top_left, feats, pl, casc, out, depth, partial, rgb, direct):
    """Scores ``out[q, i]`` of window ``i`` by classifier ``q`` (-inf once rejected).

    If ``depth`` and ``partial`` have ``n`` columns (else none), they receive how many features
    of classifier ``q`` window ``i`` reached (the one whose threshold rejected it included; all
    of them if it passed) and its partial score there (the full score if it passed).

    ``level = (flat, w1, window_border)`` with ``flat`` the raveled ``(3, H + 1, W + 1)``
    integral image of rows of ``w1``; ``hl`` the level's HOG maps ``(cells, bins, mag,
    abs_g_row, abs_g_col)`` (:class:`cvfs.vision.HogLevel`); ``feats = (kind, off, weight,
    n_terms, slot, within)``: Haar features (``kind == 0``) are ``n_terms`` corner terms, HOG
    features (``kind == 1``) a block slot and a position in it; ``pl = (lo, scale, table, n_bins,
    step)`` the piecewise functions; ``casc = (thr, ptr, intercept)``: the threshold after each
    feature, classifier ``q`` owning features ``ptr[q]:ptr[q + 1]``. With ``direct`` the HOG
    blocks come from the pixels of ``rgb`` (the level image, :func:`block_from_pixels`) instead
    of the maps ``hl``.

    Windows go in groups of ``_GROUP``. Within a group each classifier first runs its leading
    Haar features densely over a run of adjacent windows (vectorised, no per-window branching,
    a window's rejection only recorded) while at least ``_DENSE_MIN`` of the windows live; then
    feature by feature over the list of windows still alive, compacted after every feature. A
    HOG block is computed once per window when a classifier first needs it and shared by the
    classifiers. Returns the number of HOG blocks computed.
    """
    flat, width, window_border = level
    kind, off, weight, n_terms, slot, within = feats
    lo, scale, table, n_bins, step = pl
    thr, ptr, intercept = casc
    n = top_left.shape[0]
    nq = ptr.shape[0] - 1
    record = depth.shape[1] > 0
    base = np.empty(_GROUP, dtype=np.int64)
    alive = np.empty(_GROUP, dtype=np.int64)
    pos = np.empty(_GROUP, dtype=np.int64)  # base of alive windows
    ok = np.empty(_GROUP, dtype=np.int64)
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
            for i in range(ng):
                z[i] = intercept[q]
                out[q, g0 + i] = -math.inf
            j = ptr[q]
            if contiguous:  # dense stages: every window, rejections recorded in ok
                for i in range(ng):
                    ok[i] = 1
                n_ok = ng
                while j < ptr[q + 1] and kind[j] == 0 and n_ok >= _DENSE_MIN * ng:
                    _haar_run(flat, base[0], off[j], weight[j], n_terms[j], val, ng)
                    th = thr[j]
                    nb = n_bins[j]
                    st = step[j]
                    n_ok = 0
                    for i in range(ng):
                        zi = z[i] + _pl(np.float64(np.float32(val[i])), lo, scale, table, nb,
                                        st, j)
                        z[i] = zi
                        if record and ok[i] == 1 and zi < th:
                            depth[q, g0 + i] = j - ptr[q] + 1
                            partial[q, g0 + i] = zi
                        ok[i] &= zi >= th
                        n_ok += ok[i]
                    j += 1
                na = 0
                for i in range(ng):
                    alive[na] = i
                    pos[na] = base[i]
                    na += ok[i]
            else:
                na = ng
                for i in range(ng):
                    alive[i] = i
                    pos[i] = base[i]
            while j < ptr[q + 1] and na > 0:
                th = thr[j]
                nb = n_bins[j]
                st = step[j]
                kept = 0
                if kind[j] == 0:
                    # the terms in registers, unrolled; only the first 6, 8 or 9 (enough for
                    # the feature's terms) are read: the padding terms have weight 0 and
                    # offset 0, and adding 0 * (a finite integral) leaves v exact
                    ntj = n_terms[j]
                    oj = off[j]
                    wj = weight[j]
                    o0, o1, o2, o3, o4, o5, o6, o7, o8 = (oj[0], oj[1], oj[2], oj[3], oj[4],
                                                          oj[5], oj[6], oj[7], oj[8])
                    w0, w1, w2, w3, w4, w5, w6, w7, w8 = (wj[0], wj[1], wj[2], wj[3], wj[4],
                                                          wj[5], wj[6], wj[7], wj[8])
                    for a in range(na):
                        i = alive[a]
                        p = pos[a]
                        v = w0 * flat[p + o0]
                        v += w1 * flat[p + o1]
                        v += w2 * flat[p + o2]
                        v += w3 * flat[p + o3]
                        v += w4 * flat[p + o4]
                        v += w5 * flat[p + o5]
                        if ntj > 6:
                            v += w6 * flat[p + o6]
                            v += w7 * flat[p + o7]
                            if ntj > 8:
                                v += w8 * flat[p + o8]
                        zi = z[i] + _pl(np.float64(np.float32(v)), lo, scale, table, nb, st, j)
                        z[i] = zi
                        if record and zi < th:
                            depth[q, g0 + i] = j - ptr[q] + 1
                            partial[q, g0 + i] = zi
                        alive[kept] = i  # branch-free compaction
                        pos[kept] = p
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
                            if direct:
                                block_from_pixels(rgb, s, top_left[g0 + i, 0],
                                                  top_left[g0 + i, 1], window_border, cell_buf,
                                                  blocks[n_blocks])
                            else:
                                block_from_cells(hl, s, top_left[g0 + i, 0],
                                                 top_left[g0 + i, 1], window_border, cell_buf,
                                                 blocks[n_blocks])
                            store[i, s] = n_blocks
                            stamp[i, s] = g0
                            n_blocks += 1
                        v = blocks[store[i, s], within[j]]
                        zi = z[i] + _pl(np.float64(np.float32(v)), lo, scale, table, nb, st, j)
                        z[i] = zi
                        if record and zi < th:
                            depth[q, g0 + i] = j - ptr[q] + 1
                            partial[q, g0 + i] = zi
                        alive[kept] = i  # branch-free compaction
                        pos[kept] = pos[a]
                        kept += zi >= th
                na = kept
                j += 1
            for a in range(na):
                out[q, g0 + alive[a]] = z[alive[a]]
                if record:
                    depth[q, g0 + alive[a]] = ptr[q + 1] - ptr[q]
                    partial[q, g0 + alive[a]] = z[alive[a]]
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
    hog_blocks : {"maps", "pixels"}
        Where a window's HOG blocks come from: the level's cell-histogram maps (built once per
        level; scores equal the pool's bitwise), or, with ``hog_border='window'``, the 24x24
        pixels of the window (:func:`cvfs.vision.hog_direct.block_from_pixels`: no maps, about
        5 times the cost per block; cheaper when few windows reach a HOG feature, as in the
        shipped detectors' cascades; values equal up to float rounding).
    """

    def __init__(self, pool, models, cascade=True, hog_blocks="maps"):
        if hog_blocks not in ("maps", "pixels"):
            raise ValueError(f"hog_blocks must be 'maps' or 'pixels'; got {hog_blocks!r}")
        self.window_border = pool.hog_border == "window"
        self.direct = hog_blocks == "pixels" and self.window_border
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
        self.n_terms = np.zeros(n, dtype=np.int64)
        self.needs_hog = bool((feats < N_HOG).any())
        if haar.size:
            sel = feats >= N_HOG
            self.channel[sel] = haar // hpc
            self.dy[sel], self.dx[sel], self.weight[sel], self.n_terms[sel] = haar_terms(
                pool.haar[haar % hpc])
        width = max(m.table.shape[1] for m in models)
        self.table = np.zeros((n, width))
        self.lo = np.concatenate([m.lo for m in models])
        self.scale = np.concatenate([m.scale for m in models])
        self.step = np.concatenate([np.full(m.n_features, m.kind == "step") for m in models])
        self.n_bins = np.empty(n, dtype=np.int64)
        self.thr = np.full(n, -np.inf)
        self.depth_share = np.concatenate([np.arange(1, m.n_features + 1) / m.n_features
                                           for m in models])
        for q, m in enumerate(models):
            a = self.ptr[q]
            self.table[a:a + m.n_features, :m.table.shape[1]] = m.table
            self.n_bins[a:a + m.n_features] = m.table.shape[1] - (0 if m.kind == "step" else 1)
            if cascade and m.cascade_ends.size:
                self.thr[a + m.cascade_ends - 1] = m.cascade_thresholds

    def scores(self, cache, top_left, reached=False, margin=0.0):
        """Scores of windows of one level.

        Parameters
        ----------
        cache : cvfs.vision.LevelCache
        top_left : ndarray of shape (n, 2), int64
            Window top-left pixels (inside the level; not checked).
        reached : bool
            Also return how far each window got through each cascade.
        margin : float
            Lower the rejection threshold after feature ``j`` of ``k`` by ``margin * j / k``
            (a looser cascade, which rejects only windows the cascade rejects: the partial
            scores spread more the more features they sum; the coarse-to-fine scan of
            :mod:`cvfs.keypoints._coarse`).

        Returns
        -------
        scores : ndarray of shape (n_models, n)
            Full score of each window that passes every threshold, -inf for the others.
        depth : ndarray of int64, shape (n_models, n)
            Only with ``reached``: features computed (the rejecting one included; all of the
            model's if the window passed).
        partial : ndarray of shape (n_models, n)
            Only with ``reached``: the partial score after those features.
        """
        n = len(top_left)
        out = np.empty((self.ptr.size - 1, n))
        m = n if reached else 0
        depth = np.zeros((self.ptr.size - 1, m), dtype=np.int64)
        partial = np.zeros((self.ptr.size - 1, m))
        if n == 0:
            return (out, depth, partial) if reached else out
        integral = cache.integral
        _, h1, w1 = integral.shape
        off = (self.channel[:, None] * (h1 * w1) + self.dy * w1 + self.dx).astype(np.int64)
        flat = integral.reshape(-1)
        tl = np.ascontiguousarray(top_left, dtype=np.int64)
        hog = cache.hog if self.needs_hog and not self.direct else _NO_HOG
        rgb = cache.image if self.needs_hog and self.direct else _NO_RGB
        _scan_kernel((flat, w1, self.window_border),
                     (hog.cells, hog.bins, hog.mag, hog.abs_g_row, hog.abs_g_col), tl,
                     (self.kind, off, self.weight, self.n_terms, self.slot, self.within),
                     (self.lo, self.scale, self.table, self.n_bins, self.step),
                     (self.thr - margin * self.depth_share if margin else self.thr, self.ptr,
                      self.intercept),
                     out, depth, partial, rgb,
                     self.direct)
        return (out, depth, partial) if reached else out


_NO_HOG = HogLevel(np.zeros((1, 1, 1, N_ORIENT), dtype=np.float32),
                   np.zeros((1, 1, 1), dtype=np.int8),
                   *(np.zeros((1, 1, 1), dtype=np.float32),) * 3, shape=(1, 1))
_NO_RGB = np.zeros((1, 1, 3), dtype=np.float32)
