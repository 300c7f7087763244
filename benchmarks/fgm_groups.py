"""FGM group selection on the FGM paper's synthetic groups (Tan, Tsang, Wang, section 7.2) against
the logistic group lasso (skglm).

Run ``python benchmarks/fgm_groups.py`` (about 10 minutes; ``--path 6`` for a shorter group lasso
path). Writes ``benchmarks/results/fgm_groups.json``.

Data
    X: n = 4096 training rows (``--n``) and 2000 test rows of i.i.d. N(0, 1) entries,
    ``--n-groups`` (2,000) groups of 10 consecutive features; 100 true groups at random with
    N(0, 1) weights; y = sign(X w).

Methods (single thread; logistic loss, as in the paper's section 7)
    FGM: ``FGMClassifier(loss="logistic", groups=..., B=10, C=10, max_iter=budget // 10)``
    for each budget (number of groups).
    Group lasso: skglm ``GeneralizedLinearEstimator(LogisticGroup, WeightedGroupL2 (weights
    sqrt(10)), GroupBCD(fit_intercept=True))`` along a warm-started path of ``--path``
    regularisation values from 0.6 to 0.15 of ``alpha_max`` (geometric); each path point is one
    row. Its CPU time is that of the warm-started fit at that point; the cumulative time of the
    path up to that point is printed too (what reaching that sparsity costs without knowing the
    regularisation in advance).

Metrics
    groups selected, true groups among them, test accuracy, CPU seconds.
"""

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

try:  # run as a script (benchmarks/ on sys.path) or as benchmarks.fgm_groups
    from _bench import format_table, limit_threads, machine_info, timed, write_json
except ImportError:  # pragma: no cover
    from benchmarks._bench import format_table, limit_threads, machine_info, timed, write_json

log = logging.getLogger("fgm_groups")

GROUP_SIZE = 10
N_TRUE = 100


def make_data(n, n_test, n_groups, seed):
    """Section 7.2's data: (Xtr, ytr, Xte, yte, groups, true group ids)."""
    rng = np.random.default_rng(seed)
    m = n_groups * GROUP_SIZE
    groups = np.arange(m) // GROUP_SIZE
    true = np.sort(rng.choice(n_groups, N_TRUE, replace=False))
    w = np.zeros(m)
    on = np.isin(groups, true)
    w[on] = rng.standard_normal(int(on.sum()))
    X = rng.standard_normal((n + n_test, m))
    y = np.where(X @ w > 0, 1.0, -1.0)
    return X[:n], y[:n], X[n:], y[n:], groups, true


def _row(coef, intercept, Xte, yte, groups, true, t):
    chosen = np.unique(groups[coef != 0])
    return {"n_groups": int(chosen.size), "true_groups": int(np.isin(chosen, true).sum()),
            "test_acc": float(np.mean(np.where(Xte @ coef + intercept > 0, 1.0, -1.0) == yte)),
            "cpu": t["cpu"], "wall": t["wall"]}


def run_fgm(Xtr, ytr, Xte, yte, groups, true, budgets, C):
    from cvfs import FGMClassifier

    out = []
    for budget in tqdm(budgets, desc="FGM"):
        clf = FGMClassifier(B=10, C=C, loss="logistic", max_iter=max(budget // 10, 1),
                            groups=groups)
        with timed() as t:
            clf.fit(Xtr, ytr)
        out.append({"method": "FGM", "budget": budget, "outer_iter": clf.n_iter_,
                    **_row(clf.coef_, clf.intercept_, Xte, yte, groups, true, t)})
    return out


def run_group_lasso(Xtr, ytr, Xte, yte, groups, true, n_path):
    from skglm import GeneralizedLinearEstimator
    from skglm.datafits import LogisticGroup
    from skglm.penalties import WeightedGroupL2
    from skglm.solvers import GroupBCD
    from skglm.utils.data import grp_converter

    n, m = Xtr.shape
    n_groups = m // GROUP_SIZE
    grp_indices, grp_ptr = grp_converter(GROUP_SIZE, m)
    weights = np.full(n_groups, np.sqrt(GROUP_SIZE))
    # gradient of the mean logistic loss at w = 0 is -X'y / (2n): the smallest alpha giving 0
    alpha_max = float(np.max(np.linalg.norm((Xtr.T @ ytr).reshape(n_groups, GROUP_SIZE), axis=1))
                      / (2 * n) / np.sqrt(GROUP_SIZE))
    est = GeneralizedLinearEstimator(
        LogisticGroup(grp_ptr, grp_indices),
        WeightedGroupL2(alpha_max, weights, grp_ptr, grp_indices),
        GroupBCD(tol=1e-4, fit_intercept=True, warm_start=True))
    out, total = [], 0.0
    for frac in tqdm(np.geomspace(0.6, 0.15, n_path), desc="group lasso"):
        est.penalty.alpha = frac * alpha_max
        with timed() as t:
            est.fit(Xtr, ytr)
        total += t["cpu"]
        out.append({"method": "group lasso (skglm BCD)", "alpha_ratio": float(frac),
                    "cpu_path": total, **_row(est.coef_.ravel(), float(est.intercept_), Xte, yte,
                                              groups, true, t)})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--n-groups", type=int, default=2000)
    ap.add_argument("--budgets", type=int, nargs="+", default=[20, 50, 100, 150])
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--path", type=int, default=10, help="group lasso path length (0: skip)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "fgm_groups.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    limit_threads()
    Xtr, ytr, Xte, yte, groups, true = make_data(args.n, args.n_test, args.n_groups, args.seed)
    results = run_fgm(Xtr, ytr, Xte, yte, groups, true, args.budgets, args.C)
    if args.path:
        results += run_group_lasso(Xtr, ytr, Xte, yte, groups, true, args.path)
    rows = [[r["method"], str(r.get("budget", f"{r.get('alpha_ratio', 0):.3f} a_max")),
             str(r["n_groups"]), str(r["true_groups"]), f"{r['test_acc']:.4f}", f"{r['cpu']:.2f}",
             f"{r['cpu_path']:.1f}" if "cpu_path" in r else "-"] for r in results]
    print(format_table(["method", "budget / alpha", "groups", "true", "test acc", "CPU s",
                        "path CPU s"], rows,
                       title=f"Synthetic groups: n = {args.n}, {args.n_groups} groups of "
                             f"{GROUP_SIZE}, {N_TRUE} true"))
    write_json(args.out, {"machine": machine_info(), "args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
