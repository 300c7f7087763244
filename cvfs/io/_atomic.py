"""Atomic writes and the output policy: one file (:func:`atomic_path`), a set of files in an
output folder (:func:`atomic_dir`), and the checks made before any computation
(:func:`check_output_dir`, :func:`check_output_file`).

A file is written to a temporary file beside the target and renamed over it, so it is never
seen half-written. An output folder holds a manifest (:data:`OUTPUT_MARKER`) of the files cvfs
wrote there; a run replaces only those, never deletes or overwrites anything else in the folder
(the user's own files stay), and refuses a folder that holds its own input. Temporary files and
folders are removed on exceptions, on Ctrl-C (``KeyboardInterrupt``) and, inside
:func:`signals_raise`, on SIGTERM and SIGHUP; what a SIGKILL leaves behind is removed by the
next :func:`atomic_dir` on the same folder.
"""

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

__all__ = ["OUTPUT_MARKER", "Interrupted", "atomic_dir", "atomic_path", "atomic_write_bytes",
           "atomic_write_text", "check_output_dir", "check_output_file", "output_files",
           "raise_pending", "signals_raise"]

#: The manifest of an output folder (JSON: the command and the files cvfs wrote there): the
#: only files a later run may replace or remove.
OUTPUT_MARKER = ".cvfs-output"

_TMP_PREFIX = ".cvfs-tmp-"
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


#: signals received inside :func:`signals_raise`, newest last (see :func:`raise_pending`)
_PENDING = []


@contextlib.contextmanager
def signals_raise():
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` and SIGINT (unless the
    process ignores it, as a background job does) ``KeyboardInterrupt``, so the atomic writers'
    cleanup runs; the handlers are restored after. Each signal is also recorded for
    :func:`raise_pending`.

    Only a command-line ``main`` uses this (it changes process-wide signal handlers); off the main
    thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        _PENDING.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)

    previous = {}
    for sig in _SIGNALS:
        if sig != signal.SIGINT or signal.getsignal(sig) is signal.default_int_handler:
            previous[sig] = signal.signal(sig, _raise)
    _PENDING.clear()
    try:
        yield
    finally:
        _PENDING.clear()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_pending():
    """Raise the interruption of a signal :func:`signals_raise` received whose exception was
    swallowed: raised inside a finaliser or a callback from C, it only prints "Exception
    ignored". Loops over frames call this once per frame, so such a signal still stops the run
    at the next frame."""
    if _PENDING:
        signum = _PENDING[-1]
        raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_writable(path, label, shown=None):
    """Raise if ``path`` (a file to create or replace) cannot be written: an ancestor is a
    file, or the nearest existing folder is not writable. Errors name ``shown`` (default
    ``path``), the path the user gave."""
    shown = path if shown is None else shown
    path = Path(os.path.abspath(path))
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise FileExistsError(f"{label} {shown}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise PermissionError(f"{label} {shown}: the folder {parent} is not writable")
            return


def check_output_file(path, *, replace=None, what="file", label="--out"):
    """Check, before computing, that ``path`` may be written: its folder can be created and
    written, and an existing file there is one ``replace`` accepts.

    Parameters
    ----------
    path : str or Path
    replace : callable, optional
        ``replace(path) -> bool`` for an existing file: True if it may be overwritten (e.g. it
        is a cvfs model file). None: any existing file may be.
    what : str
        What the file is, for the error message ("model file", "feature cache").
    label : str
        The option naming ``path`` in the error message.

    Raises
    ------
    FileExistsError
        If ``path`` is a folder, an ancestor is a file, or an existing file is not one
        ``replace`` accepts (cvfs never overwrites a file it did not write).
    PermissionError
        If the folder is not writable.
    """
    path = Path(path)
    if path.is_dir():
        raise FileExistsError(f"{label} {path}: a folder, expected a {what} path")
    _check_writable(path, label)
    if path.exists():
        if not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK):
            raise PermissionError(f"{label} {path}: not writable")
        if replace is not None and not replace(path):
            raise FileExistsError(
                f"{label} {path}: exists and is not a cvfs {what} (cvfs never overwrites a "
                "file it did not write); choose another path or move that file")


def _manifest(out):
    """The files listed in ``out``'s manifest (empty when it has none or it is unreadable)."""
    try:
        files = json.loads((out / OUTPUT_MARKER).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in files if isinstance(f, str) and _inside(out, out / f)]


def output_files(out):
    """The files cvfs wrote in the output folder ``out`` (its manifest), sorted."""
    return sorted(_manifest(Path(out)))


def _inside(folder, path):
    """Whether ``path`` (resolved) lies inside ``folder`` (resolved)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(folder))
    except ValueError:
        return False
    return True


def check_output_dir(out, inputs=()):
    """Check, before computing, that the folder ``out`` may receive outputs.

    Parameters
    ----------
    out : str or Path
    inputs : iterable of str or Path, optional
        The run's input files; an output folder holding one of them is refused.

    Raises
    ------
    FileExistsError
        If ``out`` or an ancestor is a file, or ``out`` holds one of ``inputs``.
    PermissionError
        If ``out`` (or the folder it would be created in) is not writable.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out}: exists and is not a folder")
    _check_writable(out / "x", "--out", shown=out)
    for inp in inputs:
        inp = Path(str(inp))
        if inp.exists() and out.exists() and _inside(out, inp):
            raise FileExistsError(
                f"--out {out}: the folder holds the input {inp}; write the outputs elsewhere "
                "(an output folder never holds its own input)")


def _recover(out):
    """Remove the temporary folders that killed runs left in ``out``."""
    for p in out.glob(f"{_TMP_PREFIX}*"):
        pid = p.name[len(_TMP_PREFIX):].split("-", 1)[0]
        if p.is_dir() and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _write_manifest(out, command, files):
    atomic_write_text(out / OUTPUT_MARKER,
                      json.dumps({"command": command, "files": sorted(files)}, indent=1) + "\n")


def _commit(tmp, out, command):
    """Move the files of ``tmp`` into ``out``, replacing only the files of its manifest."""
    new = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    previous = set(_manifest(out))
    clash = [f for f in new if (out / f).exists() and (f not in previous or (out / f).is_dir())]
    if clash:
        raise FileExistsError(
            f"--out {out}: would overwrite {', '.join(clash[:3])}"
            f"{' ...' if len(clash) > 3 else ''}, which cvfs did not write there (not in "
            f"{OUTPUT_MARKER}); nothing was written: move those files or choose another folder")
    # the manifest lists every file cvfs may have written before any is moved, so a run
    # killed while moving leaves no file of ours unlisted
    _write_manifest(out, command, previous | set(new))
    for f in new:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / f, out / f)
    for f in sorted(previous - set(new)):  # outputs of the previous run not written again
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            (out / f).unlink()
    _write_manifest(out, command, new)


@contextlib.contextmanager
def atomic_dir(out, *, command="", inputs=()):
    """Yield a temporary folder; on success its files are moved into the output folder ``out``.

    The files are written into ``out/.cvfs-tmp-<pid>-<random>``. On success each is renamed
    into ``out`` (one atomic rename per file: no file is ever seen half-written), the files the
    previous run wrote and this one did not are removed, and the manifest
    :data:`OUTPUT_MARKER` lists the new files. Only files of the previous manifest are
    replaced or removed: a file cvfs did not write is never touched, and a new file that would
    replace one is an error (raised before anything is moved). On an exception or Ctrl-C the
    temporary folder is removed and ``out`` is untouched (a folder created for the run is
    removed again). A run killed while moving its files leaves each file complete, old or new,
    all listed in the manifest; a temporary folder left by a killed run is removed by the next
    ``atomic_dir`` on ``out``.

    Parameters
    ----------
    out : str or Path
        The output folder; created (with its parents) if missing.
    command : str, optional
        Recorded in :data:`OUTPUT_MARKER`.
    inputs : iterable of str or Path, optional
        As :func:`check_output_dir`.

    Yields
    ------
    tmp : Path
        Where the caller writes the set.

    Raises
    ------
    FileExistsError, PermissionError
        As :func:`check_output_dir`, or if a new file would replace a file cvfs did not write.
    """
    out = Path(os.path.abspath(out))
    check_output_dir(out, inputs)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    _recover(out)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-", dir=out))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp creates 0700 folders; give a plain mkdir's mode
    try:
        yield tmp
        _commit(tmp, out, command)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty
        raise
    shutil.rmtree(tmp, ignore_errors=True)
