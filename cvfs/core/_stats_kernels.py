"""numba kernel of the FSA solver's first pass over the data: per-column statistics (shifted
sums, minimum and maximum) and the raw gradient sums of the first iteration. No validation, no
Python objects; conventions as in :mod:`cvfs.core._kernels`. Its NumPy twin is in
``tests/naive.py``.
"""

import math

from cvfs._jit import njit


@njit(cache=True, fastmath={"reassoc", "contract"})
def column_stats(X, shift, s1, s2, lo, hi, d, gacc, minmax=True):
    """One row-wise pass accumulating per column sum(x - shift), sum((x - shift)^2), and with
    ``minmax`` min and max (shifting by a sample value keeps the variance free of
    cancellation), and gacc_j += sum_i d_i (x_ij - shift_j) (with d the loss derivatives at
    beta = 0 these are the raw gradient sums of FSA's first iteration, whose scores are all the
    intercept, so it needs no pass of its own; d = 0 otherwise). Four rows per sweep, so the
    per-column accumulators are loaded and stored once per four rows; the min/max sweep over
    the same four rows (from L1/L2) is skipped for linear responses, which need only the mean
    and variance: that pass is then memory-bound (about the time of a plain ``X.sum()``;
    min/max add ~70%). Returns False if a value is not finite (a
    NaN or infinity propagates into the sums, so the check is done once on them; the loops stay
    branch-free and vectorised)."""
    N, M = X.shape
    i = 0
    while i + 4 <= N:
        x0r, x1r, x2r, x3r = X[i], X[i + 1], X[i + 2], X[i + 3]
        d0, d1, d2, d3 = d[i], d[i + 1], d[i + 2], d[i + 3]
        for j in range(M):
            sh = shift[j]
            e0, e1, e2, e3 = x0r[j] - sh, x1r[j] - sh, x2r[j] - sh, x3r[j] - sh
            s1[j] += (e0 + e1) + (e2 + e3)
            s2[j] += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)
            gacc[j] += (d0 * e0 + d1 * e1) + (d2 * e2 + d3 * e3)
        if minmax:
            for j in range(M):
                x0, x1, x2, x3 = x0r[j], x1r[j], x2r[j], x3r[j]
                a = x0 if x0 < x1 else x1
                b = x2 if x2 < x3 else x3
                a = a if a < b else b
                lo[j] = a if a < lo[j] else lo[j]
                a = x0 if x0 > x1 else x1
                b = x2 if x2 > x3 else x3
                a = a if a > b else b
                hi[j] = a if a > hi[j] else hi[j]
        i += 4
    while i < N:
        row = X[i]
        di = d[i]
        for j in range(M):
            x = row[j]
            e = x - shift[j]
            s1[j] += e
            s2[j] += e * e
            gacc[j] += di * e
            if minmax:
                lo[j] = x if x < lo[j] else lo[j]
                hi[j] = x if x > hi[j] else hi[j]
        i += 1
    for j in range(M):
        if not (math.isfinite(s1[j]) and math.isfinite(s2[j])):
            return False
    return True
