"""FSA on a Dask array: the passes of :func:`cvfs.core.fsa.fsa_fit` as map-reduce over row chunks.

Each pass runs one task per row chunk, on the active ``distributed.Client`` if there is one, else
on Dask's default scheduler: the task runs the numba kernel of the out-of-core path on its chunk
with the O(M) arguments (``cols``, ``fp``, ``beta``, ``v``: one graph key each, sent once per
pass) and returns O(m G) partial sums, added in a tree on the workers; the client receives one
O(m G) result per pass. ``y`` and the ranking pairs go to the workers once, split by chunk.

Layouts of X, in order: the input chunks (read by every pass; the chunks of an unmodified
``dask.array.from_zarr`` array are read by the task itself into a buffer reused by each worker
thread, with ``preadv`` from the chunk files when they are raw); after the first drop, while
the kept columns do not fit ``worker_memory``, each chunk's kept columns of largest |beta|
that fit it held feature-major in its worker's memory and the others in a feature-major file
on that worker's local disk (written once, re-packed when at most half of it is still kept;
a pass reads only the file's columns still kept, and moves the largest of them into memory
rows freed by drops); the kept columns persisted in the workers' memory
beside their ``y`` chunk once N m itemsize <= ``worker_memory`` (again whenever the kept count
halves); the kept columns gathered into the client's memory once N m itemsize <=
``max_memory``, where the in-memory loop takes over. ``docs/methods.md``, "FSA on Dask", has
the details and what moves per iteration.
"""

import contextlib
import logging
import os
import pickle
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

from cvfs._jit import njit
from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core.responses import _ColumnStats

__all__ = ["DaskLayout", "is_dask_array"]

log = logging.getLogger(__name__)

_FAN_IN = 8  # partial sums added per reduction task


def is_dask_array(X):
    """True for a ``dask.array.Array`` (checked without importing dask)."""
    return type(X).__module__.startswith("dask.array") and hasattr(X, "chunks")


def _active_client():
    """The ``distributed.Client`` that ``dask.compute`` would run on, or None (Dask's local
    schedulers; distributed is not imported for this)."""
    if "distributed" not in sys.modules:
        return None
    from dask.base import get_scheduler

    sched = get_scheduler()
    client = getattr(sched, "__self__", sched)
    return client if type(client).__name__ == "Client" else None


def default_worker_memory(physical):
    """A quarter of the memory of the cluster's workers (threaded scheduler: of ``physical``)."""
    client = _active_client()
    if client is None:
        return physical // 4
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:
        workers = client.scheduler_info()["workers"]
    total = sum(int(w.get("memory_limit") or 0) for w in workers.values())
    return (total if total > 0 else physical) // 4


def _writable(a):
    """``a`` as a C-contiguous writable array (data received by a worker may be read-only; the
    numba kernels are compiled for writable arrays)."""
    return np.require(a, requirements=["C", "W"])


def _group_chunks(chunks, pi, pj):
    """Row chunk sizes such that no pair (pi, pj) straddles two chunks: every boundary of
    ``chunks`` moves forward to the next row that no pair spans."""
    n = int(sum(chunks))
    span = np.zeros(n + 1, np.int64)
    np.add.at(span, np.minimum(pi, pj), 1)
    np.add.at(span, np.maximum(pi, pj), -1)
    open_pairs = np.cumsum(span)[:-1]  # pairs spanning the cut after row r
    allowed = np.flatnonzero(open_pairs == 0) + 1  # cuts b with no pair across (b - 1, b)
    cuts = []
    for b in np.cumsum(chunks)[:-1]:
        pos = np.searchsorted(allowed, b)
        c = int(allowed[pos]) if pos < allowed.size else n
        if c < n and (not cuts or c > cuts[-1]):
            cuts.append(c)
    edges = np.array([0, *cuts, n])
    return tuple(int(s) for s in np.diff(edges))


# ---- tasks run on the workers ----


def _chunk_stats(x, yp, args):
    """Column statistics of one row chunk: count, mean, m2, min, max, and with the loss of the
    first iteration the raw sums sum_i d_i x_ij; plus the chunk's power-iteration rows."""
    r0, c, minmax, first, rows = args
    from cvfs.core.fsa import _raise_not_finite

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
    K.take_columns(x, cols, out)
    return out


def _bundle(x, yp, args):
    """A persisted chunk: its kept columns beside its ``y`` and pairs (kept on one worker)."""
    cols = _writable(args)
    x = _writable(x)
    out = np.empty((x.shape[0], cols.size), dtype=x.dtype)
    K.take_columns(x, cols, out)
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
    kept = K.compact_features(x, _writable(mem), False)
    folder = _scratch_dir(tag)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, uuid.uuid4().hex + ".f")
    out = _thread_buffer("spill", (disk.size, x.shape[0]), x.dtype)
    K.take_columns(x, _writable(disk), out.T)  # (written in place: no fresh pages per chunk)
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


class DaskLayout:
    """The row chunks of a Dask array X and the passes of FSA over them.

    Parameters
    ----------
    X : dask.array.Array of shape (N, M)
        Column chunks are merged (each task needs whole rows); other dtypes than float32 and
        float64 become float64. With ranking pairs the row chunks are moved to cuts no pair
        spans.
    y : ndarray of shape (N,)
    pairs : tuple (pi, pj, pr, pw) of arrays
        Ranking pairs (empty for other losses), global row indices.
    worker_memory : int
        Bytes the persisted kept columns may use on the workers; beyond it, the kept columns
        are spilled to the workers' local disk after the first drop.
    max_memory : int
        Bytes of the kept columns gathered into the client's memory for the in-memory loop.
    """

    def __init__(self, X, y, pairs, worker_memory, max_memory):
        import dask
        from dask import delayed

        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if not all(np.isfinite(c) for c in X.chunks[0]):
            raise ValueError("X has unknown row chunk sizes; call X.compute_chunk_sizes() "
                             "before fitting")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must be 1-D with X.shape[0]={X.shape[0]} entries, got shape "
                             f"{y.shape}")
        self._zarr = _zarr_source(X)  # read directly, whatever the row chunks below
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        pi, pj, pr, pw = pairs
        chunks = X.chunks[0]
        if pi.size:
            chunks = _group_chunks(chunks, pi, pj)
            if chunks != X.chunks[0]:
                X = X.rechunk({0: chunks})
                log.info("FSA on Dask: rows rechunked into %d chunks so that no ranking pair "
                         "spans two chunks", len(chunks))
        self.X = X
        self.shape = X.shape
        self.itemsize = X.dtype.itemsize
        self.worker_memory = int(worker_memory)
        self.max_memory = int(max_memory)
        self.offsets = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
        self.n_chunks = len(chunks)
        # y and the pairs of each chunk (local row indices): sent to the workers once
        parts = []
        for c in range(self.n_chunks):
            r0, r1 = self.offsets[c], self.offsets[c + 1]
            sel = (pi >= r0) & (pi < r1)
            local = (pi[sel] - r0, pj[sel] - r0, pr[sel], pw[sel]) if pi.size else ()
            parts.append(delayed((np.ascontiguousarray(y[r0:r1]), local), traverse=False))
        self._yp = dask.persist(*parts)
        if self._zarr is not None:  # the row range of each chunk, read by its task
            files = _chunk_files(self._zarr)
            self._source_files = files is not None
            self._source_obj = self._zarr if files is None else files
            self._source = delayed(self._source_obj, traverse=False)
            self._blocks = [(int(a), int(b)) for a, b in zip(self.offsets[:-1], self.offsets[1:])]
        else:
            self._blocks = list(X.to_delayed().ravel())
        self._mode = "source"  # where the chunks are: "source", "disk" or "memory"
        self._tag = uuid.uuid4().hex  # names this fit's scratch directories
        self._workers = None  # distributed: the worker holding each spilled chunk
        self._held = 0  # spilled layout: columns held in the workers' memory per chunk,
        self._in_mem = np.zeros(0, bool)  # the positions there,
        self._file_cols = np.zeros(0, np.int64)  # and the positions in the files
        self.width = X.shape[1]
        self.traffic = {"sent_bytes": [], "received_bytes": [], "tasks": [], "pass": [],
                        "seconds": [], "read_bytes": [], "spill_read_bytes": [],
                        "written_bytes": [], "ended": []}
        self.in_memory = (0.0, 0.0)  # wall, CPU seconds of the in-memory loop (set by the driver)
        self.persisted_at = []
        self.spilled_at = []
        if self._fits(self.width):
            self._persist(np.arange(self.width, dtype=np.int64), "start")

    # ---- map-reduce ----

    def _fits(self, m):
        return self.shape[0] * m * self.itemsize <= self.worker_memory

    def _tasks(self, func, args):
        """One delayed task per chunk applying ``func`` to (chunk, y and pairs, args), with
        ``args`` one graph key; returns the tasks and the bytes of what goes to the cluster."""
        from dask import delayed

        arg = delayed(args, traverse=False)
        sent = len(pickle.dumps(args, protocol=5)) + self._source_bytes()
        io = None
        if self._mode == "disk":
            io = self._file_reads(func, args)
            sent += len(pickle.dumps(io, protocol=5))
            io = delayed(io, traverse=False)
        tasks = []
        for c, (blk, yp) in enumerate(zip(self._blocks, self._yp)):
            with self._pinned(c):
                t = self._task(func, blk, yp, arg, io)
            sent += _task_bytes(t)
            tasks.append(t)
        return tasks, sent

    def _file_reads(self, func, args):
        """In the spilled layout, what a pass over ``func`` reads from the spill files and
        changes (recorded for ``traffic``): (promote, repack) for :func:`_on_disk`. A row
        pass moves the files' kept columns of largest |beta| into the memory rows of columns
        no longer kept (``promote``); once the files' columns still needed are at most half of
        what the files hold, it writes them to new files as it reads them (``repack``: the
        writes cost one read, and keep later reads sequential)."""
        self._pass_io = (0, 0)
        none = (np.zeros(0, np.int64), None)
        if self._mode != "disk":
            return none
        cols = np.asarray(_kept_args(func, args)[0], dtype=np.int64)
        on_disk = ~self._in_mem[cols]
        want = np.unique(cols[on_disk])
        row_bytes = self.shape[0] * self.itemsize
        if func not in (_chunk_row_pass, _chunk_rank):
            self._pass_io = (want.size * row_bytes, 0)
            return none
        promote = np.zeros(0, np.int64)
        free = self._held - int(np.count_nonzero(~on_disk))
        if free > 0 and want.size:
            beta = args[3]
            strength = np.linalg.norm(beta[on_disk], axis=1)
            promote = np.sort(cols[on_disk][np.argsort(-strength, kind="stable")[:free]])
        self._in_mem[:] = False
        self._in_mem[cols[~on_disk]] = True
        self._in_mem[promote] = True
        left = np.setdiff1d(want, promote, assume_unique=True)
        repack = None
        if 2 * left.size <= self._file_cols.size and left.size < self._file_cols.size:
            repack = left
            self._file_cols = left
        self._pass_io = (want.size * row_bytes, 0 if repack is None else left.size * row_bytes)
        return promote, repack

    def _task(self, func, blk, yp, arg, io=None):
        """The delayed ``func`` on one chunk in the current layout."""
        from dask import delayed

        if self._mode == "memory":
            return delayed(_on_bundle, pure=False)(func, blk, arg)
        if self._mode == "disk":
            return delayed(_on_disk, pure=False)(func, blk, arg, io)
        if self._zarr is not None:
            return delayed(_on_source, pure=False)(func, self._source, blk, yp, arg)
        return delayed(func, pure=False)(blk, yp, arg)

    def _source_bytes(self):
        """Pickled size of the Zarr array a pass over the source sends (0 otherwise)."""
        if self._mode != "source" or self._zarr is None:
            return 0
        return len(pickle.dumps(self._source_obj, protocol=5))

    def _pinned(self, c):
        """Context in which the task of chunk ``c`` is restricted to the worker holding its
        spill file (distributed only; a no-op otherwise)."""
        import contextlib

        import dask

        if self._mode != "disk" or self._workers is None:
            return contextlib.nullcontext()
        return dask.annotate(workers=[self._workers[c]], allow_other_workers=False)

    def map_reduce(self, func, args, reduce=_add, name="pass", width=None):
        """Run ``func`` on every chunk and reduce the results in a tree of fan-in 8 on the
        workers. Records the bytes sent and received in ``traffic`` (and ``width`` columns
        read, default the layout's width)."""
        t0 = time.perf_counter()
        import dask
        from dask import delayed

        parts, sent = self._tasks(func, args)
        n_tasks = len(parts)
        while len(parts) > 1:
            nxt = []
            for i in range(0, len(parts), _FAN_IN):
                t = delayed(reduce, pure=False)(*parts[i:i + _FAN_IN])
                sent += _task_bytes(t)
                nxt.append(t)
            n_tasks += len(nxt)
            parts = nxt
        (out,) = dask.compute(parts[0], optimize_graph=False)
        self._record(name, sent, len(pickle.dumps(out, protocol=5)), n_tasks, t0, width=width)
        return out

    def _record(self, name, sent, received, tasks, t0, written=0, width=None):
        """Log one pass: its name, bytes sent and received, tasks, seconds since ``t0``, bytes
        of X read (from the source, the spill files or memory) and written to the spill files."""
        tr = self.traffic
        tr["seconds"].append(time.perf_counter() - t0)
        tr["ended"].append(time.time())  # epoch seconds: passes lined up with CPU samples
        tr["pass"].append(name)
        tr["sent_bytes"].append(int(sent))
        tr["received_bytes"].append(int(received))
        tr["tasks"].append(int(tasks))
        width = self.width if width is None else width
        tr["read_bytes"].append(int(self.shape[0] * width * self.itemsize))
        spill_read, repacked = getattr(self, "_pass_io", (0, 0))
        self._pass_io = (0, 0)
        tr["spill_read_bytes"].append(int(spill_read))
        tr["written_bytes"].append(int(written + repacked))

    def _persist(self, cols, when):
        """Persist the columns ``cols`` of the current layout on the workers, each chunk beside
        its ``y`` and pairs (a take on the worker holding the chunk once persisted)."""
        t0 = time.perf_counter()
        import dask

        tasks, sent = self._tasks(_bundle, cols)
        self._blocks = list(dask.persist(*tasks, optimize_graph=False))
        self._record("persist", sent, 0, len(tasks), t0)
        self._mode = "memory"
        self._workers = None
        self.width = cols.size
        self.persisted_at.append(when)
        log.debug("FSA on Dask: %d columns persisted on the workers (%s)", cols.size, when)

    def _spill_to_disk(self, state, when):
        """Spill the kept columns ``state.cols`` of the chunks: the ones of largest |beta| that
        fit ``worker_memory`` stay in the memory of the worker holding the chunk, feature-major,
        and the others go to a feature-major file on its local disk (replacing the source
        for later passes, which read only the file's columns still kept). ``state.cols``
        becomes the kept positions in that layout: 0.._held-1 in memory, then the files'
        (the state returned)."""
        t0 = time.perf_counter()
        import dask

        m = state.cols.size
        k = min(m, self.worker_memory // (self.shape[0] * self.itemsize))
        strength = np.linalg.norm(state.beta, axis=1)
        in_mem = np.zeros(m, dtype=bool)
        in_mem[np.argsort(-strength, kind="stable")[:k]] = True
        tasks, sent = self._tasks(_spill, (state.cols[in_mem], state.cols[~in_mem], self._tag))
        blocks = dask.persist(*tasks, optimize_graph=False)
        client = _active_client()
        if client is not None:  # each chunk's later tasks go to the worker with its file
            from distributed import futures_of, wait

            futures = [futures_of(b)[0] for b in blocks]
            wait(futures)
            who = client.who_has(futures)
            self._workers = [sorted(who[f.key])[0] for f in futures]
        else:
            self._workers = None
        self._blocks = list(blocks)
        self._record("spill", sent, 0, len(tasks), t0,
                     written=self.shape[0] * (m - k) * self.itemsize)
        self._mode = "disk"
        self._held = k
        self._in_mem = np.arange(m) < k
        self._file_cols = np.arange(k, m, dtype=np.int64)
        pos = np.empty(m, dtype=np.int64)
        pos[in_mem] = np.arange(k)
        pos[~in_mem] = k + np.arange(m - k)
        self.width = m
        self.spilled_at.append(when)
        log.debug("FSA on Dask: %d kept columns spilled: %d in the workers' memory, %d on "
                  "their disks (%s)", m, k, m - k, when)
        return state._replace(cols=pos)

    def cleanup(self):
        """Remove this fit's spill files on every worker (and here)."""
        if not self.spilled_at:
            return
        client = _active_client()
        if client is not None:
            client.run(_remove_scratch, self._tag)
        _remove_scratch(self._tag)

    # ---- passes ----

    def column_table(self, response, first, rows):
        """:func:`cvfs.core.fsa._column_table` over the chunks: (fp, raw first-iteration sums
        or None, the rows ``rows`` of X). ``first`` = (loss object, intercept) for the
        fused first-iteration gradient, else None."""
        t0 = time.perf_counter()
        M = self.shape[1]
        minmax = response.bins > 0
        parts, sent = [], self._source_bytes()
        from dask import delayed

        # the chunk offsets go with each task: one argument tuple per chunk here (once per fit)
        for c, (blk, yp) in enumerate(zip(self._blocks, self._yp)):
            args = (int(self.offsets[c]), c, minmax, first, rows)
            sent += len(pickle.dumps(args, protocol=5))
            t = self._task(_chunk_stats, blk, yp, args)
            sent += _task_bytes(t)
            parts.append(t)
        n_tasks = len(parts)
        while len(parts) > 1:
            parts = [delayed(_merge_stats, pure=False)(*parts[i:i + _FAN_IN])
                     for i in range(0, len(parts), _FAN_IN)]
            n_tasks += len(parts)
        import dask

        (out,) = dask.compute(parts[0], optimize_graph=False)
        self._record("stats", sent, len(pickle.dumps(out, protocol=5)), n_tasks, t0)
        stats = _ColumnStats(M, minmax=minmax)
        stats.n, stats.shift = out["n"], out["mean"]
        stats.s1, stats.s2 = np.zeros(M), out["m2"]
        stats.lo, stats.hi = out["lo"], out["hi"]
        rows_out = np.concatenate(out["rows"]) if rows is not None else None
        if response.bins == 0:
            graw = None if first is None else out["graw"][:, None]
            return response.table(stats), graw, rows_out
        fp = response.bin_table(stats)
        sums, graw = self.map_reduce(_chunk_basis, (fp, response.bins, first), name="basis")
        fp[:, 2:] = sums / self.shape[0]
        return fp, graw, rows_out

    # ---- the layout of cvfs.core._driver.fsa_iterate ----

    stop_tracking = False

    def fits(self, state):
        """True once the kept columns fit in the client's ``max_memory``."""
        return self.shape[0] * state.cols.size * self.itemsize <= self.max_memory

    def begin(self, state, e):
        if e == 0:
            self.iteration_traffic = np.zeros((0, 3), np.int64)
        self._n_rec = len(self.traffic["pass"])
        return state

    def end(self, e):
        """Record iteration e's traffic (sent, received bytes, tasks)."""
        tr = self.traffic
        n = self._n_rec
        row = [(sum(tr["sent_bytes"][n:]), sum(tr["received_bytes"][n:]), sum(tr["tasks"][n:]))]
        self.iteration_traffic = np.concatenate([self.iteration_traffic,
                                                 np.array(row, np.int64)])

    def gradient(self, loss, model, track):
        """One map-reduce pass over the chunks: (mean loss, g, d loss / d intercept, H v,
        columns read)."""
        N = self.shape[0]
        cols, fp, bins, beta, v, intercept = model
        is_rank = loss.pairwise
        width = cols.size if self._mode == "disk" else self.width  # spill files: kept columns
        args = (cols, fp, bins, beta, v, float(intercept), loss, track)
        g, h, s = self.map_reduce(_chunk_rank if is_rank else _chunk_row_pass, args,
                                  name="rank" if is_rank else "row", width=width)
        if is_rank:
            K.finalize(g, fp, bins, s[1], 1.0)
            K.finalize(h, fp, bins, s[2], 1.0)
            value, gi = s[0], 0.0
        else:
            K.finalize(g, fp, bins, s[1], N)
            K.finalize(h, fp, bins, s[2], N)
            value, gi = s[0] / N, s[1] / N
        return value, g, gi, h, width

    def dropped(self, state, e):
        """After a drop to m kept columns: persist them on the workers once they fit
        ``worker_memory`` (again when the kept count halves); before that, spill them to the
        workers' disks after the first drop, feature-major, so that later passes read only the
        columns still kept and the files are never re-written. Gathered by :meth:`load` once
        they fit ``max_memory``."""
        m = state.cols.size
        mode = self._mode
        if self.fits(state):
            return state
        if self._fits(m):
            if mode != "memory" or 2 * m <= self.width:
                self._persist(state.cols, e)
                return state._replace(cols=np.arange(m, dtype=np.int64))
        elif mode == "source":
            return self._spill_to_disk(state, e)
        return state

    def load(self, state, bins):
        """The kept columns gathered into the client's memory: (Xw, transposed)."""
        Xw = self.gather(state.cols, state.fp, bins)
        log.debug("FSA on Dask: %d kept columns gathered", state.cols.size)
        self.cleanup()  # the spill files are no longer read
        return Xw, bins > 0

    def gather(self, cols, fp, bins):
        """The kept columns in the client's memory, (N, m) row-major or (bins) the (m, N)
        feature-major bin coordinates; a few chunks at a time into one buffer."""
        t0 = time.perf_counter()
        import dask

        N = self.shape[0]
        m = cols.size
        dtype = self.X.dtype
        Xw = np.empty((m, N) if bins > 0 else (N, m), dtype=dtype)
        tasks, sent = self._tasks(_chunk_take, (cols, fp, bins))
        step = 8
        received = 0
        for c0 in range(0, len(tasks), step):
            outs = dask.compute(*tasks[c0:c0 + step], optimize_graph=False)
            for c, out in enumerate(outs, start=c0):
                r0, r1 = self.offsets[c], self.offsets[c + 1]
                if bins > 0:
                    Xw[:, r0:r1] = out
                else:
                    Xw[r0:r1] = out
                received += out.nbytes
        self._record("gather", sent, received, len(tasks), t0,
                     width=m if self._mode == "disk" else None)
        return Xw

    def report(self, n_iter):
        """Traffic per iteration (arrays of shape (n_iter,)) and per pass, for ``history``."""
        it = np.zeros((n_iter, 3), np.int64)
        own = getattr(self, "iteration_traffic", None)
        if own is not None:
            it[:own.shape[0]] = own
        return {
            "n_chunks": self.n_chunks,
            "source": "zarr" if self._zarr is not None else "dask",
            "zarr_files": bool(getattr(self, "_source_files", False)),
            "sent_bytes": it[:, 0], "received_bytes": it[:, 1], "tasks": it[:, 2],
            "passes": {k: list(v) for k, v in self.traffic.items()},
            "persisted_at": list(self.persisted_at),
            "spilled_at": list(self.spilled_at),
            "in_memory_seconds": self.in_memory[0],
            "in_memory_cpu_seconds": self.in_memory[1],
        }


def _task_bytes(t):
    """Pickled size of the task of the Delayed ``t`` (function, literals, input keys)."""
    layer = t.dask.layers.get(t.key)
    if layer is None:
        return 0
    return len(pickle.dumps(dict(layer), protocol=5))
