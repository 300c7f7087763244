"""Frames per second of a keypoint detector on 640x480 frames, with and without the soft cascade.

Prints a table (one row per setting: pyramid up to ``max_scale``, cascade on/off) and writes
``benchmarks/results/keypoints_speed.json``. The frame is scikit-image's astronaut resized to
640x480 (one face, IED ~60 px). Timings are wall-clock on whatever else runs on the machine:
state the load when quoting them.

Example::

    python benchmarks/keypoints_speed.py --model models/keypoints_fsa_lorenz.h5 --repeats 3
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-scales", type=float, nargs="+", default=[1.0, 2.0])
    ap.add_argument("--out", default="benchmarks/results/keypoints_speed.json")
    args = ap.parse_args(argv)

    det = load_detector(args.model)
    frame = cv2.resize(data.astronaut(), (640, 480), interpolation=cv2.INTER_AREA)
    det.detect(frame[:100, :100], max_scale=1.0)  # JIT warm-up
    rows = []
    print(f"keypoints: {det.keypoints}; features per classifier: "
          f"{[m.n_features for m in det.classifiers.values()]}; load {os.getloadavg()[0]:.1f}")
    print(f"{'max_scale':>9s} {'cascade':>7s} {'windows':>9s} {'s/frame':>8s} {'fps':>6s}")
    for ms in args.max_scales:
        n_win = sum(len(window_centres(lv.shape)) for lv in gaussian_pyramid(frame, max_scale=ms))
        for cascade in (True, False):
            ts = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                det.detect(frame, max_scale=ms, cascade=cascade)
                ts.append(time.perf_counter() - t0)
            t = float(np.median(ts))
            rows.append({"max_scale": ms, "cascade": cascade, "windows": n_win,
                         "seconds_per_frame": t, "fps": 1 / t, "load": os.getloadavg()[0]})
            print(f"{ms:9.2f} {str(cascade):>7s} {n_win:9d} {t:8.2f} {1 / t:6.2f}")
    atomic_write_text(args.out, json.dumps({"keypoints": det.keypoints, "rows": rows}, indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
