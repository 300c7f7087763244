"""Priors on one feature's group of coefficients beta_j (shape (G,)), added to the mean loss.

- :class:`Shrinkage`: rho(beta_j) = s ||beta_j||^2
- :class:`SecondOrder`: rho(beta_j) = s ||beta_j||^2 + c sum_k (beta_{j,k+1} + beta_{j,k-1}
  - 2 beta_{j,k})^2, the smoothness prior of the FSA paper, eq. (13), which favours smooth
  piecewise-linear response functions.

The FSA kernels implement both through two constants (``shrink`` = s, ``smooth`` = c); these
classes are the readable reference and give the Lipschitz constant of the prior's gradient.
"""

import numpy as np

__all__ = ["PRIORS", "SecondOrder", "Shrinkage", "get_prior"]


def _second_difference(G):
    """D2 of shape (G - 2, G): rows (1, -2, 1)."""
    D = np.zeros((max(G - 2, 0), G))
    for r in range(G - 2):
        D[r, r:r + 3] = (1.0, -2.0, 1.0)
    return D


class Shrinkage:
    """rho(beta_j) = s ||beta_j||^2.

    Parameters
    ----------
    shrinkage : float, default=1e-3
        s >= 0.
    """

    name = "shrinkage"

    def __init__(self, shrinkage=1e-3):
        if not shrinkage >= 0:
            raise ValueError(f"shrinkage must be >= 0, got {shrinkage!r}")
        self.shrinkage = float(shrinkage)
        self.smoothness = 0.0

    def value(self, beta):
        """Sum over groups; ``beta`` of shape (m, G)."""
        return self.shrinkage * float(np.sum(np.square(beta)))

    def gradient(self, beta):
        return 2.0 * self.shrinkage * np.asarray(beta, dtype=float)

    def lipschitz(self, G):
        """Lipschitz constant of the gradient."""
        return 2.0 * self.shrinkage


class SecondOrder(Shrinkage):
    """rho(beta_j) = s ||beta_j||^2 + c ||D2 beta_j||^2 (paper eq. 13).

    Parameters
    ----------
    shrinkage : float, default=1e-3
        s >= 0 (the paper's lambda).
    smoothness : float, default=0.0
        c >= 0.

    References
    ----------
    Barbu et al., TPAMI 2017, eq. (13).
    """

    name = "second_order"

    def __init__(self, shrinkage=1e-3, smoothness=0.0):
        super().__init__(shrinkage)
        if not smoothness >= 0:
            raise ValueError(f"smoothness must be >= 0, got {smoothness!r}")
        self.smoothness = float(smoothness)

    def value(self, beta):
        beta = np.atleast_2d(beta)
        d2 = beta @ _second_difference(beta.shape[1]).T
        return super().value(beta) + self.smoothness * float(np.sum(d2 * d2))

    def gradient(self, beta):
        beta = np.atleast_2d(np.asarray(beta, dtype=float))
        D = _second_difference(beta.shape[1])
        return super().gradient(beta) + 2.0 * self.smoothness * (beta @ D.T @ D)

    def lipschitz(self, G):
        # ||D2^T D2|| <= 16 (each row of D2 has squared norm 6; Gershgorin gives 16)
        return 2.0 * self.shrinkage + (32.0 * self.smoothness if G >= 3 else 0.0)


PRIORS = {"shrinkage": Shrinkage, "second_order": SecondOrder}


def get_prior(prior, shrinkage=1e-3, smoothness=0.0):
    """A prior object from a name in :data:`PRIORS` (or a prior instance).

    Raises
    ------
    ValueError
        If the name is unknown, or ``smoothness`` > 0 with the shrinkage prior.
    """
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {sorted(PRIORS)}, got {prior!r}")
        if prior == "shrinkage":
            if smoothness:
                raise ValueError(
                    "smoothness > 0 needs prior='second_order' (the shrinkage prior has no "
                    f"smoothness term), got smoothness={smoothness!r}"
                )
            return Shrinkage(shrinkage)
        return SecondOrder(shrinkage, smoothness)
    if not hasattr(prior, "shrinkage") or not hasattr(prior, "smoothness"):
        raise TypeError(f"prior must be a name or a cvfs.core.priors object, got {prior!r}")
    return prior
