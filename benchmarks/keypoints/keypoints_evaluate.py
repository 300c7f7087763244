"""AP per keypoint and eye precision/recall of our detectors and the off-the-shelf baselines.

For every ``--models LABEL=PATH`` it runs the detector on the images of each dataset (MTFL's AFLW
test crops, Caltech WebFaces multi-face dev images; all of them, or an evenly spaced subset with
``--every``; pyramid up to the dataset's scale in ``DATASETS`` or ``--max-scale``), evaluates
with the paper's criteria (detected within 5% IED; false positive >= 10% IED from every face),
and prints

- AP per keypoint (the keypoints both the model and the dataset have), training and fit time;
- "eye" (both eye centres as one class, as the baselines report it): our recall at the
  precision of each baseline operating point measured by this script, and at the reference
  operating points in ``QUOTED`` (dlib 68-point 0.67/0.34 on the MTFL crops and
  0.51/0.18 on Caltech, OpenCV 4's eye cascade 0.57/0.04 on Caltech), and the baselines'
  precision/recall.

With ``--pairs`` every model with both eye detectors is also run with ``detect(pairs=True)``
(eye detections rescored by their partner, :mod:`cvfs.keypoints.context`), labelled
``LABEL+pairs``.

Baseline detections come from ``benchmarks/keypoints/keypoints_baselines.py`` (run in a dlib/OpenCV
4 environment) via ``--baselines``. Results go to
``benchmarks/results/keypoints/keypoints_evaluate.json`` and PR figures (like the paper's Fig. 7) to
``benchmarks/results/keypoints/keypoints_pr_<dataset>.png``.

With ``--faces`` it evaluates :meth:`KeypointDetector.detect_faces` (the shipped detectors and
face model) instead: on each dataset every keypoint's AP from the faces' keypoints against the
same detector's ``detect()`` (one scan gives both for the five MTFL keypoints; the others get a
full scan of their own for the ``detect()`` column), for the faces as assembled (a keypoint scored
by the face score, or by the face score times the keypoint's calibrated probability) and with
their keypoints refined by the local rescan (:mod:`cvfs.keypoints.refine`) and fused with the
face shape (:func:`cvfs.keypoints.fusion.fuse_keypoints`), as ``detect_faces`` does by default
(face score times keypoint probability), the face-level
AP (a face is right when both eyes lie within 10% IED of an annotated face) with a PR figure
``<json stem>_pr_<dataset>.png`` beside the JSON, and the number of faces at the default
threshold on scikit-image's pictures without a person (``NO_FACE``). The faces come both from
the scan of ``detect_faces()`` (the five MTFL keypoints everywhere, any others where eye
hypotheses place them; refined, this is ``detect_faces()``) and from the top-down scan of
``detect_faces(top_down=True)`` (the keypoints
other than the eyes only around eye pairs and unpaired probable eyes, or everywhere when no eye
candidate places a face; keys ``*_top_down``), with the CPU seconds per image of each. Results
go to ``benchmarks/results/keypoints/keypoints_faces.json``; ``--face-options KEY=VALUE`` sets
scan options of ``detect_faces`` (``upsampled_stride``, ``coarse_margin``, ``hog_blocks``) for
both scans::

    python benchmarks/keypoints/keypoints_evaluate.py --faces --every 10 1 \\
        --datasets mtfl-test caltech

Example::

    python benchmarks/keypoints/keypoints_evaluate.py \\
        --models FSA-Lorenz=cvfs/models/keypoints_fsa_lorenz_eyes.h5 LogitBoost=lb_eyes.h5 \\
        --every 1 --baselines benchmarks/results/keypoints/keypoints_baselines.json
"""

import argparse
import ast
import inspect
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets.faces import load_caltech_webfaces, load_mtfl
from cvfs.datasets.ibug68 import load_faces68, split_faces68
from cvfs.io.images import read_image
from cvfs.keypoints import load_detector
from cvfs.keypoints.detector import _face_scan_options
from cvfs.keypoints.evaluate import (
    evaluate_detections,
    evaluate_faces,
    evaluate_merged,
    recall_at_precision,
)
from cvfs.keypoints.faces import FACE_KEYPOINTS, assemble_faces, load_face_model
from cvfs.keypoints.fusion import fuse_keypoints
from cvfs.keypoints.refine import refine_face_keypoints
from cvfs.viz import save_figure
from cvfs.viz.keypoints import plot_pr_curves

EYES = ["left_eye_center", "right_eye_center"]
DATASETS = {
    "mtfl-test": (lambda: load_mtfl("test"), 1.0),
    "caltech": (load_caltech_webfaces, 2.0),  # median IED ~14 px: scan up to scale 2
    # the held-out pictures of the 300-W 68-point faces (cvfs.datasets.ibug68.split_faces68)
    "faces68-test": (lambda: split_faces68(load_faces68())[1], 1.0),
}
#: --faces: keypoints evaluated per dataset (default: the face model's). Caltech's nose point
#: follows another convention than MTFL's nose tip (AP 0 for every detector).
FACE_EVAL = {"caltech": EYES}
#: scikit-image pictures without a person: detect_faces should find (almost) nothing there.
NO_FACE = ("coffee", "chelsea", "rocket", "coins", "moon", "page", "text", "horse",
           "hubble_deep_field", "immunohistochemistry")
#: Reference eye precision/recall of the off-the-shelf detectors (5%-IED rule) measured earlier
#: with benchmarks/keypoints/keypoints_baselines.py, kept as operating points to compare against.
QUOTED = {
    "mtfl-test": {"dlib-68 (reference)": (0.67, 0.34)},
    "caltech": {"dlib-68 (reference)": (0.51, 0.18),
                "opencv4-eye-cascade (reference)": (0.57, 0.04)},
}


def _op(curve):
    """Operating point with every detection kept (lowest threshold)."""
    if curve.recall.size == 0:
        return 0.0, 0.0
    return float(curve.precision[-1]), float(curve.recall[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=None, help="LABEL=PATH ...")
    ap.add_argument("--faces", action="store_true",
                    help="evaluate detect_faces (shipped detectors and face model) instead")
    ap.add_argument("--no-face-max-scale", type=float, default=None,
                    help="--faces: largest pyramid scale on the pictures without a person "
                    "(default: the detector's)")
    ap.add_argument("--datasets", nargs="+", default=["mtfl-test", "caltech"],
                    choices=list(DATASETS))
    ap.add_argument("--max-scale", type=float, default=None,
                    help="largest pyramid scale on every dataset (default: the dataset's, "
                    "MTFL crops 1, Caltech 2)")
    ap.add_argument("--every", type=int, nargs="+", default=[1],
                    help="evaluate every k-th image (one k, or one per dataset in --datasets "
                         "order); 1 = the full set")
    ap.add_argument("--baselines", default=None, help="JSON of keypoints_baselines.py")
    ap.add_argument("--pairs", action="store_true",
                    help="also run each eye model with detect(pairs=True), as LABEL+pairs")
    ap.add_argument("--loose-radius", type=float, default=None, metavar="IED",
                    help="also report each keypoint's AP with a detection counted right within "
                    "this many IED (e.g. 0.1; the paper's rule is 0.05)")
    ap.add_argument("--face-options", nargs="*", default=[], metavar="KEY=VALUE",
                    help="--faces: scan options of detect_faces (upsampled_stride, "
                         "coarse_margin, hog_blocks) for every face scan")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    bad = [o for o in args.face_options if "=" not in o]
    if bad:
        ap.error(f"--face-options takes KEY=VALUE; got {bad}")
    if args.max_scale is not None and not args.max_scale > 0:
        ap.error(f"--max-scale must be > 0; got {args.max_scale}")
    if args.faces:
        return _faces_main(args)
    if not args.models:
        ap.error("--models is required (or --faces)")

    base = json.loads(Path(args.baselines).read_text()) if args.baselines else {}
    every = dict(zip(args.datasets, args.every * len(args.datasets) if len(args.every) == 1
                     else args.every, strict=True))
    results = {"every": every, "datasets": {}}
    for ds in args.datasets:
        loader, max_scale = DATASETS[ds]
        max_scale = args.max_scale or max_scale
        all_images = loader()
        images = all_images[::every[ds]]
        imgs = [read_image(im.path) for im in images]
        res = {"max_scale": max_scale, "n_images": len(images), "of": len(all_images),
               "every": every[ds], "n_faces": int(sum(im.n_faces for im in images)),
               "methods": {}, "baselines": {}}
        curves_fig, ops_fig = {}, {}
        runs = []
        for spec in args.models:
            label, path = spec.split("=", 1)
            det = load_detector(path)
            runs.append((label, path, det, None))
            if args.pairs and all(k in det.keypoints for k in EYES):
                runs.append((f"{label}+pairs", path, det, True))
        for label, path, det, pairs in runs:
            kps = [k for k in det.keypoints if not np.isnan(
                np.concatenate([im.points[:, _kidx(k)] for im in images])).all()]
            t0, load0 = time.perf_counter(), os.getloadavg()[0]
            dets = [det.detect(im, threshold=-np.inf, max_scale=max_scale, pairs=pairs)
                    for im in imgs]
            spi = (time.perf_counter() - t0) / len(imgs)
            load = (load0 + os.getloadavg()[0]) / 2
            curves = evaluate_detections(dets, images, kps)
            eye_kps = [k for k in EYES if k in det.keypoints]
            eye = evaluate_merged([np.concatenate([d[k] for k in eye_kps]) for d in dets],
                                  images, eye_kps) if eye_kps else None
            tr = det.info.get("training", {})
            res["methods"][label] = {
                "model": path, "seconds_per_image": spi, "load_average": load,
                "train_seconds": tr.get("seconds"),
                "fit_seconds": {k: v.get("fit_seconds") for k, v in
                                tr.get("keypoints", {}).items()},
                "keypoints": {k: c.as_dict() for k, c in curves.items()},
                "keypoints_loose": {k: c.as_dict() for k, c in evaluate_detections(
                    dets, images, kps, detect_radius=args.loose_radius,
                    fp_radius=max(0.10, args.loose_radius)).items()}
                if args.loose_radius else None,
                "loose_radius": args.loose_radius,
                "eye": eye.as_dict() if eye else None, "_eye_curve": eye,
                "eye_recall_at_quoted_precision": {
                    b: {"precision": p, "quoted_recall": r,
                        "our_recall": recall_at_precision(eye, p)}
                    for b, (p, r) in QUOTED.get(ds, {}).items()} if eye else {},
            }
            curves_fig[label] = curves
        # baselines (same images, same criteria)
        # baseline files name images as the baselines run saw them (relative or absolute)
        braw = {str(Path(k).resolve()): v for k, v in base.get(ds, {}).items()
                if not k.startswith("_")}
        if braw:
            paths = [str(Path(im.path).resolve()) for im in images]
            missing = [p for p in paths if p not in braw]
            if missing:
                print(f"{ds}: baselines lack {len(missing)} of the images; skipped")
            else:
                dl = [braw[p]["dlib"] for p in paths]
                kps = [k for k in dl[0] if k in {*EYES, "nose_center", "mouth_left_corner",
                                                 "mouth_right_corner", "mouth_center"}]
                kps = [k for k in kps if not np.isnan(
                    np.concatenate([im.points[:, _kidx(k)] for im in images])).all()]
                dd = [{k: np.asarray(d[k], float).reshape(-1, 3) for k in kps} for d in dl]
                dcurves = evaluate_detections(dd, images, kps)
                deye = evaluate_merged([np.concatenate([d[k] for k in EYES]) for d in dd],
                                       images, EYES)
                cv = [np.asarray(braw[p]["opencv_eye"]["eye"], float).reshape(-1, 3)
                      for p in paths]
                ceye = evaluate_merged(cv, images, EYES)
                res["baselines"]["dlib-68"] = {
                    "keypoints": {k: dict(c.as_dict(), operating_point=_op(c))
                                  for k, c in dcurves.items()},
                    "eye": dict(deye.as_dict(), operating_point=_op(deye))}
                res["baselines"]["opencv4-eye-cascade"] = {
                    "eye": dict(ceye.as_dict(), operating_point=_op(ceye))}
                ops_fig["dlib-68 (default)"] = {k: _op(c) for k, c in dcurves.items()}
                for m in res["methods"].values():
                    if m["_eye_curve"] is None:
                        continue
                    m["eye_recall_at_baseline_precision"] = {
                        b: {"precision": _op(c)[0], "baseline_recall": _op(c)[1],
                            "our_recall": recall_at_precision(m["_eye_curve"], _op(c)[0])}
                        for b, c in (("dlib-68", deye), ("opencv4-eye-cascade", ceye))}
        for m in res["methods"].values():
            m.pop("_eye_curve")
        results["datasets"][ds] = res
        _print(ds, len(images), res)
        out_fig = Path(args.out).with_name(f"keypoints_pr_{ds}.png")
        save_figure(plot_pr_curves(curves_fig, baselines=ops_fig), out_fig)
    write_json(args.out, results)
    print(f"\nwritten {args.out}")
    return 0


def _value(text):
    """A ``--face-options`` value: a Python literal, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _faces_main(args):
    """``--faces``: keypoint and face APs of detect_faces against detect(); no-face counts."""
    from tqdm.auto import tqdm

    det, fm = load_detector(), load_face_model()
    options = {k: _value(v) for k, v in (o.split("=", 1) for o in args.face_options)}
    defaults = inspect.signature(det.detect_faces).parameters
    scan = _face_scan_options(**{k: options.get(k, defaults[k].default)
                                 for k in ("upsampled_stride", "coarse_margin", "hog_blocks")})
    names = list(fm.shape.names)
    every = dict(zip(args.datasets, args.every * len(args.datasets) if len(args.every) == 1
                     else args.every, strict=True))
    out = Path(args.out)
    if out.name == "keypoints_evaluate.json":
        out = out.with_name("keypoints_faces.json")
    results = {"every": every, "threshold": fm.threshold, "face_options": options,
               "datasets": {}}
    for ds in args.datasets:
        loader, max_scale = DATASETS[ds]
        max_scale = args.max_scale or max_scale
        all_images = loader()
        images = all_images[::every[ds]]
        kps = [k for k in FACE_EVAL.get(ds, names) if not np.isnan(
            np.concatenate([im.points[:, _kidx(k)] for im in images])).all()]
        # detect() of the evaluated keypoints beyond the five: a full scan of their own
        others = [k for k in kps if k not in FACE_KEYPOINTS]
        dets, faces, faces_td, cpu = [], [], [], np.zeros(2)
        for im in tqdm(images, desc=ds):
            img = read_image(im.path)
            t0 = time.process_time()
            # the scans of detect_faces(): the five MTFL keypoints everywhere, the others
            # where eye hypotheses place them
            found, scale = det._face_detections(img, fm, max_scale=max_scale, n_jobs=1,
                                                max_memory=None, top_down=False, **scan)
            faces.append(assemble_faces(found, fm, scales=scale, threshold=0.0))
            t1 = time.process_time()
            faces_td.append(det.detect_faces(img, max_scale=max_scale, threshold=0.0,
                                             top_down=True, **options))
            cpu += (t1 - t0, time.process_time() - t1)
            if others:  # not timed
                found = {**found, **det._detect(
                    img, names=others, threshold=-np.inf, max_scale=max_scale, min_scale=0.0,
                    nms_radius=None, refine=True, cascade=True, n_jobs=1, merge_radius=None,
                    pairs=None, max_memory=None)[0]}
            dets.append(found)
        spi, spi_td = cpu / len(images)
        t0 = time.process_time()
        refined = [fuse_keypoints(refine_face_keypoints(det, read_image(im.path), fl,
                                                        fill_missing=fm.probability), fm)
                   for im, fl in zip(tqdm(images, desc=f"{ds} refine"), faces, strict=True)]
        spi_refine = (time.process_time() - t0) / len(images)
        base_curves = evaluate_detections(dets, images, kps)
        face_curves = evaluate_detections(_face_keypoints(faces, kps, False), images, kps)
        prod_curves = evaluate_detections(_face_keypoints(faces, kps), images, kps)
        scans = {"detect_faces()": _face_scores(refined, images, kps, fm),
                 "detect_faces(top_down=True)": _face_scores(faces_td, images, kps, fm)}
        res = {"max_scale": max_scale, "n_images": len(images), "of": len(all_images),
               "every": every[ds], "n_faces": int(sum(im.n_faces for im in images)),
               "cpu_seconds_per_image": {"full scan + faces": spi, "refine": spi_refine,
                                         "detect_faces(top_down=True)": spi_td},
               "load_average": os.getloadavg()[0],
               "detect": {k: c.as_dict() for k, c in base_curves.items()},
               "faces_face_score": {k: c.as_dict() for k, c in face_curves.items()},
               "faces_face_x_keypoint": {k: c.as_dict() for k, c in prod_curves.items()}}
        for scan, r in scans.items():
            key = "" if scan == "detect_faces()" else "_top_down"
            res["faces" + key] = {k: c.as_dict() for k, c in r["curves"].items() if k != "face"}
            res["eyes_from_faces_one_class" + key] = r["eyes"].as_dict()
            res["face" + key] = r["curves"]["face"].as_dict()
            res["at_default_threshold" + key] = r["at_default_threshold"]
        results["datasets"][ds] = res
        print(f"\n== {ds}: {len(images)} of {len(all_images)} images (every {every[ds]}), "
              f"{res['n_faces']} faces, pyramid up to scale {max_scale}; CPU s/image: full scan "
              f"and faces {spi:.2f} + refine {spi_refine:.2f} (= detect_faces()); "
              f"detect_faces(top_down=True) {spi_td:.2f} (load {res['load_average']:.1f}) ==")
        print("AP (highest recall at 5% IED): detect(); full-scan faces scored by the face score; "
              "by face score x keypoint probability; refined (= detect_faces()); "
              "detect_faces(top_down=True)")
        print(f"{'keypoint':20s} {'detect()':>13s} {'faces':>13s} {'face x kp':>13s} "
              f"{'detect_faces()':>14s} {'top_down=True':>13s}")
        for k in kps:
            print(f"{k:20s} " + " ".join(
                f"{c[k].average_precision:6.3f} ({_max_recall(c[k]):.3f})"
                for c in (base_curves, face_curves, prod_curves,
                          *(r["curves"] for r in scans.values()))))
        base_eye = evaluate_merged([np.concatenate([d[k] for k in EYES]) for d in dets],
                                   images, EYES)
        res["eyes_detect_one_class"] = base_eye.as_dict()
        eye_curves = {"detect()": base_eye, **{scan: r["eyes"] for scan, r in scans.items()}}
        res["eye_recall_at_quoted_precision"] = {
            b: {"precision": p, "quoted_recall": r,
                "our_recall": {m: recall_at_precision(c, p) for m, c in eye_curves.items()}}
            for b, (p, r) in QUOTED.get(ds, {}).items()}
        for b, v in res["eye_recall_at_quoted_precision"].items():
            print(f"eyes as one class at {b}'s precision {v['precision']:.2f}: its recall "
                  f"{v['quoted_recall']:.2f}; ours " + ", ".join(
                      f"{m} {r:.2f}" for m, r in v["our_recall"].items()))
        for scan, r in scans.items():
            a = r["at_default_threshold"]
            print(f"{scan:>27s}: eyes from faces as one class AP "
                  f"{r['eyes'].average_precision:.3f}; face AP (both eyes within 10% IED) "
                  f"{r['curves']['face'].average_precision:.3f}; at the default threshold "
                  f"{fm.threshold:g}: {a['faces']} faces, precision {a['precision'] or 0:.3f}, "
                  f"recall {a['recall'] or 0:.3f}")
        curves = {"detect()": dict(base_curves)}
        curves.update({scan: dict(r["curves"]) for scan, r in scans.items()})
        for m, c in eye_curves.items():
            curves[m]["eyes (one class)"] = c
        fig = plot_pr_curves(curves, baselines={
            b: {"eyes (one class)": (p, r)} for b, (p, r) in QUOTED.get(ds, {}).items()})[0].figure
        fig.suptitle(f"{ds}, pyramid up to scale {max_scale:g}: detect() and detect_faces "
                     "(face score x keypoint probability)")
        fig.tight_layout()
        save_figure(fig, out.with_name(f"{out.stem}_pr_{ds}.png"))
    from skimage import data
    from skimage.util import img_as_ubyte

    counts = {}
    t0 = time.perf_counter()
    for name in tqdm(NO_FACE, desc="no-face"):
        img = img_as_ubyte(getattr(data, name)())  # horse is bool
        if img.ndim == 2:  # grey pictures as RGB (the detectors refuse 2-D input)
            img = np.repeat(img[..., None], 3, axis=2)
        img = img[..., :3]
        fl = det.detect_faces(img, max_scale=args.no_face_max_scale)
        td = det.detect_faces(img, max_scale=args.no_face_max_scale, top_down=True)
        counts[name] = {"shape": list(img.shape), "faces": len(fl),
                        "scores": [round(f.score, 3) for f in fl], "faces_top_down": len(td)}
    results["no_face"] = {"max_scale": args.no_face_max_scale or det.max_scale,
                          "seconds": time.perf_counter() - t0, "images": counts,
                          "total": int(sum(c["faces"] for c in counts.values())),
                          "total_top_down": int(sum(c["faces_top_down"]
                                                    for c in counts.values()))}
    print(f"\nno-face pictures (scikit-image), default threshold {fm.threshold:g}, pyramid up "
          f"to scale {results['no_face']['max_scale']:g}: "
          + ", ".join(f"{k} {v['faces']}" for k, v in counts.items())
          + f"; total {results['no_face']['total']} (top_down=True: "
          f"{results['no_face']['total_top_down']})")
    write_json(out, results)
    print(f"\nwritten {out}")
    return 0


def _face_scores(faces, images, kps, fm):
    """Keypoint PR curves of the faces' keypoints (scored by the face score times the keypoint
    probability), the face curve, eyes as one class, and the faces at the default threshold."""
    face_kp = _face_keypoints(faces, kps)
    curves = evaluate_detections(face_kp, images, kps)
    curves["face"] = evaluate_faces(faces, images)
    eyes = evaluate_merged([np.concatenate([d[k] for k in EYES]) for d in face_kp], images, EYES)
    at_thr = [[f for f in fl if f.score >= fm.threshold] for fl in faces]
    thr_curve = evaluate_faces(at_thr, images)
    return {"curves": curves, "eyes": eyes, "at_default_threshold": {
        "faces": int(sum(len(f) for f in at_thr)),
        "precision": float(thr_curve.precision[-1]) if thr_curve.precision.size else None,
        "recall": float(thr_curve.recall[-1]) if thr_curve.recall.size else None}}


def _face_keypoints(faces, kps, with_keypoint=True):
    """Per image ``{keypoint: (n, 3)}`` from faces' keypoints, scored by the face score times
    the keypoint's calibrated probability (``with_keypoint``) or by the face score alone."""
    return [{k: np.array([(*f.keypoints[k][:2],
                           f.score * (f.keypoints[k][2] if with_keypoint else 1.0))
                          for f in fl if np.isfinite(f.keypoints[k][0])]).reshape(-1, 3)
             for k in kps} for fl in faces]


def _max_recall(curve):
    return float(curve.recall.max()) if curve.recall.size else 0.0


def _kidx(name):
    from cvfs.datasets.landmarks import keypoint_index

    return keypoint_index(name)


def _print(ds, n, res):
    print(f"\n== {ds}: {n} of {res['of']} images (every {res['every']}), {res['n_faces']} faces, "
          f"pyramid up to scale {res['max_scale']} ==")
    for label, m in res["methods"].items():
        aps = "  ".join(f"{k} {v['average_precision']:.3f}" for k, v in m["keypoints"].items())
        fit = sum(v or 0 for v in m["fit_seconds"].values())
        eye = f" | eye AP {m['eye']['average_precision']:.3f}" if m["eye"] else ""
        print(f"{label:14s} AP: {aps}{eye} | train "
              f"{m['train_seconds'] or 0:.0f} s (fit {fit:.0f} s) | {m['seconds_per_image']:.2f}"
              f" s/image (load {m['load_average']:.1f})")
        if m.get("keypoints_loose"):
            print(f"    AP within {m['loose_radius']:g} IED: " + "  ".join(
                f"{k} {v['average_precision']:.3f}" for k, v in m["keypoints_loose"].items()))
        for b, v in m.get("eye_recall_at_quoted_precision", {}).items():
            print(f"    eye recall at {b}'s precision {v['precision']:.2f}: ours "
                  f"{v['our_recall']:.3f} vs {v['quoted_recall']:.3f}")
        for b, v in m.get("eye_recall_at_baseline_precision", {}).items():
            print(f"    eye recall at {b}'s precision {v['precision']:.2f}: ours "
                  f"{v['our_recall']:.3f} vs {v['baseline_recall']:.3f}")
    for b, v in res["baselines"].items():
        p, r = v["eye"]["operating_point"]
        print(f"{b:22s} eye P/R {p:.2f}/{r:.2f}  AP {v['eye']['average_precision']:.3f}")
    if not res["baselines"]:
        print("(no baseline detections given)")


if __name__ == "__main__":
    raise SystemExit(main())
