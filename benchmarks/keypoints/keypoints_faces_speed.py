r"""CPU per photo of ``detect_faces`` and of OpenCV 4's Haar face + eye cascades on the same photos.

On the Caltech WebFaces photos (every ``--every``-th of ``faces/caltech_webfaces_dev``, decoded
beforehand) it times, one thread, CPU seconds (``time.process_time``):

- ``detect_faces(photo, max_scale=2)`` at its defaults (full scan, refinement, the face model's
  threshold), after one untimed call that compiles the kernels;
- ``detect_faces(photo, max_scale=2, threshold=0)`` (every face, for the eye AP: each eye
  scored by the face score times the eye's calibrated probability, detected within 5% of the
  inter-eye distance, as ``keypoints_evaluate.py --faces``), counting the windows the scan
  kernel scores (:class:`cvfs.keypoints._scan.ScanPlan`) per keypoint and those the keypoint
  refinement scores in full (:class:`cvfs.keypoints.level_scan.FullScorer`);
- with ``--opencv-python PATH`` (an interpreter with ``opencv-python-headless<5``: OpenCV 5 has
  no Haar cascades), ``benchmarks/keypoints/_opencv_cascades.py`` in that interpreter on the same
  photo list, ``cv2.setNumThreads(1)``: the face and eye cascades each over the whole photo, and
  the face cascade then the eye cascade in the upper half of each face;

then, on the first ``--depth-photos`` photos, how many features a window computes on average
before the soft cascade rejects it (per keypoint), and the top-down video scan
(``detect_faces(frame, top_down=True)``) and full scan on scikit-image's astronaut resized to
640x480: frames per second from the median CPU time of ``--video-repeats`` calls.

``--options KEY=VALUE ...`` are passed to every ``detect_faces`` call (a speed/accuracy option
measured against the defaults: run the script once with and once without). Writes
``benchmarks/results/keypoints/keypoints_faces_speed.json``.

Example::

    python -m venv venv-cv4 && venv-cv4/bin/pip install 'opencv-python-headless<5' numpy
    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/run.py keypoints/keypoints_faces_speed \
        --every 5 --opencv-python venv-cv4/bin/python
"""

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, limit_threads, result_path, write_json

EYES = ("left_eye_center", "right_eye_center")
CHILD = Path(__file__).with_name("_opencv_cascades.py")


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class _Counter:
    """Counts the windows scored by the scan kernel (per keypoint) and by the full scorer,
    and with ``depth`` the features computed per window (per keypoint), while active."""

    def __init__(self, det):
        from cvfs.keypoints import _scan, level_scan

        self.det, self._scan, self._level_scan = det, _scan, level_scan
        self.windows = dict.fromkeys(det.keypoints, 0)
        self.features = dict.fromkeys(det.keypoints, 0)
        self.depth_windows = dict.fromkeys(det.keypoints, 0)
        self.full = 0
        self.depth = False

    def __enter__(self):
        counter, det = self, self.det
        plan_cls, full_cls = self._scan.ScanPlan, self._level_scan.FullScorer
        self._saved = plan_cls.scores, full_cls.__call__
        scores, full_call = self._saved

        def names_of(plan):  # the keypoints of a plan the detector built (and cached)
            for key, (_, p) in det.__dict__.get("_scan_plans", {}).items():
                if p is plan:
                    return [k for k in key if k in det.classifiers]
            return ("other",) * (plan.ptr.size - 1)

        def plan_scores(plan, cache, top_left, reached=False, **kw):
            if counter.depth and not reached:
                out, depth, _ = scores(plan, cache, top_left, reached=True, **kw)
                for name, d in zip(names_of(plan), depth, strict=True):
                    counter.features[name] = counter.features.get(name, 0) + int(d.sum())
                    counter.depth_windows[name] = counter.depth_windows.get(name, 0) + d.size
            else:
                out = scores(plan, cache, top_left, reached, **kw)
            for name in names_of(plan):
                counter.windows[name] = counter.windows.get(name, 0) + len(top_left)
            return out

        def full_scorer_call(scorer, cache, centres):
            counter.full += len(centres)
            return full_call(scorer, cache, centres)

        plan_cls.scores, full_cls.__call__ = plan_scores, full_scorer_call
        return self

    def __exit__(self, *exc):
        plan_cls, full_cls = self._scan.ScanPlan, self._level_scan.FullScorer
        plan_cls.scores, full_cls.__call__ = self._saved


def _eye_detections(faces):
    """Per keypoint ``(n, 3)`` of the faces' eyes, scored by face score x eye probability."""
    return {k: np.array([(*f.keypoints[k][:2], f.score * f.keypoints[k][2]) for f in faces
                         if np.isfinite(f.keypoints[k][0])]).reshape(-1, 3) for k in EYES}


def _opencv(python, paths):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([python, str(CHILD)], input=json.dumps([str(p) for p in paths]),
                         capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"keypoints_faces_speed.py: the OpenCV child failed: "
                         f"{res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout)


def _video(det, max_scale, repeats, options):
    import cv2
    from skimage import data

    frame = cv2.resize(data.astronaut(), (640, 480), interpolation=cv2.INTER_AREA)
    out = {}
    for label, kw in (("top_down", {"top_down": True}), ("full", {"top_down": False})):
        kw = {**options, **kw}  # the row's scan, whatever --options says
        det.detect_faces(frame, max_scale=max_scale, **kw)
        cpu = []
        for _ in range(repeats):
            t0 = time.process_time()
            faces = det.detect_faces(frame, max_scale=max_scale, **kw)
            cpu.append(time.process_time() - t0)
        c = float(np.median(cpu))
        out[label] = {"cpu_s": c, "fps_cpu": 1.0 / c, "faces": len(faces)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=5, help="every n-th Caltech photo (5: 90)")
    ap.add_argument("--max-scale", type=float, default=2.0)
    ap.add_argument("--opencv-python", help="an interpreter with OpenCV 4 (else no OpenCV row)")
    ap.add_argument("--depth-photos", type=int, default=10)
    ap.add_argument("--video-repeats", type=int, default=3)
    ap.add_argument("--options", nargs="*", default=[], metavar="KEY=VALUE",
                    help="keyword arguments of every detect_faces call")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    if args.every < 1:
        raise SystemExit(f"--every must be >= 1; got {args.every}")
    bad = [o for o in args.options if "=" not in o]
    if bad:
        raise SystemExit(f"--options takes KEY=VALUE; got {bad}")
    options = {k: _value(v) for k, v in (o.split("=", 1) for o in args.options)}
    limit_threads()

    from cvfs.datasets.faces import load_caltech_webfaces
    from cvfs.io.images import read_image
    from cvfs.keypoints import load_detector
    from cvfs.keypoints.evaluate import evaluate_detections

    det = load_detector()
    images = load_caltech_webfaces()[::args.every]
    photos = [read_image(im.path) for im in images]
    ms = args.max_scale
    det.detect_faces(photos[0], max_scale=ms, **options)  # compile (cached kernels load)

    cpu_default, cpu_all, found = [], [], []
    for img in photos:
        t0 = time.process_time()
        det.detect_faces(img, max_scale=ms, **options)
        cpu_default.append(time.process_time() - t0)
    counter = _Counter(det)
    with counter:
        for img in photos:
            t0 = time.process_time()
            found.append(det.detect_faces(img, max_scale=ms, threshold=0.0, **options))
            cpu_all.append(time.process_time() - t0)
    windows = dict(counter.windows)
    full_windows = counter.full
    curves = evaluate_detections([_eye_detections(f) for f in found], images, list(EYES))
    ap_eye = {k: float(curves[k].average_precision) for k in EYES}
    depth = _Counter(det)
    depth.depth = True
    with depth:
        for img in photos[:args.depth_photos]:
            det.detect_faces(img, max_scale=ms, **options)
    feats_per_window = {k: depth.features[k] / max(depth.depth_windows[k], 1)
                        for k in depth.depth_windows if depth.depth_windows[k]}
    video = _video(det, det.max_scale, args.video_repeats, options)

    n = len(photos)
    res = {"dataset": "caltech_webfaces_dev", "every": args.every, "n_photos": n,
           "photo_shapes_mean": np.mean([p.shape[:2] for p in photos], axis=0).tolist(),
           "max_scale": ms, "options": options,
           "cvfs": {"cpu_s_per_photo": float(np.mean(cpu_default)),
                    "cpu_s_per_photo_threshold0": float(np.mean(cpu_all)),
                    "cpu_s": cpu_default, "eye_ap": ap_eye,
                    "scan_windows_per_photo": {k: v / n for k, v in windows.items() if v},
                    "scan_windows_per_photo_total": sum(windows.values()) / n,
                    "refine_windows_per_photo": full_windows / n,
                    "features_per_window": feats_per_window,
                    "depth_photos": min(args.depth_photos, n)},
           "video_640x480": video, "load_average": os.getloadavg()[0]}
    rows = [["cvfs detect_faces()", f"{1e3 * res['cvfs']['cpu_s_per_photo']:.0f}", None],
            ["cvfs detect_faces(threshold=0)",
             f"{1e3 * res['cvfs']['cpu_s_per_photo_threshold0']:.0f}", None]]
    if args.opencv_python:
        cv = _opencv(args.opencv_python, [im.path for im in images])
        whole = float(np.mean([r["whole"] for r in cv["photos"]]))
        fte = float(np.mean([r["face_then_eyes"] for r in cv["photos"]]))
        c = res["cvfs"]["cpu_s_per_photo"]
        res["opencv"] = {"version": cv["opencv"], "threads": cv["threads"],
                         "cpu_s_per_photo_whole": whole, "cpu_s_per_photo_face_then_eyes": fte,
                         "ratio_whole": c / whole, "ratio_face_then_eyes": c / fte,
                         "photos": cv["photos"]}
        rows += [[f"OpenCV {cv['opencv']} face + eye cascades, whole photo", f"{1e3 * whole:.0f}",
                  f"{c / whole:.2f}"],
                 [f"OpenCV {cv['opencv']} face, then eyes in faces", f"{1e3 * fte:.0f}",
                  f"{c / fte:.2f}"]]
    print(format_table(["method", "CPU ms/photo", "cvfs / this"], rows,
                       title=f"Caltech WebFaces, {n} photos (every {args.every}), one thread, "
                             f"pyramid up to scale {ms:g}, options {options or 'none'}"))
    print("eye AP (5% IED, face x eye score): " + ", ".join(
        f"{k} {v:.3f}" for k, v in ap_eye.items()))
    print("scan-kernel windows per photo: " + ", ".join(
        f"{k} {v / n:.0f}" for k, v in windows.items() if v)
        + f"; total {res['cvfs']['scan_windows_per_photo_total']:.0f}; refinement "
          f"{full_windows / n:.0f}")
    print(f"features per window (first {res['cvfs']['depth_photos']} photos): " + ", ".join(
        f"{k} {v:.2f}" for k, v in feats_per_window.items()))
    print("640x480 astronaut: " + ", ".join(
        f"{k} {v['fps_cpu']:.2f} fps (CPU {1e3 * v['cpu_s']:.0f} ms)" for k, v in video.items())
        + f"; load {res['load_average']:.1f}")
    write_json(args.out, res)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
