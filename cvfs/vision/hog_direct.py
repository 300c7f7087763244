"""HOG blocks of single windows computed straight from the pixels (no per-level maps).

:func:`cvfs.vision.hog_level` builds cell-histogram maps of a whole level (~20 ns per pixel and
channel), which pays off when most windows of the level need HOG columns (training, full scans).
A soft cascade asks for HOG columns at a small fraction of the windows only (those that survived
the cheap Haar stages); for them it is cheaper to compute just the needed 2x2-cell blocks from the
12x12 pixels they cover. :func:`block_from_pixels` does that (one block: gradients, orientation
bins, four cell histograms, L2-Hys), with the conventions of :mod:`cvfs.vision.hog`:

- ``border='window'``: gradients of the 24x24 crop, as ``skimage.feature.hog`` of the crop (the
  row gradient is zero on the crop's first and last row, the column gradient on its first and last
  column);
- ``border='image'``: gradients of the level (zero only on the level's own border).

Values equal those of :func:`cvfs.vision.hog_windows` up to float rounding (both within 2e-7 of
skimage): the maps store float32 cell sums, the direct path sums in float64.

References
----------
Dalal and Triggs, "Histograms of Oriented Gradients for Human Detection", CVPR 2005.
"""

import math

import numpy as np

from cvfs._jit import njit
from cvfs.vision._checks import as_float_rgb
from cvfs.vision.hog import (
    _B_COL0,
    _B_ROW0,
    _COS,
    _SIN,
    BLOCK_LEN,
    CELL,
    N_BLOCKS,
    N_HOG,
    N_HOG_PER_CHANNEL,
    N_ORIENT,
    WINDOW,
    _orient_bin,
)
from cvfs.vision.hog_assembly import (
    _check_border,
    _check_columns,
    _check_top_left,
    _normalize_block,
    _sum_squares,
    l2hys,
)

__all__ = ["N_BLOCK_SLOTS", "block_from_cells", "block_from_pixels", "hog_direct", "hog_slots"]

#: Distinct (channel, block) pairs of a window: 3 channels x 3 x 3 blocks.
N_BLOCK_SLOTS = 3 * N_BLOCKS * N_BLOCKS


@njit(cache=True)
def block_from_pixels(rgb, slot, r0, c0, window_border, cell_buf, out32):
    """L2-Hys-normalised values of one 2x2-cell block of one window, from the pixels.

    Parameters
    ----------
    rgb : ndarray of shape (H, W, 3), float32
        The level image.
    slot : int
        ``channel * 9 + block_row * 3 + block_col`` (see :func:`hog_slots`).
    r0, c0 : int
        Top-left pixel of the 24x24 window.
    window_border : bool
        Gradients of the crop (skimage per window) instead of the level's.
    cell_buf : ndarray of shape (2, 2, 8), float64
        Scratch space.
    out32 : ndarray of shape (32,), float64
        Receives the block in skimage order ``(cell_row, cell_col, orientation)``.
    """
    h, w, _ = rgb.shape
    ch = slot // (N_BLOCKS * N_BLOCKS)
    bi = (slot // N_BLOCKS) % N_BLOCKS
    bj = slot % N_BLOCKS
    cell_buf[:] = 0.0
    for ci in range(2):
        for cj in range(2):
            acc = cell_buf[ci, cj]
            for a in range(CELL):
                wr = CELL * (bi + ci) + a  # row inside the window
                r = r0 + wr
                row_ok = (0 < wr < WINDOW - 1) if window_border else (0 < r < h - 1)
                for b in range(CELL):
                    wc = CELL * (bj + cj) + b
                    c = c0 + wc
                    col_ok = (0 < wc < WINDOW - 1) if window_border else (0 < c < w - 1)
                    gr = 0.0
                    if row_ok:
                        gr = np.float64(rgb[r + 1, c, ch]) - np.float64(rgb[r - 1, c, ch])
                    gc = 0.0
                    if col_ok:
                        gc = np.float64(rgb[r, c + 1, ch]) - np.float64(rgb[r, c - 1, ch])
                    # & 7 (bins are 0..7) spares numba's negative-index check
                    acc[_orient_bin(gc, gr, _COS, _SIN) & 7] += math.sqrt(gc * gc + gr * gr)
    _normalize(cell_buf, out32)


@njit(cache=True)
def _normalize(cell_buf, out32):
    """Cell sums (2, 2, 8) -> the L2-Hys-normalised block (32,) in skimage order."""
    inv = 1.0 / (CELL * CELL)
    k = 0
    for i in range(2):
        for j in range(2):
            for o in range(N_ORIENT):
                out32[k] = cell_buf[i, j, o] * inv
                k += 1
    l2hys(out32, _sum_squares(out32))


@njit(cache=True)
def block_from_cells(hl, slot, r0, c0, window_border, cell_buf, out32):
    """:func:`block_from_pixels` reading the level's dense cell histograms.

    ``hl = (cells, bins, mag, abs_g_row, abs_g_col)``, the maps of :class:`cvfs.vision.HogLevel`.
    With ``window_border`` the block's border pixels are corrected as
    :func:`cvfs.vision.hog_windows` (``border='window'``) corrects them, in the same order, so the
    block equals that function's bitwise; with the image border it is the level's block up to
    float rounding (``hog_windows`` with ``border='image'`` folds the normalisation differently).
    About 0.1 us per block, against ~0.5 us from the pixels.
    """
    cells, bins, mag, agr, agc = hl
    ch = slot // (N_BLOCKS * N_BLOCKS)
    bi = (slot // N_BLOCKS) % N_BLOCKS
    bj = slot % N_BLOCKS
    for i in range(2):
        for j in range(2):
            for o in range(N_ORIENT):
                cell_buf[i, j, o] = cells[ch, r0 + CELL * (bi + i), c0 + CELL * (bj + j), o]
    if window_border and slot % 9 != 4:  # every block but the centre one touches the border
        inv = 1.0 / (CELL * CELL)
        last = WINDOW - 1
        for wr in range(CELL * bi, CELL * (bi + 2)):  # rows then columns, as _load_window_cells
            top_bottom = wr == 0 or wr == last
            ci = wr // CELL - bi
            r = r0 + wr
            # the block's border columns of this row: all of them on the window's top/bottom row,
            # else the window's first/last column when the block holds it
            if top_bottom:
                lo, hi, step = CELL * bj, CELL * (bj + 2), 1
            elif bj == 0:
                lo, hi, step = 0, 1, 1
            elif bj == N_BLOCKS - 1:
                lo, hi, step = last, last + 1, 1
            else:
                continue
            for wc in range(lo, hi, step):
                left_right = wc == 0 or wc == last
                c = c0 + wc
                acc = cell_buf[ci, wc // CELL - bj]
                acc[np.intp(bins[ch, r, c]) & 7] -= mag[ch, r, c] * inv
                if top_bottom and not left_right:
                    acc[_B_ROW0] += agc[ch, r, c] * inv
                elif left_right and not top_bottom:
                    acc[_B_COL0] += agr[ch, r, c] * inv
    _normalize_block(cell_buf, 0, 0, out32)


@njit(cache=True)
def _direct_kernel(rgb, top_left, slot, within, window_border, out):
    n = top_left.shape[0]
    m = slot.shape[0]
    blocks = np.empty((N_BLOCK_SLOTS, BLOCK_LEN))
    have = np.zeros(N_BLOCK_SLOTS, dtype=np.bool_)
    cell_buf = np.empty((2, 2, N_ORIENT))
    for i in range(n):
        have[:] = False
        for j in range(m):
            s = slot[j]
            if not have[s]:
                block_from_pixels(rgb, s, top_left[i, 0], top_left[i, 1], window_border,
                                  cell_buf, blocks[s])
                have[s] = True
            out[i, j] = blocks[s, within[j]]


def hog_slots(columns):
    """Block slot and position inside the block of HOG columns.

    Parameters
    ----------
    columns : array_like of int of shape (m,)
        HOG column indices in ``[0, 864)`` (layout of :mod:`cvfs.vision.hog`).

    Returns
    -------
    slot : ndarray of shape (m,), dtype int64
        ``channel * 9 + block_row * 3 + block_col`` in ``[0, 27)``.
    within : ndarray of shape (m,), dtype int64
        Index in the block's 32 values.
    """
    columns = np.asarray(columns, dtype=np.int64)
    ch, rest = np.divmod(columns, N_HOG_PER_CHANNEL)
    block, within = np.divmod(rest, BLOCK_LEN)
    return ch * (N_BLOCKS * N_BLOCKS) + block, within


def hog_direct(image, top_left, *, columns=None, border="image"):
    """HOG features of 24x24 windows computed from the pixels of only the blocks they need.

    Cheaper than :func:`cvfs.vision.hog_windows` on level maps when few windows of a level are
    evaluated (about 1 us per block and window, against ~60 ns per level pixel for the maps of
    the 3 channels).

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB level image (uint8/uint16 or float in ``[0, 1]``), ``H, W >= 24``.
    top_left : array_like of int, shape (n, 2)
        ``(row, col)`` of each window's top-left pixel; windows must lie inside the image.
    columns : array_like of int of shape (m,), optional
        HOG feature indices in ``[0, 864)`` (default: all 864, in order).
    border : {'image', 'window'}, default='image'
        Gradients of the level (``'image'``) or of each 24x24 crop (``'window'``, equal to
        ``skimage.feature.hog`` of the crop).

    Returns
    -------
    ndarray of shape (n, m), dtype float32

    Raises
    ------
    TypeError
        For an invalid image.
    ValueError
        For an invalid image, ``top_left`` not ``(n, 2)`` integers or leaving the image,
        ``columns`` out of range, or an unknown ``border``.

    References
    ----------
    Dalal and Triggs, CVPR 2005; skimage.feature.hog conventions (:mod:`cvfs.vision.hog`).
    """
    window_border = _check_border(border)
    rgb = as_float_rgb(image, min_size=WINDOW)
    tl = _check_top_left(top_left, rgb.shape[:2])
    cols = _check_columns(columns, N_HOG)
    slot, within = hog_slots(cols)
    out = np.empty((len(tl), len(cols)), dtype=np.float32)
    if len(tl) and len(cols):
        _direct_kernel(rgb, np.ascontiguousarray(tl), slot, within, window_border, out)
    return out
