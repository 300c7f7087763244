"""Feature Generating Machine (FGM): cutting-plane feature selection for linear classifiers.

FGM solves the adaptive-feature-scaling problem ``min_{d in D} min_w`` (a margin loss of
:mod:`cvfs.core.losses`: the squared hinge by default, the logistic, or any
:class:`~cvfs.core.losses.MarginLoss` through its ``margin_sum`` and ``margin_dual``) with ``D = {d
in [0, 1]^m, sum(d) <= B}`` as a semi-infinite program. Each outer iteration
(Algorithm 1 of the paper) runs the worst-case analysis (Algorithm 2): with dual variables
``alpha`` recovered from the current margins, it scores every feature (or group) by
``||X_G' (alpha * y)||^2`` and adds the B best as a new constraint ``d_t``. The subproblem over the
constraints found so far is solved in the primal,

    min_{w_1..w_T, b}  1/2 (sum_t ||w_t||)^2 + p(w, b),

by accelerated proximal gradient with backtracking (Algorithm 4) and the closed-form Moreau
projection of the squared l1 norm of group norms (Algorithm 3). Only the selected columns are kept
(dense, ``n x TB``, the cache of section 5.3); line-search trials reuse the per-group products
``X_t v_t`` and ``X_t grad_t`` so a trial costs ``O(nT)``. Input may be dense or scipy.sparse; the
full matrix is touched only by ``X.T @ r`` products in the worst-case analysis. ``fgm_fit`` also
takes a feature space object (``worst_case(r, B)``, ``columns(idx)``, see
:mod:`cvfs.core.fgm_spaces`) whose features are generated on demand, such as the implicit
second-order products.

References
----------
Tan, Tsang, Wang, "Towards Large-scale and Ultrahigh Dimensional Feature Selection via Feature
Generation" (Algorithms 1-4, eqs. 31, 37-41).
"""

import logging
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from cvfs.core.losses import get_loss

__all__ = ["ColumnSpace", "FGMResult", "apg_l1sq", "fgm_fit", "moreau_l1sq", "top_units",
           "worst_case"]

logger = logging.getLogger(__name__)

@dataclass
class FGMResult:
    """Output of :func:`fgm_fit`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,) or None
        Dense weights over the space's features (None for spaces without a dense index, such as
        :class:`cvfs.core.fgm_spaces.Poly2Space`).
    intercept : float
    features : ndarray of int of shape (n_generated,)
        Sorted indices (codes) of the generated features; ``feature_coef`` their weights.
    feature_coef : ndarray of shape (n_generated,)
    blocks : list of ndarray of int
        Feature indices (codes) of each generated constraint ``d_t``.
    block_norms : ndarray of shape (T,)
        ``||w_t||``; ``mu_t = ||w_t|| / sum_s ||w_s||`` are the constraint weights.
    history : dict
        Per outer iteration: ``objective``, ``violation`` (best new score over ``gamma^2``),
        ``n_selected``, ``apg_iter``.
    converged : bool
    """

    coef: np.ndarray | None
    intercept: float
    features: np.ndarray
    feature_coef: np.ndarray
    blocks: list
    block_norms: np.ndarray
    history: dict = field(default_factory=dict)
    converged: bool = False


# ---------------------------------------------------------------- losses on scores s = Xw + b
def _loss_value(loss, s, y, C):
    """p = C sum_i phi(y_i s_i) for the margin loss ``loss`` (a MarginLoss)."""
    return C * loss.margin_sum(y * s)


def _loss_grad(loss, s, y, C):
    """d p / d s (n,), and the dual variables alpha >= 0 (eq. 37: alpha = -y * dp/ds)."""
    alpha = C * loss.margin_dual(y * s)
    return -y * alpha, alpha


# ---------------------------------------------------------------- Algorithm 2
def worst_case(X, r, B, groups=None):
    """The B features (or groups) with the largest scores ``||X_G' r||^2``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    r : ndarray of shape (n_samples,)
        ``alpha * y``.
    B : int
    groups : ndarray of shape (n_features,) of int in [0, n_groups), optional

    Returns
    -------
    chosen : ndarray of int
        Indices of the chosen features (all members of the chosen groups), sorted.
    top_score : float
        Sum of the scores of the chosen units (``||X_d' r||^2``).
    """
    return top_units(np.asarray(X.T @ r).ravel(), B, groups)


def top_units(omega, B, groups=None):
    """The B features (or groups) with the largest ``omega_j^2`` (summed over a group), given the
    correlations ``omega = X' r``; returns (chosen feature indices sorted, summed score)."""
    c = omega * omega
    if groups is not None:
        c = np.bincount(groups, weights=c)
    B = min(B, c.size)
    top = np.argpartition(-c, B - 1)[:B] if B < c.size else np.arange(c.size)
    if groups is not None:
        chosen = np.flatnonzero(np.isin(groups, top))
    else:
        chosen = np.sort(top)
    return chosen, float(c[top].sum())


class ColumnSpace:
    """The columns of X as FGM's feature space (optionally grouped).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    groups : ndarray of shape (n_features,) of int in [0, n_groups), optional
    """

    dense_coef = True

    def __init__(self, X, groups=None):
        self.X = X
        self.groups = groups
        self.n_features = X.shape[1]

    def worst_case(self, r, B):
        """Algorithm 2 over the columns: see :func:`worst_case`."""
        return worst_case(self.X, r, B, self.groups)

    def columns(self, idx):
        """Dense float64 columns ``idx`` of X, ndarray of shape (n_samples, len(idx))."""
        if sp.issparse(self.X):
            return np.asarray(self.X[:, idx].toarray(), dtype=np.float64)
        return np.asarray(self.X[:, idx], dtype=np.float64)


# ---------------------------------------------------------------- Algorithm 3
def moreau_l1sq(u, s):
    """Shrunk block norms ``o`` of the prox of ``s/2 (sum_t ||g_t||)^2`` given ``u_t = ||g_t||``.

    Solves ``min_o 1/2 ||o - u||^2 + s/2 (sum o)^2`` over ``o >= 0`` (eq. 41); the block solution
    is ``o_t g_t / ||g_t||``.
    """
    us = np.sort(u)[::-1]
    cs = np.cumsum(us)
    j = np.arange(1, u.size + 1)
    ok = us - s / (1.0 + j * s) * cs > 0
    if not ok.any():
        return np.zeros_like(u)
    rho = int(np.flatnonzero(ok)[-1]) + 1
    thr = s / (1.0 + rho * s) * cs[rho - 1]
    return np.maximum(u - thr, 0.0)


def _block_norms(w, starts):
    return np.sqrt(np.add.reduceat(w * w, starts)) if w.size else np.zeros(0)


# ---------------------------------------------------------------- Algorithm 4
def apg_l1sq(Xc, starts, y, C, loss, w0, b0, tau0, max_iter=1000, tol=1e-8,
             fit_intercept=True):
    """Accelerated proximal gradient for ``1/2 (sum_t ||w_t||)^2 + p(Xc w + b)``.

    Parameters
    ----------
    Xc : ndarray of shape (n_samples, n_cols)
        Cached columns of all blocks, block t occupying ``starts[t]:starts[t+1]``.
    starts : ndarray of int of shape (T,)
    loss : str or MarginLoss
        The margin loss of p (a name of :data:`cvfs.core.losses.LOSSES` or an object).
    w0, b0 : warm start; tau0 : initial step-size inverse (Lipschitz guess).

    Returns
    -------
    w, b, tau, n_iter, objective
    """
    loss = get_loss(loss, "classifier")
    n_cols = Xc.shape[1]
    T = starts.size
    bounds = np.append(starts, n_cols)
    owner = np.repeat(np.arange(T), np.diff(bounds))  # block of each column
    eta = 0.7

    def per_block(v):
        # n x T products X_t v_t (the cache of section 5.3)
        return np.add.reduceat(Xc * v, starts, axis=1) if n_cols else np.zeros((Xc.shape[0], 0))

    def objective(w, s):
        return 0.5 * float(_block_norms(w, starts).sum()) ** 2 + _loss_value(loss, s, y, C)

    w, b = w0.copy(), float(b0)
    w_prev, b_prev = w.copy(), b
    zw = per_block(w)
    F = objective(w, zw.sum(1) + b)
    t_prev = t_k = 1.0
    tau = tau0
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - n_iter is returned
        beta = (t_prev - 1.0) / t_k
        v = w + beta * (w - w_prev)
        bv = b + beta * (b - b_prev)
        zv = per_block(v)
        sv = zv.sum(1) + bv
        gs, _ = _loss_grad(loss, sv, y, C)
        gw = Xc.T @ gs
        gb = float(gs.sum()) if fit_intercept else 0.0
        zg = per_block(gw)
        pv = _loss_value(loss, sv, y, C)
        tau = eta * tau
        while True:  # backtracking: grow tau until Q_tau majorises F (step 2 of Algorithm 4)
            g = v - gw / tau
            u = _block_norms(g, starts)
            o = moreau_l1sq(u, 1.0 / tau)
            c = np.divide(o, u, out=np.zeros_like(u), where=u > 0)
            w_new = c[owner] * g
            b_new = bv - gb / tau
            s_new = (c * (zv - zg / tau)).sum(1) + b_new
            p_new = _loss_value(loss, s_new, y, C)
            dw = w_new - v
            db = b_new - bv
            q = pv + float(gw @ dw) + gb * db + 0.5 * tau * (float(dw @ dw) + db * db)
            if p_new <= q * (1 + 1e-12) + 1e-12 or tau > 1e16:
                break
            tau /= eta
        F_new = 0.5 * float(o.sum()) ** 2 + p_new
        if F_new > F:  # adaptive restart keeps the sequence monotone
            t_prev = t_k = 1.0
            if beta > 0:
                w_prev, b_prev = w, b
                continue
        w_prev, b_prev = w, b
        w, b = w_new, b_new
        t_prev, t_k = t_k, 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k))
        done = abs(F - F_new) <= tol * max(abs(F_new), 1e-300)
        F = F_new
        if done:
            break
    return w, b, tau, n_iter, F


# ---------------------------------------------------------------- Algorithm 1
def fgm_fit(X, y, B=10, C=10.0, loss="squared_hinge", max_iter=20, tol=1e-3, groups=None,
            fit_intercept=True, apg_max_iter=1000, apg_tol=1e-8):
    """Fit FGM on X (dense or scipy.sparse, n x m, or a feature space) and labels y in {-1, +1}.

    ``loss`` is a margin loss of :mod:`cvfs.core.losses`, a name ("squared_hinge", "logistic",
    ...) or a :class:`~cvfs.core.losses.MarginLoss` object.

    ``X`` may be a feature space object (``n_features``, ``dense_coef``, ``worst_case(r, B)``,
    ``columns(idx)``; :class:`ColumnSpace` or one from :mod:`cvfs.core.fgm_spaces`); ``groups``
    applies to a plain matrix only.

    Stops when the newest constraint is not violated beyond ``1 + tol`` (worst-case score
    ``<= (1 + tol) gamma^2``, ``gamma = sum_t ||w_t||``), when the relative objective decrease is
    below ``tol``, when a constraint repeats, or after ``max_iter`` generated constraints.

    Returns
    -------
    FGMResult
    """
    loss = get_loss(loss, "classifier")
    space = X if hasattr(X, "worst_case") else ColumnSpace(X, groups)
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    blocks, starts = [], np.zeros(0, dtype=np.int64)
    Xc = np.zeros((n, 0))
    w = np.zeros(0)
    b = 0.0
    s = np.zeros(n)
    _, alpha = _loss_grad(loss, s, y, C)
    tau = 0.1 * n * C
    hist = {"objective": [], "violation": [], "n_selected": [], "apg_iter": []}
    F_old = np.inf
    converged = False
    seen = set()
    for _ in range(max_iter):
        chosen, score = space.worst_case(alpha * y, B)
        gamma = float(_block_norms(w, starts).sum()) if w.size else 0.0
        viol = score / (gamma * gamma) if gamma > 0 else float("inf")
        hist["violation"].append(viol)
        key = chosen.tobytes()
        if blocks and (key in seen or score <= (1.0 + tol) * gamma * gamma):
            converged = True
            break
        seen.add(key)
        blocks.append(chosen)
        starts = np.append(starts, Xc.shape[1])
        Xc = np.hstack([Xc, space.columns(chosen)])
        w = np.concatenate([w, np.zeros(chosen.size)])  # warm start: new block at zero
        w, b, tau, n_apg, F = apg_l1sq(Xc, starts, y, C, loss, w, b, tau,
                                       apg_max_iter, apg_tol, fit_intercept)
        s = Xc @ w + b
        _, alpha = _loss_grad(loss, s, y, C)
        sel = np.unique(np.concatenate(blocks)[w != 0]) if w.size else np.zeros(0, int)
        hist["objective"].append(F)
        hist["n_selected"].append(int(sel.size))
        hist["apg_iter"].append(int(n_apg))
        logger.debug("FGM iter %d: F=%.6g violation=%.4g selected=%d apg=%d",
                     len(blocks), F, viol, sel.size, n_apg)
        if np.isfinite(F_old) and F_old - F <= tol * abs(F):
            converged = True
            break
        F_old = F
    idx = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    features, inv = np.unique(idx, return_inverse=True)
    feature_coef = np.bincount(inv, weights=w, minlength=features.size)  # repeats add up
    coef = None
    if space.dense_coef:
        coef = np.zeros(space.n_features)
        coef[features] = feature_coef
    return FGMResult(coef=coef, intercept=float(b), features=features,
                     feature_coef=feature_coef, blocks=blocks,
                     block_norms=_block_norms(w, starts) if w.size else np.zeros(0),
                     history=hist, converged=converged)
