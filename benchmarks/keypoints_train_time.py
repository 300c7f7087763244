"""Training time of FSA (Lorenz/logistic/SVM, piecewise-linear) vs LogitBoost on the same examples.

Takes the final example set of a mining run (a checkpoint of ``cvfs keypoints train
--checkpoint-dir``), recomputes the feature matrix once, splits the training images in two
halves (fit on one, AUC on the other), and fits each method on exactly the same matrix, timing
CPU seconds of the fitting process (``time.process_time``, one numba thread) and wall seconds.
The paper reports FSA ~8x faster than LogitBoost with 10% of the learners per round.

Example::

    python benchmarks/keypoints_train_time.py --checkpoint /tmp/ck/left_eye_center.h5 \\
        --n-images 300 --k 200
"""

import argparse
import json
import os
import time

import numpy as np
from sklearn.metrics import roc_auc_score

from cvfs.datasets.faces import load_mtfl
from cvfs.io import atomic_write_text
from cvfs.keypoints.mining import load_checkpoint
from cvfs.keypoints.train import ExampleFeatures, fit_classifier
from cvfs.vision import FeaturePool


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--n-images", type=int, required=True,
                    help="the --n-images of the training run (MTFL train order)")
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--n-iter", type=int, default=500)
    ap.add_argument("--methods", nargs="+",
                    default=["fsa-lorenz", "fsa-logistic", "fsa-svm", "logitboost"])
    ap.add_argument("--haar-per-channel", type=int, default=None,
                    help="recompute the examples on a larger/smaller pool (default: the run's)")
    ap.add_argument("--out", default="benchmarks/results/keypoints_train_time.json")
    args = ap.parse_args(argv)

    st = load_checkpoint(args.checkpoint)
    params = dict(st.config["pool"])
    if args.haar_per_channel is not None:
        params["haar_per_channel"] = args.haar_per_channel
    pool = FeaturePool(**params)
    images = load_mtfl("train")[: args.n_images]
    feats = ExampleFeatures([im.path for im in images], pool)
    ex = np.concatenate([st.positives, st.negatives])
    y = np.r_[np.ones(st.positives.size, int), np.zeros(st.negatives.size, int)]
    t0 = time.perf_counter()
    X = feats(ex)
    t_feat = time.perf_counter() - t0
    train = ex["image"] % 2 == 0
    print(f"{st.config['keypoint']}: {int(train.sum())} training / {int((~train).sum())} "
          f"held-out examples x {X.shape[1]} features ({t_feat:.0f} s to compute); "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'method':14s} {'cpu s':>8s} {'wall s':>8s} {'AUC':>7s}")
    rows = []
    for method in args.methods:
        c0, w0 = time.process_time(), time.perf_counter()
        m = fit_classifier(X[train], y[train], method, k=args.k,
                           bins=16 if method == "logitboost" else 8, n_iter=args.n_iter,
                           random_state=0)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        auc = roc_auc_score(y[~train], m.decision_function(X[~train][:, m.features]))
        rows.append({"method": method, "cpu_seconds": cpu, "wall_seconds": wall, "auc": auc,
                     "k": args.k, "n_train": int(train.sum()), "n_features": int(X.shape[1]),
                     "load": os.getloadavg()[0]})
        print(f"{method:14s} {cpu:8.1f} {wall:8.1f} {auc:7.4f}")
    atomic_write_text(args.out, json.dumps({"keypoint": st.config["keypoint"], "rows": rows},
                                           indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
