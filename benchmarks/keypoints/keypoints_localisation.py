"""Where the eyes of ``detect_faces`` sit against each dataset's labels: bias, spread, face size.

The paper's rule counts an eye as found within 5% of the inter-eye distance (IED): 0.7 px on a
Caltech WebFaces face of IED 14 px. This script tells a systematic offset from spread, for the
faces that ``detect_faces`` finds (the face whose eyes are nearest to an annotated face, within
``--match`` IED; :func:`cvfs.keypoints.evaluate.face_keypoint_errors`), per range of IED:

- ``caltech``: Caltech WebFaces dev images (every ``--caltech-every``-th, pyramid up to scale 2):
  the share of annotated faces with a face within 0.05-0.5 IED; the eye error vectors of the
  faces as assembled (each eye at its pyramid detection; also by the pyramid scale of that
  detection) and as refined (``detect_faces``' output); the face score of eyes within 5%, 5-10%
  and beyond 10% IED; the eye AP at 5%, 7.5% and 10% IED;
- ``mtfl``: the same on MTFL's AFLW test crops (every ``--mtfl-every``-th, up to scale 1);
- ``lfw``: MTFL training faces the shipped detectors never saw (``--lfw-slice``), shrunk to an IED
  of ``--lfw-ied`` px x exp(U(-0.3, 0.3)) (the labels mapped with the pixel-centre rule
  ``x' = (x + 0.5) / f - 0.5``), sharp (Gaussian anti-aliasing, bilinear) and degraded (plus a
  Gaussian blur of sigma U(0, 1) and JPEG quality U(30, 80),
  :func:`cvfs.keypoints.degrade.degrade_pixels`), through the same pipeline: how the detectors
  place their own training labels' convention on small, blurred faces;
- ``mirror``: on those MTFL training faces at their own size, the MTFL test crops and the
  Caltech images, each eye rescanned around its label (:func:`cvfs.keypoints.refine.refine_points`,
  one scale, IED 28 level px) on the image and on its mirror image (with the other eye's
  detector; ``x -> W - 1 - x``). Detectors trained on labels placed symmetrically about the eye
  would give the same position both ways: half the horizontal difference is the detectors'
  offset from the mirror-symmetric position (the training labels' offset, scaled to the face),
  and minus half the sum is the dataset's labels' own horizontal offset from it, in image
  pixels (a 1-based pixel convention gives +1). Measured on the labels, never applied;
- a diagnostic row (nothing is applied to the detectors): the Caltech eye AP with the refined
  eyes moved by ``+c px - IED / IED_train`` on both axes, for ``c`` = 0.5 and 1, where
  ``IED_train`` is the harmonic mean IED of the shipped detectors' training faces (MTFL
  training 0-599): the AP if Caltech's labels and the training labels followed a pixel
  convention offset by ``c`` px; and (with ``--sections mtfl caltech``) with each refined eye
  moved by minus the median error of that eye on the MTFL AFLW test crops, in pixels
  (``mtfl_px``) or in IED (``mtfl_ied``): the AP if Caltech's labels sat where MTFL's test labels
  sit. Caltech's offset cannot be learned on Caltech, the test set.

Single thread; all four sections take ~7 CPU minutes. Prints tables, writes
``benchmarks/results/keypoints/keypoints_localisation.json``::

    NUMBA_NUM_THREADS=1 python benchmarks/keypoints/keypoints_localisation.py --caltech-every 3
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from cvfs.datasets.faces import AnnotatedImage, load_caltech_webfaces, load_mtfl
from cvfs.io.images import read_image
from cvfs.keypoints import load_detector
from cvfs.keypoints.evaluate import evaluate_keypoint, face_keypoint_errors
from cvfs.keypoints.faces import assemble_faces, load_face_model
from cvfs.keypoints.refine import refine_face_keypoints, refine_points

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, limit_threads, result_path, write_json

EYES = ("left_eye_center", "right_eye_center")
BINS = ((0, 10), (10, 14), (14, 20), (20, 30), (30, 45), (45, np.inf))
SCALE_BINS = ((0, 0.8), (0.8, 1.2), (1.2, 1.7), (1.7, 2.01))


def _pipeline(det, fm, img, max_scale):
    """Assembled faces (eyes at their pyramid detections, with those detections' scales) and
    the refined faces, as ``detect_faces`` at threshold 0 makes them."""
    found, scale = det._face_detections(img, fm, max_scale=max_scale, n_jobs=1,
                                        max_memory=None, top_down=True)
    faces = assemble_faces(found, fm, scales=scale, threshold=0.0, max_faces=50)
    refined = refine_face_keypoints(det, img, faces, fill_missing=fm.probability)
    scales = []
    for f in faces:  # pyramid scale of the detection each assembled eye sits on
        row = []
        for k in EYES:
            x, y, _ = f.keypoints[k]
            d = np.asarray(found.get(k, np.zeros((0, 3))), float).reshape(-1, 3)
            s = np.asarray(scale.get(k, np.zeros(0)), float).reshape(-1)
            hit = np.flatnonzero((np.abs(d[:, 0] - x) < 1e-6) & (np.abs(d[:, 1] - y) < 1e-6))
            row.append(float(s[hit[0]]) if np.isfinite(x) and len(hit) else np.nan)
        scales.append(row)
    return faces, refined, scales


def _error_table(res, title):
    """Rows per IED range: median error (IED and px), robust spread, share within 5%/10%."""
    ied, e = res["ied"], res["errors"]
    m = res["matched"]
    rows, out = [], {}
    for lo, hi in ((0, np.inf),) + BINS:
        s = m & (ied >= lo) & (ied < hi)
        if not s.any():
            continue
        rel = e[s] / ied[s, None, None]
        nrm = np.hypot(rel[..., 0], rel[..., 1])
        med = np.nanmedian(rel, axis=0)
        px = np.nanmedian(e[s], axis=0)
        mad = 1.4826 * np.nanmedian(np.abs(rel - med), axis=0)
        w5, w10 = np.nanmean(nrm <= 0.05, axis=0), np.nanmean(nrm <= 0.10, axis=0)
        name = "all" if hi == np.inf and lo == 0 else f"[{lo}, {hi})"
        out[name] = {"n": int(s.sum()), "median_ied": med.tolist(), "median_px": px.tolist(),
                     "robust_sd_ied": mad.tolist(), "within_5": w5.tolist(),
                     "within_10": w10.tolist()}
        rows.append([name, int(s.sum())] + [
            f"{med[i, 0]:+.3f},{med[i, 1]:+.3f} ({px[i, 0]:+.2f},{px[i, 1]:+.2f} px)"
            for i in range(2)] + [f"{mad[:, 0].mean():.3f},{mad[:, 1].mean():.3f}",
                                  f"{w5[0]:.2f}/{w5[1]:.2f}", f"{w10[0]:.2f}/{w10[1]:.2f}"])
    print(format_table(["IED px", "n", "L eye bias dx,dy IED (px)", "R eye bias dx,dy IED (px)",
                        "robust sd x,y IED", "within 5% L/R", "within 10% L/R"], rows,
                       title=title))
    return out


def _eye_ap(refined, images, shift=None):
    """AP per eye (5%, 7.5%, 10% rules) of the refined faces' eyes scored by face score times
    eye probability; ``shift(face, eye) -> (dx, dy)`` moves each eye of a face first."""
    out = {}
    from cvfs.datasets.landmarks import keypoint_index

    for k in EYES:
        dets = []
        for fl in refined:
            rows = []
            for f in fl:
                x, y, p = f.keypoints[k]
                if np.isfinite(x):
                    dx, dy = shift(f, k) if shift else (0.0, 0.0)
                    rows.append((x + dx, y + dy, f.score * p))
            dets.append(np.array(rows, float).reshape(-1, 3))
        pts = [im.points[:, keypoint_index(k)] for im in images]
        ieds = [im.ied() for im in images]
        out[k] = {f"{r:g}": evaluate_keypoint(dets, pts, ieds, detect_radius=r,
                                              fp_radius=max(r, 0.1)).average_precision
                  for r in (0.05, 0.075, 0.10)}
    return out


def _dataset(det, fm, images, pixels, max_scale, args, label):
    """Run the pipeline on ``pixels`` (list of RGB arrays), print and return the diagnosis."""
    assembled, refined, det_scales = [], [], []
    t0 = time.process_time()
    for img in tqdm(pixels, desc=label):
        a, r, s = _pipeline(det, fm, img, max_scale)
        assembled.append(a)
        refined.append(r)
        det_scales.append(s)
    cpu = (time.process_time() - t0) / max(len(pixels), 1)
    ra = face_keypoint_errors(assembled, images, EYES, max_distance=args.match)
    rr = face_keypoint_errors(refined, images, EYES, max_distance=args.match)
    n = len(rr["ied"])
    found = {f"{t:g}": float(np.mean(rr["distance"] < t)) for t in (0.05, 0.1, 0.2, 0.5)}
    print(f"\n== {label}: {len(images)} images, {n} annotated faces; a face with both eyes "
          f"within 0.05 / 0.1 / 0.2 / 0.5 IED: " + " / ".join(f"{v:.3f}" for v in found.values())
          + f"; CPU {cpu:.2f} s/image (load {os.getloadavg()[0]:.1f}) ==")
    out = {"n_images": len(images), "n_faces": n, "found_within": found,
           "cpu_seconds_per_image": cpu,
           "assembled": _error_table(ra, f"{label}: eyes as assembled (pyramid detections)"),
           "refined": _error_table(rr, f"{label}: eyes as refined (detect_faces)")}
    # assembled eyes by the pyramid scale of their detection
    sc = _matched_scales(assembled, det_scales, images, args.match)
    rel = np.hypot(*(ra["errors"] / ra["ied"][:, None, None]).transpose(2, 0, 1))
    rows, by_scale = [], {}
    for lo, hi in SCALE_BINS:
        s = (sc >= lo) & (sc < hi)
        if s.any():
            by_scale[f"[{lo}, {hi})"] = {"n": int(s.sum()),
                                         "within_5": float(np.mean(rel[s] <= 0.05)),
                                         "median_error_ied": float(np.median(rel[s]))}
            rows.append([f"[{lo}, {hi})", int(s.sum()), f"{np.mean(rel[s] <= 0.05):.2f}",
                         f"{np.median(rel[s]):.3f}", f"{1 / np.nanmedian(sc[s]):.2f}"])
    print(format_table(["detection scale", "eyes", "within 5%", "median |e| IED",
                        "level px (image px)"], rows,
                       title=f"{label}: assembled eyes by the pyramid scale of their detection"))
    out["assembled_by_scale"] = by_scale
    e = np.hypot(*(rr["errors"] / rr["ied"][:, None, None]).transpose(2, 0, 1))[:, 0]
    sc_ = rr["score"]
    cls = {"within 5%": e <= 0.05, "5-10%": (e > 0.05) & (e < 0.10), ">= 10%": e >= 0.10}
    out["face_score_median_left_eye"] = {k: float(np.nanmedian(sc_[v])) if v.any() else None
                                         for k, v in cls.items()}
    print("median face score of the matched face, by its left eye's error: " + ", ".join(
        f"{k} {v:.3f}" for k, v in out["face_score_median_left_eye"].items() if v is not None))
    out["eye_ap"] = _eye_ap(refined, images)
    print("eye AP (5% / 7.5% / 10% IED): " + "; ".join(
        f"{k} " + " / ".join(f"{v:.3f}" for v in d.values()) for k, d in out["eye_ap"].items()))
    return out, refined


def _matched_scales(faces, det_scales, images, match):
    """Per annotated face (as :func:`face_keypoint_errors` orders them), the pyramid scales of
    the matched assembled face's two eye detections (NaN where unmatched)."""
    from cvfs.datasets.landmarks import keypoint_index

    le, re_ = keypoint_index("left_eye_center"), keypoint_index("right_eye_center")
    out = []
    for fl, sl, im in zip(faces, det_scales, images, strict=True):
        ied = im.ied()
        for g in np.flatnonzero(np.isfinite(im.points[:, [le, re_]]).all(axis=(1, 2))
                                & np.isfinite(ied) & (ied > 0)):
            best, bd = None, np.inf
            for j, f in enumerate(fl):
                q = np.array([f.keypoints[k][:2] for k in EYES])
                if np.isfinite(q).all():
                    d = np.hypot(*(q - im.points[g, [le, re_]]).T).max() / ied[g]
                    if d < bd:
                        best, bd = j, d
            out.append(sl[best] if best is not None and bd < match else [np.nan, np.nan])
    return np.array(out, float).reshape(-1, 2)


def _shrunk(images, target, degrade, seed):
    """MTFL images shrunk to an IED of ``target`` x exp(U(-0.3, 0.3)) px (optionally blurred and
    JPEG-compressed), with their labels mapped by the pixel-centre rule."""
    from cvfs.keypoints.degrade import degrade_pixels

    rng = np.random.default_rng(seed)
    pix, ims = [], []
    for im in images:
        img = read_image(im.path)
        f = max(float(np.nanmax(im.ied())) / (target * np.exp(rng.uniform(-0.3, 0.3))), 1.0)
        blur, q = (rng.uniform(0, 1), int(rng.integers(30, 81))) if degrade else (0.0, None)
        small = degrade_pixels(img, f, blur_sigma=blur, jpeg_quality=q)
        H, W = img.shape[:2]
        h, w = small.shape[:2]
        pts = (im.points + 0.5) * np.array([w / W, h / H]) - 0.5
        pix.append(small)
        ims.append(AnnotatedImage(im.path, pts, im.dataset))
    return ims, pix


def _mirror(det, images, label, ied_train):
    """Each eye rescanned around its label on the image and, with the other eye's detector, on
    the mirror image; per range of IED the medians of half the horizontal difference (the
    detectors' offset from the mirror-symmetric position) and of minus half the sum (the labels'
    offset from it), in image pixels."""
    from cvfs.datasets.landmarks import keypoint_index

    other = {"left_eye_center": "right_eye_center", "right_eye_center": "left_eye_center"}
    idx = [keypoint_index(k) for k in EYES]
    plain, mirr, ieds = [], [], []
    for im in tqdm(images, desc=f"mirror {label}"):
        img = read_image(im.path)
        W = img.shape[1]
        P = im.points[:, idx]
        ied = im.ied()
        ok = np.isfinite(P).all(axis=(1, 2)) & np.isfinite(ied) & (ied > 0)
        if not ok.any():
            continue
        P, ied = P[ok].reshape(-1, 2), np.repeat(ied[ok], 2)
        names = list(EYES) * (len(P) // 2)
        a = refine_points(det, img, P, names, ied, n_scales=1, radius=0.1)
        M = np.column_stack([W - 1 - P[:, 0], P[:, 1]])
        b = refine_points(det, np.ascontiguousarray(img[:, ::-1]), M,
                          [other[n] for n in names], ied, n_scales=1, radius=0.1)
        b[:, 0] = W - 1 - b[:, 0]
        plain.append(a[:, :2] - P)
        mirr.append(b[:, :2] - P)
        ieds.append(ied)
    plain, mirr, ieds = np.concatenate(plain), np.concatenate(mirr), np.concatenate(ieds)
    det_off = (plain[:, 0] - mirr[:, 0]) / 2
    lab_off = -(plain[:, 0] + mirr[:, 0]) / 2
    out, rows = {}, []
    for lo, hi in ((0, np.inf),) + BINS:
        s = (ieds >= lo) & (ieds < hi)
        if s.sum() < 2:
            continue
        name = "all" if (lo, hi) == (0, np.inf) else f"[{lo}, {hi})"
        v = {"n_eyes": int(s.sum()), "median_ied": float(np.median(ieds[s])),
             "plain_px": np.median(plain[s], axis=0).tolist(),
             "mirrored_px": np.median(mirr[s], axis=0).tolist(),
             "detector_offset_x_px": float(np.median(det_off[s])),
             "detector_offset_x_training_px": float(np.median(det_off[s] * ied_train
                                                              / ieds[s])),
             "label_offset_x_px": float(np.median(lab_off[s]))}
        out[name] = v
        rows.append([name, v["n_eyes"], f"{v['plain_px'][0]:+.2f},{v['plain_px'][1]:+.2f}",
                     f"{v['mirrored_px'][0]:+.2f},{v['mirrored_px'][1]:+.2f}",
                     f"{v['detector_offset_x_px']:+.2f} "
                     f"({v['detector_offset_x_training_px']:+.2f})",
                     f"{v['label_offset_x_px']:+.2f}"])
    print(format_table(["IED px", "eyes", "plain dx,dy px", "mirrored dx,dy px",
                        "detectors' x offset px (x 41/IED)", "labels' x offset px"], rows,
                       title=f"mirror test, {label}: medians, image px (offsets from the "
                             f"mirror-symmetric eye position)"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", nargs="+", default=["mtfl", "caltech", "lfw", "mirror"],
                    choices=["caltech", "mtfl", "lfw", "mirror"])
    ap.add_argument("--mtfl-every", type=int, default=10)
    ap.add_argument("--caltech-every", type=int, default=3)
    ap.add_argument("--lfw-slice", type=int, nargs=2, default=[2000, 2200],
                    help="MTFL training images (never seen by the shipped detectors, trained on "
                         "0-599 and calibrated on 0-999)")
    ap.add_argument("--lfw-ied", type=float, default=14.0, help="IED of the shrunk faces, px")
    ap.add_argument("--match", type=float, default=0.5, help="largest eye distance (IED) of the "
                    "face matched to an annotated face")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    det, fm = load_detector(), load_face_model()
    results = {"args": vars(args), "sections": {}}
    train = load_mtfl("train")
    lo, hi = args.lfw_slice
    if "mtfl" in args.sections:
        images = load_mtfl("test")[::args.mtfl_every]
        res, _ = _dataset(det, fm, images, [read_image(im.path) for im in images], 1.0, args,
                          f"MTFL AFLW test crops (every {args.mtfl_every})")
        results["sections"]["mtfl"] = res
    if "caltech" in args.sections:
        images = load_caltech_webfaces()[::args.caltech_every]
        res, refined = _dataset(det, fm, images, [read_image(im.path) for im in images], 2.0,
                                args, f"caltech (every {args.caltech_every})")
        ied_train = float(1.0 / np.nanmean(1.0 / np.concatenate([im.ied() for im in
                                                                 train[:600]])))
        what_if = {}
        for c in (0.5, 1.0):
            what_if[f"{c:g}"] = _eye_ap(refined, images, shift=lambda f, k, c=c: (
                c - f.ied / ied_train, c - f.ied / ied_train))
        if "mtfl" in results["sections"]:  # the MTFL test crops' median offset, per eye
            med = {k: (-np.array(results["sections"]["mtfl"]["refined"]["all"]["median_px"][i]),
                       -np.array(results["sections"]["mtfl"]["refined"]["all"]["median_ied"][i]))
                   for i, k in enumerate(EYES)}
            what_if["mtfl_px"] = _eye_ap(refined, images, shift=lambda f, k: med[k][0])
            what_if["mtfl_ied"] = _eye_ap(refined, images,
                                          shift=lambda f, k: med[k][1] * f.ied)
        res["ied_train_harmonic_mean"] = ied_train
        res["eye_ap_if_label_offset_px"] = what_if
        print(f"diagnostic only (not applied): eye AP (5% / 7.5% / 10%) with the eyes moved by "
              f"+c px - IED / {ied_train:.1f} on both axes (c = 0.5, 1), or by minus the MTFL "
              f"test crops' median offset (mtfl_px, mtfl_ied): " + "; ".join(
                  f"{c}: " + ", ".join(f"{k[:5]} " + "/".join(f"{v:.3f}" for v in d.values())
                                         for k, d in w.items()) for c, w in what_if.items()))
        results["sections"]["caltech"] = res
    if "lfw" in args.sections:
        for degrade in (False, True):
            ims, pix = _shrunk(train[lo:hi], args.lfw_ied, degrade, args.seed)
            label = (f"MTFL training {lo}-{hi - 1} shrunk to IED ~{args.lfw_ied:g} px"
                     + (", blurred + JPEG" if degrade else ""))
            res, _ = _dataset(det, fm, ims, pix, 2.0, args, label)
            results["sections"]["lfw_degraded" if degrade else "lfw_sharp"] = res
    if "mirror" in args.sections:
        ied_train = float(1.0 / np.nanmean(1.0 / np.concatenate([im.ied() for im in
                                                                 train[:600]])))
        results["sections"]["mirror"] = {
            "mtfl_training": _mirror(det, train[lo:hi], f"MTFL training {lo}-{hi - 1}",
                                     ied_train),
            "mtfl_test": _mirror(det, load_mtfl("test")[::args.mtfl_every],
                                 f"MTFL AFLW test crops (every {args.mtfl_every})", ied_train),
            "caltech": _mirror(det, load_caltech_webfaces()[::args.caltech_every],
                               f"Caltech (every {args.caltech_every})", ied_train)}
    write_json(args.out, results)
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
