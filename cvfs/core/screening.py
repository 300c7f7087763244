"""Safe screening tests for the weighted lasso -> boolean keep masks.

The weighted lasso (SBL paper eq. 20) is

    min_theta 1/2 ||y - Phi theta||^2 + sum_i pen_i |theta_i|,    pen_i = lambda u_i > 0,

optionally with theta >= 0. Its dual (eq. 22) is max_eta 1/2||y||^2 - 1/2||eta - y||^2 over the
feasible set F = {eta : |phi_i^T eta| <= pen_i} (``phi_i^T eta <= pen_i`` when theta >= 0), and the
dual optimum eta_hat is the projection of y on F. By Theorem 3.1 (eq. 29) any atom with
|phi_i^T eta_hat| < pen_i has theta_i = 0. A region test bounds eta_hat in a region R and removes
atom i when max_{eta in R} |phi_i^T eta| < pen_i (eq. 32-33).

Regions implemented (each function returns ``keep``, True for atoms that must stay):

- :func:`sphere_test` - B(y, r), eq. (36)-(42);
- :func:`dome_test` - B(y, r) cut by the most violated dual constraint, eq. (46)-(51);
- :func:`wtht_test` - B(y, r) cut by two dual constraints, the weighted two-hyperplane test
  (Algorithm 2, Lemma 3.3, eq. 54-58);
- :func:`gap_safe_test` - the gap-safe sphere B(eta, sqrt(2 gap)) around any feasible dual point
  (Fercoq, Gramfort & Salmon 2015; Ndiaye et al. 2017), used dynamically inside the solver.

Deviations from the thesis, all of which keep the tests safe:

- The feasible point is eta' = s y with s = min_i pen_i / |phi_i^T y|, the largest feasible scaling
  of y. The thesis uses s = lambda u_min / lambda_max (eq. 35), which is feasible but never larger,
  so our sphere is never bigger than the thesis' one.
- Lemma 3.3 prints the factor r / (1 - r^2); the derivation gives r / (1 - tau^2), used here.
- The second hyperplane of the W-THT takes the sign of phi_j^T c_d (the quantity maximised in
  eq. 52), and falls back to the dome when the two normals are (anti)parallel.
- With theta >= 0 only the half-spaces phi_i^T eta <= pen_i exist, and only the upper bound is
  tested.

A small relative margin (``_MARGIN``) guards every test against rounding.
"""

import numpy as np

__all__ = [
    "DenseOperator",
    "as_operator",
    "dome_test",
    "gap_safe_test",
    "gram_columns",
    "sphere_test",
    "static_test",
    "wtht_test",
]

_MARGIN = 1e-9


class DenseOperator:
    """A dictionary held as a dense matrix, seen through the operator protocol of the solvers.

    The protocol (also implemented by on-the-fly dictionaries such as
    :class:`cvfs.astro.dictionary.PSFDictionary`) is: ``shape`` = (n_samples, n_atoms);
    ``rmatvec(R)`` = Phi^T R for R of shape (n_samples,) or (n_samples, m); ``columns(idx)`` =
    Phi[:, idx] of shape (n_samples, len(idx)); ``column_norms()`` of shape (n_atoms,).

    Parameters
    ----------
    Phi : ndarray of shape (n_samples, n_atoms)
    """

    def __init__(self, Phi):
        self.Phi = np.asarray(Phi, dtype=np.float64)
        self.shape = self.Phi.shape
        self._norms = None

    def rmatvec(self, R):
        return self.Phi.T @ R

    def columns(self, idx):
        return self.Phi[:, idx]

    def gram_columns(self, idx):
        return self.Phi.T @ self.Phi[:, idx]

    def subset(self, idx):
        """The operator of the columns ``idx`` (a copy, so later products touch only them)."""
        out = DenseOperator(np.ascontiguousarray(self.Phi[:, idx]))
        if self._norms is not None:
            out._norms = self._norms[idx]
        return out

    def column_norms(self):
        if self._norms is None:
            self._norms = np.sqrt(np.einsum("ij,ij->j", self.Phi, self.Phi))
        return self._norms


class SparseOperator:
    """A scipy.sparse dictionary, optionally centred implicitly, through the operator protocol.

    The operator stands for Phi - 1 offset^T (``offset`` = column means for a centred fit) without
    forming it: products use the sparse matrix and a rank-one correction, and only the columns a
    solver asks for (its working set) are made dense.

    Parameters
    ----------
    Phi : scipy.sparse matrix of shape (n_samples, n_atoms)
        Converted to CSC (column slices are cheap); never densified.
    offset : ndarray of shape (n_atoms,), optional
        Subtracted from every row.
    """

    def __init__(self, Phi, offset=None):
        import scipy.sparse as sp

        self.Phi = sp.csc_matrix(Phi, dtype=np.float64)
        self.shape = self.Phi.shape
        self.offset = None if offset is None else np.asarray(offset, dtype=np.float64)
        self._norms = None

    def rmatvec(self, R):
        out = np.asarray(self.Phi.T @ R)
        if self.offset is not None:
            sums = R.sum(axis=0)
            out = out - (np.outer(self.offset, sums) if R.ndim == 2 else self.offset * sums)
        return out

    def columns(self, idx):
        cols = self.Phi[:, idx].toarray()
        return cols - self.offset[idx] if self.offset is not None else cols

    def gram_columns(self, idx):
        idx = np.atleast_1d(idx)
        g = np.asarray((self.Phi.T @ self.Phi[:, idx]).toarray())
        if self.offset is not None:  # (Phi - 1 m^T)^T (Phi_idx - 1 m_idx^T), column sums n m
            g -= self.shape[0] * np.outer(self.offset, self.offset[idx])
        return g

    def subset(self, idx):
        """The operator of the columns ``idx``."""
        out = SparseOperator(self.Phi[:, idx], None if self.offset is None else self.offset[idx])
        if self._norms is not None:
            out._norms = self._norms[idx]
        return out

    def column_norms(self):
        if self._norms is None:
            sq = np.asarray(self.Phi.multiply(self.Phi).sum(axis=0)).ravel()
            if self.offset is not None:
                sq = sq - self.shape[0] * self.offset**2
            self._norms = np.sqrt(np.maximum(sq, 0.0))
        return self._norms


def gram_columns(op, idx):
    """Phi^T Phi[:, idx] of shape (n_atoms, len(idx)), through ``op.gram_columns`` if present."""
    idx = np.atleast_1d(idx)
    if hasattr(op, "gram_columns"):
        return op.gram_columns(idx)
    return op.rmatvec(op.columns(idx))


def as_operator(Phi):
    """Wrap an ndarray in :class:`DenseOperator` and a scipy.sparse matrix in
    :class:`SparseOperator`; pass objects of the protocol through.

    Raises
    ------
    TypeError
        If ``Phi`` is neither a 2-D array nor an object with ``shape``, ``rmatvec``, ``columns``
        and ``column_norms``.
    """
    import scipy.sparse as sp

    if sp.issparse(Phi):
        return SparseOperator(Phi)
    needed = ("shape", "rmatvec", "columns", "column_norms")
    if all(hasattr(Phi, a) for a in needed) and not isinstance(Phi, np.ndarray):
        return Phi
    arr = np.asarray(Phi)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(
            "Phi must be a 2-D numeric array or an operator with shape, rmatvec, columns and "
            f"column_norms; got {type(Phi).__name__} with ndim={arr.ndim}"
        )
    return DenseOperator(arr)


def _feasible_radius(rho, pen, y_norm, positive):
    """Radius of the sphere B(y, r) around y through the feasible point eta' = s y (eq. 35-36)."""
    ratio = rho / pen if positive else np.abs(rho) / pen
    top = float(np.max(ratio)) if ratio.size else 0.0
    if top <= 1.0:  # y itself is feasible: theta_hat = 0, eta_hat = y
        return 0.0, 1.0
    s = 1.0 / top
    return (1.0 - s) * y_norm, s


def sphere_test(rho, norms, pen, y_norm, positive=False):
    """Sphere test (eq. 42): keep atoms that may be active.

    Parameters
    ----------
    rho : ndarray of shape (n_atoms,)
        Correlations Phi^T y.
    norms : ndarray of shape (n_atoms,)
        Column norms ||phi_i||.
    pen : ndarray of shape (n_atoms,)
        Penalties lambda u_i > 0.
    y_norm : float
        ||y||.
    positive : bool
        Nonnegative lasso (one-sided test).

    Returns
    -------
    keep : ndarray of bool, shape (n_atoms,)
    """
    r, _ = _feasible_radius(rho, pen, y_norm, positive)
    up = rho + r * norms
    if positive:
        bound = up
    else:
        bound = np.maximum(up, -rho + r * norms)
    return bound >= pen * (1.0 - _MARGIN)


def _m1(t1, t2, psi, r):
    """Support function of the dome minus the centre term: M1 of Lemma 3.1 (eq. 48)."""
    t2 = np.maximum(t2, np.abs(t1))
    on_cap = t1 < -psi * t2
    edge = -psi * r * t1 + r * np.sqrt(np.maximum(t2**2 - t1**2, 0.0)) * np.sqrt(
        max(1.0 - psi**2, 0.0)
    )
    return np.where(on_cap, r * t2, edge)


def _best_halfspace(rho_c, norms, pen, positive, exclude=-1):
    """Index and sign of the dual constraint that cuts deepest into a sphere (eq. 47 / 52)."""
    if positive:
        score = (rho_c - pen) / norms
        sign = np.ones_like(rho_c)
    else:
        score = (np.abs(rho_c) - pen) / norms
        sign = np.where(rho_c >= 0, 1.0, -1.0)
    if exclude >= 0:
        score = score.copy()
        score[exclude] = -np.inf
    i = int(np.argmax(score))
    return i, float(sign[i])


def dome_test(op, rho, norms, pen, y, positive=False):
    """Dome test (Theorem 3.3, eq. 46-51): sphere B(y, r) cut by one dual constraint.

    Parameters
    ----------
    op : operator (see :class:`DenseOperator`)
        The dictionary; one ``rmatvec`` is spent on the hyperplane normal.
    rho, norms, pen : ndarray of shape (n_atoms,)
        Phi^T y, column norms and penalties.
    y : ndarray of shape (n_samples,)
    positive : bool

    Returns
    -------
    keep : ndarray of bool, shape (n_atoms,)
    """
    y_norm = float(np.linalg.norm(y))
    r, _ = _feasible_radius(rho, pen, y_norm, positive)
    if r == 0.0:
        return np.zeros(rho.shape, dtype=bool)
    i, sgn = _best_halfspace(rho, norms, pen, positive)
    h1 = pen[i] / norms[i]
    psi = float(np.clip((sgn * rho[i] / norms[i] - h1) / r, -1.0, 1.0))
    t1 = sgn * gram_columns(op, i)[:, 0] / norms[i]
    up = rho + _m1(t1, norms, psi, r)
    bound = up if positive else np.maximum(up, -rho + _m1(-t1, norms, psi, r))
    return bound >= pen * (1.0 - _MARGIN)


def _m2(t1, t2, t3, psi1, psi2, tau, r):
    """Support function of B(c, r) cut by two half-spaces, minus c^T phi (Lemma 3.3, eq. 54-58).

    The four cases: (a) the sphere's maximiser is feasible; (b)/(c) only constraint 1/2 binds (the
    dome value); otherwise both bind. Returned values are capped by both dome values, which are
    always valid upper bounds, so rounding in the case selection cannot make the test unsafe.
    """
    t3 = np.maximum(t3, np.maximum(np.abs(t1), np.abs(t2)))
    s1 = np.sqrt(max(1.0 - psi1**2, 0.0))
    s2 = np.sqrt(max(1.0 - psi2**2, 0.0))
    d1 = _m1(t1, t3, psi1, r)
    d2 = _m1(t2, t3, psi2, r)
    sq1 = np.sqrt(np.maximum(t3**2 - t1**2, 0.0))
    sq2 = np.sqrt(np.maximum(t3**2 - t2**2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        case_a = (t1 < -psi1 * t3) & (t2 < -psi2 * t3)
        case_b = (t1 >= -psi1 * t3) & ((t2 - tau * t1) * s1 < (-psi2 + tau * psi1) * sq1)
        case_c = (t2 >= -psi2 * t3) & ((t1 - tau * t2) * s2 < (-psi1 + tau * psi2) * sq2)
    one_m = 1.0 - tau**2
    hpsi = np.sqrt(max(one_m - psi1**2 - psi2**2 + 2.0 * tau * psi1 * psi2, 0.0))
    ht = np.sqrt(np.maximum(one_m * t3**2 + 2.0 * tau * t1 * t2 - t1**2 - t2**2, 0.0))
    both = (r / one_m) * (-(psi1 - tau * psi2) * t1 - (psi2 - tau * psi1) * t2 + hpsi * ht)
    val = np.where(case_a, r * t3, np.where(case_b, d1, np.where(case_c, d2, both)))
    return np.minimum(val, np.minimum(d1, d2))


def wtht_test(op, rho, norms, pen, y, positive=False):
    """Weighted two-hyperplane test, W-THT (Algorithm 2, Theorem 3.4).

    Parameters and return value as :func:`dome_test`; two ``rmatvec`` calls.
    """
    y_norm = float(np.linalg.norm(y))
    r, _ = _feasible_radius(rho, pen, y_norm, positive)
    if r == 0.0:
        return np.zeros(rho.shape, dtype=bool)
    i, sg1 = _best_halfspace(rho, norms, pen, positive)
    h1 = pen[i] / norms[i]
    a = float(sg1 * rho[i] / norms[i] - h1)
    sigma = sg1 * gram_columns(op, i)[:, 0] / norms[i]  # n1^T phi_i
    t_cd = rho - a * sigma  # phi_i^T c_d, c_d = y - a n1 (Algorithm 2, line 13)
    j, sg2 = _best_halfspace(t_cd, norms, pen, positive, exclude=i)
    h2 = pen[j] / norms[j]
    tau = float(sg2 * sigma[j] / norms[j])
    psi1 = float(np.clip(a / r, -1.0, 1.0))
    psi2 = float(np.clip((sg2 * rho[j] / norms[j] - h2) / r, -1.0, 1.0))
    if abs(tau) > 1.0 - 1e-9:
        return dome_test(op, rho, norms, pen, y, positive)
    t2 = sg2 * gram_columns(op, j)[:, 0] / norms[j]
    up = rho + _m2(sigma, t2, norms, psi1, psi2, tau, r)
    if positive:
        bound = up
    else:
        bound = np.maximum(up, -rho + _m2(-sigma, -t2, norms, psi1, psi2, tau, r))
    return bound >= pen * (1.0 - _MARGIN)


def gap_safe_test(corr, norms, pen, scale, radius, positive=False):
    """Gap-safe sphere test around the rescaled residual eta = r / scale.

    Parameters
    ----------
    corr : ndarray of shape (n_atoms,)
        Phi^T r for the current residual r = y - Phi theta.
    norms, pen : ndarray of shape (n_atoms,)
    scale : float
        The dual scaling max(1, max_i |corr_i| / pen_i) that makes r / scale feasible.
    radius : float
        sqrt(2 * gap); eta_hat lies in B(r / scale, radius) because the dual is 1-strongly
        concave.
    positive : bool

    Returns
    -------
    keep : ndarray of bool, shape (n_atoms,)

    References
    ----------
    Fercoq, Gramfort & Salmon, "Mind the duality gap: safer rules for the lasso", ICML 2015;
    Ndiaye, Fercoq, Gramfort & Salmon, "Gap safe screening rules for sparsity enforcing
    penalties", JMLR 2017.
    """
    c = corr / scale if positive else np.abs(corr) / scale
    return c + radius * norms >= pen * (1.0 - _MARGIN)


def static_test(rule, op, rho, norms, pen, y, positive=False):
    """Dispatch a static rule by name: ``"sphere"``, ``"dome"`` or ``"wtht"``.

    Raises
    ------
    ValueError
        If ``rule`` is not one of these names.
    """
    if rule == "sphere":
        return sphere_test(rho, norms, pen, float(np.linalg.norm(y)), positive)
    if rule == "dome":
        return dome_test(op, rho, norms, pen, y, positive)
    if rule == "wtht":
        return wtht_test(op, rho, norms, pen, y, positive)
    raise ValueError(f"rule must be 'sphere', 'dome' or 'wtht'; got {rule!r}")
