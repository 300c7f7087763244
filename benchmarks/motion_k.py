"""Choosing the number of motions K: Hopkins155 by cross-validation, and synthetic scenes.

Usage::

    python benchmarks/motion_k.py [--data DIR] [--skip-pool] [--seeds 3]

1. Hopkins155 (155 sequences, K = 2 or 3): ``r_K`` and the planar ``q_K``
   (:func:`cvfs.motion.kselect.k_residuals`, best of 20 seeded K-subspaces restarts and, for
   K = 2, 3, the spectral candidates; K = 1..5) of every sequence; 10-fold cross-validation by
   video (the folds of Table VII, fold seed 0): ``lam`` and ``mu`` of
   :func:`~cvfs.motion.kselect.choose_k_penalised` (:func:`~cvfs.motion.kselect.fit_penalty`)
   and, for comparison, ``lam`` alone (no planar term) and the threshold ``tau`` of the ratio
   rule :func:`~cvfs.motion.kselect.choose_k` (:func:`~cvfs.motion.kselect.fit_threshold`) are
   fitted on the nine training folds and K chosen on the test fold.
   The residuals are cached in ``out/motion_k_residuals_planar.json``.
2. Synthetic rigid motions (:func:`cvfs.motion.synthetic.make_rigid_motions`, 40 points per
   motion, 20 frames, noise 0.002), K = 2..6, ``--seeds`` problems each: error with K given
   (:func:`cvfs.motion.segment_tracks`), the oracle (best candidate) of the spectral pool alone
   and with the seeded K-subspaces candidates, the error of the lowest-residual K-subspaces
   candidate, and the rate at which K is chosen correctly.
3. Hopkins155 three-motion sequences (unless ``--skip-pool``): the same oracle / lowest-residual
   errors for K = 3 (the ranked pool there has no K-subspaces candidates).

K chosen on the five shared videos: ``benchmarks/motion_videos.py``.

Writes ``benchmarks/results/motion_k.json``.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, write_json  # noqa: E402
from cvfs.datasets.hopkins155 import load_hopkins155  # noqa: E402
from cvfs.motion import normalise_points, segment_tracks  # noqa: E402
from cvfs.motion.candidates import (  # noqa: E402
    generate_candidates,
    ksubspace_candidates,
    velocity_matrix,
)
from cvfs.motion.evaluate import misclassification, video_folds  # noqa: E402
from cvfs.motion.kselect import (  # noqa: E402
    DEFAULT_LAMBDA,
    DEFAULT_MU,
    choose_k,
    choose_k_penalised,
    fit_penalty,
    fit_threshold,
    k_residuals,
    subspace_residual,
)
from cvfs.motion.synthetic import make_rigid_motions  # noqa: E402

K_RANGE = range(2, 6)


def _fmt(rows):
    return [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]


def hopkins_residuals(seqs, cache):
    """``(r_K, q_K)`` of every sequence, cached by sequence name."""
    done = {}
    if cache.is_file():
        stored = json.loads(cache.read_text())
        done = {n: tuple({int(k): v for k, v in d.items()} for d in (r["r"], r["q"]))
                for n, r in stored.items()}
    for s in tqdm([s for s in seqs if s.name not in done], desc="Hopkins155 r_K"):
        done[s.name] = k_residuals(normalise_points(s.points), K_RANGE, return_planar=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({n: {"r": r, "q": q} for n, (r, q) in done.items()}))
    return [done[s.name][0] for s in seqs], [done[s.name][1] for s in seqs]


def hopkins_cv(seqs, residuals, planar):
    """K chosen on each test fold by the three rules, fitted on the nine training folds."""
    folds = video_folds([s.video for s in seqs], [s.raw_footage for s in seqs], 10, 0)
    true_k = np.array([s.n_motions for s in seqs])
    n_pts = np.array([len(s.points) for s in seqs])
    chosen = {"penalised": np.empty_like(true_k), "penalised, no q_K": np.empty_like(true_k),
              "ratio": np.empty_like(true_k)}
    lams, mus, lams_plain, taus = [], [], [], []
    for f in range(10):
        train = np.flatnonzero(folds != f)
        lam, _, mu = fit_penalty([residuals[i] for i in train], n_pts[train], true_k[train],
                                 planar_list=[planar[i] for i in train])
        lam_plain, _ = fit_penalty([residuals[i] for i in train], n_pts[train], true_k[train])
        tau, _ = fit_threshold([residuals[i] for i in train], true_k[train])
        lams.append(lam)
        mus.append(mu)
        lams_plain.append(lam_plain)
        taus.append(tau)
        for i in np.flatnonzero(folds == f):
            chosen["penalised"][i] = choose_k_penalised(residuals[i], n_pts[i], lam,
                                                        planar=planar[i], mu=mu)
            chosen["penalised, no q_K"][i] = choose_k_penalised(residuals[i], n_pts[i],
                                                                lam_plain)
            chosen["ratio"][i] = choose_k(residuals[i], tau)
    rows = []
    for name, mask in (("2 motions", true_k == 2), ("3 motions", true_k == 3),
                       ("all", np.ones_like(true_k, bool))):
        rows.append([name, int(mask.sum())] + [100 * float(np.mean(c[mask] == true_k[mask]))
                                                for c in chosen.values()])
    lam_all, acc_all, mu_all = fit_penalty(residuals, n_pts, true_k, planar_list=planar)
    names = [s.name for s in seqs]
    return rows, {"lams": lams, "mus": mus, "lams_no_q": lams_plain, "taus": taus,
                  "chosen": dict(zip(names, chosen["penalised"].tolist(), strict=True)),
                  "lam_all": lam_all, "mu_all": mu_all, "train_accuracy_all": acc_all}


def pool_errors(points, truth, k):
    """Oracle of the spectral pool, of the pool with K-subspaces, and the lowest-residual error."""
    pts = normalise_points(points)
    spectral = generate_candidates(pts, k, ksubspaces=0).labels
    Y = velocity_matrix(pts).T
    ksub = ksubspace_candidates(Y, k)
    both = np.vstack([spectral, ksub]) if len(ksub) else spectral
    res = [subspace_residual(Y, lab) for lab in both]
    return (misclassification(spectral, truth).min(), misclassification(both, truth).min(),
            misclassification(both[int(np.argmin(res))], truth))


def synthetic_rows(seeds, lam, mu):
    rows = []
    for k in tqdm(range(2, 7), desc="synthetic"):
        errs, hits, pools = [], [], []
        for seed in range(seeds):
            pts, truth = make_rigid_motions(k, 40 * k, 20, noise=0.002, random_state=seed)
            labels, _ = segment_tracks(pts, k)
            errs.append(misclassification(labels, truth))
            pools.append(pool_errors(pts, truth, k))
            res, planar = k_residuals(normalise_points(pts), range(2, k + 2),
                                      return_planar=True)
            hits.append(choose_k_penalised(res, len(pts), lam, planar=planar, mu=mu) == k)
        pools = 100 * np.mean(pools, axis=0)
        rows.append([k, seeds, 100 * float(np.mean(errs)), 100 * float(np.max(errs)),
                     float(pools[0]), float(pools[1]), float(pools[2]),
                     100 * float(np.mean(hits))])
    return rows


def hopkins_pool_rows(seqs):
    three = [s for s in seqs if s.n_motions == 3]
    errs = np.array([pool_errors(s.points, s.labels, 3)
                     for s in tqdm(three, desc="Hopkins155 K=3 pools")])
    return [["3 motions", len(three)] + [float(v) for v in 100 * errs.mean(axis=0)]
            + [float(v) for v in 100 * np.median(errs, axis=0)]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--cache", default=str(REPO / "out" / "motion_k_residuals_planar.json"))
    ap.add_argument("--skip-pool", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    limit_threads()
    from cvfs.datasets._home import data_home

    data = Path(args.data) if args.data else Path(data_home())
    seqs = load_hopkins155(data / "hopkins155")
    residuals, planar = hopkins_residuals(seqs, Path(args.cache))
    cv_rows, cv_info = hopkins_cv(seqs, residuals, planar)
    print("Hopkins155: K chosen correctly, 10-fold CV by video (lam, mu / tau fitted on training "
          "folds)")
    print(format_table(["sequences", "n", "K correct % (penalised)",
                        "K correct % (penalised, no q_K)", "K correct % (ratio)"],
                       _fmt(cv_rows)))
    print(f"lam per fold {np.round(cv_info['lams'], 2).tolist()}, mu per fold "
          f"{np.round(cv_info['mus'], 3).tolist()}; all 155: lam {cv_info['lam_all']:.2f}, "
          f"mu {cv_info['mu_all']:.3f} (DEFAULT_LAMBDA {DEFAULT_LAMBDA}, DEFAULT_MU "
          f"{DEFAULT_MU}); tau per fold {np.round(cv_info['taus'], 3).tolist()}")
    lam, mu = cv_info["lam_all"], cv_info["mu_all"]
    syn = synthetic_rows(args.seeds, lam, mu)
    print("Synthetic rigid motions (40 points per motion, 20 frames, noise 0.002)")
    print(format_table(["K", "problems", "mean error % (K given)", "max error %",
                        "oracle spectral %", "oracle + K-subspaces %",
                        "lowest residual %", "K correct %"], _fmt(syn)))
    pool = [] if args.skip_pool else hopkins_pool_rows(seqs)
    if pool:
        print("Hopkins155 three motions, K = 3: mean (median) error %")
        print(format_table(["sequences", "n", "oracle spectral", "oracle + K-subspaces",
                            "lowest residual", "median oracle spectral",
                            "median oracle + K-subspaces", "median lowest residual"],
                           _fmt(pool)))
    write_json(REPO / "benchmarks" / "results" / "motion_k.json",
               {"hopkins_cv": cv_rows, "hopkins_info": cv_info, "synthetic": syn,
                "hopkins_pool_k3": pool})


if __name__ == "__main__":
    main()
