"""How FSA's fit time grows with the data, against the machine's memory bandwidth.

Run ``python benchmarks/scale/scaling.py --quick`` for a small version (a minute), without flags for
the full sizes (several GB of RAM and disk; run it on a quiet machine). Prints three
tables, writes JSON (``--out``) and a log-log figure of time against N*M (``--figure``).
Every measurement runs in a fresh process (``spawn``), one at a time, single-threaded, so that
memory is returned between sections and the peak RSS of each fit is its own.

(a) grid -- fit time and data passes against N*M
    AR(1) classification data of the paper (section 3.1, rho = 0.9, k* = k true features
    x_{10 j}), float32, generated in row blocks, on the grid ``--grid-n`` x ``--grid-m`` (default
    N up to 1e5, M up to 1e4, i.e. 4 GB at the largest cell). FSA (``--loss``, default logistic)
    with default parameters and ``k`` (default 100) is fitted ``--repeats`` times per cell after
    a JIT warm-up; we report the median CPU and wall time and the passes over X: "kept" =
    sum_e M_e / M and "touched" = every byte the fit read or wrote (statistics pass, the
    columns each iteration read, ``history_["width"]``, and each compaction's copy).
    Bandwidth bound: ``X @ b`` (single-thread BLAS gemv, best repetition over >= 0.5 s) on the
    same array gives bandwidth = N*M*itemsize / time; the bound of a fit is
    touched * N*M*itemsize / bandwidth, and we report time / bound (and time / the kept-columns
    bound).

(b) equicorrelated -- the large data of section 3.1.3 scaled to the available memory
    x_i = alpha z_i 1 + eps_i (eq. 18, alpha = 0.5), M = 1e5, k = k* = 500, FSA-Lorenz. N is
    ``--eq-n``; ``auto`` takes the largest multiple of 5000 whose float32 X fits in 30% of the
    available memory (capped at 5e4). PCD on the training fit, AUC on min(N, 1e4) test rows,
    time, data passes, bound as in (a), and the peak RSS of the fitting process (``VmHWM``).

(c) hdf5 -- out of core
    ``cvfs.datasets.synthetic.write_equicorrelated_h5`` writes N = ``--h5-n`` rows (default 1e4,
    M = 1e5 float32: 4 GB) to ``--h5-path``. FSA-Lorenz is fitted once from the open
    ``h5py.Dataset`` with ``max_memory`` (default 1 GiB, a quarter of the file) and once from the
    same rows read into memory first (read time not counted). We report both times, their ratio
    (target: at most 3x) and the peak RSS of each process. The file was just written, so its
    pages are likely in the OS cache: the run measures the blocked reading path, not the disk.

Acceptance points checked at the end: data passes of annealing <= 6 at mu = 300; time <= 2x the
bandwidth bound at N*M >= 1e8; HDF5 run within 3x the in-memory time.
"""

import argparse
import logging
import math
import multiprocessing as mp
import os
import resource
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import (
    format_table,
    fsa_estimator,
    limit_threads,
    machine_info,
    result_path,
    timed,
    write_json,
)

log = logging.getLogger("scaling")

FULL = {"grid_n": [1000, 3000, 10_000, 30_000, 100_000], "grid_m": [1000, 10_000], "k": 100,
        "eq_m": 100_000, "eq_k": 500, "eq_n": "auto", "h5_n": 10_000, "max_memory": 1 << 30}
QUICK = {"grid_n": [1000, 10_000], "grid_m": [1000, 10_000], "k": 50,
         "eq_m": 10_000, "eq_k": 100, "eq_n": "4000", "h5_n": 4000, "max_memory": 40 << 20}
BLOCK_ELEMS = 1 << 23  # rows generated at a time: 8M values (64 MB in float64)


# --------------------------------------------------------------------------------------------
# Helpers that run inside the worker processes
# --------------------------------------------------------------------------------------------
def _proc_status_bytes(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _peak_rss_bytes():
    """Peak resident memory of this process.

    ``getrusage().ru_maxrss`` survives ``exec`` on Linux: a spawned worker inherits the peak of
    the parent at fork time. The process's own high-water mark ``VmHWM`` (/proc/self/status)
    does not, so it is preferred; ``ru_maxrss`` is the fallback off Linux.
    """
    hwm = _proc_status_bytes("VmHWM")
    if hwm is not None:
        return hwm
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux units: KiB


def _warm_up(loss, out_of_core=False):
    """Compile (or load from numba's cache) every kernel the timed fits use, outside the timing:
    in-memory float32 fits on narrow and on wide rows (one and four rows per sweep) and, with
    ``out_of_core``, a fit from a small HDF5 file read in row blocks."""
    import tempfile

    from cvfs.datasets.synthetic import make_ar1_classification

    for m in (300, 2100):
        X, y, _ = make_ar1_classification(300, m, 5, dtype=np.float32, random_state=1)
        fsa_estimator(loss, 5, 0).fit(X, y)
    if out_of_core:
        import h5py

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "warm.h5"
            with h5py.File(path, "w") as f:
                f["X"] = X
            with h5py.File(path, "r") as f:
                _fit(loss, 5, f["X"], y, 0, max_memory=X.nbytes // 4)


def _ar1_classification_blocks(n, m, k, seed, dtype=np.float32):
    """The paper's AR(1) classification data, generated block by block (no float64 copy)."""
    from cvfs.datasets.synthetic import ar1_design, true_features

    rng = np.random.default_rng(seed)
    true = true_features(k, m)
    X = np.empty((n, m), dtype=dtype)
    rows = max(1, BLOCK_ELEMS // m)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        X[r0:r1] = ar1_design(r1 - r0, m, 0.9, dtype, rng)
    y = (X[:, true].sum(axis=1, dtype=np.float64) > 0).astype(np.int64)
    return X, y, true


def _bandwidth(X, min_time=0.5, max_reps=200):
    """Streaming bandwidth (bytes/s) of ``X @ b`` and ``X.T @ r``: best and median repetition."""
    out = {}
    b = np.ones(X.shape[1], X.dtype)
    r = np.ones(X.shape[0], X.dtype)
    for name, op in (("Xb", lambda: X @ b), ("XTr", lambda: X.T @ r)):
        op()
        times = []
        while (sum(times) < min_time or len(times) < 3) and len(times) < max_reps:
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
        out[name + "_best"] = X.nbytes / min(times)
        out[name + "_median"] = X.nbytes / float(np.median(times))
    return out


def _fit(loss, k, X, y, seed, max_memory=None):
    """One timed FSA fit; returns (estimator, record)."""
    import inspect

    est = fsa_estimator(loss, k, seed)
    fit_kw = {}
    if max_memory is not None:
        if "max_memory" in est.get_params():
            est.set_params(max_memory=max_memory)
        elif "max_memory" in inspect.signature(est.fit).parameters:
            fit_kw["max_memory"] = max_memory
        else:
            raise RuntimeError("the FSA estimator takes no max_memory")
    with timed() as t:
        est.fit(X, y, **fit_kw)
    hist = getattr(est, "history_", None) or {}
    rec = {"cpu": t["cpu"], "wall": t["wall"]}
    if "data_passes" in hist:
        rec["data_passes"] = float(hist["data_passes"])
    if "width" in hist:
        rec["passes_touched"] = passes_touched(hist, X.shape[1])
    if "n_kept" in hist:
        kept = np.asarray(hist["n_kept"], dtype=np.float64)
        rec["n_iter"] = int(kept.size)
        rec["passes_annealing"] = float(np.sum(np.maximum(kept - k, 0)) / X.shape[1])
        rec["passes_kept"] = float((X.shape[1] + kept[:-1].sum()) / X.shape[1])
    if "time" in hist:
        rec["history_time"] = float(hist["time"])
    if "lr" in hist and np.size(hist["lr"]):
        rec["lr_first"] = float(np.ravel(hist["lr"])[0])
    return est, rec


def _test_auc(est, m, k, n_test, seed):
    """AUC on an independent equally-correlated test set, generated and scored in blocks."""
    from sklearn.metrics import roc_auc_score

    from cvfs.datasets.synthetic import make_equicorrelated_classification

    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_ELEMS // m)
    scores, labels = [], []
    for r0 in range(0, n_test, rows):
        Xt, yt, _ = make_equicorrelated_classification(min(rows, n_test - r0), m, k,
                                                       random_state=rng)
        scores.append(np.asarray(est.decision_function(Xt), dtype=np.float64))
        labels.append(yt)
    return float(roc_auc_score(np.concatenate(labels), np.concatenate(scores)))


def _pcd(support, true):
    return 100.0 * np.intersect1d(support, true).size / true.size


def grid_job(n, m, k, loss, repeats, seed):
    """Section (a), one cell, in a worker process."""
    limit_threads()
    warnings.filterwarnings("ignore")
    _warm_up(loss)
    with timed() as tg:
        X, y, true = _ar1_classification_blocks(n, m, k, seed)
    out = {"n": n, "m": m, "k": k, "loss": loss, "itemsize": X.itemsize,
           "nbytes": X.nbytes, "gen_wall": tg["wall"], "bandwidth": _bandwidth(X)}
    fits = []
    for r in range(repeats):
        est, rec = _fit(loss, k, X, y, seed + r)
        rec["pcd"] = _pcd(est.get_support(indices=True), true)
        fits.append(rec)
    out["fits"] = fits
    out["peak_rss"] = _peak_rss_bytes()
    return out


def eq_job(n, m, k, loss, seed, n_test):
    """Section (b) in a worker process."""
    from cvfs.datasets.synthetic import make_equicorrelated_classification

    limit_threads()
    warnings.filterwarnings("ignore")
    _warm_up(loss)
    rss0 = _peak_rss_bytes()
    with timed() as tg:
        X, y, true = make_equicorrelated_classification(n, m, k, random_state=seed)
    out = {"n": n, "m": m, "k": k, "loss": loss, "itemsize": X.itemsize, "nbytes": X.nbytes,
           "gen_wall": tg["wall"], "rss_before_data": rss0, "bandwidth": _bandwidth(X)}
    est, rec = _fit(loss, k, X, y, seed)
    out["peak_rss"] = _peak_rss_bytes()
    del X
    rec["pcd"] = _pcd(est.get_support(indices=True), true)
    rec["auc"] = _test_auc(est, m, k, n_test, seed + 1_000_003)
    out["fits"] = [rec]
    return out


def h5_job(path, mode, k, loss, seed, max_memory, n_test):
    """Section (c) in a worker process: ``mode`` is "hdf5" (fit from the file with max_memory)
    or "memory" (read the rows first)."""
    import h5py

    from cvfs.datasets.synthetic import true_features

    limit_threads()
    warnings.filterwarnings("ignore")
    _warm_up(loss, out_of_core=mode == "hdf5")
    rss0 = _peak_rss_bytes()
    out = {"mode": mode, "rss_before_data": rss0}
    with h5py.File(path, "r") as f:
        dX = f["X"]
        n, m = dX.shape
        y = f["y"][...]
        true = true_features(k, m)
        out.update(n=n, m=m, k=k, loss=loss, nbytes=dX.size * dX.dtype.itemsize)
        if mode == "memory":
            with timed() as tr:
                X = dX[...]
            out["read_wall"] = tr["wall"]
            est, rec = _fit(loss, k, X, y, seed)
            del X
        else:
            out["max_memory"] = max_memory
            est, rec = _fit(loss, k, dX, y, seed, max_memory=max_memory)
    out["peak_rss"] = _peak_rss_bytes()
    rec["pcd"] = _pcd(est.get_support(indices=True), true)
    rec["auc"] = _test_auc(est, m, k, n_test, seed + 1_000_003)
    out["fits"] = [rec]
    return out


def run_isolated(func, *args):
    """Run ``func(*args)`` in a fresh spawned process and return its result."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(func, *args).result()


# --------------------------------------------------------------------------------------------
# Summaries, tables, figure
def passes_touched(hist, m):
    """Bytes a fit touched, in full passes over X: the statistics passes, the columns each
    iteration read (``history["width"]``), and each compaction's copy (read the old width,
    write the new one; a drop of the recorded width marks one)."""
    w = np.asarray(hist["width"], dtype=np.float64)
    drops = np.flatnonzero(np.diff(w) < 0)
    copies = float(np.sum(w[drops] + w[drops + 1]))
    return float(hist.get("stat_passes", 1)) + (w.sum() + copies) / m


# --------------------------------------------------------------------------------------------
def summarise(job):
    """Median time over the fits, passes, bound and the ratios."""
    fits = job["fits"]
    s = {"cpu": float(np.median([f["cpu"] for f in fits])),
         "wall": float(np.median([f["wall"] for f in fits])),
         "pcd": float(np.mean([f["pcd"] for f in fits]))}
    for key in ("data_passes", "passes_touched", "passes_kept", "passes_annealing", "auc",
                "lr_first"):
        vals = [f[key] for f in fits if key in f]
        if vals:
            s[key] = float(np.median(vals))
    bw = job.get("bandwidth", {}).get("Xb_best")
    if bw and "passes_touched" in s:
        # bound: every byte the fit touched streamed at the speed of X @ b
        s["bound"] = s["passes_touched"] * job["nbytes"] / bw
        s["cpu_over_bound"] = s["cpu"] / s["bound"]
        s["wall_over_bound"] = s["wall"] / s["bound"]
        # the same against the bytes of the kept columns alone (sum_e M_e / M passes): what an
        # ideal working set that shrank every iteration, copied for free, would read
        s["bound_kept"] = s["passes_kept"] * job["nbytes"] / bw
        s["cpu_over_bound_kept"] = s["cpu"] / s["bound_kept"]
    return s


def _f(x, fmt):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def _gb(x):
    return None if x is None else f"{x / 1e9:.2f}"


def print_grid(jobs):
    headers = ["N", "M", "N*M", "GB", "Xb GB/s", "XTr GB/s", "kept", "touched", "anneal",
               "CPU s", "wall s", "bound s", "CPU/bound", "CPU/kept", "PCD"]
    rows = []
    for j in jobs:
        s, bw = j["summary"], j["bandwidth"]
        rows.append([str(j["n"]), str(j["m"]), f"{j['n'] * j['m']:.0e}", _gb(j["nbytes"]),
                     _gb(bw["Xb_best"]), _gb(bw["XTr_best"]), _f(s.get("passes_kept"), ".2f"),
                     _f(s.get("passes_touched"), ".2f"),
                     _f(s.get("passes_annealing"), ".2f"), _f(s["cpu"], ".3f"),
                     _f(s["wall"], ".3f"), _f(s.get("bound"), ".3f"),
                     _f(s.get("cpu_over_bound"), ".2f"), _f(s.get("cpu_over_bound_kept"), ".2f"),
                     _f(s["pcd"], ".1f")])
    loss, k = jobs[0]["loss"], jobs[0]["k"]
    print(format_table(headers, rows, title=f"(a) FSA-{loss}, k={k}, float32 AR(1) data, single "
                       "thread; passes over X: kept = sum_e M_e / M, touched = statistics + "
                       "columns read + compaction copies; bound = touched x bytes / "
                       "bandwidth(X @ b); CPU/kept = CPU time / (kept x bytes / bandwidth)"))
    print()


def print_eq(job):
    s = job["summary"]
    headers = ["N", "M", "k", "GB", "passes", "CPU s", "wall s", "CPU/bound", "PCD", "AUC",
               "RSS before GB", "peak RSS GB"]
    rows = [[str(job["n"]), str(job["m"]), str(job["k"]), _gb(job["nbytes"]),
             _f(s.get("data_passes"), ".2f"), _f(s["cpu"], ".2f"), _f(s["wall"], ".2f"),
             _f(s.get("cpu_over_bound"), ".2f"), _f(s["pcd"], ".1f"), _f(s.get("auc"), ".4f"),
             _gb(job["rss_before_data"]), _gb(job["peak_rss"])]]
    print(format_table(headers, rows, title=f"(b) equally correlated data (eq. 18, alpha=0.5), "
                       f"FSA-{job['loss']}, one run"))
    print()


def print_h5(jobs, ratio, cpu_ratio):
    headers = ["source", "N", "M", "file GB", "max_memory GB", "CPU s", "wall s", "PCD", "AUC",
               "RSS before GB", "peak RSS GB"]
    rows = [[j["mode"], str(j["n"]), str(j["m"]), _gb(j["nbytes"]), _gb(j.get("max_memory")),
             _f(j["summary"]["cpu"], ".2f"), _f(j["summary"]["wall"], ".2f"),
             _f(j["summary"]["pcd"], ".1f"), _f(j["summary"].get("auc"), ".4f"),
             _gb(j["rss_before_data"]), _gb(j["peak_rss"])] for j in jobs]
    print(format_table(headers, rows, title=f"(c) out of core: HDF5 vs in memory, time ratio "
                       f"{ratio:.2f} wall, {cpu_ratio:.2f} CPU"))
    print()


def make_figure(out, path):
    import matplotlib.pyplot as plt

    from cvfs.viz import save_figure

    fig, ax = plt.subplots(figsize=(6, 4.5))
    grid = out.get("grid") or []
    for m in sorted({j["m"] for j in grid}):
        js = sorted((j for j in grid if j["m"] == m), key=lambda j: j["n"])
        nm = [j["n"] * j["m"] for j in js]
        line = ax.loglog(nm, [j["summary"]["cpu"] for j in js], "o-", label=f"FSA, M={m}")
        if all("bound" in j["summary"] for j in js):
            ax.loglog(nm, [j["summary"]["bound"] for j in js], "--",
                      color=line[0].get_color(), label=f"bandwidth bound, M={m}")
    if out.get("eq"):
        j = out["eq"]
        ax.loglog([j["n"] * j["m"]], [j["summary"]["cpu"]], "s", label="equicorrelated")
    for j in out.get("h5") or []:
        ax.loglog([j["n"] * j["m"]], [j["summary"]["wall"]], "^" if j["mode"] == "hdf5" else "v",
                  label=f"{j['mode']} (wall)")
    ax.set_xlabel("N x M")
    ax.set_ylabel("fit time (s, CPU unless noted)")
    ax.set_title("FSA fit time against data size (single thread, float32)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def acceptance(out):
    checks = []
    for j in (out.get("grid") or []) + ([out["eq"]] if out.get("eq") else []):
        s = j["summary"]
        if "passes_annealing" in s:
            checks.append({"check": f"annealing passes N={j['n']} M={j['m']}",
                           "value": round(s["passes_annealing"], 2), "target": "<= 6",
                           "pass": s["passes_annealing"] <= 6})
        if j["n"] * j["m"] >= 1e8 and "cpu_over_bound" in s:
            name = "equicorrelated " if j is out.get("eq") else ""
            checks.append({"check": f"CPU time / bandwidth bound {name}N={j['n']} M={j['m']}",
                           "value": round(s["cpu_over_bound"], 2), "target": "<= 2",
                           "pass": s["cpu_over_bound"] <= 2})
    if out.get("h5_ratio") is not None:
        checks.append({"check": "HDF5 / in-memory wall time", "value": round(out["h5_ratio"], 2),
                       "target": "<= 3", "pass": out["h5_ratio"] <= 3})
        checks.append({"check": "HDF5 / in-memory CPU time",
                       "value": round(out["h5_cpu_ratio"], 2), "target": "<= 3",
                       "pass": out["h5_cpu_ratio"] <= 3})
        j = out["h5"][0]
        excess = j["peak_rss"] - j["rss_before_data"]
        # the solver's documented bound: max_memory + 3 row blocks (64 MiB each) + O(M) tables
        # (a few float64 arrays of M (G + 3) values)
        bound = j["max_memory"] + 3 * (64 << 20) + 16 * 8 * j["m"]
        checks.append({"check": "HDF5 fit: peak RSS - RSS before data (GB)",
                       "value": round(excess / 1e9, 2),
                       "target": f"<= max_memory {j['max_memory'] / 1e9:.2f} + 3 x 64 MiB"
                                 " + O(M)",
                       "pass": excess <= bound})
    return checks


def print_acceptance(checks):
    if not checks:
        return
    rows = [[c["check"], str(c["value"]), c["target"], "PASS" if c["pass"] else "FAIL"]
            for c in checks]
    print(format_table(["targets", "value", "target", ""], rows))
    print()


# --------------------------------------------------------------------------------------------
def _available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _eq_n(spec, m):
    if spec != "auto":
        return int(float(spec))
    fit = int(0.30 * _available_memory() / (4 * m))
    return int(min(50_000, max(5000, fit // 5000 * 5000)))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    p.add_argument("--sections", nargs="+", default=["grid", "eq", "h5"],
                   choices=["grid", "eq", "h5"])
    p.add_argument("--loss", default="logistic", help="FSA loss of the grid (a)")
    p.add_argument("--eq-loss", default="lorenz", help="FSA loss of (b) and (c)")
    p.add_argument("--k", type=int, help="features selected in the grid (default 100; quick 50)")
    p.add_argument("--grid-n", type=float, nargs="+", help="N values of the grid")
    p.add_argument("--grid-m", type=float, nargs="+", help="M values of the grid")
    p.add_argument("--repeats", type=int, default=None,
                   help="fits per grid cell (default 3, 1 when N*M > 1e8)")
    p.add_argument("--eq-n", help="N of (b): a number or 'auto' (largest that fits)")
    p.add_argument("--eq-m", type=float, help="M of (b) and (c) (default 1e5)")
    p.add_argument("--eq-k", type=int, help="k = k* of (b) and (c) (default 500)")
    p.add_argument("--h5-n", type=float, help="rows of the HDF5 file of (c) (default 1e4)")
    p.add_argument("--h5-path", default=None,
                   help="HDF5 file of (c) (default benchmarks/results/scale/equicorrelated_NxM.h5)")
    p.add_argument("--keep-h5", action="store_true", help="keep (and reuse) the HDF5 file")
    p.add_argument("--max-memory", type=float, help="bytes the HDF5 fit may hold (default 1 GiB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(result_path(__file__)))
    p.add_argument("--figure", default=str(result_path(__file__, suffix=".png")))
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    from tqdm.auto import tqdm

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    limit_threads()  # also sets the thread variables the workers inherit
    cfg = dict(QUICK if args.quick else FULL)
    for key in ("k", "grid_n", "grid_m", "eq_n", "eq_m", "eq_k", "h5_n", "max_memory"):
        val = getattr(args, key)
        if val is not None:
            cfg[key] = val
    cfg["grid_n"] = [int(v) for v in cfg["grid_n"]]
    cfg["grid_m"] = [int(v) for v in cfg["grid_m"]]
    cfg["eq_m"], cfg["h5_n"] = int(cfg["eq_m"]), int(cfg["h5_n"])
    cfg["max_memory"] = int(cfg["max_memory"])

    meta = machine_info()
    meta.update(argv=sys.argv[1:] if argv is None else list(argv), config=cfg,
                loss=args.loss, eq_loss=args.eq_loss, quick=args.quick)
    out = {"meta": meta, "grid": None, "eq": None, "h5": None, "h5_ratio": None,
           "h5_cpu_ratio": None}

    if "grid" in args.sections:
        cells = [(n, m) for m in cfg["grid_m"] for n in cfg["grid_n"]]
        out["grid"] = []
        for n, m in tqdm(cells, desc="(a) grid"):
            reps = args.repeats or (3 if n * m <= 1e8 else 1)
            job = run_isolated(grid_job, n, m, cfg["k"], args.loss, reps, args.seed)
            job["summary"] = summarise(job)
            out["grid"].append(job)
            write_json(args.out, out)
        print_grid(out["grid"])

    if "eq" in args.sections:
        n = _eq_n(cfg["eq_n"], cfg["eq_m"])
        log.info("equicorrelated: N=%d, M=%d (%.1f GB)", n, cfg["eq_m"], n * cfg["eq_m"] * 4e-9)
        job = run_isolated(eq_job, n, cfg["eq_m"], cfg["eq_k"], args.eq_loss, args.seed,
                           min(n, 10_000))
        job["summary"] = summarise(job)
        out["eq"] = job
        write_json(args.out, out)
        print_eq(job)

    if "h5" in args.sections:
        from cvfs.datasets.synthetic import write_equicorrelated_h5

        n, m = cfg["h5_n"], cfg["eq_m"]
        path = Path(args.h5_path or result_path(__file__, f"equicorrelated_{n}x{m}", ".h5"))
        nbytes = n * m * 4
        if nbytes <= cfg["max_memory"]:
            log.warning("the HDF5 file (%d bytes) is not larger than max_memory (%d)",
                        nbytes, cfg["max_memory"])
        if not (args.keep_h5 and path.exists()):
            with timed() as tw:
                write_equicorrelated_h5(path, n, m, k_true=cfg["eq_k"], chunk_rows=1024,
                                        random_state=args.seed)
            log.info("wrote %s in %.1f s", path, tw["wall"])
        try:
            jobs = []
            for mode in tqdm(("hdf5", "memory"), desc="(c) hdf5"):
                job = run_isolated(h5_job, str(path), mode, cfg["eq_k"], args.eq_loss,
                                   args.seed, cfg["max_memory"], min(n, 10_000))
                job["summary"] = summarise(job)
                jobs.append(job)
        finally:
            if not args.keep_h5:
                path.unlink(missing_ok=True)
        out["h5"] = jobs
        out["h5_ratio"] = jobs[0]["summary"]["wall"] / jobs[1]["summary"]["wall"]
        out["h5_cpu_ratio"] = jobs[0]["summary"]["cpu"] / jobs[1]["summary"]["cpu"]
        write_json(args.out, out)
        print_h5(jobs, out["h5_ratio"], out["h5_cpu_ratio"])

    out["acceptance"] = acceptance(out)
    print_acceptance(out["acceptance"])
    meta["loadavg_end"] = list(os.getloadavg())
    write_json(args.out, out)
    make_figure(out, args.figure)
    print(f"wrote {args.out} and {args.figure}  (load average start "
          f"{meta['loadavg_start'][0]:.2f}, end {meta['loadavg_end'][0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
