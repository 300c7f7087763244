"""The Dask layout: the passes of the FSA fit as map-reduce over the row chunks of a Dask array.

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
import pickle
import sys
import time
import uuid

import numpy as np

from cvfs.core import _kernels as K
from cvfs.core.layouts._dask_tasks import (
    _add,
    _bundle,
    _chunk_basis,
    _chunk_files,
    _chunk_rank,
    _chunk_row_pass,
    _chunk_stats,
    _chunk_take,
    _kept_args,
    _merge_stats,
    _on_bundle,
    _on_disk,
    _on_source,
    _remove_scratch,
    _spill,
    _zarr_source,
)
from cvfs.core.layouts.base import Layout, Passes, physical_memory
from cvfs.core.responses import _ColumnStats

__all__ = ["DaskLayout", "default_worker_memory", "is_dask_array"]

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


class DaskLayout(Layout, Passes):
    """The row chunks of a Dask array X and the passes of FSA over them.

    Column chunks are merged (each task needs whole rows); other dtypes than float32 and float64
    become float64. With ranking pairs the row chunks are moved to cuts no pair spans. Of the
    fit's :class:`~cvfs.core.layouts.base.FitData`: ``y`` (N,) goes to the workers split by
    chunk with the ranking pairs (global row indices); ``worker_memory`` (default: a quarter of
    the workers' memory limits, or of physical memory without a ``distributed.Client``) bounds
    the kept columns persisted on the workers, beyond which they are spilled to the workers'
    local disk after the first drop; ``max_memory`` bounds the kept columns gathered into the
    client's memory for the in-memory loop. Sample weights are not supported
    (NotImplementedError).
    """

    name = "dask"

    @classmethod
    def accepts(cls, X):
        return is_dask_array(X)

    def __init__(self, X, data):
        import dask
        from dask import delayed

        if data.sw is not None:
            raise NotImplementedError("sample_weight is not supported for a Dask X: compute X, "
                                      "or pass it as an np.memmap / HDF5 dataset")
        worker_memory = data.worker_memory
        if worker_memory is None:
            worker_memory = default_worker_memory(physical_memory())
        y, pairs, max_memory = data.y, data.pairs, data.max_memory
        self.data = data
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
        """The statistics pass of :func:`cvfs.core.layouts.dense.column_table` over the chunks:
        (fp, raw first-iteration sums or None, the rows ``rows`` of X). The workers compute the
        first iteration's loss derivatives of their chunk themselves (``first.d`` stays
        here)."""
        if first is not None:
            first = (first.loss, first.intercept)
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

    def power_start(self, fp, bins, v, rows, Xs, n_iter):
        cols = np.arange(self.shape[1], dtype=np.int64)
        return K.power_estimate(Xs, cols, fp, bins, v, n_iter)

    def passes(self, fused):
        return self

    def history(self, n_layout, n_iter):
        return {"out_of_core_iterations": n_layout, "dask": self.report(n_iter)}

    # ---- the passes of cvfs.core._driver.fsa_iterate ----

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
