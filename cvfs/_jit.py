"""numba's ``njit`` for cvfs kernels, with a cache that follows every cvfs source file.

numba revalidates a cached kernel against its own source file only. cvfs kernels call kernels of
other modules (the loss rows from the FSA passes, the HOG blocks from the scan), so an edited
callee would keep running stale compiled code. The locators below add a digest of all cvfs
sources to the stamp numba stores beside each cached kernel: any change to any cvfs file makes
every cvfs entry stale and it is recompiled in place (the cost of one first run).

The locators answer only for files inside the cvfs package and only when the user has not set
``NUMBA_CACHE_DIR`` or ``NUMBA_CACHE_LOCATOR_CLASSES``; other libraries' kernels and the process
environment are left alone. Importing this module imports numba, so only kernel modules do.
"""

import functools
import hashlib
from pathlib import Path

from numba import njit
from numba.core import caching, config

__all__ = ["njit", "source_digest"]

_PACKAGE = Path(__file__).resolve().parent

# numba >= 0.61 dropped the leading underscore of these names
_CacheImpl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
_InTree = getattr(caching, "InTreeCacheLocator", None) or caching._InTreeCacheLocator
_UserWide = getattr(caching, "UserWideCacheLocator", None) or caching._UserWideCacheLocator


def source_digest(root=_PACKAGE):
    """sha256 (16 hex digits) of every ``*.py`` file under ``root``, relative names included.

    Parameters
    ----------
    root : str or Path, default the cvfs package folder

    Returns
    -------
    digest : str
    """
    root = Path(root)
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _package_digest():
    return source_digest(_PACKAGE)


class _PackageStamp:
    """Mixin: only for cvfs's own files; the stamp is (file hash, package digest)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            inside = Path(py_file).resolve().is_relative_to(_PACKAGE)
        except (OSError, ValueError):
            inside = False
        if not inside or config.CACHE_DIR:  # a user-chosen cache directory wins
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return (super().get_source_stamp(), _package_digest())


class _InTreeLocator(_PackageStamp, _InTree):
    """``__pycache__`` beside the module (a checkout or a writable install)."""


class _UserWideLocator(_PackageStamp, _UserWide):
    """The user's numba cache folder, where the package folder is read-only."""


def _register():
    classes = _CacheImpl._locator_classes
    for cls in (_UserWideLocator, _InTreeLocator):
        if not any(c.__name__ == cls.__name__ and c.__module__ == __name__ for c in classes):
            classes.insert(0, cls)


_register()
