"""The FSA paper's large-data experiment (Fig. 1) on Dask: FSA-Lorenz against LogitBoost.

Data (section 3.1.3, eq. 18): x_i = alpha z_i 1 + eps_i with alpha = 0.5, k* = 500 true
features x_{10 j}, y = 1 if their sum is positive; float32, written chunk by chunk to a Zarr
store (``cvfs.datasets.synthetic.write_equicorrelated_zarr``, never in memory at once) for each
N of ``--n`` at M = ``--m`` features (the paper: M = 1e5, N <= 1e6; the default here, M = 1e4,
keeps the largest store within the disk of a small machine).

Both learners run on a ``distributed.LocalCluster`` (``--workers`` worker processes, one thread
each) and read the same row chunks:

- FSA-Lorenz, k = 500, default parameters: ``cvfs.FSAClassifier(loss="lorenz").fit`` on
  ``dask.array.from_zarr`` (the passes are map-reduce tasks over the chunks; after the first
  drop the kept columns go to the workers' local disk, and to their memory once they fit).
- LogitBoost as in ``cvfs.keypoints.boosting`` (piecewise-constant univariate learners on 64
  bins, 10% of the features trained per round, ``--lb-rounds`` = 500 rounds, i.e. at most k
  features): each worker holds the bin codes of its rows; per round the workers return the
  bin histograms of the sampled features, the client picks the best learner and the workers
  update their scores. Only histograms and the learner move.

Reported per N: training wall time of each (the cluster's wall clock; data generation and
binning of the test set not counted, LogitBoost's binning pass counted), the percentage of
true features found (PCD), test AUC on ``--n-test`` independent rows, peak RSS of the workers.
With ``--h5`` the largest N is also converted to HDF5 and fitted out of core in one process
(``max_memory`` = ``--h5-max-memory``), to compare the time per byte of the two out-of-core
paths (``--h5-only``: that fit alone). Each timed FSA fit starts with the store's pages dropped
from the page cache, so that it reads from disk (run the script in a memory cgroup to act as a
machine with less memory than the data; the cgroup's peak is reported). Writes
``benchmarks/results/scale/large_data.json`` and a figure like the paper's Fig. 1 (``--figure``).

    python benchmarks/scale/large_data.py --quick                  # M = 2000, N <= 3e4, minutes
    python benchmarks/scale/large_data.py                          # M = 1e4, N in 1e4 .. 1e5
    python benchmarks/scale/large_data.py --n 1e4,3e4,1e5,3e5,1e6  # as far as the disk allows
"""

import argparse
import logging
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, limit_threads, machine_info, result_path, write_json

log = logging.getLogger("large_data")

RESULTS = result_path(__file__).parent


# ----------------------------------------------------------------------------------------------
# LogitBoost on row shards held by the workers
# ----------------------------------------------------------------------------------------------

def _shard_minmax(path, r0, r1, step):
    """Column min and max of rows r0:r1 of the Zarr array ``path``/X."""
    import zarr

    X = zarr.open_array(str(Path(path) / "X"), mode="r")
    lo = np.full(X.shape[1], np.inf)
    hi = np.full(X.shape[1], -np.inf)
    for a in range(r0, r1, step):
        xb = X[a:min(r1, a + step)]
        np.minimum(lo, xb.min(axis=0), out=lo)
        np.maximum(hi, xb.max(axis=0), out=hi)
    return lo, hi


def _shard_load(path, r0, r1, step, lo, scale, bins):
    """A worker's shard: feature-major uint8 bin codes of rows r0:r1, labels, scores F = 0."""
    import zarr

    from cvfs.keypoints.boosting import _bin_codes

    root = zarr.open_group(str(path), mode="r")
    X = root["X"]
    codes = np.empty((X.shape[1], r1 - r0), dtype=np.uint8)
    for a in range(r0, r1, step):
        b = min(r1, a + step)
        _bin_codes(np.ascontiguousarray(X[a:b], dtype=np.float64), lo, scale, bins,
                   codes[:, a - r0:b - r0])
    y01 = (np.asarray(root["y"][r0:r1]) > 0).astype(np.float64)
    return {"codes": codes, "y": y01, "F": np.zeros(r1 - r0)}


def _shard_histograms(shard, cols, bins):
    """LogitBoost's per-bin sums of w and w z over the shard's rows for the features ``cols``."""
    from cvfs.keypoints.boosting import _ZMAX, _histograms

    p = 1.0 / (1.0 + np.exp(-2.0 * shard["F"]))
    w = np.maximum(p * (1.0 - p), 1e-12)
    z = np.clip((shard["y"] - p) / w, -_ZMAX, _ZMAX)
    H = np.zeros((cols.size, 2 * bins))
    _histograms(shard["codes"], cols, w, w * z, bins, H)
    return H


def _shard_update(shard, j, values):
    """The shard with the learner (feature j, per-bin values) added to its scores."""
    return {"codes": shard["codes"], "y": shard["y"], "F": shard["F"] + values[shard["codes"][j]]}


def _shard_bytes(shard):
    return sum(a.nbytes for a in shard.values())


def logitboost_dask(client, path, n, m, rounds, bins, fraction, seed, step):
    """Fit LogitBoost on the Zarr store at ``path`` with the shards on the cluster's workers.

    Returns (chosen features per round, per-bin values per round, lo, scale, bytes moved)."""
    from tqdm.auto import tqdm

    from cvfs.keypoints.boosting import _best_of

    workers = sorted(client.scheduler_info()["workers"])
    edges = np.linspace(0, n, len(workers) + 1).astype(int)
    parts = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    futs = [client.submit(_shard_minmax, path, a, b, step, workers=[w], pure=False)
            for (a, b), w in zip(parts, workers)]
    mm = client.gather(futs)
    lo = np.min([x[0] for x in mm], axis=0)
    hi = np.max([x[1] for x in mm], axis=0)
    width = hi - lo
    scale = np.where(width > 0, bins / np.where(width > 0, width, 1.0), 0.0)
    shards = [client.submit(_shard_load, path, a, b, step, lo, scale, bins, workers=[w],
                            pure=False) for (a, b), w in zip(parts, workers)]
    rng = np.random.default_rng(seed)
    n_sample = max(1, int(round(fraction * m)))
    chosen = np.empty(rounds, dtype=np.int64)
    values = np.empty((rounds, bins))
    moved = 0
    for t in tqdm(range(rounds), desc="LogitBoost", leave=False):
        cols = np.sort(rng.choice(m, size=n_sample, replace=False))
        hs = client.gather([client.submit(_shard_histograms, s, cols, bins, pure=False)
                            for s in shards])
        H = np.sum(hs, axis=0)
        moved += cols.nbytes * len(shards) + sum(h.nbytes for h in hs)
        c, vals = _best_of(H, bins)
        chosen[t] = cols[c]
        values[t] = 0.5 * vals
        shards = [client.submit(_shard_update, s, int(chosen[t]), values[t], pure=False)
                  for s in shards]
        moved += values[t].nbytes * len(shards)
    from distributed import wait

    wait(shards)  # the last update has run (the shards stay on the workers)
    del shards
    return chosen, values, lo, scale, moved


def logitboost_scores(X, chosen, values, lo, scale, bins):
    """F(x) of the fitted LogitBoost on the rows of X."""
    from cvfs.keypoints.boosting import _bin_codes

    feats = np.unique(chosen)
    codes = np.empty((feats.size, X.shape[0]), dtype=np.uint8)
    _bin_codes(np.ascontiguousarray(X[:, feats], dtype=np.float64), lo[feats], scale[feats],
               bins, codes)
    rows = np.searchsorted(feats, chosen)
    F = np.zeros(X.shape[0])
    for t in range(chosen.size):
        F += values[t][codes[rows[t]]]
    return F


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------

def _worker_peak_rss():
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cpu_seconds():
    """User + system CPU seconds of this process (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def evict_cache(path):
    """Drop the page cache of the files under ``path`` (posix_fadvise DONTNEED), so that a timed
    fit reads the store from disk, not from memory cached outside a memory cgroup."""
    path = Path(path)
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cgroup_memory():
    """(limit, peak usage) in bytes of this process's memory cgroup (cgroup v1 or v2), or None
    outside one: run the script in a cgroup limited to a few GiB to act as a smaller machine."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, rel = line.split(":", 2)
        for base, lim, peak in ((f"/sys/fs/cgroup/memory{rel}", "memory.limit_in_bytes",
                                 "memory.max_usage_in_bytes") if ctrl == "memory" else
                                (None, None, None),
                                (f"/sys/fs/cgroup/unified{rel}", "memory.max", "memory.peak")
                                if ctrl == "" else (None, None, None)):
            if base is None:
                continue
            try:
                limit = Path(base, lim).read_text().strip()
                usage = int(Path(base, peak).read_text())
            except (OSError, ValueError):
                continue
            if limit.isdigit() and int(limit) < (1 << 60):
                return int(limit), usage
    return None


def _start_cluster(n_workers, memory_limit):
    import dask
    from distributed import Client, LocalCluster

    # no spilling by Dask itself: an update briefly holds two shard objects that share one
    # array of codes, which Dask would count twice and write to disk (FSA spills on its own)
    dask.config.set({"distributed.worker.memory.target": False,
                     "distributed.worker.memory.spill": False})

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           memory_limit=memory_limit, dashboard_address=None)
    return cluster, Client(cluster)


def _store(data_dir, n, m, seed):
    return Path(data_dir) / f"equicorrelated_{n}x{m}_s{seed}.zarr"


def ensure_store(data_dir, n, m, k, seed):
    """Write the Zarr store of N x M rows once (reused when it exists with that shape)."""
    import zarr

    from cvfs.datasets.synthetic import write_equicorrelated_zarr

    path = _store(data_dir, n, m, seed)
    if path.exists():
        try:
            if zarr.open_group(str(path), mode="r")["X"].shape == (n, m):
                return path, 0.0
        except Exception:  # noqa: BLE001 - an unreadable store is rewritten
            pass
    t0 = time.perf_counter()
    write_equicorrelated_zarr(path, n, m, k_true=k, random_state=seed, progress=True)
    return path, time.perf_counter() - t0


def test_set(n_test, m, k, seed):
    from cvfs.datasets.synthetic import make_equicorrelated_classification

    X, y, _ = make_equicorrelated_classification(n_test, m, k, random_state=seed + 1_000_003)
    return X, y


def warm_up(client):
    """Load the compiled kernels in every worker (and here) before anything is timed."""
    import dask.array as da

    from cvfs import FSAClassifier
    from cvfs.datasets.synthetic import make_equicorrelated_classification

    X, y, _ = make_equicorrelated_classification(600, 100, 5, random_state=0)
    Xd = da.from_array(X, chunks=(150, 100))
    # the Dask passes throughout, with the kept columns persisted, or spilled (part in the
    # workers' memory, part on their disks); then gathered to the client
    for max_memory, worker_memory in ((1, None), (1, X.nbytes // 4), (None, None)):
        FSAClassifier(k=5, loss="lorenz", n_iter=20, max_memory=max_memory,
                      worker_memory=worker_memory).fit(Xd, y)

    def lb_kernels():
        from cvfs.keypoints.boosting import _bin_codes, _histograms

        codes = np.zeros((3, 8), np.uint8)
        _bin_codes(np.zeros((8, 3)), np.zeros(3), np.ones(3), 4, codes)
        _histograms(codes, np.arange(3), np.ones(8), np.ones(8), 4, np.zeros((3, 8)))

    client.run(lb_kernels)
    lb_kernels()


def run_fsa(client, path, k, seed, max_memory, worker_memory=None, verbose=False):
    import dask.array as da
    import zarr

    from cvfs import FSAClassifier

    X = da.from_zarr(str(Path(path) / "X"))
    y = np.asarray(zarr.open_group(str(path), mode="r")["y"][:])
    est = FSAClassifier(k=k, loss="lorenz", random_state=seed, max_memory=max_memory,
                        worker_memory=worker_memory, verbose=verbose)
    evict_cache(path)
    cpu0 = sum(client.run(_cpu_seconds).values()) + _cpu_seconds()
    t0 = time.perf_counter()
    est.fit(X, y)
    wall = time.perf_counter() - t0
    cpu = sum(client.run(_cpu_seconds).values()) + _cpu_seconds() - cpu0
    return est, wall, cpu


def one_n(args, n, true, X_test, y_test):
    from sklearn.metrics import roc_auc_score

    path, gen = ensure_store(args.data_dir, n, args.m, args.k, args.seed)
    nbytes = n * args.m * 4
    step = max(1, (32 << 20) // (args.m * 4))
    rec = {"n": n, "m": args.m, "k": args.k, "bytes": nbytes, "write_wall": gen,
           "store": str(path)}

    cluster, client = _start_cluster(args.workers, args.worker_memory)
    try:
        client.run(limit_threads)
        warm_up(client)
        wm = None if args.fsa_worker_memory is None else int(args.fsa_worker_memory)
        est, wall, cpu = run_fsa(client, path, args.k, args.seed, int(args.client_memory), wm,
                                 args.verbose)
        rec["fsa"] = {"wall": wall, "cpu": cpu, "loadavg": os.getloadavg(),
                      "spilled_at": est.history_.get("dask", {}).get("spilled_at"),
                      "pcd": 100.0 * int(est.support_[true].sum()) / true.size,
                      "auc": float(roc_auc_score(y_test, est.decision_function(X_test))),
                      "worker_peak_rss": max(client.run(_worker_peak_rss).values()),
                      "support": est.get_support(indices=True).tolist()}
        hist = getattr(est, "history_", {}) or {}
        for key in ("traffic", "dask"):
            if key in hist:
                rec["fsa"][key] = hist[key]
    finally:
        client.close()
        cluster.close()

    if n <= args.lb_max_n:
        cluster, client = _start_cluster(args.workers, args.worker_memory)
        try:
            client.run(limit_threads)
            warm_up(client)
            evict_cache(path)
            cpu0 = sum(client.run(_cpu_seconds).values()) + _cpu_seconds()
            t0 = time.perf_counter()
            chosen, values, lo, scale, moved = logitboost_dask(
                client, path, n, args.m, args.lb_rounds, args.lb_bins, args.lb_fraction,
                args.seed, step)
            wall = time.perf_counter() - t0
            cpu = sum(client.run(_cpu_seconds).values()) + _cpu_seconds() - cpu0
            F = logitboost_scores(X_test, chosen, values, lo, scale, args.lb_bins)
            feats = np.unique(chosen)
            rec["logitboost"] = {
                "wall": wall, "cpu": cpu, "loadavg": os.getloadavg(),
                "n_features": int(feats.size),
                "pcd": 100.0 * np.intersect1d(feats, true).size / true.size,
                "auc": float(roc_auc_score(y_test, F)),
                "bytes_moved_per_round": moved / args.lb_rounds,
                "worker_peak_rss": max(client.run(_worker_peak_rss).values())}
        finally:
            client.close()
            cluster.close()
    if not args.keep_data and n != max(args.n):
        shutil.rmtree(path, ignore_errors=True)
    return rec


def h5_compare(args, n):
    """FSA-Lorenz from an HDF5 copy of the store, out of core in this process."""
    import h5py
    import zarr

    from cvfs import FSAClassifier

    path, _ = ensure_store(args.data_dir, n, args.m, args.k, args.seed)
    h5 = path.with_suffix(".h5")
    try:
        with h5py.File(h5, "r") as f:
            ready = f["X"].shape == (n, args.m) and f["y"].shape == (n,)
    except (OSError, KeyError):
        ready = False
    if not ready:  # converted a few chunks at a time
        root = zarr.open_group(str(path), mode="r")
        step = max(1, (64 << 20) // (args.m * 4))
        with h5py.File(h5, "w") as f:
            dX = f.create_dataset("X", (n, args.m), dtype=np.float32,
                                  chunks=(max(1, (4 << 20) // (args.m * 4)), args.m))
            for a in range(0, n, step):
                dX[a:a + step] = root["X"][a:a + step]
            f["y"] = np.asarray(root["y"][:])
    try:
        evict_cache(h5)
        with h5py.File(h5, "r") as f:
            est = FSAClassifier(k=args.k, loss="lorenz", random_state=args.seed,
                                max_memory=int(args.h5_max_memory), verbose=True)
            cpu0 = _cpu_seconds()
            t0 = time.perf_counter()
            est.fit(f["X"], f["y"][:])
            wall = time.perf_counter() - t0
            cpu = _cpu_seconds() - cpu0
    finally:
        if not args.keep_data:
            h5.unlink(missing_ok=True)
    return {"n": n, "wall": wall, "cpu": cpu, "loadavg": os.getloadavg(),
            "bytes": n * args.m * 4, "peak_rss": _worker_peak_rss(),
            "out_of_core_iterations": est.history_["out_of_core_iterations"],
            "support": est.get_support(indices=True).tolist()}


def make_figure(out, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cvfs.viz import save_figure

    rows = out["runs"]
    n = np.array([r["n"] for r in rows], dtype=float)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name, label, mk in (("fsa", "FSA-Lorenz (Dask)", "o-"),
                            ("logitboost", "LogitBoost (Dask)", "s--")):
        sel = [i for i, r in enumerate(rows) if name in r]
        if not sel:
            continue
        x = n[sel]
        axes[0].loglog(x, [rows[i][name]["wall"] for i in sel], mk, label=label)
        axes[1].semilogx(x, [rows[i][name]["pcd"] for i in sel], mk, label=label)
        axes[2].semilogx(x, [rows[i][name]["auc"] for i in sel], mk, label=label)
    m = out["config"]["m"]
    for ax, ylab in zip(axes, ("training time (s, wall)", "true features found (PCD, %)",
                               "test AUC")):
        ax.set_xlabel("N (training rows)")
        ax.set_ylabel(ylab)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"Equally correlated data, M = {m:g}, k = k* = {out['config']['k']}, "
                 f"{out['config']['workers']} Dask workers")
    fig.tight_layout()
    save_figure(fig, path)


def print_table(out):
    rows = []
    for r in out["runs"]:
        if "fsa" not in r:
            continue
        f, lb = r.get("fsa", {}), r.get("logitboost")
        ratio = lb["wall"] / f["wall"] if lb and f else None
        rows.append([f"{r['n']:.0e}", f"{r['bytes'] / 1e9:.2f}",
                     f"{f['wall']:.1f}", None if not lb else f"{lb['wall']:.1f}",
                     None if ratio is None else f"{ratio:.1f}",
                     f"{f['pcd']:.1f}", None if not lb else f"{lb['pcd']:.1f}",
                     f"{f['auc']:.4f}", None if not lb else f"{lb['auc']:.4f}",
                     f"{f['worker_peak_rss'] / 2**30:.2f}",
                     f"{f['cpu']:.0f}" if "cpu" in f else None,
                     f"{lb['cpu']:.0f}" if lb and "cpu" in lb else None,
                     f"{f['loadavg'][1]:.1f}" if "loadavg" in f else None])
    print(format_table(["N", "GB", "FSA s", "LB s", "LB/FSA", "FSA PCD", "LB PCD", "FSA AUC",
                        "LB AUC", "FSA worker GiB", "FSA CPU s", "LB CPU s", "load 5 min"],
                       rows,
                       title=f"Fig. 1: M = {out['config']['m']}, k = {out['config']['k']}, "
                             f"{out['config']['workers']} workers (wall seconds)"))
    if "h5" in out:
        h = out["h5"]
        print(f"\nOut of core at N = {h['n']:.0e}: HDF5 (one process) {h['wall']:.1f} s wall, "
              f"{h['cpu']:.1f} s CPU, {h['out_of_core_iterations']} iterations reading all "
              f"of X, peak RSS {h['peak_rss'] / 2**30:.2f} GiB")
        f = next((r for r in out["runs"] if r["n"] == h["n"]), {}).get("fsa")
        if f is not None:
            print(f"Dask {f['wall']:.1f} s wall, {f['cpu']:.1f} s CPU; Dask / HDF5 time per "
                  f"byte = {f['wall'] / h['wall']:.2f}; same support: {h['same_support']}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="1e4,3e4,1e5", help="comma-separated training sizes N")
    p.add_argument("--m", type=float, default=1e4, help="features M")
    p.add_argument("--k", type=int, default=500, help="true and selected features")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-memory", default="auto",
                   help="memory limit per worker (dask syntax, e.g. 4GiB; auto = share of RAM)")
    p.add_argument("--client-memory", type=float, default=1 << 30,
                   help="FSA's max_memory: the kept columns are gathered to the client once "
                        "they fit in it (bytes)")
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--lb-rounds", type=int, default=500)
    p.add_argument("--lb-bins", type=int, default=64)
    p.add_argument("--lb-fraction", type=float, default=0.1)
    p.add_argument("--lb-max-n", type=float, default=np.inf,
                   help="skip LogitBoost above this N (its bin codes must fit the workers)")
    p.add_argument("--h5", action="store_true",
                   help="also fit the largest N from an HDF5 copy, out of core")
    p.add_argument("--h5-max-memory", type=float, default=1 << 30)
    p.add_argument("--h5-only", action="store_true",
                   help="only the HDF5 fit of the largest N (its Zarr store reused or written)")
    p.add_argument("--fsa-worker-memory", type=float, default=None,
                   help="FSA's worker_memory: bytes of kept columns persisted on the workers "
                        "(default: a quarter of their memory limits)")
    p.add_argument("--data-dir", default=os.environ.get("CVFS_SCRATCH", str(RESULTS / "data")),
                   help="where the Zarr stores go (env CVFS_SCRATCH)")
    p.add_argument("--keep-data", action="store_true", help="keep every store, not only the last")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="FSA's progress bars")
    p.add_argument("--from-json", default=None,
                   help="comma-separated result files of earlier runs: no fit, their runs "
                        "(the last file's run for each N) put together in --out, the table "
                        "printed and the figure drawn")
    p.add_argument("--quick", action="store_true", help="M = 2000, k = 100, N = 1e4, 3e4")
    p.add_argument("--out", default=str(result_path(__file__)))
    p.add_argument("--figure", default=str(result_path(__file__, suffix=".png")))
    args = p.parse_args(argv)
    if args.quick:
        args.m, args.k, args.n, args.lb_rounds = 2000, 100, "1e4,3e4", 100
    args.m = int(args.m)
    args.n = sorted(int(float(v)) for v in args.n.split(","))
    return args


def combine(files):
    """The runs of several result files, one per N (the last file's), sorted by N; the config
    and machine of the last file, without its HDF5 comparison."""
    import json

    runs, out = {}, None
    for f in files:
        out = json.loads(Path(f).read_text())
        runs.update({r["n"]: r for r in out["runs"]})
    out["runs"] = [runs[n] for n in sorted(runs)]
    out.pop("h5", None)  # the HDF5 comparison belongs to the run that made it
    out["config"]["n"] = sorted(runs)
    out["combined_from"] = [str(f) for f in files]
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        out = combine(args.from_json.split(","))
        write_json(args.out, out)
        print_table(out)
        make_figure(out, args.figure)
        return out
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("distributed", "dask"):
        logging.getLogger(name).setLevel(logging.WARNING)
    limit_threads()
    from cvfs.datasets.synthetic import true_features

    true = true_features(args.k, args.m)
    X_test, y_test = (None, None) if args.h5_only else test_set(args.n_test, args.m, args.k,
                                                                args.seed)
    out = {"machine": machine_info(), "config": {k: v for k, v in vars(args).items()},
           "runs": []}
    for n in [] if args.h5_only else args.n:
        log.info("N = %d: %.2f GB", n, n * args.m * 4e-9)
        out["runs"].append(one_n(args, n, true, X_test, y_test))
        write_json(args.out, out)
    if args.h5 or args.h5_only:
        out["h5"] = h5_compare(args, max(args.n))
        if out["runs"]:
            out["h5"]["same_support"] = (out["runs"][-1]["fsa"]["support"]
                                         == out["h5"]["support"])
    if not args.keep_data:
        shutil.rmtree(_store(args.data_dir, max(args.n), args.m, args.seed), ignore_errors=True)
    cg = cgroup_memory()
    if cg is not None:
        out["cgroup"] = {"limit": cg[0], "peak": cg[1]}
        print(f"\nmemory cgroup: limit {cg[0] / 2**30:.1f} GiB, peak {cg[1] / 2**30:.1f} GiB "
              f"(page cache included); largest store {max(args.n) * args.m * 4 / 2**30:.1f} GiB")
    write_json(args.out, out)
    print_table(out)
    make_figure(out, args.figure)
    return out


if __name__ == "__main__":
    sys.exit(main() and 0)
