"""The out-of-core layout: an ``np.memmap`` or ``h5py.Dataset`` X read in row blocks.

Every pass reads X in row blocks of ``block_bytes`` (an HDF5 dataset of float32/float64 straight
into one reused block buffer) until the kept columns fit in ``max_memory``; then they are loaded
(one more pass over the rows) and the in-memory loop finishes the fit. Peak memory
``max_memory + 3 * block_bytes + O(M * G)``. The power-iteration start works on a copy of its
rows taken from the statistics pass (a scattered read of them would cost far more).
"""

import logging

import numpy as np

from cvfs.core import _compact_kernels as CK
from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core.layouts.base import Passes
from cvfs.core.layouts.dense import DenseLayout, _block_buffer, _read_block, _row_blocks

__all__ = ["MemmapLayout", "RowBlocks", "is_out_of_core"]

log = logging.getLogger(__name__)


def is_out_of_core(X):
    """True for inputs read in row blocks: ``np.memmap`` and ``h5py.Dataset``."""
    if isinstance(X, np.memmap):
        return True
    return type(X).__module__.startswith("h5py")


class MemmapLayout(DenseLayout):
    """An ``np.memmap`` or ``h5py.Dataset`` X, read in row blocks (:class:`RowBlocks`)."""

    name = "memmap"

    @classmethod
    def accepts(cls, X):
        return is_out_of_core(X)

    def __init__(self, X, data):
        self.X = X
        self.data = data

    def _in_place(self, bins):
        return False

    def passes(self, fused):
        d = self.data
        return RowBlocks(self.X, d.yk, d.pairs, d.block_bytes, d.max_memory)


class RowBlocks(Passes):
    """The out-of-core layout of :func:`cvfs.core._driver.fsa_iterate`: X (``np.memmap`` or
    ``h5py.Dataset``) read in row blocks of ``block_bytes`` by every pass, until the kept
    columns fit in ``max_memory``; then they are loaded (one more pass over the rows). ``y``
    as the kernels take it ((N,) or (N, 2) weighted rows), ``pairs`` the ranking pairs."""

    def __init__(self, X, y, pairs, block_bytes, max_memory):
        self.X, self.y, self.pairs = X, y, pairs
        self.max_memory = max_memory
        self.itemsize = X.dtype.itemsize
        self.blocks = list(_row_blocks(X.shape[0], X.shape[1] * self.itemsize, block_bytes))
        self.buf = _block_buffer(X, block_bytes)

    def _read(self, r0, r1):
        return _read_block(self.X, r0, r1, self.buf)

    stop_tracking = False

    def fits(self, state):
        return self.X.shape[0] * state.cols.size * self.itemsize <= self.max_memory

    def begin(self, state, e):
        return state

    def end(self, e):
        pass

    def dropped(self, state, e):
        return state  # every pass reads the rows of X; nothing to compact

    def gradient(self, loss, model, track):
        """One pass over the row blocks: (mean loss, g, d loss / d intercept, H v, M)."""
        N, M = self.X.shape
        cols, fp, bins, beta, v, intercept = model
        g = np.zeros(beta.shape)
        h = np.zeros(beta.shape)
        if loss.pairwise:
            z = np.empty(N)
            t = np.empty(N)
            for r0, r1 in self.blocks:
                K.score_pass(self._read(r0, r1), cols, fp, bins, beta, v, intercept,
                             z[r0:r1], t[r0:r1], track)
            r = np.empty(N)
            w = np.empty(N)
            value = K.rank_pairs(z, t, *self.pairs, r, w, track)
            rsum = wsum = 0.0
            for r0, r1 in self.blocks:
                a, b = K.grad_pass(self._read(r0, r1), cols, fp, bins, r[r0:r1], w[r0:r1], g,
                                   h, track)
                rsum += a
                wsum += b
            K.finalize(g, fp, bins, rsum, 1.0)
            K.finalize(h, fp, bins, wsum, 1.0)
            return value, g, 0.0, h, M
        y = self.y
        lsum = dsum = tsum = 0.0
        for r0, r1 in self.blocks:
            a, b, c = K.row_pass(self._read(r0, r1), y[r0:r1], loss, model, (g, h), track)
            lsum += a
            dsum += b
            tsum += c
        n = N if y.ndim == 1 else float(y[:, 1].sum())
        K.finalize(g, fp, bins, dsum, n)
        K.finalize(h, fp, bins, tsum, n)
        return lsum / n, g, dsum / n, h, M

    def load(self, state, bins):
        """The kept columns in memory: (N, m) row-major, or for piecewise-linear features
        (``bins`` > 0) the (m, N) bin coordinates the in-memory loop keeps them in (same size).
        Returns (Xw, transposed)."""
        X, cols, fp = self.X, state.cols, state.fp
        N = X.shape[0]
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        transposed = bins > 0
        Xw = np.empty((cols.size, N) if transposed else (N, cols.size), dtype=dtype)
        for r0, r1 in self.blocks:
            block = self._read(r0, r1)
            if transposed:
                PL.take_bins(block, cols, fp, bins, Xw, r0)
            else:
                CK.take_columns(block, cols, Xw[r0:r1])
        log.debug("FSA: %d kept columns loaded into memory", cols.size)
        return Xw, transposed
