"""Peak memory of keypoint detection against image size (the ``max_memory`` budget).

Each size runs in its own process: scikit-image's astronaut resized with OpenCV to W x H, the
shipped detectors, ``detect(image, max_scale=..., n_jobs=...)``. The peak resident set size of
that process (``getrusage(RUSAGE_CHILDREN)``, as ``/usr/bin/time -v`` reports it) and its wall
time are printed as a table and written to ``benchmarks/results/keypoints/keypoints_memory.json``.

Usage::

    python benchmarks/keypoints/keypoints_memory.py [--sizes 640x480 2400x1000 4000x3000] [--jobs 1]
"""

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import machine_info, result_path, write_json

_CHILD = """
import sys, cv2
from skimage import data
from cvfs.keypoints import load_detector
w, h, max_scale, jobs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
img = cv2.resize(data.astronaut(), (w, h), interpolation=cv2.INTER_LINEAR)
found = load_detector().detect(img, max_scale=max_scale, n_jobs=jobs)
print(sum(len(v) for v in found.values()))
"""


def _run(w, h, max_scale, jobs):
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(w), str(h), str(max_scale), str(jobs)],
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    # ru_maxrss of the children is the largest peak of any child so far: run sizes ascending
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"width": w, "height": h, "max_scale": max_scale, "n_jobs": jobs,
            "detections": int(out.stdout.split()[-1]), "peak_rss_mb": peak_kb / 1024,
            "wall_s": wall}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["640x480", "2400x1000", "4000x3000"],
                    help="W x H, ascending")
    ap.add_argument("--max-scale", type=float, default=2.0, help="largest pyramid scale")
    ap.add_argument("--jobs", type=int, default=1, help="threads of detect")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    sizes = sorted((tuple(int(v) for v in s.lower().split("x")) for s in args.sizes),
                   key=lambda s: s[0] * s[1])
    rows = []
    machine = machine_info()
    print(f"machine: {machine['cpu']}, {machine['n_cpus']} CPUs; detect n_jobs={args.jobs}, "
          f"max_scale={args.max_scale}")
    print(f"{'image':>11} {'detections':>10} {'peak RSS MB':>12} {'wall s':>8}")
    for w, h in sizes:
        r = _run(w, h, args.max_scale, args.jobs)
        rows.append(r)
        print(f"{w:>5}x{h:<5} {r['detections']:>10} {r['peak_rss_mb']:>12.0f} {r['wall_s']:>8.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, {"machine": machine, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
