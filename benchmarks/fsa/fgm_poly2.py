"""FGM with nonlinear features on MNIST 3-vs-8 (Tan, Tsang, Wang, section 6.4): test error and
CPU time per number of selected features.

Run ``python benchmarks/fsa/fgm_poly2.py`` (about 5 minutes; ``--no-l1-poly`` skips the explicit
expansion, the slow part). Writes ``benchmarks/results/fsa/fgm_poly2.json``. Needs
``CVFS_DATA`` with ``mnist/mnist.npz``.

Data
    The first ``--n-train`` (2,000) digits 3 and 8 of the MNIST training set, pixels in [0, 1],
    label +1 for an 8; all 1,984 test digits 3 and 8.

Methods (single thread; budget = number of selected features)
    FGM linear: ``FGMClassifier(B=budget // 5, C=10, max_iter=5)`` (squared hinge, the paper's C).
    FGM poly2: the same with ``mapping="poly2"`` (terms x_j and x_j x_k of the 784 pixels,
    307,720 candidates, searched implicitly).
    FGM additive: the same with ``mapping="additive"`` (chi-squared map, 3 components per pixel,
    B counts pixels, so the budget is in pixels).
    L1-LR linear / L1-LR poly2: ``LogisticRegression(l1_ratio=1, solver="liblinear")`` on the
    pixels / on the explicit expansion (scikit-learn's ``PolynomialFeatures(2)`` on CSR, the
    same 308,504 terms), C bisected to the budget +- 10% (CPU time of the last fit; the number
    of fits is reported).
"""

import argparse
import logging
import sys
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
from benchmarks.fsa.fgm import _l1_logistic

log = logging.getLogger("fgm_poly2")

ITERATIONS = 5  # cutting-plane iterations: budget = B * ITERATIONS


def load(n_train):
    """MNIST 3-vs-8: (Xtr, ytr, Xte, yte), float64 pixels in [0, 1], labels +-1 (8 = +1)."""
    from cvfs.datasets import load_mnist

    out = []
    for subset, n in (("train", n_train), ("test", None)):
        X, y = load_mnist(subset, flatten=True)
        keep = np.flatnonzero((y == 3) | (y == 8))[:n]
        out += [X[keep].astype(np.float64), np.where(y[keep] == 8, 1, -1)]
    return out


def run_fgm(Xtr, ytr, Xte, yte, budget, mapping, C):
    from cvfs import FGMClassifier

    clf = FGMClassifier(B=max(budget // ITERATIONS, 1), C=C, max_iter=ITERATIONS,
                        mapping=mapping)
    with timed() as t:
        clf.fit(Xtr, ytr)
    n_sel = int(clf.support_.sum()) if mapping == "additive" else int(np.count_nonzero(clf.coef_))
    return {"n_selected": n_sel, "test_err": float(np.mean(clf.predict(Xte) != yte)),
            "cpu": t["cpu"], "wall": t["wall"], "outer_iter": clf.n_iter_}


def run_l1(Xtr, ytr, Xte, yte, budget):
    clf, sel, t, extra = _l1_logistic(Xtr, ytr, budget)
    return {"n_selected": int(sel.sum()), "test_err": float(np.mean(clf.predict(Xte) != yte)),
            "cpu": t["cpu"], "wall": t["wall"], **extra}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--budgets", type=int, nargs="+", default=[20, 50, 100, 200])
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--no-l1-poly", action="store_true", help="skip L1-LR on the expansion")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    limit_threads()
    Xtr, ytr, Xte, yte = load(args.n_train)
    log.info("MNIST 3-vs-8: %d training, %d test digits", len(ytr), len(yte))
    methods = ["FGM linear", "FGM poly2", "FGM additive", "L1-LR linear"]
    Ptr = Pte = None
    if not args.no_l1_poly:
        import scipy.sparse as sp
        from sklearn.preprocessing import PolynomialFeatures

        poly = PolynomialFeatures(2, include_bias=False)
        with timed() as t_expand:
            Ptr = poly.fit_transform(sp.csr_matrix(Xtr))
            Pte = poly.transform(sp.csr_matrix(Xte))
        log.info("explicit expansion: %d x %d, %d non-zeros, %.1f s CPU", *Ptr.shape, Ptr.nnz,
                 t_expand["cpu"])
        methods.append("L1-LR poly2")
    results = []
    for budget in tqdm(args.budgets, desc="budget"):
        for name in methods:
            if name.startswith("FGM"):
                mapping = {"FGM linear": None, "FGM poly2": "poly2",
                           "FGM additive": "additive"}[name]
                r = run_fgm(Xtr, ytr, Xte, yte, budget, mapping, args.C)
            elif name == "L1-LR linear":
                r = run_l1(Xtr, ytr, Xte, yte, budget)
            else:
                r = run_l1(Ptr, ytr, Pte, yte, budget)
            results.append({"budget": budget, "method": name, **r})
            log.info("%s budget %d: %s", name, budget, r)
    rows = []
    for budget in args.budgets:
        by = {r["method"]: r for r in results if r["budget"] == budget}
        for name in methods:
            r = by[name]
            ratio = r["test_err"] / by["FGM linear"]["test_err"]
            rows.append([str(budget), name, str(r["n_selected"]), f"{100 * r['test_err']:.2f}",
                         f"{ratio:.2f}", f"{r['cpu']:.2f}", str(r.get("fits", "-"))])
        rows.append(None)
    print(format_table(["budget", "method", "selected", "test err %", "/ FGM linear", "CPU s",
                        "L1 fits"], rows[:-1],
                       title=f"MNIST 3-vs-8, {len(ytr)} training digits, C = {args.C} (FGM)"))
    write_json(args.out, {"args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
