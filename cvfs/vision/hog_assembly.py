"""Assembly of HOG window features from the per-level maps of :mod:`cvfs.vision.hog`.

:func:`hog_windows` (and :class:`HogColumns`, its column plan built once for many levels) reads
the selected columns of 24x24 windows at any top-left pixel. With ``border='image'`` each feature
is gathered from the level's cells and L2-Hys block factors (:meth:`HogLevel.block_factors`, or
per window while few windows of a level are evaluated); with ``border='window'`` the 16 cells of
each window are read, their border pixels corrected to skimage's gradients of the 24x24 crop, and
the 9 blocks normalised (:func:`l2hys`). Layout, gradient conventions and references are in
:mod:`cvfs.vision.hog`.
"""

import numpy as np

from cvfs._jit import njit
from cvfs.vision.hog import (
    _B_COL0,
    _B_ROW0,
    _EPS,
    BLOCK_LEN,
    CELL,
    N_BLOCKS,
    N_CELLS,
    N_HOG,
    N_HOG_PER_CHANNEL,
    N_ORIENT,
    WINDOW,
    HogLevel,
    _block_factors,
    _cell_stats,
    hog_level,
)

__all__ = ["HogColumns", "hog_windows"]

_BORDERS = ("window", "image")


# ---------------------------------------------------------------------------- kernels (no checks)


@njit(cache=True)
def _fly_kernel(cells, top_left, blk_ch, blk_r, blk_c, blk_ptr, col_dr, col_dc, col_o, out,
                out_cols):
    """Image-border HOG columns with the block factors computed per window (no level maps).

    Same arithmetic as :func:`cvfs.vision.hog._norms_kernel` + :func:`_gather_kernel`, so
    bitwise the same values; cheaper when few windows are evaluated on a level.
    """
    n = top_left.shape[0]
    nk = blk_ch.shape[0]
    for w in range(n):
        r0 = top_left[w, 0]
        c0 = top_left[w, 1]
        for k in range(nk):
            ch = blk_ch[k]
            r = r0 + blk_r[k]
            c = c0 + blk_c[k]
            e00, m00 = _cell_stats(cells, ch, r, c)
            e01, m01 = _cell_stats(cells, ch, r, c + CELL)
            e10, m10 = _cell_stats(cells, ch, r + CELL, c)
            e11, m11 = _cell_stats(cells, ch, r + CELL, c + CELL)
            a, b = _block_factors(cells, ch, r, c, e00, e01, e10, e11, m00, m01, m10, m11)
            for j in range(blk_ptr[k], blk_ptr[k + 1]):
                x = np.float64(cells[ch, r0 + col_dr[j], c0 + col_dc[j], col_o[j]]) * a
                if x > 0.2:
                    x = 0.2
                out[w, out_cols[j]] = x * b


@njit(cache=True)
def _gather_kernel(cells_flat, inv1_flat, inv2_flat, cell_base, fac_base, blk_off, blk_ptr,
                   col_off, out, out_cols):
    """Image-border HOG columns: ``min(cell * inv1, 0.2) * inv2`` read from the level maps.

    Flat indexing: window ``w``'s cells start at ``cell_base[w]`` and its block factors at
    ``fac_base[w]``; needed block ``k`` has factor offset ``blk_off[k]`` and columns
    ``blk_ptr[k]:blk_ptr[k + 1]`` with cell offsets ``col_off`` written to ``out_cols``.
    """
    n = cell_base.shape[0]
    nk = blk_off.shape[0]
    for w in range(n):
        cb = cell_base[w]
        fb = fac_base[w]
        for k in range(nk):
            a = inv1_flat[fb + blk_off[k]]
            b = inv2_flat[fb + blk_off[k]]
            for j in range(blk_ptr[k], blk_ptr[k + 1]):
                x = np.float64(cells_flat[cb + col_off[j]]) * a
                if x > 0.2:
                    x = 0.2
                out[w, out_cols[j]] = x * b


@njit(cache=True)
def _load_window_cells(hog_cells, bins, mag, agr, agc, ch, r0, c0, b_row0, b_col0, buf):
    """Copy the 4x4 cells of a window into ``buf`` with skimage's window-border gradients.

    On the window's first/last row the row gradient is zero (the pixel moves to bin ``b_row0``
    with magnitude ``|g_col|``), on its first/last column the column gradient is zero (bin
    ``b_col0``, magnitude ``|g_row|``), and the four corners have no gradient.
    """
    for i in range(N_CELLS):
        for j in range(N_CELLS):
            for o in range(N_ORIENT):
                buf[i, j, o] = hog_cells[ch, r0 + CELL * i, c0 + CELL * j, o]
    inv = 1.0 / (CELL * CELL)
    last = WINDOW - 1
    for a in range(WINDOW):
        top_bottom = a == 0 or a == last
        step = 1 if top_bottom else last
        b = 0
        while b < WINDOW:
            r = r0 + a
            c = c0 + b
            ci = a // CELL
            cj = b // CELL
            buf[ci, cj, bins[ch, r, c]] -= mag[ch, r, c] * inv
            left_right = b == 0 or b == last
            if top_bottom and not left_right:
                buf[ci, cj, b_row0] += agc[ch, r, c] * inv
            elif left_right and not top_bottom:
                buf[ci, cj, b_col0] += agr[ch, r, c] * inv
            b += step


@njit(cache=True)
def _normalize_block(buf, bi, bj, out32):
    """L2-Hys of the 2x2-cell block at block position (bi, bj) of ``buf`` into ``out32``."""
    k = 0
    for i in range(2):
        for j in range(2):
            for o in range(N_ORIENT):
                out32[k] = buf[bi + i, bj + j, o]
                k += 1
    l2hys(out32, _sum_squares(out32))


@njit(cache=True)
def _sum_squares(out32):
    """Sum of squares of the 32 block values in four interleaved partial sums (the chain of
    dependent additions is 4 times shorter than a left-to-right sum)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for k in range(0, BLOCK_LEN, 4):
        s0 += out32[k] * out32[k]
        s1 += out32[k + 1] * out32[k + 1]
        s2 += out32[k + 2] * out32[k + 2]
        s3 += out32[k + 3] * out32[k + 3]
    return (s0 + s1) + (s2 + s3)


@njit(cache=True)
def l2hys(out32, s):
    """L2-Hys in place: ``out32`` holds a block's raw values and ``s`` their sum of squares;
    L2-normalise, clip at 0.2, renormalise (skimage's ``block_norm="L2-Hys"``).

    Multiplies by reciprocal norms and sums squares in four partial sums (2x faster than 64
    divisions and a left-to-right sum); the values differ from skimage's arithmetic by float64
    ulps, below float32 resolution.
    """
    inv = 1.0 / np.sqrt(s + _EPS * _EPS)
    for k in range(BLOCK_LEN):
        out32[k] = min(out32[k] * inv, 0.2)
    inv = 1.0 / np.sqrt(_sum_squares(out32) + _EPS * _EPS)
    for k in range(BLOCK_LEN):
        out32[k] *= inv


@njit(cache=True)
def _windows_kernel(hog_cells, bins, mag, agr, agc, top_left, block_ch, block_i, block_j,
                    col_block, col_off, out, out_cols, b_row0, b_col0):
    """Window-border HOG columns of many windows (skimage per crop).

    ``block_*`` (K,): channel and block position of each needed block; ``col_block`` (m,) the
    needed-block slot and ``col_off`` (m,) the offset in the block's 32 values of each requested
    column; ``out[:, out_cols[j]]`` receives column j.
    """
    n = top_left.shape[0]
    nk = block_ch.shape[0]
    m = col_block.shape[0]
    buf = np.zeros((3, N_CELLS, N_CELLS, N_ORIENT))
    blocks = np.zeros((nk, BLOCK_LEN))
    loaded = np.zeros(3, dtype=np.bool_)
    for w in range(n):
        r0 = top_left[w, 0]
        c0 = top_left[w, 1]
        loaded[:] = False
        for k in range(nk):
            ch = block_ch[k]
            if not loaded[ch]:
                _load_window_cells(hog_cells, bins, mag, agr, agc, ch, r0, c0, b_row0, b_col0,
                                   buf[ch])
                loaded[ch] = True
            _normalize_block(buf[ch], block_i[k], block_j[k], blocks[k])
        for j in range(m):
            out[w, out_cols[j]] = blocks[col_block[j], col_off[j]]


# ---------------------------------------------------------------------------- orchestration


def _check_border(border):
    if border not in _BORDERS:
        raise ValueError(f"border must be one of {_BORDERS}; received {border!r}")
    return border == "window"


def _hog_plan(columns):
    """Needed blocks and per-column (block slot, offset) for HOG column indices in [0, 864)."""
    columns = np.asarray(columns, dtype=np.int64)
    ch = columns // N_HOG_PER_CHANNEL
    within = columns % N_HOG_PER_CHANNEL
    block = within // BLOCK_LEN  # 0..8 = bi * 3 + bj
    off = within % BLOCK_LEN
    key = ch * (N_BLOCKS * N_BLOCKS) + block
    uniq, slot = np.unique(key, return_inverse=True)
    b_ch = uniq // (N_BLOCKS * N_BLOCKS)
    b = uniq % (N_BLOCKS * N_BLOCKS)
    return (b_ch.astype(np.int64), (b // N_BLOCKS).astype(np.int64),
            (b % N_BLOCKS).astype(np.int64), slot.astype(np.int64), off.astype(np.int64))


class HogColumns:
    """Selected HOG columns of 24x24 windows, with the column plan built once.

    Build it once for a fixed set of columns and call it on many levels or bands
    (:class:`cvfs.vision.FeaturePool` and the keypoint scanners do).

    Parameters
    ----------
    columns : array_like of int of shape (m,)
        HOG column indices in ``[0, N_HOG)``.
    window_border : bool
        True: the gradient across the window's own border is zeroed (``hog_border='window'``);
        False: the level's gradients are used (``hog_border='image'``).
    """

    def __init__(self, columns, window_border):
        self.columns = np.asarray(columns, dtype=np.int64)
        self.window_border = bool(window_border)
        if self.window_border:
            self._plan = _hog_plan(self.columns)
        else:
            ch, dr, dc, o, br, bc = _hog_offsets(self.columns)
            self._offsets = (ch, dr, dc, o, br, bc)
            self._n_channels = len(np.unique(ch))

    def __call__(self, hl, top_left, out, out_cols):
        """Fill ``out[:, out_cols]`` with the columns of the windows at ``top_left`` (n, 2) of
        the level's :class:`HogLevel` ``hl`` (no validation)."""
        if len(self.columns) == 0 or len(top_left) == 0:
            return
        tl = np.ascontiguousarray(top_left, dtype=np.int64)
        out_cols = np.asarray(out_cols, dtype=np.int64)
        if self.window_border:
            _windows_kernel(hl.cells, hl.bins, hl.mag, hl.abs_g_row, hl.abs_g_col, tl,
                            *self._plan, out, out_cols, _B_ROW0, _B_COL0)
            return
        ch, dr, dc, o, br, bc = self._offsets
        _, hc, wc, _ = hl.cells.shape
        blk = (ch * hc + br) * wc + bc  # block key (channel, block offset in the window)
        order = np.argsort(blk, kind="stable")
        keys, first, counts = np.unique(blk[order], return_index=True, return_counts=True)
        blk_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        first = order[first]
        if hl._use_maps(len(tl) * len(keys), self._n_channels):
            inv1, inv2 = hl.block_factors()
            _, hb, wb = inv1.shape
            col_off = ((ch * hc + dr) * wc + dc) * N_ORIENT + o
            blk_off = (ch[first] * hb + br[first]) * wb + bc[first]
            _gather_kernel(hl.cells.reshape(-1), inv1.reshape(-1), inv2.reshape(-1),
                           (tl[:, 0] * wc + tl[:, 1]) * N_ORIENT, tl[:, 0] * wb + tl[:, 1],
                           blk_off, blk_ptr, col_off[order], out, out_cols[order])
        else:
            _fly_kernel(hl.cells, tl, ch[first], br[first], bc[first], blk_ptr, dr[order],
                        dc[order], o[order], out, out_cols[order])


def _hog_offsets(columns):
    """Channel, cell offset (rows, cols), orientation and block offset of HOG columns."""
    columns = np.asarray(columns, dtype=np.int64)
    ch, within = np.divmod(columns, N_HOG_PER_CHANNEL)
    block, off = np.divmod(within, BLOCK_LEN)
    bi, bj = np.divmod(block, N_BLOCKS)
    cell, o = np.divmod(off, N_ORIENT)
    ci, cj = np.divmod(cell, 2)
    return ch, CELL * (bi + ci), CELL * (bj + cj), o, CELL * bi, CELL * bj


def hog_windows(level, top_left, *, columns=None, border="image"):
    """HOG features of 24x24 windows assembled from per-level maps.

    Parameters
    ----------
    level : HogLevel or ndarray of shape (H, W, 3)
        Maps from :func:`hog_level` (reuse them for many calls) or an RGB image.
    top_left : array_like of int, shape (n, 2)
        ``(row, col)`` of each window's top-left pixel; the window covers rows
        ``row .. row + 23`` and columns ``col .. col + 23`` and must lie inside the level.
    columns : array_like of int of shape (m,), optional
        Feature indices in ``[0, 864)`` to compute (default: all 864, in order).
    border : {'image', 'window'}, default='image'
        ``'image'``: the level's gradients on the window border, blocks read from shared per-level
        maps (fast); ``'window'``: identical to ``skimage.feature.hog`` on each 24x24 crop
        (gradients zeroed on the crop border, corrected per window; ~3x slower).

    Returns
    -------
    ndarray of shape (n, m), dtype float32

    Raises
    ------
    ValueError
        If ``top_left`` is not ``(n, 2)`` integers, a window leaves the level, ``columns`` is out
        of range or ``border`` is unknown.
    TypeError
        For an invalid image.
    """
    window_border = _check_border(border)
    hl = level if isinstance(level, HogLevel) else hog_level(level)
    tl = _check_top_left(top_left, hl.shape)
    cols = _check_columns(columns, N_HOG)
    out = np.empty((len(tl), len(cols)), dtype=np.float32)
    HogColumns(cols, window_border)(hl, tl, out, np.arange(len(cols)))
    return out


def _check_top_left(top_left, shape, name="top_left"):
    tl = np.asarray(top_left)
    if tl.ndim != 2 or tl.shape[1] != 2:
        raise ValueError(f"{name} must have shape (n, 2) of (row, col); received shape {tl.shape}")
    if tl.size and tl.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers; received dtype {tl.dtype}")
    tl = tl.astype(np.int64)
    if tl.size:
        bad = ((tl[:, 0] < 0) | (tl[:, 1] < 0) | (tl[:, 0] > shape[0] - WINDOW)
               | (tl[:, 1] > shape[1] - WINDOW))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name}: {int(bad.sum())} window(s) leave the level of shape {tuple(shape)}; "
                f"expected 0 <= row <= {shape[0] - WINDOW} and 0 <= col <= {shape[1] - WINDOW}, "
                f"received (row, col) = {tuple(int(v) for v in tl[i])} at index {i}"
            )
    return tl


def _check_columns(columns, n_total, name="columns"):
    if columns is None:
        return np.arange(n_total, dtype=np.int64)
    cols = np.asarray(columns)
    if cols.ndim != 1:
        raise ValueError(f"{name} must be 1-D; received shape {cols.shape}")
    if cols.size and cols.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers; received dtype {cols.dtype}")
    cols = cols.astype(np.int64)
    if cols.size and (cols.min() < 0 or cols.max() >= n_total):
        raise ValueError(
            f"{name} must lie in [0, {n_total}); received values in [{cols.min()}, {cols.max()}]"
        )
    return cols
