"""The sparse layout: scipy.sparse X (CSR/CSC), never densifying the whole matrix.

- Statistics: column means and variances from one pass over the stored entries (the implicit
  zeros are counted, not read); centring and scaling stay implicit in the response table ``fp``,
  so the centred matrix is never formed. The first iteration's gradient comes from that pass.
  Piecewise-linear responses add a min/max pass and one of the basis means: the zeros of a column
  share one bin coordinate, whose basis enters every sum in closed form.
- Working matrix: CSC. A CSC input is read where it is; a CSR input is read once more to copy
  its kept columns into a CSC matrix at the first pass that needs columns (after the first
  drop, usually under half the columns). Each pass reads only the kept columns' entries: scores
  by a scatter over them, loss derivatives per row, gradient and power-iteration sums by
  per-column dot products (:mod:`cvfs.core._sparse_kernels`).
- Hand-over: once the kept columns take no more memory dense than sparse, or make a dense
  block of at most ``_DENSE_CELLS`` cells (and fit in ``max_memory``), they are made dense
  (piecewise linear: feature-major bin coordinates) and the driver finishes the fit on the
  in-memory layout (:mod:`cvfs.core._driver`).
- Peak memory: the input, plus the CSC copy of the kept columns (CSR input), plus at the
  hand-over their dense block (no larger than their sparse form or ``_DENSE_CELLS`` cells), plus
  O(N + M) vectors.

Linear and piecewise-linear responses, every row-separable loss and the pairwise ranking loss.
The rationale is in ``docs/methods.md``, section "FSA on sparse input";
``benchmarks/scale/fsa_sparse.py`` measures it.
"""

import logging

import numpy as np
import scipy.sparse as sp

from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core import _sparse_kernels as SK
from cvfs.core.layouts.base import Layout, Passes, dense_decision_function
from cvfs.core.responses import _ColumnStats

__all__ = ["SparseColumns", "SparseLayout", "check_sparse", "sparse_decision_function"]

log = logging.getLogger(__name__)

# kept blocks of at most this many cells are handed to the in-memory loop even when denser
# than their sparse form: a dense pass over them costs less than the fixed per-iteration cost
# of the sparse loop (benchmarks/fsa/uci_tables.py, Table VI)
_DENSE_CELLS = 1 << 16


def check_sparse(X):
    """X as a canonical CSR or CSC matrix of float32 (kept) or float64 (anything else).

    Copies only when needed: another sparse format, another dtype, or duplicate / unsorted
    entries.

    Raises
    ------
    ValueError
        If X has no row or no column.
    """
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    if X.format not in ("csr", "csc"):
        X = X.tocsr()
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _raise_not_finite(X, finite_sums):
    """The ValueError for a statistics pass whose sums are not finite: a NaN or infinity
    (named by its row and column), or finite values whose squares overflow."""
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        p = int(bad[0])
        major = int(np.searchsorted(X.indptr, p, side="right") - 1)
        minor = int(X.indices[p])
        row, col = (major, minor) if X.format == "csr" else (minor, major)
        raise ValueError(f"X contains NaN or infinity (first in row {row}, column {col})")
    col = int(np.flatnonzero(~finite_sums)[0])
    raise ValueError(f"X column {col} has values too large for float64 statistics (their "
                     "squared deviations overflow past 1.8e308): rescale X")


def _weighted_stats(X, d, sw, minmax):
    """Column statistics with sample weights ``sw`` (N,): weighted mean and squared deviations
    from the stored entries (the implicit zeros of a column in closed form), min/max over the
    rows of positive weight, the raw sums sum_i d_i x_ij and the stored entries per column."""
    N, M = X.shape
    coo = X.tocoo()
    r, c, x = coo.row, coo.col, coo.data.astype(np.float64)
    if not np.isfinite(x).all():
        _raise_not_finite(X, np.ones(M, dtype=bool))
    W = float(sw.sum())
    wr = sw[r]
    mean = np.bincount(c, wr * x, minlength=M) / W
    stored_w = np.bincount(c, wr, minlength=M)
    m2 = (np.bincount(c, wr * (x - mean[c]) ** 2, minlength=M)
          + (W - stored_w) * mean * mean)
    graw = np.bincount(c, d[r] * x, minlength=M)
    if not (np.isfinite(mean).all() and np.isfinite(m2).all() and np.isfinite(graw).all()):
        _raise_not_finite(X, np.isfinite(mean) & np.isfinite(m2) & np.isfinite(graw))
    stats = _ColumnStats(M, minmax=minmax)
    stats.n, stats.shift, stats.s1, stats.s2 = W, mean, np.zeros(M), m2
    Xp = X[sw > 0] if (sw == 0).any() else X
    SK.column_min_max(Xp.indptr, Xp.indices, Xp.data, Xp.format == "csc", Xp.shape[0],
                      stats.lo, stats.hi)
    # deviations from the weighted mean keep its rounding: equal values have no spread
    stats.s2[stats.lo == stats.hi] = 0.0
    count = np.bincount(c, minlength=M)
    return stats, graw, count


def _column_table(X, response, d, sw=None):
    """Response table fp (M, 2 + G), the raw first-gradient sums sum_i d_i u_ij (M, G) and the
    stored entries per column (M,), from one pass over the stored entries of X (CSR or CSC;
    piecewise-linear responses: three). With sample weights ``sw`` the statistics are
    weighted (:func:`_weighted_stats`)."""
    N, M = X.shape
    if sw is not None:
        stats, graw, count = _weighted_stats(X, d, sw, response.bins > 0)
        if response.bins == 0:
            return response.table(stats), graw[:, None], count
        fp = response.bin_table(stats)
        wsums, gsums = np.zeros((M, response.G)), np.zeros((M, response.G))
        scratch = np.zeros((M, response.G))
        csc = X.format == "csc"
        SK.pl_basis_sums(X.indptr, X.indices, X.data, csc, N, fp, response.bins, sw, scratch,
                         wsums)
        SK.pl_basis_sums(X.indptr, X.indices, X.data, csc, N, fp, response.bins, d, scratch,
                         gsums)
        fp[:, 2:] = wsums / stats.n
        return fp, gsums, count
    shift, s1, s2, graw = np.empty(M), np.empty(M), np.empty(M), np.empty(M)
    if X.format == "csc":
        ok = SK.csc_column_stats(X.indptr, X.indices, X.data, N, d, shift, s1, s2, graw)
        count = np.diff(X.indptr)
    else:
        count = np.empty(M, dtype=np.int64)
        ok = SK.csr_column_stats(X.indptr, X.indices, X.data, d, shift, s1, s2, graw, count)
    if not ok:
        _raise_not_finite(X, np.isfinite(s1) & np.isfinite(s2) & np.isfinite(graw))
    stats = _ColumnStats(M, minmax=response.bins > 0)
    stats.n, stats.shift, stats.s1, stats.s2 = N, shift, s1, s2
    if response.bins == 0:
        return response.table(stats), graw[:, None], count
    csc = X.format == "csc"
    SK.column_min_max(X.indptr, X.indices, X.data, csc, N, stats.lo, stats.hi)
    fp = response.bin_table(stats)
    sums, gsums = np.zeros((M, response.G)), np.zeros((M, response.G))
    SK.pl_basis_sums(X.indptr, X.indices, X.data, csc, N, fp, response.bins, d, sums, gsums)
    fp[:, 2:] = sums / N
    return fp, gsums, count


def _pl_power_start(Xsub, fp, bins, v, n_iter):
    """:func:`_power_start` for piecewise-linear responses (``v`` of shape (M, bins + 1)): the
    products by the sparse basis kernels on the CSC rows, the zeros of a column in closed form
    (the work of a pass over the rows' stored entries, not over their dense form)."""
    n, M = Xsub.shape
    csc = Xsub.tocsc()
    csc = (csc.indptr, csc.indices, csc.data)
    cols = np.arange(M, dtype=np.int64)
    zero = np.zeros_like(v)
    z, d = np.zeros(n), np.zeros(n)
    lam = 0.0
    for _ in range(n_iter):
        t = np.full(n, -float(np.sum(v * fp[:, 2:])))
        _, t0 = SK.pl_csc_scores(csc, cols, fp, bins, (zero, v), (z, t), True)
        t += t0
        tsum = float(t.sum())
        g, h = np.zeros_like(v), np.zeros_like(v)
        SK.pl_csc_dots(csc, cols, fp, bins, (d, t), (0.0, tsum), (g, h), True)
        K.finalize(h, fp, bins, tsum, n)
        nh = float(np.sqrt(np.sum(h * h)))
        if nh == 0.0:
            return 0.0
        lam = nh
        v[:, :] = h / nh
    return lam


def _power_start(Xsub, fp, v, n_iter):
    """Largest eigenvalue of the centred, scaled Gram matrix of the rows ``Xsub`` (sparse,
    n x M) divided by n, by ``n_iter`` power iterations from ``v`` (M, 1; updated in place)."""
    n = Xsub.shape[0]
    Xt = Xsub.T.tocsr()
    lam = 0.0
    for _ in range(n_iter):
        t = Xsub @ (v[:, 0] * fp[:, 1]) - float(v[:, 0] @ fp[:, 2])
        h = (np.asarray(Xt @ t) * fp[:, 1] - fp[:, 2] * t.sum()) / n
        nh = float(np.linalg.norm(h))
        if nh == 0.0:
            return 0.0
        lam = nh
        v[:, 0] = h / nh
    return lam


def _kept_columns_csc(X, support):
    """(indptr, indices, data) of the columns ``support`` of the CSR matrix X in CSC layout."""
    N, M = X.shape
    pos = np.full(M, -1, dtype=np.int64)
    pos[support] = np.arange(support.size)
    counts = np.zeros(support.size + 1, dtype=np.int64)
    SK.csr_count_columns(X.indptr, X.indices, pos, counts)
    ptr = np.cumsum(counts)
    idx_dtype = np.int32 if N < np.iinfo(np.int32).max else np.int64
    indices = np.empty(int(ptr[-1]), dtype=idx_dtype)
    data = np.empty(int(ptr[-1]), dtype=X.data.dtype)
    SK.csr_fill_columns(X.indptr, X.indices, X.data, pos, ptr, indices, data)
    return ptr, indices, data


def _dense_columns(X, csc, cols, support):
    """The kept columns as a C-contiguous dense (N, m) array in X's dtype."""
    N, M = X.shape
    out = np.zeros((N, support.size), dtype=X.dtype)
    if csc is not None:
        SK.csc_take_dense(*csc, cols, out)
    else:
        pos = np.full(M, -1, dtype=np.int64)
        pos[support] = np.arange(support.size)
        SK.csr_take_dense(X.indptr, X.indices, X.data, pos, out)
    return out


def _sparse_pass(data, loss, csc, model, track):
    """One pass over the kept columns' stored entries at ``model`` = (cols, fp, bins, beta, v,
    intercept): (mean loss, gradient, d loss / d intercept, curvature product)."""
    cols, fp, bins, beta, v, intercept = model
    N = data.y.shape[0]
    m, G = beta.shape
    g = np.zeros((m, G))
    h = np.zeros((m, G))
    z = np.full(N, intercept - float(np.sum(beta * fp[:, 2:])))
    t = np.full(N, -float(np.sum(v * fp[:, 2:])) if track else 0.0)
    if bins == 0:
        SK.csc_scores(*csc, cols, beta[:, 0] * fp[:, 1], v[:, 0] * fp[:, 1], z, t, track)
    else:
        z0, t0 = SK.pl_csc_scores(csc, cols, fp, bins, (beta, v), (z, t), track)
        z += z0
        if track:
            t += t0
    d = np.empty(N)
    n_total = N if data.sw is None else float(data.sw.sum())
    if loss.pairwise:
        w = np.empty(N)
        value = K.rank_pairs(z, t, *data.pairs, d, w, track)
        t, denom, gi = w, 1.0, 0.0
    else:
        lsum = K.loss_rows(loss, z, data.yk, d)
        if data.sw is not None and track:
            t *= data.sw
        denom = n_total
    dsum, tsum = float(d.sum()), float(t.sum())
    if bins == 0:
        SK.csc_dots(*csc, cols, d, t, g, h, track)
    else:
        SK.pl_csc_dots(csc, cols, fp, bins, (d, t), (dsum, tsum), (g, h), track)
    K.finalize(g, fp, bins, dsum, denom)
    K.finalize(h, fp, bins, tsum, denom)
    if not loss.pairwise:
        value, gi = lsum / n_total, dsum / n_total
    return value, g, gi, h


class SparseColumns(Passes):
    """The passes over a sparse X: each reads the stored entries of the kept columns (of X
    itself if CSC, else of the kept columns copied once to CSC), until the kept columns are
    cheaper dense (their dense size fits ``max_memory`` and is at most that of their stored
    entries, or at most ``_DENSE_CELLS`` values). The power iteration stops once the curvature
    estimate is stable, as in the in-memory loop."""

    stop_tracking = True

    def __init__(self, X, data, col_nnz, fused):
        self.X, self.data = X, data
        self.col_nnz = col_nnz
        self.fused = fused  # iteration 0 reads no data (its gradient came with the statistics)
        self.csc = (X.indptr, X.indices, X.data) if X.format == "csc" else None

    def fits(self, state):
        X = self.X
        m = state.cols.size
        nnz = int(self.col_nnz[state.support].sum())
        dense_bytes = X.shape[0] * m * X.dtype.itemsize
        return dense_bytes <= self.data.max_memory and (
            dense_bytes <= nnz * (X.dtype.itemsize + X.indices.dtype.itemsize)
            or X.shape[0] * m <= _DENSE_CELLS)

    def begin(self, state, e):
        if self.csc is None and not (e == 0 and self.fused):
            # CSR input: copy the kept columns once, column-major, before the first pass
            self.csc = _kept_columns_csc(self.X, state.support)
            return state._replace(cols=np.arange(state.cols.size, dtype=np.int64))
        return state

    def gradient(self, loss, model, track):
        value, g, gi, h = _sparse_pass(self.data, loss, self.csc, model, track)
        return value, g, gi, h, model[0].size

    def load(self, state, bins):
        """The kept columns made dense (piecewise linear: the feature-major bin coordinates of
        the in-memory loop). Returns (Xw, transposed)."""
        Xw = _dense_columns(self.X, self.csc, state.cols, state.support)
        if bins > 0:
            Xw = PL.compact_bins(Xw, np.arange(Xw.shape[1], dtype=np.int64), state.fp, bins)
        log.debug("FSA: %d kept columns made dense", state.cols.size)
        return Xw, bins > 0


def sparse_decision_function(X, support, table, bins, coef, intercept):
    """Scores of a scipy.sparse X: only the columns ``support`` are read (made dense, N x k,
    for piecewise-linear responses)."""
    support = np.asarray(support, dtype=np.int64)
    if X.format == "csc" or bins > 0:
        Xs = X[:, support] if X.format == "csc" else X.tocsr()[:, support]
        if bins > 0:
            return dense_decision_function(Xs.toarray(), np.arange(support.size), table, bins,
                                           coef, intercept)
        return np.asarray(Xs @ coef[:, 0], dtype=np.float64).ravel() + intercept
    w = np.zeros(X.shape[1])
    w[support] = coef[:, 0]
    return np.asarray(X.tocsr() @ w, dtype=np.float64).ravel() + intercept


class SparseLayout(Layout):
    """A scipy.sparse X (CSR and CSC kept, other formats made CSR): :class:`SparseColumns`."""

    name = "sparse"

    @classmethod
    def accepts(cls, X):
        return sp.issparse(X)

    @classmethod
    def prepare(cls, X):
        return check_sparse(X)

    def column_table(self, response, first, rows):
        d = np.zeros(self.X.shape[0]) if first is None else first.d
        fp, graw, self.col_nnz = _column_table(self.X, response, d, self.data.sw)
        return fp, graw, None

    def power_start(self, fp, bins, v, rows, Xs, n_iter):
        if bins == 0:
            return _power_start(self.X[rows], fp, v, n_iter)
        return _pl_power_start(self.X[rows], fp, bins, v, n_iter)

    def passes(self, fused):
        return SparseColumns(self.X, self.data, self.col_nnz, fused)

    def history(self, n_layout, n_iter):
        return {"out_of_core_iterations": 0, "sparse_iterations": n_layout}

    decision_function = staticmethod(sparse_decision_function)
