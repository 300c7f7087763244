"""Sparse and l2 SV Infinite Push against FSA-Rank, RankBoost and a pairwise-hinge SVMRank at
the top of the list: a toy problem (10 useful + 200 noisy features) and five small UCI /
microarray sets.

Usage::

    python benchmarks/fsa/infinite_push.py [--data DIR] [--splits N] [--toy-repeats N] [--quick]

Metric (Rakotomamonjy 2012, Agarwal 2011): the fraction of test positives scored above the
highest-scoring test negative ("positives at top"), mean +- standard error over random stratified
2/3 - 1/3 splits; also the AUC, the number of features the scorer uses and the fit time (CPU s).
Features are standardised on the training part. Positives are the minority class of each set.
The sparse (l1) Infinite Push runs at fixed fractions of lam_max (the smallest lam giving w = 0)
of each training set, the classical l2 Infinite Push at lam = 0.01 and 0.1 (C = 100, 10);
FSA-Rank (linear responses, pairs across the two classes) keeps k features.
Writes ``benchmarks/results/fsa/infinite_push.json``.

RankBoost is written here (Freund et al. 2003, the bipartite RankBoost.B with threshold stumps on
16 training quantiles per feature, 100 rounds); SVMRank is scikit-learn's ``LinearSVC`` on the
pairwise differences (positive minus negative, both signs, no intercept).
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from tqdm import tqdm

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
from cvfs import FSARanker, InfinitePushRanker
from cvfs.base import ConvergenceWarning
from cvfs.core.infinite_push import infinite_push_lam_max
from cvfs.datasets import data_home

OUT = result_path(__file__)
DATASETS = ("ionosphere", "sonar", "spectf", "wpbc", "colon")


# --- data ------------------------------------------------------------------------------------
def load_uci(name, root):
    """(X, y) with y = 1 for the positives (the minority class) of one small benchmark set."""
    d = Path(root) / "uci" / name
    if name == "ionosphere":
        raw = np.loadtxt(d / "ionosphere.data", delimiter=",", dtype=str)
        return raw[:, :-1].astype(float), (raw[:, -1] == "b").astype(int)
    if name == "sonar":
        raw = np.loadtxt(d / "sonar.all-data", delimiter=",", dtype=str)
        return raw[:, :-1].astype(float), (raw[:, -1] == "R").astype(int)
    if name == "spectf":
        parts = [np.loadtxt(d / f, delimiter=",") for f in ("SPECTF.train", "SPECTF.test")]
        raw = np.vstack(parts)
        return raw[:, 1:], (raw[:, 0] == 0).astype(int)  # normal (55 of 267) on top
    if name == "wpbc":
        raw = np.loadtxt(d / "wpbc.data", delimiter=",", dtype=str)
        raw = raw[~np.any(raw == "?", axis=1)]
        # drop the ID and the time field (recurrence or disease-free time: outcome information)
        return raw[:, 3:].astype(float), (raw[:, 1] == "R").astype(int)
    if name == "colon":
        X = np.loadtxt(d / "I2000.txt").T
        tissue = np.loadtxt(d / "tissue.txt")
        return np.log(X), (tissue > 0).astype(int)  # normal tissue (22 of 62) on top
    raise ValueError(f"unknown data set {name!r}")


def make_toy(n, rng, n_useful=10, n_noisy=200, frac_pos=0.2, shift=0.8):
    """Positives shift the useful features by +-shift; every feature has unit Gaussian noise."""
    y = (rng.random(n) < frac_pos).astype(int)
    X = rng.normal(size=(n, n_useful + n_noisy))
    signs = np.where(np.arange(n_useful) % 2 == 0, 1.0, -1.0)
    X[:, :n_useful] += shift * y[:, None] * signs
    return X, y


# --- metrics and baselines --------------------------------------------------------------------
def positives_at_top(s, y):
    """Fraction of positives scored strictly above every negative."""
    return float(np.mean(s[y == 1] > s[y == 0].max()))


def auc(s, y):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s))


class ScaledInfinitePush:
    """InfinitePushRanker with lam = frac * lam_max of the training data (lam_max: w = 0)."""

    def __init__(self, frac):
        self.frac = frac

    def fit(self, X, y):
        lam = self.frac * infinite_push_lam_max(X[y == 1], X[y == 0])
        self.est_ = InfinitePushRanker(lam=lam).fit(X, y)
        self.support_ = self.est_.support_
        return self

    def decision_function(self, X):
        return self.est_.decision_function(X)


class RankBoost:
    """Bipartite RankBoost (RankBoost.B) with threshold stumps h(x) = [x_f > t]."""

    def __init__(self, n_rounds=100, n_thresholds=16):
        self.n_rounds = n_rounds
        self.n_thresholds = n_thresholds

    def fit(self, X, y):
        pos, neg = X[y == 1], X[y == 0]
        qs = np.linspace(0, 1, self.n_thresholds + 2)[1:-1]
        thr = np.quantile(X, qs, axis=0)  # (T, d)
        hp = pos[:, None, :] > thr[None]  # (m, T, d)
        hn = neg[:, None, :] > thr[None]
        vp = np.full(len(pos), 1.0 / len(pos))
        vn = np.full(len(neg), 1.0 / len(neg))
        self.stumps_ = []
        for _ in range(self.n_rounds):
            r = np.tensordot(vp, hp, 1) - np.tensordot(vn, hn, 1)  # (T, d)
            t, f = np.unravel_index(np.argmax(np.abs(r)), r.shape)
            rr = float(np.clip(r[t, f], -1 + 1e-10, 1 - 1e-10))
            alpha = 0.5 * np.log((1 + rr) / (1 - rr))
            vp *= np.exp(-alpha * hp[:, t, f])
            vn *= np.exp(alpha * hn[:, t, f])
            vp /= vp.sum()
            vn /= vn.sum()
            self.stumps_.append((f, thr[t, f], alpha))
        self.support_ = np.unique([s[0] for s in self.stumps_])
        return self

    def decision_function(self, X):
        return sum(a * (X[:, f] > t) for f, t, a in self.stumps_)


class PairwiseSVMRank:
    """SVMRank-style scorer: a linear SVM on positive-minus-negative differences."""

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, X, y):
        from sklearn.svm import LinearSVC

        D = (X[y == 1][:, None, :] - X[y == 0][None, :, :]).reshape(-1, X.shape[1])
        Z = np.vstack([D, -D])
        t = np.r_[np.ones(len(D)), -np.ones(len(D))]
        svm = LinearSVC(C=self.C, fit_intercept=False, max_iter=5000).fit(Z, t)
        self.coef_ = svm.coef_.ravel()
        self.support_ = np.flatnonzero(self.coef_)
        return self

    def decision_function(self, X):
        return X @ self.coef_


def _n_used(est):
    """Features the scorer uses: ``support_`` is a mask (cvfs estimators) or an index array."""
    s = np.asarray(est.support_)
    return int(np.count_nonzero(s)) if s.dtype == bool else int(s.size)


def run_one(make, Xtr, ytr, Xte, yte):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with timed() as t:
            est = make().fit(Xtr, ytr)
    s = est.decision_function(Xte)
    return {"top": positives_at_top(s, yte), "auc": auc(s, yte), "n_features": _n_used(est),
            "time": t["cpu"]}


def standardise(Xtr, Xte):
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd


def summarise(rows):
    out = {}
    for key in ("top", "auc", "n_features", "time"):
        v = np.array([r[key] for r in rows], dtype=float)
        out[key] = {"mean": float(v.mean()),
                    "se": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0}
    return out


L2_LAMS = (0.01, 0.1)  # the classical SVM Infinite Push, C = 1 / lam = 100 and 10


def l2_methods():
    return {f"InfPush l2 lam={lam:g}": (lambda lam=lam: InfinitePushRanker(lam=lam, penalty="l2"))
            for lam in L2_LAMS}


def methods(fracs, fsa_k):
    ms = {f"InfPush l1 {f:g} lam_max": (lambda f=f: ScaledInfinitePush(f)) for f in fracs}
    ms.update(l2_methods())
    ms[f"FSA-Rank k={fsa_k}"] = lambda: FSARanker(k=fsa_k, bins=None, min_gap=0.0)
    ms["RankBoost 100"] = RankBoost
    ms["SVMRank (pairwise hinge)"] = PairwiseSVMRank
    return ms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: CVFS_DATA)")
    ap.add_argument("--splits", type=int, default=10, help="random splits per UCI set")
    ap.add_argument("--toy-repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 splits, 2 toy repeats")
    ap.add_argument("--json", default=str(OUT))
    args = ap.parse_args(argv)
    if args.quick:
        args.splits, args.toy_repeats = 3, 2
    limit_threads()
    root = Path(args.data) if args.data else data_home()
    from sklearn.model_selection import StratifiedShuffleSplit

    results = {"splits": args.splits, "toy_repeats": args.toy_repeats}

    # toy: top-of-list accuracy against the number of selected features
    rng = np.random.default_rng(0)
    toy_methods = {f"InfPush l1 {f:g} lam_max": (lambda f=f: ScaledInfinitePush(f))
                   for f in (0.1, 0.2, 0.4, 0.6)}
    toy_methods.update(l2_methods())
    toy_methods.update({f"FSA-Rank k={k}": (lambda k=k: FSARanker(k=k, bins=None, min_gap=0.0))
                        for k in (5, 10, 20)})
    toy_methods["RankBoost 100"] = RankBoost
    toy_methods["SVMRank (pairwise hinge)"] = PairwiseSVMRank
    toy_rows = {name: [] for name in toy_methods}
    for _ in tqdm(range(args.toy_repeats), desc="toy"):
        Xtr, ytr = make_toy(300, rng)
        Xte, yte = make_toy(2000, rng)
        for name, make in toy_methods.items():
            toy_rows[name].append(run_one(make, Xtr, ytr, Xte, yte))
    results["toy"] = {name: summarise(r) for name, r in toy_rows.items()}

    uci = {}
    for ds in DATASETS:
        X, y = load_uci(ds, root)
        splitter = StratifiedShuffleSplit(n_splits=args.splits, test_size=1 / 3, random_state=0)
        ms = methods((0.1, 0.3), fsa_k=10)
        rows = {name: [] for name in ms}
        for tr, te in tqdm(list(splitter.split(X, y)), desc=ds):
            Xtr, Xte = standardise(X[tr], X[te])
            for name, make in ms.items():
                rows[name].append(run_one(make, Xtr, y[tr], Xte, y[te]))
        uci[ds] = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
                   "n_positives": int(y.sum()),
                   "methods": {name: summarise(r) for name, r in rows.items()}}
    results["uci"] = uci

    def fmt(s, digits=3):
        return f"{s['mean']:.{digits}f} ± {s['se']:.{digits}f}"

    table = [[name, fmt(s["top"]), fmt(s["auc"]), f"{s['n_features']['mean']:.1f}",
              f"{s['time']['mean']:.2f}"] for name, s in results["toy"].items()]
    print(format_table(["method", "pos@top", "AUC", "#feat", "fit s"], table,
                       title=f"Toy: 10 useful + 200 noisy features, 300 training / 2000 test "
                             f"samples, 20% positives, {args.toy_repeats} repeats"))
    print()
    table = []
    for ds, r in uci.items():
        for name, s in r["methods"].items():
            table.append([f"{ds} ({r['n_samples']}x{r['n_features']}, {r['n_positives']} pos)",
                          name, fmt(s["top"]), fmt(s["auc"]), f"{s['n_features']['mean']:.1f}",
                          f"{s['time']['mean']:.2f}"])
        table.append(None)
    print(format_table(["data", "method", "pos@top", "AUC", "#feat", "fit s"], table[:-1],
                       title=f"UCI / microarray: {args.splits} stratified 2/3-1/3 splits, "
                             "mean ± s.e."))
    write_json(args.json, results)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
