"""numba kernels of piecewise-linear responses (paper section 2.5.1): no validation, no Python
objects. Conventions as in :mod:`cvfs.core._kernels` (``fp`` rows: offset lo, scale, basis means;
``beta``, ``v`` (m, B + 1) on the centred basis; raw sums into ``g``, ``h``).

A feature value x has the *bin coordinate* s = clip((x - lo) * scale, 0, B), bin
b = min(floor(s), B - 1) and offset alpha = s - b; its basis has 1 - alpha at b, alpha at b + 1.
The working matrix comes in two layouts:

Row-major X (N, W)
    The caller's matrix, or a row block of an out-of-core one: s is computed per element from
    ``fp`` and the gradient sums are scattered into the (m, B + 1) accumulators
    (:func:`pl_row_pass`, :func:`pl_score_pass`, :func:`pl_grad_pass`).
Feature-major S (W, N) of bin coordinates
    What FSA compacts the kept columns into at the first drop (:func:`compact_bins`, in X's
    dtype), read row ``cols[j]`` per kept feature. On bin b a feature's response is
    e[b] + s dd[b] (dd[b] = c[b + 1] - c[b], e[b] = c[b] - b dd[b]: two table reads, no
    offset); its gradient sums are sums of d u_b(s) with the basis as hat functions
    u_b(s) = max(0, 1 - |s - b|), one vectorised sweep per knot b over row chunks in L1
    (:func:`_pl_sums_t`). ``benchmarks/fsa/pl_kernels.py`` times both layouts per element; the
    feature-major passes cost a fraction of the row-major one (docs/benchmarks.md).
"""

import numpy as np

from cvfs._jit import njit
from cvfs.core._loss_kernels import loss_rows, row_value_grad, weight_rows

__all__ = ["basis_sums", "compact_bins", "pl_decision", "pl_grad_pass", "pl_grad_pass_t",
           "pl_row_pass", "pl_row_pass_t", "pl_score_pass", "pl_score_pass_t", "take_bins"]

BASIS_COLS = 512  # columns per chunk of basis_sums (4 rows of s and the B + 1 sums stay in L1)
SUM_CHUNK = 512  # rows per chunk of the feature-major sums (float32: 2 KiB of s, d and t each)


@njit(cache=True, inline="always")
def _bin_coordinate(x, lo, scale, bins):
    s = (x - lo) * scale
    if not s > 0.0:  # NaN (inf * 0 of an overflowing x - lo) -> 0, never a bin out of range
        return 0.0
    if s >= bins:
        return float(bins)
    return s


@njit(cache=True, inline="always")
def _hat(s, knot, zero, one):
    """The basis function of knot ``knot`` at bin coordinate s: max(0, 1 - |s - knot|)
    (1 - alpha at knot b, alpha at b + 1, 0 elsewhere); ``zero``, ``one`` in s's dtype."""
    return max(zero, one - abs(s - knot))


@njit(cache=True, inline="always")
def _bins_of_row(row, cols, fp, bins, jbuf, abuf):
    for j in range(cols.size):
        s = _bin_coordinate(row[cols[j]], fp[j, 0], fp[j, 1], bins)
        b = min(int(s), bins - 1)
        jbuf[j] = b
        abuf[j] = s - b


@njit(cache=True, inline="always")
def _pl_dot2(jbuf, abuf, c1, c2, track):
    z = 0.0
    t = 0.0
    for j in range(jbuf.size):
        b = jbuf[j]
        a = abuf[j]
        z += c1[j, b] + a * (c1[j, b + 1] - c1[j, b])
        if track:
            t += c2[j, b] + a * (c2[j, b + 1] - c2[j, b])
    return z, t


@njit(cache=True, inline="always")
def _pl_axpy2(jbuf, abuf, d, t, g, h, track):
    for j in range(jbuf.size):
        b = jbuf[j]
        a = abuf[j]
        g[j, b] += d * (1.0 - a)
        g[j, b + 1] += d * a
        if track:
            h[j, b] += t * (1.0 - a)
            h[j, b + 1] += t * a


@njit(cache=True)
def centring_offset(fp, coef):
    """-sum_jb coef_jb * mean_jb: what centring the basis adds to every score."""
    off = 0.0
    for j in range(coef.shape[0]):
        for b in range(coef.shape[1]):
            off -= coef[j, b] * fp[j, 2 + b]
    return off


# ---- row-major X ----


@njit(cache=True, fastmath={"reassoc", "contract", "nnan", "ninf", "nsz"})
def basis_sums(X, fp, bins, sums, d, gsums):
    """sums[j, b] += sum_i u_jb(X[i, j]) over the rows of X: the basis column sums of every
    feature (for the basis means of ``fp``), without any (rows, M) temporary; and if ``d``
    (rows,) is not empty, gsums[j, b] += sum_i d_i u_jb(X[i, j]) (with d the loss derivatives
    at beta = 0, FSA's first gradient: every score is then the intercept).

    Per chunk of BASIS_COLS columns, four rows at a time: their bin coordinates, then for each
    knot b one vectorised sweep adding the four hat functions max(0, 1 - |s - b|) (as in
    :func:`_pl_sums_t`) into a (B + 1, BASIS_COLS) accumulator in X's dtype that stays in L1 and
    is added to ``sums`` every 256 rows. Scattering each element into its two basis columns of
    the (M, B + 1) float64 table instead misses the cache once that table outgrows L2 (60,864
    features: 4.4 MB); the weighted sums replace a row-major pass of FSA's first iteration
    (``benchmarks/fsa/pl_kernels.py``)."""
    N, M = X.shape
    ty = X.dtype.type
    zero = ty(0.0)
    one = ty(1.0)
    weighted = d.size > 0
    s4 = np.empty((4, BASIS_COLS), X.dtype)
    acc = np.zeros((bins + 1, BASIS_COLS), X.dtype)
    gacc = np.zeros((bins + 1, BASIS_COLS), X.dtype)
    d4 = np.zeros(4, X.dtype)  # stays 0 without weights
    lo = np.ascontiguousarray(fp[:, 0])
    scale = np.ascontiguousarray(fp[:, 1])
    for c0 in range(0, M, BASIS_COLS):
        w = min(M, c0 + BASIS_COLS) - c0
        lc = lo[c0:c0 + w]
        sc = scale[c0:c0 + w]
        i = 0
        while i < N:
            q = min(4, N - i)
            for r in range(q):
                row = X[i + r, c0:c0 + w]
                sr = s4[r]
                for jj in range(w):
                    sr[jj] = ty(_bin_coordinate(row[jj], lc[jj], sc[jj], bins))
                if weighted:
                    d4[r] = ty(d[i + r])
            for r in range(q, 4):
                s4[r, :w] = ty(-2.0)  # every hat function is 0 there
                d4[r] = zero
            a0 = s4[0]
            a1 = s4[1]
            a2 = s4[2]
            a3 = s4[3]
            d0, d1, d2, d3 = d4[0], d4[1], d4[2], d4[3]
            for b in range(bins + 1):
                fb = ty(b)
                ab = acc[b]
                gb = gacc[b]
                for jj in range(w):
                    u0 = _hat(a0[jj], fb, zero, one)
                    u1 = _hat(a1[jj], fb, zero, one)
                    u2 = _hat(a2[jj], fb, zero, one)
                    u3 = _hat(a3[jj], fb, zero, one)
                    ab[jj] += (u0 + u1) + (u2 + u3)
                    gb[jj] += (d0 * u0 + d1 * u1) + (d2 * u2 + d3 * u3)
            i += 4
            if i % 256 == 0 or i >= N:
                for b in range(bins + 1):
                    for jj in range(w):
                        sums[c0 + jj, b] += acc[b, jj]
                        acc[b, jj] = zero
                        if weighted:
                            gsums[c0 + jj, b] += gacc[b, jj]
                            gacc[b, jj] = zero


@njit(cache=True)
def pl_row_pass(X, y, loss, model, acc, track):
    """One pass of a row-separable loss over the rows of X (scores, loss, raw sums
    g += d_i u_i, h += t_i u_i with t = U_c v) for the ``model`` (cols, fp, bins, beta, v,
    intercept) and ``acc`` = (g, h). Returns (loss sum, sum d, sum t)."""
    cols, fp, bins, beta, v, intercept = model
    g, h = acc
    m = cols.size
    z0 = centring_offset(fp, beta)
    t0 = centring_offset(fp, v)
    jbuf = np.empty(m, dtype=np.int64)
    abuf = np.empty(m, dtype=np.float64)
    lsum = 0.0
    dsum = 0.0
    tsum = 0.0
    for i in range(X.shape[0]):
        _bins_of_row(X[i], cols, fp, bins, jbuf, abuf)
        z, t = _pl_dot2(jbuf, abuf, beta, v, track)
        val, d, w = row_value_grad(loss, z + z0 + intercept, y, i)
        lsum += val
        dsum += d
        tw = (t + t0) * w
        tsum += tw
        _pl_axpy2(jbuf, abuf, d, tw, g, h, track)
    return lsum, dsum, tsum


@njit(cache=True)
def pl_score_pass(X, cols, fp, bins, beta, v, intercept, z, t, track):
    """Scores z = U_c beta + intercept and t = U_c v for every row of X."""
    m = cols.size
    z0 = centring_offset(fp, beta)
    t0 = centring_offset(fp, v)
    jbuf = np.empty(m, dtype=np.int64)
    abuf = np.empty(m, dtype=np.float64)
    for i in range(X.shape[0]):
        _bins_of_row(X[i], cols, fp, bins, jbuf, abuf)
        zi, ti = _pl_dot2(jbuf, abuf, beta, v, track)
        z[i] = zi + z0 + intercept
        t[i] = ti + t0


@njit(cache=True)
def pl_grad_pass(X, cols, fp, bins, r, w, g, h, track):
    """Raw sums g += r_i u_i, h += w_i u_i over the rows of X. Returns (sum r, sum w)."""
    jbuf = np.empty(cols.size, dtype=np.int64)
    abuf = np.empty(cols.size, dtype=np.float64)
    for i in range(X.shape[0]):
        _bins_of_row(X[i], cols, fp, bins, jbuf, abuf)
        _pl_axpy2(jbuf, abuf, r[i], w[i], g, h, track)
    return r.sum(), w.sum()


@njit(cache=True)
def pl_decision(X, support, fp, bins, coef, intercept):
    """Piecewise-linear scores intercept + sum_j u_j(x_j)^T coef_j for every row of ``X``
    (uncentred basis: ``coef``/``intercept`` are the fitted, de-centred values)."""
    m = support.size
    jbuf = np.empty(m, dtype=np.int64)
    abuf = np.empty(m, dtype=np.float64)
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        _bins_of_row(X[i], support, fp, bins, jbuf, abuf)
        z, _ = _pl_dot2(jbuf, abuf, coef, coef, False)
        out[i] = z + intercept
    return out


# ---- feature-major bin coordinates ----


@njit(cache=True)
def take_bins(X, cols, fp, bins, out, off):
    """out[j, off + i] = s(X[i, cols[j]]), the bin coordinate with fp[j]'s offset and scale,
    for every row i of the row-major ``X``; written in runs of 32 rows per feature (a blocked
    transpose: each write run is contiguous, the 32 rows stay in cache)."""
    N = X.shape[0]
    for i0 in range(0, N, 32):
        i1 = min(N, i0 + 32)
        for j in range(cols.size):
            c = cols[j]
            lo = fp[j, 0]
            scale = fp[j, 1]
            for i in range(i0, i1):
                out[j, off + i] = _bin_coordinate(X[i, c], lo, scale, bins)


@njit(cache=True)
def compact_bins(X, cols, fp, bins):
    """A new feature-major matrix (cols.size, N), in X's dtype, of the bin coordinates of the
    columns ``cols`` of the row-major ``X`` (``fp`` rows aligned with ``cols``)."""
    out = np.empty((cols.size, X.shape[0]), dtype=X.dtype)
    take_bins(X, cols, fp, bins, out, 0)
    return out


@njit(cache=True)
def _pl_tables(coef, bins):
    """Per feature and bin the intercept e and slope dd of its response as a function of the
    bin coordinate s: e[b] + s dd[b] on bin b. Returns two (m, bins) arrays."""
    m = coef.shape[0]
    E = np.empty((m, bins))
    D = np.empty((m, bins))
    for j in range(m):
        for b in range(bins):
            D[j, b] = coef[j, b + 1] - coef[j, b]
            E[j, b] = coef[j, b] - b * D[j, b]
    return E, D


@njit(cache=True, fastmath={"reassoc", "contract"})
def _pl_scores_t(S, cols, bins, E, D, Ev, Dv, z, t, track):
    """z_i += f_j(s_ji) summed over the kept features (t likewise with v's tables if
    ``track``) for every row i, one feature per sweep."""
    n = z.size
    for j in range(cols.size):
        row = S[cols[j]]
        e = E[j]
        dd = D[j]
        if track:
            ev = Ev[j]
            dv = Dv[j]
            for i in range(n):
                s = row[i]
                b = min(int(s), bins - 1)
                z[i] += e[b] + s * dd[b]
                t[i] += ev[b] + s * dv[b]
        else:
            for i in range(n):
                s = row[i]
                b = min(int(s), bins - 1)
                z[i] += e[b] + s * dd[b]


@njit(cache=True, fastmath={"reassoc", "contract", "nnan", "ninf", "nsz"})
def _pl_sums_t(S, cols, bins, d, t, g, h, track):
    """g_jb += sum_i d_i u_jb(s_ji) (h likewise with t if ``track``) over every row i, with
    the basis written as hat functions of the bin coordinate, u_b(s) = max(0, 1 - |s - b|)
    (= 1 - alpha at b, alpha at b + 1, 0 elsewhere): for each knot b one branch-free,
    vectorised sweep over a chunk of SUM_CHUNK rows (in L1), summed in S's dtype within the
    chunk and then added in float64. The B + 1 sweeps do more arithmetic than one scatter of
    each row into its two basis columns, but a scatter's read-modify-writes of the
    accumulators serialise (``benchmarks/fsa/pl_kernels.py`` times the sweep per element)."""
    n = d.size
    ty = S.dtype.type
    zero = ty(0.0)
    one = ty(1.0)
    dx = d.astype(S.dtype)
    tx = t.astype(S.dtype) if track else dx
    for j in range(cols.size):
        row = S[cols[j]]
        gj = g[j]
        hj = h[j]
        for i0 in range(0, n, SUM_CHUNK):
            # slices indexed from 0: over range(i0, i1) numba's negative-index wraparound is
            # not provably dead, and on AVX-512 LLVM vectorises the loads as gathers (about 10x
            # slower per element in benchmarks/fsa/pl_kernels.py)
            rs = row[i0:min(n, i0 + SUM_CHUNK)]
            ds = dx[i0:i0 + rs.size]
            ts = tx[i0:i0 + rs.size]
            for b in range(bins + 1):
                fb = ty(b)
                a = zero
                if track:
                    c = zero
                    for i in range(rs.size):
                        u = _hat(rs[i], fb, zero, one)
                        a += u * ds[i]
                        c += u * ts[i]
                    hj[b] += c
                else:
                    for i in range(rs.size):
                        a += _hat(rs[i], fb, zero, one) * ds[i]
                gj[b] += a


@njit(cache=True)
def pl_row_pass_t(S, y, loss, model, acc, track):
    """:func:`pl_row_pass` on the feature-major bin coordinates ``S`` (W, N): the scores of all
    rows by one sweep per kept feature, the loss rows, then the sums by one sweep per feature.
    (The passes are compute-bound: row chunks kept in L2 between the two sweeps measured no
    faster, and slower for wide float64 matrices, whose short per-feature runs miss the TLB.)
    Returns (loss sum, sum d, sum t)."""
    cols, fp, bins, beta, v, intercept = model
    g, h = acc
    N = S.shape[1]
    z = np.empty(N)
    t = np.empty(N)
    d = np.empty(N)
    pl_score_pass_t(S, cols, fp, bins, beta, v, intercept, z, t, track)
    lsum = loss_rows(loss, z, y, d)
    if track:
        weight_rows(y, t)
    _pl_sums_t(S, cols, bins, d, t, g, h, track)
    return lsum, d.sum(), t.sum()


@njit(cache=True)
def pl_score_pass_t(S, cols, fp, bins, beta, v, intercept, z, t, track):
    """:func:`pl_score_pass` on the feature-major bin coordinates ``S`` (W, N)."""
    E, D = _pl_tables(beta, bins)
    Ev, Dv = _pl_tables(v, bins)
    z[:] = centring_offset(fp, beta) + intercept
    t[:] = centring_offset(fp, v)
    _pl_scores_t(S, cols, bins, E, D, Ev, Dv, z, t, track)


@njit(cache=True)
def pl_grad_pass_t(S, cols, bins, r, w, g, h, track):
    """:func:`pl_grad_pass` on the feature-major bin coordinates ``S`` (W, N)."""
    _pl_sums_t(S, cols, bins, r, w, g, h, track)
    return r.sum(), w.sum()
