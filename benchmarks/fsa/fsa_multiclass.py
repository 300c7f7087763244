"""Multiclass FSA on scikit-learn's digits (10 classes, 64 pixels) against L1 multinomial
logistic regression at matched numbers of selected features.

Run ``python benchmarks/fsa/fsa_multiclass.py`` (about two minutes; ``--splits 1`` for a quick run).
Writes ``benchmarks/results/fsa/fsa_multiclass.json``.

Data
    ``sklearn.datasets.load_digits`` (1797 x 64), stratified 70/30 train/test splits with seeds
    0..``--splits``-1. Columns are standardised on the training rows for scikit-learn; FSA
    standardises internally.

Methods, for each target k (number of features = pixels kept for all classes)
    FSA: ``cvfs.FSAClassifier(k=k)`` with default parameters: softmax loss ("logistic"); also
    the one-vs-rest Lorenz and Huberised hinge losses with a shared support.
    L1-LR: ``LogisticRegression(l1_ratio=1, solver="saga")`` (multinomial), C bisected on a log
    scale until the number of nonzero coefficient rows (features used by any class) is k or as
    close as ``BISECT_STEPS`` fits get; its test accuracy, and that of an L2 logistic regression
    (C = 1, lbfgs) refitted on the L1 support ("L1 + L2 refit").
    Reference: L2 logistic regression on all 64 features.

Metrics
    test accuracy (mean over splits), L1-LR's mean number of nonzero rows, median CPU seconds of
    one FSA fit and of L1-LR's final fit.

Second table: support recovery on a synthetic 5-class design (N = 1000 training rows, M = 1000
Gaussian columns; the class means differ on 10 columns only, drawn N(0, sep^2)); FSA with
k = 10, ``--seeds`` data sets: mean fraction of the 10 true features found, how many data sets
found all of them, and test accuracy on 5000 new rows.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

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

KS = [5, 10, 15, 20, 30, 40]
LOSSES = ["logistic", "lorenz", "svm"]
BISECT_STEPS = 14


def _l1_fit(X, y, C):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(l1_ratio=1.0, solver="saga", C=C, max_iter=300,
                                  tol=1e-3).fit(X, y)


def _rows(clf):
    return np.flatnonzero(np.any(clf.coef_ != 0, axis=0))


def l1_at_k(X, y, k):
    """L1 multinomial LR whose nonzero coefficient rows number k (or as close as the bisection
    on log C gets). Returns (classifier, its support, CPU seconds of the final fit)."""
    lo, hi = -3.5, -0.5  # log10 C: from no feature to about 50 of 64 on standardised digits
    best = None
    for _ in range(BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        with timed() as t:
            clf = _l1_fit(X, y, 10.0 ** mid)
        rows = _rows(clf)
        if best is None or abs(rows.size - k) < abs(best[1].size - k):
            best = (clf, rows, t["cpu"])
        if rows.size == k:
            break
        lo, hi = (mid, hi) if rows.size < k else (lo, mid)
    return best


def run(splits, ks, losses):
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    res = {"fsa": {loss: {k: [] for k in ks} for loss in losses},
           "fsa_time": {loss: {k: [] for k in ks} for loss in losses},
           "l1": {k: [] for k in ks}, "l1_refit": {k: [] for k in ks},
           "l1_nnz": {k: [] for k in ks}, "l1_time": {k: [] for k in ks}, "l2_all": []}
    jobs = [(s, k) for s in range(splits) for k in ks]
    bar = tqdm(total=len(jobs), desc="digits", leave=False)
    for s in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=s, stratify=y)
        sc = StandardScaler().fit(Xtr)
        Ztr, Zte = sc.transform(Xtr), sc.transform(Xte)
        res["l2_all"].append(LogisticRegression(max_iter=2000).fit(Ztr, ytr).score(Zte, yte))
        for k in ks:
            for loss in losses:
                with timed() as t:
                    clf = fsa_estimator(loss, k, 0).fit(Xtr, ytr)
                res["fsa"][loss][k].append(clf.score(Xte, yte))
                res["fsa_time"][loss][k].append(t["cpu"])
            clf, rows, cpu = l1_at_k(Ztr, ytr, k)
            res["l1"][k].append(clf.score(Zte, yte))
            res["l1_nnz"][k].append(int(rows.size))
            res["l1_time"][k].append(cpu)
            refit = LogisticRegression(max_iter=2000).fit(Ztr[:, rows], ytr)
            res["l1_refit"][k].append(refit.score(Zte[:, rows], yte))
            bar.update(1)
    bar.close()
    return res


def make_classes(n, m, n_classes=5, k_true=10, sep=1.0, random_state=0, n_test=0):
    """Gaussian columns; the class means differ only on ``k_true`` columns. Returns train and
    test rows (the same class means) and the true columns."""
    rng = np.random.default_rng(random_state)
    true = np.sort(rng.choice(m, k_true, replace=False))
    means = sep * rng.standard_normal((n_classes, k_true))
    y = rng.integers(0, n_classes, n + n_test)
    X = rng.standard_normal((n + n_test, m))
    X[:, true] += means[y]
    return X[:n], y[:n], X[n:], y[n:], true


def run_synthetic(seeds, losses, sep):
    out = {loss: {"found": [], "acc": []} for loss in losses}
    for seed in tqdm(range(seeds), desc="synthetic", leave=False):
        X, y, Xt, yt, true = make_classes(1000, 1000, sep=sep, random_state=seed, n_test=5000)
        for loss in losses:
            clf = fsa_estimator(loss, 10, 0).fit(X, y)
            out[loss]["found"].append(int(clf.support_[true].sum()) / true.size)
            out[loss]["acc"].append(clf.score(Xt, yt))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--ks", type=int, nargs="+", default=KS)
    ap.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    ap.add_argument("--seeds", type=int, default=5, help="synthetic data sets")
    ap.add_argument("--sep", type=float, default=1.0, help="spread of the synthetic class means")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    info = machine_info()
    res = run(args.splits, args.ks, args.losses)
    headers = (["k"] + [f"FSA {loss}" for loss in args.losses]
               + ["L1-LR", "L1 + L2 refit", "L1 nnz rows", "FSA s", "L1-LR s"])
    rows = []
    for k in args.ks:
        rows.append([str(k)] + [f"{np.mean(res['fsa'][loss][k]):.3f}" for loss in args.losses]
                    + [f"{np.mean(res['l1'][k]):.3f}", f"{np.mean(res['l1_refit'][k]):.3f}",
                       f"{np.mean(res['l1_nnz'][k]):.1f}",
                       f"{np.median(res['fsa_time'][args.losses[0]][k]):.2f}",
                       f"{np.median(res['l1_time'][k]):.2f}"])
    rows.append(["64 (L2)"] + ["-"] * len(args.losses)
                + [f"{np.mean(res['l2_all']):.3f}", "-", "64", "-", "-"])
    print(format_table(headers, rows, title=(
        f"digits, test accuracy (mean over {args.splits} stratified 70/30 splits); FSA s: CPU "
        f"seconds of one {args.losses[0]} fit, L1-LR s: of its final fit")))
    syn = run_synthetic(args.seeds, args.losses, args.sep)
    rows = [[f"FSA {loss}", f"{np.mean(syn[loss]['found']):.3f}",
             f"{int(np.sum(np.array(syn[loss]['found']) == 1.0))} / {args.seeds}",
             f"{np.mean(syn[loss]['acc']):.3f}"] for loss in args.losses]
    print()
    print(format_table(["method", "true found", "all found", "test acc"], rows, title=(
        f"synthetic 5 classes, N = M = 1000, 10 true features, sep = {args.sep}, k = 10 "
        f"({args.seeds} data sets)")))
    write_json(args.out, {"machine": info, "args": vars(args), "ks": args.ks, "results": res,
                          "synthetic": syn})
    return 0


if __name__ == "__main__":
    sys.exit(main())
