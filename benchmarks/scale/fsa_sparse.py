"""FSA on scipy.sparse input: peak memory against the matrix's size, fit time, support recovery.

Run ``python benchmarks/scale/fsa_sparse.py`` (N x M = 1e4 x 1e5 and 3e4 x 3e5 at 0.1% density,
about a minute) or ``--full`` to add 1e5 x 1e6 (1e8 stored entries, 1.2 GB as float64 CSR; about two
minutes and 3 GB of RAM). Writes ``benchmarks/results/scale/fsa_sparse.json``.

Data (fixed seed, generated in row chunks straight into the CSR arrays)
    Every row stores ``density * M`` entries, one in each of as many equal column strata, at a
    uniform position in the stratum (so no duplicates and sorted indices), values N(0, 1).
    k = 100 true columns, each in its own stratum, take that stratum's entry of a row with
    probability ``--p-true`` (0.05): they are denser than the others. y = X w0 + 0.1 e with
    w0 = +-U(1, 2) on the true columns (regression, squared loss).

Method
    ``cvfs.FSARegressor(k=100)`` with default parameters on the CSR matrix (``--format csc``:
    converted to CSC before the fit; ``--bins B``: piecewise-linear responses), single-threaded,
    each size in a fresh process (``--one`` runs one size in this process).

Metrics
    matrix bytes (data + indices + indptr), peak RSS of the process during the fit (``VmHWM``
    reset before the fit; it includes the interpreter, numba and the matrix), the RSS before the
    fit, peak / matrix bytes and
    (peak - RSS before the fit) / matrix bytes (what the fit adds), fit wall and CPU seconds,
    iterations run on the sparse layout, precision of the selected support (= recall: both k).
"""

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
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

log = logging.getLogger("fsa_sparse")

SIZES = [(10_000, 100_000), (30_000, 300_000)]
FULL = (100_000, 1_000_000)


def make_sparse(n, m, density=1e-3, k=100, p_true=0.05, seed=0, chunk_rows=4096,
                verbose=False):
    """CSR X (n, m) with ``round(density * m)`` stored entries per row, planted true columns,
    and regression targets; returns (X, y, true columns)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    r = max(1, round(density * m))  # entries per row = column strata
    width = m // r
    strata = np.sort(rng.choice(r, k, replace=False))
    true = strata * width + rng.integers(0, width, k)
    w0 = rng.uniform(1.0, 2.0, k) * rng.choice([-1.0, 1.0], k)
    idx_dtype = np.int32 if max(m, n * r) < np.iinfo(np.int32).max else np.int64
    indices = np.empty(n * r, dtype=idx_dtype)
    data = np.empty(n * r)
    y = np.empty(n)
    base = (np.arange(r) * width).astype(idx_dtype)
    for r0 in tqdm(range(0, n, chunk_rows), desc="generate", disable=not verbose, leave=False):
        r1 = min(n, r0 + chunk_rows)
        cols = base + rng.integers(0, width, (r1 - r0, r), dtype=idx_dtype)
        hit = rng.random((r1 - r0, k)) < p_true
        cols[:, strata] = np.where(hit, true, cols[:, strata])
        vals = rng.standard_normal((r1 - r0, r))
        indices[r0 * r:r1 * r] = cols.ravel()
        data[r0 * r:r1 * r] = vals.ravel()
        on_true = cols[:, strata] == true
        y[r0:r1] = (vals[:, strata] * on_true) @ w0 + 0.1 * rng.standard_normal(r1 - r0)
    indptr = np.arange(0, n * r + 1, r, dtype=idx_dtype)
    X = sp.csr_matrix((data, indices, indptr), shape=(n, m))
    X.has_sorted_indices = True  # columns increase within a row by construction
    X.has_canonical_format = True
    return X, y, np.sort(true)


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak():
    """Reset the process's peak RSS (Linux ``clear_refs`` 5); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak():
    """Peak RSS in bytes since the last :func:`_reset_peak` (``VmHWM``), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_one(n, m, density, k, seed, fmt="csr", bins=None):
    """One size in this process: returns its result row."""
    from cvfs import FSARegressor

    limit_threads()
    Xs, ys, _ = make_sparse(200, 2000, 0.01, 5, seed=1)
    FSARegressor(k=5, n_iter=20).fit(Xs, ys)  # compile the kernels before measuring
    t0 = time.perf_counter()
    X, y, true = make_sparse(n, m, density, k, seed=seed, verbose=True)
    if fmt == "csc":
        X = X.tocsc()
    t_gen = time.perf_counter() - t0
    nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    peak_before = _peak()
    reset = _reset_peak()  # the fit's peak, not the generator's (CSC: the conversion's)
    rss_before = _rss()
    est = FSARegressor(k=k, bins=bins, verbose=True)
    with timed() as t:
        est.fit(X, y)
    peak = _peak() if reset else max(_peak(), peak_before)
    hits = int(est.support_[true].sum())
    return {"format": fmt, "bins": bins, "N": n, "M": m, "nnz": int(X.nnz), "peak_reset": reset,
            "density": X.nnz / (n * m), "k": k,
            "matrix_bytes": int(nbytes), "rss_before_fit": rss_before,
            "peak_rss_before_fit": peak_before, "peak_rss": peak, "peak_over_matrix": peak / nbytes,
            "fit_extra_over_matrix": (peak - rss_before) / nbytes,
            "fit_wall": t["wall"], "fit_cpu": t["cpu"], "generate_wall": t_gen,
            "sparse_iterations": est.history_["sparse_iterations"],
            "data_passes": est.history_["data_passes"], "precision": hits / k}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="add N x M = 1e5 x 1e6 (1e8 entries)")
    ap.add_argument("--size", type=int, nargs=2, action="append", metavar=("N", "M"),
                    help="sizes to run instead of the defaults (repeatable)")
    ap.add_argument("--density", type=float, default=1e-3)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bins", type=int, default=None,
                    help="piecewise-linear responses with this many bins (default: linear)")
    ap.add_argument("--format", choices=["csr", "csc"], default="csr",
                    help="layout handed to the fit (csc: converted after generation)")
    ap.add_argument("--one", action="store_true", help="run the first size in this process and "
                    "print its row as JSON (used by the driver)")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sizes = [tuple(s) for s in args.size] if args.size else SIZES + ([FULL] if args.full else [])
    if args.one:
        print(json.dumps(run_one(*sizes[0], args.density, args.k, args.seed, args.format,
                                 args.bins)))
        return 0
    rows = []
    for n, m in sizes:
        cmd = [sys.executable, __file__, "--one", "--size", str(n), str(m), "--density",
               str(args.density), "--k", str(args.k), "--seed", str(args.seed), "--format",
               args.format] + ([] if args.bins is None else ["--bins", str(args.bins)])
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        log.info("N=%d M=%d done: %.1f s", n, m, rows[-1]["fit_wall"])
    mb = 1 << 20
    print(format_table(
        ["N", "M", "nnz", "matrix MB", "RSS before fit MB", "peak RSS MB", "peak / matrix",
         "fit extra / matrix", "fit wall s", "fit CPU s", "sparse iters", "precision"],
        [[str(r["N"]), str(r["M"]), f"{r['nnz']:.2e}", f"{r['matrix_bytes'] / mb:.0f}",
          f"{r['rss_before_fit'] / mb:.0f}", f"{r['peak_rss'] / mb:.0f}",
          f"{r['peak_over_matrix']:.2f}", f"{r['fit_extra_over_matrix']:.2f}",
          f"{r['fit_wall']:.1f}", f"{r['fit_cpu']:.1f}",
          str(r["sparse_iterations"]), f"{r['precision']:.2f}"] for r in rows],
        title=f"FSARegressor(k={args.k}, bins={args.bins}) on {args.format.upper()} float64, "
              f"density {args.density:g}"))
    write_json(args.out, {"args": vars(args), "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
