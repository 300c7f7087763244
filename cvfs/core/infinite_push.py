"""Sparse support vector Infinite Push: ADMM with the proximal operator of the top-of-list hinge.

Problem (Rakotomamonjy, ICML 2012, eq. 2 and 4), positives p_i (m rows), negatives q_j (n rows)::

    min_w  lam * Omega(w) + max_j (1/m) sum_i [1 - w.(p_i - q_j)]_+

with Omega the l1 norm or the l1-l2 group norm. ADMM splits a = A w (A's rows are p_i - q_j, the
m x n matrix ``a`` holds them, A is never formed): the w-step is a lasso-type problem solved by
warm-started FISTA on the d x d Gram matrix of A, the a-step is the proximal operator of the loss,
computed through a projection onto a non-negative l1,inf ball (the loss is a support function).
"""

import logging
import warnings

import numpy as np

from cvfs.base import ConvergenceWarning
from cvfs.core._ipush_kernels import fista_wstep

__all__ = [
    "InfinitePushResult",
    "infinite_push_admm",
    "infinite_push_lam_max",
    "infinite_push_loss",
    "project_l1inf_nonneg",
    "prox_infinite_push",
]

logger = logging.getLogger(__name__)


def infinite_push_loss(a):
    """Infinite-push hinge of a margin matrix.

    Parameters
    ----------
    a : ndarray of shape (m, n)
        Pair margins ``a[i, j] = w.(p_i - q_j)``.

    Returns
    -------
    float
        ``max_j mean_i max(0, 1 - a[i, j])``.
    """
    return float(np.max(np.mean(np.maximum(0.0, 1.0 - a), axis=0)))


def project_l1inf_nonneg(B, radius):
    """Euclidean projection onto ``{Y >= 0 : sum_j max_i Y[i, j] <= radius}``.

    The solution is ``Y[i, j] = min(B+[i, j], mu_j)``; the column caps ``mu_j`` share one value
    ``theta = sum_i (B+[i, j] - mu_j)_+`` over the capped columns (Quattoni et al. 2009). ``theta``
    is bisected until its active sets are identified, then solved exactly on them.

    Parameters
    ----------
    B : ndarray of shape (m, n)
    radius : float > 0

    Returns
    -------
    ndarray of shape (m, n)
    """
    Bp = np.maximum(B, 0.0)
    col_max = Bp.max(axis=0)
    if col_max.sum() <= radius:
        return Bp
    m = Bp.shape[0]
    b = -np.sort(-Bp, axis=0)  # descending per column
    S = np.cumsum(b, axis=0)
    k = np.arange(1, m + 1, dtype=np.float64)[:, None]
    c = S - k * b  # c[k-1, j] = sum_i (b_i - b_k)_+, non-decreasing in k
    total = S[-1]

    def caps(theta):
        kk = np.sum(c <= theta, axis=0)  # >= 1 as c[0] = 0 <= theta
        idx = kk - 1
        s_k = S[idx, np.arange(S.shape[1])]
        mu = np.maximum((s_k - theta) / kk, 0.0)
        mu[total <= theta] = 0.0
        return mu, kk

    cols = np.arange(S.shape[1])
    lo, hi = 0.0, float(total.max())
    mu = None
    for _ in range(200):
        theta = 0.5 * (lo + hi)
        mu, kk = caps(theta)
        # exact step on the active sets of theta: mu_j = (S_kj - theta) / k_j is linear in theta
        active = mu > 0
        if np.any(active):
            s_k = S[kk - 1, cols]
            th = (np.sum(s_k[active] / kk[active]) - radius) / np.sum(1.0 / kk[active])
            c_next = np.where(kk < m, c[np.minimum(kk, m - 1), cols], np.inf)
            ok = (np.all(c[kk - 1, cols][active] <= th + 1e-12)
                  and np.all(th <= c_next[active] + 1e-12)
                  and np.all(total[~active] <= th + 1e-12) and th >= 0)
            if ok:
                mu = np.zeros_like(mu)
                mu[active] = np.maximum((s_k[active] - th) / kk[active], 0.0)
                break
        if mu.sum() > radius:
            lo = theta
        else:
            hi = theta
    return np.minimum(Bp, mu[None, :])


def prox_infinite_push(v, t):
    """Proximal operator of ``t * infinite_push_loss``.

    ``argmin_a t * max_j (1/m) sum_i [1 - a_ij]_+ + 1/2 ||a - v||^2``. With z = 1 - a the loss
    is the support function of K = {Y >= 0 : sum_j max_i Y_ij <= 1/m}, so by Moreau
    ``prox(z0) = z0 - t * P_K(z0 / t)``.

    Parameters
    ----------
    v : ndarray of shape (m, n)
    t : float > 0

    Returns
    -------
    ndarray of shape (m, n)
    """
    v = np.asarray(v, dtype=np.float64)
    m = v.shape[0]
    z0 = 1.0 - v
    z = z0 - t * project_l1inf_nonneg(z0 / t, 1.0 / m)
    return 1.0 - z


def _penalty_value(w, groups):
    if groups is None:
        return float(np.abs(w).sum())
    return float(sum(np.linalg.norm(w[g]) for g in groups))


def infinite_push_lam_max(P, N, groups=None):
    """Smallest ``lam`` for which ``w = 0`` solves the sparse Infinite Push problem.

    At w = 0 every hinge is active, so the loss subdifferential is
    ``{-(mean(P) - N^T mu) : mu in the simplex}``; ``lam_max`` is the smallest dual norm of its
    elements (l-inf for l1, max_g ||.||_2 for l1-l2). The l1 case is a linear program (scipy's
    HiGHS); the group case minimises the same convex function by SLSQP.

    Parameters
    ----------
    P : ndarray of shape (m, d)
    N : ndarray of shape (n, d)
    groups : list of int ndarrays or None

    Returns
    -------
    float
    """
    from scipy.optimize import linprog, minimize

    n, d = N.shape
    pbar = P.mean(axis=0)
    # variables (mu, t): min t s.t. -t <= pbar - N^T mu <= t, sum mu = 1, mu >= 0
    c = np.r_[np.zeros(n), 1.0]
    A_ub = np.block([[-N.T, -np.ones((d, 1))], [N.T, -np.ones((d, 1))]])
    b_ub = np.r_[-pbar, pbar]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=np.r_[np.ones(n), 0.0][None, :], b_eq=[1.0],
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    if groups is None:
        return float(res.fun)

    def dual_norm(mu):
        g = pbar - N.T @ mu
        return max(np.linalg.norm(g[idx]) for idx in groups)

    out = minimize(dual_norm, res.x[:n], method="SLSQP", bounds=[(0, None)] * n,
                   constraints=[{"type": "eq", "fun": lambda mu: mu.sum() - 1.0}])
    return float(min(out.fun, dual_norm(res.x[:n])))


def _group_layout(d, groups):
    """Features sorted by group and the group boundaries (singletons for the l1 norm)."""
    if groups is None:
        return np.arange(d, dtype=np.int64), np.arange(d + 1, dtype=np.int64)
    order = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64)
    return order, bounds


class InfinitePushResult:
    """Output of :func:`infinite_push_admm`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
    objective : list of float
        Objective ``lam * Omega(w) + loss(A w)`` after every ADMM iteration.
    primal_residual, dual_residual : list of float
    n_iter : int
    converged : bool
    """

    def __init__(self, coef, objective, primal_residual, dual_residual, n_iter, converged):
        self.coef = coef
        self.objective = objective
        self.primal_residual = primal_residual
        self.dual_residual = dual_residual
        self.n_iter = n_iter
        self.converged = converged


def infinite_push_admm(P, N, lam, *, groups=None, rho=1.0, max_iter=500, tol=1e-4,
                       inner_iter=50, coef_init=None, adapt_iter=50):
    """Sparse SV Infinite Push by ADMM (no validation; see :class:`cvfs.InfinitePushRanker`).

    Parameters
    ----------
    P : ndarray of shape (m, d)
        Positive examples.
    N : ndarray of shape (n, d)
        Negative examples.
    lam : float >= 0
        Weight of the penalty.
    groups : list of int ndarrays or None
        None: l1 penalty; otherwise the l1-l2 penalty sum_g ||w_g||_2 over these index sets
        (a partition of the features).
    rho : float > 0
        Initial ADMM penalty; adapted by residual balancing (Boyd et al. 2011, section 3.4.1).
    max_iter : int
        Maximum number of ADMM iterations.
    tol : float
        Stop when the primal and dual residuals are below ``tol`` relative to their scale.
    inner_iter : int
        Maximum FISTA iterations of each w-step (warm-started).
    coef_init : ndarray of shape (d,) or None

    Returns
    -------
    InfinitePushResult

    References
    ----------
    Rakotomamonjy, Sparse support vector infinite push, ICML 2012, eqs. (4)-(7).
    """
    m, d = P.shape
    n = N.shape[0]
    sp, sn = P.sum(axis=0), N.sum(axis=0)
    G = n * (P.T @ P) + m * (N.T @ N) - np.outer(sp, sn) - np.outer(sn, sp)
    L_G = max(float(np.linalg.eigvalsh(G)[-1]), 1e-12)
    # A^T A y costs d^2 with the Gram matrix, 2 (m + n) d through P and N
    use_gram = d * d <= 2 * (m + n) * d
    order, bounds = _group_layout(d, groups)

    def A_mul(w):
        return (P @ w)[:, None] - (N @ w)[None, :]

    def At_mul(c):
        return P.T @ c.sum(axis=1) - N.T @ c.sum(axis=0)

    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64)
    Aw = A_mul(w)
    a = Aw.copy()
    u = np.zeros((m, n))
    objective, r_hist, s_hist = [], [], []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        # w-step: min lam*Omega(w) + rho/2 ||A w - (a - u)||^2 by FISTA, warm-started
        b = At_mul(a - u)
        w = fista_wstep(P, N, G, use_gram, b, w, rho, lam, 1.0 / (rho * L_G), order, bounds,
                        inner_iter, 1e-10)
        Aw = A_mul(w)
        # a-step: prox of the infinite-push loss
        a_prev = a
        a = prox_infinite_push(Aw + u, 1.0 / rho)
        u += Aw - a
        r = float(np.linalg.norm(Aw - a))
        s = float(rho * np.linalg.norm(At_mul(a - a_prev)))
        objective.append(lam * _penalty_value(w, groups) + infinite_push_loss(Aw))
        r_hist.append(r)
        s_hist.append(s)
        eps_pri = tol * max(np.linalg.norm(Aw), np.linalg.norm(a), np.sqrt(m * n) * 1e-3)
        eps_dual = tol * max(float(rho * np.linalg.norm(At_mul(u))), 1e-3)
        if r <= eps_pri and s <= eps_dual:
            converged = True
            break
        # residual balancing; the scaled dual variable follows rho
        if it <= adapt_iter and r > 10.0 * s:
            rho *= 2.0
            u /= 2.0
        elif it <= adapt_iter and s > 10.0 * r:
            rho /= 2.0
            u *= 2.0
    if not converged:
        warnings.warn(f"Infinite push ADMM did not converge in max_iter={max_iter} iterations "
                      f"(primal residual {r_hist[-1]:.2e}, dual residual {s_hist[-1]:.2e}); "
                      "increase max_iter or tol", ConvergenceWarning, stacklevel=2)
    logger.debug("infinite push ADMM: %d iterations, objective %.6g", it, objective[-1])
    return InfinitePushResult(w, objective, r_hist, s_hist, it, converged)
