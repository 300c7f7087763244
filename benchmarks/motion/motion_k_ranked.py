"""Choosing K by the segmentation the ranker puts first for each K (Hopkins155, CV by video).

Usage::

    python benchmarks/motion/motion_k_ranked.py [--data DIR] [--labellings DIR] [--pools DIR]
        [--fold-seeds 0 1 2 3 4] [--oracle] [--union [--union-k 2 3] [--no-nested]] [--smooth W]

For every sequence the candidate pool of :func:`cvfs.motion.candidates.generate_candidates`
(the Table VII pool) and its features are built for K = 2 and K = 3 (cached per sequence in
``--pools``). An FSA-Rank ranker (:class:`cvfs.motion.ranking.MotionRanker`, default settings,
trained on the true-K pools as the shipped ranker is) picks the top candidate of each K; the K
rule's quantities are then computed on that labelling: the robust cost ``g_K``
(:func:`cvfs.motion.kselect.capped_cost`, on the grid of ``motion_k.py``), the planar residual
``q_K``, the ranker's top score and its margin over the second candidate. K = 4, 5 (no ranked
pool: the shipped ranker knows K = 2, 3 only) keep the lowest-cost labelling's quantities, as
:func:`cvfs.motion.rank_candidates` falls back to the subspace residual there.

No ranker sees the sequence it ranks, nor the held-out fold: in outer fold f the test sequences
are ranked by the ranker trained on the nine other folds, and a training sequence of fold g by
the ranker trained on the eight folds other than f and g (90 + 10 fits per fold seed). The rules
(the eleven of ``motion_k.py`` plus the ranked ones) are scored by the plain 10-fold CV and by
the nested CV of ``motion_k.py`` (the inner CV reuses the outer fold's quantities, so it is
optimistic for the ranked rules only inside the training side; the held-out fold never
influences a choice).

``--oracle`` scores the ranked rules with a perfect ranker (each K's lowest-error candidate),
plain CV only, and lists ``log g`` at K = 2, 3 of the three-motion sequences
(``motion_k_ranked_oracle.json``). ``--union`` ranks the pools of the K in ``--union-k``
together, one group per sequence, and takes the K of the top candidate; the rules of
``motion_k.py`` restricted to the same K are scored beside it, and (without ``--no-nested``) a
nested choice between them and the union ranker (``motion_k_union.json``).

``--labellings`` is the labelling cache of ``motion_k.py`` (built when missing). Writes
``benchmarks/results/motion/motion_k_ranked.json``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from benchmarks.motion import motion_k as mk
from cvfs.datasets.hopkins155 import load_hopkins155
from cvfs.motion import normalise_points
from cvfs.motion.candidates import generate_candidates, velocity_matrix
from cvfs.motion.evaluate import misclassification, video_folds
from cvfs.motion.features import candidate_features
from cvfs.motion.kselect import (
    cluster_capped_cost,
    noise_variance,
    subspace_residual,
)
from cvfs.motion.ranking import MotionRanker

RANKED = (2, 3)


def pool_cache(seqs, cache):
    """Per sequence and K in ``RANKED``: candidate labels, features and errors (``.npz``)."""
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for s in tqdm(seqs, desc="pools K=2,3"):
        path = cache / f"{s.name}.npz"
        if not path.is_file():
            d = {}
            for k in RANKED:
                cand = generate_candidates(s.points, k, random_state=0)
                d[f"lab{k}"] = cand.labels.astype(np.int8)
                d[f"X{k}"] = candidate_features(s.points, cand)
                d[f"err{k}"] = misclassification(cand.labels, s.labels)
            np.savez_compressed(path, **d)
        out.append(dict(np.load(path)))
    return out


def labelling_quantities(points, lab):
    """Robust cost on the grid of ``motion_k`` (``(len(CAP_GRID), len(DIM_COST_GRID))``) and
    planar residual of one labelling."""
    pts = normalise_points(points)
    Y = velocity_matrix(pts).T
    P = Y.shape[0]
    sigma2 = noise_variance(Y)
    g = np.zeros((len(mk.CAP_GRID), len(mk.DIM_COST_GRID)))
    with threadpool_limits(limits=1, user_api="blas"):
        for c in np.unique(lab):
            g += cluster_capped_cost(Y[lab == c], sigma2, (2, 3, 4), mk.CAP_COLUMN,
                                     mk.DIM_COST_ROW)[0]
        q = subspace_residual(Y, lab, 2)
    return g / P, q


class RankedTables:
    """Ranked quantities of every sequence for each (ranker, candidate) pair, computed once per
    distinct chosen labelling."""

    def __init__(self, seqs, pools):
        self.seqs, self.pools = seqs, pools
        self._memo = {}

    def quantities(self, i, k, row):
        key = (i, k, row)
        if key not in self._memo:
            self._memo[key] = labelling_quantities(self.seqs[i].points,
                                                   self.pools[i][f"lab{k}"][row].astype(int))
        return self._memo[key]


def train_ranker(pools, y, idx):
    X = np.concatenate([pools[i][f"X{y[i]}"] for i in idx])
    err = np.concatenate([pools[i][f"err{y[i]}"] for i in idx])
    groups = np.concatenate([np.full(len(pools[i][f"err{y[i]}"]), j) for j, i in enumerate(idx)])
    return MotionRanker().fit(X, err, groups)


def rank_sequences(ranker, pools, idx):
    """{i: {k: (row, top score, margin, error of the row)}}."""
    out = {}
    for i in idx:
        out[i] = {}
        for k in RANKED:
            s = np.asarray(ranker.decision_function(pools[i][f"X{k}"]), float)
            order = np.argsort(-s, kind="stable")
            margin = float(s[order[0]] - s[order[1]]) if len(s) > 1 else 0.0
            out[i][k] = (int(order[0]), float(s[order[0]]), margin,
                         float(pools[i][f"err{k}"][order[0]]))
    return out


def ranked_tables(ranked, rt, stats, T, ks=mk.K_RANGE):
    """Tables (n, len(ks)) of the ranked quantities; K outside ``RANKED`` keeps the lowest-cost
    labelling's (``g:*`` and ``q`` of ``T``)."""
    n = len(stats)
    out = {}
    gr = np.full((len(mk.CAP_GRID), len(mk.DIM_COST_GRID), n, len(ks)), np.nan)
    qr = T["q"].copy()
    score = np.zeros((n, len(ks)))
    margin = np.zeros((n, len(ks)))
    for a in range(len(mk.CAP_GRID)):
        for b in range(len(mk.DIM_COST_GRID)):
            gr[a, b] = T[f"g:{a}:{b}"]
    for i in range(n):
        for j, k in enumerate(ks):
            if k in RANKED and T["valid"][i, j]:
                row, s, m, _ = ranked[i][k]
                g, q = rt.quantities(i, k, row)
                gr[:, :, i, j] = np.log(np.maximum(g, 1e-300))
                qr[i, j] = np.log(max(q, 1e-300))
                score[i, j], margin[i, j] = s, m
    for a in range(len(mk.CAP_GRID)):
        for b in range(len(mk.DIM_COST_GRID)):
            out[f"gr:{a}:{b}"] = gr[a, b]
    out["qr"] = qr
    # the ranker's confidence at K = 3 against K = 2 (0 elsewhere): lower favours K = 3
    d = np.zeros((n, len(ks)))
    d[:, list(ks).index(3)] = -(score[:, list(ks).index(3)] - score[:, list(ks).index(2)])
    out["dscore"] = d
    dm = np.zeros((n, len(ks)))
    dm[:, list(ks).index(3)] = -(margin[:, list(ks).index(3)] - margin[:, list(ks).index(2)])
    out["dmargin"] = dm
    out["big"] = (np.asarray(ks)[None, :] >= 4).astype(float) * np.ones((n, 1))
    return out


def ranked_forms(T, R):
    """The ranked rules (names as in the tables)."""
    cells = [k.split(":", 1)[1] for k in T if k.startswith("g:")]
    out = {
        "ranked: gr + lam pen": [(R[f"gr:{c}"], [T["pen"]], [mk.LAM_GRID]) for c in cells],
        "ranked: gr + mu qr + lam pen": [(R[f"gr:{c}"], [T["pen"], R["qr"]],
                                          [mk.LAM_GRID, mk.MU_GRID]) for c in cells],
        "ranked: g + mu q + nu dscore + lam pen": [
            (T[f"g:{c}"], [T["pen"], T["q"], R["dscore"]],
             [mk.LAM_GRID3, mk.MU_GRID3, np.concatenate([-np.geomspace(0.001, 1.0, 7)[::-1], [0.0],
                                                         np.geomspace(0.001, 1.0, 7)])])
            for c in cells],
    }
    cell = f"{mk.DEFAULT_CELL[0]}:{mk.DEFAULT_CELL[1]}"
    names = [f"g:{cell}", "q", "pen"]
    X = np.stack([np.where(T["valid"], T[nm], 0.0) for nm in names]
                 + [np.where(T["valid"], R[nm], 0.0)
                    for nm in (f"gr:{cell}", "qr", "dscore", "dmargin", "big")], axis=2)
    out["ranked: conditional logit"] = [("logit", X, c) for c in (0.1, 1.0, 10.0)]
    return out


def run_fold_seed(seqs, pools, stats, T, rt, fold_seed, base_forms):
    folds = video_folds([s.video for s in seqs], [s.raw_footage for s in seqs], 10, fold_seed)
    y = np.array([s.n_motions for s in seqs])
    valid = T["valid"]
    n = len(seqs)
    names = None
    plain, nested, picked, rank_err = {}, np.zeros(n, int), [], {}
    rankers = {}

    def ranker_without(*out):
        # the ranker trained without the folds ``out`` (the same for (f, g) and (g, f))
        key = frozenset(out)
        if key not in rankers:
            rankers[key] = train_ranker(pools, y, np.flatnonzero(~np.isin(folds, list(key))))
        return rankers[key]

    for f in tqdm(range(10), desc=f"fold seed {fold_seed}"):
        tr, te = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
        ranked = rank_sequences(ranker_without(f), pools, te)
        for g in np.unique(folds[tr]):
            ranked.update(rank_sequences(ranker_without(f, g), pools,
                                         np.flatnonzero(folds == g)))
        for i in te:
            rank_err[int(i)] = {k: ranked[i][k][3] for k in RANKED}
        R = ranked_tables(ranked, rt, stats, T)
        forms = dict(base_forms)
        forms.update(ranked_forms(T, R))
        if names is None:
            names = list(forms)
            plain = {nm: np.zeros(n, int) for nm in names}
        for nm, variants in forms.items():
            plain[nm][te] = mk.predict_form(variants, mk.fit_form(variants, tr, valid, y), te,
                                            valid)
        inner = mk.cv_forms(forms, tr, folds[tr], valid, y)
        acc = {nm: float(np.mean(p == y[tr])) for nm, p in inner.items()}
        best = max(forms, key=lambda nm: acc[nm])
        fitted = mk.fit_form(forms[best], tr, valid, y)
        nested[te] = mk.predict_form(forms[best], fitted, te, valid)
        picked.append({"fold": f, "form": best, "inner_accuracy": acc[best]})
    # the baseline nested CV (the eleven rules of motion_k.py only)
    _, base_info = mk.hopkins_cv(seqs, stats, fold_seed)
    base_nested = np.array([base_info["nested_chosen"][s.name] for s in seqs])

    def row(name, pred):
        return [name] + [100 * float(np.mean(pred[m] == y[m]))
                         for m in (y == 2, y == 3, np.ones_like(y, bool))]

    rows = [row(nm, p) for nm, p in plain.items()]
    rows.append(row("nested: eleven rules (motion_k.py)", base_nested))
    rows.append(row("nested: eleven + ranked rules", nested))
    return rows, {"picked": picked, "ranked_error": rank_err,
                  "chosen": {nm: p.tolist() for nm, p in plain.items()},
                  "nested": nested.tolist(), "base_nested": base_nested.tolist()}


def k4_pools(seqs, cache):
    """The K = 4 pool (with its K-subspaces restarts) of every sequence, as :func:`pool_cache`."""
    out = []
    for s in tqdm(seqs, desc="pools K=4"):
        path = cache / f"{s.name}_k4.npz"
        if not path.is_file():
            cand = generate_candidates(s.points, 4, random_state=0)
            np.savez_compressed(path, lab4=cand.labels.astype(np.int8),
                                X4=candidate_features(s.points, cand),
                                err4=misclassification(cand.labels, s.labels))
        out.append(dict(np.load(path)))
    return out


def union_data(pools, idx, ks):
    """Candidates of every K in ``ks`` of the sequences ``idx`` as one group per sequence."""
    X, err, groups, kk = [], [], [], []
    for j, i in enumerate(idx):
        for k in ks:
            X.append(pools[i][f"X{k}"])
            err.append(pools[i][f"err{k}"])
            groups.append(np.full(len(pools[i][f"err{k}"]), j))
            kk.append(np.full(len(pools[i][f"err{k}"]), k))
    return (np.concatenate(X), np.concatenate(err), np.concatenate(groups),
            np.concatenate(kk))


def union_choose(ranker, pools, idx, ks):
    """K of the top candidate of the union pool, and its error, per sequence of ``idx``."""
    from cvfs.motion.ranking import select_best

    X, err, groups, kk = union_data(pools, idx, ks)
    rows = select_best(ranker.decision_function(X), groups)
    return kk[rows], err[rows]


def run_union(seqs, pools, stats, fold_seed, ks, nested=True):
    """Plain CV of the union ranker (K = the K of its top candidate over the pools of ``ks``)
    and a nested choice between it and the eleven rules of ``motion_k.py``."""
    folds = video_folds([s.video for s in seqs], [s.raw_footage for s in seqs], 10, fold_seed)
    y = np.array([s.n_motions for s in seqs])
    n = len(seqs)
    rankers = {}

    def ranker_without(*out):
        key = frozenset(out)
        if key not in rankers:
            tr = np.flatnonzero(~np.isin(folds, list(key)))
            X, err, groups, _ = union_data(pools, tr, ks)
            rankers[key] = MotionRanker().fit(X, err, groups)
        return rankers[key]

    # the rules choose among the same K as the union ranker
    stats = [{**st, "K": {k: v for k, v in st["K"].items() if k in ks}} for st in stats]
    chosen, err = np.zeros(n, int), np.zeros(n)
    for f in tqdm(range(10), desc=f"union ranker, fold seed {fold_seed}"):
        te = np.flatnonzero(folds == f)
        chosen[te], err[te] = union_choose(ranker_without(f), pools, te, ks)
    _, base_info = mk.hopkins_cv(seqs, stats, fold_seed)
    base_nested = np.array([base_info["nested_chosen"][s.name] for s in seqs])
    rows = []

    def row(name, pred):
        return [name] + [100 * float(np.mean(pred[m] == y[m]))
                         for m in (y == 2, y == 3, np.ones_like(y, bool))]

    rows.append(row(f"union ranker over K in {tuple(ks)}", chosen))
    rows.append(row(f"nested: eleven rules (motion_k.py), K in {tuple(ks)}", base_nested))
    T = mk.form_tables(stats)
    default = {mk.DEFAULT_FORM: mk.k_forms(T)[mk.DEFAULT_FORM]}
    rows.append(row(f"default rule g + mu q + lam pen, plain CV, K in {tuple(ks)}",
                    mk.cv_forms(default, np.arange(n), folds, T["valid"], y)[mk.DEFAULT_FORM]))
    out = {"chosen": chosen.tolist(), "error": err.tolist()}
    if nested:
        forms, valid = mk.k_forms(T), T["valid"]
        pick = np.zeros(n, int)
        picked = []
        for f in tqdm(range(10), desc="nested"):
            tr, te = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
            inner = mk.cv_forms(forms, tr, folds[tr], valid, y)
            acc = {nm: float(np.mean(p == y[tr])) for nm, p in inner.items()}
            best = max(forms, key=lambda nm: acc[nm])
            ur = np.zeros(len(tr), int)
            for g in np.unique(folds[tr]):
                m = folds[tr] == g
                ur[m] = union_choose(ranker_without(f, g), pools, tr[m], ks)[0]
            acc_u = float(np.mean(ur == y[tr]))
            if acc_u > acc[best]:
                pick[te] = union_choose(ranker_without(f), pools, te, ks)[0]
                picked.append({"fold": f, "form": "union ranker", "inner_accuracy": acc_u})
            else:
                fitted = mk.fit_form(forms[best], tr, valid, y)
                pick[te] = mk.predict_form(forms[best], fitted, te, valid)
                picked.append({"fold": f, "form": best, "inner_accuracy": acc[best],
                               "union_inner_accuracy": acc_u})
        rows.append(row("nested: eleven rules + union ranker", pick))
        out.update(nested=pick.tolist(), picked=picked)
    return rows, out


def oracle_rows(seqs, pools, stats, rt, fold_seeds):
    """The ranked rules with a perfect ranker: each K's quantities on the lowest-error candidate
    of its pool (at the true K that is the ground-truth labelling's cost, up to the pool's
    oracle error), plain 10-fold CV; and, per three-motion sequence, ``log g`` at the default
    cell of the lowest-cost and of the oracle labelling for K = 2, 3."""
    T = mk.form_tables(stats)
    ranked = {i: {k: (int(np.argmin(p[f"err{k}"])), 0.0, 0.0, float(np.min(p[f"err{k}"])))
                  for k in RANKED} for i, p in enumerate(pools)}
    R = ranked_tables(ranked, rt, stats, T)
    forms = {nm: v for nm, v in ranked_forms(T, R).items() if "score" not in nm
             and "logit" not in nm}
    forms[mk.DEFAULT_FORM] = mk.k_forms(T)[mk.DEFAULT_FORM]
    y = np.array([s.n_motions for s in seqs])
    rows = []
    for seed in fold_seeds:
        folds = video_folds([s.video for s in seqs], [s.raw_footage for s in seqs], 10, seed)
        pred = mk.cv_forms(forms, np.arange(len(seqs)), folds, T["valid"], y)
        rows += [[f"{nm} (fold seed {seed})"] + [100 * float(np.mean(p[m] == y[m])) for m in
                                                 (y == 2, y == 3, np.ones_like(y, bool))]
                 for nm, p in pred.items()]
    cell = f"g:{mk.DEFAULT_CELL[0]}:{mk.DEFAULT_CELL[1]}"
    j2, j3 = list(mk.K_RANGE).index(2), list(mk.K_RANGE).index(3)
    per = [[seqs[i].name, float(T[cell][i, j2]), float(T[cell][i, j3]),
            float(R["gr" + cell[1:]][i, j2]), float(R["gr" + cell[1:]][i, j3]),
            float(T["pen"][i, j3] - T["pen"][i, j2])]
           for i in np.flatnonzero(y == 3)]
    return rows, per


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--labellings", default=str(REPO / "out" / "motion_k_labellings"))
    ap.add_argument("--pools", default=str(REPO / "out" / "motion_k_ranked_pools"))
    ap.add_argument("--fold-seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--union", action="store_true",
                    help="rank the candidates of K = 2, 3, 4 together (one ranker over the union "
                         "pool; K = the top candidate's) instead of scoring each K's top candidate")
    ap.add_argument("--union-k", type=int, nargs="+", default=[2, 3],
                    help="--union: the K whose pools are ranked together")
    ap.add_argument("--no-nested", action="store_true", help="--union: plain CV only")
    ap.add_argument("--oracle", action="store_true",
                    help="the ranked rules with a perfect ranker (lowest-error candidate per K)")
    ap.add_argument("--smooth", type=int, default=mk.SMOOTH,
                    help="as motion_k.py: the rules' parameters at the centre of the best "
                         "neighbourhood of this width on their grids (1: the best grid point)")
    args = ap.parse_args(argv)
    if args.smooth < 1:
        ap.error(f"--smooth must be >= 1; got {args.smooth}")
    mk.SMOOTH = args.smooth
    limit_threads()
    from cvfs.datasets._home import data_home

    data = Path(args.data) if args.data else Path(data_home())
    seqs = load_hopkins155(data / "hopkins155")
    cached = mk.hopkins_cache(seqs, Path(args.labellings))
    t0 = time.perf_counter()
    pools = pool_cache(seqs, Path(args.pools))
    t_pool = time.perf_counter() - t0
    stats = [mk.k_statistics(s.points, c)
             for s, c in zip(tqdm(seqs, desc="K statistics"), cached, strict=True)]
    if args.union:
        if 4 in args.union_k:
            for p, p4 in zip(pools, k4_pools(seqs, Path(args.pools)), strict=True):
                p.update(p4)
        return union_main(seqs, pools, stats, args)
    rt = RankedTables(seqs, pools)
    if args.oracle:
        rows, per = oracle_rows(seqs, pools, stats, rt, args.fold_seeds)
        print("K chosen correctly %, quantities of the lowest-error candidate per K, plain CV")
        print(format_table(["rule", "2 motions", "3 motions", "all"], mk._fmt(rows)))
        print(f"three motions: log g (cap {mk.CAPPED_CAP}, dim_cost {mk.CAPPED_DIM_COST}) of the "
              "lowest-cost labelling K=2, K=3; of the lowest-error candidate K=2, K=3; penalty "
              "step K=2->3 (per unit lam)")
        print(format_table(["sequence", "g2 lowest", "g3 lowest", "g2 oracle", "g3 oracle",
                            "pen step"], mk._fmt(per)))
        write_json(result_path(__file__, "motion_k_ranked_oracle"),
                   {"rows": rows, "three_motion": per})
        return
    T = mk.form_tables(stats)
    base_forms = mk.k_forms(T)
    results, t_cv = {}, {}
    for seed in args.fold_seeds:
        t0 = time.perf_counter()
        rows, info = run_fold_seed(seqs, pools, stats, T, rt, seed, base_forms)
        t_cv[seed] = time.perf_counter() - t0
        results[seed] = {"rows": rows, "info": info}
        print(f"fold seed {seed} ({t_cv[seed]:.0f} s): K chosen correctly %")
        print(format_table(["rule", "2 motions", "3 motions", "all"], mk._fmt(rows)))
        for p in info["picked"]:
            print(f"  fold {p['fold']}: {p['form']} ({100 * p['inner_accuracy']:.1f}%)")
        sys.stdout.flush()
    _summarise(results, args.fold_seeds, "motion_k_ranked.json",
               timing={"pools_seconds": t_pool, "cv_seconds": t_cv})


def _summarise(results, fold_seeds, name, **extra):
    """Print the mean table over the fold seeds and write ``benchmarks/results/motion/<name>``."""
    names = [r[0] for r in results[fold_seeds[0]]["rows"]]
    mean_rows = [[nm] + [float(np.mean([results[s]["rows"][j][c] for s in fold_seeds]))
                         for c in (1, 2, 3)] for j, nm in enumerate(names)]
    print(f"mean over fold seeds {fold_seeds}:")
    print(format_table(["rule", "2 motions", "3 motions", "all"], mk._fmt(mean_rows)))
    write_json(result_path(__file__).with_name(name),
               {"fold_seeds": fold_seeds, "mean_rows": mean_rows,
                "by_fold_seed": {str(s): r for s, r in results.items()}, **extra})


def union_main(seqs, pools, stats, args):
    results = {}
    for seed in args.fold_seeds:
        t0 = time.perf_counter()
        rows, info = run_union(seqs, pools, stats, seed, tuple(args.union_k),
                               nested=not args.no_nested)
        results[seed] = {"rows": rows, "info": info, "seconds": time.perf_counter() - t0}
        print(f"fold seed {seed} ({results[seed]['seconds']:.0f} s): K chosen correctly %")
        print(format_table(["rule", "2 motions", "3 motions", "all"], mk._fmt(rows)))
        for p in info.get("picked", []):
            print(f"  fold {p['fold']}: {p['form']} ({100 * p['inner_accuracy']:.1f}%)")
        sys.stdout.flush()
    _summarise(results, args.fold_seeds, "motion_k_union.json")


if __name__ == "__main__":
    main()
