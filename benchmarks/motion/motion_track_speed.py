"""CPU time of the point tracker against another revision of it, and whether the tracks agree.

Usage::

    python benchmarks/motion/motion_track_speed.py [--data DIR] [--baseline REV] [--repeats N]
        [--modes full partial] [--videos NAME ...] [--min-ncc R]

Each video of ``hopkins155_videos/`` is tracked by :func:`cvfs.motion.tracking.track_points`
(default settings, the appearance check on) of this tree and of ``cvfs/motion/tracking.py`` at the
git revision ``--baseline`` (default ``main``, loaded from ``git show`` as a separate module in the
same process), in full and in partial mode. The two run alternately (baseline first on even
repeats, this tree first on odd ones), ``--repeats`` times each; the table gives the median CPU
seconds (``time.process_time``) of each, their ratio, and whether the tracks (points, and
visible in partial mode) are equal bit for bit in every repeat.

Writes ``benchmarks/results/motion/motion_track_speed.json``.
"""

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, machine_info, result_path, write_json
from cvfs.datasets import data_home
from cvfs.datasets.hopkins155_videos import VIDEO_TRUTH
from cvfs.io.video import read_frames
from cvfs.motion import tracking

MODES = {"full": False, "partial": True}


def load_baseline(rev):
    """``cvfs/motion/tracking.py`` at git revision ``rev``, imported as its own module."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:cvfs/motion/tracking.py"],
                         check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory(prefix="cvfs_tracking_") as tmp:
        path = Path(tmp) / "tracking_baseline.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("cvfs_tracking_baseline", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _bytes(out):
    return b"".join(np.ascontiguousarray(a).tobytes() for a in (out if isinstance(out, tuple)
                                                                else (out,)))


def _timed(module, frames, settings):
    t0 = time.process_time()
    out = module.track_points(frames, settings)
    return time.process_time() - t0, out


def video_rows(frames, name, baseline, repeats, modes, min_ncc):
    rows = []
    for mode in modes:
        settings = tracking.TrackerSettings(partial=MODES[mode], min_ncc=min_ncc)
        old_settings = baseline.TrackerSettings(**settings.as_dict())
        old_s, new_s, equal = [], [], True
        for r in range(repeats):
            runs = [(baseline, old_settings, old_s), (tracking, settings, new_s)]
            outs = {}
            for module, s, times in (runs if r % 2 == 0 else runs[::-1]):
                dt, out = _timed(module, frames, s)
                times.append(dt)
                outs[module.__name__] = out
            old, new = outs[baseline.__name__], outs[tracking.__name__]
            equal &= _bytes(old) == _bytes(new)
        tracks = (new[0] if isinstance(new, tuple) else new).shape[0]
        rows.append({"video": name, "mode": mode, "frames": len(frames), "tracks": tracks,
                     "old_seconds": old_s, "new_seconds": new_s,
                     "old_median": float(np.median(old_s)), "new_median": float(np.median(new_s)),
                     "bitwise_equal": bool(equal)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: $CVFS_DATA)")
    ap.add_argument("--baseline", default="main", help="git revision compared against")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each tracker per case")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--min-ncc", type=float, default=tracking.TrackerSettings().min_ncc,
                    help="appearance check threshold (-1: off)")
    ap.add_argument("--videos", nargs="+", default=list(VIDEO_TRUTH), choices=list(VIDEO_TRUTH))
    args = ap.parse_args(argv)
    limit_threads()
    data = Path(args.data) if args.data else Path(data_home())
    baseline = load_baseline(args.baseline)
    info = machine_info()
    rows = []
    for i, name in enumerate(args.videos):
        frames = read_frames(data / "hopkins155_videos" / f"{name}.avi")
        if i == 0:  # compile or load the numba kernels outside the timings
            tracking.track_points(frames[:3], partial=True)
        rows += video_rows(frames, name, baseline, args.repeats, args.modes, args.min_ncc)
    table = [[r["video"], r["mode"], r["frames"], r["tracks"], f"{r['old_median']:.2f}",
              f"{r['new_median']:.2f}", f"{r['new_median'] / r['old_median']:.2f}",
              "yes" if r["bitwise_equal"] else "NO"] for r in rows]
    old_total = sum(r["old_median"] for r in rows)
    new_total = sum(r["new_median"] for r in rows)
    table += [None, ["all", "", "", "", f"{old_total:.2f}", f"{new_total:.2f}",
                     f"{new_total / old_total:.2f}",
                     "yes" if all(r["bitwise_equal"] for r in rows) else "NO"]]
    print(format_table(["video", "mode", "frames", "tracks", f"{args.baseline} s", "this s",
                        "ratio", "bitwise equal"], table,
                       title=f"CPU seconds, median of {args.repeats} (min_ncc={args.min_ncc:g})"))
    write_json(result_path(__file__),
               {"baseline": args.baseline, "repeats": args.repeats, "machine": info,
                "rows": rows})


if __name__ == "__main__":
    main()
