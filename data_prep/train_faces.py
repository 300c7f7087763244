"""Learn the face model of ``KeypointDetector.detect_faces`` and write ``cvfs/models/faces.h5``.

Usage (the shipped file, see ``cvfs/models/README.md``)::

    python data_prep/train_faces.py --out cvfs/models/faces.h5

The model's keypoints are those of the detectors (``--detectors``, default the shipped ones), the
five MTFL keypoints first.

1. Shape model: generalised Procrustes mean and principal modes of the keypoints of every face
   that annotates all of them (:func:`cvfs.keypoints.faces.fit_shape_model`): the MTFL training
   faces outside the held-out range and the 300-W faces of ``faces68-train``, with the roll
   range seen there.
2. The detectors run (``threshold=-inf``, pyramid up to scale 2) on held-out images, none used
   to train or calibrate them: MTFL training images ``--start`` .. ``--start + 2 * --n-images``
   and ``faces68-train`` from image ``--faces68-start`` on. On the first MTFL half and the
   300-W images, per keypoint (on the images that annotate it), an isotonic regression maps the
   detector score to the probability that the detection lies within 10% IED of the nearest
   annotated face's keypoint, and the ``IED x pyramid scale`` range of each face's best-scoring
   such detection (the one the assembly uses; weaker ones on far levels would widen the range
   and with it the regions of the top-down scan) is recorded.
3. On the second MTFL half, faces are assembled with every threshold, and a logistic
   regression maps their consensus score to the probability that both eyes lie within 10% IED
   of the annotated face (strictly increasing, so faces keep the order of their scores).
4. On the images of step 2's keypoint calibration, the faces are assembled with the model,
   their keypoints refined (``cvfs.keypoints.refine``) and each face matched to the annotated
   face whose eye midpoint lies within half an IED of its own; per keypoint and its mirror
   image, the fusion gains (:func:`cvfs.keypoints.fusion.fit_fusion_gains`: how far toward the
   position the other keypoints predict, along and across the eye line) that put the most
   keypoints within 5% IED of their annotation (``--no-fusion``: none).
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

from cvfs.datasets.faces import keypoint_index, load_face_set, load_mtfl  # noqa: E402
from cvfs.io.images import read_image  # noqa: E402
from cvfs.keypoints import load_detector  # noqa: E402
from cvfs.keypoints.faces import (  # noqa: E402
    FACE_KEYPOINTS,
    FaceModel,
    assemble_faces,
    fit_shape_model,
)
from cvfs.keypoints.fusion import fit_fusion_gains  # noqa: E402
from cvfs.keypoints.refine import refine_face_keypoints  # noqa: E402

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


def _fusion_rows(det, model, images, runs, verbose):
    """Refined faces matched to annotated faces (eye midpoints within half an IED): the faces,
    the annotated faces' keypoints in model order and their IEDs."""
    names = model.shape.names
    cols = [keypoint_index(k) for k in names]
    le, re = keypoint_index("left_eye_center"), keypoint_index("right_eye_center")
    faces, targets, ieds = [], [], []
    for im, (found, scale) in tqdm(list(zip(images, runs, strict=True)), desc="fusion",
                                   disable=not verbose):
        found_faces = assemble_faces(found, model, scales=scale)
        if not found_faces:
            continue
        mid, ied = (im.points[:, le] + im.points[:, re]) / 2, im.ied()
        for f in refine_face_keypoints(det, read_image(im.path), found_faces,
                                       fill_missing=model.probability):
            pm = np.mean([f.predicted["left_eye_center"], f.predicted["right_eye_center"]], 0)
            with np.errstate(invalid="ignore"):
                d = np.hypot(*(mid - pm).T) / ied
            if not np.isfinite(d).any() or not np.nanmin(d) < 0.5:
                continue
            j = int(np.nanargmin(d))
            faces.append(f)
            targets.append(im.points[j, cols])
            ieds.append(float(ied[j]))
    return faces, np.array(targets).reshape(-1, len(names), 2), np.array(ieds)


def _calibration_rows(k, images, runs):
    """Scores, 0/1 labels (within 10% IED of the nearest annotated face's ``k``) and, per
    annotated face with a true detection, ``IED x scale`` of its best one."""
    kidx = keypoint_index(k)
    xs, ys, ratio = [], [], []
    for im, (found, scale) in zip(images, runs, strict=True):
        pts, ieds = im.points[:, kidx], im.ied()
        ok = np.isfinite(pts).all(axis=1) & np.isfinite(ieds)
        if not ok.any():
            continue
        pts, ieds = pts[ok], ieds[ok]
        d, s = found[k], scale[k]
        dist = np.hypot(d[:, None, 0] - pts[None, :, 0], d[:, None, 1] - pts[None, :, 1]) / ieds
        near = np.argmin(dist, axis=1) if len(pts) else np.zeros(len(d), int)
        pos = dist[np.arange(len(d)), near] < 0.10
        xs.append(d[:, 2])
        ys.append(pos.astype(float))
        for f in range(len(pts)):  # the face's best detection of k: the one the assembly uses
            mine = pos & (near == f)
            if mine.any():
                ratio.append(float(ieds[f]) * s[mine][np.argmax(d[mine, 2])])
    return np.concatenate(xs), np.concatenate(ys), np.array(ratio)


def main(argv=None):
    """Train and write the face model; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="cvfs/models/faces.h5")
    ap.add_argument("--data", default=None, help="MTFL folder (default: data home)")
    ap.add_argument("--start", type=int, default=2500,
                    help="first held-out MTFL training image")
    ap.add_argument("--n-images", type=int, default=200,
                    help="held-out images per half (keypoint / face calibration)")
    ap.add_argument("--faces68-start", type=int, default=640,
                    help="first faces68-train image held out from the detectors' training "
                    "(calibrates the keypoints MTFL lacks); -1: none")
    ap.add_argument("--detectors", nargs="+", default=None,
                    help="keypoint model files (default: the shipped ones)")
    ap.add_argument("--no-fusion", action="store_true",
                    help="no fusion gains (every keypoint keeps its refined detection)")
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
    det = load_detector(args.detectors)
    names = tuple(FACE_KEYPOINTS) + tuple(k for k in det.keypoints if k not in FACE_KEYPOINTS)
    missing = [k for k in FACE_KEYPOINTS if k not in det.keypoints]
    if missing:
        raise SystemExit(f"the detectors lack {missing}")
    cols = [keypoint_index(k) for k in names]
    faces68 = load_face_set("faces68-train") if args.faces68_start >= 0 else []
    shape_faces = np.concatenate([im.points[:, cols] for im in train[:lo] + train[hi:]]
                                 + [im.points[:, cols] for im in faces68])
    complete = int(np.isfinite(shape_faces).all(axis=(1, 2)).sum())
    shape = fit_shape_model(shape_faces, names, n_modes=args.n_modes)
    log.info("shape model of %d keypoints from %d faces; roll range %s deg; sigma %s",
             len(names), complete, np.round(shape.roll_range, 1), np.round(shape.sigma, 3))

    held = train[lo:hi]
    half = args.n_images
    extra = faces68[args.faces68_start:] if args.faces68_start >= 0 else []
    runs = _run_detector(det, held + extra, args.max_scale, not args.quiet)
    cal_images, cal_runs = held[:half] + extra, runs[:half] + runs[2 * half:]

    # keypoint calibration and scale range on the first half and the 300-W images
    cal, scale_range, kp_stats = {}, {}, {}
    for k in names:
        x, y, r = _calibration_rows(k, cal_images, cal_runs)
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
    for im, (found, scale) in zip(held[half:], runs[half:2 * half], strict=True):
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
    model = FaceModel(shape, cal, face_cal, scale_range, threshold=args.threshold)
    fusion = {}
    if not args.no_fusion:  # fusion gains on the keypoint calibration images
        faces, targets, ieds = _fusion_rows(det, model, cal_images, cal_runs, not args.quiet)
        gain, counts = fit_fusion_gains(faces, targets, ieds, model)
        model.fusion_gain = gain
        fusion = {"faces": len(faces), "gain": gain.tolist(),
                  "within_5pct_ied": {k: [int(a), int(b)] for k, (a, b) in zip(names, counts)}}
        for k, g, (a, b) in zip(names, gain, counts):
            log.info("fusion %s: gains %.2f / %.2f; %d -> %d of the keypoints within 5%% IED",
                     k, g[0], g[1], a, b)
    model = FaceModel(shape, cal, face_cal, scale_range, threshold=args.threshold,
                      fusion_gain=model.fusion_gain, info={
        "params": {"n_modes": args.n_modes, "max_scale": args.max_scale,
                   "threshold": args.threshold, "start": args.start, "n_images": args.n_images},
        "training": {
            "command": command,
            "data": "MTFL training.txt (LFW part); 300-W faces68-train (AFW, HELEN)",
            "shape_faces": complete,
            "keypoint_calibration_images": [lo, lo + half],
            "faces68_calibration_images": ([args.faces68_start, len(faces68)]
                                           if args.faces68_start >= 0 else []),
            "face_calibration_images": [lo + half, hi],
            "keypoints": kp_stats, "n_faces": int(len(ev)), "n_right_faces": int(lab.sum()),
            "face_calibration": "logistic regression (scikit-learn, C=1e4)",
            "fusion": fusion,
            "seconds": time.perf_counter() - t0}})
    path = model.save(args.out)
    print(f"written {path} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
