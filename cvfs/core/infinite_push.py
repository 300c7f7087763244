"""Support vector Infinite Push (sparse or l2): ADMM with the prox of the top-of-list hinge.

Problem (Rakotomamonjy, ICML 2012, eqs. 2 and 4), per query q the positives p_i (m_q rows) and
negatives q_j (n_q rows), Q queries with both::

    min_w  lam * Omega(w) + (1/Q) sum_q max_j (1/m_q) sum_i [1 - w.(p_i - q_j)]_+

with Omega the l1 norm, the l1-l2 group norm or (1/2)||w||^2 (Agarwal's SVM Infinite Push). ADMM
splits a = A w (A's rows are p_i - q_j within a query; the pair values live in one flat vector of
m_q x n_q blocks, A is never formed): the w-step is a lasso-type problem solved by warm-started
FISTA (l1, l1-l2) or in closed form from a factor of A^T A (l2); the a-step is the proximal
operator of the loss, block by block, through a projection onto a non-negative l1,inf ball (the
loss is a support function). Everything but the pair blocks is linear in the number of items.
"""

import logging
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from cvfs.base import ConvergenceWarning
from cvfs.core._ipush_kernels import (
    blocks_loss,
    fista_wstep,
    pair_margins,
    pair_sums,
    project_l1inf_kernel,
    prox_blocks,
)

__all__ = [
    "PENALTIES",
    "InfinitePushResult",
    "infinite_push_admm",
    "infinite_push_lam_max",
    "infinite_push_loss",
    "infinite_push_objective",
    "pair_gram",
    "project_l1inf_nonneg",
    "prox_infinite_push",
    "query_blocks",
]

logger = logging.getLogger(__name__)

PENALTIES = ("l1", "l1_l2", "l2")


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
    ``theta = sum_i (B+[i, j] - mu_j)_+`` over the capped columns (Quattoni et al. 2009). The cap
    sum is piecewise linear in ``theta``; ``theta`` is found exactly between two breakpoints.

    Parameters
    ----------
    B : ndarray of shape (m, n)
    radius : float > 0

    Returns
    -------
    ndarray of shape (m, n)
    """
    return project_l1inf_kernel(np.ascontiguousarray(B, dtype=np.float64), float(radius))


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
    v = np.ascontiguousarray(v, dtype=np.float64)
    m, n = v.shape
    out = np.empty(m * n)
    bounds = np.array([0, m], dtype=np.int64), np.array([0, n], dtype=np.int64)
    prox_blocks(v.ravel(), np.array([float(t)]), bounds[0], bounds[1],
                np.array([0, m * n], dtype=np.int64), out)
    return out.reshape(m, n)


def query_blocks(X, y, queries=None):
    """The positives and negatives of every query, sorted by query.

    In each query the items of its highest relevance are the positives and all others the
    negatives; a query whose items all share one relevance (no positive or no negative) has no
    pair and is left out.

    Parameters
    ----------
    X : ndarray of shape (n_samples, d)
    y : ndarray of shape (n_samples,)
        Relevance (higher = better).
    queries : ndarray of shape (n_samples,) or None
        Query of each item; None: one query.

    Returns
    -------
    P : ndarray of shape (m, d)
    N : ndarray of shape (n, d)
    p_bounds, n_bounds : ndarray of shape (Q + 1,), int64
        Query q owns rows ``p_bounds[q]:p_bounds[q+1]`` of P and ``n_bounds[q]:n_bounds[q+1]``
        of N.
    n_skipped : int
        Queries without pairs.
    """
    n_items = y.shape[0]
    qid = (np.zeros(n_items, dtype=np.int64) if queries is None
           else np.unique(queries, return_inverse=True)[1].ravel())
    n_q = int(qid.max()) + 1 if n_items else 0
    top = np.full(n_q, -np.inf)
    np.maximum.at(top, qid, y)
    pos = y == top[qid]
    n_pos = np.bincount(qid[pos], minlength=n_q)
    n_neg = np.bincount(qid[~pos], minlength=n_q)
    keep = (n_pos > 0) & (n_neg > 0)
    order = np.argsort(qid, kind="stable")
    order = order[keep[qid[order]]]
    po, ne = order[pos[order]], order[~pos[order]]
    p_bounds = np.concatenate([[0], np.cumsum(n_pos[keep])]).astype(np.int64)
    n_bounds = np.concatenate([[0], np.cumsum(n_neg[keep])]).astype(np.int64)
    return X[po], X[ne], p_bounds, n_bounds, int(n_q - keep.sum())


def _penalty_value(w, penalty, feature_groups):
    """Omega(w): (1/2)||w||^2, or sum_g ||w_g||_2 (singleton groups: the l1 norm)."""
    if penalty == "l2":
        return 0.5 * float(w @ w)
    if feature_groups is None:
        return float(np.abs(w).sum())
    return float(sum(np.linalg.norm(w[g]) for g in feature_groups))


def _single(P, N, p_bounds, n_bounds):
    if p_bounds is None:
        return (np.array([0, P.shape[0]], dtype=np.int64),
                np.array([0, N.shape[0]], dtype=np.int64))
    return np.asarray(p_bounds, dtype=np.int64), np.asarray(n_bounds, dtype=np.int64)


def infinite_push_lam_max(P, N, feature_groups=None, *, p_bounds=None, n_bounds=None):
    """Smallest ``lam`` for which ``w = 0`` solves the sparse Infinite Push problem.

    At w = 0 every hinge is active, so the loss subdifferential is
    ``{-(1/Q) sum_q (mean(P_q) - N_q^T mu_q) : every mu_q in a simplex}``; ``lam_max`` is the
    smallest dual norm of its elements (l-inf for l1, max_g ||.||_2 for l1-l2). The l1 case is a
    linear program (scipy's HiGHS); the group case minimises the same convex function by SLSQP.

    Parameters
    ----------
    P : ndarray of shape (m, d)
    N : ndarray of shape (n, d)
    feature_groups : list of int ndarrays or None
    p_bounds, n_bounds : ndarray of shape (Q + 1,) or None
        Query layout of P and N (:func:`query_blocks`); None: one query.

    Returns
    -------
    float
    """
    from scipy.optimize import linprog, minimize

    pb, nb = _single(P, N, p_bounds, n_bounds)
    n_q = pb.size - 1
    n, d = N.shape
    pbar = np.add.reduceat(P, pb[:-1], axis=0) / np.diff(pb)[:, None]
    pbar = pbar.mean(axis=0)
    Nq = N.T / n_q
    # variables (mu, t): min t s.t. -t <= pbar - Nq mu <= t, sum of mu over each query = 1
    c = np.r_[np.zeros(n), 1.0]
    A_ub = np.block([[-Nq, -np.ones((d, 1))], [Nq, -np.ones((d, 1))]])
    b_ub = np.r_[-pbar, pbar]
    A_eq = np.zeros((n_q, n + 1))
    for q in range(n_q):
        A_eq[q, nb[q]:nb[q + 1]] = 1.0
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=np.ones(n_q),
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    if feature_groups is None:
        return float(res.fun)

    def dual_norm(mu):
        g = pbar - Nq @ mu
        return max(np.linalg.norm(g[idx]) for idx in feature_groups)

    out = minimize(dual_norm, res.x[:n], method="SLSQP", bounds=[(0, None)] * n,
                   constraints=[{"type": "eq", "fun": lambda mu: A_eq[:, :n] @ mu - 1.0}])
    return float(min(out.fun, dual_norm(res.x[:n])))


def _group_layout(d, feature_groups):
    """Features sorted by group and the group boundaries (singletons for the l1 norm)."""
    if feature_groups is None:
        return np.arange(d, dtype=np.int64), np.arange(d + 1, dtype=np.int64)
    order = np.concatenate([np.asarray(g, dtype=np.int64) for g in feature_groups])
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in feature_groups])]).astype(np.int64)
    return order, bounds


def pair_gram(P, N, p_bounds, n_bounds):
    """``A^T A`` (d x d) for the pairs within each query, from the items (A is not formed).

    ``sum_q n_q P_q^T P_q + m_q N_q^T N_q - s_pq s_nq^T - s_nq s_pq^T`` with s the query sums.
    """
    mq, nq = np.diff(p_bounds), np.diff(n_bounds)
    Pw = P * np.sqrt(np.repeat(nq, mq))[:, None]
    Nw = N * np.sqrt(np.repeat(mq, nq))[:, None]
    SP = np.add.reduceat(P, p_bounds[:-1], axis=0)
    SN = np.add.reduceat(N, n_bounds[:-1], axis=0)
    C = SP.T @ SN
    return Pw.T @ Pw + Nw.T @ Nw - C - C.T


def _pair_factor(P, N, p_bounds, n_bounds, G=None, vectors=True):
    """``V, s2`` with ``A^T A = V diag(s2) V^T`` (V has orthonormal columns; None if not
    ``vectors``).

    With more features than items, from the thin SVD of ``M^(1/2) Z`` (Z the items of a query,
    M the Laplacian of its complete bipartite pair graph, ``A^T A = Z^T M Z``): cost items^2 * d
    instead of d^3.
    """
    d = P.shape[1]
    k = P.shape[0] + N.shape[0]
    if d <= k:
        G = pair_gram(P, N, p_bounds, n_bounds) if G is None else G
        if not vectors:
            return None, np.maximum(np.linalg.eigvalsh(G), 0.0)
        s2, V = np.linalg.eigh(G)
        return V, np.maximum(s2, 0.0)
    rows = []
    for q in range(p_bounds.size - 1):
        Pq, Nq = P[p_bounds[q]:p_bounds[q + 1]], N[n_bounds[q]:n_bounds[q + 1]]
        m, n = Pq.shape[0], Nq.shape[0]
        M = np.block([[n * np.eye(m), -np.ones((m, n))], [-np.ones((n, m)), m * np.eye(n)]])
        ev, U = np.linalg.eigh(M)
        rows.append((U * np.sqrt(np.maximum(ev, 0.0))) @ U.T @ np.vstack([Pq, Nq]))
    if not vectors:
        s = np.linalg.svd(np.vstack(rows), compute_uv=False)
        return None, s * s
    _, s, Vt = np.linalg.svd(np.vstack(rows), full_matrices=False)
    return Vt.T, s * s


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


def infinite_push_objective(w, P, N, lam, *, penalty="l1", feature_groups=None, p_bounds=None,
                            n_bounds=None):
    """``lam * Omega(w) + (1/Q) sum_q loss_q``, the problem :func:`infinite_push_admm` solves.

    Parameters are those of :func:`infinite_push_admm`; ``w`` is ndarray of shape (d,).

    Returns
    -------
    float
    """
    pb, nb = _single(P, N, p_bounds, n_bounds)
    ab = np.concatenate([[0], np.cumsum(np.diff(pb) * np.diff(nb))]).astype(np.int64)
    a = np.empty(ab[-1])
    pair_margins(P @ w, N @ w, pb, nb, ab, a)
    loss = np.empty(pb.size - 1)
    blocks_loss(a, pb, nb, ab, loss)
    return lam * _penalty_value(w, penalty, feature_groups) + float(loss.mean())


def infinite_push_admm(P, N, lam, *, penalty="l1", feature_groups=None, p_bounds=None,
                       n_bounds=None, rho=1.0, max_iter=500, tol=1e-4, inner_iter=50,
                       coef_init=None, adapt_iter=50):
    """Support vector Infinite Push by ADMM (no validation; see :class:`cvfs.InfinitePushRanker`).

    Parameters
    ----------
    P : ndarray of shape (m, d)
        Positive examples (sorted by query when ``p_bounds`` is given).
    N : ndarray of shape (n, d)
        Negative examples (sorted by query when ``n_bounds`` is given).
    lam : float >= 0
        Weight of the penalty.
    penalty : {"l1", "l1_l2", "l2"}
        ``"l1"`` / ``"l1_l2"``: the group norm sum_g ||w_g||_2 over ``feature_groups`` (None:
        singletons, the l1 norm); ``"l2"``: (1/2)||w||^2, whose w-step is exact
        (``feature_groups`` ignored).
    feature_groups : list of int ndarrays or None
        A partition of the features for the l1-l2 penalty.
    p_bounds, n_bounds : ndarray of shape (Q + 1,) or None
        Query layout (:func:`query_blocks`): pairs are formed only within a query and the loss
        is the mean of the Q queries' losses. None: one query.
    rho : float > 0
        Initial ADMM penalty; adapted by residual balancing (Boyd et al. 2011, section 3.4.1).
    max_iter : int
        Maximum number of ADMM iterations.
    tol : float
        Stop when the primal and dual residuals are below ``tol`` relative to their scale.
    inner_iter : int
        Maximum FISTA iterations of each w-step (warm-started; l1 and l1-l2).
    coef_init : ndarray of shape (d,) or None

    Returns
    -------
    InfinitePushResult

    References
    ----------
    Rakotomamonjy, Sparse support vector infinite push, ICML 2012, eqs. (4)-(7) (section 3.2:
    the closed-form w-step of the l2 penalty); Agarwal, The infinite push, SDM 2011.
    """
    d = P.shape[1]
    pb, nb = _single(P, N, p_bounds, n_bounds)
    mq, nq = np.diff(pb), np.diff(nb)
    n_q = mq.size
    ab = np.concatenate([[0], np.cumsum(mq * nq)]).astype(np.int64)
    n_pairs = int(ab[-1])
    t_weight = np.full(n_q, 1.0 / n_q)  # the loss is the mean over queries
    k_items = P.shape[0] + N.shape[0]
    # A^T A y costs d^2 with the Gram matrix, 2 (m + n) d through P and N
    use_gram = penalty != "l2" and d * d <= 2 * k_items * d
    with threadpool_limits(limits=1, user_api="blas"):
        G = pair_gram(P, N, pb, nb) if use_gram else np.zeros((1, 1))
        V, s2 = _pair_factor(P, N, pb, nb, G if use_gram else None, vectors=penalty == "l2")
    L_G = max(float(s2.max()) if s2.size else 0.0, 1e-12)
    order, bounds = _group_layout(d, feature_groups)
    rp, rn = np.empty(P.shape[0]), np.empty(N.shape[0])

    def A_mul(w):
        out = np.empty(n_pairs)
        pair_margins(P @ w, N @ w, pb, nb, ab, out)
        return out

    def At_mul(c):
        pair_sums(c, pb, nb, ab, rp, rn)
        return P.T @ rp - N.T @ rn

    def loss(a):
        per_q = np.empty(n_q)
        blocks_loss(a, pb, nb, ab, per_q)
        return float(per_q.mean())

    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64)
    Aw = A_mul(w)
    a = Aw.copy()
    u = np.zeros(n_pairs)
    prox = np.empty(n_pairs)
    objective, r_hist, s_hist = [], [], []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        # w-step: min lam*Omega(w) + rho/2 ||A w - (a - u)||^2
        b = At_mul(a - u)
        if penalty == "l2":  # (rho A^T A + lam I) w = rho b; b lies in the range of A^T
            den = rho * s2 + lam
            scale = np.divide(rho, den, out=np.zeros_like(den), where=den > 1e-12 * max(rho, 1))
            w = V @ (scale * (V.T @ b))
        else:  # FISTA, warm-started
            w = fista_wstep(P, N, pb, nb, G, use_gram, b, w, rho, lam, 1.0 / (rho * L_G), order,
                            bounds, inner_iter, 1e-10)
        Aw = A_mul(w)
        # a-step: prox of the infinite-push loss, query by query
        a_prev = a
        prox_blocks(Aw + u, t_weight / rho, pb, nb, ab, prox)
        a = prox.copy()
        u += Aw - a
        r = float(np.linalg.norm(Aw - a))
        s = float(rho * np.linalg.norm(At_mul(a - a_prev)))
        objective.append(lam * _penalty_value(w, penalty, feature_groups) + loss(Aw))
        r_hist.append(r)
        s_hist.append(s)
        eps_pri = tol * max(np.linalg.norm(Aw), np.linalg.norm(a), np.sqrt(n_pairs) * 1e-3)
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
