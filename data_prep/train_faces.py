"""Learn the face model of ``KeypointDetector.detect_faces`` and write ``cvfs/models/faces.h5``.

Usage (the shipped file, see ``cvfs/models/README.md``)::

    python data_prep/train_faces.py --out cvfs/models/faces.h5

1. Shape model: generalised Procrustes mean and principal modes of the five MTFL keypoints of
   every MTFL training face outside the held-out range (:func:`cvfs.keypoints.faces.
   fit_shape_model`), with the roll range seen there.
2. The shipped keypoint detectors run (``threshold=-inf``, pyramid up to scale 2) on the
   held-out MTFL training images ``--start`` .. ``--start + 2 * --n-images`` (not used to
   train or calibrate the detectors). On the first half, per keypoint, an isotonic regression maps
   the detector score to the probability that the detection lies within 10% IED of the
   annotated keypoint, and the ``IED x pyramid scale`` range of each face's best-scoring such
   detection (the one the assembly uses; weaker ones on far levels would widen the range and
   with it the regions of the top-down scan) is recorded.
3. On the second half, faces are assembled with every threshold, and a logistic regression
   maps their consensus score to the probability that both eyes lie within 10% IED of the
   annotated face (strictly increasing, so faces keep the order of their scores).
"""

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from sklearn.isotonic import IsotonicRegression  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from cvfs.datasets.faces import keypoint_index, load_mtfl  # noqa: E402
from cvfs.io.images import read_image  # noqa: E402
from cvfs.keypoints import load_detector  # noqa: E402
from cvfs.keypoints.faces import (  # noqa: E402
    FACE_KEYPOINTS,
    FaceModel,
    assemble_faces,
    fit_shape_model,
)

__all__ = ["main"]

log = logging.getLogger("train_faces")


def _isotonic(x, y):
    """Knots (x, p) of the isotonic regression of labels y on scores x (increasing)."""
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    iso.fit(x, y)
    return np.asarray(iso.X_thresholds_, np.float64), np.asarray(iso.y_thresholds_, np.float64)


def _run_detector(det, images, max_scale, verbose):
    out = []
    for im in tqdm(images, desc="detect", disable=not verbose):
        found, scale = det._detect(read_image(im.path), threshold=-np.inf, max_scale=max_scale,
                                   min_scale=0.0, nms_radius=None, refine=True, cascade=True,
                                   n_jobs=1, merge_radius=None, pairs=None, max_memory=None)
        out.append((found, scale))
    return out


def main(argv=None):
    """Train and write the face model; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="cvfs/models/faces.h5")
    ap.add_argument("--data", default=None, help="MTFL folder (default: data home)")
    ap.add_argument("--start", type=int, default=2500,
                    help="first held-out MTFL training image")
    ap.add_argument("--n-images", type=int, default=200,
                    help="held-out images per half (keypoint / face calibration)")
    ap.add_argument("--max-scale", type=float, default=2.0)
    ap.add_argument("--n-modes", type=int, default=4)
    ap.add_argument("--threshold", type=float, default=0.5,
                    help="default face probability threshold stored in the file")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    command = "python data_prep/train_faces.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])

    train = load_mtfl("train", args.data)
    lo, hi = args.start, args.start + 2 * args.n_images
    if hi > len(train):
        raise SystemExit(f"--start + 2 * --n-images = {hi} exceeds the {len(train)} images")
    cols = [keypoint_index(k) for k in FACE_KEYPOINTS]
    shape_faces = np.concatenate([im.points[:, cols] for im in train[:lo] + train[hi:]])
    shape = fit_shape_model(shape_faces, FACE_KEYPOINTS, n_modes=args.n_modes)
    log.info("shape model from %d faces; roll range %s deg; sigma %s", len(shape_faces),
             np.round(shape.roll_range, 1), np.round(shape.sigma, 3))

    det = load_detector()
    held = train[lo:hi]
    runs = _run_detector(det, held, args.max_scale, not args.quiet)
    half = args.n_images

    # keypoint calibration and scale range on the first half
    cal, scale_range, kp_stats = {}, {}, {}
    for k in FACE_KEYPOINTS:
        kidx = keypoint_index(k)
        xs, ys, ratio = [], [], []
        for im, (found, scale) in zip(held[:half], runs[:half], strict=True):
            d, s = found[k], scale[k]
            pt, ied = im.points[0, kidx], float(im.ied()[0])
            dist = np.hypot(d[:, 0] - pt[0], d[:, 1] - pt[1]) / ied
            pos = dist < 0.10
            xs.append(d[:, 2])
            ys.append(pos.astype(float))
            if pos.any():  # the face's best detection of k: the one the assembly would use
                ratio.append(ied * s[pos][np.argmax(d[pos, 2])])
        x, y, r = np.concatenate(xs), np.concatenate(ys), np.array(ratio)
        cal[k] = _isotonic(x, y)
        q = np.quantile(r, [0.005, 0.995])
        scale_range[k] = (float(q[0] / 1.15), float(q[1] * 1.15))
        kp_stats[k] = {"n_detections": int(len(x)), "n_true": int(y.sum()),
                       "ied_x_scale_range": list(scale_range[k])}
        log.info("%s: %d detections, %d true; IED x scale in [%.1f, %.1f]", k, len(x),
                 int(y.sum()), *scale_range[k])

    # face calibration on the second half
    model = FaceModel(shape, cal, (1.0, 0.0), scale_range, threshold=0.0)
    ev, lab = [], []
    le, re = keypoint_index("left_eye_center"), keypoint_index("right_eye_center")
    for im, (found, scale) in zip(held[half:], runs[half:], strict=True):
        ied = float(im.ied()[0])
        for f in assemble_faces(found, model, scales=scale, threshold=0.0):
            ok = all(np.hypot(f.keypoints[n][0] - im.points[0, i, 0],
                              f.keypoints[n][1] - im.points[0, i, 1]) < 0.10 * ied
                     for n, i in (("left_eye_center", le), ("right_eye_center", re)))
            ev.append(f.evidence)
            lab.append(float(ok))
    ev, lab = np.array(ev), np.array(lab)
    lr = LogisticRegression(C=1e4).fit(ev[:, None], lab)  # C: practically unpenalised
    face_cal = (float(lr.coef_[0, 0]), float(lr.intercept_[0]))
    log.info("face calibration: %d faces, %d right; %d of %d images found; p = 1 / (1 + "
             "exp(-(%.4f x score %+.4f)))", len(ev), int(lab.sum()), int(lab.sum()), half,
             *face_cal)
    model = FaceModel(shape, cal, face_cal, scale_range, threshold=args.threshold, info={
        "params": {"n_modes": args.n_modes, "max_scale": args.max_scale,
                   "threshold": args.threshold, "start": args.start, "n_images": args.n_images},
        "training": {
            "command": command, "data": "MTFL training.txt (LFW part)",
            "shape_faces": int(len(shape_faces)),
            "keypoint_calibration_images": [lo, lo + half],
            "face_calibration_images": [lo + half, hi],
            "keypoints": kp_stats, "n_faces": int(len(ev)), "n_right_faces": int(lab.sum()),
            "face_calibration": "logistic regression (scikit-learn, C=1e4)",
            "seconds": time.perf_counter() - t0}})
    path = model.save(args.out)
    print(f"written {path} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
