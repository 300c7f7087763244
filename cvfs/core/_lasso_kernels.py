"""Numba kernels of the weighted lasso: coordinate descent on a working set's Gram matrix.

No validation, no Python objects; the orchestrator is :mod:`cvfs.core.sbl`. Every kernel has a
NumPy twin in ``tests/naive.py``. All kernels are deterministic (no ``fastmath``, no ``parallel``).

The subproblem on a working set W is

    min_t  1/2 t^T G t - b^T t + sum_j pen_j |t_j|      (t_j >= 0 if positive)

with G = Phi_W^T Phi_W and b = Phi_W^T y; it equals 1/2 ||y - Phi_W t||^2 + sum_j pen_j |t_j| up
to the constant 1/2 ||y||^2.
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["gram_cd_epoch", "gram_gap", "gram_cd_solve", "gram_rows_dot"]


@njit(cache=True)
def _soft(z, thr, positive):
    if positive:
        return max(z - thr, 0.0)
    if z > thr:
        return z - thr
    if z < -thr:
        return z + thr
    return 0.0


@njit(cache=True)
def gram_cd_epoch(G, b, pen, t, q, positive):
    """One cyclic coordinate-descent pass; updates ``t`` and ``q = G t`` in place."""
    k = t.shape[0]
    for j in range(k):
        gjj = G[j, j]
        if gjj <= 0.0:
            continue
        old = t[j]
        new = _soft(old + (b[j] - q[j]) / gjj, pen[j] / gjj, positive)
        d = new - old
        if d != 0.0:
            t[j] = new
            for i in range(k):
                q[i] += d * G[i, j]


@njit(cache=True)
def gram_gap(b, pen, t, q, yy, positive):
    """Primal value and duality gap of the working-set problem (residual rescaled to be feasible).

    Returns ``(primal, gap)`` with primal = 1/2 ||y - Phi_W t||^2 + sum pen |t|.
    """
    k = t.shape[0]
    bt = 0.0
    tq = 0.0
    l1 = 0.0
    scale = 1.0
    for j in range(k):
        bt += b[j] * t[j]
        tq += t[j] * q[j]
        l1 += pen[j] * abs(t[j])
        c = b[j] - q[j]
        if not positive:
            c = abs(c)
        if c > scale * pen[j]:
            scale = c / pen[j]
    rr = max(yy - 2.0 * bt + tq, 0.0)
    primal = 0.5 * rr + l1
    dual = (yy - bt) / scale - rr / (2.0 * scale * scale)
    return primal, primal - dual


@njit(cache=True)
def _objective(G, b, pen, t, yy):
    k = t.shape[0]
    val = 0.5 * yy
    for j in range(k):
        s = 0.0
        for i in range(k):
            s += G[j, i] * t[i]
        val += 0.5 * t[j] * s - b[j] * t[j] + pen[j] * abs(t[j])
    return val


@njit(cache=True)
def gram_cd_solve(G, b, pen, t, yy, tol, max_epochs, positive):
    """Coordinate descent with Anderson extrapolation until the gap is below ``tol``.

    ``t`` is updated in place. Every 5 epochs the last 5 iterates are extrapolated
    (Anderson / celer, Bertrand & Massias 2021) and the extrapolation is kept only if it lowers the
    objective. Returns ``(n_epochs, gap)``.
    """
    k = t.shape[0]
    K = 5
    q = G @ t
    hist = np.zeros((K + 1, k))
    gap = np.inf
    epoch = 0
    for epoch in range(1, max_epochs + 1):
        gram_cd_epoch(G, b, pen, t, q, positive)
        slot = (epoch - 1) % (K + 1)
        hist[slot] = t
        if slot == K:
            U = np.empty((K, k))
            for m in range(K):
                U[m] = hist[m + 1] - hist[m]
            UU = U @ U.T
            ok = True
            z = np.ones(K)
            try:
                z = np.linalg.solve(UU + 1e-14 * np.trace(UU) * np.eye(K), np.ones(K))
            except Exception:  # noqa: BLE001 - singular system: skip the extrapolation
                ok = False
            if ok and np.sum(z) != 0.0:
                c = z / np.sum(z)
                te = np.zeros(k)
                for m in range(K):
                    te += c[m] * hist[m + 1]
                if positive:
                    te = np.maximum(te, 0.0)
                if _objective(G, b, pen, te, yy) < _objective(G, b, pen, t, yy):
                    t[:] = te
                    q[:] = G @ t
        if epoch % 5 == 0 or epoch == max_epochs:
            _, gap = gram_gap(b, pen, t, q, yy, positive)
            if gap <= tol:
                break
    return epoch, gap


@njit(cache=True)
def gram_rows_dot(G, rows, w):
    """sum_j w_j G[rows_j, :] without copying the rows: G theta for a theta supported on
    ``rows`` (G symmetric). Returns ndarray of shape (G.shape[1],)."""
    out = np.zeros(G.shape[1])
    for j in range(rows.shape[0]):
        wj = w[j]
        r = rows[j]
        for i in range(G.shape[1]):
            out[i] += wj * G[r, i]
    return out
