"""Choosing the number of motions K by the subspace residual of the best K-motion fit.

Under an affine camera the velocity vectors (eq. 26) of one rigid motion lie near an affine 3-D
subspace. For each K in a range, ``r_K`` is the lowest, over restarts of seeded K-subspaces
(:func:`~cvfs.motion.candidates.ksubspace_candidates`), mean squared distance of the velocity
vectors to the K affine 3-D subspaces of the clusters; for K = 2, 3 the spectral candidates of
:func:`~cvfs.motion.candidates.generate_candidates` (the pool ranked for those K) join the
restarts. ``r_K`` falls steeply while K is below the true number of motions (a cluster mixing two
motions does not fit one subspace) and only by a fraction once it reaches it (an extra subspace
fits noise). ``q_K`` is the same labelling's mean squared distance to affine 2-D subspaces.
Three rules choose K:

* :func:`choose_k_capped` (the rule of :func:`cvfs.motion.segment` with K not given): the K
  minimising ``log g_K + mu log q_K + lam K log(P) / P``, ``g_K`` the lowest robust cost
  (:func:`capped_cost`, residuals capped and measured in the noise level of
  :func:`noise_variance`, each cluster 2-, 3- or 4-D) over the labellings of K.
* :func:`choose_k_penalised`: the K
  minimising ``log r_K + mu log q_K + lam K log(P) / P``, P the number of trajectories, a
  BIC-style penalty per motion; ``lam`` and ``mu`` are fitted by :func:`fit_penalty`.
* :func:`choose_k`: the smallest K whose next ratio ``r_(K+1) / r_K`` exceeds a threshold
  ``tau`` (:func:`fit_threshold`).

:func:`k_residuals` and :func:`k_capped_costs` can keep only the labellings whose smallest
cluster holds a given fraction of the trajectories (:func:`large_clusters`).

Their parameters are fitted on training sequences and cross-validated by video in
``benchmarks/motion/motion_k.py``, not chosen per sequence; those of :func:`choose_k_capped` by a
conditional logit over K (a smooth likelihood rather than the step-shaped count of sequences given
their true K, so the fit does not jump between isolated peaks of the training accuracy).
"""

import numpy as np
from threadpoolctl import threadpool_limits

from cvfs.base import check_random_state
from cvfs.motion.candidates import (
    DEFAULT_KSUBSPACE_RESTARTS,
    KSUBSPACE_MAX_ITER,
    _ClusterFits,
    _ksubspace_state,
    _ksubspaces,
    _principal_directions,
    check_points,
    generate_candidates,
    velocity_matrix,
)

__all__ = ["DEFAULT_LAMBDA", "DEFAULT_MU", "DEFAULT_TAU", "NOISE_RANK", "SPECTRAL_K",
           "CAPPED_CAP", "CAPPED_DIM_COST", "CAPPED_LAMBDA", "CAPPED_MU", "FIT_SMOOTH",
           "capped_cost", "choose_k", "choose_k_capped",
           "choose_k_penalised", "cluster_capped_cost", "fit_penalty", "fit_threshold",
           "k_capped_costs", "k_labellings", "k_labellings_residuals", "k_residuals",
           "large_clusters", "noise_variance", "subspace_residual"]

# residual-ratio threshold of choose_k (fit_threshold gives 0.46 on most Hopkins155 folds)
DEFAULT_TAU = 0.47
# fitted together on all 155 Hopkins155 sequences by fit_penalty with the planar residuals
# (benchmarks/motion/motion_k.py); without q_K pass lam explicitly
DEFAULT_LAMBDA = 65.33
DEFAULT_MU = 0.281
# singular values of the centred velocity matrix beyond this rank measure the noise
# (noise_variance): three rigid motions span at most 12 dimensions
NOISE_RANK = 12
# choose_k_capped: capped_cost's cap and dimension cost and the rule's lam and mu, fitted
# together on all 155 Hopkins155 sequences by a conditional logit over K on (log g_K, log q_K,
# K log(P) / P), lam and mu the ratios of its weights, (cap, dim_cost) the cell of the grid with
# the best training accuracy: `python benchmarks/motion/motion_k.py --seeds 0 --skip-pool`, line
# "g + mu q + lam pen, logit fit on all 155"
CAPPED_CAP = 8.0
CAPPED_DIM_COST = 50.0
CAPPED_LAMBDA = 18.08
CAPPED_MU = 0.081
# fit_penalty (and benchmarks/motion/motion_k.py) take the centre of the best neighbourhood of this
# width on the parameter grid, not the single best grid point
FIT_SMOOTH = 3
# the K whose spectral candidates join the K-subspaces restarts in k_residuals (the ranked K)
SPECTRAL_K = (2, 3)


def subspace_residual(Y, labels, dim=3):
    """Mean squared distance of the rows of Y to the affine ``dim``-subspace of their cluster.

    ``dim`` may be a tuple: one residual per dimension (ndarray).
    """
    dims = np.atleast_1d(dim).astype(int)
    total = np.zeros(dims.size)
    for k in np.unique(labels):
        members = Y[labels == k]
        R = members - members.mean(axis=0)
        s2 = np.linalg.svd(R, compute_uv=False) ** 2
        total += np.array([s2[d:].sum() for d in dims])
    total /= Y.shape[0]
    return float(total[0]) if np.ndim(dim) == 0 else total


def _memo_subspace_residual(fits, labels, dims):
    """:func:`subspace_residual` of the rows of ``fits.Y`` (a list of ``dims``) from the
    singular values memoised in ``fits`` (a :class:`~cvfs.motion.candidates._ClusterFits`)."""
    dims = np.asarray(dims, dtype=int)
    total = np.zeros(dims.size)
    for k in np.unique(labels):
        s2 = fits.singular_values(labels == k) ** 2
        total += np.array([s2[d:].sum() for d in dims])
    total /= fits.Y.shape[0]
    return total


def k_labellings(points, ks=range(2, 9), *, n_restarts=DEFAULT_KSUBSPACE_RESTARTS,
                 random_state=0, spectral_k=SPECTRAL_K):
    """The labellings :func:`k_residuals` fits for every K that the number of points allows.

    Parameters and the candidate pools are those of :func:`k_residuals`.

    Returns
    -------
    labellings : dict of int to ndarray of shape (C_K, P)
        For K with ``4 K <= P``, in increasing K.
    """
    points, _ = check_points(points, 2)
    return _k_labellings(points, ks, n_restarts, random_state, spectral_k, None)


def _k_labellings(points, ks, n_restarts, random_state, spectral_k, fits):
    """:func:`k_labellings` of validated ``points``; ``fits``: a
    :class:`~cvfs.motion.candidates._ClusterFits` of their velocity matrix, or None."""
    Y = velocity_matrix(points).T if fits is None else fits.Y
    out = {}
    # every K refits clusters of the same Y from the same neighbourhood seeds: one table of
    # neighbours and one memo of cluster fits serve them all (ksubspace_candidates)
    near = None
    with threadpool_limits(limits=1, user_api="blas"):
        for k in ks:
            k = int(k)
            if 4 * k > points.shape[0]:
                break
            if near is None:
                if int(n_restarts) < 1:
                    raise ValueError(f"n_restarts must be >= 1; got {n_restarts}")
                near, fresh = _ksubspace_state(Y)
                fits = fresh if fits is None else fits
            labels = _ksubspaces(Y, k, int(n_restarts), near, KSUBSPACE_MAX_ITER,
                                 check_random_state(random_state), fits)
            if k in spectral_k:
                spec = generate_candidates(points, k, ksubspaces=0,
                                           random_state=random_state).labels
                labels = np.vstack([labels, spec]) if len(labels) else spec
            elif not len(labels):
                labels = generate_candidates(points, k, alphas=(2.0,), ksubspaces=0,
                                             random_state=random_state).labels
            out[k] = labels
    return out


def k_residuals(points, ks=range(2, 9), *, n_restarts=DEFAULT_KSUBSPACE_RESTARTS, random_state=0,
                spectral_k=SPECTRAL_K, return_planar=False, labellings=None, min_fraction=0.0):
    """Best subspace residual ``r_K`` for every K (and K = 1) that the number of points allows.

    ``r_K`` is the lowest :func:`subspace_residual` of the velocity vectors over the labellings
    of seeded K-subspaces (:func:`~cvfs.motion.candidates.ksubspace_candidates`) and, for K in
    ``spectral_k``, the spectral candidates of
    :func:`~cvfs.motion.candidates.generate_candidates` (default pool, no K-subspaces); for
    other K the spectral candidates (affinity exponent 2) are the fallback when no restart keeps
    every cluster large enough to fit.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Trajectories in normalised coordinates (:func:`cvfs.motion.normalise_points`).
    ks : iterable of int, default 2..8
    n_restarts : int, default ``DEFAULT_KSUBSPACE_RESTARTS``
        K-subspaces restarts per K.
    random_state : int, default 0
    spectral_k : tuple of int, default ``SPECTRAL_K``
        K whose spectral candidates join the restarts.
    return_planar : bool, default False
        Also return ``q_K``, the residual of the same labelling to affine 2-D subspaces.
    labellings : dict of int to ndarray, optional
        :func:`k_labellings` of ``points``, computed when None.
    min_fraction : float, default 0.0
        Only the labellings whose every cluster holds at least ``min_fraction`` P trajectories
        (:func:`large_clusters`); a K with none is left out.

    Returns
    -------
    residuals : dict of int to float
        ``{1: r_1, K: r_K, ...}`` for K with ``4 K <= P``.
    planar : dict of int to float
        ``{1: q_1, K: q_K, ...}``; only with ``return_planar``.
    """
    points, _ = check_points(points, 2)
    fits = _ClusterFits(velocity_matrix(points).T, 3)
    cands = labellings if labellings is not None else _k_labellings(
        points, ks, n_restarts, random_state, spectral_k, fits)
    out, planar = _k_residuals(fits, cands, min_fraction)
    return (out, planar) if return_planar else out


def _k_residuals(fits, labellings, min_fraction):
    """``(r_K, q_K)`` of :func:`k_residuals` for the rows of ``fits.Y`` (``fits`` a
    :class:`~cvfs.motion.candidates._ClusterFits` with ``dim=3``)."""
    Y = fits.Y
    with threadpool_limits(limits=1, user_api="blas"):
        one = subspace_residual(Y, np.zeros(Y.shape[0], dtype=np.int64), (3, 2))
        out, planar = {1: float(one[0])}, {1: float(one[1])}
        for k, labels in large_clusters(labellings, min_fraction).items():
            res = np.array([_memo_subspace_residual(fits, lab, (3, 2)) for lab in labels])
            best = int(np.argmin(res[:, 0]))
            out[k], planar[k] = float(res[best, 0]), float(res[best, 1])
    return out, planar


def k_labellings_residuals(points, ks=range(2, 9)):
    """:func:`k_labellings` and :func:`k_residuals` (with ``return_planar``) of ``points`` with
    the default settings, computed together: the residuals reuse the cluster fits of the
    K-subspaces restarts.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Normalised trajectories.
    ks : iterable of int, default 2..8

    Returns
    -------
    labellings : dict of int to ndarray of shape (C_K, P)
    residuals, planar : dict of int to float
        As :func:`k_residuals`.
    """
    points, _ = check_points(points, 2)
    fits = _ClusterFits(velocity_matrix(points).T, 3)
    labellings = _k_labellings(points, ks, DEFAULT_KSUBSPACE_RESTARTS, 0, SPECTRAL_K, fits)
    residuals, planar = _k_residuals(fits, labellings, 0.0)
    return labellings, residuals, planar


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


def choose_k_penalised(residuals, n_points, lam=DEFAULT_LAMBDA, *, planar=None, mu=DEFAULT_MU,
                       k_min=2):
    """The K >= ``k_min`` minimising ``log r_K + mu log q_K + lam K log(P) / P``.

    Each motion adds a subspace whose parameters lower the residual of any fit; the penalty per
    motion shrinks as ``log(P) / P`` with the number of trajectories P (as the BIC penalty per
    point does), so a small gain counts for more on a large sequence. The planar residual
    ``q_K`` (same labelling, affine 2-D subspaces) adds how well each cluster's main directions
    are found: a motion split in two still leaves each part's 2-D fit poor, a new independent
    motion improves it. ``lam`` and ``mu`` are fitted on training sequences
    (:func:`fit_penalty`).

    Parameters
    ----------
    residuals : dict of int to float
        From :func:`k_residuals`.
    n_points : int
        P, the number of trajectories.
    lam : float, default ``DEFAULT_LAMBDA``
    planar : dict of int to float, optional
        ``q_K`` from :func:`k_residuals` (``return_planar=True``); None drops the ``mu`` term.
    mu : float, default ``DEFAULT_MU``
    k_min : int, default 2

    Returns
    -------
    k : int

    Raises
    ------
    ValueError
        No K >= ``k_min``, ``n_points < 2``, or ``planar`` lacks a K of ``residuals``.
    """
    ks = sorted(k for k in residuals if k >= k_min)
    if not ks:
        raise ValueError(f"residuals: no K >= {k_min}; got {sorted(residuals)}")
    if int(n_points) < 2:
        raise ValueError(f"n_points must be >= 2; got {n_points}")
    if planar is not None and not set(ks) <= set(planar):
        raise ValueError(f"planar must hold every K of residuals {ks}; got {sorted(planar)}")
    pen = float(lam) * np.log(n_points) / n_points
    score = [np.log(max(residuals[k], 1e-300)) + pen * k
             + (float(mu) * np.log(max(planar[k], 1e-300)) if planar is not None else 0.0)
             for k in ks]
    return ks[int(np.argmin(score))]


def fit_penalty(residual_list, n_points, true_k, *, grid=None, planar_list=None, mu_grid=None,
                k_min=2, smooth=FIT_SMOOTH):
    """``lam`` (and ``mu``) of :func:`choose_k_penalised` giving most sequences their true K.

    The training accuracy is averaged over each grid point's ``smooth``-wide neighbourhood
    (along every parameter's grid, edges repeated) before the best point is taken: on a few
    hundred sequences the accuracy is a step function whose isolated peaks do not generalise.

    Parameters
    ----------
    residual_list : list of dict
        :func:`k_residuals` of each training sequence.
    n_points : sequence of int
        P of each training sequence.
    true_k : sequence of int
    grid : array_like, optional
        Candidate penalties; default 500 values from 1 to 1000 (log-spaced; 120 with
        ``planar_list``).
    planar_list : list of dict, optional
        ``q_K`` of each training sequence; fits ``mu`` too (grid search over both).
    mu_grid : array_like, optional
        Candidate ``mu``; default 0 and +-61 log-spaced magnitudes from 0.01 to 10.
    k_min : int, default 2
    smooth : int, default ``FIT_SMOOTH``
        Width of the neighbourhood (1: the single best grid point).

    Returns
    -------
    lam : float
        The middle of the best range of the averaged accuracy (ties, in grid order).
    accuracy : float
        Fraction of training sequences given their true K at ``lam``.
    mu : float
        Only with ``planar_list``.
    """
    true_k = np.asarray(true_k)
    if planar_list is None:
        grid = np.geomspace(1.0, 1000.0, 500) if grid is None else np.asarray(grid, float)
        acc = np.array([np.mean([choose_k_penalised(r, p, lam, k_min=k_min) == k
                                 for r, p, k in zip(residual_list, n_points, true_k,
                                                    strict=True)])
                        for lam in grid])
        sm = _neighbourhood_mean(acc, smooth)
        best = np.flatnonzero(sm == sm.max())
        i = best[len(best) // 2]
        return float(grid[i]), float(acc[i])
    grid = np.geomspace(1.0, 1000.0, 120) if grid is None else np.asarray(grid, float)
    if mu_grid is None:
        mag = np.geomspace(0.01, 10.0, 30)
        mu_grid = np.concatenate([-mag[::-1], [0.0], mag])
    mu_grid = np.asarray(mu_grid, float)
    # scores are linear in (lam, mu): tabulate log r, log q and K log(P)/P per sequence and K
    ks = range(k_min, 1 + max(max(r) for r in residual_list))
    n = len(residual_list)
    logr = np.full((n, len(ks)), np.inf)
    logq = np.zeros((n, len(ks)))
    pen = np.zeros((n, len(ks)))
    for i, (r, q, p) in enumerate(zip(residual_list, planar_list, n_points, strict=True)):
        for j, k in enumerate(ks):
            if k in r:
                logr[i, j] = np.log(max(r[k], 1e-300))
                logq[i, j] = np.log(max(q[k], 1e-300))
                pen[i, j] = k * np.log(p) / p
    acc = np.empty((grid.size, mu_grid.size))
    for a, lam in enumerate(grid):
        score = logr[None] + mu_grid[:, None, None] * logq[None] + lam * pen[None]
        chosen = np.asarray(ks)[np.argmin(score, axis=2)]
        acc[a] = np.mean(chosen == true_k[None], axis=1)
    sm = _neighbourhood_mean(acc, smooth)
    best = np.argwhere(sm == sm.max())
    a, m = best[len(best) // 2]
    return float(grid[a]), float(acc[a, m]), float(mu_grid[m])


def _neighbourhood_mean(acc, width):
    """Mean of ``acc`` over each entry's ``width``-wide neighbourhood (edges repeated)."""
    if int(width) < 1:
        raise ValueError(f"smooth must be >= 1; got {width!r}")
    if int(width) == 1 or np.ndim(acc) == 0:
        return acc
    from scipy.ndimage import uniform_filter

    return uniform_filter(np.asarray(acc, np.float64), size=int(width), mode="nearest")


def noise_variance(Y, rank=NOISE_RANK):
    """Noise variance per entry of the rows of Y, from its singular values beyond ``rank``.

    The centred rows span at most ``rank`` dimensions without noise; the remaining
    ``(P - m) (D - m)`` degrees of freedom (``m = min(rank, P - 1, D - 1)``) hold noise only, so
    their share of the squared singular values estimates its variance.

    Parameters
    ----------
    Y : ndarray of shape (P, D)
        One row per trajectory (the velocity vectors).
    rank : int, default ``NOISE_RANK``

    Returns
    -------
    sigma2 : float
        > 0 (floored at 1e-300).
    """
    Y = np.asarray(Y, dtype=np.float64)
    P, D = Y.shape
    m = max(0, min(int(rank), P - 1, D - 1))
    with threadpool_limits(limits=1, user_api="blas"):
        s = np.linalg.svd(Y - Y.mean(axis=0), compute_uv=False)
    return max(float(np.sum(s[m:] ** 2)) / ((P - m) * (D - m)), 1e-300)


def cluster_capped_cost(R, sigma2, dims, cap, dim_cost):
    """One cluster's term of :func:`capped_cost` (rows ``R``, its dimension in ``dims`` chosen)
    and how many of its rows reach the cap there. ``cap`` and ``dim_cost`` may be arrays that
    broadcast together (a grid of settings, one SVD). Returns ``(cost, n_capped)``: floats for
    scalar settings, else arrays of the broadcast shape."""
    D = R.shape[1]
    R = R - R.mean(axis=0)
    vt = _principal_directions(R, max(dims))
    tot = np.einsum("ij,ij->i", R, R)
    cap = np.asarray(cap, dtype=np.float64)
    dim_cost = np.asarray(dim_cost, dtype=np.float64)
    shape = np.broadcast_shapes(cap.shape, dim_cost.shape)
    best = np.full(shape, np.inf)
    n_capped = np.zeros(shape, dtype=np.int64)
    for d in dims:
        along = R @ vt[:d].T
        e = np.maximum(tot - np.einsum("ij,ij->i", along, along), 0.0) / sigma2
        lim = cap[..., None] * (D - d)
        cost = np.minimum(e, lim).sum(axis=-1) + dim_cost * d * len(R)
        better = cost < best
        best = np.where(better, cost, best)
        n_capped = np.where(better, (e > lim).sum(axis=-1), n_capped)
    if not shape:
        return float(best), int(n_capped)
    return best, n_capped


def capped_cost(Y, labels, sigma2, *, dims=(2, 3, 4), cap=5.0, dim_cost=1.0):
    """Robust model-selection cost of one labelling (Torr's GRIC form), per trajectory.

    Every cluster takes the affine dimension d in ``dims`` minimising
    ``sum_i min(e_i(d) / sigma2, cap (D - d)) + dim_cost d n_c``: ``e_i(d)`` is the squared
    distance of row i to the cluster's affine d-subspace, ``n_c`` the cluster's size. A
    residual is capped at ``cap`` times its expected value under noise alone, so points the
    cluster does not explain (another motion) count a constant and a few of them do not dominate;
    ``dim_cost`` charges each point for the dimensions of its subspace (a translating object is
    2-D, an articulated or perspective one may need 4).

    Parameters
    ----------
    Y : ndarray of shape (P, D)
    labels : ndarray of shape (P,) or (C, P)
        One labelling or C of them.
    sigma2 : float
        Noise variance per entry (:func:`noise_variance`).
    dims : tuple of int, default (2, 3, 4)
    cap : float, default 5.0
    dim_cost : float, default 1.0

    Returns
    -------
    cost : float or ndarray of shape (C,)
        Sum over clusters divided by P.
    """
    Y = np.asarray(Y, dtype=np.float64)
    out = _capped_costs(Y, np.atleast_2d(np.asarray(labels)), sigma2, {}, dims=dims, cap=cap,
                        dim_cost=dim_cost)
    return float(out[0]) if np.ndim(labels) == 1 else out


def _capped_costs(Y, labs, sigma2, memo, *, dims=(2, 3, 4), cap=5.0, dim_cost=1.0):
    """:func:`capped_cost` of every row of ``labs``; ``memo`` maps a cluster (its mask's bytes)
    to its term, so a cluster shared by several labellings (of one or several K) is costed
    once, with the same arithmetic."""
    out = np.zeros(len(labs))
    with threadpool_limits(limits=1, user_api="blas"):
        for c, lab in enumerate(labs):
            for k in np.unique(lab):
                mask = lab == k
                key = mask.tobytes()
                if key not in memo:
                    memo[key] = cluster_capped_cost(Y[mask], sigma2, dims, cap, dim_cost)[0]
                out[c] += memo[key]
    out /= Y.shape[0]
    return out


def large_clusters(labellings, min_fraction):
    """The labellings whose every cluster holds at least ``min_fraction`` of the trajectories.

    A cluster of a few percent of the tracks can be tracking debris rather than a motion: on
    real video, tracks that start on the background and are carried off by a passing occluder
    fit a subspace of their own, and the robust cost counts them as one more motion. Every
    motion of Hopkins155 holds at least 5.3 % of its sequence's trajectories. Measured as a K
    rule in ``benchmarks/motion/motion_k.py --min-fraction`` (``docs/results.md``); not the default.

    Parameters
    ----------
    labellings : dict of int to ndarray of shape (C_K, P)
        :func:`k_labellings`.
    min_fraction : float
        0 keeps every labelling.

    Returns
    -------
    kept : dict of int to ndarray of shape (C'_K, P)
        The K with at least one labelling left.

    Raises
    ------
    ValueError
        ``min_fraction`` not in [0, 1).
    """
    if isinstance(min_fraction, bool) or not 0.0 <= float(min_fraction) < 1.0:
        raise ValueError(f"min_fraction must be in [0, 1); got {min_fraction!r}")
    if not min_fraction:
        return dict(labellings)
    out = {}
    for k, labs in labellings.items():
        labs = np.atleast_2d(labs)
        if not labs.size:
            continue
        need = min_fraction * labs.shape[1]
        ok = np.array([np.bincount(lab, minlength=int(k)).min() >= need for lab in labs])
        if ok.any():
            out[k] = labs[ok]
    return out


def k_capped_costs(points, ks=range(2, 9), *, labellings=None, rank=NOISE_RANK, min_fraction=0.0,
                   **cost):
    """``g_K``: the lowest :func:`capped_cost` over the labellings of each K.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Normalised trajectories.
    ks : iterable of int, default 2..8
    labellings : dict of int to ndarray, optional
        :func:`k_labellings` of ``points`` (computed when None).
    rank : int, default ``NOISE_RANK``
        For :func:`noise_variance`.
    min_fraction : float, default 0.0
        As :func:`k_residuals`: only labellings whose every cluster holds at least
        ``min_fraction`` P trajectories; a K with none is left out.
    **cost
        ``dims``, ``cap``, ``dim_cost`` of :func:`capped_cost`.

    Returns
    -------
    costs : dict of int to float
    """
    points, _ = check_points(points, 2)
    Y = velocity_matrix(points).T
    labellings = k_labellings(points, ks) if labellings is None else labellings
    sigma2 = noise_variance(Y, rank)
    memo = {}  # cluster terms, shared by all K
    return {int(k): float(np.min(_capped_costs(Y, np.atleast_2d(np.asarray(labs)), sigma2, memo,
                                               **cost)))
            for k, labs in large_clusters(labellings, min_fraction).items()}


def choose_k_capped(costs, planar, n_points, lam=CAPPED_LAMBDA, mu=CAPPED_MU, *, k_min=2):
    """The K >= ``k_min`` minimising ``log g_K + mu log q_K + lam K log(P) / P``.

    ``g_K`` is the robust cost of :func:`k_capped_costs` (computed with ``cap=CAPPED_CAP``,
    ``dim_cost=CAPPED_DIM_COST`` for the default ``lam`` and ``mu``), ``q_K`` the planar
    residual of :func:`k_residuals`. The defaults are the ratios of the weights of a conditional
    logit over K, ``p(K) ~ exp(-(w_g log g_K + w_q log q_K + w_pen K log(P) / P))``, fitted on
    Hopkins155 (``lam = w_pen / w_g``, ``mu = w_q / w_g``; ``benchmarks/motion/motion_k.py``).
    Measured in the noise level, ``g_K`` stops falling once every motion has its subspace; the
    dimension cost lets a translating object (2-D) count as a simpler motion than a rotating
    one, which a fixed 3-D residual cannot.

    Parameters
    ----------
    costs, planar : dict of int to float
        ``g_K`` and ``q_K``; ``planar`` must hold every K of ``costs``.
    n_points : int
    lam, mu : float

    Returns
    -------
    k : int

    Raises
    ------
    ValueError
        No K >= ``k_min``, ``n_points < 2``, or ``planar`` lacks a K of ``costs``.
    """
    return choose_k_penalised(costs, n_points, lam, planar=planar,
                              mu=mu, k_min=k_min)
