"""KT3DMoSeg: the candidate pool with SSC added, ranked by the Hopkins155 ranker and by rankers
trained leave-one-clip-out on KITTI.

Usage::

    python benchmarks/motion/motion_kt3dmoseg_pool.py [--data DIR] [--cache DIR]

Per clip (tracks observed in at least 2 frames; the one never-observed track of Seq059_Clip01
counts as misclassified): rank-4K completion (:func:`cvfs.motion.missing.complete_trajectories`,
as :func:`cvfs.motion.segment`), the default candidate pool
(:func:`cvfs.motion.candidates.generate_candidates`, seed 0), plus the SSC segmentation of the same
completed trajectories (``benchmarks/motion/motion_kt3dmoseg.py``), the ranking features of the
whole pool (:func:`cvfs.motion.features.candidate_features`) and each candidate's misclassification.
Cached per clip in ``--cache`` (``out/kt3dmoseg_pool``; ~25 min to build on a loaded 2-core
machine, mostly SSC). Selections compared (mean / median misclassification % over the 22 clips):

* **SSC**: the SSC candidate alone (the baseline).
* **Hopkins ranker, pool + SSC**: the shipped ranker for K = 2, 3; for K = 4, 5 the lowest
  subspace residual (:func:`cvfs.motion.rank_candidates`' rule).
* **lowest residual**: the lowest mean squared distance to K affine 3-D subspaces, every K.
* **KITTI ranker, leave one clip out**: :class:`cvfs.motion.ranking.MotionRanker` (default
  settings) trained on the candidates of the other 21 clips, scoring the held-out clip's pool
  (with and without the SSC candidate in the pool it picks from).
* **oracle**: the best candidate of the pool (with and without SSC).

Writes ``benchmarks/results/motion/motion_kt3dmoseg_pool.json``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from benchmarks.motion.motion_kt3dmoseg import ssc_labels
from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
from cvfs.motion import load_default_ranker, normalise_points
from cvfs.motion.candidates import (
    KSUBSPACE_CODE,
    Candidates,
    canonical_labels,
    generate_candidates,
    velocity_matrix,
)
from cvfs.motion.evaluate import misclassification
from cvfs.motion.features import candidate_features
from cvfs.motion.kselect import subspace_residual
from cvfs.motion.missing import MIN_OBSERVED, complete_trajectories, trajectory_matrix
from cvfs.motion.ranking import MotionRanker

# params code of the SSC candidate (no refinement indicator in the features)
SSC_CODE = KSUBSPACE_CODE + 1


def clip_pool(clip, ranker):
    """Pool (+ SSC last), features, errors, residuals and the shipped ranker's scores."""
    ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
    pts, vis, truth = clip.points[ok], clip.visible[ok], clip.labels[ok]
    k = clip.n_motions
    t0 = time.perf_counter()
    pn = normalise_points(complete_trajectories(pts, vis, n_motions=k))
    cand = generate_candidates(pn, k, random_state=0)
    t1 = time.perf_counter()
    ssc = canonical_labels(ssc_labels(trajectory_matrix(pn), k))[0]
    t2 = time.perf_counter()
    labels = np.vstack([cand.labels, ssc[None]])
    params = np.vstack([cand.params, [[1.0, 0, SSC_CODE]]])
    pool = Candidates(labels=labels, params=params, basis=cand.basis,
                      singular_values=cand.singular_values, n_motions=k)
    X = candidate_features(pn, pool)
    Y = velocity_matrix(pn).T
    hop = ranker.decision_function(X) if k in (2, 3) else np.full(len(labels), np.nan)
    return {"K": k, "ok": ok, "X": X, "errors": misclassification(labels, truth),
            "res": np.array([subspace_residual(Y, lab) for lab in labels]), "hop": hop,
            "seconds": np.array([t1 - t0, t2 - t1, time.perf_counter() - t2])}


def load_pools(clips, cache):
    cache.mkdir(parents=True, exist_ok=True)
    ranker = load_default_ranker()
    out = {}
    for clip in tqdm(clips, desc="KT3DMoSeg pools"):
        path = cache / f"{clip.name}.npz"
        if not path.is_file():
            np.savez(path, **clip_pool(clip, ranker))
        with np.load(path) as f:
            out[clip.name] = {key: f[key] for key in f.files}
    return out


def _percent(d, err):
    """Misclassification % over all tracks; tracks left out count as errors."""
    ok = d["ok"]
    return 100.0 * (err * ok.sum() + (~ok).sum()) / ok.size


def evaluate(pools):
    names = sorted(pools)
    X = np.vstack([pools[n]["X"] for n in names])
    E = np.concatenate([pools[n]["errors"] for n in names])
    G = np.concatenate([np.full(len(pools[n]["errors"]), i) for i, n in enumerate(names)])
    # the SSC candidate is the last of every clip's pool
    last = np.concatenate([np.arange(len(pools[n]["errors"])) == len(pools[n]["errors"]) - 1
                           for n in names])
    rows = {}
    for i, n in enumerate(tqdm(names, desc="leave one clip out")):
        d = pools[n]
        e, nc = d["errors"], len(d["errors"]) - 1
        res_pick = int(np.argmin(d["res"]))
        hop_pick = int(np.nanargmax(d["hop"])) if d["K"] in (2, 3) else res_pick
        tr = G != i
        s = MotionRanker().fit(X[tr], E[tr], G[tr]).decision_function(X[G == i])
        keep = tr & ~last
        s2 = MotionRanker().fit(X[keep], E[keep], G[keep]).decision_function(X[G == i][:nc])
        rows[n] = {"K": int(d["K"]), "ssc": e[-1], "hopkins": e[hop_pick], "residual": e[res_pick],
                   "loco": e[int(np.argmax(s))], "loco_no_ssc": e[int(np.argmax(s2))],
                   "oracle": e.min(), "oracle_no_ssc": e[:nc].min()}
        rows[n] = {key: (_percent(d, v) if key != "K" else v) for key, v in rows[n].items()}
    return rows


METHODS = [("SSC (run here)", "ssc"),
           ("Hopkins ranker (K=2,3) / residual (K=4,5), pool + SSC", "hopkins"),
           ("lowest residual, pool + SSC", "residual"),
           ("KITTI ranker, leave one clip out, pool + SSC", "loco"),
           ("KITTI ranker, leave one clip out, pool without SSC", "loco_no_ssc"),
           ("oracle, pool + SSC", "oracle"), ("oracle, pool without SSC", "oracle_no_ssc")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="KT3DMoSeg folder")
    ap.add_argument("--cache", default=str(REPO / "out" / "kt3dmoseg_pool"))
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    pools = load_pools(load_kt3dmoseg(args.data), Path(args.cache))
    rows = evaluate(pools)
    names = sorted(rows)
    print(format_table(["clip", "K"] + [m[1] for m in METHODS],
                       [[n, rows[n]["K"]] + [f"{rows[n][m[1]]:.2f}" for m in METHODS]
                        for n in names], title="KT3DMoSeg per clip (misclassification %)"))
    summary = []
    for label, key in METHODS:
        e = np.array([rows[n][key] for n in names])
        by_k = {kk: float(np.mean([rows[n][key] for n in names if rows[n]["K"] in ks]))
                for kk, ks in (("K=2", (2,)), ("K=3", (3,)), ("K=4,5", (4, 5)))}
        summary.append([label, f"{e.mean():.2f}", f"{np.median(e):.2f}"]
                       + [f"{v:.2f}" for v in by_k.values()])
    print(format_table(["method", "mean %", "median %", "mean K=2", "mean K=3", "mean K=4,5"],
                       summary, title=f"KT3DMoSeg, {len(names)} clips"))
    write_json(args.out, {"clips": rows, "summary": summary})


if __name__ == "__main__":
    main()
