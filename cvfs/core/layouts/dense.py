"""The in-memory dense layout, and the row-block statistics pass it shares with the out-of-core
layout (:mod:`cvfs.core.layouts.memmap`) and the Dask chunks (:mod:`cvfs.core.layouts.dask`).

An ndarray X is used as it is (C-contiguous float32/float64; other dtypes become float64). The
statistics pass reads it in row blocks of ``block_bytes``; the power-iteration start of linear
responses reads its rows in place, that of piecewise-linear responses a copy of them. The
iterations run on the compiled in-memory layout of :mod:`cvfs.core._driver`, which compacts the
kept columns into the solver's own working matrix (peak ~1.5x the size of X).
"""

import numpy as np

from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core._driver import in_memory
from cvfs.core.layouts.base import Layout
from cvfs.core.responses import _ColumnStats

__all__ = ["DenseLayout", "column_table"]


def _row_blocks(n_rows, row_bytes, block_bytes):
    step = max(1, int(block_bytes // max(row_bytes, 1)))
    for r0 in range(0, n_rows, step):
        yield r0, min(n_rows, r0 + step)


def _read_block(X, r0, r1, buf=None):
    """Rows r0:r1 of X as a C-contiguous float32/float64 array; an HDF5 dataset of such a dtype
    is read straight into ``buf`` (a reused block buffer: a fresh array per block spends much of
    the read on page faults) and a view of it is returned, valid until the next read."""
    if buf is not None:
        X.read_direct(buf, np.s_[r0:r1], np.s_[0:r1 - r0])
        return buf[:r1 - r0]
    block = np.asarray(X[r0:r1])
    if block.dtype not in (np.float32, np.float64):
        block = block.astype(np.float64)
    return np.ascontiguousarray(block)


def _block_buffer(X, block_bytes):
    """A reusable row-block buffer for :func:`_read_block` if X reads rows into a buffer
    (``read_direct``: an HDF5 dataset) and holds float32 or float64 (None otherwise: arrays and
    memmaps are read in place, other sources row block by row block)."""
    if (isinstance(X, np.ndarray) or not hasattr(X, "read_direct")
            or X.dtype not in (np.float32, np.float64)):
        return None
    rows = max(1, int(block_bytes // max(X.shape[1] * X.dtype.itemsize, 1)))
    return np.empty((min(rows, X.shape[0]), X.shape[1]), dtype=X.dtype)


def _raise_not_finite(block, r0, stats):
    """The ValueError of a statistics pass whose sums are not finite: a NaN or infinity in X
    (named by its first row), or finite values whose squared deviations overflow float64."""
    bad = np.argwhere(~np.isfinite(block))
    if bad.size:
        raise ValueError(f"X contains NaN or infinity (first in row {r0 + int(bad[0, 0])}, "
                         f"column {int(bad[0, 1])})")
    col = int(np.flatnonzero(~(np.isfinite(stats.s1) & np.isfinite(stats.s2)))[0])
    raise ValueError(f"X column {col} has values too large for float64 statistics (their "
                     "squared deviations overflow past 1.8e308, e.g. entries near 1e300): "
                     "rescale X")


def _column_table(X, response, block_bytes, d=None, rows=None, sw=None):
    """Statistics passes: the response table fp (M, 2 + G) for all columns of X; with per-row
    weights ``d`` (N,) also the raw sums sum_i d_i u_ij of each basis column, shape (M, G),
    from the same pass (the statistics pass for linear responses, that of the basis means for
    piecewise-linear ones; else None); with sorted row indices ``rows``, those rows of X, copied
    from the blocks as they stream by (for an out-of-core X a scattered read of them costs far
    more), else None. With sample weights ``sw`` (N,) the means, variances and basis means are
    weighted and min/max taken over the rows of positive weight. Returns (fp, raw sums,
    rows)."""
    N, M = X.shape
    row_bytes = M * X.dtype.itemsize
    stats = _ColumnStats(M, minmax=response.bins > 0)  # bin edges need min and max
    gacc = np.zeros(M) if d is not None else None
    rows_out = None
    buf = _block_buffer(X, block_bytes)
    for r0, r1 in _row_blocks(N, row_bytes, block_bytes):
        block = _read_block(X, r0, r1, buf)
        if not stats.update(block, None if d is None else d[r0:r1], gacc,
                            None if sw is None else sw[r0:r1]):
            _raise_not_finite(block, r0, stats)
        if rows is not None:
            if rows_out is None:
                rows_out = np.empty((rows.size, M), dtype=block.dtype)
            lo, hi = np.searchsorted(rows, [r0, r1])
            rows_out[lo:hi] = block[rows[lo:hi] - r0]
    if response.bins == 0:
        graw = None if d is None else (gacc + stats.shift * d.sum())[:, None]
        return response.table(stats), graw, rows_out
    fp = response.bin_table(stats)
    sums = np.zeros((M, response.G))
    graw = np.zeros((M, response.G)) if d is not None else None
    for r0, r1 in _row_blocks(N, row_bytes, block_bytes):
        block = _read_block(X, r0, r1, buf)
        if sw is None:
            PL.basis_sums(block, fp, response.bins, sums,
                          np.zeros(0) if d is None else d[r0:r1],
                          np.zeros((0, response.G)) if graw is None else graw)
            continue
        # weighted basis means: the sample weights in the place of the derivatives, then the
        # derivatives in a second call
        scratch = np.zeros((M, response.G))
        PL.basis_sums(block, fp, response.bins, scratch, sw[r0:r1], sums)
        if graw is not None:
            PL.basis_sums(block, fp, response.bins, scratch, d[r0:r1], graw)
    fp[:, 2:] = sums / (N if sw is None else stats.n)
    return fp, graw, rows_out


column_table = _column_table


class DenseLayout(Layout):
    """An in-memory array X (anything ``np.asarray`` takes): the fallback layout."""

    name = "dense"

    @classmethod
    def accepts(cls, X):
        return True

    def __init__(self, X, data):
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        super().__init__(np.ascontiguousarray(X), data)

    def _in_place(self, bins):
        """True if the statistics and power passes read X in place (linear responses)."""
        return bins == 0

    def column_table(self, response, first, rows):
        return _column_table(self.X, response, self.data.block_bytes,
                             None if first is None else first.d,
                             None if self._in_place(response.bins) else rows, self.data.sw)

    def power_start(self, fp, bins, v, rows, Xs, n_iter):
        if self._in_place(bins):
            return K.power_estimate_rows(self.X, rows, fp, v, n_iter)
        cols = np.arange(self.X.shape[1], dtype=np.int64)
        return K.power_estimate(Xs, cols, fp, bins, v, n_iter)

    def passes(self, fused):
        return in_memory(self.X, self.data.yk, self.data.pairs)
