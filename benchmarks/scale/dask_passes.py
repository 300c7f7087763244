"""Where an FSA-Lorenz fit on Dask spends its CPU and I/O, pass by pass (the Fig. 1 setup).

Fits ``cvfs.FSAClassifier(loss="lorenz", k=500)`` on the equally correlated Zarr store of
``benchmarks/scale/large_data.py`` (written there if missing) on a ``distributed.LocalCluster`` of
two single-threaded worker processes, with the store dropped from the page cache first. A
sampler thread reads, every 0.2 s, the user and system CPU seconds (``/proc/PID/stat``) and the
bytes read from and written to the block device (``/proc/PID/io``) of the client and both
workers; they are attributed to the passes of ``history_["dask"]["passes"]`` by the passes'
end times. Printed per kind of pass: count, wall seconds, client and worker user/system CPU
seconds, device bytes, and the layout's own bytes (``read_bytes``: the kept width read,
``spill_read_bytes``: read back from the spill files, ``written_bytes``: written to them).
The numba in-memory loop after the gather holds the client's GIL, so its CPU shows in the
row after the gather (its own wall/CPU seconds are printed below the table).

    python benchmarks/scale/dask_passes.py --n 1e5 --client-memory 4e8 --fsa-worker-memory 6e8 \
        --data-dir DIR      # 4 GB store; kept columns spilled after the first drop
"""

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, machine_info, result_path, write_json
from benchmarks.scale import large_data as L

TCK = os.sysconf("SC_CLK_TCK")


def _usage(pid):
    """[user s, system s, device bytes read, device bytes written] of process ``pid``."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return [int(f[11]) / TCK, int(f[12]) / TCK, int(io["read_bytes"]), int(io["write_bytes"])]


def profile(args):
    L.limit_threads()
    path, _ = L.ensure_store(args.data_dir, args.n, args.m, args.k, args.seed)
    cluster, client = L._start_cluster(2, "auto")
    try:
        client.run(L.limit_threads)
        L.warm_up(client)
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        samples, stop = [], threading.Event()

        def sampler():
            while not stop.is_set():
                samples.append((time.time(), [u for p in pids for u in _usage(p)],
                                os.getloadavg()[0]))
                time.sleep(0.2)

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        t0 = time.time()
        est, wall, cpu = L.run_fsa(client, path, args.k, args.seed, int(args.client_memory),
                                   int(args.fsa_worker_memory))
        time.sleep(0.3)
        stop.set()
        th.join()
    finally:
        client.close()
        cluster.close()
    S = np.array([s[0] for s in samples])
    C = np.array([s[1] for s in samples], float)
    load = [s[2] for s in samples]

    def at(t):
        return C[min(np.searchsorted(S, t), len(S) - 1)]

    dk = est.history_["dask"]
    P = dk["passes"]
    spill_read = P.get("spill_read_bytes", [0] * len(P["pass"]))
    rows, prev = [], t0
    for i, name in enumerate(P["pass"]):
        end, sec = P["ended"][i], P["seconds"][i]
        start = end - sec
        if start - prev > 0.3:
            rows.append(("(client)", start - prev, at(start) - at(prev), 0, 0, 0))
        rows.append((name, sec, at(end) - at(start), P["read_bytes"][i],
                     spill_read[i], P["written_bytes"][i]))
        prev = end
    rows.append(("after gather", t0 + wall - prev, at(t0 + wall) - at(prev), 0, 0, 0))
    agg = {}
    for name, sec, use, rb, sr, wb in rows:
        a = agg.setdefault(name, [0, 0.0, np.zeros(12), 0, 0, 0])
        a[0] += 1
        a[1] += sec
        a[2] += use
        a[3] += rb
        a[4] += sr
        a[5] += wb
    table = []
    for name, (cnt, sec, u, rb, sr, wb) in agg.items():
        table.append([name, cnt, f"{sec:.1f}", f"{u[0]:.1f}", f"{u[1]:.1f}",
                      f"{u[4] + u[8]:.1f}", f"{u[5] + u[9]:.1f}",
                      f"{(u[2] + u[6] + u[10]) / 1e9:.2f}", f"{(u[3] + u[7] + u[11]) / 1e9:.2f}",
                      f"{rb / 1e9:.2f}", f"{sr / 1e9:.2f}", f"{wb / 1e9:.2f}"])
    print(format_table(["pass", "count", "wall s", "client usr", "client sys", "workers usr",
                        "workers sys", "device read GB", "device written GB", "width read GB",
                        "spill read GB", "spill written GB"], table,
                       title=f"FSA-Lorenz on Dask, N = {args.n:.0e}, M = {args.m}: wall "
                             f"{wall:.1f} s, CPU {cpu:.1f} s, load {min(load):.1f}-"
                             f"{max(load):.1f}"))
    print(f"in-memory loop: {dk['in_memory_seconds']:.1f} s wall, "
          f"{dk['in_memory_cpu_seconds']:.1f} s CPU; spilled after iteration "
          f"{dk['spilled_at']}, persisted after {dk['persisted_at']}, "
          f"{est.history_['out_of_core_iterations']} iterations on the workers")
    out = {"machine": machine_info(), "config": vars(args), "wall": wall, "cpu": cpu,
           "load": [min(load), max(load), float(np.mean(load))], "table": table,
           "passes": P, "support": est.get_support(indices=True).tolist(),
           "coef": est.coef_.ravel().tolist(),
           "in_memory": [dk["in_memory_seconds"], dk["in_memory_cpu_seconds"]]}
    write_json(args.out, out)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e5)
    p.add_argument("--m", type=int, default=10_000)
    p.add_argument("--k", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--client-memory", type=float, default=4e8)
    p.add_argument("--fsa-worker-memory", type=float, default=6e8)
    p.add_argument("--data-dir", default=os.environ.get("CVFS_SCRATCH",
                                                        str(L.RESULTS / "data")))
    p.add_argument("--out", default=str(result_path(__file__)))
    args = p.parse_args(argv)
    args.n = int(args.n)
    return profile(args)


if __name__ == "__main__":
    main()
