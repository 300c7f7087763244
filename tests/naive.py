"""Slow, obviously-correct NumPy twins of the numba kernels (compared against in the tests)."""

import numpy as np

# ---- SBL ----


def gram_cd_epoch(G, b, pen, t, q, positive):
    """Twin of ``cvfs.core._lasso_kernels.gram_cd_epoch``: returns new (t, q)."""
    t = t.copy()
    for j in range(t.size):
        if G[j, j] <= 0:
            continue
        z = t[j] + (b[j] - G[j] @ t) / G[j, j]
        thr = pen[j] / G[j, j]
        t[j] = max(z - thr, 0.0) if positive else np.sign(z) * max(abs(z) - thr, 0.0)
    return t, G @ t


def gram_gap(b, pen, t, q, yy, positive):
    """Twin of ``gram_gap``: primal value and gap of the working-set problem."""
    corr = b - q
    c = corr if positive else np.abs(corr)
    scale = max(1.0, np.max(c / pen))
    rr = yy - 2 * b @ t + t @ q
    primal = 0.5 * rr + pen @ np.abs(t)
    # dual at eta = r / scale: 1/2 ||y||^2 - 1/2 ||y - eta||^2 with y^T r = yy - b^T t
    dual = 0.5 * yy - 0.5 * (yy - 2 * (yy - b @ t) / scale + rr / scale**2)
    return primal, primal - dual


def weighted_lasso_objective(Phi, y, pen, theta):
    """1/2 ||y - Phi theta||^2 + sum pen |theta|."""
    r = y - Phi @ theta
    return 0.5 * r @ r + pen @ np.abs(theta)


def gram_cd_solve(G, b, pen, t, yy, tol, max_epochs, positive):
    """Twin of ``gram_cd_solve`` without extrapolation: plain epochs until the gap is <= tol."""
    gap, epoch = np.inf, 0
    while epoch < max_epochs and gap > tol:
        epoch += 1
        t, q = gram_cd_epoch(G, b, pen, t, G @ t, positive)
        _, gap = gram_gap(b, pen, t, q, yy, positive)
    return t, epoch, gap
