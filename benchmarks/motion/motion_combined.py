"""``segment(points, K or None, camera="auto")`` on Hopkins155 and KT3DMoSeg, cross-validated by
sequence: the combined pool (two-view and affine candidates) ranked by a ranker trained on both
sets.

Usage::

    python benchmarks/motion/motion_combined.py [--hopkins DIR] [--kt3dmoseg DIR] [--cache DIR]
        [--limit N] [--sets hopkins155 kt3dmoseg] [--no-k-chosen] [--jobs N] [--out FILE]

The pools and features of K given come from ``motion_cross_ranker.py``'s cache (built when
missing: about 25 min CPU; seed 0). Folds split by sequence as there: Hopkins155 by video (10
folds), KT3DMoSeg by KITTI sequence (15 folds). Each held-out fold is ranked by a ranker trained
on the other folds of its set and every sequence of the other set (the shipped ranker is trained
on all of them: ``data_prep/train_motion_ranker.py --combined``). K given: the error of the pick
and whether it is an affine candidate. K chosen: :func:`cvfs.motion.combined.segment_combined`
with ``n_motions=None`` and the fold's ranker, run on every held-out sequence (KT3DMoSeg's tracks
observed in fewer than 2 frames dropped and counted as misclassified, as for K given); K right,
the error and the CPU seconds per sequence.

Writes ``benchmarks/results/motion/motion_combined.json``.
"""

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from benchmarks.motion.motion_cross_ranker import (
    _fit,
    _stack,
    default_cache,
    fold_ids,
    hopkins_pools,
    kt3dmoseg_pools,
)
from cvfs.motion.evaluate import misclassification
from cvfs.motion.ranking import select_best


def _tracks(args, names):
    """name -> (points, visible, truth, n_dropped) of the sequences named."""
    from cvfs.datasets.hopkins155 import load_hopkins155
    from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
    from cvfs.motion.missing import MIN_OBSERVED

    out = {}
    hop = [n for n in names if not n.startswith("Seq")]
    if hop:
        for s in load_hopkins155(args.hopkins, names=hop):
            out[s.name] = (s.pixels, np.ones(s.pixels.shape[:2], dtype=bool), s.labels, 0)
    if len(hop) < len(names):
        for c in load_kt3dmoseg(args.kt3dmoseg):
            if c.name in names:
                ok = c.visible.sum(axis=1) >= MIN_OBSERVED
                out[c.name] = (c.points[ok], c.visible[ok], c.labels[ok], int((~ok).sum()))
    return out


def _k_chosen(job):
    """K chosen on one sequence: the affine rule's K (``segment_combined``'s) and the error of
    the pick there, with the CPU seconds of ``segment_combined(points, None, ...)``; beside
    them the K the two-view cuts choose and the error of the pick at that K."""
    name, (points, visible, truth, n_dropped), ranker = job
    from cvfs.motion.combined import CombinedSequence

    limit_threads()
    t = time.process_time()
    seq = CombinedSequence(points, visible, model=ranker)
    ks = seq.candidates_k(range(2, 9))
    k = k_affine = seq.k_affine(ks)
    picks = {k: seq.pick(k)}
    cpu = time.process_time() - t  # segment_combined(points, None, visible)'s work
    k_cut = seq.k_cut(ks)
    for kk in {k_affine, k_cut} - {k}:
        picks[kk] = seq.pick(kk)
    n = len(truth)
    err = {kk: 100.0 * (misclassification(lab, truth) * n + n_dropped) / (n + n_dropped)
           for kk, (lab, _) in picks.items()}
    return name, {"k_affine": k_affine, "k_cut": k_cut, "k_chosen": k, "chosen": err[k],
                  "chosen_affine": bool(picks[k][1]), "error_k_affine": err[k_affine],
                  "error_k_cut": err[k_cut], "cpu_chosen_s": cpu}


def evaluate_set(rows, other, args):
    """Per-sequence results of one set, each fold ranked by a ranker trained on the other folds
    and the other set."""
    folds = fold_ids(rows)
    res = {r["name"]: {"K": int(r["K"]), "fold": int(f)} for r, f in zip(rows, folds,
                                                                         strict=True)}
    jobs = []
    for f in tqdm(np.unique(folds), desc=f"folds {rows[0]['set']}"):
        test = [r for r, g in zip(rows, folds, strict=True) if g == f]
        train = [r for r, g in zip(rows, folds, strict=True) if g != f] + other
        ranker = _fit(train, "uniform")
        X, _, G = _stack(test)
        start = 0
        for r, row in zip(test, select_best(ranker.decision_function(X), G), strict=True):
            sel = int(row) - start  # the pick's index in the sequence's pool
            res[r["name"]].update(given=100.0 * float(r["errors"][sel]),
                                  given_affine=bool(sel >= r["n_perspective"]))
            start += len(r["errors"])
        if not args.no_k_chosen:
            jobs += [(r["name"], ranker) for r in test]
    if jobs:
        tracks = _tracks(args, [name for name, _ in jobs])
        work = [(name, tracks[name], ranker) for name, ranker in jobs]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as ex:
                done = list(tqdm(ex.map(_k_chosen, work), total=len(work),
                                 desc=f"K chosen {rows[0]['set']}"))
        else:
            done = [_k_chosen(w) for w in tqdm(work, desc=f"K chosen {rows[0]['set']}")]
        for name, row in done:
            res[name].update(row)
    return res


def summary(res):
    v = list(res.values())
    out = {"n": len(v), "given": float(np.mean([r["given"] for r in v])),
           "given_affine_picks": int(sum(r["given_affine"] for r in v))}
    for ks, tag in (((2,), "K2"), ((3,), "K3"), ((4, 5), "K45")):
        sel = [r["given"] for r in v if r["K"] in ks]
        out[f"given_{tag}"] = float(np.mean(sel)) if sel else float("nan")
    if v and "chosen" in v[0]:
        out.update(chosen=float(np.mean([r["chosen"] for r in v])),
                   k_right=int(sum(r["k_chosen"] == r["K"] for r in v)),
                   k_right_affine_rule=int(sum(r["k_affine"] == r["K"] for r in v)),
                   k_right_cut_rule=int(sum(r["k_cut"] == r["K"] for r in v)),
                   error_affine_rule=float(np.mean([r["error_k_affine"] for r in v])),
                   error_cut_rule=float(np.mean([r["error_k_cut"] for r in v])),
                   chosen_affine_picks=int(sum(r["chosen_affine"] for r in v)),
                   cpu_chosen_s_per_sequence=float(np.mean([r["cpu_chosen_s"] for r in v])))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hopkins", default=None, help="Hopkins155 folder")
    ap.add_argument("--kt3dmoseg", default=None, help="KT3DMoSeg folder")
    ap.add_argument("--cache", default=None, help="motion_cross_ranker.py's cache folder")
    ap.add_argument("--limit", type=int, default=None, help="first N sequences of each set")
    ap.add_argument("--sets", nargs="+", default=["hopkins155", "kt3dmoseg"],
                    choices=["hopkins155", "kt3dmoseg"], help="sets evaluated (both train)")
    ap.add_argument("--no-k-chosen", action="store_true", help="K given only")
    ap.add_argument("--jobs", type=int, default=1, help="processes for K chosen")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    cache = Path(args.cache) if args.cache else default_cache()
    sets = {"hopkins155": hopkins_pools(args.hopkins, cache, args.limit, True, 0),
            "kt3dmoseg": kt3dmoseg_pools(args.kt3dmoseg, cache, args.limit, True, 0)}
    out = {"seed": 0, "sets": {}}
    table = []
    for name in args.sets:
        other = [r for n, rs in sets.items() if n != name for r in rs]
        res = evaluate_set(sets[name], other, args)
        summ = summary(res)
        out["sets"][name] = {"summary": summ, "per_sequence": res}
        table.append([name, summ["n"], f"{summ['given']:.2f}", summ["given_affine_picks"],
                      f"{summ.get('chosen', float('nan')):.2f}",
                      summ.get("k_right", "-"), summ.get("chosen_affine_picks", "-"),
                      f"{summ.get('cpu_chosen_s_per_sequence', float('nan')):.1f}"])
    print(format_table(["set", "sequences", "K given %", "affine picks", "K chosen %",
                        "K right", "affine picks", "CPU s / sequence (K chosen)"], table,
                       title="segment(camera='auto'), folds split by sequence"))
    write_json(args.out, out)


if __name__ == "__main__":
    main()
