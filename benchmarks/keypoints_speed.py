"""Frames per second of the keypoint detector on a 640x480 frame: soft-cascade scan vs full scan.

Rows: ``scan=cascade`` is ``detector.detect(frame)`` (the default: the soft-cascade scan of
:mod:`cvfs.keypoints._scan`); ``scan=full`` is ``detect(frame, cascade=False)``, the code path
without early rejection (every selected feature of every window computed by the feature pool in
chunks, then scored). Both run on the same detector in the same process. The frame is
scikit-image's astronaut resized to 640x480 (one face, IED ~60 px); by default the pyramid goes
up to the detector's ``max_scale`` (2.0 for the shipped models).

Timings: wall clock and CPU time (``time.process_time``) of the median repeat, with the 1-minute
load average before each setting. Run single-threaded (``NUMBA_NUM_THREADS=1`` etc.) and quote
the load. Writes ``benchmarks/results/keypoints_speed.json``.

Example::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/keypoints_speed.py --repeats 5
"""

import argparse
import json
import os
import time

import cv2
import numpy as np
from skimage import data

from cvfs.io import atomic_write_text
from cvfs.keypoints import load_detector
from cvfs.vision import gaussian_pyramid, window_centres


def _time(fn, repeats):
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    i = int(np.argsort(wall)[len(wall) // 2])
    return wall[i], cpu[i]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model file (default: the shipped models)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the cascade scan")
    ap.add_argument("--full-repeats", type=int, default=1, help="repeats of the full scan")
    ap.add_argument("--max-scales", type=float, nargs="+", default=None,
                    help="pyramid max_scale values (default: the detector's)")
    ap.add_argument("--out", default="benchmarks/results/keypoints_speed.json")
    args = ap.parse_args(argv)

    det = load_detector(args.model)
    frame = cv2.resize(data.astronaut(), (640, 480), interpolation=cv2.INTER_AREA)
    for cascade in (True, False):
        det.detect(frame[:100, :100], max_scale=1.0, cascade=cascade)  # JIT warm-up
    print(f"keypoints: {det.keypoints}; features per classifier: "
          f"{[m.n_features for m in det.classifiers.values()]}; threads "
          f"NUMBA={os.environ.get('NUMBA_NUM_THREADS', '?')}")
    print(f"{'max_scale':>9s} {'scan':>7s} {'windows':>9s} {'load':>5s} {'wall s':>7s} "
          f"{'cpu s':>7s} {'fps':>6s} {'fps(cpu)':>8s} detections")
    rows = []
    for ms in args.max_scales or [det.max_scale]:
        n_win = sum(len(window_centres(lv.shape)) for lv in gaussian_pyramid(frame, max_scale=ms))
        for cascade, reps in ((True, args.repeats), (False, args.full_repeats)):
            load = os.getloadavg()[0]
            out = {}
            wall, cpu = _time(lambda c=cascade, m=ms, o=out: o.update(
                det.detect(frame, max_scale=m, cascade=c)), reps)
            n_det = sum(len(v) for v in out.values())
            scan = "cascade" if cascade else "full"
            rows.append({"max_scale": ms, "scan": scan, "windows": n_win, "load": load,
                         "seconds_per_frame": wall, "cpu_seconds_per_frame": cpu,
                         "fps": 1 / wall, "fps_cpu": 1 / cpu, "detections": n_det})
            print(f"{ms:9.2f} {scan:>7s} {n_win:9d} {load:5.1f} {wall:7.2f} {cpu:7.2f} "
                  f"{1 / wall:6.2f} {1 / cpu:8.2f} {n_det}")
    atomic_write_text(args.out, json.dumps({"keypoints": det.keypoints, "rows": rows}, indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
