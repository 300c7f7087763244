"""Classification by sparse Bayesian coding over a dictionary of training samples (SBL paper §4).

Each test sample y is scaled to unit norm and coded by :func:`cvfs.core.sbl.sbl_fit` over the
unit-norm training samples (the atoms); the class scores come from the code theta:

- ``"abs"``: ABS_k = sum of |theta_i| over the atoms of class k (eq. 60), normalised to
  prob_k = ABS_k / ||ABS||_2 (eq. 61);
- ``"residual"``: r_k = ||y - Phi delta_k(theta)||, the residual left by the atoms of class k
  alone (sparse-representation classification, Wright et al. 2009); the smallest wins.

The noise variance of each sample is relative: lam = (ratio * lambda_max(y))^2 with
lambda_max(y) = max_i |phi_i^T y|, so the first weighted lasso of SBL has the L1 weight
ratio * lambda_max (the thesis' lambda / lambda_max axis); ratio >= 1 codes nothing.
"""

import numpy as np

from cvfs.core.sbl import sbl_fit
from cvfs.core.sbl_batch import batch_gap_safe_keep, gram_sbl
from cvfs.core.screening import as_operator

__all__ = ["balanced_subsample", "class_scores", "sbl_codes"]


def balanced_subsample(labels, n_atoms, rng):
    """Indices of at most ``n_atoms`` samples, as equal per class as the class sizes allow.

    Parameters
    ----------
    labels : ndarray of shape (n_samples,), int
        Class index of each sample (0 .. n_classes - 1).
    n_atoms : int or None
        Number of samples to keep; None or >= n_samples keeps all.
    rng : numpy.random.Generator

    Returns
    -------
    idx : ndarray of shape (min(n_atoms, n_samples),), int64, sorted
    """
    n = labels.size
    if n_atoms is None or n_atoms >= n:
        return np.arange(n, dtype=np.int64)
    counts = np.bincount(labels)
    quota = np.zeros_like(counts)
    left = int(n_atoms)
    while left > 0:  # water-filling: equal shares, small classes give theirs to the others
        open_ = rng.permutation(np.flatnonzero(quota < counts))
        share = max(left // open_.size, 1)
        for k in open_:
            add = min(share, counts[k] - quota[k], left)
            quota[k] += add
            left -= add
            if left == 0:
                break
    picked = [rng.choice(np.flatnonzero(labels == k), quota[k], replace=False)
              for k in np.flatnonzero(quota)]
    return np.sort(np.concatenate(picked)).astype(np.int64)


def sbl_codes(Phi, Y, ratio, *, screening="gap", max_iter=5, tol=1e-4, lasso_tol=1e-8,
              gram=None):
    """Sparse Bayesian codes of the rows of ``Y`` over the columns of ``Phi``.

    Parameters
    ----------
    Phi : ndarray of shape (n_features, n_atoms) or operator
        Dictionary with unit-norm columns.
    Y : ndarray of shape (n_samples, n_features)
        Samples to code; each is scaled to unit norm first.
    ratio : float
        lambda / lambda_max of each sample (module docstring).
    screening, max_iter, tol, lasso_tol
        Passed to :func:`cvfs.core.sbl.sbl_fit`.
    gram : cvfs.core.sbl_batch.GramDictionary, optional
        ``Phi`` with its Gram matrix: the samples are then coded in atom space
        (:func:`cvfs.core.sbl_batch.gram_sbl`), the first weighted lasso after the gap-safe test
        of the whole batch (any ``screening`` but None); same codes to the lasso tolerance.

    Returns
    -------
    codes : list of (ndarray of int64, ndarray of float64)
        Per sample, the atoms with nonzero coefficients and their coefficients.
    lams : ndarray of shape (n_samples,)
        Noise variance of each (unit-norm) sample.
    """
    op = as_operator(Phi)
    op.column_norms()  # computed once, shared by every sample
    Y = np.asarray(Y, dtype=np.float64)
    norms = np.linalg.norm(Y, axis=1)
    U = Y / np.where(norms > 0, norms, 1.0)[:, None]
    C = op.rmatvec(U.T) if U.size else np.zeros((op.shape[1], 0))  # Phi^T Y: one GEMM
    lam_max = np.max(np.abs(C), axis=0) if U.size else np.zeros(0)
    codes, lams = [], (ratio * lam_max) ** 2
    if gram is not None:
        keep = None if screening is None else \
            batch_gap_safe_keep(C, gram.column_norms(), ratio * lam_max)
    for i, y in enumerate(U):
        if lams[i] <= 0.0:  # a zero sample (or a dictionary orthogonal to it) codes to 0
            codes.append((np.zeros(0, np.int64), np.zeros(0)))
            continue
        if gram is not None:
            coef = gram_sbl(gram, C[:, i], float(y @ y), lams[i], max_iter=max_iter, tol=tol,
                            lasso_tol=lasso_tol, keep=None if keep is None else keep[:, i])
            nz = np.flatnonzero(coef)
            codes.append((nz.astype(np.int64), coef[nz]))
            continue
        # a few reweighting steps are the method (class scores), not a failure
        res = sbl_fit(op, y, lams[i], screening=screening, max_iter=max_iter, tol=tol,
                      lasso_tol=lasso_tol, step_budget=True)
        nz = np.flatnonzero(res.coef)
        codes.append((nz.astype(np.int64), res.coef[nz]))
    return codes, lams


def class_scores(Phi, Y, codes, lams, atom_labels, n_classes, rule="abs"):
    """Class scores of coded samples.

    Parameters
    ----------
    Phi : ndarray of shape (n_features, n_atoms)
    Y : ndarray of shape (n_samples, n_features)
    codes, lams
        Output of :func:`sbl_codes`.
    atom_labels : ndarray of shape (n_atoms,), int
        Class index of each atom.
    n_classes : int
    rule : {"abs", "residual"}

    Returns
    -------
    score : ndarray of shape (n_samples, n_classes)
        prob_k of eq. (61) for ``"abs"`` (0 when theta = 0); minus the class residual
        r_k / ||y|| for ``"residual"``. Larger is better.
    proba : ndarray of shape (n_samples, n_classes)
        Rows summing to 1: ABS_k / sum ABS (eq. 60) for ``"abs"``; for ``"residual"`` the
        Gaussian class likelihoods exp(-r_k^2 / (2 lam)) normalised. Uniform when theta = 0.
    """
    m = len(codes)
    score = np.zeros((m, n_classes))
    proba = np.full((m, n_classes), 1.0 / n_classes)
    Y = np.asarray(Y, dtype=np.float64)
    for i, (idx, val) in enumerate(codes):
        lab = atom_labels[idx]
        if rule == "abs":
            a = np.bincount(lab, weights=np.abs(val), minlength=n_classes)
            total = a.sum()
            if total > 0:
                score[i] = a / np.linalg.norm(a)
                proba[i] = a / total
            continue
        y = Y[i]
        ny = float(np.linalg.norm(y))
        if ny == 0.0:
            continue
        y = y / ny
        r2 = np.full(n_classes, 1.0)  # ||y||^2: a class without active atoms explains nothing
        for k in np.unique(lab):
            sel = lab == k
            d = y - Phi[:, idx[sel]] @ val[sel]
            r2[k] = float(d @ d)
        score[i] = -np.sqrt(r2)
        if lams[i] > 0:
            z = -(r2 - r2.min()) / (2.0 * lams[i])
            e = np.exp(z)
            proba[i] = e / e.sum()
    return score, proba
