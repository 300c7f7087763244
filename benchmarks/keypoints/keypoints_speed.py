r"""Frames per second of the keypoint detector on a 640x480 frame: soft-cascade scan vs full scan.

Rows: ``scan=cascade`` is ``detector.detect(frame)`` (the default: the soft-cascade scan of
:mod:`cvfs.keypoints._scan`); ``scan=full`` is ``detect(frame, cascade=False)``, the code path
without early rejection (every selected feature of every window computed by the feature pool in
chunks, then scored). Both run on the same detector in the same process. The frame is
scikit-image's astronaut resized to 640x480 (one face, IED ~60 px); by default the pyramid goes
up to the detector's ``max_scale`` (2.0 for the shipped models).

Timings: wall clock and CPU time (``time.process_time``, all threads) of the median repeat, frames
per second from both (``fps`` = 1 / wall, ``fps(cpu)`` = 1 / CPU: the rate one core would reach),
with the 1-minute load average before each setting. ``--jobs 1 2`` times ``detect(frame,
n_jobs=...)`` with each number of threads scanning pyramid levels (the detections are the same).
Keep numba and BLAS single-threaded (``NUMBA_NUM_THREADS=1`` etc.; the threads are ours) and quote
the load: the machine is shared. ``--full-repeats 0`` skips the (slow) full scan. ``--faces`` adds a
``detect_faces`` row per max_scale (the scan, then the face model fitted to its detections) and the
CPU time of the face assembly alone: ``faces`` is the top-down scan of video frames
(``top_down=True``: the eyes everywhere, nose and mouth only around eye pairs and unpaired
probable eyes, :mod:`cvfs.keypoints._topdown`) with the keypoint refinement, ``faces-nr`` the same
without refinement (``refine=False``) and ``faces-f`` the full scan (the default for photos),
alternating in each repeat; ``--memory 2400x1000`` runs ``detect_faces`` (its default full scan)
on the astronaut resized to that size in a child process at the
largest max_scale and reports its peak resident set size (``getrusage(RUSAGE_CHILDREN)``, as
``/usr/bin/time -v``). ``--profile`` adds, per max_scale, the CPU time of each stage summed over
the levels (pyramid, integral images, HOG cell maps, the scan kernel, peaks), of the steps of the
top-down scan (with the keypoint refinement), the scan kernel's CPU time per classifier (each
scanned alone over the same levels) and per level. Writes
``benchmarks/results/keypoints/keypoints_speed.json``.

Example::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
        python benchmarks/keypoints/keypoints_speed.py --repeats 5 --max-scales 1 2 --jobs 1 2 \
        --full-repeats 0 --profile
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from skimage import data

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.keypoints import load_detector, load_face_model
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints.faces import assemble_faces
from cvfs.keypoints.peaks import grid_peaks
from cvfs.vision import HALF, LevelCache, gaussian_pyramid, window_centres


def _time(fn, repeats):
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    i = int(np.argsort(wall)[len(wall) // 2])
    return wall[i], cpu[i]


def _per_classifier(det, frame, max_scale, repeats=3):
    """Scan-kernel CPU seconds of each classifier scanned alone over the levels of one frame
    (integral images and HOG maps built beforehand; the fastest of ``repeats``)."""
    levels = gaussian_pyramid(frame, max_scale=max_scale, min_size=det.pool.window)
    caches = [LevelCache(lv) for lv in levels]
    for c in caches:
        _ = c.integral, c.hog
    tls = [window_centres(c.shape) - HALF for c in caches]
    out = {}
    for name, model in det.classifiers.items():
        plan = ScanPlan(det.pool, [model])
        best = np.inf
        for _ in range(repeats):
            t = time.process_time()
            for c, tl in zip(caches, tls, strict=True):
                plan.scores(c, tl)
            best = min(best, time.process_time() - t)
        out[name] = best
    return out


def _profile(det, frame, max_scale):
    """CPU seconds per stage (summed over levels) and per level of one detection."""
    clock = time.process_time
    t = clock()
    levels = gaussian_pyramid(frame, max_scale=max_scale, min_size=det.pool.window)
    stages = {"pyramid": clock() - t, "integral": 0.0, "hog_maps": 0.0, "scan": 0.0,
              "peaks": 0.0}
    plan = ScanPlan(det.pool, list(det.classifiers.values()))
    per_level = []
    for lv in levels:
        cache = LevelCache(lv)
        t0 = clock()
        _ = cache.integral
        t1 = clock()
        _ = cache.hog
        t2 = clock()
        tl = window_centres(cache.shape) - HALF
        scores = plan.scores(cache, tl)
        t3 = clock()
        grid = (cache.shape[0] - 2 * HALF + 1, cache.shape[1] - 2 * HALF + 1)
        for k, s in zip(det.keypoints, scores, strict=True):
            grid_peaks(s.reshape(grid), det.thresholds[k])
        t4 = clock()
        for key, dt in zip(("integral", "hog_maps", "scan", "peaks"),
                           (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            stages[key] += dt
        per_level.append({"index": lv.index, "shape": list(cache.shape), "windows": len(tl),
                          "hog_maps_s": t2 - t1, "scan_s": t3 - t2,
                          "survivors": np.isfinite(scores).sum(axis=1).tolist()})
    return stages, per_level


def _profile_top_down(det, frame, max_scale):
    """CPU seconds of the steps of ``detect_faces``' top-down scan: the eye scan (keeping the
    level maps), the hypotheses (eye pairs, unpaired eyes), the scan of the other keypoints
    around them, the assembly, the keypoint refinement; and the number of hypotheses."""
    from cvfs.keypoints._topdown import EYES, eye_pairs, single_eye_hypotheses
    from cvfs.keypoints.refine import refine_face_keypoints

    clock, fm = time.process_time, load_face_model()
    others = [k for k in fm.shape.names if k not in EYES]
    kw = dict(threshold=-np.inf, max_scale=max_scale, min_scale=0.0, nms_radius=None,
              refine=True, cascade=True, n_jobs=1, merge_radius=None, pairs=None,
              max_memory=None)
    t0 = clock()
    keep = [] if det._maps_fit(frame, max_scale, others, None) else None
    found, scale = det._detect(frame, names=list(EYES), keep=keep, **kw)
    t1 = clock()
    c, t = eye_pairs(found, scale, fm)
    c1, t1_ = single_eye_hypotheses(found, scale, fm, c, t)
    n_pairs, c, t = len(c), np.concatenate([c, c1]), np.concatenate([t, t1_])
    t2 = clock()
    if len(c):
        more, more_scale = det._detect_in_regions(frame, others, fm, c, t,
                                                  max_scale=max_scale, max_memory=None,
                                                  caches=keep)
    else:  # no eye candidate places a face: the others everywhere, as detect_faces does
        more, more_scale = det._detect(frame, names=others, **kw)
    t3 = clock()
    faces = assemble_faces({**found, **more}, fm, scales={**scale, **more_scale})
    t4 = clock()
    refine_face_keypoints(det, frame, faces, fill_missing=fm.probability)
    t5 = clock()
    return {"eye_scan": t1 - t0, "hypotheses_s": t2 - t1, "regions_scan": t3 - t2,
            "assembly": t4 - t3, "refine": t5 - t4, "eye_pairs": n_pairs,
            "unpaired_eye_hypotheses": len(c1), "maps_kept": keep is not None}


_MEMORY_CHILD = """
import sys, cv2
from skimage import data
from cvfs.keypoints import load_detector
w, h, max_scale = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
img = cv2.resize(data.astronaut(), (w, h), interpolation=cv2.INTER_LINEAR)
print(len(load_detector().detect_faces(img, max_scale=max_scale)))
"""


def _peak_rss(size, max_scale):
    """Faces found and peak RSS (MB) of ``detect_faces`` on a W x H image in a child process."""
    w, h = (int(v) for v in size.lower().split("x"))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, str(w), str(h), str(max_scale)],
                         capture_output=True, text=True, check=True)
    return {"width": w, "height": h, "max_scale": max_scale, "faces": int(out.stdout.split()[-1]),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "wall_s": time.perf_counter() - t0}


def _faces_timed(det, frame, max_scale, repeats):
    """``(scan, wall, cpu, faces)`` of ``detect_faces`` with the top-down scan (``"faces"``),
    the same without the keypoint refinement (``"faces-nr"``, ``refine=False``) and with the
    full scan (``"faces-f"``, ``top_down=False``), the three alternating in each repeat; the
    repeat of median CPU time (the statistic least disturbed by other processes on a shared
    machine)."""
    runs = {"faces": dict(top_down=True), "faces-nr": dict(top_down=True, refine=False),
            "faces-f": dict(top_down=False)}
    times = {scan: [] for scan in runs}
    n_faces = {}
    for _ in range(repeats):
        for scan, kw in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            n_faces[scan] = len(det.detect_faces(frame, max_scale=max_scale, **kw))
            times[scan].append((time.perf_counter() - t0, time.process_time() - c0))
    out = []
    for scan, t in times.items():
        wall, cpu = t[int(np.argsort([c for _, c in t])[len(t) // 2])]
        out.append((scan, wall, cpu, n_faces[scan]))
    return out


def _assembly_seconds(det, frame, max_scale, repeats=5):
    """CPU seconds of the face assembly alone (the detections of one scan, fastest of
    ``repeats``) and the number of faces."""
    found, scales = det._detect(frame, threshold=-np.inf, max_scale=max_scale, min_scale=0.0,
                                nms_radius=None, refine=True, cascade=True, n_jobs=1,
                                merge_radius=None, pairs=None, max_memory=None)
    model, best = load_face_model(), np.inf
    for _ in range(repeats):
        t = time.process_time()
        faces = assemble_faces(found, model, scales=scales)
        best = min(best, time.process_time() - t)
    return best, len(faces)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model file (default: the shipped models)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the cascade scan")
    ap.add_argument("--full-repeats", type=int, default=1, help="repeats of the full scan")
    ap.add_argument("--max-scales", type=float, nargs="+", default=None,
                    help="pyramid max_scale values (default: the detector's)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1],
                    help="detect(n_jobs=...) values timed for the cascade scan")
    ap.add_argument("--faces", action="store_true",
                    help="also time detect_faces (scan + face assembly)")
    ap.add_argument("--memory", default=None, metavar="WxH",
                    help="peak RSS of detect_faces on an image of this size (child process)")
    ap.add_argument("--profile", action="store_true",
                    help="CPU time per stage, per classifier and per level")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)

    det = load_detector(args.model)
    frame = cv2.resize(data.astronaut(), (640, 480), interpolation=cv2.INTER_AREA)
    for cascade in (True, False):
        det.detect(frame[:100, :100], max_scale=1.0, cascade=cascade)  # JIT warm-up
    print(f"keypoints: {det.keypoints}; features per classifier: "
          f"{[m.n_features for m in det.classifiers.values()]}; threads "
          f"NUMBA={os.environ.get('NUMBA_NUM_THREADS', '?')}, cores "
          f"{len(os.sched_getaffinity(0))}")
    print(f"{'max_scale':>9s} {'scan':>7s} {'jobs':>4s} {'windows':>9s} {'load':>5s} "
          f"{'wall s':>7s} {'cpu s':>7s} {'fps':>6s} {'fps(cpu)':>8s} detections")
    rows, profiles = [], []
    for ms in args.max_scales or [det.max_scale]:
        n_win = sum(len(window_centres(lv.shape)) for lv in gaussian_pyramid(frame, max_scale=ms))
        settings = [(True, j, args.repeats) for j in args.jobs] + [(False, 1, args.full_repeats)]
        for cascade, jobs, reps in settings:
            if reps < 1:
                continue
            load = os.getloadavg()[0]
            out = {}
            wall, cpu = _time(lambda c=cascade, m=ms, j=jobs, o=out: o.update(
                det.detect(frame, max_scale=m, cascade=c, n_jobs=j)), reps)
            n_det = sum(len(v) for v in out.values())
            scan = "cascade" if cascade else "full"
            rows.append({"max_scale": ms, "scan": scan, "n_jobs": jobs, "windows": n_win,
                         "load": load, "seconds_per_frame": wall, "cpu_seconds_per_frame": cpu,
                         "fps": 1 / wall, "fps_cpu": 1 / cpu, "detections": n_det})
            print(f"{ms:9.2f} {scan:>7s} {jobs:4d} {n_win:9d} {load:5.1f} {wall:7.2f} "
                  f"{cpu:7.2f} {1 / wall:6.2f} {1 / cpu:8.2f} {n_det}")
        if args.faces:
            load = os.getloadavg()[0]
            asm, _ = _assembly_seconds(det, frame, ms)
            for scan, wall, cpu, n_faces in _faces_timed(det, frame, ms, args.repeats):
                rows.append({"max_scale": ms, "scan": scan, "n_jobs": 1, "windows": n_win,
                             "load": load, "seconds_per_frame": wall,
                             "cpu_seconds_per_frame": cpu, "fps": 1 / wall, "fps_cpu": 1 / cpu,
                             "faces": n_faces, "assembly_cpu_s": asm})
                print(f"{ms:9.2f} {scan:>7s} {1:4d} {n_win:9d} {load:5.1f} {wall:7.2f} "
                      f"{cpu:7.2f} {1 / wall:6.2f} {1 / cpu:8.2f} {n_faces} faces (assembly "
                      f"{1e3 * asm:.1f} ms CPU)")
        if args.profile:
            stages, per_level = _profile(det, frame, ms)
            per_clf = _per_classifier(det, frame, ms)
            profiles.append({"max_scale": ms, "stages_cpu_s": stages,
                             "scan_cpu_s_per_classifier": per_clf, "levels": per_level})
            td = _profile_top_down(det, frame, ms)
            profiles[-1]["top_down_cpu_s"] = td
            print("  profile (CPU s): " + "  ".join(f"{k} {v:.3f}" for k, v in stages.items()))
            print("  detect_faces top-down (CPU s): " + "  ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in td.items()))
            print("  scan alone (CPU s): " + "  ".join(f"{k} {v:.3f}" for k, v in
                                                      per_clf.items()))
            for lv in per_level:
                print(f"    level {lv['index']:3d} {lv['windows']:8d} windows  HOG maps "
                      f"{1e3 * lv['hog_maps_s']:6.1f} ms  scan {1e3 * lv['scan_s']:6.1f} ms  "
                      f"survivors {lv['survivors']}")
    memory = None
    if args.memory:
        memory = _peak_rss(args.memory, max(args.max_scales or [det.max_scale]))
        print(f"detect_faces on {memory['width']}x{memory['height']} (max_scale "
              f"{memory['max_scale']:g}): {memory['faces']} faces, peak RSS "
              f"{memory['peak_rss_mb']:.0f} MB, {memory['wall_s']:.1f} s wall")
    write_json(args.out, {"keypoints": det.keypoints, "rows": rows,
                          "profiles": profiles, "memory": memory})
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
