"""Atomic file writes: write to a temporary file beside the target, then rename over it.

A crash or an exception while writing never leaves a half-written target behind, and an existing
target is only replaced once the new content is complete.
"""

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text"]


@contextlib.contextmanager
def atomic_path(path, suffix=None):
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    Parameters
    ----------
    path : str or Path
        The final destination. Its folder is created if missing.
    suffix : str, optional
        Suffix of the temporary file (some writers, e.g. OpenCV, choose the format from it).
        Defaults to the suffix of ``path``.

    Yields
    ------
    tmp : Path
        Where the caller writes. Removed if the block raises.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=path.suffix if suffix is None else suffix, dir=path.parent
    )
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        # mkstemp creates 0600 files; give the result the mode a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_bytes(path, data):
    """Write ``data`` (bytes) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path, text, encoding="utf-8"):
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)
