"""numba kernels that compact the FSA solver's working matrix to the kept columns: column
gathers, the in-place and feature-major copies, and the policy of :func:`compact` (when to
compact, and in which layout). No validation, no Python objects; conventions as in
:mod:`cvfs.core._kernels`.
"""

import numpy as np

from cvfs._jit import njit
from cvfs.core._pl_kernels import compact_bins

# kept linear columns are stored feature-major (axpy/dot sweeps, four columns at a time, instead
# of the row kernels per row block) when there are at most SMALL_WIDTH of them, or at most
# CACHED_WIDTH whose matrix fits in CACHED_BYTES (cache-resident: the sweeps are compute-bound
# and win; streamed from memory the row kernels win beyond ~40 columns). Measured as
# row_pass time / row_pass_t time (logistic, tracked / not): N = 1000 float64: 1.9 / 1.8
# at 10 columns, 1.5 / 1.5 at 20, 1.3 / 1.15 at 64, 1.2 / 1.1 at 128, 1.0 / 0.9 at 256;
# N = 3000 float64: 1.3 / 1.1 at 128, 1.1 / 1.0 at 160; N = 1e5 float32: 2.2 / 1.8 at 10,
# 1.2 / 1.1 at 32, 1.1 / 0.95 at 40, 0.9 / 0.85 at 48, 0.6 at 100
SMALL_WIDTH = 32
CACHED_WIDTH = 128
CACHED_BYTES = 1 << 22
# page faults of fresh memory, per element written, in units of an element streamed: filling
# 1.8 GB of fresh memory (4 KiB pages) takes about 8-10x as long as refilling or reading it
# (benchmarks/scale/scaling.py's large cells exercise it). Matrices above FRESH_BYTES (glibc's
# largest mmap threshold) are mapped afresh by every allocation; smaller ones reuse the heap's pages
# after the first fit. At N x M = 1e5 x 1e4 and 1.5e4 x 1e5 (float32) this defers the first
# compaction from iteration 0 (45.8% of the columns) to iteration 3 (17.8%)
FRESH_COST = 8.0
FRESH_BYTES = 32 << 20


@njit(cache=True)
def take_columns(X, cols, out):
    """out[i, j] = X[i, cols[j]] (3-4x numpy's fancy indexing of a row block here)."""
    for i in range(X.shape[0]):
        for j in range(cols.size):
            out[i, j] = X[i, cols[j]]


@njit(cache=True)
def compact_columns(X, cols):
    """A new C-contiguous matrix holding the columns ``cols`` of ``X``."""
    out = np.empty((X.shape[0], cols.size), dtype=X.dtype)
    take_columns(X, cols, out)
    return out


@njit(cache=True)
def compact_columns_inplace(X, cols):
    """The columns ``cols`` (increasing) of the C-contiguous ``X``, moved to the front of X's
    own buffer: returns an (N, cols.size) view of it. Row i's values move from
    i W + cols[j] to i m + j <= that, in increasing order, so nothing is overwritten before it
    is read; no allocation, hence no page faults (a fresh copy spends most of its time there)."""
    N, W = X.shape
    m = cols.size
    flat = X.reshape(N * W)
    for i in range(N):
        src = i * W
        dst = i * m
        for j in range(m):
            flat[dst + j] = flat[src + cols[j]]
    return flat[:N * m].reshape((N, m))


@njit(cache=True)
def compact_features(X, cols, transposed):
    """A new feature-major matrix (cols.size, N) holding the columns ``cols`` of ``X`` (rows
    ``cols`` if ``X`` is already feature-major)."""
    if transposed:
        out = np.empty((cols.size, X.shape[1]), dtype=X.dtype)
        for j in range(cols.size):
            out[j] = X[cols[j]]
        return out
    N = X.shape[0]
    out = np.empty((cols.size, N), dtype=X.dtype)
    for i in range(N):
        for j in range(cols.size):
            out[j, i] = X[i, cols[j]]
    return out


@njit(cache=True)
def compact(mats, cols, fp, bins, policy):
    """The working matrix after a drop to the kept columns ``cols`` (positions in the current
    one). ``mats`` = (X, Xw, transposed, owned): the caller's matrix, the solver's own (see
    :class:`cvfs.core._driver.InMemory`); ``policy`` = (width read by the last pass, waste,
    final, pairwise loss, N). Returns (Xw, transposed, owned, cols, waste).

    Piecewise-linear responses: the first drop moves the kept features of the caller's X into
    a new feature-major matrix of bin coordinates, whose passes cost a fraction of the
    row-major ones (:mod:`cvfs.core._pl_kernels`) and read only the kept rows ``cols``; an
    out-of-core fit loads them in that layout already. Linear responses: compact at the
    ``final`` size, and before when the kept set has halved or the zero-weight reads since the
    last compaction have cost as much as a copy (read the width, write the kept columns); a
    first compaction into a new matrix larger than FRESH_BYTES also pays the page faults of its
    memory, and waits until those reads, the next iteration's included, have cost as much (ski
    rental). With a row-separable loss and few enough kept columns they are then stored
    feature-major (``transposed``, shape (W, N)).
    """
    X, Xw, transposed, owned = mats
    width, waste, final, pairwise, N = policy
    if bins > 0:
        if not transposed:
            return compact_bins(X, cols, fp, bins), True, True, np.arange(cols.size), waste
        return Xw, transposed, owned, cols, waste
    copy = width + cols.size
    if not owned and N * cols.size * X.itemsize > FRESH_BYTES:
        due = waste + width - cols.size >= copy + FRESH_COST * cols.size
    else:
        due = 2 * cols.size <= width or waste >= copy
    if not (due or final):
        return Xw, transposed, owned, cols, waste
    if transposed or (not pairwise and (
            cols.size <= SMALL_WIDTH or (cols.size <= CACHED_WIDTH
                                         and N * cols.size * X.itemsize <= CACHED_BYTES))):
        Xw = compact_features(Xw if owned else X, cols, transposed)
        transposed = True
    elif owned:
        Xw = compact_columns_inplace(Xw, cols)
    else:
        Xw = compact_columns(X, cols)
    return Xw, transposed, True, np.arange(cols.size), 0.0
