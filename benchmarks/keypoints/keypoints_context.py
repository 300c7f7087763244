"""Choose detect()'s merge radius and the eye-pair model on training images only.

The shipped eye detector was trained on the first 600 MTFL training faces (LFW part) and its
cascade calibrated on the first 1,000; this script uses MTFL training faces ``--first`` to
``--last`` (default 1,000-2,499), which neither step saw, at their size (inter-eye distance ~41 px,
scanned up to scale 1) and downscaled 2x and 3x (~20 and ~14 px, like the Caltech faces, scanned
up to scale 2). It scans every image once, keeps every level's peaks (threshold -inf), and then

1. for each merge radius (level pixels) runs detect()'s suppression and position merge and
   prints the AP of each eye and of "eyes as one class" (paper criteria) on each of the three
   sets and their mean; the radius with the best mean eye AP is the detector's default;
2. with that radius, measures the offset from each true left eye to its right eye in level
   pixels (spacing = median length, sigma = 1.4826 MAD per axis in units of spacing);
3. runs a small grid of pair penalties (weight, tau, cap, sigma) with
   :func:`cvfs.keypoints.context.pair_rescore` and prints the same APs.

Results go to ``benchmarks/results/keypoints/keypoints_context.json``. Example::

    python benchmarks/keypoints/keypoints_context.py \\
        --model cvfs/models/keypoints_fsa_lorenz_eyes.h5
"""

import argparse
import itertools
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets.faces import AnnotatedImage, keypoint_index, load_mtfl
from cvfs.io.images import read_image
from cvfs.keypoints import load_detector
from cvfs.keypoints.context import PairModel, pair_rescore
from cvfs.keypoints.evaluate import evaluate_detections, evaluate_merged
from cvfs.keypoints.level_scan import level_scores
from cvfs.keypoints.peaks import grid_peaks, parabolic_offsets, suppress
from cvfs.vision import HALF, LevelCache, as_float_rgb, gaussian_pyramid, window_centres

EYES = ["left_eye_center", "right_eye_center"]
SETS = {"x1": (1.0, 1.0), "x2": (2.0, 2.0), "x3": (3.0, 2.0)}  # name: (downscale, max_scale)


def _shrunk(im, factor):
    img = read_image(im.path)
    if factor == 1.0:
        return img, im
    h, w = img.shape[:2]
    small = cv2.resize(img, (round(w / factor), round(h / factor)), interpolation=cv2.INTER_AREA)
    pts = im.points.copy()  # centre-aligned resampling, as the pyramid's
    pts[..., 0] = (pts[..., 0] + 0.5) * (small.shape[1] / w) - 0.5
    pts[..., 1] = (pts[..., 1] + 0.5) * (small.shape[0] / h) - 0.5
    return small, AnnotatedImage(im.path, pts, im.dataset, im.attrs)


def _peaks(det, img, max_scale):
    """Every level's peaks of the eye classifiers: {name: (x, y, score, level scale)}."""
    rgb = as_float_rgb(img, min_size=det.pool.window)
    found = {k: [] for k in EYES}
    models = [det.classifiers[k] for k in EYES]
    for level in gaussian_pyramid(rgb, scales_per_octave=det.scales_per_octave,
                                  max_scale=max_scale, min_size=det.pool.window):
        cache = LevelCache(level)
        h, w = cache.shape
        shape = (h - 2 * HALF + 1, w - 2 * HALF + 1)
        scores = level_scores(det.pool, cache, window_centres(cache.shape), models, True)
        for k, s in zip(EYES, scores, strict=True):
            grid = s.reshape(shape)
            rows, cols = grid_peaks(grid, -np.inf)
            xy = np.column_stack([cols, rows]).astype(np.float64) + HALF
            xy = level.to_original(xy + parabolic_offsets(grid, rows, cols))
            found[k].append(np.column_stack([xy, grid[rows, cols],
                                             np.full(rows.size, level.scale)]))
    return {k: np.concatenate(v) for k, v in found.items()}


def _suppressed(peaks, nms_radius, merge_radius):
    out = {}
    for k, p in peaks.items():
        kept, scale = suppress(p[:, :3], nms_radius / p[:, 3], True, merge_radius / p[:, 3],
                                p[:, 3])
        out[k] = np.column_stack([kept, scale])
    return out


def _aps(dets, images):
    curves = evaluate_detections([{k: d[k][:, :3] for k in EYES} for d in dets], images, EYES)
    eye = evaluate_merged([np.concatenate([d[k][:, :3] for k in EYES]) for d in dets], images,
                          EYES)
    return {"left": curves[EYES[0]].average_precision,
            "right": curves[EYES[1]].average_precision, "eye": eye.average_precision}


def _row(label, res):
    mean = float(np.mean([r["eye"] for r in res.values()]))
    cells = "  ".join(f"{n}: L {r['left']:.3f} R {r['right']:.3f} eye {r['eye']:.3f}"
                      for n, r in res.items())
    print(f"{label:34s} mean eye AP {mean:.4f} | {cells}", flush=True)
    return mean


def _geometry(sets):
    """Offsets left -> right eye (level pixels of the left detection) of true pairs."""
    li, ri = keypoint_index(EYES[0]), keypoint_index(EYES[1])
    v = []
    for dets, images in sets.values():
        for d, im in zip(dets, images, strict=True):
            ied = im.ied()[0]
            best = []
            for k, idx in ((EYES[0], li), (EYES[1], ri)):
                a = d[k]
                near = np.hypot(*(a[:, :2] - im.points[0, idx]).T) / ied < 0.1
                best.append(a[np.flatnonzero(near)[np.argmax(a[near, 2])]] if near.any()
                            else None)
            if best[0] is not None and best[1] is not None:
                v.append((best[1][:2] - best[0][:2]) * best[0][3])
    v = np.asarray(v)
    spacing = float(np.median(np.hypot(v[:, 0], v[:, 1])))
    u = v / spacing
    mad = 1.4826 * np.median(np.abs(u - np.median(u, axis=0)), axis=0)
    return {"n_pairs": len(v), "spacing": spacing, "sigma_x": float(mad[0]),
            "sigma_y": float(mad[1])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cvfs/models/keypoints_fsa_lorenz_eyes.h5")
    ap.add_argument("--first", type=int, default=1000)
    ap.add_argument("--last", type=int, default=2499)
    ap.add_argument("--merge-radii", type=float, nargs="+",
                    default=[1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0])
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)

    det = load_detector(args.model)
    train = load_mtfl("train")[args.first:args.last + 1]
    peaks, images = {}, {}
    t0 = time.perf_counter()
    for name, (factor, max_scale) in SETS.items():
        peaks[name], images[name] = [], []
        for im in train:
            img, ann = _shrunk(im, factor)
            peaks[name].append(_peaks(det, img, max_scale))
            images[name].append(ann)
        print(f"scanned {name}: {len(train)} images, {time.perf_counter() - t0:.0f} s", flush=True)
    result = {"model": args.model, "images": [args.first, args.last], "sets": SETS,
              "nms_radius": det.nms_radius, "merge": {}, "pairs": {}}

    print(f"\n== merge radius (level px; suppression radius {det.nms_radius}) ==")
    best = (-1.0, None)
    for mr in args.merge_radii:
        res = {n: _aps([_suppressed(p, det.nms_radius, mr) for p in peaks[n]], images[n])
               for n in SETS}
        mean = _row(f"merge radius {mr:g}", res)
        result["merge"][str(mr)] = {"mean_eye_ap": mean, "sets": res}
        best = max(best, (mean, mr))
    mr = best[1]
    print(f"best: {mr:g}")
    dets = {n: [_suppressed(p, det.nms_radius, mr) for p in peaks[n]] for n in SETS}
    geo = _geometry({n: (dets[n], images[n]) for n in SETS})
    result["geometry"] = geo
    print(f"\n== true pairs (merge radius {mr:g}) == {geo}")

    print("\n== pair penalty ==")
    _row("no pairing", {n: _aps(dets[n], images[n]) for n in SETS})
    best = (-1.0, None)
    for sigma, w, tau, cap in itertools.product((0.17, 0.25), (0.25, 0.5, 1.0), (-0.5, 0.0),
                                                (0.5, 1.0, 2.0)):
        model = PairModel(spacing=round(geo["spacing"], 1), sigma=sigma, weight=w, tau=tau,
                          cap=cap)
        res = {}
        for n in SETS:
            out = []
            for d in dets[n]:
                sl, sr = pair_rescore(d[EYES[0]], d[EYES[1]], model)
                out.append({EYES[0]: np.column_stack([d[EYES[0]][:, :2], sl]),
                            EYES[1]: np.column_stack([d[EYES[1]][:, :2], sr])})
            res[n] = _aps(out, images[n])
        label = f"sigma {sigma} w {w} tau {tau} cap {cap}"
        mean = _row(label, res)
        result["pairs"][label] = {"mean_eye_ap": mean, "sets": res}
        best = max(best, (mean, label))
    print(f"best: {best[1]} (mean eye AP {best[0]:.4f})")
    write_json(args.out, result)
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
