"""Slow, obviously-correct NumPy twins of the numba kernels (tests compare against them)."""

import numpy as np

from cvfs.core.losses import get_loss
from cvfs.core.responses import get_response

# ---- FSA ----


def centred_basis(X, fp, bins):
    """The dense centred basis U_c (N, m * G) that the kernels never build."""
    U = get_response(None if bins == 0 else bins).basis(X, fp)
    return U - fp[:, 2:].reshape(1, -1)


def fsa_gradient(X, y, fp, bins, beta, intercept, loss, pairs=None):
    """Mean loss and its gradient on the centred basis (m, G) and the intercept."""
    U = centred_basis(X, fp, bins)
    z = U @ beta.ravel() + intercept
    loss = get_loss(loss)
    if loss.name == "rank":
        return loss.value(z, pairs), (U.T @ loss.gradient(z, pairs)).reshape(beta.shape), 0.0
    d = loss.gradient(z, y)
    return (loss.value(z, y).mean(), (U.T @ d / len(y)).reshape(beta.shape), d.mean())


def curvature_operator(X, fp, bins, pairs=None):
    """U_c^T U_c / N, or U_c^T D^T D U_c / P for ranking pairs."""
    U = centred_basis(X, fp, bins)
    if pairs is None:
        return U.T @ U / U.shape[0]
    i, j, _ = pairs
    D = U[i] - U[j]
    return D.T @ D / len(i)


def fsa_reference(X, y, k, schedule, fp, bins, loss, lr, shrink, intercept=0.0,
                  fit_intercept=True, curv=None):
    """Algorithm 1 with a fixed step, written plainly on the dense centred basis."""
    G = 1 if bins == 0 else bins + 1
    M = X.shape[1]
    kept = np.arange(M)
    beta = np.zeros((M, G))
    for n_keep in schedule:
        _, g, gi = fsa_gradient(X[:, kept], y, fp[kept], bins, beta, intercept, loss)
        beta = beta - lr * (g + 2 * shrink * beta)
        if fit_intercept:
            intercept -= min(lr, 1.0 / curv) * gi
        if n_keep < kept.size:
            norms = np.linalg.norm(beta, axis=1)
            order = np.lexsort((np.arange(kept.size), -norms))[:n_keep]
            keep = np.sort(order)
            kept, beta = kept[keep], beta[keep]
    return kept, beta, intercept


# ---- motion ----


def cut_fractions(labels, neighbors, ks):
    """Twin of :func:`cvfs.motion.features.cut_fractions`."""
    out = np.zeros((labels.shape[0], len(ks)))
    for c, lab in enumerate(labels):
        for t, k in enumerate(ks):
            cut = lab[neighbors[:, :k]] != lab[:, None]
            out[c, t] = cut.mean()
    return out


def stump_gains(bins, v, n_bins):
    """Twin of :func:`cvfs.motion.ranking.stump_gains`."""
    out = np.zeros((bins.shape[1], n_bins))
    for m in range(bins.shape[1]):
        for t in range(n_bins):
            out[m, t] = v[bins[:, m] > t].sum()
    return out
