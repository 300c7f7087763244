"""Peak memory of keypoint detection against image size and path (the ``max_memory`` budget).

Each (path, size) runs in its own process on scikit-image's astronaut resized with OpenCV to
W x H, with the shipped detectors at their defaults (``max_memory`` 640 MiB):

- ``detect``: ``KeypointDetector.detect(image, max_scale=..., n_jobs=...)``;
- ``faces``: ``detect_faces`` (every keypoint everywhere, then the refining rescan);
- ``cli``: ``cvfs keypoints detect <photo.png> --out <folder>`` (faces, drawing, JSON);
- ``video``: ``cvfs keypoints detect <clip.avi> --out <folder>`` on a two-frame MJPG clip
  (faces on each frame with the top-down scan at the video scale, tracking, the drawn video).

The child reports its own peak resident set size (``getrusage(RUSAGE_SELF).ru_maxrss``, what
``/usr/bin/time -f %M`` prints) and CPU seconds; the table and
``benchmarks/results/keypoints/keypoints_memory.json`` hold them.

Usage::

    python benchmarks/keypoints/keypoints_memory.py [--paths detect faces cli video]
        [--sizes 640x480 2400x1000 4000x3000] [--jobs 1]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import machine_info, result_path, write_json

PATHS = ("detect", "faces", "cli", "video")

_CHILD = """
import json, resource, sys, time
from pathlib import Path
import cv2
from skimage import data
path, w, h, max_scale, jobs, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    float(sys.argv[4]), int(sys.argv[5]), Path(sys.argv[6])
img = cv2.resize(data.astronaut(), (w, h), interpolation=cv2.INTER_LINEAR)
if path in ("detect", "faces"):
    from cvfs.keypoints import load_detector
    det = load_detector()
    t0 = time.process_time()
    if path == "detect":
        n = sum(len(v) for v in det.detect(img, max_scale=max_scale, n_jobs=jobs).values())
    else:
        n = len(det.detect_faces(img, max_scale=max_scale, n_jobs=jobs))
else:
    if path == "cli":
        src = tmp / "photo.png"
        cv2.imwrite(str(src), img[:, :, ::-1])
    else:
        src = tmp / "clip.avi"
        vw = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"MJPG"), 10, (w, h))
        for _ in range(2):
            vw.write(img[:, :, ::-1])
        vw.release()
    del img
    from contextlib import redirect_stdout
    from io import StringIO
    from cvfs.cli import main
    t0 = time.process_time()
    buf = StringIO()
    with redirect_stdout(buf):
        rc = main(["keypoints", "detect", str(src), "--out", str(tmp / "out"), "--jobs",
                   str(jobs)])
    assert rc == 0, rc
    n = sum(1 for line in buf.getvalue().splitlines() if line.strip())
cpu = time.process_time() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"n": n, "cpu_s": cpu, "peak_kb": peak}))
"""


def _run(path, w, h, max_scale, jobs):
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _CHILD, path, str(w), str(h), str(max_scale),
                              str(jobs), tmp], capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{path} {w}x{h} failed:\n{out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    warned = "too small" in out.stderr
    return {"path": path, "width": w, "height": h, "max_scale": max_scale, "n_jobs": jobs,
            "found": res["n"], "peak_rss_mb": res["peak_kb"] / 1024, "cpu_s": res["cpu_s"],
            "wall_s": wall, "budget_warning": warned}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", nargs="+", default=["detect"], choices=PATHS,
                    help="detect, detect_faces, the CLI on a photo, the CLI on a video")
    ap.add_argument("--sizes", nargs="+", default=["640x480", "2400x1000", "4000x3000"],
                    help="W x H")
    ap.add_argument("--max-scale", type=float, default=2.0,
                    help="largest pyramid scale of detect and faces (the CLI uses its defaults: "
                    "the detector's for photos, 1 for video)")
    ap.add_argument("--jobs", type=int, default=1, help="threads of detection")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    sizes = sorted((tuple(int(v) for v in s.lower().split("x")) for s in args.sizes),
                   key=lambda s: s[0] * s[1])
    rows = []
    machine = machine_info()
    print(f"machine: {machine['cpu']}, {machine['n_cpus']} CPUs; n_jobs={args.jobs}, "
          f"max_scale={args.max_scale} (detect, faces); max_memory at its default")
    print(f"{'path':>7} {'image':>11} {'found':>6} {'peak RSS MB':>12} {'CPU s':>7} "
          f"{'wall s':>7} {'warning':>8}")
    for path in args.paths:
        for w, h in sizes:
            r = _run(path, w, h, args.max_scale, args.jobs)
            rows.append(r)
            print(f"{path:>7} {w:>5}x{h:<5} {r['found']:>6} {r['peak_rss_mb']:>12.0f} "
                  f"{r['cpu_s']:>7.1f} {r['wall_s']:>7.1f} "
                  f"{'yes' if r['budget_warning'] else '':>8}",
                  flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, {"machine": machine, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
