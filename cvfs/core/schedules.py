"""Annealing schedules: how many feature groups FSA keeps after each iteration."""

import numpy as np

__all__ = ["annealing_schedule", "check_schedule"]


def annealing_schedule(n_features, k, n_iter=500, mu=300.0):
    """The inverse schedule of the FSA paper, eq. (3).

    M_e = k + (M - k) max(0, (N_iter - 2e) / (2 e mu + N_iter)),  e = 1..N_iter,
    rounded down to an integer.

    Parameters
    ----------
    n_features : int
        M, the number of feature groups at the start.
    k : int
        The number kept at the end, 1 <= k <= M.
    n_iter : int, default=500
        N_iter, the number of iterations.
    mu : float, default=300
        Annealing speed (larger drops features faster).

    Returns
    -------
    schedule : ndarray of shape (n_iter,), int64
        M_1, ..., M_{N_iter}: non-increasing, M_e = k for e >= N_iter / 2.

    References
    ----------
    Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big
    Data Learning", IEEE TPAMI 2017, eq. (3).
    """
    if not 1 <= k <= n_features:
        raise ValueError(f"k must be in [1, n_features={n_features}], got {k}")
    if n_iter < 1:
        raise ValueError(f"n_iter must be >= 1, got {n_iter}")
    if not mu >= 0:
        raise ValueError(f"mu must be >= 0, got {mu}")
    e = np.arange(1, n_iter + 1, dtype=np.float64)
    frac = np.maximum(0.0, (n_iter - 2 * e) / (2 * e * mu + n_iter))
    return (k + np.floor((n_features - k) * frac + 1e-9)).astype(np.int64)


def check_schedule(schedule, n_features, k):
    """Validate a custom schedule: integers, non-increasing, within [k, M], ending at k.

    Returns
    -------
    schedule : ndarray of shape (n_iter,), int64

    Raises
    ------
    ValueError
        Naming the first violated condition.
    """
    s = np.asarray(schedule)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"schedule must be a non-empty 1-D sequence, got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.integer):
        if not np.all(np.isfinite(s)) or np.any(s != np.round(s)):
            raise ValueError("schedule must hold integers")
    s = s.astype(np.int64)
    if np.any(np.diff(s) > 0):
        raise ValueError("schedule must be non-increasing")
    if s[0] > n_features or s.min() < k:
        raise ValueError(
            f"schedule values must lie in [k={k}, n_features={n_features}], "
            f"got [{s.min()}, {s.max()}]"
        )
    if s[-1] != k:
        raise ValueError(f"schedule must end at k={k}, ends at {s[-1]}")
    return s
