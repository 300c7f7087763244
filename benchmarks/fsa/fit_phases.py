"""Where the time of one in-memory FSA fit goes, phase by phase, for one or two source trees.

    python benchmarks/fsa/fit_phases.py [--trees HEAD BASE] [--rounds 6] [--fits 20]

Each tree is imported in its own subprocess (alternating, ``--rounds`` times; each process runs
``--fits`` timed fits per case after warm-up fits); the phases are timed by wrapping the fit's
functions, in CPU seconds (``time.process_time``):

- ``estimator``: ``FSAClassifier.fit``; ``validate``: its input checks; ``fsa_fit``: the solver;
- ``setup``, ``statistics`` (column statistics, fused first gradient), ``start`` (power
  estimate), ``iterate`` (the iterations and what builds them), ``finish`` (result object);
- ``loop``: the compiled iteration loop (one call); ``dispatch``: that same call with no
  iterations, repeated (argument typing, unboxing and boxing of the results).

Cases: the ``scaling.py --quick`` grid (float32 AR(1), k = 50, N x M in {1e3, 1e4} x {1e3,
1e4} minus the largest) and the ``synthetic_tables.py`` speed fit (1000 x 1000, k = 10). Prints
per case and phase min and median over all fits, and with two trees the head / base ratios of
those and the median over rounds of each round's ratio (same-round pairs: steadier under a
drifting load); writes
``benchmarks/results/fsa/fit_phases.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

PHASES = ("estimator", "validate", "fsa_fit", "setup", "statistics", "start", "iterate", "loop",
          "finish", "dispatch")
CASES = (("sc 1e3x1e3", 1000, 1000, 50), ("sc 1e3x1e4", 1000, 10000, 50),
         ("sc 1e4x1e3", 10000, 1000, 50), ("syn 1e3x1e3 k10", 1000, 1000, 10))


def _wrap(owner, name, key, acc):
    """Replace owner.name by a wrapper adding its CPU seconds to acc[key]; returns the wrapper's
    record of the last call's arguments."""
    f = getattr(owner, name)
    last = {}

    def wrapped(*args, **kw):
        c = time.process_time()
        try:
            return f(*args, **kw)
        finally:
            acc[key] = acc.get(key, 0.0) + time.process_time() - c
            last["args"], last["kw"], last["f"] = args, kw, f

    setattr(owner, name, wrapped)
    return last


def _child(tree, fits):
    """Run in a subprocess with ``tree`` first on sys.path: time the phases of every case."""
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, tree)
    import cvfs.core.fsa as F
    import cvfs.estimators.fsa as E

    try:  # the tree's benchmarks by area
        from benchmarks._bench import fsa_estimator, limit_threads
        from benchmarks.scale.scaling import _ar1_classification_blocks
    except ImportError:  # an older tree: benchmarks/ flat
        sys.path.insert(0, os.path.join(tree, "benchmarks"))
        from _bench import fsa_estimator, limit_threads
        from scaling import _ar1_classification_blocks

    limit_threads()
    acc = {}
    _wrap(E._FSABase, "_validate_X_y", "validate", acc)
    _wrap(E, "fsa_fit", "fsa_fit", acc)
    for name, key in (("_setup", "setup"), ("_statistics", "statistics"), ("_start", "start"),
                      ("_iterate", "iterate"), ("_finish", "finish")):
        _wrap(F, name, key, acc)
    try:  # the one iteration driver
        import cvfs.core._driver as D

        last = _wrap(D, "_compiled_iterations", "loop", acc)
        span_at = 7
    except ImportError:  # the pre-driver loop
        last = _wrap(F.K, "fsa_loop", "loop", acc)
        span_at = None
    out = {}
    for case, n, m, k in CASES:
        X, y, _ = _ar1_classification_blocks(n, m, 50, 0)
        for _ in range(2):
            fsa_estimator("logistic", k, 0).fit(X, y)
        rows = []
        for r in range(fits):
            acc.clear()
            est = fsa_estimator("logistic", k, r)
            c = time.process_time()
            est.fit(X, y)
            acc["estimator"] = time.process_time() - c
            rows.append(dict(acc))
        # dispatch: the last loop call again with an empty range of iterations
        args = list(last["args"])
        if span_at is not None:
            args[span_at] = (args[span_at][1], args[span_at][1])
        else:  # fsa_loop(..., e0, e1, ...): e0 = e1
            i0 = 19
            args[i0] = args[i0 + 1]
        f = last["f"]
        f(*args)
        reps = 200
        c = time.process_time()
        for _ in range(reps):
            f(*args)
        disp = (time.process_time() - c) / reps
        for row in rows:
            row["dispatch"] = disp
        out[case] = rows
        del X
    print("PHASES_JSON " + json.dumps(out))


def _run(tree, fits):
    env = dict(os.environ, PYTHONPATH=tree, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tree,
                          "--fits", str(fits)], capture_output=True, text=True, cwd=tree, env=env,
                         check=True)
    line = [s for s in res.stdout.splitlines() if s.startswith("PHASES_JSON ")][-1]
    return json.loads(line.split(" ", 1)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", nargs="+", default=[str(REPO)])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fits", type=int, default=20)
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return _child(a.child, a.fits)
    samples = {t: {} for t in a.trees}
    per_round = {t: [] for t in a.trees}  # per round: {case: rows}
    load0 = os.getloadavg()
    for r in range(a.rounds):
        order = a.trees if r % 2 == 0 else a.trees[::-1]
        for t in order:
            res = _run(t, a.fits)
            per_round[t].append(res)
            for case, rows in res.items():
                samples[t].setdefault(case, []).extend(rows)
        print(f"round {r + 1}/{a.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    load1 = os.getloadavg()
    table = {}
    for case, *_ in CASES:
        for ph in PHASES:
            for t in a.trees:
                v = np.array([row.get(ph, 0.0) for row in samples[t][case]]) * 1e3
                table.setdefault(case, {}).setdefault(ph, {})[t] = (float(v.min()),
                                                                    float(np.median(v)))
            if len(a.trees) == 2:  # head / base of the same round, min and median per process
                rr = []
                for rh, rb in zip(per_round[a.trees[0]], per_round[a.trees[1]]):
                    h = np.array([row.get(ph, 0.0) for row in rh[case]])
                    b = np.array([row.get(ph, 0.0) for row in rb[case]])
                    rr.append((h.min() / b.min(), np.median(h) / np.median(b)))
                table[case][ph]["paired"] = [float(x) for x in np.median(rr, axis=0)]
    print(f"CPU ms per fit; load {load0[0]:.2f} at start, {load1[0]:.2f} at end; "
          f"{a.rounds} rounds x {a.fits} fits per tree and case")
    head = a.trees[0]
    hdr = f"{'case':17s} {'phase':10s}" + "".join(
        f" {'min ' + str(i):>9s} {'med ' + str(i):>9s}" for i in range(len(a.trees)))
    if len(a.trees) == 2:
        hdr += f" {'min 0/1':>8s} {'med 0/1':>8s} {'pair min':>8s} {'pair med':>8s}"
    print(hdr)
    for case in table:
        for ph, per in table[case].items():
            line = f"{case:17s} {ph:10s}" + "".join(f" {per[t][0]:9.3f} {per[t][1]:9.3f}"
                                                    for t in a.trees)
            if len(a.trees) == 2:
                b = a.trees[1]
                ratio = [per[head][i] / per[b][i] if per[b][i] > 0 else float("nan")
                         for i in (0, 1)]
                line += (f" {ratio[0]:8.3f} {ratio[1]:8.3f} {per['paired'][0]:8.3f}"
                         f" {per['paired'][1]:8.3f}")
            print(line)
    from benchmarks._bench import result_path, write_json

    write_json(result_path(__file__),
               {"trees": a.trees, "rounds": a.rounds, "fits": a.fits,
                "load": [load0[0], load1[0]], "ms_min_median": table})


if __name__ == "__main__":
    main()
