"""numba kernel of the infinite-push ADMM w-step (FISTA on a group-lasso with the pair operator).

No validation and no Python objects; the caller is :mod:`cvfs.core.infinite_push`. The NumPy twin
is ``tests.naive.ipush_wstep``.
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["fista_wstep"]


@njit(cache=True)
def _gram_grad(P, N, G, use_gram, y, out):
    """out = A^T A y, A's rows p_i - q_j: by the d x d Gram matrix or through P and N."""
    d = y.shape[0]
    if use_gram:
        for k in range(d):
            acc = 0.0
            for l in range(d):
                acc += G[k, l] * y[l]
            out[k] = acc
        return
    m, n = P.shape[0], N.shape[0]
    pw = P @ y
    nw = N @ y
    spw = pw.sum()
    snw = nw.sum()
    cp = n * pw - snw
    cn = spw - m * nw
    out[:] = P.T @ cp - N.T @ cn


@njit(cache=True)
def fista_wstep(P, N, G, use_gram, b, w, rho, lam, step, order, bounds, max_iter, tol):
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
        _gram_grad(P, N, G, use_gram, y, grad)
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
