"""Off-the-shelf keypoint baselines on our evaluation images: dlib 68-point, OpenCV 4 eye cascade.

Runs in a separate environment that has ``dlib`` (``dlib-bin``), ``face_recognition_models`` and
OpenCV 4 (``opencv-python-headless<5``: OpenCV 5 has no CascadeClassifier), e.g. a virtual
environment ``baselines`` made for it::

    python3 -m venv baselines
    baselines/bin/pip install dlib-bin face_recognition_models "opencv-python-headless<5"
    baselines/bin/python benchmarks/keypoints/keypoints_baselines.py --data $CVFS_DATA \\
        --n-images 300 --out benchmarks/results/keypoints/keypoints_baselines.json

It imports nothing from cvfs (the environment lacks numba etc.): it reads the annotation files
itself only to list the images, and writes raw detections per image (original pixels)::

    {"<dataset>": {"<image path>": {"dlib": {"left_eye_center": [[x, y, score], ...], ...},
                                     "opencv_eye": {"eye": [[x, y, score], ...]}}}}

``benchmarks/keypoints/keypoints_evaluate.py`` scores them with the paper's criteria. dlib: HOG face
detector (upsampled once, its detection score is the score of every keypoint of the face) then the
68-point shape predictor; eye centre = mean of the 6 eye-contour points (36-41 image-left eye,
42-47 image-right eye), nose tip = 30, mouth corners = 48 / 54, mouth centre = mean of 51 and 57.
OpenCV: ``haarcascade_eye.xml`` with default parameters; a detection is the box centre, score = its
number of neighbours (``detectMultiScale3``), not assigned to left or right.
"""

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json


def _mtfl_test(root, n):
    paths = []
    with open(Path(root) / "faces/mtfl/testing.txt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                paths.append(str(Path(root) / "faces/mtfl" / line.split()[0].replace("\\", "/")))
    return paths[:n] if n else paths


def _caltech(root, n):
    seen = []
    with open(Path(root) / "faces/caltech_webfaces_dev/WebFaces_GroundThruth.txt",
              encoding="utf-8") as fh:
        for line in fh:
            name = line.split()[0] if line.strip() else None
            if name and name not in seen:
                seen.append(name)
    paths = [str(Path(root) / "faces/caltech_webfaces_dev/images" / s) for s in seen]
    return paths[:n] if n else paths


def main(argv=None):
    import cv2
    import dlib
    import face_recognition_models
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="the data home (default: $CVFS_DATA, else ~/cvfs_data)",
                    default=os.path.expanduser(os.environ.get("CVFS_DATA") or "~/cvfs_data"))
    ap.add_argument("--n-images", type=int, default=None)
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)

    face_det = dlib.get_frontal_face_detector()
    shape = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    eye_casc = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_eye.xml")
    result, timing = {}, {}
    for ds, paths in (("mtfl-test", _mtfl_test(args.data, args.n_images)),
                      ("caltech", _caltech(args.data, args.n_images))):
        out = {}
        t_dlib = t_cv = 0.0
        for p in paths:
            bgr = cv2.imread(p, cv2.IMREAD_COLOR)
            rgb = np.ascontiguousarray(bgr[:, :, ::-1])
            t0 = time.perf_counter()
            rects, scores, _ = face_det.run(rgb, 1, 0.0)
            kp = {k: [] for k in ("left_eye_center", "right_eye_center", "nose_center",
                                  "mouth_left_corner", "mouth_right_corner", "mouth_center")}
            for r, s in zip(rects, scores, strict=True):
                pts = np.array([[q.x, q.y] for q in shape(rgb, r).parts()], dtype=float)
                for name, xy in (("left_eye_center", pts[36:42].mean(0)),
                                 ("right_eye_center", pts[42:48].mean(0)),
                                 ("nose_center", pts[30]), ("mouth_left_corner", pts[48]),
                                 ("mouth_right_corner", pts[54]),
                                 ("mouth_center", pts[[51, 57]].mean(0))):
                    kp[name].append([float(xy[0]), float(xy[1]), float(s)])
            t_dlib += time.perf_counter() - t0
            t0 = time.perf_counter()
            gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
            boxes, _, weights = eye_casc.detectMultiScale3(gray, outputRejectLevels=True)
            eyes = [[float(x + w / 2 - 0.5), float(y + h / 2 - 0.5), float(np.ravel(wt)[0])]
                    for (x, y, w, h), wt in zip(boxes, weights, strict=True)] if len(boxes) else []
            t_cv += time.perf_counter() - t0
            out[p] = {"dlib": kp, "opencv_eye": {"eye": eyes}}
        result[ds] = out
        timing[ds] = {"n_images": len(paths), "dlib_s_per_image": t_dlib / max(len(paths), 1),
                      "opencv_s_per_image": t_cv / max(len(paths), 1)}
        print(ds, timing[ds])
    result["_timing"] = timing
    result["_versions"] = {"dlib": dlib.__version__, "opencv": cv2.__version__}
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
