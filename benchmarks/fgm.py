"""FGM's synthetic experiment (Tan, Tsang, Wang, section 6.2): support recovery as m grows.

Run ``python benchmarks/fgm.py`` (default m = 2048, 8192, 32768; about five minutes) or
``--m 2048 --runs 1`` for a quick look. Writes ``benchmarks/results/fgm.json``.

Data
    X: n = 4096 training rows (``--n``) and 1000 test rows of i.i.d. N(0, 1) entries; ``k = 400``
    true features with Type-I weights w0 ~ U(0, 1) at random positions; y = sign(X w0).

Methods (single thread; each keeps about k features)
    FGM: ``FGMClassifier(B=50, C=10, max_iter=k // 50)`` (squared hinge, the paper's C = 10).
    FSA: ``cvfs.FSAClassifier(k=k)`` with default parameters (dense input).
    L1-LR: ``LogisticRegression(l1_ratio=1, solver="liblinear")``, C bisected in log scale
    (at most ``BISECT_STEPS`` fits) until the number of non-zeros is within 10% of k; the time is
    that of the last fit, the number of fits is reported.

Metrics
    precision / recall of the true support, number selected, test accuracy, CPU seconds of fit.
"""

import argparse
import logging
import sys
import warnings
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

try:  # run as a script (benchmarks/ on sys.path) or as benchmarks.fgm
    from _bench import format_table, fsa_estimator, limit_threads, machine_info, timed, write_json
except ImportError:  # pragma: no cover
    from benchmarks._bench import (
        format_table,
        fsa_estimator,
        limit_threads,
        machine_info,
        timed,
        write_json,
    )

log = logging.getLogger("fgm")

BISECT_STEPS = 8


def make_data(n, n_test, m, k, seed):
    """Training and test sets of the paper's Type-I synthetic problem."""
    rng = np.random.default_rng(seed)
    true = rng.choice(m, k, replace=False)
    w0 = np.zeros(m)
    w0[true] = rng.uniform(0.0, 1.0, k)
    X = rng.standard_normal((n + n_test, m))
    y = np.where(X @ w0 > 0, 1, -1)
    mask = np.zeros(m, dtype=bool)
    mask[true] = True
    return X[:n], y[:n], X[n:], y[n:], mask


def _l1_logistic(X, y, k):
    from sklearn.linear_model import LogisticRegression

    lo, hi = np.log(1e-4), np.log(1.0)
    best = None
    fits = 0
    while fits < BISECT_STEPS:
        fits += 1
        C = float(np.exp(0.5 * (lo + hi)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with timed() as t:
                clf = LogisticRegression(l1_ratio=1.0, C=C, solver="liblinear").fit(X, y)
        nnz = int(np.count_nonzero(clf.coef_))
        if best is None or abs(nnz - k) < abs(best[1] - k):
            best = (clf, nnz, t, C)
        if abs(nnz - k) <= 0.1 * k:
            break
        lo, hi = (np.log(C), hi) if nnz < k else (lo, np.log(C))
    clf, _, t, C = best
    return clf, clf.coef_.ravel() != 0, t, {"C": C, "fits": fits}


def run_methods(Xtr, ytr, Xte, yte, true, k, seed):
    from cvfs import FGMClassifier

    rows = {}
    fgm = FGMClassifier(B=50, C=10.0, max_iter=max(k // 50, 1))
    with timed() as t:
        fgm.fit(Xtr, ytr)
    rows["FGM"] = (fgm, fgm.get_support(), t, {"outer_iter": fgm.n_iter_})
    fsa = fsa_estimator("logistic", k, seed)
    with timed() as t:
        fsa.fit(Xtr, ytr)
    rows["FSA"] = (fsa, fsa.get_support(), t, {})
    rows["L1-LR"] = _l1_logistic(Xtr, ytr, k)
    out = {}
    for name, (clf, sel, t, extra) in rows.items():
        hit = int(np.count_nonzero(sel & true))
        out[name] = {
            "n_selected": int(sel.sum()),
            "precision": hit / max(int(sel.sum()), 1),
            "recall": hit / int(true.sum()),
            "test_acc": float(np.mean(clf.predict(Xte) == yte)),
            "cpu": t["cpu"],
            "wall": t["wall"],
            **extra,
        }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[2048, 8192, 32768])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--k", type=int, default=400)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "fgm.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    limit_threads()
    results = []
    for m in tqdm(args.m, desc="m"):
        for run in range(args.runs):
            Xtr, ytr, Xte, yte, true = make_data(args.n, args.n_test, m, args.k, run)
            res = run_methods(Xtr, ytr, Xte, yte, true, args.k, run)
            del Xtr, Xte
            for name, r in res.items():
                results.append({"m": m, "run": run, "method": name, **r})
    headers = ["m", "method", "selected", "precision", "recall", "test acc", "CPU s"]
    rows = []
    for m in args.m:
        for name in ("FGM", "FSA", "L1-LR"):
            rs = [r for r in results if r["m"] == m and r["method"] == name]
            rows.append([str(m), name, f"{np.mean([r['n_selected'] for r in rs]):.0f}",
                         f"{np.mean([r['precision'] for r in rs]):.3f}",
                         f"{np.mean([r['recall'] for r in rs]):.3f}",
                         f"{np.mean([r['test_acc'] for r in rs]):.3f}",
                         f"{np.median([r['cpu'] for r in rs]):.2f}"])
        rows.append(None)
    print(format_table(headers, rows[:-1],
                       title=f"FGM synthetic (n={args.n}, k={args.k}, runs={args.runs})"))
    write_json(args.out, {"machine": machine_info(), "args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
