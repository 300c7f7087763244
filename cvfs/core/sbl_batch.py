"""Screened SBL codes of many samples over one dictionary, sharing its Gram matrix.

Coding a batch of samples Y over a fixed dictionary Phi (n_features, n_atoms) repeats the same
products for every sample. With G = Phi^T Phi computed once (one symmetric rank-k update),
everything :func:`cvfs.core.sbl.sbl_fit` needs per sample lives in atom space:

- the correlations Phi^T r = c - G theta with c = Phi^T y (one GEMM for the whole batch) cost
  n_atoms x |support| instead of n_features x n_atoms;
- the reweighting diag(Phi^T Sigma_Y^-1 Phi) (eq. 16) reads the rows G[S] instead of forming
  Phi^T Phi_S;
- the duality gap needs only ||r||^2 = ||y||^2 - 2 theta^T c + theta^T G theta.

Each weighted lasso is solved by the same working-set coordinate descent with the same
duality-gap certificate as :func:`cvfs.core.sbl.weighted_lasso`, so the codes agree with the
per-sample path to the lasso tolerance. The gap-safe sphere test is applied to the whole batch at
once before the first weighted lasso (:func:`batch_gap_safe_keep`).
"""

import numpy as np

from cvfs.core._lasso_kernels import gram_cd_solve, gram_rows_dot
from cvfs.core.sbl import _gamma_h

__all__ = ["GramDictionary", "batch_gap_safe_keep", "gram_sbl", "gram_weighted_lasso"]


class GramDictionary:
    """A dictionary with its Gram matrix, in the operator protocol :func:`_gamma_h` reads.

    Parameters
    ----------
    Phi : ndarray of shape (n_features, n_atoms)

    Attributes
    ----------
    Phi : ndarray of shape (n_features, n_atoms)
    G : ndarray of shape (n_atoms, n_atoms)
        Phi^T Phi.
    """

    def __init__(self, Phi):
        from scipy.linalg.blas import dsyrk

        self.Phi = np.asarray(Phi, dtype=np.float64)
        # upper triangle of Phi^T Phi by one BLAS syrk, mirrored (half the flops of a GEMM)
        # one BLAS syrk fills the upper triangle (half the flops of a GEMM); its Fortran result
        # transposed is row-major with the lower triangle, mirrored up by blocks
        G = dsyrk(1.0, self.Phi, trans=1).T
        b = 1024
        for i in range(0, G.shape[0], b):
            d = G[i:i + b, i:i + b]
            d += np.tril(d, -1).T
            G[i:i + b, i + b:] = G[i + b:, i:i + b].T
        self.G = G
        self.shape = self.Phi.shape
        self._norms = np.sqrt(np.maximum(np.diag(G), 0.0))

    def column_norms(self):
        return self._norms

    def gram_columns(self, idx):
        return self.G[np.atleast_1d(idx)].T  # G is symmetric: rows are contiguous


def _gap(G, c, yy, pen, th):
    """(gap, corr, dual scaling, support) of the weighted lasso at ``th`` (eq. 20-22)."""
    S = np.flatnonzero(th)
    ts = th[S]
    Gt = gram_rows_dot(G, S, ts)
    corr = c - Gt
    tc = float(ts @ c[S])
    rr = max(yy - 2.0 * tc + float(ts @ Gt[S]), 0.0)
    scale = max(1.0, float(np.max(np.abs(corr) / pen)))
    primal = 0.5 * rr + float(pen[S] @ np.abs(ts))
    dual = (yy - tc) / scale - rr / (2.0 * scale * scale)
    return primal - dual, corr, scale, S


def gram_weighted_lasso(G, c, yy, pen, th, *, tol=1e-6, max_iter=200, max_epochs=20_000,
                        ws_start=16, keep=None):
    """min 1/2 ||y - Phi theta||^2 + sum_i pen_i |theta_i| from G = Phi^T Phi and c = Phi^T y.

    Parameters
    ----------
    G : ndarray of shape (n_atoms, n_atoms)
    c : ndarray of shape (n_atoms,)
    yy : float
        ||y||^2.
    pen : ndarray of shape (n_atoms,)
    th : ndarray of shape (n_atoms,)
        Warm start, updated in place.
    tol : float
        Relative duality gap (gap <= tol * yy / 2).
    keep : ndarray of bool of shape (n_atoms,), optional
        Atoms a safe test left in play; the others stay 0.

    Returns
    -------
    gap : float
        Final absolute duality gap.

    References
    ----------
    SBL paper eq. (20)-(22); Massias, Gramfort & Salmon, "Celer", ICML 2018.
    """
    norms = np.sqrt(np.maximum(np.diag(G), 1e-300))
    abs_tol = tol * 0.5 * yy
    ws_size = ws_start
    gap = np.inf
    for _ in range(max_iter):
        gap, corr, scale, S = _gap(G, c, yy, pen, th)
        if gap <= abs_tol:
            break
        prio = (pen - np.abs(corr) / scale) / norms
        prio[S] = -np.inf
        if keep is not None:
            prio[~keep] = np.inf
        m = c.size if keep is None else int(np.count_nonzero(keep))
        ws_size = min(m, max(ws_start, 2 * S.size, ws_size))
        ws = np.argpartition(prio, ws_size - 1)[:ws_size] if ws_size < c.size else \
            np.arange(c.size)
        t = th[ws].copy()
        gram_cd_solve(np.ascontiguousarray(G[np.ix_(ws, ws)]), c[ws], pen[ws], t, yy,
                      max(0.3 * gap, 0.1 * abs_tol), max_epochs, False)
        th[ws] = t
        if np.count_nonzero(t) >= ws_size // 2:
            ws_size = min(m, 2 * ws_size)
    return float(gap)


def batch_gap_safe_keep(C, norms, lam_max_ratio):
    """Gap-safe sphere test at theta = 0 for a batch of unit-norm samples (first SBL step).

    At theta = 0 with penalties pen_i = ratio * lambda_max * ||phi_i|| the dual point is
    y / max(1, max_i |c_i| / pen_i) and the gap has a closed form, so the test of every atom and
    sample is one vectorised expression.

    Parameters
    ----------
    C : ndarray of shape (n_atoms, n_samples)
        Phi^T Y for unit-norm samples.
    norms : ndarray of shape (n_atoms,)
    lam_max_ratio : ndarray of shape (n_samples,)
        ratio * lambda_max of each sample (the first L1 weight per unit column norm).

    Returns
    -------
    keep : ndarray of bool of shape (n_atoms, n_samples)

    References
    ----------
    Fercoq, Gramfort & Salmon, "Mind the duality gap: safer rules for the lasso", ICML 2015.
    """
    pen = norms[:, None] * lam_max_ratio[None, :]
    scale = np.maximum(1.0, np.max(np.abs(C) / pen, axis=0))  # per sample
    # theta = 0: primal 1/2, dual 1/scale - 1/(2 scale^2) for unit ||y||
    gap = 0.5 - (1.0 / scale - 0.5 / scale**2)
    radius = np.sqrt(2.0 * np.maximum(gap, 0.0))
    return np.abs(C) / scale + norms[:, None] * radius[None, :] >= pen


def gram_sbl(gd, c, yy, lam, *, max_iter=3, tol=1e-4, lasso_tol=1e-6, keep=None):
    """Reweighted-L1 SBL of one sample from the dictionary's Gram matrix (as
    :func:`cvfs.core.sbl.sbl_fit` with ``positive=False``, without the bookkeeping).

    Parameters
    ----------
    gd : GramDictionary
    c : ndarray of shape (n_atoms,)
        Phi^T y.
    yy : float
        ||y||^2.
    lam : float
        Noise variance.
    max_iter, tol, lasso_tol
        As in :func:`cvfs.core.sbl.sbl_fit`.
    keep : ndarray of bool of shape (n_atoms,), optional
        Safe-test result for the first weighted lasso.

    Returns
    -------
    coef : ndarray of shape (n_atoms,)
        Posterior mean at the final gamma.

    References
    ----------
    Jiang & Chen, "Accelerated sparse Bayesian learning via screening test", Alg. 1, eq. (16),
    (20).
    """
    G = gd.G
    norms = gd.column_norms()
    n = c.size
    gamma = np.zeros(n)
    gamma_h = norms**2 / lam
    theta = np.zeros(n)
    for step in range(max_iter):
        u = np.sqrt(gamma_h)
        gram_weighted_lasso(G, c, yy, lam * u, theta, tol=lasso_tol,
                            keep=keep if step == 0 else None)
        gamma_new = np.abs(theta) / u
        delta = float(np.max(np.abs(gamma_new - gamma)))
        gamma = gamma_new
        if step == max_iter - 1 or delta <= tol * max(float(np.max(gamma)), np.finfo(float).tiny):
            break
        gamma_h = _gamma_h(gd, norms, gamma, lam)
    coef = np.zeros(n)
    S = np.flatnonzero(gamma > 0)
    if S.size:
        M = G[np.ix_(S, S)] + lam * np.diag(1.0 / gamma[S])
        coef[S] = np.linalg.solve(M, c[S])
    return coef
