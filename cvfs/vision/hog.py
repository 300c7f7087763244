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
   16 cells are read, the 9 blocks normalised.

Gradient conventions are scikit-image's: central differences ``I[r+1] - I[r-1]`` (zero on the first
and last row/column), magnitude ``hypot``, orientation ``rad2deg(arctan2(g_row, g_col)) % 180``
binned without interpolation (bin ``i`` holds ``[22.5 i, 22.5 (i + 1))``), cell value = sum of
magnitudes / 36, L2-Hys with ``eps = 1e-5`` and clipping at 0.2.

``border='window'`` (default) reproduces ``skimage.feature.hog`` applied to the 24x24 crop exactly:
skimage computes gradients inside the crop, so on the crop's first/last row the row gradient is 0
and on its first/last column the column gradient is 0. The assembly corrects the 92 border pixels of
each window from per-pixel maps (cheap). ``border='image'`` uses the gradients of the whole level
at the window border (true image gradients; equals ``skimage.feature.hog`` of the whole level for
cell-aligned windows).

References
----------
Dalal and Triggs, "Histograms of Oriented Gradients for Human Detection", CVPR 2005.
Barbu et al., TPAMI 2017, section 3.3 (288 HOG features per RGB channel on a 24x24 window).
"""

import numpy as np
from numba import njit

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
        Orientation bin of every pixel (-1 if the pixel falls in no bin, which skimage allows for an
        orientation rounding to exactly 180).
    mag : ndarray of shape (3, H, W), dtype float32
        Gradient magnitude of every pixel.
    abs_g_row, abs_g_col : ndarray of shape (3, H, W), dtype float32
        ``|g_row|`` and ``|g_col|``: the magnitude a pixel has when it lies on a vertical
        (``g_col`` zeroed) or horizontal (``g_row`` zeroed) window border.
    shape : tuple of int
        ``(H, W)`` of the level.
    """

    __slots__ = ("cells", "bins", "mag", "abs_g_row", "abs_g_col", "shape")

    def __init__(self, cells, bins, mag, abs_g_row, abs_g_col, shape):
        self.cells = cells
        self.bins = bins
        self.mag = mag
        self.abs_g_row = abs_g_row
        self.abs_g_col = abs_g_col
        self.shape = shape

    @property
    def nbytes(self):
        """int: memory held by the maps."""
        return sum(getattr(self, a).nbytes for a in ("cells", "bins", "mag", "abs_g_row",
                                                      "abs_g_col"))


# ---------------------------------------------------------------------------- kernels (no checks)


@njit(cache=True)
def _orientation_bin(o, n_orient):
    """skimage's bin of orientation ``o`` (degrees): ``i`` with ``w i <= o < w (i + 1)``."""
    width = 180.0 / n_orient
    for i in range(n_orient):
        if o < width * (i + 1) and o >= width * i:
            return i
    return -1


@njit(cache=True)
def _bins_kernel(orient, bins):
    """Orientation bins of a (3, H, W) orientation map (degrees) into int8 ``bins``."""
    nch, h, w = orient.shape
    width = 180.0 / N_ORIENT
    for ch in range(nch):
        for r in range(h):
            for c in range(w):
                o = orient[ch, r, c]
                b = int(o / width)
                # exact comparisons as skimage (guards the rounding of the division)
                if b > N_ORIENT - 1:
                    b = N_ORIENT - 1
                if o < width * b:
                    b -= 1
                elif o >= width * (b + 1):
                    b += 1
                if b < 0 or b >= N_ORIENT or not (o >= width * b and o < width * (b + 1)):
                    b = _orientation_bin(o, N_ORIENT)
                bins[ch, r, c] = b


@njit(cache=True)
def _cells_kernel(bins, mag, cells):
    """Dense 6x6 cell histograms at every top-left pixel (sliding sums in float64)."""
    nch, h, w = bins.shape
    wc = w - CELL + 1
    inv = 1.0 / (CELL * CELL)
    ring = np.zeros((CELL, wc, N_ORIENT))
    acc = np.zeros((wc, N_ORIENT))
    row = np.zeros(N_ORIENT)
    for ch in range(nch):
        acc[:] = 0.0
        for r in range(h):
            # horizontal 6-pixel sums of row r into the ring slot r % CELL
            slot = r % CELL
            row[:] = 0.0
            for c in range(CELL):
                b = bins[ch, r, c]
                if b >= 0:
                    row[b] += mag[ch, r, c]
            for c in range(wc):
                if c > 0:
                    b = bins[ch, r, c + CELL - 1]
                    if b >= 0:
                        row[b] += mag[ch, r, c + CELL - 1]
                    b = bins[ch, r, c - 1]
                    if b >= 0:
                        row[b] -= mag[ch, r, c - 1]
                for o in range(N_ORIENT):
                    if r >= CELL:
                        acc[c, o] -= ring[slot, c, o]
                    ring[slot, c, o] = row[o]
                    acc[c, o] += row[o]
            if r >= CELL - 1:
                rr = r - CELL + 1
                if rr % 64 == 0:
                    # exact re-summation now and then: no drift of the sliding sums
                    for c in range(wc):
                        for o in range(N_ORIENT):
                            s = 0.0
                            for k in range(CELL):
                                s += ring[k, c, o]
                            acc[c, o] = s
                for c in range(wc):
                    for o in range(N_ORIENT):
                        cells[ch, rr, c, o] = acc[c, o] * inv


@njit(cache=True)
def _load_window_cells(hog_cells, bins, mag, agr, agc, ch, r0, c0, window_border, b_row0,
                       b_col0, buf):
    """Copy the 4x4 cells of a window into ``buf`` and apply the window-border correction.

    ``b_row0[s]`` / ``b_col0[s]``: bin of a pixel whose row / column gradient is zeroed, for
    the sign ``s`` (0: other gradient >= 0, 1: < 0).
    """
    for i in range(N_CELLS):
        for j in range(N_CELLS):
            for o in range(N_ORIENT):
                buf[i, j, o] = hog_cells[ch, r0 + CELL * i, c0 + CELL * j, o]
    if not window_border:
        return
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
            k = bins[ch, r, c]
            if k >= 0:
                buf[ci, cj, k] -= mag[ch, r, c] * inv
            left_right = b == 0 or b == last
            if top_bottom and not left_right:
                # g_row zeroed: magnitude |g_col|, orientation of (0, g_col)
                m = agc[ch, r, c]
                if m > 0:
                    buf[ci, cj, b_row0[0]] += m * inv  # both signs share a bin (checked)
            elif left_right and not top_bottom:
                m = agr[ch, r, c]
                if m > 0:
                    buf[ci, cj, b_col0[0]] += m * inv
            b += step


@njit(cache=True)
def _normalize_block(buf, bi, bj, out32):
    """L2-Hys of the 2x2-cell block at block position (bi, bj) of ``buf`` into ``out32``."""
    s = 0.0
    k = 0
    for i in range(2):
        for j in range(2):
            for o in range(N_ORIENT):
                v = buf[bi + i, bj + j, o]
                out32[k] = v
                s += v * v
                k += 1
    norm = np.sqrt(s + _EPS * _EPS)
    s = 0.0
    for k in range(BLOCK_LEN):
        v = out32[k] / norm
        if v > 0.2:
            v = 0.2
        out32[k] = v
        s += v * v
    norm = np.sqrt(s + _EPS * _EPS)
    for k in range(BLOCK_LEN):
        out32[k] = out32[k] / norm


@njit(cache=True)
def _windows_kernel(hog_cells, bins, mag, agr, agc, top_left, block_ch, block_i, block_j,
                    col_block, col_off, out, out_cols, window_border, b_row0, b_col0):
    """Write selected HOG columns of many windows.

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
                _load_window_cells(hog_cells, bins, mag, agr, agc, ch, r0, c0, window_border,
                                   b_row0, b_col0, buf[ch])
                loaded[ch] = True
            _normalize_block(buf[ch], block_i[k], block_j[k], blocks[k])
        for j in range(m):
            out[w, out_cols[j]] = blocks[col_block[j], col_off[j]]


# ---------------------------------------------------------------------------- orchestration


def _gradients(rgb):
    """skimage's central differences, magnitude and orientation, channels first, float64."""
    img = np.moveaxis(rgb, 2, 0).astype(np.float64)
    g_row = np.zeros_like(img)
    g_col = np.zeros_like(img)
    g_row[:, 1:-1, :] = img[:, 2:, :] - img[:, :-2, :]
    g_col[:, :, 1:-1] = img[:, :, 2:] - img[:, :, :-2]
    mag = np.hypot(g_col, g_row)
    orient = np.rad2deg(np.arctan2(g_row, g_col)) % 180
    return g_row, g_col, mag, orient


def _border_bins():
    """Bins of a pixel on a horizontal / vertical window border, as skimage computes them."""
    g = np.array([1.0, -1.0])
    z = np.zeros(2)
    row0 = np.rad2deg(np.arctan2(z, g)) % 180  # g_row zeroed, g_col = +-1
    col0 = np.rad2deg(np.arctan2(g, z)) % 180  # g_col zeroed, g_row = +-1
    b_row0 = np.array([_orientation_bin(float(o), N_ORIENT) for o in row0], dtype=np.int64)
    b_col0 = np.array([_orientation_bin(float(o), N_ORIENT) for o in col0], dtype=np.int64)
    if b_row0[0] != b_row0[1] or b_col0[0] != b_col0[1] or min(b_row0.min(), b_col0.min()) < 0:
        raise RuntimeError(  # pragma: no cover - would need a broken arctan2
            f"unexpected border orientation bins {b_row0}, {b_col0}"
        )
    return b_row0, b_col0


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


def _hog_level(rgb):
    h, w = rgb.shape[:2]
    g_row, g_col, mag, orient = _gradients(rgb)
    bins = np.empty((3, h, w), dtype=np.int8)
    _bins_kernel(orient, bins)
    del orient
    cells = np.empty((3, h - CELL + 1, w - CELL + 1, N_ORIENT), dtype=np.float32)
    _cells_kernel(bins, mag, cells)
    return HogLevel(cells=cells, bins=bins, mag=mag.astype(np.float32),
                    abs_g_row=np.abs(g_row).astype(np.float32),
                    abs_g_col=np.abs(g_col).astype(np.float32), shape=(h, w))


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


def _hog_into(hl, top_left, columns, out, out_cols, window_border):
    """Fill ``out[:, out_cols]`` with HOG ``columns`` (no validation)."""
    if len(columns) == 0 or len(top_left) == 0:
        return
    b_ch, b_i, b_j, slot, off = _hog_plan(columns)
    b_row0, b_col0 = _border_bins()
    _windows_kernel(hl.cells, hl.bins, hl.mag, hl.abs_g_row, hl.abs_g_col,
                    np.ascontiguousarray(top_left, dtype=np.int64), b_ch, b_i, b_j, slot, off,
                    out, np.asarray(out_cols, dtype=np.int64), window_border, b_row0, b_col0)


def hog_windows(level, top_left, *, columns=None, border="window"):
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
    border : {'window', 'image'}, default='window'
        ``'window'``: identical to ``skimage.feature.hog`` on each 24x24 crop; ``'image'``: use
        the level's gradients on the window border (see module docstring).

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
    _hog_into(hl, tl, cols, out, np.arange(len(cols)), window_border)
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
