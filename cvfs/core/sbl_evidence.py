"""Noise variance of SBL by the fast marginal-likelihood algorithm with an evidence guard.

Tipping & Faul's sequential algorithm maximises the log evidence L(alpha, beta) of
y = Phi theta + V (theta_i ~ N(0, 1 / alpha_i), V ~ N(0, I / beta)) one atom at a time: each step
adds, re-estimates or deletes the atom with the largest gain of L, and beta is re-estimated by
MacKay's fixed point. When atoms outnumber samples the unpenalised evidence keeps growing as
pure-noise atoms enter (any atom with q_i^2 > s_i raises it), so beta runs to infinity; here an
atom must bring the evidence ratio q_i^2 / s_i above ``tau`` = 2 log M, the level the largest of
M pure-noise atoms reaches (the risk-inflation threshold), i.e. the penalised evidence
L - c |S|, c = (tau - 1 - log tau) / 2, is maximised. See ``docs/methods.md``.
"""

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from cvfs.base import ConvergenceWarning
from cvfs.core.screening import as_operator

__all__ = ["EvidenceResult", "evidence_noise"]


@dataclass
class EvidenceResult:
    """Outcome of :func:`evidence_noise`.

    Attributes
    ----------
    lam : float
        Learned noise variance 1 / beta.
    active : ndarray of shape (n_active,), int64
        Atoms in the model (finite alpha).
    alpha : ndarray of shape (n_active,)
        Their precisions (1 / gamma).
    coef : ndarray of shape (n_active,)
        Posterior mean of their coefficients.
    n_iter : int
    converged : bool
    """

    lam: float
    active: np.ndarray
    alpha: np.ndarray
    coef: np.ndarray
    n_iter: int
    converged: bool


def _gains(Sm, Qm, alpha, inm, tau):
    """Penalised evidence gain of acting on each atom (Tipping & Faul 2003, eq. 27-29 halved)
    and the new precision of an atom that enters or stays."""
    s, q = Sm.copy(), Qm.copy()
    a = alpha[inm]
    s[inm] = a * Sm[inm] / (a - Sm[inm])
    q[inm] = a * Qm[inm] / (a - Sm[inm])
    theta = q * q - s
    big = q * q > tau * s
    c = 0.5 * (tau - 1.0 - np.log(tau))
    gain = np.full(Sm.shape, -np.inf)
    new = np.full(Sm.shape, np.inf)
    new[big] = s[big] ** 2 / theta[big]
    add = ~inm & big
    x = Qm[add] ** 2 / Sm[add]
    gain[add] = 0.5 * (x - 1.0 - np.log(x)) - c
    re = inm & big
    d = 1.0 / new[re] - 1.0 / alpha[re]
    with np.errstate(divide="ignore", invalid="ignore"):
        g = 0.5 * (Qm[re] ** 2 * d / (1.0 + Sm[re] * d) - np.log1p(Sm[re] * d))
    gain[re] = np.where(np.isfinite(g), g, 0.0)
    drop = inm & ~big
    if np.count_nonzero(inm) > 1:
        gain[drop] = 0.5 * (Qm[drop] ** 2 / (Sm[drop] - alpha[drop])
                            - np.log1p(-Sm[drop] / alpha[drop])) + c
    return gain, new


def evidence_noise(Phi, y, *, tau=None, max_iter=None, tol=1e-6):
    """Learn the noise variance of y = Phi theta + V by the guarded fast marginal likelihood.

    Parameters
    ----------
    Phi : ndarray of shape (n_samples, n_atoms) or operator
        Dictionary (the operator protocol of :class:`cvfs.core.screening.DenseOperator`).
    y : ndarray of shape (n_samples,)
    tau : float, optional
        Evidence ratio q_i^2 / s_i an atom needs to be in the model; default 2 log(n_atoms)
        (at least 1, which is the unguarded algorithm).
    max_iter : int, optional
        Add / re-estimate / delete steps; default 20 + 4 min(n_samples, n_atoms).
    tol : float
        Stop when no step gains more than ``tol`` of log evidence and the noise variance
        changes by less than ``tol`` relative.

    Returns
    -------
    EvidenceResult

    References
    ----------
    Tipping & Faul, "Fast marginal likelihood maximisation for sparse Bayesian models",
    AISTATS 2003, eq. (17)-(29); MacKay, "Bayesian interpolation", 1992 (noise update);
    Foster & George, "The risk inflation criterion", Ann. Statist. 1994 (the 2 log M threshold).
    """
    op = as_operator(Phi)
    y = np.asarray(y, dtype=np.float64)
    n, m = op.shape
    tau = max(2.0 * np.log(m), 1.0) if tau is None else max(float(tau), 1.0)
    max_iter = 20 + 4 * min(n, m) if max_iter is None else int(max_iter)
    # work on y / sy and Phi / sp (unit mean squares): the result does not depend on the units
    norms = op.column_norms()
    sy = float(np.sqrt(np.mean(y * y))) if y.size else 0.0
    sp = float(np.sqrt(np.mean(norms**2) / n)) if norms.size else 0.0
    if not (sy > 0 and sp > 0 and np.isfinite(sy) and np.isfinite(sp)):
        lam = max(sy * sy, np.finfo(float).tiny)
        return EvidenceResult(lam, np.zeros(0, np.int64), np.zeros(0), np.zeros(0), 0, True)
    y = y / sy
    nrm2 = (norms / sp) ** 2
    ok = nrm2 > 0
    pty = op.rmatvec(y) / sp
    var_y = float(np.var(y))
    yy = float(y @ y)
    if not ok.any() or var_y == 0.0:
        lam = max(sy * sy * yy / n, np.finfo(float).tiny)
        return EvidenceResult(lam, np.zeros(0, np.int64), np.zeros(0), np.zeros(0), 0, True)
    beta = 1.0 / (0.1 * var_y)
    alpha = np.full(m, np.inf)
    proj = np.where(ok, pty**2 / np.where(ok, nrm2, 1.0), 0.0)
    i0 = int(np.argmax(proj))
    alpha[i0] = nrm2[i0] / max(proj[i0] - 1.0 / beta, 1e-3 * proj[i0])
    converged = False
    for it in range(1, max_iter + 1):  # noqa: B007 - it is reported
        S = np.flatnonzero(np.isfinite(alpha))
        A = op.columns(S) / sp
        L = np.linalg.cholesky(beta * (A.T @ A) + np.diag(alpha[S]))
        Wt = solve_triangular(L, A.T, lower=True)  # L^-1 Phi_S^T, Sigma = L^-T L^-1
        wy = Wt @ y
        mu = beta * solve_triangular(L, wy, lower=True, trans=1)
        C = op.rmatvec(Wt.T) / sp  # Phi^T Phi_S L^-T
        Sm = np.where(ok, beta * nrm2 - beta**2 * np.einsum("ij,ij->i", C, C), 1.0)
        Qm = np.where(ok, beta * pty - beta**2 * (C @ wy), 0.0)
        inm = np.isfinite(alpha)
        gain, new = _gains(Sm, Qm, alpha, inm, tau)
        gain[~ok] = -np.inf
        # MacKay's noise update at the current (Sigma, mu): N - sum_i (1 - alpha_i Sigma_ii)
        Linv = solve_triangular(L, np.eye(S.size), lower=True)
        well = float(np.sum(1.0 - alpha[S] * np.einsum("ij,ij->j", Linv, Linv)))
        r = y - A @ mu
        # noise kept above 1e-12 of the mean square of y (an exact fit)
        beta_new = max(n - well, 1.0) / max(float(r @ r), 1e-12 * yy, 1e-300)
        j = int(np.argmax(gain))
        moved = gain[j] > tol
        if moved:
            alpha[j] = new[j]
        step = abs(np.log(beta_new / beta))
        beta = beta_new
        if not moved and step < tol:
            converged = True
            break
    if not converged:
        warnings.warn(f"fast marginal likelihood did not settle in {max_iter} steps",
                      ConvergenceWarning, stacklevel=2)
    S = np.flatnonzero(np.isfinite(alpha))
    A = op.columns(S) / sp
    H = beta * (A.T @ A) + np.diag(alpha[S])
    coef = beta * np.linalg.solve(H, A.T @ y)
    # back to the units of y and Phi: theta scales as sy / sp, so alpha as (sp / sy)^2
    return EvidenceResult(float(sy * sy / beta), S.astype(np.int64),
                          alpha[S] * (sp / sy) ** 2, coef * (sy / sp), it, bool(converged))
