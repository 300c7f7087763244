"""Loaders of feature-selection benchmarks in their original public formats.

DEXTER (NIPS 2003 challenge, sparse ``index:value`` lines), colon cancer (Alon et al. 1999,
``I2000.txt`` + ``tissue.txt``) and sonar (UCI ``sonar.all-data``). Files are looked up in
``<data home>/uci/<name>/``. Labels are int64 in {-1, +1}.
"""

import numpy as np
import scipy.sparse as sp

from cvfs.datasets.registry import require_path

__all__ = ["load_colon", "load_dexter", "load_sonar"]


def load_dexter(root=None, n_features=20000):
    """DEXTER training split.

    Parameters
    ----------
    root : path-like, optional
        Folder with ``dexter_train.data`` and ``dexter_train.labels``; default the data home's
        ``uci/dexter``.
    n_features : int, default=20000

    Returns
    -------
    X : csr_matrix of shape (300, n_features), float64
    y : ndarray of shape (300,), int64 in {-1, +1}

    Raises
    ------
    FileNotFoundError
        If the folder is missing. ValueError if a feature index exceeds ``n_features``.
    """
    from pathlib import Path

    root = Path(root) if root is not None else require_path("uci", "dexter")
    indptr, indices, data = [0], [], []
    with open(root / "dexter_train.data") as f:
        for line in f:
            pairs = [p.split(":") for p in line.split()]
            indices += [int(i) - 1 for i, _ in pairs]
            data += [float(v) for _, v in pairs]
            indptr.append(len(indices))
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and indices.max() >= n_features:
        raise ValueError(f"dexter feature index {indices.max() + 1} exceeds n_features="
                         f"{n_features}")
    X = sp.csr_matrix((np.asarray(data), indices, np.asarray(indptr)),
                      shape=(len(indptr) - 1, n_features))
    y = np.loadtxt(root / "dexter_train.labels", dtype=np.int64)
    return X, y


def load_colon(root=None):
    """Colon cancer microarray: 62 tissues x 2000 genes, y = +1 for tumour, -1 for normal.

    Returns
    -------
    X : ndarray of shape (62, 2000), float64
    y : ndarray of shape (62,), int64
    """
    from pathlib import Path

    root = Path(root) if root is not None else require_path("uci", "colon")
    X = np.loadtxt(root / "I2000.txt").T
    tissue = np.loadtxt(root / "tissue.txt", dtype=np.int64)
    return np.ascontiguousarray(X), np.where(tissue < 0, 1, -1).astype(np.int64)


def load_sonar(root=None):
    """Sonar mines vs rocks: 208 x 60, y = +1 for mine (``M``), -1 for rock (``R``).

    Returns
    -------
    X : ndarray of shape (208, 60), float64
    y : ndarray of shape (208,), int64
    """
    from pathlib import Path

    root = Path(root) if root is not None else require_path("uci", "sonar")
    raw = np.loadtxt(root / "sonar.all-data", delimiter=",", dtype=str)
    return raw[:, :-1].astype(np.float64), np.where(raw[:, -1] == "M", 1, -1).astype(np.int64)
