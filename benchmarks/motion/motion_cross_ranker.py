"""A learned ranker of the two-view-geometry candidates across Hopkins155 and KT3DMoSeg, with
folds split by sequence.

Usage::

    python benchmarks/motion/motion_cross_ranker.py [--hopkins DIR] [--kt3dmoseg DIR]
        [--cache DIR] [--limit N] [--seed S] [--fold-seed S] [--balance] [--affine]
        [--affine-pool] [--out FILE]

Stage 1 (cached per sequence under ``--cache``, default ``$CVFS_CACHE`` or ``~/.cache/cvfs``,
in ``motion_cross_ranker/``): for every Hopkins155 sequence (the pixel tracks, all observed) and
every KT3DMoSeg clip (the visibility mask as given; the track observed in fewer than 2 frames
counts as misclassified), K given, seed ``--seed`` (default 0): the affinities of
:func:`cvfs.motion.geometry.geometric_affinities`, the pool
:func:`cvfs.motion.geometry.segment_perspective` ranks (:func:`~cvfs.motion.geometry.
candidate_pool`: four direct and up to four merged candidates), its selection scores and each
candidate's misclassification; then the features of every candidate
(:func:`cvfs.motion.geometry_features.geometry_features`). CPU seconds of both steps are kept.

Stage 2: :class:`cvfs.motion.ranking.MotionRanker` (default settings, no cluster floor: these
features have their own size columns) trained and tested with folds split by sequence:
Hopkins155 by video (:func:`cvfs.motion.evaluate.video_folds`, 10 folds, ``--fold-seed``),
KT3DMoSeg by KITTI sequence (``SeqNNN``: 15 folds, the clips of one sequence together). Each
held-out fold is ranked by a ranker trained on the other folds of its own set, alone (**own
set**) or with every sequence of the other set added (**both sets**), and by a ranker trained on
the other set alone (**other set only**). ``--balance`` repeats every sequence of the smaller
set in a training set holding both (7 times for 22 KT3DMoSeg clips beside 155 Hopkins155
sequences), so that each set weighs about the same. Beside them: the unlearned **cut rule**
(``segment_perspective``'s pick: the lowest geometric mean of the normalised cuts) and the
**oracle** of the pool. ``--affine`` also cross-validates the shipped affine pipeline on
Hopkins155 (``cvfs motion evaluate``'s FSA-Rank, same folds; needs its feature cache, about 8
minutes to build).

``--affine-pool`` makes every pool :mod:`cvfs.motion.combined`'s: the two-view candidates merged
from K + 4, K + 6 and K + 8 clusters (:data:`cvfs.motion.combined.MERGE_EXTRAS`), then the
candidates of the affine pipeline: those
:func:`cvfs.motion.segment` ranks by default (:func:`cvfs.motion.candidates.
generate_candidates` with the shipped ranker's settings on the normalised tracks; KT3DMoSeg's
completed first at rank 4K by :func:`cvfs.motion.missing.complete_trajectories`),
duplicates dropped, with the same features (computed on the observed entries; the relative
blocks over the whole pool).

Writes ``benchmarks/results/motion/motion_cross_ranker.json``.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.motion.evaluate import misclassification, summarise, video_folds
from cvfs.motion.geometry import (
    _tracks,
    candidate_pool,
    geometric_affinities,
    selection_scores,
)
from cvfs.motion.geometry_features import geometry_features, n_geometry_features
from cvfs.motion.ranking import MotionRanker, select_best

AFFINITIES = ("affine", "homography", "fundamental", "fused")
# bump when the features change (the pools stay cached)
FEATURES_TAG = f"features_{n_geometry_features()}_v1"
# bump when the affine candidates change (v2: the time-window labelling of partial tracks)
AFFINE_POOLS = "affine_pools_v2"
# the combined pool's extra merged two-view candidates (cvfs.motion.combined.MERGE_EXTRAS)
EXTRA_POOLS = "merged_extras_4_6_8"


def default_cache():
    base = Path(os.environ.get("CVFS_CACHE") or Path.home() / ".cache" / "cvfs").expanduser()
    return base / "motion_cross_ranker"


def _save_pool(path, points, visible, truth, n_dropped, k, seed):
    """Affinities, pool, selection scores and errors of one sequence (npz)."""
    t = time.process_time()
    p, v = _tracks(points, visible, k)
    aff = geometric_affinities(p, v, random_state=seed)
    labels = candidate_pool(p, v, aff, k, seed)
    scores = selection_scores(aff, labels)
    cpu = time.process_time() - t
    err = misclassification(labels, truth)
    n = p.shape[0]
    out = {"labels": labels, "scores": scores, "cpu_pool": cpu, "K": k,
           "errors": (err * n + n_dropped) / (n + n_dropped), "n_dropped": n_dropped}
    for name in AFFINITIES:
        A = aff[name].tocsr()
        out[f"aff_{name}_data"], out[f"aff_{name}_indices"] = A.data, A.indices
        out[f"aff_{name}_indptr"] = A.indptr
    np.savez(path, **out)


def _affinities(d, n):
    from scipy import sparse

    return {name: sparse.csr_matrix((d[f"aff_{name}_data"], d[f"aff_{name}_indices"],
                                     d[f"aff_{name}_indptr"]), shape=(n, n))
            for name in AFFINITIES}


def _save_affine_pool(path, points, visible, truth, n_dropped, k):
    """The shipped affine pipeline's candidates of one sequence (distinct rows) and errors:
    those :func:`cvfs.motion.combined.combined_candidates` appends to the two-view ones."""
    from cvfs.motion.combined import affine_candidates, affine_settings

    t = time.process_time()
    p, v = _tracks(points, visible, k)
    labels = affine_candidates(p, v, k, affine_settings())
    cpu = time.process_time() - t
    n = p.shape[0]
    err = misclassification(labels, truth)
    np.savez(path, labels=labels, cpu=cpu, errors=(err * n + n_dropped) / (n + n_dropped))


def _save_extra_pool(path, d, points, visible, truth, n_dropped, k, seed):
    """The extra merged two-view candidates of :mod:`cvfs.motion.combined`'s pool
    (:data:`~cvfs.motion.combined.MERGE_EXTRAS`) of one sequence, from its cached affinities."""
    from cvfs.motion.combined import MERGE_EXTRAS
    from cvfs.motion.geometry import _kmeans_seed
    from cvfs.motion.geometry_merge import merged_candidates

    t = time.process_time()
    p, v = _tracks(points, visible, k)
    aff = _affinities(d, p.shape[0])
    labels = np.vstack([merged_candidates(p, v, aff, k, _kmeans_seed(seed), extra=e)
                        for e in MERGE_EXTRAS])
    cpu = time.process_time() - t
    n = p.shape[0]
    err = misclassification(labels, truth) if len(labels) else np.zeros(0)
    np.savez(path, labels=labels, cpu=cpu, errors=(err * n + n_dropped) / (n + n_dropped))


def _load(cache, name, points, visible, truth, n_dropped, k, affine_pool=False, seed=0):
    """The cached pool and features of one sequence (built when missing); with
    ``affine_pool`` the pool of :mod:`cvfs.motion.combined`: the extra merged two-view
    candidates and the affine pipeline's appended."""
    pool = cache / f"pools_seed{seed}" / f"{name}.npz"
    feat = cache / f"{FEATURES_TAG}_seed{seed}" / f"{name}.npz"
    if not pool.is_file():
        pool.parent.mkdir(parents=True, exist_ok=True)
        _save_pool(pool, points, visible, truth, n_dropped, k, seed)
    with np.load(pool) as f:
        d = {key: f[key] for key in f.files}
    d["n_perspective"] = len(d["labels"])
    if affine_pool:
        merged = cache / f"{EXTRA_POOLS}_seed{seed}" / f"{name}.npz"
        extra = cache / AFFINE_POOLS / f"{name}.npz"
        feat = (cache / f"{FEATURES_TAG}_seed{seed}_{EXTRA_POOLS}_{AFFINE_POOLS}"
                / f"{name}.npz")
        if not merged.is_file():
            merged.parent.mkdir(parents=True, exist_ok=True)
            _save_extra_pool(merged, d, points, visible, truth, n_dropped, k, seed)
        if not extra.is_file():
            extra.parent.mkdir(parents=True, exist_ok=True)
            _save_affine_pool(extra, points, visible, truth, n_dropped, k)
        with np.load(merged) as f:
            d["labels"] = np.vstack([d["labels"], f["labels"]])
            d["errors"] = np.concatenate([d["errors"], f["errors"]])
            d["n_perspective"] = len(d["labels"])
            d["cpu_pool"] = float(d["cpu_pool"]) + float(f["cpu"])
        with np.load(extra) as f:
            d["labels"] = np.vstack([d["labels"], f["labels"]])
            d["errors"] = np.concatenate([d["errors"], f["errors"]])
            d["cpu_affine_pool"] = float(f["cpu"])
    if not feat.is_file():
        feat.parent.mkdir(parents=True, exist_ok=True)
        p, v = _tracks(points, visible, k)
        t = time.process_time()
        X = geometry_features(p, d["labels"], v, affinities=_affinities(d, p.shape[0]))
        np.savez(feat, X=X, cpu_features=time.process_time() - t)
    with np.load(feat) as f:
        d["X"], d["cpu_features"] = f["X"], float(f["cpu_features"])
    return d


def hopkins_pools(root, cache, limit=None, affine_pool=False, seed=0):
    from cvfs.datasets.hopkins155 import list_sequences, load_hopkins155

    names = list_sequences(root)[:limit]
    rows = []
    for s in tqdm(load_hopkins155(root, names=names), total=len(names), desc="Hopkins155"):
        vis = np.ones(s.pixels.shape[:2], dtype=bool)
        d = _load(cache / "hopkins155", s.name, s.pixels, vis, s.labels, 0, int(s.n_motions),
                  affine_pool, seed)
        d.update(name=s.name, set="hopkins155", group=s.video, raw=s.raw_footage,
                 category=s.category)
        rows.append(d)
    return rows


def kt3dmoseg_pools(root, cache, limit=None, affine_pool=False, seed=0):
    from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
    from cvfs.motion.missing import MIN_OBSERVED

    rows = []
    for c in tqdm(load_kt3dmoseg(root)[:limit], desc="KT3DMoSeg"):
        ok = c.visible.sum(axis=1) >= MIN_OBSERVED
        d = _load(cache / "kt3dmoseg", c.name, c.points[ok], c.visible[ok], c.labels[ok],
                  int((~ok).sum()), int(c.n_motions), affine_pool, seed)
        seq = c.name.split("_")[0]
        d.update(name=c.name, set="kt3dmoseg", group=seq, raw=seq, category="kitti")
        rows.append(d)
    return rows


def fold_ids(rows, fold_seed=0):
    """Fold of each sequence of one set: Hopkins155 by video (10 folds, ``fold_seed``),
    KT3DMoSeg by KITTI sequence (one fold each)."""
    if rows[0]["set"] == "hopkins155":
        n_videos = len({r["group"] for r in rows})
        return video_folds([r["group"] for r in rows], [r["raw"] for r in rows],
                           min(10, n_videos), fold_seed)
    groups = sorted({r["group"] for r in rows})
    return np.array([groups.index(r["group"]) for r in rows], dtype=np.int64)


def _stack(rows):
    X = np.vstack([r["X"] for r in rows])
    E = np.concatenate([r["errors"] for r in rows])
    G = np.concatenate([np.full(len(r["errors"]), i) for i, r in enumerate(rows)])
    return X, E, G


def _ranker(pair_weights):
    return MotionRanker(cluster_floor=False, pair_weights=pair_weights)


def _fit(rows, pair_weights):
    X, E, G = _stack(rows)
    return _ranker(pair_weights).fit(X, E, G)


def _picks(ranker, rows):
    """Error of the candidate ``ranker`` picks in each row."""
    X, E, G = _stack(rows)
    return E[select_best(ranker.decision_function(X), G)]


def _balanced(train, other, balance):
    """``train + other``, the rows of the smaller set repeated to about the larger's size when
    ``balance``."""
    if not balance or not other:
        return train + other
    n_own = len({r["name"] for r in train})
    if n_own < len(other):
        return train * max(1, round(len(other) / n_own)) + other
    return train + other * max(1, round(n_own / len(other)))


def cross_validate(test_rows, other_rows, pair_weights, desc, balance=False, fold_seed=0):
    """Per-sequence test errors of ``test_rows``: trained on the other folds of its set
    (``own``), with every sequence of ``other_rows`` added (``both``; the smaller set repeated
    with ``balance``)."""
    folds = fold_ids(test_rows, fold_seed)
    own = np.full(len(test_rows), np.nan)
    both = np.full(len(test_rows), np.nan)
    for f in tqdm(np.unique(folds), desc=desc):
        test = [r for r, g in zip(test_rows, folds, strict=True) if g == f]
        train = [r for r, g in zip(test_rows, folds, strict=True) if g != f]
        at = folds == f
        own[at] = _picks(_fit(train, pair_weights), test)
        if other_rows:
            both[at] = _picks(_fit(_balanced(train, other_rows, balance), pair_weights), test)
    return own, both


def set_results(rows, other, pair_weights, balance=False, fold_seed=0):
    own, both = cross_validate(rows, other, pair_weights, f"folds {rows[0]['set']}", balance,
                               fold_seed)
    res = {"cut rule (segment_perspective)": np.array([r["errors"][int(np.argmin(r["scores"]))]
                                                       for r in rows]),
           "oracle of the pool": np.array([r["errors"].min() for r in rows]),
           "oracle, perspective candidates": np.array([r["errors"][:r["n_perspective"]].min()
                                                       for r in rows]),
           "ranker, own set (CV by sequence)": own}
    if other:
        res["ranker, both sets (CV by sequence)"] = both
        res["ranker, other set only"] = _picks(_fit(other, pair_weights), rows)
    return {k: 100.0 * v for k, v in res.items()}


def summary_rows(rows, res):
    """Mean and median %, and by K (Hopkins155: 2 and 3; KT3DMoSeg: 2, 3, 4-5)."""
    K = np.array([int(r["K"]) for r in rows])
    out = []
    for method, e in res.items():
        by = [float(np.mean(e[np.isin(K, ks)])) if np.isin(K, ks).any() else np.nan
              for ks in ((2,), (3,), (4, 5))]
        out.append({"method": method, "mean": float(e.mean()), "median": float(np.median(e)),
                    "K2": by[0], "K3": by[1], "K45": by[2]})
    return out


def _table(title, summ):
    return format_table(["method", "mean %", "median %", "K=2", "K=3", "K=4,5"],
                        [[s["method"], f"{s['mean']:.2f}", f"{s['median']:.2f}",
                          f"{s['K2']:.2f}", f"{s['K3']:.2f}", f"{s['K45']:.2f}"]
                         for s in summ], title=title)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hopkins", default=None, help="Hopkins155 folder")
    ap.add_argument("--kt3dmoseg", default=None, help="KT3DMoSeg folder")
    ap.add_argument("--cache", default=None, help="cache folder (default: see the docstring)")
    ap.add_argument("--limit", type=int, default=None,
                    help="only the first N sequences of each set (a quick check)")
    ap.add_argument("--sets", nargs="+", default=["hopkins155", "kt3dmoseg"],
                    choices=["hopkins155", "kt3dmoseg"])
    ap.add_argument("--pair-weights", default="uniform", choices=["uniform", "group"],
                    help="MotionRanker's pair_weights (every pool here has the same size, so "
                         "the two agree unless a sequence has no merged candidates)")
    ap.add_argument("--balance", action="store_true",
                    help="repeat the smaller set's sequences when training on both sets")
    ap.add_argument("--affine", action="store_true",
                    help="also cross-validate the shipped affine pipeline on Hopkins155")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the affinities and k-means (segment_perspective's "
                         "random_state)")
    ap.add_argument("--fold-seed", type=int, default=0,
                    help="seed of Hopkins155's video-to-fold assignment")
    ap.add_argument("--affine-pool", action="store_true",
                    help="add the affine pipeline's candidates to every pool")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    cache = Path(args.cache) if args.cache else default_cache()
    sets = {}
    if "hopkins155" in args.sets:
        sets["hopkins155"] = hopkins_pools(args.hopkins, cache, args.limit, args.affine_pool,
                                           args.seed)
    if "kt3dmoseg" in args.sets:
        sets["kt3dmoseg"] = kt3dmoseg_pools(args.kt3dmoseg, cache, args.limit,
                                            args.affine_pool, args.seed)
    out = {"pair_weights": args.pair_weights, "balance": args.balance,
           "affine_pool": args.affine_pool, "seed": args.seed, "fold_seed": args.fold_seed,
           "n_features": n_geometry_features(), "sets": {}}
    for name, rows in sets.items():
        other = [r for n, rs in sets.items() if n != name for r in rs]
        t = time.process_time()
        res = set_results(rows, other, args.pair_weights, args.balance, args.fold_seed)
        summ = summary_rows(rows, res)
        if name == "kt3dmoseg":
            print(format_table(["clip", "K"] + list(res),
                               [[r["name"], int(r["K"])] + [f"{e[i]:.2f}" for e in res.values()]
                                for i, r in enumerate(rows)],
                               title="KT3DMoSeg per clip (misclassification %)"))
        print(_table(f"{name}, {len(rows)} sequences, K given (misclassification %)", summ))
        cut = res["cut rule (segment_perspective)"]
        for method, e in res.items():
            if method.startswith("ranker"):
                print(f"{name}, {method}: better than the cut rule on {int(np.sum(e < cut - 1e-9))}"
                      f", worse on {int(np.sum(e > cut + 1e-9))} of {len(rows)} sequences")
        cpu_pool = float(sum(float(r["cpu_pool"]) for r in rows))
        cpu_feat = float(sum(r["cpu_features"] for r in rows))
        cpu_aff = float(sum(r.get("cpu_affine_pool", 0.0) for r in rows))
        print(f"{name}: pools {cpu_pool:.0f} s CPU (affine candidates {cpu_aff:.0f} s), "
              f"features {cpu_feat:.0f} s CPU, "
              f"{np.mean([len(r['errors']) for r in rows]):.1f} candidates per sequence")
        folds = fold_ids(rows, args.fold_seed)
        entry = {"summary": summ, "cpu_pool_s": cpu_pool, "cpu_features_s": cpu_feat,
                 "cpu_affine_pool_s": cpu_aff,
                 "cpu_rankers_s": time.process_time() - t,
                 "per_sequence": {r["name"]: {m: float(e[i]) for m, e in res.items()}
                                  | {"K": int(r["K"]), "fold": int(f)}
                                  for i, (r, f) in enumerate(zip(rows, folds, strict=True))}}
        if name == "hopkins155":
            entry["table_vii"] = {m: summarise(e / 100.0, [r["category"] for r in rows],
                                               [int(r["K"]) for r in rows])
                                  for m, e in res.items()}
        out["sets"][name] = entry
    if args.affine and "hopkins155" in sets:
        from cvfs.motion.evaluate import evaluate_hopkins155

        aff = evaluate_hopkins155(args.hopkins, rankers=("fsa",), fold_seed=args.fold_seed)
        out["hopkins155_affine_fsa_rank"] = aff["test"]
        print(f"shipped affine pipeline, Hopkins155 10-fold CV: {aff['test']['all']['mean']:.2f} "
              f"% (2 motions {aff['test']['two']['mean']:.2f}, 3 motions "
              f"{aff['test']['three']['mean']:.2f})")
    write_json(args.out, out)


if __name__ == "__main__":
    main()
