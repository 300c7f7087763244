"""Responses: how one feature column becomes a group of basis columns.

Both responses are described to the kernels by a per-feature parameter table ``fp`` of shape
(m, 2 + G): ``fp[:, 0]`` an offset, ``fp[:, 1]`` a scale, ``fp[:, 2:]`` the training mean of each
of the G basis columns (the solver works on centred basis columns, so the intercept decouples
from the features and the step size sees the real correlations, not the common mean).

- :class:`Linear` (G = 1): u(x) = x * scale with scale = 1 / std (standardised columns).
- :class:`PiecewiseLinear` (G = B + 1): s = clip((x - lo) * B / (hi - lo), 0, B), bin
  j = min(floor(s), B - 1), alpha = s - j; u_j = 1 - alpha, u_{j+1} = alpha, other entries 0
  (paper section 2.5.1). Only bin index and offset are ever computed; the N x M x (B+1) basis
  is never materialised by the solver (:meth:`PiecewiseLinear.basis` does, for tests and
  small data only).
"""

import warnings

import numpy as np

__all__ = ["Linear", "NearConstantWarning", "PiecewiseLinear", "get_response"]

#: a varying column whose spread is at most this fraction of its magnitude is near-constant:
#: it is used (its values differ), with a :class:`NearConstantWarning`, as its values keep
#: only a few significant digits (float64 rounding is 1.1e-16 relative)
_NEAR_CONST_RTOL = 1e-12


class NearConstantWarning(UserWarning):
    """A feature column varies by less than 1e-12 of its magnitude: it is used (only a column
    of equal values is constant), but its values carry few significant digits."""


def _warn_near_constant(near, spread, magnitude):
    """Warn once about the near-constant columns (boolean mask ``near``)."""
    cols = np.flatnonzero(near)
    if cols.size == 0:
        return
    j = int(cols[0])
    shown = ", ".join(map(str, cols[:5])) + (", ..." if cols.size > 5 else "")
    warnings.warn(
        f"{cols.size} X column(s) vary by less than {_NEAR_CONST_RTOL:g} of their magnitude "
        f"(columns {shown}; column {j}: spread {spread[j]:.3g}, magnitude {magnitude[j]:.3g}); "
        "they are used, but their values keep few significant digits: centre or rescale X",
        NearConstantWarning, stacklevel=4)


class _ColumnStats:
    """Streaming column statistics over row blocks: mean, sum of squared deviations (m2),
    and with ``minmax`` min and max (else they stay at +-inf), from shifted sums (shift = the
    first row seen)."""

    def __init__(self, m, minmax=True):
        self.minmax = bool(minmax)
        self.n = 0
        self.shift = None
        self.s1 = np.zeros(m)
        self.s2 = np.zeros(m)
        self.lo = np.full(m, np.inf)
        self.hi = np.full(m, -np.inf)

    def update(self, block, d=None, gacc=None, sw=None):
        """Add the rows of ``block`` (C-contiguous float32/float64). With per-row weights ``d``
        (the block's rows), also accumulate gacc_j += sum_i d_i (x_ij - shift_j) into ``gacc``
        (M,). With sample weights ``sw`` (the block's rows) every statistic is weighted: ``n``
        is the sum of the weights and min/max are over the rows of positive weight. Returns
        False if a value is NaN or infinite."""
        from cvfs.core._stats_kernels import column_stats

        if block.shape[0] == 0:
            return True
        if self.shift is None:
            self.shift = np.where(np.isfinite(block[0]), block[0], 0.0).astype(np.float64)
        if sw is not None:
            return self._update_weighted(block, d, gacc, sw)
        self.n += block.shape[0]
        if d is None:
            d, gacc = np.zeros(block.shape[0]), np.zeros(block.shape[1])
        return column_stats(block, self.shift, self.s1, self.s2, self.lo, self.hi, d, gacc,
                            self.minmax)

    def _update_weighted(self, block, d, gacc, sw, chunk=1024):
        """:meth:`update` with sample weights: vectorised sums over chunks of rows."""
        self.n += float(sw.sum())
        for r0 in range(0, block.shape[0], chunk):
            e = block[r0:r0 + chunk] - self.shift
            w = sw[r0:r0 + chunk]
            self.s1 += w @ e
            self.s2 += w @ (e * e)
            if d is not None:
                gacc += d[r0:r0 + chunk] @ e
            if self.minmax and np.any(w > 0):
                rows = block[r0:r0 + chunk][w > 0]
                np.minimum(self.lo, rows.min(axis=0), out=self.lo)
                np.maximum(self.hi, rows.max(axis=0), out=self.hi)
        return bool(np.isfinite(self.s1).all() and np.isfinite(self.s2).all())

    @property
    def mean(self):
        return self.shift + self.s1 / (self.n or 1)

    @property
    def m2(self):
        return np.maximum(self.s2 - self.s1 * self.s1 / (self.n or 1), 0.0)


class Linear:
    """Linear response: one standardised coefficient per feature (G = 1)."""

    name = "linear"
    bins = 0
    G = 1
    n_stat_passes = 1

    def table(self, stats):
        """The parameter table ``fp`` (m, 3) from column statistics."""
        m2 = stats.m2
        std = np.sqrt(m2 / (stats.n or 1))
        with np.errstate(divide="ignore", over="ignore"):
            inv = 1.0 / std
        # constant columns, never selected: equal values (the statistics are sums of
        # deviations from one of the column's values, so they are exactly zero); the test
        # does not depend on the column's offset or scale
        const = (m2 == 0) | ~np.isfinite(inv)
        _warn_near_constant(~const & (std <= _NEAR_CONST_RTOL * np.abs(stats.mean)), std,
                            np.abs(stats.mean))
        scale = np.where(const, 0.0, inv)
        return np.column_stack([np.zeros_like(scale), scale, stats.mean * scale])

    def basis(self, X, fp):
        """Uncentred basis, ndarray of shape (N, m) (reference; not used by the solver)."""
        return (np.asarray(X, dtype=np.float64) - fp[:, 0]) * fp[:, 1]


class PiecewiseLinear:
    """Piecewise-linear response with ``bins`` equal bins on [min, max] of the training data,
    clipped outside (paper section 2.5.1); G = bins + 1 coefficients per feature.

    Parameters
    ----------
    bins : int
        B >= 1.
    """

    name = "piecewise_linear"
    n_stat_passes = 2

    def __init__(self, bins):
        if int(bins) != bins or bins < 1:
            raise ValueError(f"bins must be a positive integer or None, got {bins!r}")
        self.bins = int(bins)
        self.G = self.bins + 1

    def bin_table(self, stats):
        """Offset/scale columns of ``fp`` (basis means still zero) from min/max."""
        width = stats.hi - stats.lo
        # constant columns (min = max) get scale 0: every value in bin 0, a basis column
        # equal to its mean, never selected
        varies = width > 0
        magnitude = np.maximum(np.abs(stats.lo), np.abs(stats.hi))
        _warn_near_constant(varies & (width <= _NEAR_CONST_RTOL * magnitude), width, magnitude)
        with np.errstate(divide="ignore", over="ignore"):
            scale = np.where(varies, self.bins / np.where(varies, width, 1.0), 0.0)
        scale[~np.isfinite(scale)] = 0.0
        fp = np.zeros((stats.lo.size, 2 + self.G))
        fp[:, 0] = stats.lo
        fp[:, 1] = scale
        return fp

    def bin_offset(self, X, fp):
        """Bin index j (int64) and offset alpha in [0, 1], each of shape (N, m)."""
        s = np.clip((np.asarray(X, dtype=np.float64) - fp[:, 0]) * fp[:, 1], 0.0, self.bins)
        j = np.minimum(np.floor(s), self.bins - 1).astype(np.int64)
        return j, s - j

    def basis(self, X, fp):
        """Uncentred basis, ndarray of shape (N, m * G), feature-major (reference only)."""
        j, a = self.bin_offset(X, fp)
        n, m = j.shape
        U = np.zeros((n, m, self.G))
        rows = np.arange(n)[:, None]
        cols = np.arange(m)[None, :]
        U[rows, cols, j] = 1.0 - a
        U[rows, cols, j + 1] += a
        return U.reshape(n, m * self.G)


def get_response(bins):
    """:class:`Linear` for ``bins=None``, else :class:`PiecewiseLinear` (``bins`` >= 1)."""
    return Linear() if bins is None else PiecewiseLinear(bins)
