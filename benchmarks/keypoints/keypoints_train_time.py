"""Training time of FSA (Lorenz/logistic/SVM, piecewise-linear) vs LogitBoost on the same examples.

Takes the final example set of a mining run (a checkpoint of ``cvfs keypoints train
--checkpoint-dir``), recomputes the feature matrix once (optionally on a larger pool), splits the
training faces in two halves (fit on one, AUC on the other; a face and its mirrored copy stay on
the same side), and fits each method on exactly the same matrix, timing CPU seconds of the
fitting process (``time.process_time``; run with ``NUMBA_NUM_THREADS=1``) and wall seconds. The
methods are fitted in turn ``--repeats`` times (interleaved, so a change of machine load hits
all of them); the median CPU time per method and the speed ratio LogitBoost / FSA-Lorenz of
those medians are printed and written.

Paper settings (section 3.3.1): FSA with piecewise-linear learners, k = 1500, mu = 300,
N_iter = 500; LogitBoost with 1500 univariate piecewise-constant learners, 10% of the learners
trained per round. The paper reports FSA ~8x faster than that LogitBoost.

Example::

    NUMBA_NUM_THREADS=1 python benchmarks/keypoints/keypoints_train_time.py \\
        --checkpoint eyes_ck/left_eye_center.h5 --n-images 1000 --haar-per-channel 20000 \\
        --k 1500 --methods fsa-lorenz logitboost
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets.faces import load_mtfl
from cvfs.keypoints.mining import load_checkpoint
from cvfs.keypoints.train import ExampleFeatures, fit_classifier, with_mirrored
from cvfs.vision import FeaturePool


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--n-images", type=int, required=True,
                    help="the --n-images of the training run (MTFL train order)")
    ap.add_argument("--k", type=int, default=1500, help="FSA features = LogitBoost rounds")
    ap.add_argument("--n-iter", type=int, default=1000)
    ap.add_argument("--lb-bins", type=int, default=16, help="LogitBoost bins (FSA: 8)")
    ap.add_argument("--annealing-boost", type=float, default=None,
                    help="FSA step factor while features are removed (default: the loss's, "
                    "as the shipped models; 1: the plain 1/L step)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--methods", nargs="+",
                    default=["fsa-lorenz", "fsa-logistic", "fsa-svm", "logitboost"])
    ap.add_argument("--haar-per-channel", type=int, default=None,
                    help="recompute the examples on a larger/smaller pool (default: the run's)")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)

    st = load_checkpoint(args.checkpoint)
    params = dict(st.config["pool"])
    if args.haar_per_channel is not None:
        params["haar_per_channel"] = args.haar_per_channel
    pool = FeaturePool(**params)
    images = load_mtfl("train")[: args.n_images]
    if st.config.get("mirror"):
        images = with_mirrored(images)
    feats = ExampleFeatures.from_images(images, pool)
    ex = np.concatenate([st.positives, st.negatives])
    y = np.r_[np.ones(st.positives.size, int), np.zeros(st.negatives.size, int)]
    train = (ex["image"] % args.n_images) % 2 == 0  # a face and its mirror on the same side
    t0 = time.perf_counter()
    Xtr, ytr = feats(ex[train]), y[train]
    Xte, yte = feats(ex[~train]), y[~train]
    t_feat = time.perf_counter() - t0
    print(f"{st.config['keypoint']}: {int(train.sum())} training / {int((~train).sum())} "
          f"held-out examples x {Xtr.shape[1]} features ({t_feat:.0f} s to compute); "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'method':14s} {'cpu s':>8s} {'wall s':>8s} {'AUC':>7s} {'load':>5s}")
    rows = []
    for rep in range(args.repeats):
        for method in args.methods:
            c0, w0 = time.process_time(), time.perf_counter()
            m = fit_classifier(Xtr, ytr, method, k=args.k,
                               bins=args.lb_bins if method == "logitboost" else 8,
                               n_iter=args.n_iter, random_state=rep,
                               annealing_boost=None if method == "logitboost"
                               else args.annealing_boost)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            auc = roc_auc_score(yte, m.decision_function(Xte[:, m.features]))
            load = os.getloadavg()[0]
            rows.append({"method": method, "repeat": rep, "cpu_seconds": cpu,
                         "wall_seconds": wall, "auc": auc, "k": args.k,
                         "annealing_boost": args.annealing_boost,
                         "n_train": int(train.sum()), "n_features": int(Xtr.shape[1]),
                         "load": load})
            print(f"{method:14s} {cpu:8.1f} {wall:8.1f} {auc:7.4f} {load:5.1f}", flush=True)
    med = {m: float(np.median([r["cpu_seconds"] for r in rows if r["method"] == m]))
           for m in args.methods}
    ratio = (med["logitboost"] / med["fsa-lorenz"]
             if {"logitboost", "fsa-lorenz"} <= set(med) else None)
    if ratio is not None:
        print(f"median CPU s: FSA-Lorenz {med['fsa-lorenz']:.1f}, LogitBoost "
              f"{med['logitboost']:.1f}: FSA-Lorenz {ratio:.1f}x faster")
    write_json(args.out, {"keypoint": st.config["keypoint"], "rows": rows,
                          "median_cpu_seconds": med,
                          "speed_ratio_logitboost_over_fsa": ratio,
                          "checkpoint_config": st.config})
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
