"""The FSA paper's synthetic problems (section 3.1), generated deterministically.

- AR(1) designs: rows x ~ N(0, Sigma) with Sigma_ij = rho^|i-j|, true features x_{10 j}
  (1-based, i.e. columns 9, 19, ... 0-based) for j = 1..k_true.
- classification: y = 1 if sum of the true features > 0 (optionally a fraction of rows get a
  random label); regression: y = sum of the true features + N(0, 1).
- equally correlated (eq. 18): x_i = alpha z_i 1 + eps_i, written in row chunks (to HDF5 or
  Zarr for data larger than memory).
"""

import numpy as np
from scipy.signal import lfilter

from cvfs.base import check_random_state

__all__ = [
    "ar1_design",
    "equicorrelated_design",
    "make_ar1_classification",
    "make_ar1_regression",
    "make_equicorrelated_classification",
    "true_features",
    "write_equicorrelated_h5",
    "write_equicorrelated_zarr",
]


def true_features(k_true, n_features):
    """0-based indices of the true features x_{10 j}, j = 1..k_true.

    Raises
    ------
    ValueError
        If ``10 * k_true > n_features``.
    """
    if k_true < 1 or 10 * k_true > n_features:
        raise ValueError(
            f"k_true={k_true} true features x_10j need n_features >= {10 * k_true}, "
            f"got {n_features}"
        )
    return np.arange(1, k_true + 1) * 10 - 1


def ar1_design(n_samples, n_features, rho=0.9, dtype=np.float64, random_state=None):
    """Rows of a stationary AR(1) process along the features: Sigma_ij = rho^|i-j|.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    """
    rng = check_random_state(random_state)
    e = rng.standard_normal((n_samples, n_features))
    c = np.sqrt(1.0 - rho * rho)
    e[:, 0] /= c  # so that x_1 = e_1 has unit variance
    return lfilter([c], [1.0, -rho], e, axis=1).astype(dtype, copy=False)


def make_ar1_classification(n_samples, n_features, k_true=10, rho=0.9, noise=0.0,
                            dtype=np.float64, random_state=None):
    """Paper section 3.1.2: y = 1 if sum of x_{10 j} > 0; ``noise`` of the rows get a random label.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), int64 in {0, 1}
    true : ndarray of shape (k_true,), indices of the true features
    """
    rng = check_random_state(random_state)
    true = true_features(k_true, n_features)
    X = ar1_design(n_samples, n_features, rho, dtype, rng)
    y = (X[:, true].sum(axis=1) > 0).astype(np.int64)
    if noise > 0:
        flip = rng.random(n_samples) < noise
        y[flip] = rng.integers(0, 2, flip.sum())
    return X, y, true


def make_ar1_regression(n_samples, n_features, k_true=30, rho=0.9, dtype=np.float64,
                        random_state=None):
    """Paper section 3.1.4: y = sum of x_{10 j} + N(0, 1).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    true : ndarray of shape (k_true,)
    """
    rng = check_random_state(random_state)
    true = true_features(k_true, n_features)
    X = ar1_design(n_samples, n_features, rho, dtype, rng)
    y = X[:, true].sum(axis=1, dtype=np.float64) + rng.standard_normal(n_samples)
    return X, y, true


def equicorrelated_design(n_samples, n_features, alpha=0.5, dtype=np.float32,
                          random_state=None):
    """Eq. (18): x_i = alpha z_i 1 + eps_i; every pair of features has correlation
    alpha^2 / (1 + alpha^2)."""
    rng = check_random_state(random_state)
    X = rng.standard_normal((n_samples, n_features), dtype=np.float32).astype(dtype, copy=False)
    X += (alpha * rng.standard_normal(n_samples)).astype(dtype)[:, None]
    return X


def make_equicorrelated_classification(n_samples, n_features, k_true=500, alpha=0.5,
                                       dtype=np.float32, random_state=None):
    """Section 3.1.3 in memory: equally correlated X, y = 1 if sum of x_{10 j} > 0."""
    rng = check_random_state(random_state)
    true = true_features(k_true, n_features)
    X = equicorrelated_design(n_samples, n_features, alpha, dtype, rng)
    y = (X[:, true].sum(axis=1, dtype=np.float64) > 0).astype(np.int64)
    return X, y, true


def write_equicorrelated_h5(path, n_samples, n_features, k_true=500, alpha=0.5,
                            chunk_rows=4096, dtype=np.float32, random_state=None):
    """Section 3.1.3 out of core: write X (dataset ``"X"``) and y (``"y"``) to an HDF5 file in
    row chunks, never holding more than ``chunk_rows`` rows in memory.

    Returns
    -------
    true : ndarray of shape (k_true,)
    """
    import h5py

    from cvfs.io import atomic_path

    rng = check_random_state(random_state)
    true = true_features(k_true, n_features)
    with atomic_path(path, suffix=".h5") as tmp, h5py.File(tmp, "w") as f:
        # HDF5 chunks of about 4 MiB: a chunk of chunk_rows full rows would be 1.6 GB at
        # M = 1e5 float32, more than a reader limited by max_memory may hold.
        row_bytes = n_features * np.dtype(dtype).itemsize
        chunk = max(1, min(chunk_rows, n_samples, (4 << 20) // row_bytes))
        dX = f.create_dataset("X", (n_samples, n_features), dtype=dtype,
                              chunks=(chunk, n_features))
        dy = f.create_dataset("y", (n_samples,), dtype=np.int64)
        for r0 in range(0, n_samples, chunk_rows):
            r1 = min(n_samples, r0 + chunk_rows)
            Xb = equicorrelated_design(r1 - r0, n_features, alpha, dtype, rng)
            dX[r0:r1] = Xb
            dy[r0:r1] = Xb[:, true].sum(axis=1, dtype=np.float64) > 0
    return true


def write_equicorrelated_zarr(path, n_samples, n_features, k_true=500, alpha=0.5,
                              chunk_rows=None, dtype=np.float32, random_state=None,
                              progress=False):
    """Section 3.1.3 out of core as a Zarr store: arrays ``"X"`` (N, M) chunked by rows and
    ``"y"`` (N,) int8, written one row chunk at a time (never more than one chunk in memory).

    Each chunk has its own random stream, spawned from ``random_state`` (the rows depend on
    ``random_state`` and ``chunk_rows``). The store is written beside ``path`` and renamed onto
    it at the end: an interrupted write leaves no partial store at ``path``.

    Parameters
    ----------
    path : str or Path
        Directory of the Zarr store (replaced if it exists).
    n_samples, n_features : int
    k_true : int, default=500
        True features x_{10 j}, j = 1..k_true.
    alpha : float, default=0.5
    chunk_rows : int, optional
        Rows per chunk; default: chunks of about 64 MiB.
    dtype : float32 or float64
    random_state : None, int or Generator
    progress : bool, default=False
        Show a progress bar over the chunks.

    Returns
    -------
    true : ndarray of shape (k_true,)
    """
    import shutil
    import tempfile
    from pathlib import Path

    import zarr
    from tqdm.auto import tqdm

    path = Path(path)
    true = true_features(k_true, n_features)
    dtype = np.dtype(dtype)
    if chunk_rows is None:
        chunk_rows = max(1, (64 << 20) // (n_features * dtype.itemsize))
    chunk_rows = int(min(chunk_rows, n_samples))
    seed = check_random_state(random_state).integers(2**63)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        root = zarr.open_group(str(tmp), mode="w")
        zX = root.create_array("X", shape=(n_samples, n_features), dtype=dtype,
                               chunks=(chunk_rows, n_features), compressors=None)
        zy = root.create_array("y", shape=(n_samples,), dtype=np.int8, chunks=(chunk_rows,),
                               compressors=None)
        starts = range(0, n_samples, chunk_rows)
        streams = np.random.SeedSequence(seed).spawn(len(starts))
        for r0, ss in zip(tqdm(starts, disable=not progress, desc="write zarr"), streams):
            r1 = min(n_samples, r0 + chunk_rows)
            Xb = equicorrelated_design(r1 - r0, n_features, alpha, dtype, np.random.default_rng(ss))
            zX[r0:r1] = Xb
            zy[r0:r1] = Xb[:, true].sum(axis=1, dtype=np.float64) > 0
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return true
