"""Compiled bounded Levenberg-Marquardt fit of point sources plus a constant.

A source's profile is a mixture of integrated Gaussians sharing its centre: components of
amplitudes ``amp`` (summing to 1) and widths ``ratio`` times the source's width parameter
(:class:`cvfs.astro.psf.PSFProfile`); the integrated Gaussian is the one-component mixture
``amp = ratio = (1,)``, for which every sum below reduces to the single term exactly.

The normal equations J^T W^2 J and J^T W^2 r are accumulated pixel by pixel from the separable
per-axis factors of each source; a source only contributes to the pixels within
the radius where its profile falls below :data:`FLOOR` noise sigma, at most :data:`REACH` widths
of its centre (see ``_factors``), so the cost grows with the sources' areas, not with the square
of their number. Parameters at a bound whose gradient points out of the box are held
fixed for the step (an active set); every step is projected back into the box.
"""

import math

import numpy as np

from cvfs._jit import njit

#: a source's pixels: at most within REACH sigma of its centre (the profile is < 3e-7 of its
#: peak beyond)
REACH = 5.5

#: a profile component's reach ends where its pixel values fall below FLOOR noise sigma
FLOOR = 0.05

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
def _factors(p, h, w, amp, ratio, wmax):
    """Per-source, per-component axis profiles (amplitude folded into the row factors, the
    width derivative's chain-rule factor ``ratio`` too) and the pixel ranges sources reach.

    Component c (the integrated Gaussian has one) reaches REACH of its widths or, if nearer,
    the radius where its peak pixel value f amp[c] / (2 pi s_c^2), in noise units (times
    ``wmax``, the largest weight), falls below :data:`FLOOR`: the wings of faint sources are
    below the noise, those of bright ones are fitted."""
    k = (p.size - 1) // 4
    nc = amp.size
    x, y, s = np.empty(k * nc), np.empty(k * nc), np.empty(k * nc)
    for q in range(k):
        for c in range(nc):
            x[q * nc + c], y[q * nc + c] = p[4 * q], p[4 * q + 1]
            s[q * nc + c] = p[4 * q + 2] * ratio[c]
    ey, eyc, eys = np.empty((k * nc, h)), np.empty((k * nc, h)), np.empty((k * nc, h))
    ex, exc, exs = np.empty((k * nc, w)), np.empty((k * nc, w)), np.empty((k * nc, w))
    _axis(h, y, s, ey, eyc, eys)
    _axis(w, x, s, ex, exc, exs)
    for q in range(k * nc):
        a = amp[q % nc]
        r = ratio[q % nc]
        for i in range(h):
            ey[q, i] *= a
            eyc[q, i] *= a
            eys[q, i] *= a * r
        for j in range(w):
            exs[q, j] *= r
    # pixel ranges each source reaches
    r0, r1 = np.empty(k, np.int64), np.empty(k, np.int64)
    c0, c1 = np.empty(k, np.int64), np.empty(k, np.int64)
    for q in range(k):
        d = 0.0
        for c in range(nc):
            sc = p[4 * q + 2] * ratio[c]
            v = abs(p[4 * q + 3]) * amp[c] * wmax / (2.0 * math.pi * sc * sc) / FLOOR
            dc = sc * math.sqrt(2.0 * math.log(v)) if v > 1.0 else 0.0
            d = max(d, min(dc, REACH * sc))
        d += 1.0
        yq, xq = p[4 * q + 1], p[4 * q]
        r0[q], r1[q] = max(int(math.floor(yq - d)), 0), min(int(math.ceil(yq + d)) + 1, h)
        c0[q], c1[q] = max(int(math.floor(xq - d)), 0), min(int(math.ceil(xq + d)) + 1, w)
    return ey, eyc, eys, ex, exc, exs, r0, r1, c0, c1


@njit(cache=True)
def _wmax(wt):
    out = 0.0
    for i in range(wt.shape[0]):
        for j in range(wt.shape[1]):
            out = max(out, wt[i, j])
    return out


@njit(cache=True)
def chi2_of(patch, wt, p, amp, ratio):
    """Weighted chi^2 of parameters p = (x, y, sigma, flux) * k + (constant,)."""
    h, w = patch.shape
    k = (p.size - 1) // 4
    nc = amp.size
    ey, _, _, ex, _, _, r0, r1, c0, c1 = _factors(p, h, w, amp, ratio, _wmax(wt))
    model = np.full((h, w), p[-1])
    for q in range(k):
        f = p[4 * q + 3]
        for i in range(r0[q], r1[q]):
            for j in range(c0[q], c1[q]):
                t = 0.0
                for c in range(q * nc, q * nc + nc):
                    t += f * ey[c, i] * ex[c, j]
                model[i, j] += t
    out = 0.0
    for i in range(h):
        for j in range(w):
            if wt[i, j] > 0:
                r = (model[i, j] - patch[i, j]) * wt[i, j]
                out += r * r
    return out


@njit(cache=True)
def normal_equations(patch, wt, p, amp, ratio):
    """chi^2, J^T W^2 J and J^T W^2 r of the weighted residuals at p."""
    h, w = patch.shape
    m = p.size
    k = (m - 1) // 4
    nc = amp.size
    ey, eyc, eys, ex, exc, exs, r0, r1, c0, c1 = _factors(p, h, w, amp, ratio, _wmax(wt))
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
                    tx, ty, ts, tf, tm = 0.0, 0.0, 0.0, 0.0, 0.0
                    for c in range(q * nc, q * nc + nc):
                        tx += f * ey[c, i] * exc[c, j]
                        ty += f * eyc[c, i] * ex[c, j]
                        ts += eys[c, i] * ex[c, j] + ey[c, i] * exs[c, j]
                        tf += ey[c, i] * ex[c, j]
                        tm += f * ey[c, i] * ex[c, j]
                    row[b] = tx * wij
                    row[b + 1] = ty * wij
                    row[b + 2] = f * ts * wij
                    row[b + 3] = tf * wij
                    model += tm
            row[m - 1] = wij
            r = (model - patch[i, j]) * wij
            chi += r * r
            g[m - 1] += wij * r
            A[m - 1, m - 1] += wij * wij
            for a in range(na):
                ba = 4 * act[a]
                for u in range(4):
                    ru = row[ba + u]
                    g[ba + u] += ru * r
                    A[ba + u, m - 1] += ru * wij
                    # the source's own block: its upper triangle (mirrored below)
                    for v in range(u, 4):
                        A[ba + u, ba + v] += ru * row[ba + v]
                    for b2 in range(a + 1, na):
                        bb = 4 * act[b2]
                        for v in range(4):
                            A[ba + u, bb + v] += ru * row[bb + v]
    # the accumulation filled the upper triangles of the sources' own blocks, the blocks of
    # pairs of sources in the rows of the one listed first and the constant's column: mirror
    # them
    for a in range(m):
        for b2 in range(a + 1, m):
            s = A[a, b2] + A[b2, a] if (a // 4 != b2 // 4) else A[a, b2]
            A[a, b2] = s
            A[b2, a] = s
    return chi, A, g


@njit(cache=True)
def lm_fit(patch, wt, p0, lo, hi, tol, max_iter, amp, ratio):
    """Bounded Levenberg-Marquardt from p0 (Nielsen's damping update); returns
    (p, chi^2, iterations).

    Stops when a step that chi^2 follows as predicted lowers it by less than ``tol`` relative or
    moves every parameter by less than ``tol`` relative, or after ``max_iter`` steps.
    """
    m = p0.size
    p = np.minimum(np.maximum(p0, lo), hi)
    chi, A, g = normal_equations(patch, wt, p, amp, ratio)
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
        chin = chi2_of(patch, wt, pn, amp, ratio)
        rho = (chi - chin) / pred if pred > 0 else -1.0
        if chin < chi and rho > 0:
            moved = 0.0
            for a in range(m):
                moved = max(moved, abs(d[a]) / (abs(p[a]) + tol))
            drop = (chi - chin) / max(chi, 1e-300)
            p = pn
            if rho > 0.25 and (drop < tol or moved < tol):
                return p, chin, it
            chi, A, g = normal_equations(patch, wt, p, amp, ratio)
            mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            nu = 2.0
        else:
            mu *= nu
            nu *= 2.0
            if mu > 1e16:
                break
    return p, chi, it
