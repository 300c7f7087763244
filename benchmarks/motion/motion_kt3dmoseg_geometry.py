"""KT3DMoSeg (22 KITTI clips, K given): candidates from two-view geometry, alone and in the pool.

Usage::

    python benchmarks/motion/motion_kt3dmoseg_geometry.py [--data DIR] [--clips N] [--seeds 0 1 2]
                                                         [--pool] [--ssc]

Every clip's labelled trajectories (``cvfs.datasets.kt3dmoseg``) with their visibility mask as
given; tracks observed in fewer than 2 frames (one in Seq059_Clip01) get no label and count as
misclassified for every method.

* **affine / homography / fundamental / fused**: the candidates of
  :func:`cvfs.motion.geometry.geometric_candidates` (default settings, the observed entries only,
  no completion), each on its own, mean over ``--seeds`` (the hypothesis sampling and k-means
  seeds); **oracle, geometric** is the best of the four.
* **selected**: the candidate :func:`cvfs.motion.segment` picks with ``camera="perspective"``
  (:func:`cvfs.motion.geometry.segment_perspective`: the lowest geometric mean of the normalised
  cuts on the four affinities, among the four candidates and the four merged back to K by
  two-view fit, :mod:`cvfs.motion.geometry_merge`), same seeds; **selected among the four
  direct candidates** without the merged ones; **oracle of the direct and merged
  candidates**; **selected, cut on fused** and **selected, K = 2..5 by cut / K** (among the
  direct candidates) are printed for comparison (the second: every K's pick, then the K with
  the lowest score per cluster; its K right count is printed).
* ``--pool``: the shipped pipeline of :func:`cvfs.motion.segment` with the true K (rank-4K
  completion, the default candidate pool, the shipped ranker for K = 2, 3 and the lowest subspace
  residual for K >= 4): its pick (**cvfs**) and the pool's best (**oracle, pool**); then the
  pool with the geometric candidates (seed 0) added: the best (**oracle, pool + geometric**) and
  what the same ranking picks from it (**cvfs ranking, pool + geometric**; the geometric
  candidates' features are computed on the completed trajectories, as the pool's).
* ``--ssc``: sparse subspace clustering on the completed trajectories
  (``benchmarks/motion/motion_kt3dmoseg.py``; about 30 minutes).

Writes ``benchmarks/results/motion/motion_kt3dmoseg_geometry.json``.
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
from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
from cvfs.motion.candidates import canonical_labels
from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import (
    _tracks,
    geometric_candidates,
    normalised_cut,
    selection_scores,
    spectral_labels_sparse,
)
from cvfs.motion.geometry_merge import merged_candidates
from cvfs.motion.missing import MIN_OBSERVED

GEOMETRIC = ("affine", "homography", "fundamental", "fused")
SELECTED = ("selected", "selected_direct", "oracle_merged", "selected_fused_cut",
            "selected_k_chosen")
K_TRIED = (2, 3, 4, 5)


def _percent(err, ok):
    """Misclassification % over all tracks from the rate on the kept ones; the others count as
    errors."""
    return 100.0 * (np.asarray(err) * ok.sum() + (~ok).sum()) / ok.size


def pool_rows(pts, vis, truth, k, geo_labels, ok):
    """The shipped pipeline's pick and oracle, with and without the geometric candidates."""
    from cvfs.motion import RANKED_K, load_default_ranker, normalise_points
    from cvfs.motion.candidates import (
        DEFAULT_ALPHAS,
        DEFAULT_REFINE,
        KSUBSPACE_CODE,
        Candidates,
        generate_candidates,
        velocity_matrix,
    )
    from cvfs.motion.features import candidate_features
    from cvfs.motion.kselect import subspace_residual
    from cvfs.motion.missing import complete_trajectories

    ranker = load_default_ranker()
    settings = getattr(ranker, "settings_", {})
    pn = normalise_points(complete_trajectories(pts, vis, n_motions=k))
    cand = generate_candidates(pn, k, alphas=tuple(settings.get("alphas", DEFAULT_ALPHAS)),
                               refine=tuple(settings.get("refine", DEFAULT_REFINE)),
                               random_state=int(settings.get("seed", 0)))
    n_pool = len(cand)
    labels = np.vstack([cand.labels, geo_labels])
    # the geometric candidates carry no (alpha, d) and no refinement indicator
    params = np.vstack([cand.params, np.tile([1.0, 0.0, KSUBSPACE_CODE + 1],
                                             (len(geo_labels), 1))])
    both = Candidates(labels=labels, params=params, basis=cand.basis,
                      singular_values=cand.singular_values, n_motions=k)
    if k in tuple(settings.get("ranked_k", RANKED_K)):
        s_pool = ranker.decision_function(candidate_features(pn, cand))
        s_both = ranker.decision_function(candidate_features(pn, both))
    else:
        Y = velocity_matrix(pn).T
        s_both = -np.array([subspace_residual(Y, lab) for lab in labels])
        s_pool = s_both[:n_pool]
    err = _percent(misclassification(labels, truth), ok)
    pick = int(np.argmax(s_both))
    return {"cvfs": float(err[int(np.argmax(s_pool))]), "oracle_pool": float(err[:n_pool].min()),
            "oracle_pool_geometric": float(err.min()), "cvfs_pool_geometric": float(err[pick]),
            "picked_geometric": bool(pick >= n_pool), "n_pool": n_pool}


def clip_row(clip, *, seeds=(0,), pool=False, ssc=False):
    """One clip's errors (%) of each geometric candidate (mean over ``seeds``; per seed in
    ``runs``), their oracle, CPU seconds per seed, and with ``pool`` / ``ssc`` the pool's and
    SSC's numbers (:func:`pool_rows`)."""
    ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
    pts, vis, truth = clip.points[ok], clip.visible[ok], clip.labels[ok]
    k = clip.n_motions
    row = {"clip": clip.name, "K": k, "P": clip.n_points, "F": clip.n_frames,
           "missing_%": 100.0 * clip.missing_fraction, "dropped": int((~ok).sum())}
    runs, cpu, first, chosen = [], [], None, []
    for seed in seeds:
        t = time.process_time()
        cand, aff = geometric_candidates(pts, k, vis, random_state=int(seed),
                                         return_affinities=True)
        scores = selection_scores(aff, cand.labels)
        cpu.append(time.process_time() - t)
        if first is None:
            first = cand.labels
        err = _percent(misclassification(cand.labels, truth), ok)
        run = dict(zip(cand.names, err))
        run["selected_direct"] = float(err[int(np.argmin(scores))])
        # segment's pool: these and the candidates merged back to K by two-view fit
        vpts, vvis = _tracks(pts, vis)
        merged = merged_candidates(vpts, vvis, aff, k, int(seed))
        if merged.shape[0]:
            merr = _percent(misclassification(merged, truth), ok)
            mscores = selection_scores(aff, merged)
            run["oracle_merged"] = float(min(np.min(err), np.min(merr)))
            run["selected"] = float(merr[int(np.argmin(mscores))]
                                    if mscores.min() < scores.min() else
                                    err[int(np.argmin(scores))])
        else:
            run["oracle_merged"] = float(np.min(err))
            run["selected"] = run["selected_direct"]
        run["selected_fused_cut"] = float(err[int(np.argmin(
            [normalised_cut(aff["fused"], lab) for lab in cand.labels]))])
        # K chosen: each K's pick, then the lowest score per cluster
        best = {}
        for kk in K_TRIED:
            if 4 * kk > pts.shape[0]:
                continue
            # the same affinities clustered into kk (as geometric_candidates with kk would)
            labs = cand.labels if kk == k else np.vstack(
                [canonical_labels(spectral_labels_sparse(aff[n], kk, random_state=int(seed)))
                 for n in cand.names])
            s = scores if kk == k else selection_scores(aff, labs)
            i = int(np.argmin(s))
            best[kk] = (float(s[i]) / kk,
                        float(_percent(misclassification(labs[i:i + 1], truth), ok)[0]))
        kc = min(best, key=lambda kk: best[kk][0])
        run["selected_k_chosen"] = best[kc][1]
        chosen.append(kc)
        runs.append(run)
    for name in GEOMETRIC + SELECTED:
        row[name] = float(np.mean([r[name] for r in runs]))
    row["k_chosen"] = chosen
    row["oracle_geometric"] = float(np.mean([min(r[n] for n in GEOMETRIC) for r in runs]))
    row["runs"] = runs
    row["cpu_s"] = float(np.mean(cpu))
    if pool:
        t = time.process_time()
        row.update(pool_rows(pts, vis, truth, k, first, ok))
        row["pool_cpu_s"] = time.process_time() - t
    if ssc:
        from benchmarks.motion.motion_kt3dmoseg import ssc_labels
        from cvfs.motion import normalise_points
        from cvfs.motion.missing import complete_trajectories, trajectory_matrix

        W = trajectory_matrix(normalise_points(complete_trajectories(pts, vis, n_motions=k)))
        row["ssc"] = float(_percent(misclassification(ssc_labels(W, k), truth), ok))
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="KT3DMoSeg folder")
    parser.add_argument("--clips", type=int, default=None, help="only the first N clips")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="seeds of the geometric candidates (the mean is reported)")
    parser.add_argument("--pool", action="store_true",
                        help="also the shipped pool's pick and oracle, with the geometric "
                             "candidates added")
    parser.add_argument("--ssc", action="store_true", help="also run SSC (slow)")
    parser.add_argument("--out", default=str(result_path(__file__)))
    args = parser.parse_args(argv)
    limit_threads()
    clips = load_kt3dmoseg(args.data)
    if args.clips:
        clips = clips[: args.clips]
    rows = []
    for clip in tqdm(clips, desc="KT3DMoSeg"):
        row = clip_row(clip, seeds=tuple(args.seeds), pool=args.pool, ssc=args.ssc)
        rows.append(row)
        tqdm.write(f"{clip.name}: K={row['K']} "
                   + " ".join(f"{n} {row[n]:.2f}" for n in GEOMETRIC)
                   + (f" cvfs {row['cvfs']:.2f} oracle {row['oracle_pool']:.2f}"
                      if args.pool else ""))
    keys = list(GEOMETRIC) + ["oracle_geometric"] + list(SELECTED)
    if args.pool:
        keys += ["cvfs", "oracle_pool", "oracle_pool_geometric", "cvfs_pool_geometric"]
    if args.ssc:
        keys.append("ssc")
    print(format_table(["clip", "K", "P", "F", "missing %"] + keys + ["CPU s"],
                       [[r["clip"], r["K"], r["P"], r["F"], f"{r['missing_%']:.1f}"]
                        + [f"{r[k]:.2f}" for k in keys] + [f"{r['cpu_s']:.1f}"] for r in rows],
                       title="KT3DMoSeg per clip, K given (misclassification %)"))
    labels = {"affine": "geometric: affine", "homography": "geometric: homography",
              "fundamental": "geometric: fundamental matrix",
              "fused": "geometric: fused (mean affinity)",
              "oracle_geometric": "oracle of the four geometric candidates",
              "selected": "selected (segment, camera=perspective)",
              "selected_direct": "selected among the four direct candidates",
              "oracle_merged": "oracle of the direct and merged candidates",
              "selected_fused_cut": "selected by the cut on the fused affinity",
              "selected_k_chosen": "selected, K = 2..5 chosen by cut / K",
              "cvfs": "cvfs segment (shipped pool and ranking)",
              "oracle_pool": "oracle of the shipped pool",
              "oracle_pool_geometric": "oracle of the pool + geometric candidates",
              "cvfs_pool_geometric": "shipped ranking of the pool + geometric candidates",
              "ssc": "SSC (completed trajectories)"}
    summary = []
    for key in keys:
        e = np.array([r[key] for r in rows])
        by_k = [float(np.mean([r[key] for r in rows if r["K"] in ks]) if
                      any(r["K"] in ks for r in rows) else np.nan)
                for ks in ((2,), (3,), (4, 5))]
        summary.append([labels[key], f"{e.mean():.2f}", f"{np.median(e):.2f}"]
                       + [f"{v:.2f}" for v in by_k])
    print(format_table(["method", "mean %", "median %", "K=2", "K=3", "K=4,5"], summary,
                       title=f"KT3DMoSeg, {len(rows)} clips, K given, seeds {args.seeds}"))
    for i, seed in enumerate(args.seeds):
        e = [r["runs"][i]["selected"] for r in rows]
        right = sum(r["k_chosen"][i] == r["K"] for r in rows)
        e_k = [r["runs"][i]["selected_k_chosen"] for r in rows]
        print(f"seed {seed}: selected {np.mean(e):.2f} % mean, {np.median(e):.2f} % median; "
              f"K chosen right on {right}/{len(rows)} clips, {np.mean(e_k):.2f} % mean")
    cpu = np.array([r["cpu_s"] for r in rows])
    print(f"geometric candidates and selection (K given): {cpu.sum():.1f} s CPU for "
          f"{len(rows)} clips "
          f"({cpu.mean():.2f} s per clip, per seed)")
    if args.pool:
        n = sum(r["picked_geometric"] for r in rows)
        print(f"the shipped ranking picks a geometric candidate on {n}/{len(rows)} clips")
    write_json(args.out, {"clips": rows, "summary": summary, "seeds": list(args.seeds)})


if __name__ == "__main__":
    main()
