"""The tasks of the Dask layout (:mod:`cvfs.core.layouts.dask`) that run on the workers.

Each pass runs one task per row chunk: the numba kernel of the out-of-core layout on its chunk
with the O(M) arguments, returning O(m G) partial sums that :func:`_add` / :func:`_merge_stats`
add in a tree. A chunk is read from the source (Dask's getter tasks, or the Zarr array's row range
read straight into a per-thread reused buffer, :func:`_on_source`), from its kept columns
persisted beside its ``y`` (:func:`_on_bundle`), or from its spill file on the worker's local
disk (:func:`_on_disk`).
"""

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid

import numpy as np

from cvfs._jit import njit
from cvfs.core import _compact_kernels as CK
from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core.layouts.dense import _raise_not_finite
from cvfs.core.responses import _ColumnStats


def _writable(a):
    """``a`` as a C-contiguous writable array (data received by a worker may be read-only; the
    numba kernels are compiled for writable arrays)."""
    return np.require(a, requirements=["C", "W"])


def _chunk_stats(x, yp, args):
    """Column statistics of one row chunk: count, mean, m2, min, max, and with the loss of the
    first iteration the raw sums sum_i d_i x_ij; plus the chunk's power-iteration rows."""
    r0, c, minmax, first, rows = args
    x = _writable(x)
    n, M = x.shape
    st = _ColumnStats(M, minmax=minmax)
    d = gacc = None
    if first is not None:
        loss, intercept = first
        d = np.empty(n)
        K.loss_rows(loss, np.full(n, intercept), _writable(yp[0]), d)
        gacc = np.zeros(M)
    if not st.update(x, d, gacc):
        try:
            _raise_not_finite(x, r0, st)
        except ValueError as err:
            raise ValueError(f"{err} (row chunk {c})") from None
    local = rows[(rows >= r0) & (rows < r0 + n)] - r0
    graw = None if d is None else gacc + st.shift * d.sum()
    return {"n": n, "mean": st.mean, "m2": st.m2, "lo": st.lo, "hi": st.hi, "graw": graw,
            "rows": [x[local].copy()]}


def _merge_stats(*parts):
    """Combine chunk statistics in row order (pairwise mean/m2 update of Chan et al.)."""
    out = dict(parts[0])
    out["rows"] = list(out["rows"])
    for p in parts[1:]:
        na, nb = out["n"], p["n"]
        n = na + nb
        delta = p["mean"] - out["mean"]
        out["mean"] = out["mean"] + delta * (nb / n)
        out["m2"] = out["m2"] + p["m2"] + delta * delta * (na * nb / n)
        out["n"] = n
        out["lo"] = np.minimum(out["lo"], p["lo"])
        out["hi"] = np.maximum(out["hi"], p["hi"])
        if out["graw"] is not None:
            out["graw"] = out["graw"] + p["graw"]
        out["rows"] += p["rows"]
    return out


def _chunk_basis(x, yp, args):
    """Basis column sums of one chunk (piecewise-linear basis means) and, with the loss of the
    first iteration, the weighted sums sum_i d_i u_i."""
    fp, bins, first = args
    x = _writable(x)
    n = x.shape[0]
    fp = _writable(fp)
    sums = np.zeros((fp.shape[0], bins + 1))
    d, graw = np.zeros(0), np.zeros((0, bins + 1))
    if first is not None:
        loss, intercept = first
        d = np.empty(n)
        K.loss_rows(loss, np.full(n, intercept), _writable(yp[0]), d)
        graw = np.zeros_like(sums)
    PL.basis_sums(x, fp, bins, sums, d, graw)
    return sums, graw if first is not None else None


def _chunk_row_pass(x, yp, args):
    """:func:`cvfs.core._kernels.row_pass` on one chunk: (g, h, [loss sum, sum d, sum t])."""
    cols, fp, bins, beta, v, intercept, loss, track = args
    cols, fp, beta, v = (_writable(a) for a in (cols, fp, beta, v))
    g = np.zeros(beta.shape)
    h = np.zeros(beta.shape)
    a, b, c = K.row_pass(_writable(x), _writable(yp[0]), loss,
                         (cols, fp, bins, beta, v, intercept), (g, h), track)
    return g, h, np.array([a, b, c])


def _chunk_rank(x, yp, args):
    """Scores, pair losses and gradient sums of one chunk whose pairs all lie in it:
    (g, h, [loss sum, sum r, sum w])."""
    cols, fp, bins, beta, v, intercept, loss, track = args
    cols, fp, beta, v = (_writable(a) for a in (cols, fp, beta, v))
    x = _writable(x)
    pi, pj, pr, pw = (_writable(a) for a in yp[1])
    n = x.shape[0]
    z, t, r, w = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    K.score_pass(x, cols, fp, bins, beta, v, intercept, z, t, track)
    lsum = K.rank_pairs(z, t, pi, pj, pr, pw, r, w, track)
    g = np.zeros(beta.shape)
    h = np.zeros(beta.shape)
    a, b = K.grad_pass(x, cols, fp, bins, r, w, g, h, track)
    return g, h, np.array([lsum, a, b])


def _add(*parts):
    """Sum of tuples of arrays (or of arrays / None), element by element."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(_add(*items) for items in zip(*parts))
    if first is None:
        return None
    out = first.copy()
    for p in parts[1:]:
        out += p
    return out


def _chunk_take(x, yp, args):
    """The kept columns of one chunk: row-major, or (``bins``) the feature-major bin
    coordinates the in-memory loop works on."""
    cols, fp, bins = args
    x = _writable(x)
    cols = _writable(cols)
    if bins > 0:
        return PL.compact_bins(x, cols, _writable(fp), bins)
    out = np.empty((x.shape[0], cols.size), dtype=x.dtype)
    CK.take_columns(x, cols, out)
    return out


def _bundle(x, yp, args):
    """A persisted chunk: its kept columns beside its ``y`` and pairs (kept on one worker)."""
    cols = _writable(args)
    x = _writable(x)
    out = np.empty((x.shape[0], cols.size), dtype=x.dtype)
    CK.take_columns(x, cols, out)
    return out, yp


def _on_bundle(func, bundle, args):
    return func(bundle[0], bundle[1], args)


def _scratch_dir(tag, worker=None):
    """The directory of the fit ``tag``'s spilled chunks on this worker: under the
    ``distributed`` worker's local directory, else under the system's temporary directory."""
    if worker is None and "distributed" in sys.modules:
        from distributed import get_worker

        try:
            worker = get_worker()
        except ValueError:  # not in a distributed task
            worker = None
    base = worker.local_directory if worker is not None else tempfile.gettempdir()
    return os.path.join(base, f"cvfs-fsa-{tag}")


def _remove_scratch(tag, dask_worker=None):
    """Remove the fit ``tag``'s scratch directory on this worker (``client.run`` passes the
    worker as ``dask_worker``)."""
    folder = _scratch_dir(tag, dask_worker)
    with _spill_lock:
        for key in [k for k in _spill_files if os.path.dirname(k) == folder]:
            del _spill_files[key]
    shutil.rmtree(folder, ignore_errors=True)


class _Spilled:
    """A spilled chunk on its worker: ``mem`` (k, n) feature-major rows in memory holding the
    kept positions ``mem_pos`` (-1: free row), and the raw feature-major file ``path`` whose
    rows hold the positions ``held`` (sorted)."""

    def __init__(self, mem, path, held):
        self.mem, self.path, self.held = mem, path, held
        self.mem_pos = np.arange(mem.shape[0], dtype=np.int64)


_spill_files = {}  # on each worker: spill file key -> _Spilled
_spill_lock = threading.Lock()


def _spill(x, yp, args):
    """A chunk spilled: its kept columns ``mem`` (positions 0..k-1) held feature-major, shape
    (k, n), in the worker's memory, and the columns ``disk`` (positions k..) written
    feature-major to a raw file on its local disk (so that a pass reads only the columns still
    kept, one contiguous range per run of them). The task's result is ((file key, host), y
    and pairs); the chunk stays on this worker."""
    mem, disk, tag = args
    x = _writable(x)
    kept = CK.compact_features(x, _writable(mem), False)
    folder = _scratch_dir(tag)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, uuid.uuid4().hex + ".f")
    out = _thread_buffer("spill", (disk.size, x.shape[0]), x.dtype)
    CK.take_columns(x, _writable(disk), out.T)  # (written in place: no fresh pages per chunk)
    out.tofile(path)
    with _spill_lock:
        _spill_files[path] = _Spilled(kept, path, mem.size + np.arange(disk.size))
    return (path, socket.gethostname()), yp


_buffers = threading.local()  # per thread: reused buffers of the Zarr and spill-file reads


def _page_aligned(size, dtype):
    """An uninitialised 1-D array of ``size`` items starting on a 4 KiB page boundary: the
    kernel copies file pages into page-aligned memory 3-5x faster (system time of a cold
    ``preadv`` here: 0.2 s/GB aligned, 0.5-0.9 s/GB at numpy's 16-byte offset)."""
    nbytes = int(size) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 4096, dtype=np.uint8)
    off = (-raw.ctypes.data) % 4096
    return raw[off:off + nbytes].view(dtype)


def _thread_buffer(name, shape, dtype):
    """This thread's reused page-aligned buffer ``name`` viewed as ``shape`` (grown when too
    small)."""
    size = int(np.prod(shape))
    buf = getattr(_buffers, name, None)
    if buf is None or buf.dtype != dtype or buf.size < size:
        setattr(_buffers, name, None)  # the old buffer is freed before the new one exists
        buf = _page_aligned(size, dtype)
        setattr(_buffers, name, buf)
    return buf[:size].reshape(shape)


def _read_spilled(sp, want, repack):
    """The positions ``want`` (sorted, unique) of the spill file of ``sp``, read into a reused
    (want.size, n) buffer with one ``preadv`` per run of consecutive rows of the file. With
    ``repack`` (a sorted subset of ``want``) the file is then replaced by one holding those
    rows only, so that later passes read it sequentially."""
    n = sp.mem.shape[1]
    out = _thread_buffer("spill", (want.size, n), sp.mem.dtype)
    if want.size:
        rows = np.searchsorted(sp.held, want)
        if rows[-1] >= sp.held.size or not np.array_equal(sp.held[rows], want):
            raise RuntimeError(f"FSA on Dask: the spill file {sp.path} lacks kept columns")
        row_bytes = n * out.itemsize
        flat = out.reshape(-1).view(np.uint8)
        cuts = np.flatnonzero(np.diff(rows) != 1) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [rows.size]])
        fd = os.open(sp.path, os.O_RDONLY)
        try:
            for a, b in zip(starts, ends):
                view = flat[a * row_bytes:b * row_bytes]
                if os.preadv(fd, [view], int(rows[a]) * row_bytes) != view.size:
                    raise RuntimeError(f"FSA on Dask: short read of the spill file {sp.path}")
        finally:
            os.close(fd)
    if repack is not None:
        new = os.path.join(os.path.dirname(sp.path), uuid.uuid4().hex + ".f")
        out[np.searchsorted(want, repack)].tofile(new)
        os.remove(sp.path)
        sp.path, sp.held = new, repack
    return out


def _forget_spilled(key):
    """Remove the spilled chunk ``key`` (its columns have moved to memory)."""
    with _spill_lock:
        sp = _spill_files.pop(key, None)
    if sp is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(sp.path)


@njit(cache=True)
def _pass_split(held, files, weights, y, loss, track, acc):
    """:func:`cvfs.core._kernels.row_pass_t` on kept columns held in two feature-major
    matrices: ``held`` = (XA, ca), rows ca of XA (the kept positions 0..ca.size-1), and
    ``files`` = (XB, cb), rows cb of XB (the rest); ``weights`` = (a, b, z0, t0), the score and
    power-iteration weights and their centring offsets. Raw sums into ``acc`` = (g, h) (m, 1);
    returns (loss sum, sum d, sum t)."""
    XA, ca = held
    XB, cb = files
    a, b, z0, t0 = weights
    g, h = acc
    na = ca.size
    parts = ((XA, ca, a[:na], b[:na], g[:na], h[:na]), (XB, cb, a[na:], b[na:], g[na:], h[na:]))
    return K.sweep_columns(parts, (y.size, z0, t0), y, loss, track)


def _kept_args(func, args):
    """(the positions ``cols`` that ``func``'s arguments ask for, the arguments with ``cols``
    replaced by 0..m-1): a spilled chunk is read as its kept columns only."""
    cols = args if func is _bundle else args[0]
    local = np.arange(len(cols), dtype=np.int64)
    return cols, (local if func is _bundle else (local, *args[1:]))


def _on_disk(func, bundle, args, io):
    """``func`` on a spilled chunk: the kept columns held in memory and those of its file
    still kept (read back feature-major). A linear row pass runs on them feature-major
    (:func:`_pass_split`); other passes get the kept columns as rows. ``io`` = (promote,
    repack) from :meth:`DaskLayout._file_reads`: the memory rows of columns no longer kept
    then take the file's columns ``promote``, and the file is re-packed to the positions
    ``repack`` (None: kept as it is). The chunk is forgotten once persisted."""
    (key, host), yp = bundle
    with _spill_lock:
        sp = _spill_files.get(key)
    if sp is None or not os.path.exists(sp.path):
        raise RuntimeError(f"FSA on Dask: the spilled chunk {key} written on {host} is not on "
                           f"{socket.gethostname()}")
    promote, repack = io
    cols, args = _kept_args(func, args)
    cols = np.asarray(cols, dtype=np.int64)
    mem = sp.mem
    n = mem.shape[1]
    order = np.argsort(sp.mem_pos)
    slot = np.searchsorted(sp.mem_pos, cols, sorter=order)
    slot = np.minimum(slot, order.size - 1) if order.size else slot
    in_mem = (sp.mem_pos[order[slot]] == cols) if order.size else np.zeros(cols.size, bool)
    ia = np.flatnonzero(in_mem)
    ib = np.flatnonzero(~in_mem)
    want = np.unique(cols[ib])
    XB = _read_spilled(sp, want, repack)
    ca = order[slot[ia]] if ia.size else np.zeros(0, np.int64)
    cb = np.searchsorted(want, cols[ib])
    if func is _chunk_row_pass and args[2] == 0:
        _, fp, _, beta, v, intercept, loss, track = args
        both = np.concatenate([ia, ib])
        a = beta[both, 0] * fp[both, 1]
        b = v[both, 0] * fp[both, 1]
        z0 = intercept - float(np.dot(beta[:, 0], fp[:, 2]))
        t0 = -float(np.dot(v[:, 0], fp[:, 2])) if track else 0.0
        g2 = np.zeros((cols.size, 1))
        h2 = np.zeros((cols.size, 1))
        s = _pass_split((mem, ca), (XB, cb), (a, b, z0, t0), _writable(yp[0]), loss, track,
                        (g2, h2))
        g = np.empty_like(g2)
        h = np.empty_like(h2)
        g[both] = g2
        h[both] = h2
        out = g, h, np.array(s)
    else:
        x = np.empty((n, cols.size), dtype=mem.dtype)
        x[:, ia] = mem[ca].T
        x[:, ib] = XB[cb].T
        out = func(x, yp, args)
    if func is _bundle:
        _forget_spilled(key)
    elif promote.size:  # free rows: those of columns no longer kept
        free = np.flatnonzero(~np.isin(sp.mem_pos, cols))[:promote.size]
        mem[free] = XB[np.searchsorted(want, promote[:free.size])]
        sp.mem_pos[free] = promote[:free.size]
    return out


def _zarr_source(X):
    """The ``zarr.Array`` behind X if X is exactly ``dask.array.from_zarr(z)`` of a float32 or
    float64 Zarr (zarr >= 3), else None. Its row ranges are then read straight into a reused
    buffer on the workers (:func:`_on_source`) instead of through Dask's getter tasks, which
    allocate a new array for every chunk."""
    if "zarr" not in sys.modules:
        return None
    try:
        import zarr
        from zarr.core.buffer import cpu  # noqa: F401
    except ImportError:
        return None
    graph = X.__dask_graph__()
    layers = getattr(graph, "layers", {})
    original = "original-" + X.name
    if set(layers) != {X.name, original}:
        return None
    values = list(dict(layers[original]).values())
    if len(values) != 1 or not isinstance(values[0], zarr.Array):
        return None
    z = values[0]
    if z.shape != X.shape or z.dtype != X.dtype or z.dtype not in (np.float32, np.float64):
        return None
    return z


class _ChunkFiles:
    """The chunk files of an uncompressed, little-endian Zarr array chunked by rows only on a
    local file system: a row range is read with ``preadv`` from the files straight into the
    reused buffer (zarr reads each chunk into a new bytes object first, whose page faults
    cost more system time than the read itself)."""

    def __init__(self, paths, chunk_rows, shape, dtype, fill):
        self.paths, self.chunk_rows, self.shape = paths, chunk_rows, shape
        self.dtype, self.fill = np.dtype(dtype), fill

    def read(self, r0, r1, out):
        """Rows r0:r1 into ``out`` (C-contiguous, shape (r1 - r0, M))."""
        row_bytes = self.shape[1] * self.dtype.itemsize
        flat = out.reshape(-1).view(np.uint8)
        cr = self.chunk_rows
        for c in range(r0 // cr, (r1 - 1) // cr + 1):
            a, b = max(r0, c * cr), min(r1, (c + 1) * cr)
            view = flat[(a - r0) * row_bytes:(b - r0) * row_bytes]
            try:
                fd = os.open(self.paths[c], os.O_RDONLY)
            except FileNotFoundError:  # a chunk never written holds the fill value
                out[a - r0:b - r0] = self.fill
                continue
            try:
                got = os.preadv(fd, [view], (a - c * cr) * row_bytes)
            finally:
                os.close(fd)
            if got != view.size:
                raise RuntimeError(f"Zarr chunk {self.paths[c]} is shorter than its rows")


def _chunk_files(z):
    """:class:`_ChunkFiles` of the ``zarr.Array`` ``z`` if its chunks are raw files that
    :meth:`_ChunkFiles.read` can read (zarr format 3, the ``bytes`` codec alone, native
    byte order, whole rows per chunk, a local store), else None."""
    try:
        from zarr.codecs import BytesCodec

        meta = z.metadata
        codecs = tuple(meta.codecs)
        store = z.store_path.store
        if (meta.zarr_format != 3 or len(codecs) != 1 or not isinstance(codecs[0], BytesCodec)
                or str(getattr(codecs[0].endian, "value", codecs[0].endian)) != sys.byteorder
                or tuple(z.chunks)[1] != z.shape[1] or z.dtype.byteorder not in "=<|"):
            return None
        if type(store).__name__ == "LocalStore":
            root = str(store.root)
        elif type(store).__name__ == "FsspecStore":
            fs = getattr(store.fs, "sync_fs", None) or getattr(store.fs, "fs", store.fs)
            protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
            if not {"file", "local"} & set(protocol):
                return None
            root = str(store.path)
        else:
            return None
        base = os.path.join(root, z.store_path.path)
        cr = int(z.chunks[0])
        paths = [os.path.join(base, meta.encode_chunk_key((c, 0)))
                 for c in range(-(-z.shape[0] // cr))]
        fill = float(meta.fill_value if meta.fill_value is not None else 0.0)
    except Exception:  # noqa: BLE001 - another zarr layout: read through zarr
        return None
    return _ChunkFiles(paths, cr, tuple(z.shape), z.dtype, fill)


def _read_rows(z, r0, r1):
    """Rows r0:r1 of the Zarr array ``z`` (or its :class:`_ChunkFiles`), read into this
    thread's reused buffer (a view of it, valid until the thread's next read)."""
    out = _thread_buffer("x", (r1 - r0, z.shape[1]), z.dtype)
    if isinstance(z, _ChunkFiles):
        z.read(r0, r1, out)
        return out
    from zarr.core.buffer import cpu

    z.get_basic_selection(slice(r0, r1), out=cpu.NDBuffer.from_numpy_array(out))
    return out


def _on_source(func, z, rows, yp, args):
    """``func`` on the rows ``rows`` = (r0, r1) of the Zarr array ``z``; ``func`` must not
    return a view of its chunk (the buffer is reused)."""
    return func(_read_rows(z, *rows), yp, args)
