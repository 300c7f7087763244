"""Compiled bounded Levenberg-Marquardt fit of integrated Gaussian sources plus a constant.

The normal equations J^T W^2 J and J^T W^2 r are accumulated pixel by pixel from the separable
per-axis factors of each source; a source only contributes to the pixels within
:data:`REACH` widths of its centre, so the cost grows with the sources' areas, not with the
square of their number. Parameters at a bound whose gradient points out of the box are held
fixed for the step (an active set); every step is projected back into the box.
"""

import math

import numpy as np

from cvfs._jit import njit

#: a source's pixels: within REACH sigma of its centre (the profile is < 3e-7 of its peak beyond)
REACH = 5.5

#: largest move of a source's position in one step (px); starts are within about a pixel
MAX_SHIFT = 1.0

_SQ2 = math.sqrt(2.0)
_SQPI = math.sqrt(math.pi)


@njit(cache=True)
def _axis(n, c, s, out_v, out_c, out_s):
    """Integrated profile of sources at c, widths s along an axis of n pixels, and d/dc, d/ds."""
    for q in range(c.size):
        for i in range(n):
            a = (i - c[q] + 0.5) / (_SQ2 * s[q])
            b = (i - c[q] - 0.5) / (_SQ2 * s[q])
            ea, eb = math.exp(-a * a), math.exp(-b * b)
            out_v[q, i] = 0.5 * (math.erf(a) - math.erf(b))
            out_c[q, i] = -(ea - eb) / (_SQ2 * _SQPI * s[q])
            out_s[q, i] = (-a * ea + b * eb) / (_SQPI * s[q])


@njit(cache=True)
def _factors(p, h, w):
    k = (p.size - 1) // 4
    x, y, s = np.empty(k), np.empty(k), np.empty(k)
    for q in range(k):
        x[q], y[q], s[q] = p[4 * q], p[4 * q + 1], p[4 * q + 2]
    ey, eyc, eys = np.empty((k, h)), np.empty((k, h)), np.empty((k, h))
    ex, exc, exs = np.empty((k, w)), np.empty((k, w)), np.empty((k, w))
    _axis(h, y, s, ey, eyc, eys)
    _axis(w, x, s, ex, exc, exs)
    # pixel ranges each source reaches
    r0, r1 = np.empty(k, np.int64), np.empty(k, np.int64)
    c0, c1 = np.empty(k, np.int64), np.empty(k, np.int64)
    for q in range(k):
        d = REACH * s[q] + 1.0
        r0[q], r1[q] = max(int(math.floor(y[q] - d)), 0), min(int(math.ceil(y[q] + d)) + 1, h)
        c0[q], c1[q] = max(int(math.floor(x[q] - d)), 0), min(int(math.ceil(x[q] + d)) + 1, w)
    return ey, eyc, eys, ex, exc, exs, r0, r1, c0, c1


@njit(cache=True)
def chi2_of(patch, wt, p):
    """Weighted chi^2 of parameters p = (x, y, sigma, flux) * k + (constant,)."""
    h, w = patch.shape
    k = (p.size - 1) // 4
    ey, _, _, ex, _, _, r0, r1, c0, c1 = _factors(p, h, w)
    model = np.full((h, w), p[-1])
    for q in range(k):
        f = p[4 * q + 3]
        for i in range(r0[q], r1[q]):
            for j in range(c0[q], c1[q]):
                model[i, j] += f * ey[q, i] * ex[q, j]
    out = 0.0
    for i in range(h):
        for j in range(w):
            if wt[i, j] > 0:
                r = (model[i, j] - patch[i, j]) * wt[i, j]
                out += r * r
    return out


@njit(cache=True)
def normal_equations(patch, wt, p):
    """chi^2, J^T W^2 J and J^T W^2 r of the weighted residuals at p."""
    h, w = patch.shape
    m = p.size
    k = (m - 1) // 4
    ey, eyc, eys, ex, exc, exs, r0, r1, c0, c1 = _factors(p, h, w)
    A = np.zeros((m, m))
    g = np.zeros(m)
    chi = 0.0
    act = np.empty(k, np.int64)
    row = np.zeros(m)
    for i in range(h):
        for j in range(w):
            wij = wt[i, j]
            if wij <= 0:
                continue
            na = 0
            model = p[-1]
            for q in range(k):
                if r0[q] <= i < r1[q] and c0[q] <= j < c1[q]:
                    act[na] = q
                    na += 1
                    f = p[4 * q + 3]
                    b = 4 * q
                    row[b] = f * ey[q, i] * exc[q, j] * wij
                    row[b + 1] = f * eyc[q, i] * ex[q, j] * wij
                    row[b + 2] = f * (eys[q, i] * ex[q, j] + ey[q, i] * exs[q, j]) * wij
                    row[b + 3] = ey[q, i] * ex[q, j] * wij
                    model += f * ey[q, i] * ex[q, j]
            row[m - 1] = wij
            r = (model - patch[i, j]) * wij
            chi += r * r
            g[m - 1] += wij * r
            A[m - 1, m - 1] += wij * wij
            for a in range(na):
                ba = 4 * act[a]
                for u in range(4):
                    g[ba + u] += row[ba + u] * r
                    A[ba + u, m - 1] += row[ba + u] * wij
                    for b2 in range(a, na):
                        bb = 4 * act[b2]
                        for v in range(4):
                            A[ba + u, bb + v] += row[ba + u] * row[bb + v]
    # the accumulation filled blocks (a <= b) and the constant's column: mirror them
    for a in range(m):
        for b2 in range(a + 1, m):
            s = A[a, b2] + A[b2, a] if (a // 4 != b2 // 4) else A[a, b2]
            A[a, b2] = s
            A[b2, a] = s
    return chi, A, g


@njit(cache=True)
def lm_fit(patch, wt, p0, lo, hi, tol, max_iter):
    """Bounded Levenberg-Marquardt from p0 (Nielsen's damping update); returns
    (p, chi^2, iterations).

    Stops when a step that chi^2 follows as predicted lowers it by less than ``tol`` relative or
    moves every parameter by less than ``tol`` relative, or after ``max_iter`` steps.
    """
    m = p0.size
    p = np.minimum(np.maximum(p0, lo), hi)
    chi, A, g = normal_equations(patch, wt, p)
    mu, nu = -1.0, 2.0
    it = 0
    while it < max_iter:
        it += 1
        free = np.ones(m, np.bool_)
        for a in range(m):
            if (p[a] <= lo[a] and g[a] > 0) or (p[a] >= hi[a] and g[a] < 0):
                free[a] = False
        idx = np.flatnonzero(free)
        if idx.size == 0:
            break
        n = idx.size
        sub = np.empty((n, n))
        rhs = np.empty(n)
        for a in range(n):
            rhs[a] = -g[idx[a]]
            for b in range(n):
                sub[a, b] = A[idx[a], idx[b]]
        dmax = 0.0
        for a in range(n):
            dmax = max(dmax, sub[a, a])
        if dmax <= 0.0:
            break
        diag = np.empty(n)
        for a in range(n):
            diag[a] = max(sub[a, a], 1e-12 * dmax)
        if mu < 0:
            mu = 1e-3
        M = sub.copy()
        for a in range(n):
            M[a, a] += mu * diag[a]
        step = np.linalg.solve(M, rhs)
        # a trust region on positions: no source moves more than MAX_SHIFT px per step
        big = 0.0
        for a in range(n):
            if idx[a] < m - 1 and idx[a] % 4 < 2:
                big = max(big, abs(step[a]))
        if big > MAX_SHIFT:
            step *= MAX_SHIFT / big
        pn = p.copy()
        for a in range(n):
            pn[idx[a]] += step[a]
        pn = np.minimum(np.maximum(pn, lo), hi)
        d = pn - p
        # predicted chi^2 decrease of the (projected) step under the linear model
        pred = 0.0
        for a in range(m):
            if d[a] != 0.0:
                pred -= 2.0 * g[a] * d[a]
                for b in range(m):
                    if d[b] != 0.0:
                        pred -= d[a] * A[a, b] * d[b]
        chin = chi2_of(patch, wt, pn)
        rho = (chi - chin) / pred if pred > 0 else -1.0
        if chin < chi and rho > 0:
            moved = 0.0
            for a in range(m):
                moved = max(moved, abs(d[a]) / (abs(p[a]) + tol))
            drop = (chi - chin) / max(chi, 1e-300)
            p = pn
            chi, A, g = normal_equations(patch, wt, p)
            mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            nu = 2.0
            if rho > 0.25 and (drop < tol or moved < tol):
                break
        else:
            mu *= nu
            nu *= 2.0
            if mu > 1e16:
                break
    return p, chi, it
