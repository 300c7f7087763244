"""Haar-like features of 24x24 windows from integral images, per RGB channel.

Feature list. :func:`haar_features` enumerates, deterministically, every feature of five types in a
``window x window`` square (162,336 for 24x24); a feature is ``(type, x, y, w, h)`` with ``x`` the
column and ``y`` the row of its top-left pixel inside the window, ``w`` x ``h`` its full extent:

=====  ==========  =================================================================
type   name        value (mean = mean intensity of a sub-rectangle)
=====  ==========  =================================================================
0      ``edge_x``  left half minus right half (``w`` even)
1      ``edge_y``  top half minus bottom half (``h`` even)
2      ``line_x``  mean of left and right thirds minus middle third (``w % 3 == 0``)
3      ``line_y``  mean of top and bottom thirds minus middle third (``h % 3 == 0``)
4      ``quad``    mean of top-left and bottom-right quarters minus the other two
=====  ==========  =================================================================

Enumeration order: type, then ``h``, ``w``, ``y``, ``x`` ascending. Values are differences of
*means*, so they are zero on constant windows and lie in ``[-1, 1]`` for images in ``[0, 1]``.
:func:`select_haar` keeps ``n`` features evenly spaced over that order (no randomness).

Evaluation. A feature is a weighted sum of at most 9 integral-image corners (``haar_terms``); the
numba kernel evaluates any subset of (channel, feature) columns for many window positions of one
integral image ``(3, H + 1, W + 1)`` (float64, equal to OpenCV's ``cv2.integral``).

References
----------
Viola and Jones, "Robust Real-Time Face Detection", IJCV 2004 (integral images, rectangle
features). Barbu et al., TPAMI 2017, section 3.3 (~61,000 Haar features over RGB).
"""

import numpy as np

from cvfs._jit import njit
from cvfs.vision._checks import as_float_rgb

__all__ = [
    "HAAR_DTYPE",
    "HAAR_TYPES",
    "haar_features",
    "haar_names",
    "haar_terms",
    "haar_windows",
    "integral_image",
    "select_haar",
]

HAAR_TYPES = ("edge_x", "edge_y", "line_x", "line_y", "quad")
#: structured dtype of a feature list; x = column, y = row of the top-left pixel in the window
HAAR_DTYPE = np.dtype([("type", np.uint8), ("x", np.int16), ("y", np.int16), ("w", np.int16),
                       ("h", np.int16)])
# cells per type (rows, cols) and the sign of each cell (before dividing by its area)
_GRID = {0: (1, 2), 1: (2, 1), 2: (1, 3), 3: (3, 1), 4: (2, 2)}
_SIGN = {
    0: np.array([[1.0, -1.0]]),
    1: np.array([[1.0], [-1.0]]),
    2: np.array([[0.5, -1.0, 0.5]]),
    3: np.array([[0.5], [-1.0], [0.5]]),
    4: np.array([[0.5, -0.5], [-0.5, 0.5]]),
}
MAX_TERMS = 9


def _check_window(window):
    if not isinstance(window, (int, np.integer)) or window < 2:
        raise ValueError(f"window must be an int >= 2; received {window!r}")
    return int(window)


def haar_features(window=24):
    """Every Haar feature of the five types in a ``window x window`` square.

    Parameters
    ----------
    window : int, default=24

    Returns
    -------
    features : structured ndarray of shape (n,), dtype HAAR_DTYPE
        Fields ``type, x, y, w, h`` (module docstring); n = 162,336 for ``window=24``.

    Raises
    ------
    ValueError
        If ``window`` is not an int >= 2.
    """
    window = _check_window(window)
    parts = []
    for t in range(len(HAAR_TYPES)):
        gy, gx = _GRID[t]
        for h in range(gy, window + 1, gy):
            for w in range(gx, window + 1, gx):
                ys, xs = np.meshgrid(np.arange(window - h + 1), np.arange(window - w + 1),
                                     indexing="ij")
                f = np.empty(ys.size, dtype=HAAR_DTYPE)
                f["type"], f["x"], f["y"], f["w"], f["h"] = t, xs.ravel(), ys.ravel(), w, h
                parts.append(f)
    return np.concatenate(parts)


def select_haar(n, window=24):
    """``n`` features evenly spaced over :func:`haar_features` (deterministic).

    Parameters
    ----------
    n : int
        Number of features, ``1 <= n <=`` the full count.
    window : int, default=24

    Returns
    -------
    features : structured ndarray of shape (n,), dtype HAAR_DTYPE

    Raises
    ------
    ValueError
        If ``n`` is out of range.
    """
    full = haar_features(window)
    if not isinstance(n, (int, np.integer)) or not 1 <= n <= len(full):
        raise ValueError(f"n must be an int in [1, {len(full)}]; received {n!r}")
    idx = np.floor(np.arange(n) * (len(full) / n)).astype(np.int64)
    return full[idx]


def haar_terms(features):
    """Integral-image corner terms of each feature.

    Parameters
    ----------
    features : structured ndarray of shape (m,), dtype HAAR_DTYPE

    Returns
    -------
    dy, dx : ndarray of shape (m, 9), dtype int64
        Corner offsets (row, col) relative to the window's top-left, into an integral image
        ``S`` with ``S[r, c] = sum(I[:r, :c])``.
    weight : ndarray of shape (m, 9), dtype float64
        Corner weights (0 for unused slots); value = ``sum(weight * S[r0 + dy, c0 + dx])``.
    n_terms : ndarray of shape (m,), dtype int64
    """
    m = len(features)
    dy = np.zeros((m, MAX_TERMS), dtype=np.int64)
    dx = np.zeros((m, MAX_TERMS), dtype=np.int64)
    weight = np.zeros((m, MAX_TERMS))
    n_terms = np.zeros(m, dtype=np.int64)
    for t in range(len(HAAR_TYPES)):
        sel = np.flatnonzero(features["type"] == t)
        if sel.size == 0:
            continue
        gy, gx = _GRID[t]
        f = features[sel]
        ch = f["h"].astype(np.int64) // gy  # cell height
        cw = f["w"].astype(np.int64) // gx
        area = (ch * cw).astype(np.float64)
        p = np.zeros((gy + 2, gx + 2))
        p[1:-1, 1:-1] = _SIGN[t]
        k = 0
        for i in range(gy + 1):
            for j in range(gx + 1):
                # coefficient of corner (i, j): the 2-D difference of the cell signs
                coef = p[i, j] - p[i, j + 1] - p[i + 1, j] + p[i + 1, j + 1]
                if coef == 0:
                    continue
                dy[sel, k] = f["y"] + i * ch
                dx[sel, k] = f["x"] + j * cw
                weight[sel, k] = coef / area
                k += 1
        n_terms[sel] = k
    return dy, dx, weight, n_terms


def haar_names(features, channels="rgb"):
    """Names ``'haar_{channel}_{type}_x{x}_y{y}_w{w}_h{h}'``, channel-major.

    Parameters
    ----------
    features : structured ndarray of shape (m,), dtype HAAR_DTYPE
    channels : str, default='rgb'

    Returns
    -------
    list of str of length ``len(channels) * m``
    """
    rows = [f"{HAAR_TYPES[t]}_x{x}_y{y}_w{w}_h{h}" for t, x, y, w, h in
            zip(*(features[k].tolist() for k in ("type", "x", "y", "w", "h")), strict=True)]
    return [f"haar_{c}_{r}" for c in channels for r in rows]


def integral_image(image):
    """Integral images of the three channels.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB image (uint8/uint16 or float in ``[0, 1]``).

    Returns
    -------
    ndarray of shape (3, H + 1, W + 1), dtype float64
        ``S[ch, r, c] = sum(image[:r, :c, ch])`` (of the float image in ``[0, 1]``).

    Raises
    ------
    TypeError, ValueError
        For an invalid image.
    """
    return _integral(as_float_rgb(image))


def _integral(rgb):
    """Integral images ``(3, H + 1, W + 1)`` of a float level, written channel-major by
    :func:`_integral_rows_kernel` (equal to ``cv2.integral(rgb, sdepth=cv2.CV_64F)`` bitwise,
    without its channel-last layout to transpose)."""
    return _integral_rows(rgb, 0, rgb.shape[0], np.zeros((3, rgb.shape[1] + 1)))


@njit(cache=True, nogil=True)
def _integral_rows_kernel(rgb, r0, top, out):
    """``out[ch, i] = S[ch, r0 + i]`` from ``top = S[:, r0]`` by OpenCV's recurrence
    ``S[r + 1, c + 1] = S[r, c + 1] + sum(rgb[r, :c + 1])`` (the row sum accumulated left to
    right in float64), so the rows equal those of ``cv2.integral`` bitwise."""
    w = rgb.shape[1]
    for ch in range(rgb.shape[2]):
        for x in range(w + 1):
            out[ch, 0, x] = top[ch, x]
        for i in range(out.shape[1] - 1):
            prev = out[ch, i]
            cur = out[ch, i + 1]
            cur[0] = 0.0
            s = 0.0
            for x in range(w):
                s += np.float64(rgb[r0 + i, x, ch])
                cur[x + 1] = prev[x + 1] + s


@njit(cache=True, nogil=True)
def _integral_tops_kernel(rgb, starts, out):
    """``out[k] = S[:, starts[k]]`` (``starts`` increasing) by the recurrence of
    :func:`_integral_rows_kernel`, keeping one row of ``S`` at a time."""
    w = rgb.shape[1]
    row = np.zeros((rgb.shape[2], w + 1))
    r = 0
    for k in range(starts.shape[0]):
        while r < starts[k]:
            for ch in range(rgb.shape[2]):
                s = 0.0
                for x in range(w):
                    s += np.float64(rgb[r, x, ch])
                    row[ch, x + 1] = row[ch, x + 1] + s
            r += 1
        out[k] = row


def _integral_rows(rgb, r0, r1, top=None):
    """Rows ``r0 .. r1`` (inclusive) of ``_integral(rgb)``, bitwise, without the other rows.

    ``top`` is row ``r0`` of the integral images, shape ``(3, W + 1)`` (from
    :func:`_integral_tops`; zeros when ``r0 == 0``). Returns shape ``(3, r1 - r0 + 1, W + 1)``.
    """
    w = rgb.shape[1]
    if top is None:
        top = _integral_tops(rgb, [r0])[0]
    out = np.empty((3, r1 - r0 + 1, w + 1))
    _integral_rows_kernel(rgb, int(r0), top, out)
    return out


def _integral_tops(rgb, starts):
    """Rows ``starts`` (increasing ints) of ``_integral(rgb)``: shape ``(len(starts), 3, W + 1)``,
    one pass over the image rows above the last start."""
    starts = np.asarray(starts, dtype=np.int64)
    out = np.empty((starts.size, 3, rgb.shape[1] + 1))
    _integral_tops_kernel(rgb, starts, out)
    return out


_BATCH = 64  # windows per batch of the kernel
_MIN_RUN = 8  # shortest run of horizontally adjacent windows worth the contiguous path
_FCHUNK = 256  # columns per block of the output written row by row
_PATCH_MIN_COLS = 512  # scattered windows: copy corner patches when at least this many columns


@njit(cache=True)
def _haar_kernel(flat, base, off, off_local, weight, n_terms, out, out_cols, side, plane, w1):
    """Haar columns of many windows from a flattened integral image.

    ``flat`` is ``S.ravel()`` of the ``(3, H + 1, W + 1)`` integral images, ``base[w]`` the flat
    index of window ``w``'s top-left corner, ``off[j, t]`` the flat offset of corner term ``t`` of
    column ``j`` (channel included) and ``weight[j, t]`` its weight:
    ``out[w, out_cols[j]] = sum_t weight[j, t] * flat[base[w] + off[j, t]]`` (float64 sums).
    ``off_local[j, t]`` is the same corner in a ``(3, side, side)`` patch of corners
    (``side = window + 1``); ``plane = (H + 1) (W + 1)`` and ``w1 = W + 1``.

    Windows are processed in batches; a batch of horizontally adjacent windows (consecutive
    ``base``) reads contiguous slices; other batches gather, through a position-major copy of their
    corner patches when there are many columns. All paths add the same terms in the same order, so
    results do not depend on the batching.
    """
    n = base.shape[0]
    m = off.shape[0]
    tmp = np.empty((_FCHUNK, _BATCH))
    patch = np.empty((3 * side * side, _BATCH))
    k0 = 0
    while k0 < n:
        run = 1
        while run < _BATCH and k0 + run < n and base[k0 + run] == base[k0] + run:
            run += 1
        contiguous = run >= _MIN_RUN
        nb = run if contiguous else min(_BATCH, n - k0)
        b0 = base[k0]
        # scattered windows and many columns: copy the batch's corner patches transposed
        # (position-major) so every term reads a contiguous row; few columns: gather directly
        use_patch = not contiguous and m >= _PATCH_MIN_COLS
        if use_patch:
            for ch in range(3):
                for i in range(side):
                    for jj in range(side):
                        p = (ch * side + i) * side + jj
                        src = ch * plane + i * w1 + jj
                        for k in range(nb):
                            patch[p, k] = flat[base[k0 + k] + src]
        for j0 in range(0, m, _FCHUNK):
            nf = min(_FCHUNK, m - j0)
            for jj in range(nf):
                j = j0 + jj
                acc = tmp[jj, :nb]
                for t in range(n_terms[j]):
                    wt = weight[j, t]
                    if contiguous or use_patch:
                        if contiguous:
                            row = flat[b0 + off[j, t]:b0 + off[j, t] + nb]
                        else:
                            row = patch[off_local[j, t], :nb]
                        if t == 0:
                            for k in range(nb):
                                acc[k] = wt * row[k]
                        else:
                            for k in range(nb):
                                acc[k] += wt * row[k]
                    else:
                        o = off[j, t]
                        if t == 0:
                            for k in range(nb):
                                acc[k] = wt * flat[base[k0 + k] + o]
                        else:
                            for k in range(nb):
                                acc[k] += wt * flat[base[k0 + k] + o]
            # write window rows (contiguous when out_cols are)
            for k in range(nb):
                for jj in range(nf):
                    out[k0 + k, out_cols[j0 + jj]] = tmp[jj, k]
        k0 += nb


class _HaarPlan:
    """Corner tables of (channel, feature) columns, built once and reused."""

    __slots__ = ("ch", "dy", "dx", "weight", "n_terms")

    def __init__(self, features, channels):
        channels = np.asarray(channels, dtype=np.int64)
        dy, dx, weight, n_terms = haar_terms(features)
        self.ch = channels
        self.dy, self.dx, self.weight, self.n_terms = dy, dx, weight, n_terms

    def take(self, idx):
        p = _HaarPlan.__new__(_HaarPlan)
        p.ch, p.dy, p.dx = self.ch[idx], self.dy[idx], self.dx[idx]
        p.weight, p.n_terms = self.weight[idx], self.n_terms[idx]
        return p

    def run(self, integral, top_left, out, out_cols):
        """``out[:, out_cols] =`` the plan's columns at windows with the given top-lefts."""
        if len(self.ch) == 0 or len(top_left) == 0:
            return
        _, h1, w1 = integral.shape
        tl = np.asarray(top_left, dtype=np.int64)
        base = np.ascontiguousarray(tl[:, 0] * w1 + tl[:, 1])
        off = self.ch[:, None] * (h1 * w1) + self.dy * w1 + self.dx
        side = int(max(self.dy.max(), self.dx.max())) + 1
        off_local = (self.ch[:, None] * side + self.dy) * side + self.dx
        _haar_kernel(integral.reshape(-1), base, off, off_local, self.weight, self.n_terms, out,
                     np.asarray(out_cols, dtype=np.int64), side, h1 * w1, w1)


def haar_windows(image_or_integral, top_left, features, *, channels=(0, 1, 2)):
    """Haar feature values of 24x24 (or any size) windows at the given top-left pixels.

    Parameters
    ----------
    image_or_integral : ndarray of shape (H, W, 3) or (3, H + 1, W + 1)
        RGB image, or its :func:`integral_image` (float64) to reuse across calls.
    top_left : array_like of int, shape (n, 2)
        ``(row, col)`` of each window's top-left pixel.
    features : structured ndarray of shape (m,), dtype HAAR_DTYPE
    channels : sequence of int, default=(0, 1, 2)
        Channels to evaluate; output columns are channel-major.

    Returns
    -------
    ndarray of shape (n, len(channels) * m), dtype float32

    Raises
    ------
    ValueError
        If a feature leaves the image for some window, ``top_left`` is malformed or ``channels``
        is out of range.
    TypeError
        For an invalid image or ``features`` without ``HAAR_DTYPE`` fields.
    """
    a = np.asarray(image_or_integral)
    if a.ndim == 3 and a.shape[0] == 3 and a.dtype == np.float64 and a.shape[2] != 3:
        integral = np.ascontiguousarray(a)
    else:
        integral = integral_image(a)
    if not isinstance(features, np.ndarray) or features.dtype.names is None or not set(
            HAAR_DTYPE.names) <= set(features.dtype.names):
        raise TypeError("features must be a structured array with fields type, x, y, w, h "
                        "(see haar_features)")
    channels = np.asarray(channels, dtype=np.int64)
    if channels.ndim != 1 or channels.size == 0 or channels.min() < 0 or channels.max() > 2:
        raise ValueError(f"channels must be a non-empty sequence in 0..2; received {channels}")
    tl = np.asarray(top_left)
    if tl.ndim != 2 or tl.shape[1] != 2 or (tl.size and tl.dtype.kind not in "iu"):
        raise ValueError(f"top_left must be an (n, 2) integer array; received shape {tl.shape}, "
                         f"dtype {tl.dtype}")
    tl = tl.astype(np.int64)
    h, w = integral.shape[1] - 1, integral.shape[2] - 1
    if tl.size and len(features):
        fy = int((features["y"].astype(np.int64) + features["h"]).max())
        fx = int((features["x"].astype(np.int64) + features["w"]).max())
        if tl.min() < 0 or (tl[:, 0] + fy).max() > h or (tl[:, 1] + fx).max() > w:
            raise ValueError(
                f"top_left: some windows put features outside the image of shape ({h}, {w}); "
                f"expected 0 <= row <= {h - fy} and 0 <= col <= {w - fx}"
            )
    m = len(features)
    plan = _HaarPlan(np.tile(features, len(channels)), np.repeat(channels, m))
    out = np.empty((len(tl), len(channels) * m), dtype=np.float32)
    plan.run(integral, tl, out, np.arange(out.shape[1]))
    return out
