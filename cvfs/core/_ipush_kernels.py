"""numba kernels of the infinite-push ADMM: pair margins, the loss's proximal operator, the w-step.

No validation and no Python objects; the caller is :mod:`cvfs.core.infinite_push`. The positives
``P`` and negatives ``N`` are sorted by query: query q owns rows ``pb[q]:pb[q+1]`` of P and
``nb[q]:nb[q+1]`` of N, and its m_q x n_q block of pair values is stored row-major at
``ab[q]:ab[q+1]`` of a flat vector (one query: the whole m x n matrix). The NumPy twins are
``tests.naive.ipush_*``.
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["blocks_loss", "fista_wstep", "pair_margins", "pair_sums", "project_l1inf_kernel",
           "prox_blocks"]


@njit(cache=True)
def pair_margins(sp, sn, pb, nb, ab, out):
    """out[block q][i, j] = sp[i] - sn[j] for the positives i and negatives j of query q."""
    for q in range(pb.shape[0] - 1):
        k = ab[q]
        for i in range(pb[q], pb[q + 1]):
            for j in range(nb[q], nb[q + 1]):
                out[k] = sp[i] - sn[j]
                k += 1


@njit(cache=True)
def pair_sums(c, pb, nb, ab, rp, rn):
    """Row sums ``rp`` (per positive) and column sums ``rn`` (per negative) of every block."""
    rp[:] = 0.0
    rn[:] = 0.0
    for q in range(pb.shape[0] - 1):
        k = ab[q]
        for i in range(pb[q], pb[q + 1]):
            for j in range(nb[q], nb[q + 1]):
                rp[i] += c[k]
                rn[j] += c[k]
                k += 1


@njit(cache=True)
def blocks_loss(a, pb, nb, ab, out):
    """out[q] = max_j mean_i max(0, 1 - a_q[i, j]): the infinite-push hinge of every query."""
    for q in range(pb.shape[0] - 1):
        m = pb[q + 1] - pb[q]
        n = nb[q + 1] - nb[q]
        col = np.zeros(n)
        k = ab[q]
        for _ in range(m):
            for j in range(n):
                h = 1.0 - a[k]
                if h > 0.0:
                    col[j] += h
                k += 1
        out[q] = col.max() / m


@njit(cache=True)
def _caps_at(theta, S, c, total, kk):
    """Sum of the column caps mu_j(theta) = max((S[k_j - 1, j] - theta) / k_j, 0), with
    k_j = #{k : c[k, j] <= theta}; ``kk`` receives the k_j."""
    m, n = S.shape
    f = 0.0
    for j in range(n):
        lo, hi = 1, m  # c[0, j] = 0 <= theta; find the largest k with c[k-1, j] <= theta
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if c[mid - 1, j] <= theta:
                lo = mid
            else:
                hi = mid - 1
        kk[j] = lo
        if total[j] > theta:
            f += (S[lo - 1, j] - theta) / lo
    return f


@njit(cache=True)
def project_l1inf_kernel(B, radius):
    """Euclidean projection of B (m x n) onto ``{Y >= 0 : sum_j max_i Y[i, j] <= radius}``.

    ``Y = min(B+, mu_j)`` with caps ``mu_j(theta)``; the sum of the caps f(theta) is piecewise
    linear, decreasing and convex in the common slack theta, so Newton's method from theta = 0
    (where f > radius) rises monotonically and lands on the root exactly, one linear piece per
    step.
    """
    m, n = B.shape
    Bp = np.maximum(B, 0.0)
    s0 = 0.0
    for j in range(n):
        s0 += Bp[:, j].max()
    if s0 <= radius:
        return Bp
    S = np.empty((m, n))
    c = np.empty((m, n))
    total = np.empty(n)
    for j in range(n):
        b = -np.sort(-Bp[:, j])
        acc = 0.0
        for k in range(m):
            acc += b[k]
            S[k, j] = acc
            c[k, j] = acc - (k + 1) * b[k]
        total[j] = acc
    kk = np.empty(n, dtype=np.int64)
    theta = 0.0
    for _ in range(m * n + n + 2):  # at most one step per linear piece
        f = _caps_at(theta, S, c, total, kk)
        if f - radius <= 1e-14 * radius:
            break
        slope = 0.0
        for j in range(n):
            if total[j] > theta:
                slope += 1.0 / kk[j]
        step = (f - radius) / slope
        if step <= 0.0:
            break
        theta += step
    _caps_at(theta, S, c, total, kk)
    Y = np.empty((m, n))
    for j in range(n):
        mu = 0.0
        if total[j] > theta:
            mu = (S[kk[j] - 1, j] - theta) / kk[j]
        for i in range(m):
            Y[i, j] = min(Bp[i, j], mu)
    return Y


@njit(cache=True)
def prox_blocks(v, t, pb, nb, ab, out):
    """Proximal operator of ``sum_q t[q] * loss_q`` block by block (loss_q: the infinite-push
    hinge of query q): ``a = v + t_q * P_K((1 - v) / t_q)``, K the non-negative l1,inf ball of
    radius 1 / m_q (Moreau's identity; the loss is the support function of K)."""
    for q in range(pb.shape[0] - 1):
        m = pb[q + 1] - pb[q]
        n = nb[q + 1] - nb[q]
        blk = v[ab[q]:ab[q + 1]].reshape(m, n)
        Y = project_l1inf_kernel((1.0 - blk) / t[q], 1.0 / m)
        k = ab[q]
        for i in range(m):
            for j in range(n):
                out[k] = blk[i, j] + t[q] * Y[i, j]
                k += 1


@njit(cache=True)
def _gram_grad(P, N, pb, nb, G, use_gram, y, out):
    """out = A^T A y, A's rows p_i - q_j over the pairs of each query: by the d x d Gram matrix,
    or through P and N (linear in the number of items)."""
    d = y.shape[0]
    if use_gram:
        for k in range(d):
            acc = 0.0
            for l in range(d):
                acc += G[k, l] * y[l]
            out[k] = acc
        return
    pw = P @ y
    nw = N @ y
    cp = np.empty(pw.shape[0])
    cn = np.empty(nw.shape[0])
    for q in range(pb.shape[0] - 1):
        m = pb[q + 1] - pb[q]
        n = nb[q + 1] - nb[q]
        spw = pw[pb[q]:pb[q + 1]].sum()
        snw = nw[nb[q]:nb[q + 1]].sum()
        for i in range(pb[q], pb[q + 1]):
            cp[i] = n * pw[i] - snw
        for j in range(nb[q], nb[q + 1]):
            cn[j] = spw - m * nw[j]
    out[:] = P.T @ cp - N.T @ cn


@njit(cache=True)
def fista_wstep(P, N, pb, nb, G, use_gram, b, w, rho, lam, step, order, bounds, max_iter, tol):
    """min_w lam * sum_g ||w_g||_2 + rho/2 ||A w||^2 - rho b.w by FISTA, warm-started at ``w``.

    ``order[bounds[g]:bounds[g+1]]`` are the features of group g (singletons for the l1 norm);
    ``step`` is 1 / (rho * ||A||_2^2). Returns the new w.
    """
    d = w.shape[0]
    w_old = w.copy()
    y = w.copy()
    grad = np.empty(d)
    z = np.empty(d)
    t_k = 1.0
    thr = step * lam
    for _ in range(max_iter):
        _gram_grad(P, N, pb, nb, G, use_gram, y, grad)
        for k in range(d):
            z[k] = y[k] - step * rho * (grad[k] - b[k])
        w_new = np.zeros(d)
        for g in range(bounds.shape[0] - 1):
            nrm = 0.0
            for q in range(bounds[g], bounds[g + 1]):
                nrm += z[order[q]] * z[order[q]]
            nrm = np.sqrt(nrm)
            if nrm > thr:
                scale = 1.0 - thr / nrm
                for q in range(bounds[g], bounds[g + 1]):
                    w_new[order[q]] = scale * z[order[q]]
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k))
        mom = (t_k - 1.0) / t_next
        delta = 0.0
        wn = 0.0
        for k in range(d):
            diff = w_new[k] - w_old[k]
            y[k] = w_new[k] + mom * diff
            delta += diff * diff
            wn += w_new[k] * w_new[k]
        w_old = w_new
        t_k = t_next
        if np.sqrt(delta) <= tol * max(1.0, np.sqrt(wn)):
            break
    return w_old
