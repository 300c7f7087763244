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
2. :func:`~cvfs.vision.hog_assembly.hog_windows` (:mod:`cvfs.vision.hog_assembly`) assembles
   windows (any top-left, so stride 1 scanning works) from the maps: with ``border='image'`` each
   feature is gathered from the per-level block maps, with ``border='window'`` the 16 cells are
   read, border-corrected and the 9 blocks normalised.

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
    "N_HOG",
    "N_HOG_PER_CHANNEL",
    "N_ORIENT",
    "WINDOW",
    "HogLevel",
    "hog_level",
    "hog_names",
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
        :func:`cvfs.vision.hog_assembly.hog_windows`.

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
