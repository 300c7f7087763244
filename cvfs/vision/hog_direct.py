"""HOG blocks of single windows computed straight from the pixels (no per-level maps).

:func:`cvfs.vision.hog_level` builds cell-histogram maps of a whole level (~30 ns per pixel and
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
from numba import njit

from cvfs.vision._checks import as_float_rgb
from cvfs.vision.hog import (
    _COS,
    _EPS,
    _SIN,
    BLOCK_LEN,
    CELL,
    N_BLOCKS,
    N_HOG,
    N_HOG_PER_CHANNEL,
    N_ORIENT,
    WINDOW,
    _check_border,
    _check_columns,
    _check_top_left,
    _orient_bin,
)

__all__ = ["N_BLOCK_SLOTS", "block_from_gradients", "block_from_pixels", "gradient_maps",
           "hog_direct", "hog_slots"]

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
    s = 0.0
    k = 0
    for i in range(2):
        for j in range(2):
            for o in range(N_ORIENT):
                v = cell_buf[i, j, o] * inv
                out32[k] = v
                s += v * v
                k += 1
    norm = math.sqrt(s + _EPS * _EPS)
    s = 0.0
    for k in range(BLOCK_LEN):
        v = min(out32[k] / norm, 0.2)
        out32[k] = v
        s += v * v
    norm = math.sqrt(s + _EPS * _EPS)
    for k in range(BLOCK_LEN):
        out32[k] = out32[k] / norm


@njit(cache=True)
def _gradient_kernel(rgb, bins, mag, agr, agc):
    h, w, nch = rgb.shape
    for ch in range(nch):
        for r in range(h):
            for c in range(w):
                gr = 0.0
                if 0 < r < h - 1:
                    gr = np.float64(rgb[r + 1, c, ch]) - np.float64(rgb[r - 1, c, ch])
                gc = 0.0
                if 0 < c < w - 1:
                    gc = np.float64(rgb[r, c + 1, ch]) - np.float64(rgb[r, c - 1, ch])
                bins[ch, r, c] = _orient_bin(gc, gr, _COS, _SIN)
                mag[ch, r, c] = math.sqrt(gc * gc + gr * gr)
                agr[ch, r, c] = abs(gr)
                agc[ch, r, c] = abs(gc)


def gradient_maps(rgb):
    """Per-pixel gradient maps of a level (image-border gradients), without cell histograms.

    Parameters
    ----------
    rgb : ndarray of shape (H, W, 3), dtype float32
        A level image as :func:`cvfs.vision.as_float_rgb` returns it.

    Returns
    -------
    bins : ndarray of shape (3, H, W), dtype int8
        Orientation bin of every pixel.
    mag, abs_g_row, abs_g_col : ndarray of shape (3, H, W), dtype float32
        Gradient magnitude, ``|g_row|`` and ``|g_col|``: the maps of :class:`cvfs.vision.HogLevel`
        of the same names, ~4 times cheaper to build than the whole :func:`hog_level`.
    """
    h, w = rgb.shape[:2]
    bins = np.empty((3, h, w), dtype=np.int8)
    maps = [np.empty((3, h, w), dtype=np.float32) for _ in range(3)]
    _gradient_kernel(rgb, bins, *maps)
    return (bins, *maps)


_B_ROW0 = _orient_bin(1.0, 0.0, _COS, _SIN)  # bin of a pixel whose row gradient is zeroed (0)
_B_COL0 = _orient_bin(0.0, 1.0, _COS, _SIN)  # ... whose column gradient is zeroed (4)


@njit(cache=True)
def block_from_gradients(grad, slot, r0, c0, window_border, cell_buf, out32):
    """:func:`block_from_pixels` reading the level's :func:`gradient_maps`.

    ``grad = (bins, mag, abs_g_row, abs_g_col)``. With ``window_border``, a pixel on the window's
    first or last row keeps only its column gradient (bin 0, magnitude ``|g_col|``), one on the
    first or last column only its row gradient (bin 4, ``|g_row|``), a corner none (skimage on the
    crop).
    """
    bins, mag, agr, agc = grad
    ch = slot // (N_BLOCKS * N_BLOCKS)
    bi = (slot // N_BLOCKS) % N_BLOCKS
    bj = slot % N_BLOCKS
    cell_buf[:] = 0.0
    for ci in range(2):
        for cj in range(2):
            acc = cell_buf[ci, cj]
            c_lo = c0 + CELL * (bj + cj)
            for a in range(CELL):
                r = r0 + CELL * (bi + ci) + a
                brow = bins[ch, r, c_lo:c_lo + CELL]
                mrow = mag[ch, r, c_lo:c_lo + CELL]
                for b in range(CELL):
                    acc[np.intp(brow[b]) & 7] += mrow[b]
    if window_border and slot % 9 != 4:  # every block but the centre one touches the border
        for ci in range(2):
            for cj in range(2):
                acc = cell_buf[ci, cj]
                for a in range(CELL):
                    wr = CELL * (bi + ci) + a
                    edge_row = wr == 0 or wr == WINDOW - 1
                    for b in range(CELL):
                        wc = CELL * (bj + cj) + b
                        edge_col = wc == 0 or wc == WINDOW - 1
                        if not (edge_row or edge_col):
                            continue
                        r = r0 + wr
                        c = c0 + wc
                        acc[np.intp(bins[ch, r, c]) & 7] -= mag[ch, r, c]
                        if edge_row and not edge_col:
                            acc[_B_ROW0] += agc[ch, r, c]
                        elif edge_col and not edge_row:
                            acc[_B_COL0] += agr[ch, r, c]
    _normalize(cell_buf, out32)


@njit(cache=True)
def _direct_kernel(rgb, grad, use_grad, top_left, slot, within, window_border, out):
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
                if use_grad:
                    block_from_gradients(grad, s, top_left[i, 0], top_left[i, 1], window_border,
                                         cell_buf, blocks[s])
                else:
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


def hog_direct(image, top_left, *, columns=None, border="image", gradients=False):
    """HOG features of 24x24 windows computed from the pixels of only the blocks they need.

    Cheaper than :func:`cvfs.vision.hog_windows` on level maps when few windows of a level are
    evaluated (about 1 us per block and window, against ~30 ns per level pixel for the maps).

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
    gradients : bool, default=False
        Read the pixels' bins and magnitudes from the level's :func:`gradient_maps` (built here
        once) instead of computing them per block: cheaper per block when many windows are asked.

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
        grad = gradient_maps(rgb) if gradients else gradient_maps(rgb[:1, :1])
        _direct_kernel(rgb, grad, bool(gradients), np.ascontiguousarray(tl), slot, within,
                       window_border, out)
    return out
