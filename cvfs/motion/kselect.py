"""Choosing the number of motions K by the subspace residual of the best K-motion fit.

Under an affine camera the velocity vectors (eq. 26) of one rigid motion lie near an affine 3-D
subspace. For each K in a range, ``r_K`` is the lowest, over restarts of seeded K-subspaces
(:func:`~cvfs.motion.candidates.ksubspace_candidates`), mean squared distance of the velocity
vectors to the K affine 3-D subspaces of the clusters. ``r_K`` falls steeply while K is below
the true number of motions (a cluster mixing two motions does not fit one subspace) and only by a
fraction once it reaches it (an extra subspace fits noise). Two rules choose K from ``r_K``:

* :func:`choose_k_penalised` (the default of :func:`cvfs.motion.segment_tracks`): the K
  minimising ``log r_K + lam K log(P) / P``, P the number of trajectories, a BIC-style penalty
  per motion; ``lam`` is fitted by :func:`fit_penalty`.
* :func:`choose_k`: the smallest K whose next ratio ``r_(K+1) / r_K`` exceeds a threshold
  ``tau`` (:func:`fit_threshold`).

Both parameters are fitted on training sequences and cross-validated by video in
``benchmarks/motion_k.py``, not chosen per sequence.
"""

import numpy as np
from threadpoolctl import threadpool_limits

from cvfs.motion.candidates import (
    DEFAULT_KSUBSPACE_RESTARTS,
    check_points,
    generate_candidates,
    ksubspace_candidates,
    velocity_matrix,
)

__all__ = ["DEFAULT_LAMBDA", "DEFAULT_TAU", "choose_k", "choose_k_penalised", "fit_penalty",
           "fit_threshold", "k_residuals", "subspace_residual"]

# residual-ratio threshold of choose_k (fit_threshold gives 0.46 on most Hopkins155 folds)
DEFAULT_TAU = 0.47
# fitted on all 155 Hopkins155 sequences by fit_penalty on k_residuals (benchmarks/motion_k.py)
DEFAULT_LAMBDA = 52.41


def subspace_residual(Y, labels, dim=3):
    """Mean squared distance of the rows of Y to the affine ``dim``-subspace of their cluster."""
    total = 0.0
    for k in np.unique(labels):
        members = Y[labels == k]
        R = members - members.mean(axis=0)
        s = np.linalg.svd(R, compute_uv=False)
        total += float(np.sum(s[dim:] ** 2))
    return total / Y.shape[0]


def k_residuals(points, ks=range(2, 9), *, n_restarts=DEFAULT_KSUBSPACE_RESTARTS, random_state=0):
    """Best subspace residual ``r_K`` for every K (and K = 1) that the number of points allows.

    ``r_K`` is the lowest :func:`subspace_residual` of the velocity vectors over the labellings
    of seeded K-subspaces (:func:`~cvfs.motion.candidates.ksubspace_candidates`), falling back to
    the spectral candidates (affinity exponent 2) when no restart keeps every cluster large
    enough to fit.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Trajectories in normalised coordinates (:func:`cvfs.motion.normalise_points`).
    ks : iterable of int, default 2..8
    n_restarts : int, default ``DEFAULT_KSUBSPACE_RESTARTS``
        K-subspaces restarts per K.
    random_state : int, default 0

    Returns
    -------
    residuals : dict of int to float
        ``{1: r_1, K: r_K, ...}`` for K with ``4 K <= P``.
    """
    points, _ = check_points(points, 2)
    Y = velocity_matrix(points).T
    with threadpool_limits(limits=1, user_api="blas"):
        out = {1: subspace_residual(Y, np.zeros(Y.shape[0], dtype=np.int64))}
        for k in ks:
            k = int(k)
            if 4 * k > points.shape[0]:
                break
            labels = ksubspace_candidates(Y, k, n_restarts=n_restarts, random_state=random_state)
            if not len(labels):
                labels = generate_candidates(points, k, alphas=(2.0,), ksubspaces=0,
                                             random_state=random_state).labels
            out[k] = min(subspace_residual(Y, lab) for lab in labels)
    return out


def choose_k(residuals, tau=DEFAULT_TAU, *, k_min=2):
    """The smallest K >= ``k_min`` whose next residual ratio ``r_(K+1) / r_K`` exceeds ``tau``.

    Parameters
    ----------
    residuals : dict of int to float
        From :func:`k_residuals`.
    tau : float in (0, 1)
    k_min : int, default 2

    Returns
    -------
    k : int
        The largest K available when every ratio is below ``tau``.
    """
    ks = sorted(k for k in residuals if k >= k_min)
    if not ks:
        raise ValueError(f"residuals: no K >= {k_min}; got {sorted(residuals)}")
    for k, nxt in zip(ks[:-1], ks[1:], strict=True):
        if residuals[nxt] > tau * max(residuals[k], 1e-300):
            return k
    return ks[-1]


def fit_threshold(residual_list, true_k, *, grid=None, k_min=2):
    """``tau`` with the most sequences given their true K (ties: the middle of the best range).

    Parameters
    ----------
    residual_list : list of dict
        :func:`k_residuals` of each training sequence.
    true_k : sequence of int
    grid : array_like, optional
        Candidate thresholds; default 199 values in (0, 1).

    Returns
    -------
    tau : float
    accuracy : float
        Fraction of training sequences given their true K at ``tau``.
    """
    grid = np.linspace(0.005, 0.995, 199) if grid is None else np.asarray(grid, float)
    acc = np.array([np.mean([choose_k(r, t, k_min=k_min) == k
                             for r, k in zip(residual_list, true_k, strict=True)])
                    for t in grid])
    best = np.flatnonzero(acc == acc.max())
    return float(grid[best[len(best) // 2]]), float(acc.max())


def choose_k_penalised(residuals, n_points, lam=DEFAULT_LAMBDA, *, k_min=2):
    """The K >= ``k_min`` minimising ``log r_K + lam K log(P) / P`` (a BIC-style penalty).

    Each motion adds a subspace whose parameters lower the residual of any fit; the penalty per
    motion shrinks as ``log(P) / P`` with the number of trajectories P (as the BIC penalty per
    point does), so a small gain counts for more on a large sequence. ``lam`` is fitted on
    training sequences (:func:`fit_penalty`).

    Parameters
    ----------
    residuals : dict of int to float
        From :func:`k_residuals`.
    n_points : int
        P, the number of trajectories.
    lam : float, default ``DEFAULT_LAMBDA``
    k_min : int, default 2

    Returns
    -------
    k : int
    """
    ks = sorted(k for k in residuals if k >= k_min)
    if not ks:
        raise ValueError(f"residuals: no K >= {k_min}; got {sorted(residuals)}")
    if int(n_points) < 2:
        raise ValueError(f"n_points must be >= 2; got {n_points}")
    pen = float(lam) * np.log(n_points) / n_points
    score = [np.log(max(residuals[k], 1e-300)) + pen * k for k in ks]
    return ks[int(np.argmin(score))]


def fit_penalty(residual_list, n_points, true_k, *, grid=None, k_min=2):
    """``lam`` of :func:`choose_k_penalised` with the most sequences given their true K.

    Parameters
    ----------
    residual_list : list of dict
        :func:`k_residuals` of each training sequence.
    n_points : sequence of int
        P of each training sequence.
    true_k : sequence of int
    grid : array_like, optional
        Candidate penalties; default 500 values from 1 to 1000 (log-spaced).

    Returns
    -------
    lam : float
        The middle of the best range (ties).
    accuracy : float
        Fraction of training sequences given their true K at ``lam``.
    """
    grid = np.geomspace(1.0, 1000.0, 500) if grid is None else np.asarray(grid, float)
    acc = np.array([np.mean([choose_k_penalised(r, p, lam, k_min=k_min) == k
                             for r, p, k in zip(residual_list, n_points, true_k, strict=True)])
                    for lam in grid])
    best = np.flatnonzero(acc == acc.max())
    return float(grid[best[len(best) // 2]]), float(acc.max())
