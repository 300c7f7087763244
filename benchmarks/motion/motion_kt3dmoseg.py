"""KT3DMoSeg (22 KITTI clips, missing entries as given): misclassification of cvfs and of SSC.

Usage::

    python benchmarks/motion/motion_kt3dmoseg.py [--data DIR] [--clips N] [--choose-k] [--no-ssc]

Every clip's labelled trajectories (``cvfs.datasets.kt3dmoseg``) with their visibility mask:

* **cvfs**: :func:`cvfs.motion.segment` with the true K and ``visible`` (KITTI's tracks start and
  stop: overlapping time windows, :mod:`cvfs.motion.windows`, each ranked by the shipped ranker;
  K >= 4 by the subspace residual).
* **cvfs, K chosen** (``--choose-k``): :func:`cvfs.motion.segment` with ``n_motions=None``.
* **SSC**: sparse subspace clustering (Elhamifar & Vidal, TPAMI 2013) on the rank-4K ALS completed
  trajectories (2F x P matrix): each trajectory is a Lasso combination of the others
  (scikit-learn ``lars_path_gram``, the exact Lasso path, coordinates scaled into [-1, 1] as the
  paper's normalised Hopkins155 coordinates, affine constraint by an appended constant row of
  weight 10,
  lambda = alpha / mu with alpha = 800 and mu = min_i max_(j != i) |y_i^T y_j| as the paper's
  motion experiments), coefficients thresholded to 70 % of each column's l1 mass (rho = 0.7),
  affinity |C| + |C|^T, spectral clustering (scikit-learn, precomputed affinity).

Tracks observed in fewer than 2 frames cannot be segmented (one in Seq059_Clip01); they are given
no label and counted as misclassified for every method.

The numbers published for KT3DMoSeg (Xu, Cheong, Li, CVPR 2018) are not reproduced here: the
paper is not in this repository; compare the printed table with its KT3DMoSeg table.

Writes ``benchmarks/results/motion/motion_kt3dmoseg.json``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
from cvfs.motion import normalise_points, rank_candidates, segment
from cvfs.motion.evaluate import misclassification
from cvfs.motion.missing import (
    MIN_OBSERVED,
    check_visible,
    complete_trajectories,
    trajectory_matrix,
)


def ssc_labels(W, n_motions, *, alpha=800.0, rho=0.7, affine_weight=10.0, random_state=0):
    """Sparse subspace clustering of the columns of ``W`` (D x P, coordinates in about [-1, 1])."""
    return ssc_cluster(ssc_affinity(W, alpha=alpha, rho=rho, affine_weight=affine_weight),
                       n_motions, random_state=random_state)


def ssc_cluster(aff, n_motions, *, random_state=0):
    """Spectral clustering of SSC's affinity (:func:`ssc_affinity`); ``random_state`` seeds its
    k-means."""
    from sklearn.cluster import SpectralClustering

    sc = SpectralClustering(n_clusters=n_motions, affinity="precomputed",
                            random_state=random_state, assign_labels="kmeans", n_init=10)
    return sc.fit_predict(aff + 1e-12)


def ssc_affinity(W, *, alpha=800.0, rho=0.7, affine_weight=10.0):
    """SSC's affinity ``|C| + |C|^T`` of the columns of ``W`` (the Lasso step, deterministic)."""
    from sklearn.linear_model import lars_path_gram

    D, P = W.shape
    Y = np.vstack([W, np.full((1, P), affine_weight)]) if affine_weight else W
    gram = np.abs(W.T @ W)
    np.fill_diagonal(gram, -np.inf)
    mu = float(gram.max(axis=1).min())
    lam = alpha / mu
    # sklearn minimises 1/(2 n) |y - X c|^2 + a |c|_1; the paper |c|_1 + lam/2 |y - X c|^2
    a = 1.0 / (lam * Y.shape[0])
    G = Y.T @ Y
    C = np.zeros((P, P))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(P):
            others = np.r_[0:i, i + 1:P]
            _, _, coefs = lars_path_gram(G[others, i], G[np.ix_(others, others)],
                                         n_samples=Y.shape[0], alpha_min=a, method="lasso",
                                         max_iter=500)
            C[others, i] = coefs[:, -1]
    # keep the largest coefficients making up rho of each column's l1 mass
    A = np.abs(C)
    order = np.argsort(-A, axis=0)
    sorted_a = np.take_along_axis(A, order, axis=0)
    cum = np.cumsum(sorted_a, axis=0)
    total = cum[-1:]
    keep_sorted = (cum - sorted_a) < rho * np.maximum(total, 1e-300)
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=0)
    A = np.where(keep, A, 0.0)
    A = A / np.maximum(A.max(axis=0, keepdims=True), 1e-300)
    return A + A.T


def _error(pred, truth, ok):
    """Misclassification (%) over all tracks; tracks left out (``~ok``) count as errors."""
    n_bad = int((~ok).sum())
    err_ok = misclassification(pred, truth[ok]) if np.any(ok) else 0.0
    return 100.0 * (err_ok * ok.sum() + n_bad) / ok.size


def clip_row(clip, *, choose_k=False, ssc_seeds=(0,), oracle=False):
    """One clip's errors (%): ``cvfs`` (:func:`cvfs.motion.segment` with the true K and the
    mask), ``cvfs_auto`` and ``K_chosen`` (K chosen, with ``choose_k``), ``ssc`` (SSC on the
    rank-4K completion, the mean over ``ssc_seeds``, the spectral clustering's seeds; per seed in
    ``ssc_runs``), and with ``oracle``: ``oracle``, the best candidate of the rank-4K
    completion's pool, and ``completed``, the ranker's pick from it; wall seconds ``cvfs_s``,
    ``ssc_s``."""
    ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
    pts, vis, truth = clip.points[ok], clip.visible[ok], clip.labels
    k = clip.n_motions
    row = {"clip": clip.name, "K": k, "P": clip.n_points, "F": clip.n_frames,
           "missing_%": 100.0 * clip.missing_fraction, "dropped": int((~ok).sum())}
    if oracle:
        # the rank-4K completion's candidates, ranked as segment ranks complete tracks
        check_visible(pts, vis, k)
        labels, scores = rank_candidates(complete_trajectories(pts, vis, n_motions=k), k)
        row["completed"] = _error(labels[int(np.argmax(scores))], truth, ok)
        row["oracle"] = min(_error(lab, truth, ok) for lab in labels)
    t = time.perf_counter()
    row["cvfs"] = _error(segment(pts, k, visible=vis), truth, ok)
    row["cvfs_s"] = time.perf_counter() - t
    if choose_k:
        lab = segment(pts, None, visible=vis)
        row["cvfs_auto"] = _error(lab, truth, ok)
        row["K_chosen"] = int(lab.max()) + 1
    if ssc_seeds:
        t = time.perf_counter()
        W = trajectory_matrix(normalise_points(complete_trajectories(pts, vis, n_motions=k)))
        aff = ssc_affinity(W)
        row["ssc_runs"] = [_error(ssc_cluster(aff, k, random_state=s), truth, ok)
                           for s in ssc_seeds]
        row["ssc"] = float(np.mean(row["ssc_runs"]))
        row["ssc_s"] = (time.perf_counter() - t) / len(ssc_seeds)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="KT3DMoSeg folder")
    parser.add_argument("--clips", type=int, default=None, help="only the first N clips")
    parser.add_argument("--choose-k", action="store_true", help="also run with K chosen")
    parser.add_argument("--no-ssc", action="store_true", help="skip the SSC baseline")
    parser.add_argument("--out", default=str(result_path(__file__)))
    args = parser.parse_args(argv)
    limit_threads()
    clips = load_kt3dmoseg(args.data)
    if args.clips:
        clips = clips[: args.clips]
    rows = []
    for clip in tqdm(clips, desc="KT3DMoSeg"):
        row = clip_row(clip, choose_k=args.choose_k, ssc_seeds=() if args.no_ssc else (0,))
        rows.append(row)
        tqdm.write(f"{clip.name}: K={row['K']} cvfs {row['cvfs']:.2f}"
                   + (f" ssc {row['ssc']:.2f}" if "ssc" in row else "")
                   + (f" auto {row['cvfs_auto']:.2f} (K={row['K_chosen']})"
                      if "cvfs_auto" in row else ""))

    methods = [("cvfs (K given)", "cvfs")]
    if args.choose_k:
        methods.append(("cvfs (K chosen)", "cvfs_auto"))
    if not args.no_ssc:
        methods.append(("SSC (run here, same completion)", "ssc"))
    summary = []
    for label, key in methods:
        e = np.array([r[key] for r in rows])
        summary.append([label, f"{e.mean():.2f}", f"{np.median(e):.2f}", "here"])
    print(format_table(["clip", "K", "P", "F", "missing %"] + [m[1] for m in methods],
                       [[r["clip"], r["K"], r["P"], r["F"], f"{r['missing_%']:.1f}"]
                        + [f"{r[m[1]]:.2f}" for m in methods] for r in rows],
                       title="KT3DMoSeg per clip (misclassification %)"))
    print(format_table(["method", "mean %", "median %", "source"], summary,
                       title=f"KT3DMoSeg, {len(rows)} clips"))
    if args.choose_k:
        right = sum(r["K_chosen"] == r["K"] for r in rows)
        print(f"K chosen correctly on {right}/{len(rows)} clips")
    write_json(args.out, {"clips": rows, "summary": summary})


if __name__ == "__main__":
    main()
