"""numba kernels of the tracker's appearance check (:class:`cvfs.motion.tracking.PatchTemplates`).

Each kernel computes, for a batch of patches, what a short chain of NumPy array expressions
computes, with the same floating-point operations in the same order (float32 where NumPy keeps
float32, NumPy's pairwise order for row sums), so the tracks do not depend on which of the two
computed them; the NumPy twins are in ``tests/naive.py``. The matrix products, inverses and SVDs
of the alignment stay with NumPy (BLAS/LAPACK), whose summation order no kernel here reproduces.
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["ncc_rows", "residuals", "step_matrices", "warp_maps"]

# NumPy's pairwise summation: eight accumulators over blocks of at most this many terms
_PW_BLOCK = 128


@njit(cache=True)
def _pairwise_sum(a, n, zero):
    """``a[:n].sum()`` in NumPy's pairwise order, in ``a``'s dtype; ``zero`` (-0.0 of that
    dtype) starts sums of fewer than 8 terms."""
    if n < 8:
        res = zero
        for i in range(n):
            res += a[i]
        return res
    if n <= _PW_BLOCK:
        r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
        r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
        stop = n - n % 8
        i = 8
        while i < stop:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, n2, zero) + _pairwise_sum(a[n2:], n - n2, zero)


@njit(cache=True)
def _row_sum(a, zero):
    """``a.sum()`` of a 1-D array as NumPy's ``sum(axis=1)`` gives it for one row."""
    return zero + _pairwise_sum(a, a.size, zero)


@njit(cache=True)
def warp_maps(centres, A, d, rows, u, v, mx, my):
    """Sampling positions ``centres + A @ (u, v) + d`` of the tracks ``rows``, into ``mx`` and
    ``my`` (len(rows), m), float32; ``u``, ``v`` (m,), float32 offsets."""
    for k in range(rows.size):
        i = rows[k]
        t0 = np.float32(centres[i, 0] + d[i, 0])
        t1 = np.float32(centres[i, 1] + d[i, 1])
        a00, a01 = np.float32(A[i, 0, 0]), np.float32(A[i, 0, 1])
        a10, a11 = np.float32(A[i, 1, 0]), np.float32(A[i, 1, 1])
        for j in range(u.size):
            mx[k, j] = (t0 + a00 * u[j]) + a01 * v[j]
            my[k, j] = (t1 + a10 * u[j]) + a11 * v[j]


@njit(cache=True)
def _inside(x, y, h, w):
    return x >= 0 and x <= w - 1 and y >= 0 and y <= h - 1


@njit(cache=True)
def residuals(cur, mx, my, ids, T, mu, sig, seen, h, w, err):
    """Gain- and bias-normalised residual of each sampled patch against its template, into
    ``err`` (n, m), float32; 0 where the pixel lies outside either frame.

    ``cur`` (n, m) float32: the patches sampled at ``mx``, ``my``; ``ids`` (n,): their
    templates, rows of ``T`` (templates, float32), ``mu``, ``sig`` (their means and standard
    deviations, (., 1) float32) and ``seen`` (inside the template's frame, bool); ``h``, ``w``:
    the frame's size.
    """
    n, m = cur.shape
    z32 = np.float32(-0.0)
    floor = np.float32(1e-6)
    sq = np.empty(m, np.float32)
    for k in range(n):
        i = ids[k]
        row = cur[k]
        mean = np.float32(np.float64(_row_sum(row, z32)) / m)
        for j in range(m):
            x = row[j] - mean
            sq[j] = x * x
        s = np.sqrt(np.float32(np.float64(_row_sum(sq, z32)) / m))
        big = s if s >= floor or s != s else floor  # np.maximum(s, 1e-6)
        ratio = sig[i, 0] / big
        q = mu[i, 0]
        for j in range(m):
            if seen[i, j] and _inside(mx[k, j], my[k, j], h, w):
                err[k, j] = (row[j] - mean) * ratio + (q - T[i, j])
            else:
                err[k, j] = 0.0


@njit(cache=True)
def _clip(x, lo, hi):
    """``np.clip`` of a float: NaN stays NaN."""
    if x != x:
        return x
    if x < lo:
        x = lo
    if x > hi:
        return hi
    return x


@njit(cache=True)
def step_matrices(dp, A, d, act, lin, shift, tol, Wd, W, keep):
    """One inverse compositional step of the tracks ``act``, up to the matrix algebra.

    ``dp`` (n, 6) float64, the Gauss-Newton steps (a11-1, a12, a21, a22-1, dx, dy), is clipped
    in place to ``lin`` (linear part) and ``shift`` (translation); ``Wd`` and ``W`` (n, 3, 3),
    zero on entry, receive the step's warp and the current warp (``A``, ``d`` at rows ``act``)
    as homogeneous matrices, and ``keep`` (n,) whether the clipped step reaches ``tol``.
    """
    for k in range(act.size):
        big = 0.0
        nan = False
        for j in range(6):
            cap = lin if j < 4 else shift
            x = _clip(dp[k, j], -cap, cap)
            dp[k, j] = x
            if x != x:
                nan = True
            elif abs(x) > big:
                big = abs(x)
        keep[k] = not nan and big >= tol
        Wd[k, 0, 0] = 1.0 + dp[k, 0]
        Wd[k, 0, 1] = 0.0 + dp[k, 1]
        Wd[k, 1, 0] = 0.0 + dp[k, 2]
        Wd[k, 1, 1] = 1.0 + dp[k, 3]
        Wd[k, 0, 2] = dp[k, 4]
        Wd[k, 1, 2] = dp[k, 5]
        Wd[k, 2, 2] = 1.0
        i = act[k]
        W[k, 0, 0] = A[i, 0, 0]
        W[k, 0, 1] = A[i, 0, 1]
        W[k, 1, 0] = A[i, 1, 0]
        W[k, 1, 1] = A[i, 1, 1]
        W[k, 0, 2] = d[i, 0]
        W[k, 1, 2] = d[i, 1]
        W[k, 2, 2] = 1.0


@njit(cache=True)
def ncc_rows(T, cur, idx, seen, mx, my, h, w, out):
    """Normalised cross-correlation of each template ``T[idx[k]]`` with its sampled patch
    ``cur[k]`` over the pixels inside both frames (``seen``, and ``mx``, ``my`` within ``h``,
    ``w``), into ``out`` (n,), float64; 1 where either is flat."""
    n, m = cur.shape
    z32 = np.float32(-0.0)
    z64 = -0.0
    wa = np.empty(m, np.float32)
    wb = np.empty(m, np.float32)
    a = np.empty(m)
    b = np.empty(m)
    p = np.empty(m)
    inw = np.empty(m, np.bool_)
    for k in range(n):
        i = idx[k]
        cnt = 0
        for j in range(m):
            inw[j] = seen[i, j] and _inside(mx[k, j], my[k, j], h, w)
            cnt += inw[j]
            f = np.float32(1.0) if inw[j] else np.float32(0.0)
            wa[j] = T[i, j] * f
            wb[j] = cur[k, j] * f
        cnt = max(cnt, 1)
        ma = np.float64(_row_sum(wa, z32)) / cnt
        mb = np.float64(_row_sum(wb, z32)) / cnt
        for j in range(m):
            if inw[j]:
                a[j] = np.float64(T[i, j]) - ma
                b[j] = np.float64(cur[k, j]) - mb
            else:
                a[j] = 0.0
                b[j] = 0.0
        for j in range(m):
            p[j] = a[j] * a[j]
        saa = _row_sum(p, z64)
        for j in range(m):
            p[j] = b[j] * b[j]
        sbb = _row_sum(p, z64)
        for j in range(m):
            p[j] = a[j] * b[j]
        sab = _row_sum(p, z64)
        den = np.sqrt(saa * sbb)
        out[k] = sab / den if den > 0 else 1.0
