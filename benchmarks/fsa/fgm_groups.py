"""FGM group selection on the FGM paper's synthetic groups (Tan, Tsang, Wang, section 7.2) against
the logistic group lasso (skglm).

Run ``python benchmarks/fsa/fgm_groups.py`` (about 10 minutes; ``--path 6`` for a shorter group
lasso path). Writes ``benchmarks/results/fsa/fgm_groups.json``.

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
    regularisation in advance). skglm's numba kernels are compiled on a tiny problem first.

Generated data (``--generated``, e.g. ``--n-groups 40000 --generated --budgets 100``)
    The same distribution with X never stored: column block b of the training rows is drawn from
    the seed ``(seed, b, 0)`` and of the test rows from ``(seed, b, 1)`` (float32 normals,
    promoted to float64), regenerated whenever FGM's worst-case analysis or column cache needs
    it; FGM runs on this space through ``cvfs.core.fgm.fgm_fit``. At 40,000 groups X would take
    13 GB (float64), so only FGM runs; each worst-case analysis regenerates the whole matrix.

Metrics
    groups selected, true groups among them, test accuracy, CPU seconds.
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


class GeneratedGroups:
    """FGM feature space of section 7.2's X, generated block by block and never stored.

    ``part=0`` are the n training rows, ``part=1`` the test rows.
    """

    dense_coef = True
    BLOCK = 4000  # columns per generated block (4096 x 4000 float64 = 131 MB)

    def __init__(self, n, n_test, n_groups, seed):
        self.rows = (n, n_test)
        self.seed = seed
        self.n_features = n_groups * GROUP_SIZE
        self.groups = np.arange(self.n_features) // GROUP_SIZE

    def block(self, b, part=0):
        cols = min(self.BLOCK, self.n_features - b * self.BLOCK)
        rng = np.random.default_rng([self.seed, b, part])
        return rng.standard_normal((self.rows[part], cols), dtype=np.float32).astype(np.float64)

    def columns(self, idx, part=0):
        idx = np.asarray(idx)
        out = np.empty((self.rows[part], idx.size))
        for b in np.unique(idx // self.BLOCK):
            here = np.flatnonzero(idx // self.BLOCK == b)
            out[:, here] = self.block(b, part)[:, idx[here] - b * self.BLOCK]
        return out

    def worst_case(self, r, B):
        n_blocks = -(-self.n_features // self.BLOCK)
        from cvfs.core.fgm import top_units

        omega = np.concatenate([self.block(b).T @ r for b in range(n_blocks)])
        return top_units(omega, B, self.groups)


def run_generated(n, n_test, n_groups, seed, budgets, C):
    """FGM on generated data: (rows, None); y = sign(X w) from the true columns only."""
    from cvfs.core.fgm import fgm_fit

    space = GeneratedGroups(n, n_test, n_groups, seed)
    rng = np.random.default_rng(seed)
    true = np.sort(rng.choice(n_groups, N_TRUE, replace=False))
    cols = np.flatnonzero(np.isin(space.groups, true))
    w = rng.standard_normal(cols.size)
    ytr = np.where(space.columns(cols, 0) @ w > 0, 1.0, -1.0)
    yte = np.where(space.columns(cols, 1) @ w > 0, 1.0, -1.0)
    out = []
    for budget in tqdm(budgets, desc="FGM (generated X)"):
        with timed() as t:
            res = fgm_fit(space, ytr, B=10, C=C, loss="logistic", max_iter=max(budget // 10, 1))
        keep = res.features[res.feature_coef != 0]
        scores = space.columns(keep, 1) @ res.feature_coef[res.feature_coef != 0] + res.intercept
        chosen = np.unique(space.groups[keep])
        out.append({"method": "FGM (generated X)", "budget": budget,
                    "outer_iter": len(res.blocks), "n_groups": int(chosen.size),
                    "true_groups": int(np.isin(chosen, true).sum()),
                    "test_acc": float(np.mean(np.where(scores > 0, 1.0, -1.0) == yte)),
                    "cpu": t["cpu"], "wall": t["wall"]})
    return out


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
    tiny_idx, tiny_ptr = grp_converter(GROUP_SIZE, 2 * GROUP_SIZE)
    GeneralizedLinearEstimator(  # compile skglm's numba kernels outside the timed path
        LogisticGroup(tiny_ptr, tiny_idx), WeightedGroupL2(0.1, weights[:2], tiny_ptr, tiny_idx),
        GroupBCD(fit_intercept=True)).fit(Xtr[:50, :2 * GROUP_SIZE], ytr[:50])
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
    ap.add_argument("--generated", action="store_true",
                    help="generate X block by block (FGM only; for 40,000 groups)")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    limit_threads()
    if args.generated:
        results = run_generated(args.n, args.n_test, args.n_groups, args.seed, args.budgets,
                                args.C)
    else:
        Xtr, ytr, Xte, yte, groups, true = make_data(args.n, args.n_test, args.n_groups,
                                                     args.seed)
        results = run_fgm(Xtr, ytr, Xte, yte, groups, true, args.budgets, args.C)
    if args.path and not args.generated:
        results += run_group_lasso(Xtr, ytr, Xte, yte, groups, true, args.path)
    rows = [[r["method"], str(r.get("budget", f"{r.get('alpha_ratio', 0):.3f} a_max")),
             str(r["n_groups"]), str(r["true_groups"]), f"{r['test_acc']:.4f}", f"{r['cpu']:.2f}",
             f"{r['cpu_path']:.1f}" if "cpu_path" in r else "-"] for r in results]
    print(format_table(["method", "budget / alpha", "groups", "true", "test acc", "CPU s",
                        "path CPU s"], rows,
                       title=f"Synthetic groups: n = {args.n}, {args.n_groups} groups of "
                             f"{GROUP_SIZE}, {N_TRUE} true"))
    write_json(args.out, {"args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
