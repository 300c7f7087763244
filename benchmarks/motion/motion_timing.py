"""Speed of the motion pipeline on Hopkins155: candidates + features per sequence, and the CV.

Usage::

    python benchmarks/motion/motion_timing.py [--data DIR] [--every N] [--cv]

Prints a table (wall and CPU milliseconds per sequence, median / mean / max, split by K) and writes
``benchmarks/results/motion/motion_timing.json``. BLAS is pinned to one thread inside the library;
set ``NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1`` too on a shared machine. Wall times on a loaded
machine are noisy: CPU times are the steadier number.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets.hopkins155 import load_hopkins155
from cvfs.motion.candidates import generate_candidates
from cvfs.motion.features import candidate_features


def _stats(x):
    x = 1e3 * np.asarray(x)
    return {"median": float(np.median(x)), "mean": float(np.mean(x)), "max": float(np.max(x))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--every", type=int, default=1, help="time every N-th sequence")
    parser.add_argument("--cv", action="store_true", help="also time the cached 10-fold CV")
    parser.add_argument("--out", default=str(result_path(__file__)))
    args = parser.parse_args(argv)
    seqs = load_hopkins155(args.data)[:: args.every]
    generate_candidates(seqs[0].points, seqs[0].n_motions)  # JIT / import warm-up
    candidate_features(seqs[0].points, generate_candidates(seqs[0].points, seqs[0].n_motions))
    rows = []
    for s in seqs:
        w0, c0 = time.perf_counter(), time.process_time()
        cand = generate_candidates(s.points, s.n_motions)
        w1, c1 = time.perf_counter(), time.process_time()
        candidate_features(s.points, cand)
        w2, c2 = time.perf_counter(), time.process_time()
        rows.append((s.n_motions, len(cand), w1 - w0, w2 - w1, w2 - w0, c1 - c0, c2 - c1, c2 - c0))
    r = np.array(rows)
    result = {"n_sequences": len(seqs)}
    print(f"{'':14s}{'n':>5s}{'cands':>7s}{'wall cand':>11s}{'wall feat':>11s}{'wall total':>12s}"
          f"{'CPU total':>11s}   (ms, median; total max)")
    for name, sel in (("K=2", r[:, 0] == 2), ("K=3", r[:, 0] == 3), ("all", r[:, 0] > 0)):
        q = r[sel]
        result[name] = {"n": int(sel.sum()), "candidates_mean": float(q[:, 1].mean()),
                        "wall_candidates_ms": _stats(q[:, 2]), "wall_features_ms": _stats(q[:, 3]),
                        "wall_total_ms": _stats(q[:, 4]), "cpu_candidates_ms": _stats(q[:, 5]),
                        "cpu_features_ms": _stats(q[:, 6]), "cpu_total_ms": _stats(q[:, 7])}
        print(f"{name:14s}{int(sel.sum()):5d}{q[:, 1].mean():7.1f}"
              f"{1e3 * np.median(q[:, 2]):11.0f}{1e3 * np.median(q[:, 3]):11.0f}"
              f"{1e3 * np.median(q[:, 4]):12.0f}{1e3 * np.median(q[:, 7]):11.0f}"
              f"   max {1e3 * q[:, 4].max():.0f}")
    if args.cv:
        from cvfs.motion.evaluate import evaluate_hopkins155

        t0 = time.perf_counter()
        res = evaluate_hopkins155(args.data)
        result["cv"] = {"seconds_total": time.perf_counter() - t0, **res["timing"]}
        print(f"10-fold CV with cached features: {result['cv']}")
    write_json(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
