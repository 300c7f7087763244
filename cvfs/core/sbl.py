"""Sparse Bayesian learning as reweighted L1 (SBL paper Alg. 1) around a working-set weighted lasso.

Three layers, as elsewhere in the core: :func:`sbl_fit` (orchestrator of the reweighting loop),
:func:`weighted_lasso` (working-set solver with a duality-gap certificate and optional dynamic
gap-safe screening) and the numba kernels of :mod:`cvfs.core._lasso_kernels`.

The dictionary ``Phi`` is an ndarray of shape (n_samples, n_atoms) or any object of the operator
protocol of :class:`cvfs.core.screening.DenseOperator` (``shape``, ``rmatvec``, ``columns``,
``column_norms`` and optionally ``subset``), so atoms can be built on the fly.
"""

import logging
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_factor, cho_solve, cholesky, solve_triangular
from scipy.optimize import nnls

from cvfs.base import ConvergenceWarning
from cvfs.core._lasso_kernels import gram_cd_solve
from cvfs.core.sbl_evidence import evidence_noise
from cvfs.core.screening import as_operator, gap_safe_test, gram_columns, static_test

__all__ = ["LassoResult", "SBLResult", "SCREENING_RULES", "sbl_fit", "weighted_lasso"]

log = logging.getLogger(__name__)

SCREENING_RULES = ("wtht", "dome", "sphere", "gap", None)


@dataclass
class LassoResult:
    """Outcome of :func:`weighted_lasso`.

    Attributes
    ----------
    coef : ndarray of shape (n_atoms,)
    gap : float
        Final duality gap (absolute); the certificate P(coef) - D(eta) >= P(coef) - P*.
    primal : float
        Final primal value 1/2 ||y - Phi coef||^2 + sum pen |coef|.
    n_iter : int
        Outer (working-set) iterations.
    n_screened : int
        Atoms removed by dynamic gap-safe screening (static screening not included).
    converged : bool
    """

    coef: np.ndarray
    gap: float
    primal: float
    n_iter: int
    n_screened: int
    converged: bool


@dataclass
class SBLResult:
    """Outcome of :func:`sbl_fit`.

    Attributes
    ----------
    coef : ndarray of shape (n_atoms,)
        Posterior mean E[theta | y; gamma] at the final gamma (Alg. 1, last line).
    gamma : ndarray of shape (n_atoms,)
        Prior variances.
    screening : list of float
        Fraction of atoms removed (static test, or dynamic gap-safe test) at each reweighting step.
    gaps : list of float
        Relative duality gap of each weighted lasso.
    n_iter : int
        Reweighting steps.
    times : dict
        Seconds spent in ``screen``, ``lasso`` and ``reweight``.
    lam : float
        Noise variance at the end (the input ``lam`` unless ``update_noise``).
    active : ndarray of shape (n_active,), int64
        Atoms with gamma_i > 0.
    sigma : ndarray of shape (n_active, n_active)
        Posterior covariance of theta on ``active`` (eq. 9; zero elsewhere).
    converged : bool
        Whether gamma settled (to ``tol``) within ``max_iter`` steps.
    """

    coef: np.ndarray
    gamma: np.ndarray
    screening: list = field(default_factory=list)
    gaps: list = field(default_factory=list)
    n_iter: int = 0
    times: dict = field(default_factory=dict)
    lam: float = 0.0
    active: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sigma: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    converged: bool = False


def _primal_dual(y, yy, r, corr, th, pen, positive):
    """Primal value, duality gap and dual scaling at residual r (eq. 20, 22)."""
    c = corr if positive else np.abs(corr)
    scale = max(1.0, float(np.max(c / pen))) if c.size else 1.0
    rr = float(r @ r)
    primal = 0.5 * rr + float(pen @ np.abs(th))
    dual = float(y @ r) / scale - rr / (2.0 * scale * scale)
    return primal, primal - dual, scale


def weighted_lasso(Phi, y, pen, *, positive=False, tol=1e-8, max_iter=200, max_epochs=20_000,
                   gap_safe=True, keep=None, coef_init=None, ws_start=16):
    """Solve min 1/2 ||y - Phi theta||^2 + sum_i pen_i |theta_i| (theta >= 0 if ``positive``).

    A working-set solver in the style of celer/blitz: each outer iteration computes the full
    correlations Phi^T r, the duality gap with the rescaled residual as dual point, optionally
    removes atoms by the gap-safe sphere test, and solves the problem restricted to the current
    support plus the atoms whose dual constraints are closest to violation, by coordinate descent
    with Anderson extrapolation on the working set's Gram matrix.

    Parameters
    ----------
    Phi : ndarray of shape (n_samples, n_atoms) or operator
    y : ndarray of shape (n_samples,)
    pen : ndarray of shape (n_atoms,)
        Positive penalties (lambda u_i in eq. 20).
    positive : bool
        Constrain theta >= 0.
    tol : float
        Stop when gap <= tol * 1/2 ||y||^2 (relative duality gap).
    max_iter : int
        Outer iterations.
    max_epochs : int
        Coordinate-descent epochs per working-set subproblem.
    gap_safe : bool
        Dynamic gap-safe screening at each outer iteration.
    keep : ndarray of bool of shape (n_atoms,), optional
        Atoms allowed in the solution (e.g. from a static safe test); the others are fixed at 0.
    coef_init : ndarray of shape (n_atoms,), optional
        Warm start.
    ws_start : int
        Initial working-set size.

    Returns
    -------
    LassoResult

    References
    ----------
    SBL paper eq. (20)-(22); Massias, Gramfort & Salmon, "Celer", ICML 2018; Fercoq, Gramfort &
    Salmon, ICML 2015 (gap-safe screening).
    """
    op = as_operator(Phi)
    y = np.asarray(y, dtype=np.float64)
    pen = np.asarray(pen, dtype=np.float64)
    n = op.shape[1]
    yy = float(y @ y)
    abs_tol = tol * 0.5 * yy
    s, r = _lasso_start(op, y, pen, keep, coef_init, positive)
    n_screened = 0
    ws_size = ws_start
    gap, primal, converged, it = np.inf, 0.5 * yy, False, 0
    if s.cur.size == 0 or yy == 0.0:
        return LassoResult(np.zeros(n), 0.0, 0.5 * yy, 0, 0, True)
    for it in range(1, max_iter + 1):  # noqa: B007 - it is reported
        corr = s.op.rmatvec(r)[s.sub]
        primal, gap, scale = _primal_dual(y, yy, r, corr, s.th, s.pen, positive)
        if gap <= abs_tol:
            converged = True
            break
        if gap_safe:
            r, corr, scale, n_drop = _gap_safe_screen(s, y, r, corr, scale, gap, positive)
            n_screened += n_drop
            if s.cur.size == 0:
                continue
        r, ws_size = _working_set_step(s, y, yy, corr, scale, (ws_size, ws_start),
                                       (max(0.3 * gap, 0.1 * abs_tol), max_epochs), positive)
    else:
        corr = s.op.rmatvec(r)[s.sub]
        primal, gap, _ = _primal_dual(y, yy, r, corr, s.th, s.pen, positive)
        converged = gap <= abs_tol
    coef = np.zeros(n)
    coef[s.cur] = s.th
    if not converged:
        warnings.warn(
            f"weighted lasso did not reach relative gap {tol:g} in {max_iter} iterations "
            f"(gap {gap / (0.5 * yy):.2e})",
            ConvergenceWarning,
            stacklevel=2,
        )
    return LassoResult(coef, float(gap), float(primal), it, n_screened, bool(converged))


@dataclass
class _Atoms:
    """The atoms still in play during :func:`weighted_lasso`: their indices ``cur`` in Phi, the
    operator ``op`` on them (restricted once they are few) with their columns ``sub`` in it,
    their coefficients ``th``, column norms and penalties."""

    op: object
    cur: np.ndarray
    sub: np.ndarray
    th: np.ndarray
    norms: np.ndarray
    pen: np.ndarray

    def restrict(self, k):
        """Keep the atoms where the boolean mask ``k`` is True."""
        self.cur, self.sub, self.th = self.cur[k], self.sub[k], self.th[k]
        self.norms, self.pen = self.norms[k], self.pen[k]


def _lasso_start(op, y, pen, keep, coef_init, positive):
    """The atoms allowed by ``keep`` with the warm start ``coef_init``, and the residual."""
    n = op.shape[1]
    cur = np.arange(n) if keep is None else np.flatnonzero(keep)
    op_cur, sub = op, cur.copy()
    if cur.size < 0.7 * n and hasattr(op, "subset"):
        op_cur, sub = op.subset(cur), np.arange(cur.size)
    th = np.zeros(cur.size) if coef_init is None else np.asarray(coef_init, float)[cur].copy()
    if positive:
        np.maximum(th, 0.0, out=th)
    nz = np.flatnonzero(th)
    r = y - op_cur.columns(sub[nz]) @ th[nz] if nz.size else y.copy()
    return _Atoms(op_cur, cur, sub, th, op.column_norms()[cur], pen[cur]), r


def _gap_safe_screen(s, y, r, corr, scale, gap, positive):
    """Dynamic gap-safe screening of the atoms ``s`` (restricted in place): the atoms the sphere
    test proves zero at the optimum leave, their coefficients leave the residual. Returns
    (r, corr, dual scaling, atoms screened)."""
    k = gap_safe_test(corr, s.norms, s.pen, scale, np.sqrt(2.0 * max(gap, 0.0)), positive)
    if k.all():
        return r, corr, scale, 0
    drop = np.flatnonzero(~k & (s.th != 0))
    if drop.size:  # safe: these coefficients are 0 at the optimum
        r += s.op.columns(s.sub[drop]) @ s.th[drop]
    n_screened = int((~k).sum())
    s.restrict(k)
    corr = corr[k]
    if s.cur.size == 0:
        s.th = np.zeros(0)
        return y.copy(), corr, scale, n_screened
    if s.sub.size < 0.5 * s.op.shape[1] and hasattr(s.op, "subset"):
        s.op, s.sub = s.op.subset(s.sub), np.arange(s.sub.size)
    c = corr if positive else np.abs(corr)
    return r, corr, max(1.0, float(np.max(c / s.pen))), n_screened


def _working_set_step(s, y, yy, corr, scale, sizes, limits, positive):
    """Solve the problem on the working set (the support plus the atoms whose dual constraints
    are closest to violation) by coordinate descent on its Gram matrix; ``sizes`` = (current,
    initial) working-set size, ``limits`` = (gap target, epochs). Returns (residual, next
    working-set size)."""
    ws_size, ws_start = sizes
    m = s.cur.size
    c = corr if positive else np.abs(corr)
    prio = (s.pen - c / scale) / s.norms
    prio[s.th != 0] = -np.inf
    nnz = int(np.count_nonzero(s.th))
    ws_size = min(m, max(ws_start, 2 * nnz, ws_size))
    if ws_size < m:
        ws = np.argpartition(prio, ws_size - 1)[:ws_size]
    else:
        ws = np.arange(m)
    A = s.op.columns(s.sub[ws])
    G = A.T @ A
    b = A.T @ y
    t = s.th[ws].copy()
    gram_cd_solve(G, b, s.pen[ws], t, yy, limits[0], limits[1], positive)
    s.th[ws] = t
    r = y - A @ t
    ws_size = min(m, 2 * ws_size) if np.count_nonzero(t) >= ws_size // 2 else ws_size
    return r, ws_size


def _gamma_h(op, norms, gamma, lam):
    """diag(Phi^T Sigma_Y^-1 Phi), Sigma_Y = lam I + Phi Gamma Phi^T (eq. 16), by Woodbury.

    Only the support S of gamma enters: Sigma_Y^-1 = (I - Phi_S M^-1 Phi_S^T) / lam with
    M = lam Gamma_S^-1 + Phi_S^T Phi_S, so the cost is one Phi^T Phi_S product.
    """
    S = np.flatnonzero(gamma > 0)
    gh = norms**2 / lam
    if S.size == 0:
        return gh
    B = gram_columns(op, S)  # Phi^T Phi_S, (n_atoms, |S|)
    M = lam * np.diag(1.0 / gamma[S]) + B[S]
    Linv = solve_triangular(cholesky(M, lower=True, check_finite=False), np.eye(S.size),
                            lower=True, check_finite=False)
    W = B @ Linv.T  # b_i^T M^-1 b_i = ||L^-1 b_i||^2, one GEMM
    quad = np.einsum("ij,ij->i", W, W)
    return np.maximum(gh - quad / lam, 1e-12 * gh)


def _posterior(op, y, gamma, lam, positive):
    """Posterior mean and covariance of theta given gamma and lam (eq. 9, Alg. 1 last line).

    On the support S of gamma, with M = Phi_S^T Phi_S + lam Gamma_S^-1, the mean is
    M^-1 Phi_S^T y (the ridge solution) and the covariance lam M^-1, which equals
    Gamma - Gamma Phi^T Sigma_Y^-1 Phi Gamma restricted to S; atoms outside S have theta = 0 with
    zero variance. With ``positive`` the mean is the same ridge problem solved under theta >= 0
    (NNLS on the augmented system), the posterior mode of the Gaussian prior truncated to the
    nonnegative orthant; the covariance stays the Gaussian one.

    Returns
    -------
    coef : ndarray of shape (n_atoms,)
    S : ndarray of shape (n_active,), int64
    sigma : ndarray of shape (n_active, n_active)
    """
    coef = np.zeros(gamma.shape)
    S = np.flatnonzero(gamma > 0)
    if S.size == 0:
        return coef, S, np.zeros((0, 0))
    A = op.columns(S)
    M = A.T @ A + lam * np.diag(1.0 / gamma[S])
    fac = cho_factor(M, check_finite=False)
    sigma = lam * cho_solve(fac, np.eye(S.size), check_finite=False)
    if positive:
        aug = np.vstack([A, np.diag(np.sqrt(lam / gamma[S]))])
        coef[S] = nnls(aug, np.concatenate([y, np.zeros(S.size)]), maxiter=50 * S.size)[0]
    else:
        coef[S] = cho_solve(fac, A.T @ y, check_finite=False)
    return coef, S, sigma


def _posterior_mean(op, y, gamma, lam, positive):
    """The posterior mean alone (see :func:`_posterior`)."""
    return _posterior(op, y, gamma, lam, positive)[0]


def _screened_lasso(op, y, pen, theta, screen, positive, lasso, res):
    """One weighted lasso of :func:`sbl_fit` from ``theta``, after the static safe test of
    ``screen`` = (rule, Phi^T y, column norms) or with dynamic gap-safe screening; appends the
    screened fraction to ``res.screening``. Returns (LassoResult, time the static test ended)."""
    screening, rho, norms = screen
    keep = None
    if rho is not None:
        keep = static_test(screening, op, rho, norms, pen, y, positive)
    t1 = time.perf_counter()
    lr = weighted_lasso(op, y, pen, positive=positive, tol=lasso[0], max_iter=lasso[1],
                        gap_safe=screening == "gap", keep=keep, coef_init=theta)
    if keep is not None:
        res.screening.append(float(1.0 - keep.mean()) if keep.size else 0.0)
    else:
        res.screening.append(lr.n_screened / op.shape[1])
    return lr, t1


def sbl_fit(Phi, y, lam, *, screening="gap", positive=False, max_iter=20, tol=1e-4,
            lasso_tol=1e-8, lasso_max_iter=200, update_noise=False, step_budget=False,
            callback=None):
    """Sparse Bayesian learning by reweighted weighted lasso (Alg. 1, Lemma 2.1).

    Starting from gamma = 0 (Sigma_Y = lam I, so gamma_h,i = ||phi_i||^2 / lam), each step solves
    the weighted lasso (eq. 18, rewritten as eq. 20)

        theta_tmp = argmin 1/2 ||y - Phi theta||^2 + lam sum_i u_i |theta_i|,  u_i = sqrt(gamma_h,i)

    after screening it with ``screening``, sets gamma_i = |theta_tmp,i| / u_i and
    gamma_h = diag(Phi^T Sigma_Y^-1 Phi) (eq. 16), until gamma converges.

    Parameters
    ----------
    Phi : ndarray of shape (n_samples, n_atoms) or operator
    y : ndarray of shape (n_samples,)
    lam : float
        Noise variance lambda > 0 of Y = Phi theta + V, V ~ N(0, lam I).
    screening : {"wtht", "dome", "sphere", "gap", None}
        Static safe test before each weighted lasso, dynamic gap-safe screening during it, or
        none. All rules give the same solution (they are safe).
    positive : bool
        theta >= 0 (intensities).
    max_iter : int
        Reweighting steps.
    tol : float
        Stop when max |gamma - gamma_old| <= tol * max gamma.
    lasso_tol : float
        Relative duality gap of each weighted lasso.
    lasso_max_iter : int
        Outer iterations of each weighted lasso.
    update_noise : bool
        Learn the noise variance first, by the fast marginal-likelihood algorithm with an
        evidence guard (:func:`cvfs.core.sbl_evidence.evidence_noise`; ``lam`` is ignored),
        then run the screened reweighting at that fixed value, so every safe test applies
        unchanged.
    step_budget : bool
        ``max_iter`` is the stopping rule itself (a fixed budget of reweighting steps, as for
        detection or classification, where each step only sparsifies a code that already
        answers): no ConvergenceWarning when it is used up; ``converged`` still tells whether
        gamma settled earlier.
    callback : callable, optional
        Called as ``callback(step, theta_tmp)`` after each weighted lasso.

    Returns
    -------
    SBLResult

    Notes
    -----
    Deviation from Alg. 1: the thesis initialises gamma_h = 1; we start from gamma = 0, which
    makes the first penalties lam * ||phi_i|| / sqrt(lam) = sqrt(lam) ||phi_i|| and the whole
    iteration equivariant to a rescaling of y (y -> a y, lam -> a^2 lam gives theta -> a theta).

    References
    ----------
    Jiang & Chen, "Accelerated sparse Bayesian learning via screening test", Alg. 1, eq. (16),
    (18), (20); Wipf & Nagarajan, "A new view of automatic relevance determination", NIPS 2008;
    Tipping & Faul, "Fast marginal likelihood maximisation for sparse Bayesian models", AISTATS
    2003 (noise variance).
    """
    op = as_operator(Phi)
    y = np.asarray(y, dtype=np.float64)
    n = op.shape[1]
    norms = op.column_norms()
    gamma = np.zeros(n)
    if update_noise:  # start the reweighting from the evidence maximiser's prior variances
        ev = evidence_noise(op, y)
        lam = ev.lam
        gamma[ev.active] = 1.0 / ev.alpha
    rho = op.rmatvec(y) if screening in ("wtht", "dome", "sphere") else None
    gamma_h = _gamma_h(op, norms, gamma, lam)
    theta = np.zeros(n)
    res = SBLResult(coef=theta, gamma=gamma, times={"screen": 0.0, "lasso": 0.0, "reweight": 0.0})
    yy = float(y @ y)
    converged = False
    for step in range(1, max_iter + 1):
        u = np.sqrt(gamma_h)
        pen = lam * u
        t0 = time.perf_counter()
        lr, t1 = _screened_lasso(op, y, pen, theta, (screening, rho, norms), positive,
                                 (lasso_tol, lasso_max_iter), res)
        t2 = time.perf_counter()
        theta = lr.coef
        res.gaps.append(lr.gap / (0.5 * yy) if yy > 0 else 0.0)
        if callback is not None:
            callback(step, theta)
        gamma_new = np.abs(theta) / u
        delta = float(np.max(np.abs(gamma_new - gamma)))
        gamma = gamma_new
        gamma_h = _gamma_h(op, norms, gamma, lam)
        t3 = time.perf_counter()
        res.times["screen"] += t1 - t0
        res.times["lasso"] += t2 - t1
        res.times["reweight"] += t3 - t2
        log.debug("SBL step %d: %d atoms, screened %.3f, gap %.2e", step,
                  np.count_nonzero(gamma), res.screening[-1], res.gaps[-1])
        if delta <= tol * max(float(np.max(gamma)), np.finfo(float).tiny):
            converged = True
            break
    if not converged and not step_budget:
        warnings.warn(f"SBL did not converge in {max_iter} reweighting steps",
                      ConvergenceWarning, stacklevel=2)
    res.converged = converged
    res.n_iter = step
    res.gamma = gamma
    res.coef, res.active, res.sigma = _posterior(op, y, gamma, lam, positive)
    res.lam = float(lam)
    return res
