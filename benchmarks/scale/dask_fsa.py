"""FSA on one data set held four ways: in memory, HDF5 read in row blocks, Zarr through Dask's
threaded scheduler, and Zarr on a local cluster of worker processes.

Run ``python benchmarks/scale/dask_fsa.py`` (default 20000 x 2000 float32, k = 50; a few minutes) or
``--n 4000 --m 500`` for a quick look. Writes ``benchmarks/results/scale/dask_fsa.json``.

Data
    ``make_ar1_classification(n, m, k_true=k)`` (paper section 3.1.2), float32, logistic loss,
    default FSA parameters (500 iterations, mu = 300).

Layouts
    memory: the ndarray. hdf5: an ``h5py.Dataset`` (row chunks of 1000 rows) with
    ``max_memory = X.nbytes // 8``. dask-*: ``da.from_zarr`` of a Zarr store with row chunks of
    ``--chunk-rows`` rows, the same ``max_memory``; ``persist`` keeps the default
    ``worker_memory`` (X fits: it is persisted on the workers before the statistics pass),
    ``stream`` sets ``worker_memory = X.nbytes // 3`` (after the first drop the kept columns go
    to the workers' disk until they fit).
    cluster: ``distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``.

Metrics
    best wall seconds of ``--repeats`` fits (the cluster's CPU is in other processes, so no CPU
    column), whether the support equals the in-memory one, max |coef - coef_memory|, the
    iterations before the kept columns were gathered, and bytes moved between client and workers
    per iteration (median over the iterations on persisted columns) and over the whole fit.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import (
    format_table,
    limit_threads,
    result_path,
    timed,
    write_json,
)


def _fit(X, y, k, **kw):
    from cvfs.core.fsa import fsa_fit

    with timed() as t:
        res = fsa_fit(X, y, k, loss="logistic", **kw)
    return res, t["wall"]


def _best(run, repeats):
    """The result of ``run()`` and its best wall seconds over ``repeats`` calls."""
    best = None
    for _ in range(max(1, repeats)):
        res, wall = run()
        best = wall if best is None else min(best, wall)
    return res, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--m", type=int, default=2000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--chunk-rows", type=int, default=2500)
    ap.add_argument("--repeats", type=int, default=2, help="fits per layout (best time kept)")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    import dask
    import dask.array as da
    import distributed
    import h5py

    from cvfs.datasets.synthetic import make_ar1_classification

    X, y01, _ = make_ar1_classification(args.n, args.m, k_true=args.k, dtype=np.float32,
                                        random_state=0)
    y = np.where(y01 > 0, 1.0, -1.0)
    max_memory = X.nbytes // 8
    small = (X[:2000, :200].copy(), y[:2000])  # JIT warm-up, here and on the workers
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with h5py.File(Path(tmp) / "x.h5", "w") as f:
            f.create_dataset("X", data=X, chunks=(1000, args.m))
        da.from_array(X, chunks=(args.chunk_rows, args.m)).to_zarr(str(Path(tmp) / "x.zarr"))
        Xz = da.from_zarr(str(Path(tmp) / "x.zarr"))
        _fit(*small, 10)
        _fit(da.from_array(small[0], chunks=(500, 200)), small[1], 10, max_memory=1 << 16)
        ref, t_mem = _fit(X, y, args.k)
        runs = [("memory", None, lambda: _fit(X, y, args.k))]
        h5 = h5py.File(Path(tmp) / "x.h5", "r")
        runs.append(("hdf5", None, lambda: _fit(h5["X"], y, args.k, max_memory=max_memory)))
        for sched in ("threads", "cluster"):
            runs.append((f"dask-{sched} persist", sched,
                         lambda: _fit(Xz, y, args.k, max_memory=max_memory)))
            runs.append((f"dask-{sched} stream", sched,
                         lambda: _fit(Xz, y, args.k, max_memory=max_memory,
                                      worker_memory=X.nbytes // 3)))
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster, set_as_default=False)
        try:
            for name, sched, run in tqdm(runs, desc="layouts"):
                if sched == "cluster":
                    with client.as_current():
                        if "persist" in name:  # warm the workers' JIT caches
                            _fit(da.from_array(small[0], chunks=(500, 200)), small[1], 10,
                                 max_memory=1 << 16)
                        res, wall = _best(run, args.repeats)
                else:
                    with dask.config.set(scheduler="threads"):
                        res, wall = _best(run, args.repeats)
                h = res.history
                tr = h.get("dask")
                per_it = total = None
                if tr is not None:
                    done = tr["persisted_at"]
                    e0 = 1 if not done or done[0] == "start" else done[0] + 1
                    e1 = h["out_of_core_iterations"]
                    moved = tr["sent_bytes"] + tr["received_bytes"]
                    per_it = float(np.median(moved[e0:e1])) if e1 > e0 else None
                    total = int(sum(tr["passes"]["sent_bytes"])
                                + sum(tr["passes"]["received_bytes"]))
                rows.append({
                    "layout": name, "wall_s": wall,
                    "same_support": bool(np.array_equal(res.support, ref.support)),
                    "max_coef_diff": float(np.max(np.abs(res.coef - ref.coef))),
                    "iterations_before_gather": int(h["out_of_core_iterations"]),
                    "bytes_per_iteration": per_it, "bytes_total": total,
                    "n_chunks": None if tr is None else tr["n_chunks"],
                })
        finally:
            client.close()
            cluster.close()
            h5.close()
    headers = ["layout", "wall s", "same support", "max |dcoef|", "iters before gather",
               "bytes/iter", "bytes total"]
    table = [[r["layout"], f"{r['wall_s']:.2f}", str(r["same_support"]),
              f"{r['max_coef_diff']:.1e}", str(r["iterations_before_gather"]),
              None if r["bytes_per_iteration"] is None else f"{r['bytes_per_iteration']:.0f}",
              None if r["bytes_total"] is None else f"{r['bytes_total']}"] for r in rows]
    print(format_table(headers, table, title=f"FSA logistic, {args.n} x {args.m} float32, "
                                              f"k = {args.k}, max_memory = X/8"))
    write_json(args.out, {"args": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
