"""Keypoints of faces within 5% IED with and without the local rescan, on held-out training faces.

MTFL training images ``--start`` .. ``--stop - 1`` (default 1000-1149: not used to train or
calibrate the shipped detectors or the face model), at their size (pyramid up to scale 1) and
downscaled with area averaging to an inter-eye distance of ``--ied`` px (Caltech's faces; pyramid
up to scale 2). Per image the best face of :func:`cvfs.keypoints.faces.assemble_faces` is taken
as assembled and after :func:`cvfs.keypoints.refine.refine_face_keypoints`; the script prints,
per keypoint, the share of images whose face has that keypoint within 5% IED of the label.
``--level-ied`` compares settings of the rescan's middle scale (``refine_face_keypoints``'
``level_ied``): ``default`` (:data:`cvfs.keypoints.refine.LEVEL_IED`), a number for every
keypoint, or ``name=value`` pairs separated by commas (28 for the others)::

    NUMBA_NUM_THREADS=1 python benchmarks/keypoints/keypoints_refine.py --stop 1400 \
        --level-ied default 28 34 40 nose_center=48
"""

import argparse
import os
import sys
from pathlib import Path

import cv2
import numpy as np
from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets.faces import keypoint_index, load_mtfl
from cvfs.io.images import read_image
from cvfs.keypoints import load_detector
from cvfs.keypoints.faces import assemble_faces, load_face_model
from cvfs.keypoints.refine import refine_face_keypoints


def _level_ied(spec):
    """``--level-ied`` item -> ``level_ied`` of refine_face_keypoints."""
    if spec == "default":
        return None
    if "=" not in spec:
        return float(spec)
    return {k: float(v) for k, v in (item.split("=") for item in spec.split(","))}


def run(det, fm, images, ied, max_scale, specs=("default",)):
    """Share within 5% IED per keypoint, as assembled and refined with each ``--level-ied``
    setting (``ied=None``: full size)."""
    names = list(fm.shape.names)
    hits = {m: {k: [] for k in names} for m in ("assembled", *specs)}
    for im in tqdm(images, leave=False):
        rgb = read_image(im.path)
        true_ied = float(im.ied()[0])
        h, w = rgb.shape[:2]
        f = true_ied / ied if ied else 1.0
        img = rgb if f <= 1.0 else cv2.resize(
            rgb, (int(round(w / f)), int(round(h / f))), interpolation=cv2.INTER_AREA)
        fx, fy = w / img.shape[1], h / img.shape[0]
        found, scale = det._detect(img, threshold=-np.inf, max_scale=max_scale, min_scale=0.0,
                                   nms_radius=None, refine=True, cascade=True, n_jobs=1,
                                   merge_radius=None, pairs=None, max_memory=None)
        faces = assemble_faces(found, fm, scales=scale, threshold=0.0)[:1]
        runs = [("assembled", faces)] + [
            (spec, refine_face_keypoints(det, img, faces, level_ied=_level_ied(spec)))
            for spec in specs]
        for m, fl in runs:
            for k in names:
                p = im.points[0, keypoint_index(k)]
                label = ((p[0] + 0.5) / fx - 0.5, (p[1] + 0.5) / fy - 0.5)  # centre-aligned
                x, y, _ = fl[0].keypoints[k] if fl else (np.nan, np.nan, np.nan)
                d = np.hypot(x - label[0], y - label[1]) / (true_ied / fx)
                hits[m][k].append(bool(np.isfinite(d) and d <= 0.05))
    return {m: {k: float(np.mean(v)) for k, v in hk.items()} for m, hk in hits.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=1000)
    ap.add_argument("--stop", type=int, default=1150)
    ap.add_argument("--ied", type=float, default=14.0, help="inter-eye distance when downscaled")
    ap.add_argument("--level-ied", nargs="+", default=["default"], metavar="SPEC",
                    help="rescan settings compared: default, a number, or name=value,...")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    det, fm = load_detector(), load_face_model()
    images = load_mtfl("train")[args.start:args.stop]
    out = {"images": [args.start, args.stop], "load_average": os.getloadavg()[0], "runs": {}}
    for label, ied, max_scale in (("full size", None, 1.0),
                                  (f"downscaled to IED {args.ied:g} px", args.ied, 2.0)):
        res = run(det, fm, images, ied, max_scale, args.level_ied)
        out["runs"][label] = res
        print(f"\n{label} ({len(images)} faces): share of keypoints within 5% IED, as "
              f"assembled and refined with level_ied = each setting")
        print(f"{'keypoint':20s} " + " ".join(f"{m.replace('_center', ''):>16.16s}" for m in res))
        for k in fm.shape.names:
            print(f"{k:20s} " + " ".join(f"{res[m][k]:16.3f}" for m in res))
    write_json(args.out, out)
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
