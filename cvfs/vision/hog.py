"""Dense HOG on RGB images: per-level cell-histogram maps, then per-window block assembly.

Layout (per colour channel, on a 24x24 window): 6x6-pixel cells, 2x2-cell blocks with a one-cell
stride (3x3 blocks), 8 unsigned orientations over [0, 180) degrees, L2-Hys block normalisation:
3 * 3 * 4 * 8 = 288 features per channel, 864 per RGB window, ordered channel-major
``[R 288 | G 288 | B 288]`` and within a channel exactly as ``skimage.feature.hog(window,
orientations=8, pixels_per_cell=(6, 6), cells_per_block=(2, 2), block_norm='L2-Hys')``:
``(block_row, block_col, cell_row, cell_col, orientation)`` in C order.

Two steps:

1. :func:`hog_level` computes, once per pyramid level, the histogram of the 6x6 cell whose top-left
   pixel is ``(r, c)`` for *every* ``(r, c)`` (cells at stride 1): ``cells`` of shape
   ``(3, H - 5, W - 5, 8)``, plus per-pixel orientation bins and magnitudes.
2. :func:`hog_windows` assembles windows (any top-left, so stride 1 scanning works) from the maps:
   with ``border='image'`` each feature is gathered from the per-level block maps, with
   ``border='window'`` the 16 cells are read, border-corrected and the 9 blocks normalised.

Gradient conventions are scikit-image's: central differences ``I[r+1] - I[r-1]`` (zero on the first
and last row/column), magnitude ``hypot`` (computed as ``sqrt(g_col**2 + g_row**2)``, within
one ulp), orientation ``rad2deg(arctan2(g_row, g_col)) % 180``
binned without interpolation (bin ``i`` holds ``[22.5 i, 22.5 (i + 1))``), cell value = sum of
magnitudes / 36, L2-Hys with ``eps = 1e-5`` and clipping at 0.2.

Window border. ``border='image'`` (default) uses the whole level's gradients on the window border:
a window's blocks are the level's blocks, so the L2-Hys factors are computed once per level
(:meth:`HogLevel.block_factors`; per window while few windows of a level are evaluated), and it
equals ``skimage.feature.hog`` of the whole level for cell-aligned windows. ``border='window'``
reproduces ``skimage.feature.hog`` of each 24x24 crop exactly (gradients zero across the crop's
border): the assembly corrects the 92 border pixels of each window from per-pixel maps.

Orientation bins are found without ``atan2`` (comparisons with the bin boundaries); they equal
skimage's except within ~1e-16 (relative) of the irrational boundaries 22.5 + 45 k degrees or for
``|g_row / g_col| < 2.5e-16`` (skimage's ``% 180`` then rounds to 180 and drops the pixel).

References
----------
Dalal and Triggs, "Histograms of Oriented Gradients for Human Detection", CVPR 2005.
Barbu et al., TPAMI 2017, section 3.3 (288 HOG features per RGB channel on a 24x24 window).
"""

import math

import numpy as np

from cvfs._jit import njit
from cvfs.vision._checks import as_float_rgb

__all__ = [
    "CELL",
    "HogColumns",
    "N_HOG",
    "N_HOG_PER_CHANNEL",
    "N_ORIENT",
    "WINDOW",
    "HogLevel",
    "hog_level",
    "hog_names",
    "hog_windows",
]

WINDOW = 24  #: window side (pixels)
CELL = 6  #: cell side (pixels)
N_ORIENT = 8  #: unsigned orientation bins over [0, 180)
N_CELLS = WINDOW // CELL  # 4 cells per window side
N_BLOCKS = N_CELLS - 1  # 3 blocks per window side (2x2 cells, one-cell stride)
BLOCK_LEN = 4 * N_ORIENT  # 32 values per block
N_HOG_PER_CHANNEL = N_BLOCKS * N_BLOCKS * BLOCK_LEN  #: 288
N_HOG = 3 * N_HOG_PER_CHANNEL  #: 864
_EPS = 1e-5
_BORDERS = ("window", "image")


class HogLevel:
    """Per-level HOG maps produced by :func:`hog_level`.

    Attributes
    ----------
    cells : ndarray of shape (3, H - 5, W - 5, 8), dtype float32
        ``cells[ch, r, c, o]``: orientation-``o`` histogram of the 6x6 cell with top-left pixel
        ``(r, c)`` in channel ``ch`` (sum of magnitudes / 36).
    bins : ndarray of shape (3, H, W), dtype int8
        Orientation bin (0..7) of every pixel.
    mag : ndarray of shape (3, H, W), dtype float32
        Gradient magnitude of every pixel.
    abs_g_row, abs_g_col : ndarray of shape (3, H, W), dtype float32
        ``|g_row|`` and ``|g_col|``: the magnitude a pixel has when it lies on a vertical
        (``g_col`` zeroed) or horizontal (``g_row`` zeroed) window border.
    shape : tuple of int
        ``(H, W)`` of the level.

    Notes
    -----
    :meth:`block_factors` adds the per-level L2-Hys factors used by ``border='image'`` (computed on
    first use). Memory: ~180 bytes per level pixel with the factors (a 640x480 level: ~55 MB).
    """

    __slots__ = ("cells", "bins", "mag", "abs_g_row", "abs_g_col", "shape", "_norms", "_fly")

    def __init__(self, cells, bins, mag, abs_g_row, abs_g_col, shape):
        self.cells = cells
        self.bins = bins
        self.mag = mag
        self.abs_g_row = abs_g_row
        self.abs_g_col = abs_g_col
        self.shape = shape
        self._norms = None
        self._fly = 0  # blocks normalised per window so far (see _use_maps)

    def _use_maps(self, n_blocks, n_channels):
        """Whether ``border='image'`` reads the level factor maps for ``n_blocks`` more blocks.

        Per-window factors are used until their cumulative count would exceed the cost of the maps
        (a per-window block costs about three map positions, measured; the maps have ``n_channels``
        x block positions), then the maps are built; both give the same values.
        """
        if self._norms is None:
            _, hc, wc, _ = self.cells.shape
            budget = n_channels * (hc - CELL) * (wc - CELL) // 3
            if self._fly + n_blocks <= budget:
                self._fly += n_blocks
                return False
        return True

    def block_factors(self):
        """L2-Hys factors of the 2x2-cell block at every top-left pixel (computed once).

        Returns
        -------
        a, b : ndarray of shape (3, H - 11, W - 11), dtype float64
            Reciprocals of the two L2-Hys norms: a block value ``v`` normalises to
            ``min(v * a, 0.2) * b`` (``border='image'``; skimage divides, which differs by at
            most an ulp).
        """
        if self._norms is None:
            nch, hc, wc, _ = self.cells.shape
            a = np.empty((nch, hc - CELL, wc - CELL))
            b = np.empty_like(a)
            _norms_kernel(self.cells, a, b)
            self._norms = (a, b)
        return self._norms

    @property
    def nbytes(self):
        """int: memory held by the maps."""
        total = sum(getattr(self, a).nbytes for a in ("cells", "bins", "mag", "abs_g_row",
                                                       "abs_g_col"))
        return total + (0 if self._norms is None else 2 * self._norms[0].nbytes)


# ---------------------------------------------------------------------------- kernels (no checks)

# Orientation boundaries phi_k = 22.5 k degrees (k = 1..7). For a gradient flipped into the upper
# half-plane (y = g_row >= 0), theta >= phi_k  <=>  y cos(phi_k) - x sin(phi_k) >= 0; the
# boundaries 45, 90 and 135 degrees are tested exactly (y >= x, x <= 0, y <= -x), as atan2 is
# exact there; the others are irrational, where atan2 and this test agree but for gradients
# within ~1e-16 relative of a boundary.
_COS = np.cos(np.arange(1, N_ORIENT) * np.pi / N_ORIENT)
_SIN = np.sin(np.arange(1, N_ORIENT) * np.pi / N_ORIENT)


@njit(cache=True)
def _orient_bin(g_col, g_row, cs, sn):
    """skimage's bin of ``rad2deg(arctan2(g_row, g_col)) % 180`` without calling atan2.

    Branch-free: the gradient is flipped into the upper half-plane and the bin counts the
    boundaries it has passed (orientations are random, so branches would mispredict).
    """
    flip = (g_row < 0.0) | ((g_row == 0.0) & (g_col < 0.0))
    sgn = -1.0 if flip else 1.0
    x = sgn * g_col
    y = sgn * g_row
    b = (np.int64(y * cs[0] - x * sn[0] >= 0.0) + np.int64(y >= x)
         + np.int64(y * cs[2] - x * sn[2] >= 0.0) + np.int64(x <= 0.0)
         + np.int64(y * cs[4] - x * sn[4] >= 0.0) + np.int64(y <= -x)
         + np.int64(y * cs[6] - x * sn[6] >= 0.0))
    return 0 if (x == 0.0) & (y == 0.0) else b


#: Orientation bins of a pixel on a window's border whose gradient across the border is zeroed:
#: row gradient zeroed (bin 0), column gradient zeroed (bin 4). From the kernel's Python source
#: (``py_func``), so importing compiles nothing.
_B_ROW0 = int(_orient_bin.py_func(1.0, 0.0, _COS, _SIN))
_B_COL0 = int(_orient_bin.py_func(0.0, 1.0, _COS, _SIN))


@njit(cache=True, nogil=True)
def _level_kernel(rgb, r0, cs, sn, cells, bins, mag, agr, agc):
    """Gradients, bins and dense 6x6 cell histograms of the rows ``r0 .. r0 + n - 1`` of a
    (H, W, 3) float32 level (``n = bins.shape[1]``; cells with top row ``r0 ..``).

    Row by row: the gradients, magnitudes and bins of the row (:func:`_orient_bin` inlined, in
    branch-free loops over the columns); horizontal 6-pixel sums sliding along the row; vertical
    sums of 6 rows sliding over a ring of the last 6 rows (the leaving row subtracted and the
    entering one added in one contiguous pass), exactly re-summed at every cell row that is a
    multiple of 64 (so no drift builds up). Rows from the last multiple of 64 at or before
    ``r0`` are processed but not stored, so a band of rows equals the same rows of the whole
    level's maps bitwise.
    """
    h, w, nch = rgb.shape
    nb = bins.shape[1]
    start = (r0 // 64) * 64
    wc = w - CELL + 1
    n = wc * N_ORIENT
    inv = 1.0 / (CELL * CELL)
    ring = np.zeros((CELL, n))  # horizontal sums (column, orientation) of the last 6 rows
    acc = np.zeros(n)
    hrow = np.zeros(n)
    row = np.zeros(N_ORIENT)
    gr = np.zeros(w)
    gc = np.zeros(w)
    rbin = np.zeros(w, dtype=np.int64)
    rmag = np.zeros(w)
    c0, s0, c2, s2, c4, s4, c6, s6 = cs[0], sn[0], cs[2], sn[2], cs[4], sn[4], cs[6], sn[6]
    for ch in range(nch):
        acc[:] = 0.0
        for r in range(start, r0 + nb):
            if 0 < r < h - 1:
                for c in range(w):
                    gr[c] = np.float64(rgb[r + 1, c, ch]) - np.float64(rgb[r - 1, c, ch])
            else:
                gr[:] = 0.0
            gc[0] = 0.0
            gc[w - 1] = 0.0
            for c in range(1, w - 1):
                gc[c] = np.float64(rgb[r, c + 1, ch]) - np.float64(rgb[r, c - 1, ch])
            for c in range(w):  # _orient_bin, inlined so that the loop vectorises
                g_col = gc[c]
                g_row = gr[c]
                rmag[c] = math.sqrt(g_col * g_col + g_row * g_row)
                flip = (g_row < 0.0) | ((g_row == 0.0) & (g_col < 0.0))
                x = -g_col if flip else g_col
                y = -g_row if flip else g_row
                b = (np.int64(y * c0 - x * s0 >= 0.0) + np.int64(y >= x)
                     + np.int64(y * c2 - x * s2 >= 0.0) + np.int64(x <= 0.0)
                     + np.int64(y * c4 - x * s4 >= 0.0) + np.int64(y <= -x)
                     + np.int64(y * c6 - x * s6 >= 0.0))
                rbin[c] = 0 if (x == 0.0) & (y == 0.0) else b
            if r >= r0:
                rl = r - r0
                b_out, m_out, r_out, c_out = bins[ch, rl], mag[ch, rl], agr[ch, rl], agc[ch, rl]
                for c in range(w):
                    b_out[c] = rbin[c]
                    m_out[c] = rmag[c]
                    r_out[c] = abs(gr[c])
                    c_out[c] = abs(gc[c])
            row[:] = 0.0
            for c in range(CELL):
                row[rbin[c]] += rmag[c]
            for o in range(N_ORIENT):
                hrow[o] = row[o]
            for c in range(1, wc):
                row[rbin[c + CELL - 1]] += rmag[c + CELL - 1]
                row[rbin[c - 1]] -= rmag[c - 1]
                for o in range(N_ORIENT):
                    hrow[c * N_ORIENT + o] = row[o]
            ring_r = ring[r % CELL]
            if r - start >= CELL:  # row r - 6 leaves the 6-row sums
                for i in range(n):
                    acc[i] = (acc[i] - ring_r[i]) + hrow[i]
                    ring_r[i] = hrow[i]
            else:
                for i in range(n):
                    acc[i] += hrow[i]
                    ring_r[i] = hrow[i]
            if r - start >= CELL - 1:
                rr = r - CELL + 1
                if rr % 64 == 0:
                    for i in range(n):
                        t = 0.0
                        for k in range(CELL):
                            t += ring[k, i]
                        acc[i] = t
                if rr >= r0:
                    out = cells[ch, rr - r0].reshape(n)
                    for i in range(n):
                        out[i] = acc[i] * inv


@njit(cache=True)
def _cell_stats(cells, ch, r, c):
    """Energy (sum of squares) and maximum of one cell histogram."""
    e = 0.0
    mx = 0.0
    for o in range(N_ORIENT):
        x = np.float64(cells[ch, r, c, o])
        e += x * x
        if x > mx:
            mx = x
    return e, mx


@njit(cache=True)
def _block_factors(cells, ch, r, c, e00, e01, e10, e11, m00, m01, m10, m11):
    """Reciprocal L2-Hys norms of the block with top-left cell (r, c), from its cells' stats.

    The sum of ``min(v / a, 0.2) ** 2`` is ``sum(min(v, 0.2 a) ** 2) / a ** 2``; a cell whose
    maximum is not clipped contributes its energy, the others are read again.
    """
    s = e00 + e01 + e10 + e11
    a = np.sqrt(s + _EPS * _EPS)
    lim = 0.2 * a
    t = 0.0
    for k in range(4):
        i = k // 2
        j = k % 2
        e = e00 if k == 0 else (e01 if k == 1 else (e10 if k == 2 else e11))
        m = m00 if k == 0 else (m01 if k == 1 else (m10 if k == 2 else m11))
        if m <= lim:
            t += e
        else:
            for o in range(N_ORIENT):
                x = min(np.float64(cells[ch, r + CELL * i, c + CELL * j, o]), lim)
                t += x * x
    t = t / (a * a)
    return 1.0 / a, 1.0 / np.sqrt(t + _EPS * _EPS)


@njit(cache=True)
def _norms_kernel(cells, inv1, inv2):
    """L2-Hys factors of every 2x2-cell block: value = min(v * inv1, 0.2) * inv2.

    Cell statistics are kept for the last ``CELL + 1`` cell rows only (a ring), so they stay in
    cache.
    """
    nch, hc, wc, _ = cells.shape
    wb = wc - CELL
    ring = CELL + 1
    energy = np.empty((ring, wc))
    vmax = np.empty((ring, wc))
    for ch in range(nch):
        for r in range(hc):
            k = r % ring
            for c in range(wc):
                energy[k, c], vmax[k, c] = _cell_stats(cells, ch, r, c)
            if r < CELL:
                continue
            rb = r - CELL  # block row whose lower cells are row r
            k0 = rb % ring
            for c in range(wb):
                inv1[ch, rb, c], inv2[ch, rb, c] = _block_factors(
                    cells, ch, rb, c, energy[k0, c], energy[k0, c + CELL], energy[k, c],
                    energy[k, c + CELL], vmax[k0, c], vmax[k0, c + CELL], vmax[k, c],
                    vmax[k, c + CELL])


@njit(cache=True)
def _fly_kernel(cells, top_left, blk_ch, blk_r, blk_c, blk_ptr, col_dr, col_dc, col_o, out,
                out_cols):
    """Image-border HOG columns with the block factors computed per window (no level maps).

    Same arithmetic as :func:`_norms_kernel` + :func:`_gather_kernel`, so bitwise the same
    values; cheaper when few windows are evaluated on a level.
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


def hog_level(image):
    """Per-level HOG maps: cell histograms at every pixel offset (cells at stride 1).

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB level image (uint8/uint16 or float in ``[0, 1]``), ``H, W >= 24``.

    Returns
    -------
    HogLevel
        ``cells`` of shape ``(3, H - 5, W - 5, 8)`` and the per-pixel maps used by
        :func:`hog_windows`.

    Raises
    ------
    TypeError, ValueError
        For an invalid image (see :func:`cvfs.vision.as_float_rgb`) or one smaller than 24x24.

    References
    ----------
    Dalal and Triggs, CVPR 2005; skimage.feature.hog conventions (module docstring).
    """
    rgb = as_float_rgb(image, min_size=WINDOW)
    return _hog_level(rgb)


def _hog_level(rgb, r0=0, r1=None):
    """Maps of the rows ``r0 .. r1 - 1`` of the level ``rgb`` (default: all rows), equal bitwise
    to those rows of the whole level's maps (gradients read the rows beside the band)."""
    r1 = rgb.shape[0] if r1 is None else r1
    h, w = r1 - r0, rgb.shape[1]
    cells = np.empty((3, h - CELL + 1, w - CELL + 1, N_ORIENT), dtype=np.float32)
    bins = np.empty((3, h, w), dtype=np.int8)
    mag = np.empty((3, h, w), dtype=np.float32)
    agr = np.empty((3, h, w), dtype=np.float32)
    agc = np.empty((3, h, w), dtype=np.float32)
    _level_kernel(rgb, int(r0), _COS, _SIN, cells, bins, mag, agr, agc)
    return HogLevel(cells=cells, bins=bins, mag=mag, abs_g_row=agr, abs_g_col=agc, shape=(h, w))


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


def hog_names():
    """Names of the 864 HOG features, e.g. ``'hog_r_b0_1_c1_0_o3'``.

    Returns
    -------
    list of str
        ``hog_{channel}_b{block_row}_{block_col}_c{cell_row}_{cell_col}_o{orientation}`` in
        feature order.
    """
    names = []
    for ch in "rgb":
        for bi in range(N_BLOCKS):
            for bj in range(N_BLOCKS):
                for ci in range(2):
                    for cj in range(2):
                        for o in range(N_ORIENT):
                            names.append(f"hog_{ch}_b{bi}_{bj}_c{ci}_{cj}_o{o}")
    return names
