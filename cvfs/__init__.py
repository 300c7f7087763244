"""cvfs: computer vision on one shared sparse-learning core (FSA and screened SBL).

The estimators are imported lazily so that ``import cvfs`` stays cheap (numba kernels compile on
first use, not on import).
"""

import os as _os
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"

__all__ = ["FSAClassifier", "FSARegressor", "FSARanker", "SBLRegressor", "__version__"]

_ESTIMATORS = {"FSAClassifier", "FSARegressor", "FSARanker", "SBLRegressor"}


def __getattr__(name):
    if name in _ESTIMATORS:
        from cvfs import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module 'cvfs' has no attribute {name!r}")


def _source_digest(root):
    """sha256 (16 hex digits) of every ``*.py`` file under ``root``, names included."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _numba_cache_dir(root=None, stale_after=3600.0):
    """Where numba caches cvfs's compiled kernels: ``<package>/__pycache__/numba/<digest of the
    package's sources>``, or None to leave numba's default (``NUMBA_CACHE_DIR`` already set by
    the user, or the package directory not writable).

    numba's ``cache=True`` revalidates a cached function only against its own file; cvfs's
    kernels call kernels of other modules (the loss rows from the FSA passes, the HOG blocks
    from the scan), so after an update of a callee's file the callers would keep running the
    old compiled callee. One directory per source digest makes any change of any cvfs file
    start from a fresh cache (the cost: one compilation, as on a fresh install). Directories of
    other digests unused for ``stale_after`` seconds are removed (a run still using one keeps
    touching it)."""
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return None
    import shutil
    import time

    root = _Path(__file__).resolve().parent if root is None else _Path(root)
    base = root / "__pycache__" / "numba"
    target = base / _source_digest(root)
    try:
        target.mkdir(parents=True, exist_ok=True)
        if not _os.access(target, _os.W_OK):
            return None
        now = time.time()
        for d in base.iterdir():
            if d != target and d.is_dir() and now - d.stat().st_mtime > stale_after:
                shutil.rmtree(d, ignore_errors=True)
    except OSError:
        return None
    return str(target)


def _configure_numba_cache():
    target = _numba_cache_dir()
    if target is None:
        return
    _os.environ["NUMBA_CACHE_DIR"] = target
    numba = _sys.modules.get("numba")
    if numba is not None:  # already imported: its config was read; kernels decorate later
        numba.config.CACHE_DIR = target


_configure_numba_cache()
