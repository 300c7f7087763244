"""numba kernels of FSA on scipy.sparse input: no validation, no Python objects.

The matrix is passed as its CSR or CSC arrays (``indptr``, ``indices``, ``data``; canonical:
sorted indices, no duplicates). Linear responses: the centred, scaled basis column
u_j = (x_j - mean_j) * scale_j is never formed; a zero entry contributes nothing to the raw sums
sum_i d_i x_ij, and the centring term (mean_j * scale_j * sum_i d_i) is subtracted by
:func:`cvfs.core._kernels.finalize` (``fp`` as in :mod:`cvfs.core._kernels`). Column kernels read
only the kept columns ``cols`` of a CSC matrix, so a pass costs the kept entries, not all of them.
Piecewise-linear responses (``pl_*``): a stored entry contributes its basis minus that of a zero,
and the zeros of a column their shared basis times their count (or their sum of d).

Every kernel has a NumPy twin in ``tests/naive.py``.
"""

import math

import numpy as np

from cvfs._jit import njit

__all__ = ["column_min_max", "csc_column_stats", "csc_dots", "csc_scores", "csc_take_dense",
           "csr_column_stats", "csr_count_columns", "csr_fill_columns", "csr_take_dense",
           "pl_basis_sums", "pl_csc_dots", "pl_csc_scores"]


@njit(cache=True)
def _finish_stats(N, count, shift, s1, s2, graw):
    """Add the implicit zeros (N - count_j of column j, each contributing -shift_j to s1 and
    shift_j^2 to s2); False if a sum is not finite."""
    ok = True
    for j in range(s1.size):
        nz = N - count[j]
        c = shift[j]
        s1[j] -= nz * c
        s2[j] += nz * c * c
        if not (math.isfinite(s1[j]) and math.isfinite(s2[j]) and math.isfinite(graw[j])):
            ok = False
    return ok


@njit(cache=True)
def csc_column_stats(indptr, indices, data, N, d, shift, s1, s2, graw):
    """Column statistics of a CSC matrix with N rows, shifted by the column's value in row 0
    (as the dense statistics pass): s1_j = sum_i (x_ij - shift_j), s2_j = sum_i (x_ij -
    shift_j)^2 over all N rows, and graw_j = sum_i d_i x_ij. Fills ``shift``; returns False if a
    value is not finite."""
    M = indptr.size - 1
    count = np.empty(M, dtype=np.int64)
    for j in range(M):
        a = indptr[j]
        b = indptr[j + 1]
        c = 0.0
        if b > a and indices[a] == 0 and math.isfinite(data[a]):
            c = float(data[a])
        shift[j] = c
        s = 0.0
        q = 0.0
        g = 0.0
        for p in range(a, b):
            x = float(data[p])
            e = x - c
            s += e
            q += e * e
            g += d[indices[p]] * x
        s1[j] = s
        s2[j] = q
        graw[j] = g
        count[j] = b - a
    return _finish_stats(N, count, shift, s1, s2, graw)


@njit(cache=True)
def csr_column_stats(indptr, indices, data, d, shift, s1, s2, graw, count):
    """:func:`csc_column_stats` on the arrays of a CSR matrix (one pass over the rows), also
    filling ``count`` with the stored entries per column. The
    per-column accumulators are interleaved, so the scattered update of an entry touches one
    cache line instead of five (about twice as fast on the 3e4 x 3e5 matrix of
    ``benchmarks/scale/fsa_sparse.py``)."""
    N = indptr.size - 1
    M = s1.size
    acc = np.zeros((M, 5))  # shift, s1, s2, graw, count
    if N > 0:
        for p in range(indptr[0], indptr[1]):
            x = float(data[p])
            if math.isfinite(x):
                acc[indices[p], 0] = x
    for i in range(N):
        di = d[i]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = float(data[p])
            e = x - acc[j, 0]
            acc[j, 1] += e
            acc[j, 2] += e * e
            acc[j, 3] += di * x
            acc[j, 4] += 1.0
    for j in range(M):
        shift[j] = acc[j, 0]
        s1[j] = acc[j, 1]
        s2[j] = acc[j, 2]
        graw[j] = acc[j, 3]
        count[j] = np.int64(acc[j, 4])
    return _finish_stats(N, count, shift, s1, s2, graw)


@njit(cache=True)
def csc_scores(indptr, indices, data, cols, a, b, z, t, track):
    """z_i += sum_j a_j x_{i, cols_j} and, if ``track``, t_i += sum_j b_j x_{i, cols_j} over
    the stored entries of the kept columns."""
    for j in range(cols.size):
        c = cols[j]
        aj = a[j]
        if track:
            bj = b[j]
            for p in range(indptr[c], indptr[c + 1]):
                i = indices[p]
                x = data[p]
                z[i] += aj * x
                t[i] += bj * x
        else:
            for p in range(indptr[c], indptr[c + 1]):
                z[indices[p]] += aj * data[p]


@njit(cache=True)
def csc_dots(indptr, indices, data, cols, d, t, g, h, track):
    """Raw sums g_j += sum_i d_i x_{i, cols_j} and, if ``track``, h_j += sum_i t_i
    x_{i, cols_j}, over the stored entries of the kept columns; g, h of shape (m, 1)."""
    for j in range(cols.size):
        c = cols[j]
        s = 0.0
        if track:
            r = 0.0
            for p in range(indptr[c], indptr[c + 1]):
                i = indices[p]
                x = data[p]
                s += d[i] * x
                r += t[i] * x
            h[j, 0] += r
        else:
            for p in range(indptr[c], indptr[c + 1]):
                s += d[indices[p]] * data[p]
        g[j, 0] += s


@njit(cache=True)
def csr_count_columns(indptr, indices, pos, counts):
    """counts[pos_j + 1] += number of stored entries of column j for kept columns (pos_j >= 0;
    -1 marks a dropped column): the first pass of :func:`csr_fill_columns`."""
    for p in range(indptr[0], indptr[indptr.size - 1]):
        k = pos[indices[p]]
        if k >= 0:
            counts[k + 1] += 1


@njit(cache=True)
def csr_fill_columns(indptr, indices, data, pos, out_ptr, out_indices, out_data):
    """The kept columns of a CSR matrix as CSC arrays (row indices sorted): entries of column j
    go to out_ptr[pos_j]..out_ptr[pos_j + 1] (from :func:`csr_count_columns`)."""
    fill = out_ptr[:-1].copy()
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            k = pos[indices[p]]
            if k >= 0:
                q = fill[k]
                out_indices[q] = i
                out_data[q] = data[p]
                fill[k] = q + 1


@njit(cache=True)
def csc_take_dense(indptr, indices, data, cols, out):
    """out[i, j] += x_{i, cols_j} for the stored entries (``out`` zeroed, shape (N, m))."""
    for j in range(cols.size):
        c = cols[j]
        for p in range(indptr[c], indptr[c + 1]):
            out[indices[p], j] += data[p]


@njit(cache=True)
def csr_take_dense(indptr, indices, data, pos, out):
    """out[i, pos_j] += x_ij for the stored entries of kept columns (pos_j >= 0; ``out``
    zeroed, shape (N, m))."""
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            k = pos[indices[p]]
            if k >= 0:
                out[i, k] += data[p]


# ---- piecewise-linear responses: every stored entry has its bin coordinate; the implicit zeros
# of column j share one, s_j(0), added in closed form ----


@njit(cache=True, inline="always")
def _bin_of(x, lo, scale, bins):
    """Bin b and offset alpha of x (the dense kernels' bin coordinate, in float64)."""
    s = (x - lo) * scale
    if not s > 0.0:
        s = 0.0
    elif s >= bins:
        s = float(bins)
    b = min(int(s), bins - 1)
    return b, s - b


@njit(cache=True)
def column_min_max(indptr, indices, data, csc, n_rows, lo, hi):
    """Per column min and max over all rows (the implicit zeros included) of a CSC (``csc``)
    or CSR matrix; ``lo``/``hi`` start at +-inf."""
    M = lo.size
    count = np.zeros(M, dtype=np.int64)
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            j = r if csc else indices[p]
            x = float(data[p])
            lo[j] = min(lo[j], x)
            hi[j] = max(hi[j], x)
            count[j] += 1
    for j in range(M):
        if count[j] < n_rows:
            lo[j] = min(lo[j], 0.0)
            hi[j] = max(hi[j], 0.0)


@njit(cache=True)
def pl_basis_sums(indptr, indices, data, csc, n_rows, fp, bins, d, sums, gsums):
    """Basis sums over all rows, sums[j, b] = sum_i u_b(x_ij), and gsums[j, b] = sum_i d_i
    u_b(x_ij), of a CSC (``csc``) or CSR matrix."""
    M = fp.shape[0]
    count = np.zeros(M, dtype=np.int64)
    dst = np.zeros(M)
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            if csc:
                j = r
                i = indices[p]
            else:
                j = indices[p]
                i = r
            b, a = _bin_of(float(data[p]), fp[j, 0], fp[j, 1], bins)
            di = d[i]
            sums[j, b] += 1.0 - a
            sums[j, b + 1] += a
            gsums[j, b] += di * (1.0 - a)
            gsums[j, b + 1] += di * a
            dst[j] += di
            count[j] += 1
    dsum = d.sum()
    for j in range(M):
        b, a = _bin_of(0.0, fp[j, 0], fp[j, 1], bins)
        nz = n_rows - count[j]
        sums[j, b] += nz * (1.0 - a)
        sums[j, b + 1] += nz * a
        rest = dsum - dst[j]
        gsums[j, b] += rest * (1.0 - a)
        gsums[j, b + 1] += rest * a


@njit(cache=True, inline="always")
def _response_at(c, j, b, a):
    return c[j, b] + a * (c[j, b + 1] - c[j, b])


@njit(cache=True)
def pl_csc_scores(csc, cols, fp, bins, coefs, out, track):
    """z_i += sum_j (f_j(x_ij) - f_j(0)) over the stored entries of the kept columns of
    ``csc`` = (indptr, indices, data), f_j the uncentred response with knots beta_j (t likewise
    with v if ``track``), ``coefs`` = (beta, v), ``out`` = (z, t); returns (sum_j f_j(0), the
    same with v): the part every row shares."""
    indptr, indices, data = csc
    beta, v = coefs
    z, t = out
    z0 = 0.0
    t0 = 0.0
    for j in range(cols.size):
        c = cols[j]
        b0, a0 = _bin_of(0.0, fp[j, 0], fp[j, 1], bins)
        f0 = _response_at(beta, j, b0, a0)
        v0 = _response_at(v, j, b0, a0)
        z0 += f0
        t0 += v0
        for p in range(indptr[c], indptr[c + 1]):
            i = indices[p]
            b, a = _bin_of(float(data[p]), fp[j, 0], fp[j, 1], bins)
            z[i] += _response_at(beta, j, b, a) - f0
            if track:
                t[i] += _response_at(v, j, b, a) - v0
    return z0, t0


@njit(cache=True)
def pl_csc_dots(csc, cols, fp, bins, rows, sums, acc, track):
    """Raw basis sums g[j, b] += sum_i d_i u_b(x_ij) over all rows of the kept columns of
    ``csc`` = (indptr, indices, data) (h likewise with t if ``track``); ``rows`` = (d, t),
    ``sums`` = (dsum, tsum) their sums over all rows, ``acc`` = (g, h)."""
    indptr, indices, data = csc
    d, t = rows
    dsum, tsum = sums
    g, h = acc
    for j in range(cols.size):
        c = cols[j]
        ds = 0.0
        ts = 0.0
        for p in range(indptr[c], indptr[c + 1]):
            i = indices[p]
            b, a = _bin_of(float(data[p]), fp[j, 0], fp[j, 1], bins)
            di = d[i]
            g[j, b] += di * (1.0 - a)
            g[j, b + 1] += di * a
            ds += di
            if track:
                ti = t[i]
                h[j, b] += ti * (1.0 - a)
                h[j, b + 1] += ti * a
                ts += ti
        b, a = _bin_of(0.0, fp[j, 0], fp[j, 1], bins)
        g[j, b] += (dsum - ds) * (1.0 - a)
        g[j, b + 1] += (dsum - ds) * a
        if track:
            h[j, b] += (tsum - ts) * (1.0 - a)
            h[j, b + 1] += (tsum - ts) * a
