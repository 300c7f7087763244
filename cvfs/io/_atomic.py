"""Atomic writes: of one file (:func:`atomic_path`) and of a folder of outputs (:func:`atomic_dir`).

A file is written to a temporary file beside the target and renamed over it. A set of outputs
(the files one command writes) is written into a temporary folder beside the output folder and
swapped in as a whole, so the output folder always holds one complete set: the previous one or
the new one (the scheme is in :func:`atomic_dir`). A crash, an exception or an interrupt while
writing never leaves a half-written target behind; temporary files and folders are removed on
exceptions, on Ctrl-C (``KeyboardInterrupt``) and, inside :func:`signals_raise`, on SIGTERM and
SIGHUP. What a SIGKILL leaves behind is removed by the next :func:`atomic_dir` on the same folder.
"""

import contextlib
import ctypes
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

__all__ = ["OUTPUT_MARKER", "Interrupted", "atomic_dir", "atomic_path", "atomic_write_bytes",
           "atomic_write_text", "check_output_dir", "signals_raise"]

#: File every output set written by :func:`atomic_dir` holds (JSON: command and file list); a
#: folder without it is never replaced.
OUTPUT_MARKER = ".cvfs-output"

_RENAME_EXCHANGE = 2  # linux/fs.h
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


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


class Interrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt, not an error
    """Raised inside :func:`signals_raise` when the process receives SIGTERM or SIGHUP.

    Attributes
    ----------
    signum : int
    """

    def __init__(self, signum):
        super().__init__(f"interrupted by signal {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def signals_raise():
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` (SIGINT already raises
    ``KeyboardInterrupt``), so the atomic writers' cleanup runs; the handlers are restored after.

    Only a command-line ``main`` uses this (it changes process-wide signal handlers); off the main
    thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Interrupted(signum)

    previous = {}
    for sig in _SIGNALS:
        if sig != signal.SIGINT:
            previous[sig] = signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(out, kind):
    """``(path, pid)`` of the temporary (kind "tmp") or backup ("old") folders of ``out``."""
    found = []
    for p in out.parent.glob(f".{out.name}.{kind}-*"):
        pid = p.name[len(f".{out.name}.{kind}-"):].split("-", 1)[0]
        if p.is_dir() and pid.isdigit():
            found.append((p, int(pid)))
    return found


def _recover(out):
    """Finish what an earlier, killed :func:`atomic_dir` on ``out`` left.

    A missing ``out`` beside a backup folder means the process died between moving the previous
    set aside and moving the new one in: the previous set is moved back. Temporary and backup
    folders of processes no longer running are then removed.
    """
    if not out.exists():
        olds = [p for p, pid in _leftovers(out, "old") if not _pid_alive(pid)]
        olds = [p for p in olds if (p / OUTPUT_MARKER).is_file()]
        if olds:
            os.rename(max(olds, key=lambda p: p.stat().st_mtime), out)
    for kind in ("tmp", "old"):
        for p, pid in _leftovers(out, kind):
            if not _pid_alive(pid):
                shutil.rmtree(p, ignore_errors=True)


def check_output_dir(out):
    """Check that ``out`` may receive an output set: absent, empty, or a set cvfs wrote.

    Parameters
    ----------
    out : str or Path

    Raises
    ------
    FileExistsError
        If ``out`` is a file, or a non-empty folder without :data:`OUTPUT_MARKER` (a folder cvfs
        did not write is never replaced).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and not (out / OUTPUT_MARKER).is_file() and any(out.iterdir()):
        raise FileExistsError(
            f"--out {out}: the folder exists, is not empty and holds no {OUTPUT_MARKER} (cvfs did "
            "not write it, and replaces only its own output folders); choose a new folder or "
            "empty this one")


def _exchange(a, b):
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(tmp, out):
    """Make the complete set ``tmp`` the folder ``out``; returns a folder to delete or None."""
    if not out.exists():
        os.rename(tmp, out)
        return None
    if _exchange(tmp, out):
        return tmp  # now holds the previous set
    backup = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
    os.rmdir(backup)
    blocked = hasattr(signal, "pthread_sigmask") and \
        threading.current_thread() is threading.main_thread()
    if blocked:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        os.rename(out, backup)
        os.rename(tmp, out)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return backup


@contextlib.contextmanager
def atomic_dir(out, *, command=""):
    """Yield a temporary folder beside ``out``; on success it replaces ``out`` as a whole.

    Scheme: the files are written into ``.<name>.tmp-<pid>-<random>`` beside ``out``; then
    :data:`OUTPUT_MARKER` is written into it (the set is complete) and it replaces ``out``:

    1. ``out`` absent: one ``rename(tmp, out)``.
    2. ``out`` present, on Linux: one ``renameat2(tmp, out, RENAME_EXCHANGE)`` swaps the two
       folders; the previous set (now at the temporary name) is deleted.
    3. ``out`` present, elsewhere: ``rename(out, .<name>.old-<pid>-<random>)``, then
       ``rename(tmp, out)`` (SIGINT/SIGTERM/SIGHUP blocked between the two), then the backup is
       deleted. A process killed between the two renames leaves ``out`` missing and the
       previous set in the backup; the next ``atomic_dir`` on ``out`` moves it back.

    Each rename is atomic, so at every instant ``out`` holds the previous complete set or the new
    complete set (case 3: or, after a SIGKILL between its two renames, nothing until the next
    run restores the previous set). On an exception or Ctrl-C the temporary folder is removed and
    ``out`` is untouched; a temporary or backup folder left by a killed process is removed by the
    next ``atomic_dir`` on ``out``.

    Parameters
    ----------
    out : str or Path
        The output folder. Its parent is created if missing.
    command : str, optional
        Recorded in :data:`OUTPUT_MARKER`.

    Yields
    ------
    tmp : Path
        Where the caller writes the set.

    Raises
    ------
    FileExistsError
        As :func:`check_output_dir`.
    """
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    _recover(out)
    check_output_dir(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp creates 0700 folders; give a plain mkdir's mode
    old = None
    try:
        yield tmp
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        (tmp / OUTPUT_MARKER).write_text(json.dumps({"command": command, "files": files},
                                                    indent=1) + "\n")
        old = _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
