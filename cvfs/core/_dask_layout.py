"""FSA on a Dask array: the passes of :func:`cvfs.core.fsa.fsa_fit` as map-reduce over row chunks.

Each pass runs one task per row chunk, on the active ``distributed.Client`` if there is one, else
on Dask's default scheduler: the task runs the numba kernel of the out-of-core path on its chunk
with the O(M) arguments (``cols``, ``fp``, ``beta``, ``v``: one graph key each, sent once per
pass) and returns O(m G) partial sums, added in a tree on the workers; the client receives one
O(m G) result per pass. ``y`` and the ranking pairs go to the workers once, split by chunk.

Layouts of X, in order: the input chunks (read by every pass; the chunks of an unmodified
``dask.array.from_zarr`` array are read by the task itself into a buffer reused by each worker
thread); after the first drop, while the kept columns do not fit ``worker_memory``, each
chunk's kept columns in a feature-major file on its worker's local disk (written once; a pass
reads only the columns still kept); the kept columns persisted in the workers' memory
beside their ``y`` chunk once N m itemsize <= ``worker_memory`` (again whenever the kept count
halves); the kept columns gathered into the client's memory once N m itemsize <=
``max_memory``, where the in-memory loop takes over. ``docs/methods.md``, "FSA on Dask", has
the details and what moves per iteration.
"""

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
    shutil.rmtree(_scratch_dir(tag, dask_worker), ignore_errors=True)


def _spill(x, yp, args):
    """A chunk spilled to local disk: its kept columns written feature-major, shape (m, n), to
    a ``.npy`` file (so that a pass reads only the columns still kept); the task's result is
    ((path, host), y and pairs), the file stays on this worker's disk."""
    cols, tag = args
    cols = _writable(cols)
    x = _writable(x)
    out = np.empty((x.shape[0], cols.size), dtype=x.dtype)
    K.take_columns(x, cols, out)
    folder = _scratch_dir(tag)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, uuid.uuid4().hex + ".npy")
    np.save(path, np.ascontiguousarray(out.T))
    return (path, socket.gethostname()), yp


def _kept_args(func, args):
    """(the positions ``cols`` that ``func``'s arguments ask for, the arguments with ``cols``
    replaced by 0..m-1): a spilled chunk is read as its kept columns only."""
    cols = args if func is _bundle else args[0]
    local = np.arange(len(cols), dtype=np.int64)
    return cols, (local if func is _bundle else (local, *args[1:]))


def _on_disk(func, bundle, args):
    """``func`` on a spilled chunk: only the columns its arguments keep are read back from the
    feature-major file; the file is removed once its columns have moved to a new spill file
    or to memory."""
    (path, host), yp = bundle
    try:
        xt = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise RuntimeError(f"FSA on Dask: the spilled chunk {path} written on {host} is not on "
                           f"{socket.gethostname()}") from None
    cols, args = _kept_args(func, args)
    cols = np.asarray(cols, dtype=np.int64)
    x = np.ascontiguousarray(xt[cols].T)  # reads the kept rows of the file only
    del xt
    out = func(x, yp, args)
    if func is _spill or func is _bundle:
        os.remove(path)
    return out


_buffers = threading.local()  # per thread: the reused buffer of the direct Zarr reads


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


def _read_rows(z, r0, r1):
    """Rows r0:r1 of the Zarr array ``z``, read into this thread's reused buffer (a view of it,
    valid until the thread's next read)."""
    from zarr.core.buffer import cpu

    n = r1 - r0
    buf = getattr(_buffers, "x", None)
    if buf is None or buf.dtype != z.dtype or buf.shape[1] != z.shape[1] or buf.shape[0] < n:
        _buffers.x = None  # the old buffer is freed before the new one is allocated
        buf = _buffers.x = np.empty((n, z.shape[1]), dtype=z.dtype)
    out = buf[:n]
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
            self._source = delayed(self._zarr, traverse=False)
            self._blocks = [(int(a), int(b)) for a, b in zip(self.offsets[:-1], self.offsets[1:])]
        else:
            self._blocks = list(X.to_delayed().ravel())
        self._mode = "source"  # where the chunks are: "source", "disk" or "memory"
        self._tag = uuid.uuid4().hex  # names this fit's scratch directories
        self._workers = None  # distributed: the worker holding each spilled chunk
        self.width = X.shape[1]
        self.traffic = {"sent_bytes": [], "received_bytes": [], "tasks": [], "pass": [],
                        "seconds": [], "read_bytes": [], "written_bytes": [], "ended": []}
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
        tasks = []
        for c, (blk, yp) in enumerate(zip(self._blocks, self._yp)):
            with self._pinned(c):
                t = self._task(func, blk, yp, arg)
            sent += _task_bytes(t)
            tasks.append(t)
        return tasks, sent

    def _task(self, func, blk, yp, arg):
        """The delayed ``func`` on one chunk in the current layout."""
        from dask import delayed

        if self._mode == "memory":
            return delayed(_on_bundle, pure=False)(func, blk, arg)
        if self._mode == "disk":
            return delayed(_on_disk, pure=False)(func, blk, arg)
        if self._zarr is not None:
            return delayed(_on_source, pure=False)(func, self._source, blk, yp, arg)
        return delayed(func, pure=False)(blk, yp, arg)

    def _source_bytes(self):
        """Pickled size of the Zarr array a pass over the source sends (0 otherwise)."""
        if self._mode != "source" or self._zarr is None:
            return 0
        return len(pickle.dumps(self._zarr, protocol=5))

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
        tr["written_bytes"].append(int(written))

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

    def _spill_to_disk(self, cols, when):
        """Write the columns ``cols`` of each chunk to a file on the local disk of the worker
        holding the chunk (replacing its previous spill file); later passes read those files."""
        t0 = time.perf_counter()
        import dask

        tasks, sent = self._tasks(_spill, (cols, self._tag))
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
                     written=self.shape[0] * cols.size * self.itemsize)
        self._mode = "disk"
        self.width = cols.size
        self.spilled_at.append(when)
        log.debug("FSA on Dask: %d columns spilled to the workers' disks (%s)", cols.size, when)

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

    def gradient(self, loss, bins, state, track):
        """One map-reduce pass over the chunks: (mean loss, g, d loss / d intercept, H v,
        columns read)."""
        N = self.shape[0]
        cols, fp, beta, v, intercept = (state.cols, state.fp, state.beta, state.v,
                                        state.intercept)
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
            self._spill_to_disk(state.cols, e)
            return state._replace(cols=np.arange(m, dtype=np.int64))
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
