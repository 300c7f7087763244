"""Slow, obviously-correct NumPy references of the numba kernels (compared against in tests)."""

import numpy as np

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
