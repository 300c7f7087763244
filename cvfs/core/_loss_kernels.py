"""numba kernels of the losses on scores: values and derivatives per row, and the pairwise
ranking loss. No validation, no Python objects; the loss classes in :mod:`cvfs.core.losses`
implement the same formulas by ``code`` (tests compare both), and every kernel has a NumPy twin
in ``tests/naive.py`` or is compared against those classes.
"""

import math

import numpy as np

from cvfs._jit import njit

__all__ = ["HUBER_SVM", "LOGISTIC", "LORENZ", "LOSS_NONE", "RANK", "SQUARED", "loss_rows",
           "loss_value_grad", "rank_pairs"]

LOSS_NONE = -1
SQUARED, LOGISTIC, LORENZ, HUBER_SVM, RANK = 0, 1, 2, 3, 4


@njit(cache=True)
def loss_value_grad(code, param, z, y):
    """Loss value and d loss / dz at score ``z`` and target ``y`` (margin losses: y = +-1)."""
    if code == SQUARED:
        d = z - y
        return 0.5 * d * d, d
    if code == LOSS_NONE:
        return 0.0, 0.0
    u = y * z
    if code == LOGISTIC:
        if u > 0:
            e = math.exp(-u)
            return math.log1p(e), -y * e / (1.0 + e)
        e = math.exp(u)
        return -u + math.log1p(e), -y / (1.0 + e)
    if code == LORENZ:
        if u >= 1.0:
            return 0.0, 0.0
        t = u - 1.0
        return math.log1p(t * t), y * 2.0 * t / (1.0 + t * t)
    # HUBER_SVM with half-width param
    h = param
    if u > 1.0 + h:
        return 0.0, 0.0
    if u < 1.0 - h:
        return 1.0 - u, -y
    q = 1.0 + h - u
    return q * q / (4.0 * h), -y * q / (2.0 * h)


_LOG2E = np.float32(1.4426950408889634)
_ROUND = np.float32(12582912.0)  # 1.5 * 2**23: x + _ROUND rounds x to an integer in its low bits
_ROUND_BITS = np.int32(0x4B400000)  # the bits of _ROUND
_LN2_HI = np.float32(0.693145751953125)  # ln 2 = _LN2_HI + _LN2_LO, _LN2_HI exact in 12 bits
_LN2_LO = np.float32(1.428606765330187e-06)


@njit(cache=True, fastmath={"contract"})
def _exp_neg_abs(u, out):
    """out_i = exp(-|u_i|) to a relative error < 2e-7 (exp(-40) for |u_i| > 40, which changes
    no sum or derivative by more than 5e-18).

    Single precision where it is cheap and double where it matters: a = min(|u|, 40) is split
    into its float32 rounding a32 and the rest (|a - a32| <= 1.2e-6, applied in float64 as the
    factor 1 - (a - a32)); exp(-a32) = 2^-n exp(r) with n = round(a32 / ln 2), r = n ln 2 - a32
    (|r| <= ln 2 / 2, exact in float32 with the two-part ln 2) and a degree-7 Taylor polynomial
    (error 5e-9), evaluated in float32; 2^-n is applied by subtracting n from the exponent
    bits. No library call and no branch, so the loops vectorise with eight float32 lanes per
    AVX2 register: 2-2.5x faster than an all-float64 version (exp(-a/64)^64, degree 14); the
    exp is a large part of a logistic FSA fit at N = M = 1000 (benchmarks/synthetic_tables.py
    times that fit). The derivatives and the loss of the logistic rows inherit the 2e-7
    (their sums are float64). Only "contract" fastmath: reassociation could fold the rounding
    (x + _ROUND) - _ROUND away.
    """
    n = u.size
    p32 = np.empty(n, dtype=np.float32)
    k32 = np.empty(n, dtype=np.float32)
    for i in range(n):
        a = min(abs(u[i]), 40.0)
        a32 = np.float32(a)
        out[i] = 1.0 - (a - np.float64(a32))
        kf = a32 * _LOG2E + _ROUND
        nf = kf - _ROUND
        r = nf * _LN2_HI - a32 + nf * _LN2_LO
        p = np.float32(1.0 / 5040.0)
        p = p * r + np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        p32[i] = p
        k32[i] = kf
    pb = p32.view(np.int32)
    kb = k32.view(np.int32)
    for i in range(n):
        pb[i] -= (kb[i] - _ROUND_BITS) << 23
    for i in range(n):
        out[i] *= p32[i]


@njit(cache=True)
def loss_rows(code, param, z, y, d):
    """Sum of the loss over rows and its derivative per row (into ``d``).

    The Lorenz branch accumulates sum_i log1p(t_i^2) as the log of the running product of
    (1 + t_i^2), flushed to a log before it could overflow (relative error ~1e-13).

    The logistic branch needs one exp per row (e_i = exp(-|u_i|) by :func:`_exp_neg_abs`):
    sum_i log1p(e_i) is accumulated as the log of the running product of (1 + e_i) in (1, 2],
    taken every 512 rows (relative error of the sum ~1e-13; derivatives to ~1e-14).
    """
    if code == LORENZ:  # sum of log1p(t^2) as the log of a product, flushed before overflow
        total = 0.0
        prod = 1.0
        for i in range(z.size):
            u = y[i] * z[i]
            if u >= 1.0:
                d[i] = 0.0
                continue
            t = u - 1.0
            q = 1.0 + t * t
            d[i] = y[i] * 2.0 * t / q
            prod *= q
            if prod > 1e250:
                total += math.log(prod)
                prod = 1.0
        return total + math.log(prod)
    if code != LOGISTIC:
        total = 0.0
        for i in range(z.size):
            val, di = loss_value_grad(code, param, z[i], y[i])
            total += val
            d[i] = di
        return total
    return _logistic_rows(z, y, d)


@njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _logistic_rows(z, y, d):
    """Logistic branch of :func:`loss_rows`, branch-free so that its loops vectorise (numpy's
    error model: Python's zero-division check on 1 / (1 + e) would keep the division loop
    scalar; 1 + e >= 1)."""
    n = z.size
    total = 0.0
    u = np.empty(n)
    for i in range(n):
        u[i] = y[i] * z[i]
        total += max(-u[i], 0.0)
    _exp_neg_abs(u, d)  # e_i = exp(-|u_i|) (separate arrays: in place would not vectorise)
    # sum_i log1p(e_i) as the log of products of (1 + e_i) in (1, 2], eight running products
    # per chunk of 512 rows (one vector register; a single running product is a serial chain)
    p = np.empty(8)
    for c0 in range(0, n, 512):
        c1 = min(n, c0 + 512)
        p[:] = 1.0
        i = c0
        while i + 8 <= c1:
            for k in range(8):
                p[k] *= 1.0 + d[i + k]
            i += 8
        prod = 1.0
        for k in range(8):
            prod *= p[k]
        while i < c1:
            prod *= 1.0 + d[i]
            i += 1
        total += math.log(prod)
    for i in range(n):
        e = d[i]
        d[i] = -y[i] * (e if u[i] > 0.0 else 1.0) / (1.0 + e)
    return total


@njit(cache=True)
def rank_pairs(z, t, pi, pj, pr, pw, r, w, track):
    """Pairwise ranking loss, weighted mean over pairs (weights ``pw`` sum to 1): fills
    r = d loss / dz and w = D^T W D t (the curvature operator applied to t). Returns the loss."""
    r[:] = 0.0
    w[:] = 0.0
    lsum = 0.0
    for p in range(pi.size):
        i = pi[p]
        j = pj[p]
        d = z[i] - z[j]
        if d > 0:
            e = math.exp(-d)
            sp = d + math.log1p(e)
            sig = 1.0 / (1.0 + e)
        else:
            e = math.exp(d)
            sp = math.log1p(e)
            sig = e / (1.0 + e)
        lsum += (sp - pr[p] * d) * pw[p]
        s = (sig - pr[p]) * pw[p]
        r[i] += s
        r[j] -= s
        if track:
            dt = (t[i] - t[j]) * pw[p]
            w[i] += dt
            w[j] -= dt
    return lsum
