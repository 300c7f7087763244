"""FSA with piecewise-linear responses: the row-major pass against the feature-major pass on bin
coordinates, and whole fits at the keypoint detectors' sizes.

FSA keeps piecewise-linear features in two layouts (``cvfs.core._pl_kernels``): the caller's
row-major X, on which every pass computes each element's bin and offset and scatters the
gradient sums into the (m, B + 1) accumulators (``pl_row_pass``), and, from the first drop on,
a feature-major matrix of bin coordinates s = clip((x - lo) scale, 0, B) (``pl_row_pass_t``:
two table reads per element for the scores, one vectorised sweep per knot of the hat-function
basis for the sums).

(a) passes -- one pass of a row-separable loss (Lorenz) by each, on the same data: N rows
    (``--n``), B bins (``--bins``), widths ``--widths``, float32 and float64, with and without
    the power-iteration products (``track``); best of ``--repeats`` (two alternations), in ns
    per element (time / (N * width)).
(b) fits -- ``cvfs.FSAClassifier(loss="lorenz", bins=8, annealing_boost=1, n_iter=500)`` (a
    fixed setting, so timings compare across versions of the code) on
    AR(1) classification data (``cvfs.datasets.synthetic``, 10% noisy labels) in float32, at
    a small detector's size (N = 15,000 examples of 6,864 features, k = 200;
    ``--fit-sizes``) and, with ``--paper``, the paper's (13,756 x 60,864,
    k = 1,500, 3.3 GB); CPU seconds of ``fit`` (after a JIT warm-up), median of ``--fit-repeats``.
    This section uses only the public estimator, so the same script times an older checkout:
    ``PYTHONPATH=<old checkout> python benchmarks/fsa/pl_kernels.py --sections fits``.

Single thread. Prints tables, writes JSON (``--out``).

    python benchmarks/fsa/pl_kernels.py --out benchmarks/results/fsa/pl_kernels.json
"""

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import (
    best_time,
    format_table,
    limit_threads,
    machine_info,
    timed,
    write_json,
)

KEYPOINT_SIZE = (15000, 6864, 200)
PAPER_SIZE = (13756, 60864, 1500)


def pass_case(dtype, n, w, bins, repeats, track, seed=0):
    """ns per element of one row-major and one feature-major pass on the same (n, w) data."""
    from cvfs.core import _pl_kernels as PL
    from cvfs.core.layouts.dense import _column_table
    from cvfs.core.losses import get_loss
    from cvfs.core.responses import get_response

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, w)).astype(dtype)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    loss = get_loss("lorenz")
    fp, _, _ = _column_table(X, get_response(bins), 1 << 26)
    cols = np.arange(w)
    S = PL.compact_bins(X, cols, fp, bins)
    beta = rng.standard_normal((w, bins + 1)) * 0.01
    v = rng.standard_normal((w, bins + 1))
    g = np.zeros_like(beta)
    h = np.zeros_like(beta)

    def rows():
        PL.pl_row_pass(X, y, loss, (cols, fp, bins, beta, v, 0.0), (g, h), track)

    def feats():
        PL.pl_row_pass_t(S, y, loss, (cols, fp, bins, beta, v, 0.0), (g, h), track)

    t_rows = t_feat = np.inf
    for _ in range(2):
        t_rows = min(t_rows, best_time(rows, repeats))
        t_feat = min(t_feat, best_time(feats, repeats))
    el = float(n) * w
    return {"dtype": np.dtype(dtype).name, "n": n, "w": w, "bins": bins, "track": track,
            "ns_rows": 1e9 * t_rows / el, "ns_feature_major": 1e9 * t_feat / el,
            "speed_up": t_rows / t_feat}


def fit_case(n, m, k, repeats, seed=0):
    """Median CPU seconds of a keypoint-style piecewise-linear FSA-Lorenz fit."""
    from cvfs import FSAClassifier
    from cvfs.datasets.synthetic import make_ar1_classification

    X, y, _ = make_ar1_classification(n, m, k_true=min(k, 50), noise=0.1, random_state=seed)
    X = np.ascontiguousarray(X, dtype=np.float32)
    est = FSAClassifier(k=k, loss="lorenz", bins=8, annealing_boost=1, n_iter=500,
                        random_state=0)
    cpu = []
    wall = []
    for _ in range(repeats):
        with timed() as t:
            est.fit(X, y)
        cpu.append(t["cpu"])
        wall.append(t["wall"])
    return {"n": n, "m": m, "k": k, "cpu_s": float(np.median(cpu)),
            "wall_s": float(np.median(wall)), "cpu_all": cpu,
            "passes": float(est.history_["data_passes"])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", nargs="+", default=["passes", "fits"],
                    choices=["passes", "fits"])
    ap.add_argument("--n", type=int, default=15000, help="rows of (a)")
    ap.add_argument("--widths", type=int, nargs="+", default=[200, 1000, 3000])
    ap.add_argument("--bins", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fit-sizes", nargs="+", default=None,
                    help="N:M:k of (b) (default the shipped detectors' 15000:6864:200)")
    ap.add_argument("--paper", action="store_true", help="also the paper's size in (b)")
    ap.add_argument("--fit-repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    limit_threads()
    from tqdm.auto import tqdm

    out = {"meta": machine_info(), "argv": sys.argv[1:], "passes": [], "fits": []}
    if "passes" in args.sections:
        cases = [(dt, w, tr) for dt in (np.float32, np.float64) for w in args.widths
                 for tr in (False, True)]
        for dt, w, tr in tqdm(cases, desc="passes", leave=False):
            out["passes"].append(pass_case(dt, args.n, w, args.bins, args.repeats, tr))
        rows = [[r["dtype"], r["n"], r["w"], "yes" if r["track"] else "no",
                 f"{r['ns_rows']:.2f}", f"{r['ns_feature_major']:.2f}", f"{r['speed_up']:.2f}"]
                for r in out["passes"]]
        print(format_table(["dtype", "N", "width", "track", "row-major ns/el",
                            "feature-major ns/el", "speed-up"], rows,
                           title=f"(a) one piecewise-linear pass (Lorenz, B={args.bins}), "
                                 "single thread, best of repeats"))
    if "fits" in args.sections:
        sizes = ([tuple(int(float(v)) for v in s.split(":")) for s in args.fit_sizes]
                 if args.fit_sizes else [KEYPOINT_SIZE])
        if args.paper:
            sizes.append(PAPER_SIZE)
        fit_case(2000, 300, 20, 1)  # JIT warm-up
        for n, m, k in tqdm(sizes, desc="fits", leave=False):
            out["fits"].append(fit_case(n, m, k, args.fit_repeats))
        rows = [[r["n"], r["m"], r["k"], f"{r['n'] * r['m'] * 4 / 1e9:.2f}", f"{r['passes']:.1f}",
                 f"{r['cpu_s']:.2f}", f"{r['wall_s']:.2f}"] for r in out["fits"]]
        print(format_table(["N", "M", "k", "GB (float32)", "passes", "CPU s (median)",
                            "wall s"], rows,
                           title="(b) FSAClassifier(loss='lorenz', bins=8, annealing_boost=1, "
                                 "n_iter=500) fits, single thread"))
    if args.out:
        write_json(args.out, out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
