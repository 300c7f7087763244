"""Losses on scores z = f(x), each with its value and gradient with respect to z.

Classification losses are functions of the margin u = y z with y in {-1, +1}; the FSA paper's
eqs. (6)-(8). The squared loss is 1/2 (z - y)^2 (eq. 4 up to the factor 1/2). The pairwise ranking
loss (eq. 9) works on pairs (i, j) with target r_ij in {0, 1/2, 1} (1: i ranks above j):
ln(1 + exp(d)) - r_ij d with d = z_i - z_j, minimised where sigmoid(d) = r_ij, so that a higher
score means better (the paper's r is 1 - ours; its scores rank "worse" higher).

Every loss reports ``curvature``: an upper bound of its second derivative with respect to the
score, from which the solver derives a stable step size, and ``annealing_boost``: the factor by
which the solver lengthens that step while features are still being removed (see
:mod:`cvfs.core.fsa`). The numba
kernels in :mod:`cvfs.core._kernels` implement the same formulas by ``code``; tests compare both
with finite differences.
"""

import numpy as np
from scipy.special import expit

__all__ = [
    "LOSSES",
    "HuberSVM",
    "Logistic",
    "Lorenz",
    "PairwiseRank",
    "Squared",
    "get_loss",
]


class Squared:
    """Squared error 1/2 (z - y)^2 for regression (paper eq. 4).

    Attributes
    ----------
    code : int
        Kernel code.
    curvature : float
        Upper bound of d^2 loss / dz^2 (1).
    annealing_boost : float
        Step multiplier while features are being removed (1: the convex quadratic needs no
        boost, and a longer step diverges on correlated designs).
    """

    name = "squared"
    code = 0
    param = 0.0
    curvature = 1.0
    annealing_boost = 1.0
    margin = False

    def value(self, z, y):
        """Per-sample loss, ndarray of shape (n_samples,)."""
        return 0.5 * (np.asarray(z) - y) ** 2

    def gradient(self, z, y):
        """d loss / dz per sample, ndarray of shape (n_samples,)."""
        return np.asarray(z, dtype=float) - y

    def init_intercept(self, y):
        """The minimiser of the mean loss over constant scores."""
        return float(np.mean(y))


class _Margin:
    margin = True

    def value(self, z, y):
        return self._phi(y * np.asarray(z, dtype=float))

    def gradient(self, z, y):
        return y * self._dphi(y * np.asarray(z, dtype=float))

    def init_intercept(self, y):
        return 0.0


class Logistic(_Margin):
    """Logistic loss ln(1 + exp(-u)), u = y z (paper eq. 6)."""

    name = "logistic"
    code = 1
    param = 0.0
    curvature = 0.25
    annealing_boost = 4.0

    def _phi(self, u):
        return np.logaddexp(0.0, -u)

    def _dphi(self, u):
        return -expit(-u)

    def init_intercept(self, y):
        p = np.clip(np.mean(y > 0), 1e-6, 1 - 1e-6)
        return float(np.log(p / (1 - p)))


class Lorenz(_Margin):
    """Lorenz loss: 0 if u > 1, ln(1 + (u - 1)^2) otherwise (paper eq. 8); robust to label
    noise, non-convex. Its second derivative is at most 2."""

    name = "lorenz"
    code = 2
    param = 0.0
    curvature = 2.0
    annealing_boost = 10.0

    def _phi(self, u):
        t = np.minimum(u - 1.0, 0.0)
        return np.log1p(t * t)

    def _dphi(self, u):
        t = np.minimum(u - 1.0, 0.0)
        return 2.0 * t / (1.0 + t * t)


class HuberSVM(_Margin):
    """Huberised hinge (paper eq. 7) with parameter ``h``: 0 if u > 1 + h,
    (1 + h - u)^2 / (4h) if |1 - u| <= h, 1 - u if u < 1 - h. Curvature 1 / (2h).

    Parameters
    ----------
    h : float, default=0.5
        Half-width of the quadratic zone, > 0.
    """

    name = "svm"
    code = 3
    annealing_boost = 10.0

    def __init__(self, h=0.5):
        if not h > 0:
            raise ValueError(f"HuberSVM h must be > 0, got {h!r}")
        self.h = float(h)

    @property
    def param(self):
        return self.h

    @property
    def curvature(self):
        return 1.0 / (2.0 * self.h)

    def _phi(self, u):
        h = self.h
        return np.where(u > 1 + h, 0.0,
                        np.where(u < 1 - h, 1.0 - u, (1 + h - u) ** 2 / (4 * h)))

    def _dphi(self, u):
        h = self.h
        return np.where(u > 1 + h, 0.0, np.where(u < 1 - h, -1.0, -(1 + h - u) / (2 * h)))


class PairwiseRank:
    """Pairwise ranking loss (paper eq. 9), averaged over pairs.

    For a pair (i, j) with target r_ij = 1 if i should rank above j, 1/2 if tied, 0 if below,
    and d = z_i - z_j, the loss is ln(1 + exp(d)) - r_ij d, whose minimiser satisfies
    sigmoid(d) = r_ij: a higher score means better.
    Pair gradients are scattered back onto the samples. Curvature: 1/4 per pair.
    """

    name = "rank"
    code = 4
    param = 0.0
    curvature = 0.25
    annealing_boost = 1.0
    margin = False

    @staticmethod
    def _weights(pairs):
        w = np.full(len(pairs[0]), 1.0) if len(pairs) < 4 else np.asarray(pairs[3], float)
        return w / w.sum()

    def value(self, z, pairs):
        """Weighted mean pair loss; ``pairs`` = (i, j, r) or (i, j, r, weight) arrays."""
        i, j, r = pairs[:3]
        d = np.asarray(z, dtype=float)[i] - np.asarray(z, dtype=float)[j]
        return np.sum(self._weights(pairs) * (np.logaddexp(0.0, d) - r * d))

    def gradient(self, z, pairs):
        """d loss / dz, ndarray of shape (n_samples,)."""
        i, j, r = pairs[:3]
        z = np.asarray(z, dtype=float)
        d = z[i] - z[j]
        s = (expit(d) - r) * self._weights(pairs)
        g = np.zeros_like(z)
        np.add.at(g, i, s)
        np.add.at(g, j, -s)
        return g

    def init_intercept(self, y):
        return 0.0


LOSSES = {
    "squared": Squared,
    "logistic": Logistic,
    "lorenz": Lorenz,
    "svm": HuberSVM,
    "rank": PairwiseRank,
}


def get_loss(loss):
    """A loss object from a name in :data:`LOSSES` or a loss instance.

    Raises
    ------
    ValueError
        If the name is unknown.
    """
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
        return LOSSES[loss]()
    if not hasattr(loss, "code") or not hasattr(loss, "curvature"):
        raise TypeError(f"loss must be a name or a cvfs.core.losses object, got {loss!r}")
    return loss
