"""The FSA paper's synthetic Tables II, III and IV, with FSA beside the peers a user would pick.

Run ``python benchmarks/fsa/synthetic_tables.py --runs 2 --tables II`` for a quick look,
``--full`` for the paper's 100 runs per cell. Prints one table per paper table (our numbers
beside the paper's, which are transcribed below as ``PAPER``), a speed comparison and the
acceptance checks (FSA's PCD/AUC against the peers', its speed ratio), and writes everything to
JSON (``--out``). Data, cells, methods and metrics in detail: ``docs/benchmarks.md``.

Data (paper section 3.1, ``cvfs.datasets.synthetic``)
    AR(1) rows (rho = 0.9), M = 1000, true features x_{10 j}. Table II: y = 1 if
    sum_j x_{10 j} > 0; Table III: 10% of the rows given a random label; Table IV:
    y = sum_j x_{10 j} + N(0, 1). Run r draws 2N rows with seed r: N train, N test.
    Cells: Tables II/III (N, k) in (300, 10), (1000, 10), (3000, 10), (1000, 30), (3000, 30);
    Table IV N in 300, 1000, 3000 with k = 30.

Methods (all select exactly k features; single thread)
    FSA-logistic, FSA-Lorenz, FSA-SVM (Table IV: FSA-squared): ``cvfs.FSAClassifier`` /
    ``FSARegressor`` with default parameters and ``random_state=r`` -- no per-cell tuning.
    L1-bisect: L1-penalised logistic regression / ``Lasso``, penalty bisected until exactly k
    coefficients are non-zero (at most ``BISECT_STEPS`` fits), then refit unpenalised.
    abess: ``support_size=k``, ``thread=1``. RFE: ``sklearn.feature_selection.RFE`` over
    ``LogisticRegression`` / ``LinearRegression``, ``step=0.1`` down to ``RFE_FINE * k``
    columns, then ``step=1``.

Metrics per cell (over the runs)
    DR: % of runs with every true feature selected; PCD: mean % of true features selected; test
    AUC (Tables II/III) or RMSE (Table IV); median CPU and wall seconds of ``fit``, after a JIT
    warm-up.

Speed
    N = M = 1000, k = 10, separable, seed 0: FSA-logistic fit ``--speed-repeats`` times, each
    peer 3 times, interleaved in three rounds (every method timed under the same machine
    state); median CPU ms per fit and the ratios peer / FSA.

The machine is shared: timings taken while other jobs run are noisy (the JSON records the load
average at start and end); CPU time is the number to compare.
"""

import argparse
import logging
import math
import os
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

log = logging.getLogger("synthetic_tables")

M_FEATURES = 1000
BISECT_STEPS = 40
RFE_FINE = 2

# --------------------------------------------------------------------------------------------
# The paper's numbers (Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer
# Vision and Big Data Learning", Tables II-IV; 100 runs, six-core i7-980, times in seconds).
# Keys: (N, k). Columns: FSA (logistic, eta=20), FSV (Huberised SVM), FSL (Lorenz), L1 (interior
# point L1-logistic / lasso with bisection + refit); Table IV has FSA (squared) and L1 only.
# --------------------------------------------------------------------------------------------
PAPER = {
    "II": {
        (300, 10): {"FSA": (29, 86.1, 0.992, 0.03), "FSV": (30, 84.7, 0.990, 0.03),
                    "FSL": (34, 86.0, 0.990, 0.04), "L1": (0, 42.4, 0.915, 17)},
        (1000, 10): {"FSA": (100, 100, 1.00, 0.06), "FSV": (100, 100, 1.00, 0.07),
                     "FSL": (100, 100, 1.00, 0.15), "L1": (2, 72.4, 0.951, 434)},
        (3000, 10): {"FSA": (100, 100, 1.00, 0.23), "FSV": (100, 100, 1.00, 0.15),
                     "FSL": (100, 100, 1.00, 0.49), "L1": (33, 91.5, 0.982, 705)},
        (10000, 10): {"FSA": (100, 100, 1.00, 1.8), "FSV": (100, 100, 1.00, 1.8),
                      "FSL": (100, 100, 1.00, 1.8), "L1": (100, 100, 0.997, 2151)},
        (1000, 30): {"FSA": (24, 93.8, 0.996, 0.13), "FSV": (22, 92.4, 0.995, 0.08),
                     "FSL": (21, 92.6, 0.995, 0.29), "L1": (0, 41.5, 0.923, 240)},
        (3000, 30): {"FSA": (100, 100, 1.00, 0.26), "FSV": (100, 100, 1.00, 0.2),
                     "FSL": (100, 100, 1.00, 1.10), "L1": (0, 68.6, 0.954, 565)},
        (10000, 30): {"FSA": (100, 100, 1.00, 3.5), "FSV": (100, 100, 1.00, 3.3),
                      "FSL": (100, 100, 1.00, 3.5), "L1": (8, 93.9, 0.985, 3914)},
    },
    "III": {
        (300, 10): {"FSA": (0, 44.5, 0.890, 0.04), "FSV": (0, 38.9, 0.868, 0.04),
                    "FSL": (1, 43.7, 0.885, 0.04), "L1": (0, 41.2, 0.880, 22)},
        (1000, 10): {"FSA": (45, 92.5, 0.943, 0.14), "FSV": (45, 91.4, 0.940, 0.13),
                     "FSL": (86, 98.5, 0.946, 0.14), "L1": (0, 65.3, 0.907, 412)},
        (3000, 10): {"FSA": (100, 100, 0.950, 0.49), "FSV": (100, 100, 0.950, 0.46),
                     "FSL": (100, 100, 0.950, 0.48), "L1": (22, 87.8, 0.934, 1094)},
        (10000, 10): {"FSA": (100, 100, 0.950, 2.0), "FSV": (100, 100, 0.950, 2.0),
                      "FSL": (100, 100, 0.950, 2.1), "L1": (92, 99.2, 0.949, 13921)},
        (1000, 30): {"FSA": (0, 49.5, 0.905, 0.30), "FSV": (0, 45.0, 0.889, 0.29),
                     "FSL": (0, 53.7, 0.904, 0.30), "L1": (0, 40.0, 0.885, 791)},
        (3000, 30): {"FSA": (12, 92.4, 0.945, 1.0), "FSV": (14, 92.3, 0.943, 1.0),
                     "FSL": (68, 98.7, 0.949, 1.0), "L1": (0, 63.7, 0.911, 1862)},
        (10000, 30): {"FSA": (99, 100, 0.950, 3.8), "FSV": (99, 100, 0.950, 3.8),
                      "FSL": (100, 100, 0.950, 3.8), "L1": (0, 90.3, 0.938, 15949)},
    },
    "IV": {  # (DR, PCD, RMSE, time)
        (300, 30): {"FSA": (67, 98.5, 1.11, 0.25), "L1": (0, 37.8, 3.68, 1.24)},
        (1000, 30): {"FSA": (100, 100, 1.02, 0.18), "L1": (0, 63.8, 2.79, 2.6)},
        (3000, 30): {"FSA": (100, 100, 1.01, 0.52), "L1": (1, 88.6, 1.87, 5.7)},
        (10000, 30): {"FSA": (100, 100, 1.00, 1.8), "L1": (87, 99.5, 1.05, 14)},
    },
}

TABLES = {
    "II": {"title": "Table II: linearly separable classification", "noise": 0.0,
           "task": "classification",
           "cells": [(300, 10), (1000, 10), (3000, 10), (1000, 30), (3000, 30)]},
    "III": {"title": "Table III: classification with 10% random labels", "noise": 0.1,
            "task": "classification",
            "cells": [(300, 10), (1000, 10), (3000, 10), (1000, 30), (3000, 30)]},
    "IV": {"title": "Table IV: regression, y = sum x_10j + N(0,1)", "noise": None,
           "task": "regression", "cells": [(300, 30), (1000, 30), (3000, 30)]},
}

# our method -> the paper's column it corresponds to
PAPER_COLUMN = {"FSA-logistic": "FSA", "FSA-Lorenz": "FSL", "FSA-SVM": "FSV",
                "FSA-squared": "FSA", "L1-bisect": "L1", "Lasso-bisect": "L1"}
FSA_LOSS = {"FSA-logistic": "logistic", "FSA-Lorenz": "lorenz", "FSA-SVM": "svm",
            "FSA-squared": "squared"}
METHODS = {
    "classification": ["FSA-logistic", "FSA-Lorenz", "FSA-SVM", "L1-bisect", "abess", "RFE"],
    "regression": ["FSA-squared", "Lasso-bisect", "abess", "RFE"],
}


# --------------------------------------------------------------------------------------------
# Fitting: every method returns (support, scorer) where scorer(X_test) gives decision scores
# (classification) or predictions (regression).
# --------------------------------------------------------------------------------------------
def _linear_scorer(support, coef, intercept):
    support = np.asarray(support)
    coef = np.ravel(coef)

    def score(X):
        return X[:, support] @ coef + intercept

    return score


def fit_fsa(name, X, y, k, seed):
    """FSA with default parameters; also returns what its history says (passes, step size)."""
    est = fsa_estimator(FSA_LOSS[name], k, seed)
    est.fit(X, y)
    info = {}
    hist = getattr(est, "history_", None) or {}
    if "data_passes" in hist:
        info["data_passes"] = float(hist["data_passes"])
    if "lr" in hist and len(np.atleast_1d(hist["lr"])):
        lr = np.atleast_1d(hist["lr"])
        info["lr_first"] = float(lr[0])
        info["lr_last"] = float(lr[-1])
    if "loss" in hist and len(np.atleast_1d(hist["loss"])):
        info["loss_last"] = float(np.atleast_1d(hist["loss"])[-1])
    score = est.predict if FSA_LOSS[name] == "squared" else est.decision_function
    return est.get_support(indices=True), score, info


def _bisect(fit, t_lo, t_hi, k):
    """Bisect t (log inverse penalty; #non-zeros grows with t) until exactly k are non-zero.

    ``fit(t)`` returns the coefficient vector. ``t_lo`` gives fewer than k; ``t_hi`` is moved
    up until it gives at least k. Returns (support, n_fits, exact).
    """
    n_fits = 0
    best = None  # fewest non-zeros above k seen so far: (nnz, coef)
    coef = fit(t_hi)
    n_fits += 1
    while np.count_nonzero(coef) < k and n_fits < BISECT_STEPS:
        t_lo, t_hi = t_hi, t_hi + math.log(4.0)
        coef = fit(t_hi)
        n_fits += 1
    nnz = np.count_nonzero(coef)
    if nnz >= k:
        best = (nnz, coef)
    while best is not None and best[0] != k and n_fits < BISECT_STEPS:
        t = 0.5 * (t_lo + t_hi)
        coef = fit(t)
        n_fits += 1
        nnz = np.count_nonzero(coef)
        if nnz < k:
            t_lo = t
        else:
            t_hi = t
            if nnz < best[0]:
                best = (nnz, coef)
    if best is None:  # never reached k: take the k largest of the last fit
        best = (np.count_nonzero(coef), coef)
    coef = best[1]
    exact = best[0] == k
    support = np.sort(np.argsort(-np.abs(coef), kind="stable")[:k])
    return support, n_fits, exact


def fit_l1_logistic(X, y, k, seed):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import l1_min_c

    def fit(t):
        clf = LogisticRegression(C=math.exp(t), l1_ratio=1.0, solver="liblinear",
                                 random_state=seed)
        return clf.fit(X, y).coef_.ravel()

    t0 = math.log(l1_min_c(X, y, loss="log"))
    support, n_fits, exact = _bisect(fit, t0, t0 + math.log(4.0), k)
    refit = LogisticRegression(C=np.inf, max_iter=1000).fit(X[:, support], y)
    return support, _linear_scorer(support, refit.coef_, refit.intercept_[0]), {
        "n_fits": n_fits, "exact_k": exact}


def fit_lasso(X, y, k, seed):
    from sklearn.linear_model import Lasso, LinearRegression

    Xc = X - X.mean(axis=0)
    alpha_max = np.max(np.abs(Xc.T @ (y - y.mean()))) / X.shape[0]

    def fit(t):
        return Lasso(alpha=alpha_max * math.exp(-t), max_iter=10_000).fit(X, y).coef_

    support, n_fits, exact = _bisect(fit, 0.0, math.log(4.0), k)
    refit = LinearRegression().fit(X[:, support], y)
    return support, _linear_scorer(support, refit.coef_, refit.intercept_), {
        "n_fits": n_fits, "exact_k": exact}


def fit_abess(task, X, y, k, seed):
    from abess.linear import LinearRegression, LogisticRegression

    cls = LogisticRegression if task == "classification" else LinearRegression
    model = cls(support_size=[k], thread=1).fit(X, y)
    coef = np.ravel(model.coef_)
    support = np.flatnonzero(coef)
    if support.size != k:  # abess should give exactly k; keep the k largest if not
        support = np.sort(np.argsort(-np.abs(coef), kind="stable")[:k])
    return support, _linear_scorer(support, coef[support], float(model.intercept_)), {}


def fit_rfe(task, X, y, k, seed):
    from sklearn.feature_selection import RFE
    from sklearn.linear_model import LinearRegression, LogisticRegression

    def base():
        if task == "classification":
            return LogisticRegression(max_iter=1000)
        return LinearRegression()

    cols = np.arange(X.shape[1])
    fine = min(X.shape[1], RFE_FINE * k)
    if fine < X.shape[1]:
        coarse = RFE(base(), n_features_to_select=fine, step=0.1).fit(X, y)
        cols = cols[coarse.support_]
    rfe = RFE(base(), n_features_to_select=k, step=1).fit(X[:, cols], y)
    support = np.sort(cols[rfe.support_])
    est = rfe.estimator_
    intercept = float(np.ravel(est.intercept_)[0])
    return support, _linear_scorer(support, est.coef_, intercept), {}


def fit_method(name, task, X, y, k, seed):
    """Fit one method; returns (support, scorer, info)."""
    if name.startswith("FSA"):
        return fit_fsa(name, X, y, k, seed)
    if name == "L1-bisect":
        return fit_l1_logistic(X, y, k, seed)
    if name == "Lasso-bisect":
        return fit_lasso(X, y, k, seed)
    if name == "abess":
        return fit_abess(task, X, y, k, seed)
    if name == "RFE":
        return fit_rfe(task, X, y, k, seed)
    raise ValueError(f"unknown method {name!r}")


# --------------------------------------------------------------------------------------------
# Data, metrics, cells
# --------------------------------------------------------------------------------------------
def make_cell_data(task, n, k, noise, seed):
    """2n rows with seed ``seed``: first n train, last n test."""
    from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression

    if task == "classification":
        X, y, true = make_ar1_classification(2 * n, M_FEATURES, k, noise=noise,
                                             random_state=seed)
    else:
        X, y, true = make_ar1_regression(2 * n, M_FEATURES, k, random_state=seed)
    return X[:n], y[:n], X[n:], y[n:], true


def evaluate(task, support, score, X_test, y_test, true):
    from sklearn.metrics import roc_auc_score

    found = np.intersect1d(support, true).size
    out = {"n_selected": int(np.size(support)), "pcd": 100.0 * found / true.size,
           "all_found": bool(found == true.size)}
    s = np.asarray(score(X_test), dtype=np.float64)
    if task == "classification":
        out["auc"] = float(roc_auc_score(y_test, s)) if np.all(np.isfinite(s)) else float("nan")
    else:
        out["rmse"] = float(np.sqrt(np.mean((y_test - s) ** 2)))
    return out


def summarise(runs):
    """Aggregate per-run records of one method in one cell."""
    out = {"runs": len(runs),
           "dr": 100.0 * np.mean([r["all_found"] for r in runs]),
           "pcd": float(np.mean([r["pcd"] for r in runs])),
           "time_cpu_median": float(np.median([r["cpu"] for r in runs])),
           "time_wall_median": float(np.median([r["wall"] for r in runs]))}
    for key in ("auc", "rmse"):
        if key in runs[0]:
            out[key] = float(np.nanmean([r[key] for r in runs]))
    for key in ("data_passes", "lr_first", "lr_last", "n_fits"):
        vals = [r[key] for r in runs if key in r]
        if vals:
            out[key + "_median"] = float(np.median(vals))
    if any("exact_k" in r for r in runs):
        out["exact_k_rate"] = 100.0 * np.mean([r.get("exact_k", True) for r in runs])
    return out


def run_cell(table, n, k, runs, methods):
    spec = TABLES[table]
    task = spec["task"]
    per_run = {m: [] for m in methods}
    for r in tqdm(range(runs), desc=f"Table {table} N={n} k={k}", leave=False):
        X, y, Xt, yt, true = make_cell_data(task, n, k, spec["noise"], r)
        for m in methods:
            with timed() as t:
                support, score, info = fit_method(m, task, X, y, k, r)
            rec = evaluate(task, support, score, Xt, yt, true)
            rec.update(info, cpu=t["cpu"], wall=t["wall"], seed=r)
            per_run[m].append(rec)
    return {"table": table, "n": n, "m": M_FEATURES, "k": k, "k_true": k,
            "noise": spec["noise"], "task": task,
            "methods": {m: {"summary": summarise(v), "runs": v} for m, v in per_run.items()}}


def warm_up(methods_by_task):
    """Compile numba kernels / load libraries on a small problem before anything is timed."""
    from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression

    Xc, yc, _ = make_ar1_classification(200, 200, 5, random_state=12345)
    Xr, yr, _ = make_ar1_regression(200, 200, 5, random_state=12345)
    for task, methods in methods_by_task.items():
        X, y = (Xc, yc) if task == "classification" else (Xr, yr)
        for m in methods:
            for _ in range(2):
                fit_method(m, task, X, y, 5, 0)


# --------------------------------------------------------------------------------------------
# Speed comparison at N = M = 1000, k = 10
# --------------------------------------------------------------------------------------------
def run_speed(methods, fsa_repeats, peer_repeats=3):
    """CPU and wall time per fit of each method on the seed-0 data. The fits are interleaved
    in ``peer_repeats`` rounds (each round: every peer once, each FSA method
    ``fsa_repeats / peer_repeats`` times), so FSA and its peers are timed under the same machine
    state: on a shared machine the speed of the same fit can drift by 10-15% over minutes,
    which timing all FSA fits first and the peers afterwards would turn into ratio swings of
    that size."""
    X, y, _, _, _ = make_cell_data("classification", 1000, 10, 0.0, 0)
    rounds = max(1, peer_repeats)
    per_round = {m: (max(1, math.ceil(fsa_repeats / rounds)) if m.startswith("FSA") else 1)
                 for m in methods}
    cpu = {m: [] for m in methods}
    wall = {m: [] for m in methods}
    with tqdm(total=rounds * sum(per_round.values()), desc="speed N=M=1000 k=10",
              leave=False) as bar:
        for _ in range(rounds):
            for m in methods:
                for _ in range(per_round[m]):
                    with timed() as t:
                        fit_method(m, "classification", X, y, 10, 0)
                    cpu[m].append(t["cpu"])
                    wall[m].append(t["wall"])
                    bar.update(1)
    out = {m: {"repeats": len(cpu[m]), "cpu_ms_median": 1e3 * float(np.median(cpu[m])),
               "cpu_ms_min": 1e3 * float(np.min(cpu[m])),
               "wall_ms_median": 1e3 * float(np.median(wall[m]))} for m in methods}
    if "FSA-logistic" in out:
        base = out["FSA-logistic"]["cpu_ms_median"]
        for m in out:
            out[m]["ratio_vs_fsa_logistic"] = out[m]["cpu_ms_median"] / base
    return out


# --------------------------------------------------------------------------------------------
# Printing and acceptance
# --------------------------------------------------------------------------------------------
def _f(x, fmt):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def print_table(table, cells, runs):
    spec = TABLES[table]
    metric = "auc" if spec["task"] == "classification" else "rmse"
    mfmt = ".3f"
    headers = ["N", "k", "method", "DR", "PCD", metric.upper(), "CPU ms", "wall ms",
               "| paper", "DR", "PCD", metric.upper(), "time s"]
    rows = []
    for cell in cells:
        paper = PAPER[table].get((cell["n"], cell["k"]), {})
        for m, res in cell["methods"].items():
            s = res["summary"]
            pcol = PAPER_COLUMN.get(m)
            p = paper.get(pcol) if pcol else None
            rows.append([str(cell["n"]), str(cell["k"]), m, _f(s["dr"], ".0f"),
                         _f(s["pcd"], ".1f"), _f(s.get(metric), mfmt),
                         _f(1e3 * s["time_cpu_median"], ".1f"),
                         _f(1e3 * s["time_wall_median"], ".1f"),
                         f"| {pcol}" if p else "|",
                         *((_f(p[0], ".0f"), _f(p[1], ".1f"), _f(p[2], mfmt), _f(p[3], "g"))
                           if p else (None,) * 4)])
        rows.append(None)
    title = (f"{spec['title']} (M={M_FEATURES}; ours: {runs} runs, median fit time; "
             f"paper: 100 runs, 6-core i7-980)")
    print(format_table(headers, rows[:-1], title=title))
    print()


def print_speed(speed):
    headers = ["method", "repeats", "CPU ms (median)", "CPU ms (min)", "wall ms", "x FSA-log"]
    rows = [[m, str(s["repeats"]), _f(s["cpu_ms_median"], ".1f"), _f(s["cpu_ms_min"], ".1f"),
             _f(s["wall_ms_median"], ".1f"), _f(s.get("ratio_vs_fsa_logistic"), ".1f")]
            for m, s in speed.items()]
    print(format_table(headers, rows,
                       title="Speed: N=M=1000, k=10, separable, seed 0, single thread"))
    print()


def _cell(results, table, n, k):
    for c in results.get(table, []):
        if c["n"] == n and c["k"] == k:
            return c
    return None


# CPU-time speed-up of FSA-logistic each peer must reach (speed section and Table II cell)
SPEEDUP_TARGETS = (("abess", 4), ("RFE", 10), ("L1-bisect", 10))


def acceptance(results, speed):
    """The targets these tables are checked against (paper and peers): list of dicts."""
    checks = []

    def add(name, value, target, ok):
        checks.append({"check": name, "value": value, "target": target,
                       "pass": None if ok is None else bool(ok)})

    def summ(table, n, k, m):
        c = _cell(results, table, n, k)
        return None if c is None or m not in c["methods"] else c["methods"][m]["summary"]

    if speed and "FSA-logistic" in speed:
        fsa = speed["FSA-logistic"]["cpu_ms_median"]
        add("FSA-logistic CPU ms per fit, N=M=1000 k=10", round(fsa, 2), "<= 15", fsa <= 15)
        for peer, need in SPEEDUP_TARGETS:
            if peer in speed:
                ratio = speed[peer]["ratio_vs_fsa_logistic"]
                add(f"speed-up vs {peer}", round(ratio, 1), f">= {need}x", ratio >= need)
    # the same ratios from the Table II N=1000 k=10 cell: every method fitted once on each of the
    # cell's data sets (seeds 0..runs-1), medians over the same data (less seed-dependent than
    # the speed section's repeated fits on seed 0)
    s = summ("II", 1000, 10, "FSA-logistic")
    if s:
        for peer, need in SPEEDUP_TARGETS:
            p = summ("II", 1000, 10, peer)
            if p:
                ratio = p["time_cpu_median"] / s["time_cpu_median"]
                add(f"speed-up vs {peer} (Table II N=1000 k=10 cell medians)", round(ratio, 1),
                    f">= {need}x", ratio >= need)
        add("Table II N=1000 k=10 FSA-logistic PCD", s["pcd"], "100", s["pcd"] >= 100)
        add("Table II N=1000 k=10 FSA-logistic AUC", round(s["auc"], 4), ">= 0.995",
            s["auc"] >= 0.995)
    s = summ("III", 1000, 10, "FSA-Lorenz")
    if s:
        add("Table III N=1000 k=10 FSA-Lorenz PCD", s["pcd"], ">= 95", s["pcd"] >= 95)
    s = summ("IV", 1000, 30, "FSA-squared")
    if s:
        add("Table IV N=1000 FSA-squared PCD", s["pcd"], ">= 99", s["pcd"] >= 99)
        add("Table IV N=1000 FSA-squared RMSE", round(s["rmse"], 4), "<= 1.05",
            s["rmse"] <= 1.05)
    for table, cells in results.items():
        for c in cells:
            if c["n"] > 1000:
                continue
            fsa = {m: r["summary"]["pcd"] for m, r in c["methods"].items()
                   if m.startswith("FSA")}
            peers = {m: r["summary"]["pcd"] for m, r in c["methods"].items()
                     if not m.startswith("FSA")}
            if not fsa or not peers:
                continue
            best_peer = max(peers, key=peers.get)
            best = max(fsa, key=fsa.get)
            add(f"Table {table} N={c['n']} k={c['k']} best FSA ({best}) PCD ahead of best peer "
                f"({best_peer} {peers[best_peer]:.1f})", round(fsa[best], 1),
                f"> {peers[best_peer]:.1f} or 100",
                fsa[best] > peers[best_peer] or fsa[best] == 100.0)
            for m, v in fsa.items():
                add(f"Table {table} N={c['n']} k={c['k']} {m} PCD ahead of best peer "
                    f"({best_peer} {peers[best_peer]:.1f})", round(v, 1),
                    f"> {peers[best_peer]:.1f} or 100",
                    v > peers[best_peer] or v == 100.0)
    return checks


def print_acceptance(checks):
    if not checks:
        print("targets: nothing measured (FSA unavailable or cells not run)\n")
        return
    rows = [[c["check"], str(c["value"]), c["target"],
             {True: "PASS", False: "FAIL", None: "?"}[c["pass"]]] for c in checks]
    print(format_table(["targets", "value", "target", ""], rows))
    print()


# --------------------------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs per cell (seed r for run r)")
    p.add_argument("--full", action="store_true", help="the paper's 100 runs per cell")
    p.add_argument("--tables", nargs="+", default=["II", "III", "IV"],
                   choices=sorted(TABLES), help="which paper tables")
    p.add_argument("--methods", nargs="+", default=None,
                   help="subset of methods (default: all of the task's methods)")
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="only the cells with these N (default: all of the table's cells)")
    p.add_argument("--k", type=int, nargs="+", default=None,
                   help="only the cells with these k")
    p.add_argument("--speed-repeats", type=int, default=20,
                   help="FSA fits timed in the speed comparison (0 skips it)")
    p.add_argument("--out", default=str(result_path(__file__)))
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    limit_threads()
    warnings.filterwarnings("ignore")  # peers' ConvergenceWarning on separable data, abess
    runs = 100 if args.full else args.runs

    methods = {}
    for task, ms in METHODS.items():
        methods[task] = [m for m in ms if args.methods is None or m in args.methods]
    tasks = {TABLES[t]["task"] for t in args.tables}
    if args.speed_repeats > 0:
        tasks.add("classification")
    warm_up({t: methods[t] for t in tasks})

    meta = machine_info()
    meta.update(runs=runs, argv=sys.argv[1:] if argv is None else list(argv),
                bisect_steps=BISECT_STEPS, rfe_fine=RFE_FINE, m_features=M_FEATURES)
    results = {}
    out = {"meta": meta, "tables": results, "speed": None, "acceptance": None,
           "paper": {t: {f"{n},{k}": v for (n, k), v in PAPER[t].items()} for t in PAPER}}
    for table in args.tables:
        spec = TABLES[table]
        results[table] = []
        cells = [(n, k) for n, k in spec["cells"]
                 if (args.n is None or n in args.n) and (args.k is None or k in args.k)]
        for n, k in tqdm(cells, desc=f"Table {table}"):
            results[table].append(run_cell(table, n, k, runs, methods[spec["task"]]))
            write_json(args.out, out)  # partial results survive an interruption
        print_table(table, results[table], runs)

    if args.speed_repeats > 0:
        out["speed"] = run_speed(methods["classification"], args.speed_repeats)
        print_speed(out["speed"])
    out["acceptance"] = acceptance(results, out["speed"])
    print_acceptance(out["acceptance"])
    meta["loadavg_end"] = list(os.getloadavg())
    write_json(args.out, out)
    print(f"wrote {Path(args.out)}  (load average start {meta['loadavg_start'][0]:.2f}, "
          f"end {meta['loadavg_end'][0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
