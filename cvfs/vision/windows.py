"""The feature pool of 24x24 windows: one column space over ``[HOG 864 | Haar 3 x n]``.

Columns. ``0 .. 863`` are HOG (:mod:`cvfs.vision.hog`, channel-major ``[R | G | B]`` of 288);
``864 + ch * haar_per_channel + j`` is Haar feature ``pool.haar[j]`` (:mod:`cvfs.vision.haar`) on
channel ``ch`` (0 = R, 1 = G, 2 = B). With the default ``haar_per_channel=20_000``:
``n_features = 864 + 60_000 = 60_864`` (the paper: 864 HOG + ~61,000 Haar).

Windows. A window is addressed by its *centre* ``(row, col)`` on a pyramid level (``col`` = x,
``row`` = y, integers); it covers rows ``row - 12 .. row + 11`` and columns ``col - 12 .. col + 11``
and must lie inside the level: ``12 <= row <= H - 12`` and ``12 <= col <= W - 12``
(:func:`valid_centres` tests this, :func:`window_centres` enumerates a grid).

Typical use::

    pool = FeaturePool()                               # 60,864 columns
    for level in gaussian_pyramid(rgb, max_scale=2.0):
        cache = LevelCache(level)                      # integral images, HOG maps: once per level
        X = pool.compute(cache, centres)               # (n, 60_864) float32: training
        Xs = pool.compute(cache, centres, columns=sel) # (n, len(sel)): scanning selected columns

Everything is deterministic (no randomness); values are float32 computed in float64.

Performance (one core, see ``benchmarks/keypoints/vision_throughput.py``): runs of horizontally
adjacent centres (as :func:`window_centres` returns them) read contiguous memory, ~4e8 Haar
features/s; scattered centres (e.g. the survivors of a cascade stage) ~1-3e8/s; HOG columns with
``hog_border='image'`` ~8e5 windows/s for all 864. For large outputs, chunk the centres (e.g. 20,000
per call) and pass a reused ``out=`` buffer (fresh gigabyte arrays cost page faults).

References
----------
Barbu et al., "Feature Selection with Annealing for Computer Vision and Big Data Learning",
IEEE TPAMI 2017, section 3.3 (feature pool of 864 HOG and ~61,000 Haar features, 24x24 window).
"""

import numpy as np

from cvfs.vision._checks import as_float_rgb
from cvfs.vision.haar import (
    _HaarPlan,
    _integral,
    _integral_rows,
    _integral_tops,
    haar_names,
    select_haar,
)
from cvfs.vision.hog import (
    N_HOG,
    WINDOW,
    _hog_level,
    hog_names,
)
from cvfs.vision.hog_assembly import HogColumns, _check_border, _check_columns
from cvfs.vision.pyramid import PyramidLevel

__all__ = [
    "HALF",
    "ColumnPlan",
    "FeaturePool",
    "LevelBand",
    "LevelCache",
    "level_bands",
    "valid_centres",
    "window_centres",
]

HALF = WINDOW // 2  #: window top-left = centre - HALF


class LevelCache:
    """One pyramid level with its integral images and HOG maps, computed lazily once.

    Parameters
    ----------
    level : PyramidLevel or ndarray of shape (H, W, 3)
        A level of :func:`cvfs.vision.gaussian_pyramid`, or an RGB image (uint8/uint16 or float in
        ``[0, 1]``) taken as a level of scale 1.

    Attributes
    ----------
    image : ndarray of shape (H, W, 3), dtype float32
    level : PyramidLevel
        The level (scale and coordinate mapping ``level.to_original``).
    shape : tuple of int
        ``(H, W)``.
    integral : ndarray of shape (3, H + 1, W + 1), dtype float64
        Integral images (computed on first access).
    hog : cvfs.vision.hog.HogLevel
        Dense cell-histogram maps (computed on first access).

    Raises
    ------
    TypeError, ValueError
        For an invalid image or one smaller than 24x24.
    """

    def __init__(self, level):
        if isinstance(level, PyramidLevel):
            rgb = as_float_rgb(level.image, name="level.image", min_size=WINDOW)
            self.level = level
        else:
            rgb = as_float_rgb(level, min_size=WINDOW)
            self.level = PyramidLevel(image=rgb, index=0, scale=1.0, scale_y=1.0, scale_x=1.0)
        self.image = rgb
        self._integral = None
        self._hog = None

    @property
    def shape(self):
        return self.image.shape[:2]

    @property
    def integral(self):
        if self._integral is None:
            self._integral = _integral(self.image)
        return self._integral

    @property
    def hog(self):
        if self._hog is None:
            self._hog = _hog_level(self.image)
        return self._hog

    def clear(self):
        """Drop the cached maps (they are rebuilt on demand)."""
        self._integral = None
        self._hog = None


class LevelBand:
    """Rows ``r0 .. r1 - 1`` of a pyramid level with the integral images and HOG maps of those
    rows only, equal bitwise to the same rows of the whole level's :class:`LevelCache` maps.

    A band stands in for a :class:`LevelCache` wherever windows are addressed by position: the
    window with top-left ``(row, col)`` on the level is ``(row - r0, col)`` on the band. Build
    bands with :func:`level_bands`.

    Attributes
    ----------
    image : ndarray of shape (r1 - r0, W, 3), dtype float32
        A view of the level's rows.
    level : PyramidLevel
    row0 : int
        ``r0``, the band's first row on the level.
    shape : tuple of int
        ``(r1 - r0, W)``.
    integral : ndarray of shape (3, r1 - r0 + 1, W + 1), dtype float64
        Rows ``r0 .. r1`` of the level's integral images (computed on first access).
    hog : cvfs.vision.hog.HogLevel
        The level's HOG maps restricted to the band: gradients use the rows beside the band
        (computed on first access).
    """

    def __init__(self, level, r0, r1, top):
        self.level = level
        self.row0 = int(r0)
        self.image = level.image[r0:r1]
        self._top = top
        self._integral = None
        self._hog = None

    @property
    def shape(self):
        return self.image.shape[:2]

    @property
    def integral(self):
        if self._integral is None:
            self._integral = _integral_rows(self.level.image, self.row0,
                                            self.row0 + self.shape[0], self._top)
        return self._integral

    @property
    def hog(self):
        if self._hog is None:
            self._hog = _hog_level(self.level.image, self.row0, self.row0 + self.shape[0])
        return self._hog

    def clear(self):
        """Drop the cached maps (they are rebuilt on demand)."""
        self._integral = None
        self._hog = None


def level_bands(level, rows):
    """Bands of one pyramid level whose maps equal those of the whole level.

    Parameters
    ----------
    level : PyramidLevel
    rows : sequence of (int, int)
        ``(r0, r1)`` row ranges with ``0 <= r0 < r1 <= H`` and ``r1 - r0 >= 24``; the bands may
        overlap.

    Returns
    -------
    bands : list of LevelBand
        In the order of ``rows``. The integral images' first rows of all bands come from one
        pass over the level; the other maps are built when a band first needs them and freed
        with the band.

    Raises
    ------
    ValueError
        If a row range is out of bounds or shorter than a window.
    """
    h = level.shape[0]
    rows = [(int(a), int(b)) for a, b in rows]
    for a, b in rows:
        if not 0 <= a < b <= h or b - a < WINDOW:
            raise ValueError(f"rows: band ({a}, {b}) must satisfy 0 <= r0 < r1 <= {h} and "
                             f"r1 - r0 >= {WINDOW}")
    order = np.argsort([a for a, _ in rows], kind="stable")
    tops = _integral_tops(level.image, [rows[i][0] for i in order])
    if (order != np.arange(len(rows))).any():  # one copy of the tops only when out of order
        tops[order] = tops.copy()
    return [LevelBand(level, a, b, tops[i]) for i, (a, b) in enumerate(rows)]


def valid_centres(shape, centres):
    """Which window centres lie far enough inside a level.

    Parameters
    ----------
    shape : tuple of int
        ``(H, W)`` of the level.
    centres : array_like of shape (n, 2)
        ``(row, col)`` centres.

    Returns
    -------
    ndarray of shape (n,), dtype bool
        ``HALF <= row <= H - HALF`` and ``HALF <= col <= W - HALF``.
    """
    c = np.asarray(centres).reshape(-1, 2)
    h, w = shape[:2]
    return (c[:, 0] >= HALF) & (c[:, 1] >= HALF) & (c[:, 0] <= h - HALF) & (c[:, 1] <= w - HALF)


def window_centres(shape, stride=1):
    """All valid window centres of a level on a grid (row-major).

    Parameters
    ----------
    shape : tuple of int
        ``(H, W)`` of the level.
    stride : int, default=1
        Grid step in pixels (1 = every window).

    Returns
    -------
    ndarray of shape (n, 2), dtype int64
        ``(row, col)`` centres from ``(12, 12)``; empty if the level is smaller than 24x24.

    Raises
    ------
    ValueError
        If ``stride`` is not a positive int.
    """
    if not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"stride must be a positive int; received {stride!r}")
    h, w = shape[:2]
    rows = np.arange(HALF, h - HALF + 1, stride, dtype=np.int64)
    cols = np.arange(HALF, w - HALF + 1, stride, dtype=np.int64)
    rr, cc = np.meshgrid(rows, cols, indexing="ij")
    return np.stack([rr.ravel(), cc.ravel()], axis=1)


class FeaturePool:
    """HOG + Haar features of 24x24 windows in one column space.

    Parameters
    ----------
    haar_per_channel : int, default=20_000
        Haar features per RGB channel, chosen by :func:`cvfs.vision.select_haar` (deterministic).
    hog_border : {'image', 'window'}, default='image'
        Gradients on the window border: ``'image'`` uses the level's gradients (fast: blocks are
        shared between windows), ``'window'`` equals ``skimage.feature.hog`` on each 24x24 crop
        (see :mod:`cvfs.vision.hog`).

    Attributes
    ----------
    n_hog : int
        864.
    n_haar : int
        ``3 * haar_per_channel``.
    n_features : int
        ``n_hog + n_haar``.
    haar : structured ndarray of shape (haar_per_channel,), dtype HAAR_DTYPE
        The Haar feature list (type, x, y, w, h) shared by the three channels.

    Raises
    ------
    ValueError
        If ``haar_per_channel`` or ``hog_border`` is invalid.

    Notes
    -----
    :meth:`get_params` gives the JSON-able spec to store beside a model; ``FeaturePool(**params)``
    rebuilds the same pool.
    """

    window = WINDOW

    def __init__(self, haar_per_channel=20_000, *, hog_border="image"):
        if (not isinstance(haar_per_channel, (int, np.integer)) or isinstance(haar_per_channel,
                                                                               bool)
                or haar_per_channel < 0):
            raise ValueError(
                f"haar_per_channel must be a non-negative int; received {haar_per_channel!r}"
            )
        self._window_border = _check_border(hog_border)
        self.haar_per_channel = int(haar_per_channel)
        self.hog_border = hog_border
        self.haar = (select_haar(self.haar_per_channel) if self.haar_per_channel
                     else np.empty(0, dtype=select_haar(1).dtype))
        self.n_hog = N_HOG
        self.n_haar = 3 * self.haar_per_channel
        self.n_features = self.n_hog + self.n_haar
        self._names = None  # built on first use of names()
        self._haar_plan = _HaarPlan(np.tile(self.haar, 3),
                                    np.repeat(np.arange(3), self.haar_per_channel))

    def __repr__(self):
        return (f"FeaturePool(haar_per_channel={self.haar_per_channel}, "
                f"hog_border={self.hog_border!r})")

    def get_params(self):
        """dict: the constructor parameters (JSON-able)."""
        return {"haar_per_channel": self.haar_per_channel, "hog_border": self.hog_border}

    def names(self, columns=None):
        """Feature names (``hog_...`` then ``haar_...``).

        Parameters
        ----------
        columns : array_like of int, optional
            Column indices (default: all).

        Returns
        -------
        list of str
        """
        cols = _check_columns(columns, self.n_features)
        if self._names is None:
            self._names = hog_names() + haar_names(self.haar, "rgb")
        return [self._names[c] for c in cols]

    def is_hog(self, columns=None):
        """Boolean mask of HOG columns.

        Parameters
        ----------
        columns : array_like of int, optional

        Returns
        -------
        ndarray of shape (m,), dtype bool
        """
        return _check_columns(columns, self.n_features) < N_HOG

    def cache(self, level):
        """Wrap a level (or image) into a :class:`LevelCache` (a :class:`LevelBand` as it is)."""
        return level if isinstance(level, (LevelCache, LevelBand)) else LevelCache(level)

    def compute(self, level, centres, columns=None, *, out=None):
        """Feature values of windows centred at ``centres`` on one level.

        Parameters
        ----------
        level : LevelCache, LevelBand, PyramidLevel or ndarray of shape (H, W, 3)
            Pass a :class:`LevelCache` to reuse integral images and HOG maps across calls
            (a :class:`LevelBand`: centres on the band).
        centres : array_like of int, shape (n, 2)
            Window centres ``(row, col)``; each must satisfy :func:`valid_centres`.
        columns : array_like of int of shape (m,), optional
            Columns in ``[0, n_features)``, any order, repeats allowed (default: all).
        out : ndarray of shape (n, m), dtype float32, optional
            Preallocated output (C-contiguous).

        Returns
        -------
        ndarray of shape (n, m), dtype float32
            ``X[i, j]`` = feature ``columns[j]`` of window ``i``.

        Raises
        ------
        ValueError
            If ``centres`` is not ``(n, 2)`` integers or a window leaves the level, ``columns`` is
            out of range, or ``out`` has the wrong shape/dtype.
        TypeError
            For an invalid image.
        """
        cache = self.cache(level)
        cols = _check_columns(columns, self.n_features)
        tl = _centres_to_top_left(centres, cache.shape)
        if out is None:
            out = np.empty((len(tl), len(cols)), dtype=np.float32)
        elif (not isinstance(out, np.ndarray) or out.dtype != np.float32
              or out.shape != (len(tl), len(cols)) or not out.flags.c_contiguous):
            raise ValueError(
                f"out must be a C-contiguous float32 array of shape {(len(tl), len(cols))}; "
                f"received {getattr(out, 'dtype', type(out))} {getattr(out, 'shape', '')}"
            )
        if len(tl) == 0 or len(cols) == 0:
            return out
        return self.column_plan(cols)(cache, tl, out)

    def column_plan(self, columns):
        """A :class:`ColumnPlan` of ``columns``: their features for many windows and levels,
        with the per-column tables built once.

        Parameters
        ----------
        columns : array_like of int of shape (m,)
            Columns in ``[0, n_features)``.

        Returns
        -------
        ColumnPlan

        Raises
        ------
        ValueError
            If a column is out of range.
        """
        return ColumnPlan(self, _check_columns(columns, self.n_features))


class ColumnPlan:
    """Fixed columns of a :class:`FeaturePool` for windows of any level, their HOG and Haar
    tables built once (:meth:`FeaturePool.column_plan`); values equal
    :meth:`FeaturePool.compute`'s."""

    def __init__(self, pool, columns):
        self.columns = columns
        self.hog_pos = np.flatnonzero(columns < N_HOG)
        self.haar_pos = np.flatnonzero(columns >= N_HOG)
        self._hog = HogColumns(columns[self.hog_pos], pool._window_border)
        self._haar = pool._haar_plan.take(columns[self.haar_pos] - N_HOG)

    def __call__(self, cache, top_left, out=None):
        """Features ``(n, m)`` float32 of the windows with top-left corners ``top_left``
        (int64 (n, 2), inside the level; not checked) of a :class:`LevelCache` or
        :class:`LevelBand`, written into ``out`` when given."""
        if out is None:
            out = np.empty((len(top_left), len(self.columns)), dtype=np.float32)
        if len(top_left) == 0:
            return out
        if self.hog_pos.size:
            self._hog(cache.hog, top_left, out, self.hog_pos)
        if self.haar_pos.size:
            self._haar.run(cache.integral, top_left, out, self.haar_pos)
        return out


def _centres_to_top_left(centres, shape):
    c = np.asarray(centres)
    if c.ndim != 2 or c.shape[1] != 2:
        raise ValueError(f"centres must have shape (n, 2) of (row, col); received shape {c.shape}")
    if c.size and c.dtype.kind not in "iu":
        raise ValueError(f"centres must hold integers (row, col); received dtype {c.dtype}")
    c = c.astype(np.int64)
    ok = valid_centres(shape, c)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        h, w = shape
        raise ValueError(
            f"centres: {int((~ok).sum())} window(s) leave the level of shape {(h, w)}; expected "
            f"{HALF} <= row <= {h - HALF} and {HALF} <= col <= {w - HALF}, received (row, col) = "
            f"{tuple(int(v) for v in c[i])} at index {i}"
        )
    return c - HALF
