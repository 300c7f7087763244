"""Trajectories with missing entries: validation of the visibility mask and low-rank completion.

Under an affine camera the trajectories of one rigid motion span an affine subspace of dimension
3 (rank 4 with the mean), so the 2F x P trajectory matrix of K motions has rank at most 4K.
:func:`complete_trajectories` fills the unobserved entries with the rank-r matrix that best fits
the observed ones (alternating ridge-regularised least squares, ALS), and
:func:`cvfs.motion.segment` then ranks the candidates of the completed trajectories. Observed
entries are kept as they are; only missing ones are replaced by the low-rank fit.

References
----------
R. Vidal, R. Tron, R. Hartley, "Multiframe motion segmentation with missing data using
PowerFactorization and GPCA", IJCV 2008 (rank-4K factorisation of incomplete trajectories).
T. Hastie, R. Mazumder, J. Lee, R. Zadeh, "Matrix completion and low-rank SVD via fast alternating
least squares", JMLR 2015 (ALS with ridge penalty).
"""

import logging

import numpy as np
from threadpoolctl import threadpool_limits

from cvfs.base import check_random_state
from cvfs.motion.candidates import trajectory_array

__all__ = ["check_visible", "complete_trajectories", "trajectory_matrix"]

log = logging.getLogger(__name__)

MIN_OBSERVED = 2


def check_visible(points, visible, n_motions=None, *, name="points"):
    """Validate incomplete trajectories and their visibility mask at a public boundary.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Coordinates; entries where ``visible`` is False are ignored (may be NaN).
    visible : array_like of shape (P, F), bool
        True where the track is observed. 0/1 integer masks are accepted.
    n_motions : int, optional
        K, checked against the number of trajectories (4 per motion) when given.

    Returns
    -------
    points : ndarray of shape (P, F, 2), float64
        With NaN at the unobserved entries.
    visible : ndarray of shape (P, F), bool

    Raises
    ------
    ValueError
        ``points`` not (P, F, 2) or with fewer than 2 frames, ``visible`` not (P, F) or not
        boolean/0-1, a track observed in fewer than 2 frames (all-NaN tracks included), NaN/inf
        at an observed entry, ``n_motions < 2`` or more than P / 4.
    TypeError
        If ``n_motions`` is not an int.
    """
    arr = trajectory_array(points, name)
    vis = np.asarray(visible)
    if vis.shape != arr.shape[:2]:
        raise ValueError(f"visible must have shape (P, F) = {arr.shape[:2]} (one flag per "
                         f"trajectory and frame); got shape {vis.shape}")
    if vis.dtype != bool:
        if not (np.issubdtype(vis.dtype, np.integer) or np.issubdtype(vis.dtype, np.floating)) \
                or not np.all(np.isin(vis, (0, 1))):
            raise ValueError(f"visible must be a boolean mask (or 0/1); got dtype {vis.dtype}"
                             + (" with values other than 0 and 1"
                                if np.issubdtype(vis.dtype, np.number) else ""))
        vis = vis.astype(bool)
    counts = vis.sum(axis=1)
    few = np.flatnonzero(counts < MIN_OBSERVED)
    if few.size:
        raise ValueError(f"visible: {few.size} trajectories are observed in fewer than "
                         f"{MIN_OBSERVED} frames (indices {few[:10].tolist()}"
                         f"{' ...' if few.size > 10 else ''}): drop them")
    bad = ~np.isfinite(arr[vis])
    if bad.any():
        raise ValueError(f"{name} holds NaN or infinite values at {int(bad.any(axis=1).sum())} "
                         "observed entries (visible=True): mark them not visible")
    arr[~vis] = np.nan
    if n_motions is not None:
        if isinstance(n_motions, bool) or not isinstance(n_motions, (int, np.integer)):
            raise TypeError(f"n_motions must be an int; got {type(n_motions).__name__}")
        if int(n_motions) < 2:
            raise ValueError(f"n_motions must be >= 2; got {n_motions}")
        if 4 * int(n_motions) > arr.shape[0]:
            raise ValueError(f"n_motions={n_motions} needs at least {4 * int(n_motions)} "
                             f"trajectories (4 per motion); got P={arr.shape[0]} points")
    return arr, vis


def trajectory_matrix(points):
    """Stack trajectories as columns: row 2f is x at frame f, row 2f+1 is y.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)

    Returns
    -------
    W : ndarray of shape (2F, P)
    """
    return np.ascontiguousarray(points.reshape(points.shape[0], -1).T)


def _ridge_solve(A, mask, B, lam):
    """For every column j: argmin_x |mask_j * (A x - B_j)|^2 + lam |x|^2 (batched normal eqs)."""
    n, r = A.shape
    outer = (A[:, :, None] * A[:, None, :]).reshape(n, r * r)
    G = (mask.T @ outer).reshape(-1, r, r)
    G[:, np.arange(r), np.arange(r)] += lam
    rhs = (mask * B).T @ A
    return np.linalg.solve(G, rhs[..., None])[..., 0]  # (n_cols, r)


def complete_trajectories(points, visible, *, rank=None, n_motions=None, ridge=1e-3,
                          max_iter=500, tol=1e-7, random_state=0, return_info=False):
    """Fill unobserved trajectory entries with a rank-``rank`` fit of the observed ones.

    ALS on the 2F x P trajectory matrix ``W ~ M S`` (M: 2F x r, S: r x P): each half-step solves
    ridge least squares over the observed entries only,
    ``min sum_obs (W - M S)^2 + ridge * (|M|^2 + |S|^2)`` (coordinates centred and scaled to unit
    RMS first, so ``ridge`` is scale-free). Started from the rank-r SVD of the mean-filled matrix.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
    visible : array_like of shape (P, F), bool
    rank : int, optional
        Default ``4 * n_motions`` (affine camera), or 8 without ``n_motions``; clipped to
        ``min(2F, P) - 1``.
    n_motions : int, optional
        K, only to set the default rank.
    ridge : float, default 1e-3
        Ridge penalty relative to unit-RMS coordinates; keeps tracks seen in few frames
        (fewer equations than ``rank``) determined.
    max_iter : int, default 500
    tol : float, default 1e-7
        Stop when the relative change of the fit on the missing entries falls below it.
    random_state : None, int or Generator, default 0
        Breaks ties in the starting point (a tiny jitter of the initial factors).
    return_info : bool, default False
        Also return a dict with ``rank``, ``n_iter`` and ``rmse_observed`` (pixels).

    Returns
    -------
    completed : ndarray of shape (P, F, 2)
        ``points`` at the observed entries, the low-rank fit elsewhere.
    info : dict
        Only with ``return_info``.

    Raises
    ------
    ValueError
        As :func:`check_visible`, or ``rank < 1``.
    """
    pts, vis = check_visible(points, visible)
    n_pts, n_frames = vis.shape
    if rank is None:
        rank = 4 * int(n_motions) if n_motions is not None else 8
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ValueError(f"rank must be a positive int; got {rank!r}")
    rank = int(min(rank, min(2 * n_frames, n_pts) - 1))
    rng = check_random_state(random_state)
    if vis.all():
        out = (pts, {"rank": rank, "n_iter": 0, "rmse_observed": 0.0})
        return out if return_info else out[0]
    W = trajectory_matrix(np.where(vis[..., None], pts, 0.0))
    mask = np.repeat(vis.T, 2, axis=0).astype(np.float64)  # (2F, P)
    # centre each row on its observed mean and scale to unit RMS
    row_mean = (W * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
    row_mean[mask.sum(axis=1) == 0] = 0.0
    Z = (W - row_mean[:, None]) * mask
    scale = float(np.sqrt((Z ** 2).sum() / mask.sum())) or 1.0
    Z /= scale
    with threadpool_limits(limits=1, user_api="blas"):
        U, s, vt = np.linalg.svd(Z, full_matrices=False)
        root = np.sqrt(s[:rank])
        M = U[:, :rank] * root + 1e-6 * rng.standard_normal((Z.shape[0], rank))
        S = (vt[:rank].T * root).T
        miss = mask == 0
        prev = None
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            S = _ridge_solve(M, mask, Z, ridge).T
            M = _ridge_solve(S.T, mask.T, Z.T, ridge)
            fit = M @ S
            cur = fit[miss]
            if prev is not None:
                change = np.linalg.norm(cur - prev) / max(np.linalg.norm(cur), 1e-12)
                if change < tol:
                    break
            prev = cur
    rmse = float(np.sqrt((((fit - Z) * mask) ** 2).sum() / mask.sum())) * scale
    full = fit * scale + row_mean[:, None]
    completed = full.T.reshape(n_pts, n_frames, 2)
    completed = np.where(vis[..., None], pts, completed)
    log.debug("completion: rank %d, %d iterations, observed RMSE %.3g", rank, n_iter, rmse)
    info = {"rank": rank, "n_iter": n_iter, "rmse_observed": rmse}
    return (completed, info) if return_info else completed
