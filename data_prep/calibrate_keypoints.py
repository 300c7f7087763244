"""Recalibrate the soft cascades of trained keypoint models (no retraining).

Usage (the shipped models, see ``cvfs/models/README.md``)::

    python data_prep/calibrate_keypoints.py cvfs/models/keypoints_fsa_lorenz_eyes.h5 \\
        cvfs/models/keypoints_fsa_lorenz_nose_mouth.h5 --n-images 1500 --miss-rate 0.005

Each model file is read, its classifiers get a rejection threshold after every feature with the
features in a rejection-first order (:func:`cvfs.keypoints.calibrate.calibrate_detector`: positives
and faces of the first ``--n-images`` images of ``--dataset``, MTFL's training images by default,
negatives drawn from their detection pyramids), and the file is rewritten (atomically) with the
calibration recorded in its training
description. Scores of windows that pass every threshold do not change.
"""

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.datasets.faces import FACE_SETS, load_face_set  # noqa: E402
from cvfs.io.images import read_image  # noqa: E402
from cvfs.keypoints import load_detector  # noqa: E402
from cvfs.keypoints.calibrate import calibrate_detector  # noqa: E402
from cvfs.keypoints.degrade import with_degraded  # noqa: E402

__all__ = ["main"]


def main(argv=None):
    """Recalibrate and rewrite the given model files; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="keypoint model files (rewritten in place)")
    parser.add_argument("--dataset", choices=FACE_SETS, default="mtfl-train",
                        help="annotated face images (those the detectors were trained on)")
    parser.add_argument("--data", default=None, help="dataset folder (default: data home)")
    parser.add_argument("--n-images", type=int, default=1500,
                        help="first N images of --dataset")
    parser.add_argument("--miss-rate", type=float, default=0.005)
    parser.add_argument("--n-negatives", type=int, default=60_000)
    parser.add_argument("--hog-cost", type=float, default=8.0)
    parser.add_argument("--front-load", type=float, default=0.0,
                        help="exponent of the rejection distribution (0: uniform; > 0: the miss "
                        "budget spent at the first thresholds)")
    parser.add_argument("--degrade", type=float, default=0.0, metavar="SHARE",
                        help="share of the images degraded like small web faces "
                        "(cvfs.keypoints.degrade, drawn with --seed), for detectors trained "
                        "with --degrade")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    images = load_face_set(args.dataset, args.data)[:args.n_images]
    if args.degrade:
        shapes = [read_image(im.path).shape[:2] for im in images]
        images = with_degraded(images, shapes, args.degrade, random_state=args.seed)
    command = "python data_prep/calibrate_keypoints.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    for path in args.models:
        t0 = time.perf_counter()
        det = calibrate_detector(load_detector(path), images, miss_rate=args.miss_rate,
                                 n_negatives=args.n_negatives, hog_cost=args.hog_cost,
                                 front_load=args.front_load, random_state=args.seed,
                                 verbose=not args.quiet)
        cal = det.info["training"]["calibration"]
        cal.update(data=f"{args.dataset}, first {len(images)} images", command=command,
                   seconds=time.perf_counter() - t0)
        det.save(path)
        for name, s in cal["keypoints"].items():
            print(f"{name:20s} faces lost {s['bags_rejected']:.4f}  negatives passing "
                  f"{s['negatives_passing']:.5f}  features per negative "
                  f"{s['features_per_negative']:.2f}")
        print(f"written {path} ({cal['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
