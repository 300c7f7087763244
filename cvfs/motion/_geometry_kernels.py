"""Compiled kernels of the two-view geometry, without the (n, M, 3) and (T, n, 9) intermediates
of the vectorised forms:

- :func:`kept_hypotheses`: residuals of every track against every hypothesis of a frame pair,
  reduced to each track's best-fitting ones, and :func:`shared_counts`, the hypotheses two
  tracks share (the affinities of :mod:`cvfs.motion.geometry`);
- :func:`pair_fits` and :func:`track_medians`: weighted fits of a set of tracks in every frame
  pair (affine map, homography, fundamental matrix; refitted on the best share) and each
  track's median residual under them (:mod:`cvfs.motion.geometry_features`,
  :mod:`cvfs.motion.geometry_merge`).
"""

import numpy as np

from cvfs._jit import njit

TRANSFER, SAMPSON = 0, 1


@njit(cache=True)
def _row_residuals(kind, H, x, y, u, v, out):
    """Residuals of the point pair ``(x, y) -> (u, v)`` against every map ``H`` (M, 3, 3):
    squared transfer error (``kind`` TRANSFER) or squared Sampson distance (SAMPSON); non-finite
    values become inf. The three-term sums are added in the orders :func:`numpy.einsum` adds
    them in :func:`cvfs.motion.geometry.transfer_residuals` and
    :func:`~cvfs.motion.geometry.sampson_residuals`: the same values bit for bit."""
    for m in range(H.shape[0]):
        if kind == TRANSFER:
            p0 = (H[m, 0, 0] * x + H[m, 0, 2]) + H[m, 0, 1] * y
            p1 = (H[m, 1, 0] * x + H[m, 1, 2]) + H[m, 1, 1] * y
            w = (H[m, 2, 0] * x + H[m, 2, 2]) + H[m, 2, 1] * y
            if abs(w) < 1e-12:
                w = 1e-12
            dx = p0 / w - u
            dy = p1 / w - v
            r = dx * dx + dy * dy
        else:
            a0 = (H[m, 0, 0] * x + H[m, 0, 2]) + H[m, 0, 1] * y
            a1 = (H[m, 1, 0] * x + H[m, 1, 2]) + H[m, 1, 1] * y
            a2 = (H[m, 2, 0] * x + H[m, 2, 2]) + H[m, 2, 1] * y
            b0 = (H[m, 0, 0] * u + H[m, 1, 0] * v) + H[m, 2, 0]  # einsum's order for F^T
            b1 = (H[m, 0, 1] * u + H[m, 1, 1] * v) + H[m, 2, 1]
            num = (a0 * u + a2) + a1 * v
            den = a0 * a0 + a1 * a1 + b0 * b0 + b1 * b1
            r = num * num / max(den, 1e-300)
        out[m] = r if np.isfinite(r) else np.inf


@njit(cache=True)
def kept_hypotheses(kind, H, x1, x2, h):
    """Indices (n, h) of the ``h`` hypotheses among ``H`` (M, 3, 3) with the smallest residuals
    of each point pair ``x1[i] -> x2[i]`` (``kind``: TRANSFER or SAMPSON), in index order; of
    hypotheses tied at the cut (a minimal set drawn twice) the first ones."""
    n, M = x1.shape[0], H.shape[0]
    out = np.empty((n, h), dtype=np.int64)
    r = np.empty(M)
    for i in range(n):
        _row_residuals(kind, H, x1[i, 0], x1[i, 1], x2[i, 0], x2[i, 1], r)
        cut = np.partition(r, h - 1)[h - 1]
        below = 0
        for m in range(M):
            below += r[m] < cut
        ties = h - below  # hypotheses at the cut kept, in index order
        j = 0
        for m in range(M):
            if r[m] < cut or (r[m] == cut and ties > 0):
                if r[m] == cut:
                    ties -= 1
                out[i, j] = m
                j += 1
    return out


# ---------------------------------------------------------------- fits of sets of tracks
AFFINE, HOMOGRAPHY, FUNDAMENTAL = 0, 1, 2


@njit(cache=True)
def _normaliser(x, w):
    """Weighted Hartley normalisation of points ``x`` (n, 2): centroid, scale and the (3, 3)
    similarity taking the weighted centroid to 0 and the weighted mean distance to sqrt(2)."""
    sw, cx, cy = 0.0, 0.0, 0.0
    for j in range(x.shape[0]):
        sw += w[j]
        cx += w[j] * x[j, 0]
        cy += w[j] * x[j, 1]
    sw = max(sw, 1e-12)
    cx, cy = cx / sw, cy / sw
    d = 0.0
    for j in range(x.shape[0]):
        d += w[j] * np.sqrt((x[j, 0] - cx) ** 2 + (x[j, 1] - cy) ** 2)
    s = np.sqrt(2.0) / max(d / sw, 1e-12)
    T = np.zeros((3, 3))
    T[0, 0] = T[1, 1] = s
    T[0, 2], T[1, 2], T[2, 2] = -s * cx, -s * cy, 1.0
    return cx, cy, s, T


@njit(cache=True)
def _accumulate(N, row, wt):
    for a in range(9):
        ra = wt * row[a]
        for b in range(a, 9):
            N[a, b] += ra * row[b]


@njit(cache=True)
def fit_model(kind, x1, x2, w):
    """One weighted linear fit ``x2 ~ M x1`` of the point pairs (n, 2) with weights ``w`` (n,):
    the affine map (least squares, unnormalised), the homography (normalised DLT) or the
    fundamental matrix (normalised 8-point, rank 2 enforced); (3, 3)."""
    out = np.zeros((3, 3))
    if kind == AFFINE:
        G = np.zeros((3, 3))
        B = np.zeros((3, 2))
        for j in range(x1.shape[0]):
            if w[j] == 0.0:
                continue
            X = (x1[j, 0], x1[j, 1], 1.0)
            for a in range(3):
                for b in range(3):
                    G[a, b] += w[j] * X[a] * X[b]
                B[a, 0] += w[j] * X[a] * x2[j, 0]
                B[a, 1] += w[j] * X[a] * x2[j, 1]
        for a in range(3):
            G[a, a] += 1e-9
        sol = np.linalg.solve(G, B)
        out[:2, :] = sol.T
        out[2, 2] = 1.0
        return out
    c1x, c1y, s1, T1 = _normaliser(x1, w)
    c2x, c2y, s2, T2 = _normaliser(x2, w)
    N = np.zeros((9, 9))
    row = np.empty(9)
    for j in range(x1.shape[0]):
        if w[j] == 0.0:
            continue
        a0, a1 = (x1[j, 0] - c1x) * s1, (x1[j, 1] - c1y) * s1
        b0, b1 = (x2[j, 0] - c2x) * s2, (x2[j, 1] - c2y) * s2
        wt = w[j] * w[j]
        if kind == HOMOGRAPHY:
            row[0], row[1], row[2] = a0, a1, 1.0
            row[3] = row[4] = row[5] = 0.0
            row[6], row[7], row[8] = -b0 * a0, -b0 * a1, -b0
            _accumulate(N, row, wt)
            row[0] = row[1] = row[2] = 0.0
            row[3], row[4], row[5] = a0, a1, 1.0
            row[6], row[7], row[8] = -b1 * a0, -b1 * a1, -b1
            _accumulate(N, row, wt)
        else:
            row[0], row[1], row[2] = b0 * a0, b0 * a1, b0
            row[3], row[4], row[5] = b1 * a0, b1 * a1, b1
            row[6], row[7], row[8] = a0, a1, 1.0
            _accumulate(N, row, wt)
    for a in range(9):
        for b in range(a):
            N[a, b] = N[b, a]
    _, vec = np.linalg.eigh(N)
    Mn = np.ascontiguousarray(vec[:, 0]).reshape(3, 3)
    if kind == HOMOGRAPHY:
        return np.linalg.inv(T2) @ Mn @ T1
    u, sv, vt = np.linalg.svd(Mn)
    sv[2] = 0.0
    return T2.T @ ((u * sv) @ vt) @ T1


@njit(cache=True)
def residual(kind, M, x, y, u, v):
    """Squared transfer error (affine map, homography) or Sampson distance (fundamental matrix)
    of the point pair ``(x, y) -> (u, v)`` under M."""
    if kind == FUNDAMENTAL:
        a0 = M[0, 0] * x + M[0, 1] * y + M[0, 2]
        a1 = M[1, 0] * x + M[1, 1] * y + M[1, 2]
        a2 = M[2, 0] * x + M[2, 1] * y + M[2, 2]
        b0 = M[0, 0] * u + M[1, 0] * v + M[2, 0]
        b1 = M[0, 1] * u + M[1, 1] * v + M[2, 1]
        num = a0 * u + a1 * v + a2
        return num * num / max(a0 * a0 + a1 * a1 + b0 * b0 + b1 * b1, 1e-300)
    p0 = M[0, 0] * x + M[0, 1] * y + M[0, 2]
    p1 = M[1, 0] * x + M[1, 1] * y + M[1, 2]
    w = M[2, 0] * x + M[2, 1] * y + M[2, 2]
    if abs(w) < 1e-12:
        w = 1e-12
    dx, dy = p0 / w - u, p1 / w - v
    return dx * dx + dy * dy


@njit(cache=True)
def pair_fits(kind, x1, x2, both, members, min_fit, min_refit, keep):
    """Fits of the tracks ``members`` in every frame pair: ``x1``, ``x2`` (T, P, 2) the tracks'
    points in the pair's two frames, ``both`` (T, P) where a track is observed in both. A pair
    with at least ``min_fit`` observed members is fitted on all of them, then refitted on the
    ``keep`` share with the smallest residuals (the ones ranked up to ``ceil(keep n)``, ties
    included) when at least ``min_refit`` remain. Returns (fits (T, 3, 3), fitted (T,) bool)."""
    T = both.shape[0]
    n = members.size
    fits = np.zeros((T, 3, 3))
    fitted = np.zeros(T, dtype=np.bool_)
    xa, xb = np.empty((n, 2)), np.empty((n, 2))
    w, w2, r = np.empty(n), np.empty(n), np.empty(n)
    for t in range(T):
        cnt = 0.0
        for j in range(n):
            m = members[j]
            w[j] = 1.0 if both[t, m] else 0.0
            cnt += w[j]
            xa[j, 0], xa[j, 1] = x1[t, m, 0], x1[t, m, 1]
            xb[j, 0], xb[j, 1] = x2[t, m, 0], x2[t, m, 1]
        if cnt < min_fit:
            continue
        fitted[t] = True
        M = fit_model(kind, xa, xb, w)
        for j in range(n):
            r[j] = residual(kind, M, xa[j, 0], xa[j, 1], xb[j, 0], xb[j, 1]) if w[j] > 0 \
                else np.inf
        rank = max(int(np.ceil(keep * cnt)) - 1, 0)
        cut = np.partition(r, rank)[rank]
        cnt2 = 0.0
        for j in range(n):
            w2[j] = w[j] if r[j] <= cut else 0.0
            cnt2 += w2[j]
        if cnt2 >= min_refit:
            M = fit_model(kind, xa, xb, w2)
        fits[t] = M
    return fits, fitted


@njit(cache=True)
def track_medians(kind, x1, x2, both, fits, fitted, tracks):
    """Per track (P,): the median over the fitted pairs observing it of its residual under the
    pair's fit, at the tracks listed in ``tracks`` (NaN where no such pair, and elsewhere)."""
    T, P = both.shape
    out = np.full(P, np.nan)
    buf = np.empty(T)
    for p in tracks:
        k = 0
        for t in range(T):
            if fitted[t] and both[t, p]:
                buf[k] = residual(kind, fits[t], x1[t, p, 0], x1[t, p, 1], x2[t, p, 0],
                                  x2[t, p, 1])
                k += 1
        if k:
            s = np.sort(buf[:k])
            out[p] = 0.5 * (s[(k - 1) // 2] + s[k // 2])
    return out


@njit(cache=True)
def shared_counts(indptr, indices, t_indptr, t_indices, start, stop, n_cols):
    """Rows ``start:stop`` of ``K @ K.T`` for a 0/1 sparse matrix K given as CSR
    (``indptr``, ``indices``) and its transpose as CSR (``t_indptr``, ``t_indices``): how many
    columns (kept hypotheses) each pair of rows (tracks) shares; (stop - start, n_cols) int32."""
    out = np.zeros((stop - start, n_cols), dtype=np.int32)
    for i in range(start, stop):
        for a in range(indptr[i], indptr[i + 1]):
            c = indices[a]
            for b in range(t_indptr[c], t_indptr[c + 1]):
                out[i - start, t_indices[b]] += 1
    return out
