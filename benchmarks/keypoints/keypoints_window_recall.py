"""Can the eye detectors see an annotated eye at all? Window recall at the ideal scale by IED.

For every annotated eye the image around it is resampled as the pyramid does to the scale that
puts the face at the middle of the detectors' training range (inter-eye distance, IED, of 28
level pixels), every window centre within 10% IED of the label is scored, and the script counts
the eyes with

- a window that survives the detector's soft cascade ("cascade"), the best a scan of
  ``detect()`` or ``detect_faces`` could do at that scale whatever its threshold, pyramid
  quantisation or peak suppression;
- a window whose full classifier score (no cascade) is positive ("score > 0").

The eyes are grouped by IED in image pixels. Sets: Caltech WebFaces dev (every ``--caltech-every``
-th image), MTFL AFLW test crops (every ``--test-every``-th) and held-out MTFL training faces
(images ``--train-slice``, never used to train or calibrate the detectors) shrunk to an IED of
``--shrink-ied`` px (Gaussian blur then bilinear, as the pyramid downsamples): the same face
size as Caltech's median, from sharp studio-quality faces. Single thread; the shipped detectors,
or eye models given as ``--models NAME=PATH ...`` (e.g. detectors trained with ``--degrade``),
on the sets chosen with ``--sets``.

    python benchmarks/keypoints/keypoints_window_recall.py
    python benchmarks/keypoints/keypoints_window_recall.py --sets caltech \
        --models shipped=cvfs/models/keypoints_fsa_lorenz_eyes.h5 degraded=eyes_degraded.h5
"""

import argparse
import math
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from tqdm.auto import tqdm

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.datasets.faces import keypoint_index, load_caltech_webfaces, load_mtfl
from cvfs.io.images import read_image
from cvfs.keypoints import load_detector
from cvfs.keypoints.refine import _sub_level
from cvfs.vision import HALF, WINDOW, PyramidLevel, as_float_rgb
from cvfs.vision.windows import LevelCache

EYES = ("left_eye_center", "right_eye_center")
BINS = ((0, 10), (10, 14), (14, 20), (20, math.inf))
SETS = ("caltech", "mtfl-test", "mtfl-train")


def _level(crop, scale):
    """The crop resampled by ``scale`` on the pyramid's grid, as the local rescan does."""
    h, w = crop.shape[:2]
    size = (max(WINDOW, round(h * scale)), max(WINDOW, round(w * scale)))
    img = _sub_level(crop, scale, 0, 0, *size)
    return PyramidLevel(image=img, index=0, scale=float(scale), scale_y=float(scale),
                        scale_x=float(scale))


def probe(det, rgb, xy, ied, name, scale, radius=0.1):
    """(any window within ``radius`` IED survives the cascade, best full score), or None when
    the crop is too small to hold a window."""
    H, W = rgb.shape[:2]
    margin = radius * ied + (HALF + 2) / scale
    x0, y0 = max(int(xy[0] - margin), 0), max(int(xy[1] - margin), 0)
    x1, y1 = min(int(xy[0] + margin) + 2, W), min(int(xy[1] + margin) + 2, H)
    if min(x1 - x0, y1 - y0) * scale < WINDOW + 2:
        return None
    lev = _level(rgb[y0:y1, x0:x1], scale)
    cache = LevelCache(lev)
    h, w = lev.shape
    c = lev.from_original(np.array([xy[0] - x0, xy[1] - y0]))
    r = radius * ied * scale
    ys = np.arange(max(HALF, int(c[1] - r) - 1), min(h - HALF, int(c[1] + r) + 2))
    xs = np.arange(max(HALF, int(c[0] - r) - 1), min(w - HALF, int(c[0] + r) + 2))
    g = np.stack(np.meshgrid(ys, xs, indexing="ij"), -1).reshape(-1, 2)
    g = g[np.hypot(g[:, 1] - c[0], g[:, 0] - c[1]) <= max(r, 0.8)]
    if len(g) == 0:
        return None
    _, sc = det.score_level(cache, g, [name], cascade=True)
    _, sf = det.score_level(cache, g, [name], cascade=False)
    return bool(np.isfinite(sc[name]).any()), float(sf[name].max())


def run(det, images, label, shrink_to=None, eyes=EYES):
    rows = []
    for im in tqdm(images, desc=label):
        rgb = as_float_rgb(read_image(im.path), min_size=WINDOW)
        pts, ieds = im.points, im.ied()
        if shrink_to is not None:
            f = float(ieds[0]) / shrink_to
            s = math.sqrt(max(f * f - 1.0, 0.0)) / 2.0
            H, W = rgb.shape[:2]
            rgb = cv2.resize(cv2.GaussianBlur(rgb, (0, 0), s, s) if s > 0 else rgb,
                             (round(W / f), round(H / f)), interpolation=cv2.INTER_LINEAR)
            pts, ieds = pts / f, ieds / f
        for fi in range(len(pts)):
            ied = float(ieds[fi])
            if not (np.isfinite(ied) and ied > 0):
                continue
            for k in eyes:
                xy = pts[fi, keypoint_index(k)]
                if np.isfinite(xy).all():
                    p = probe(det, rgb, xy, ied, k, 28.0 / ied)
                    if p is not None:
                        rows.append((ied, *p))
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caltech-every", type=int, default=6)
    ap.add_argument("--test-every", type=int, default=30)
    ap.add_argument("--train-slice", type=int, nargs=2, default=[1000, 1100])
    ap.add_argument("--shrink-ied", type=float, default=14.0)
    ap.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    ap.add_argument("--eyes", nargs="+", choices=EYES, default=list(EYES),
                    help="eyes probed (every model must detect them)")
    ap.add_argument("--models", nargs="+", default=None, metavar="NAME=PATH",
                    help="eye detector files (default: the shipped detectors)")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    models = {"shipped": None} if not args.models else dict(
        m.split("=", 1) for m in args.models)
    t0 = time.perf_counter()
    lo, hi = args.train_slice
    data = {"caltech": ("Caltech dev", lambda: load_caltech_webfaces()[::args.caltech_every],
                        None),
            "mtfl-test": ("MTFL test crops", lambda: load_mtfl("test")[::args.test_every],
                          None),
            "mtfl-train": (f"MTFL train {lo}-{hi - 1} at IED {args.shrink_ied:g}",
                           lambda: load_mtfl("train")[lo:hi], args.shrink_ied)}
    sets = {}
    for mname, path in models.items():
        det = load_detector(path)
        for key in args.sets:
            label, images, shrink = data[key]
            name = label if len(models) == 1 else f"{mname}: {label}"
            sets[name] = run(det, images(), f"{mname} {key}", shrink_to=shrink,
                             eyes=args.eyes)
    table, res = [], {}
    for name, r in sets.items():
        res[name] = {}
        for a, b in ((0, math.inf), *BINS):
            m = (r[:, 0] >= a) & (r[:, 0] < b)
            if not m.any():
                continue
            key = "all" if (a, b) == (0, math.inf) else f"[{a:g}, {b:g})"
            row = {"eyes": int(m.sum()), "cascade": float(r[m, 1].mean()),
                   "score_positive": float((r[m, 2] > 0).mean()),
                   "median_score": float(np.median(r[m, 2]))}
            res[name][key] = row
            table.append([name, key, str(row["eyes"]), f"{row['cascade']:.2f}",
                          f"{row['score_positive']:.2f}", f"{row['median_score']:+.2f}"])
    print(format_table(["set", "IED px", "eyes", "cascade", "score > 0", "median score"],
                       table, title="Eyes with a window within 10% IED at the ideal scale "
                                    "(IED 28 level px)"))
    write_json(args.out, {"args": vars(args), "results": res,
                          "seconds": time.perf_counter() - t0})
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
