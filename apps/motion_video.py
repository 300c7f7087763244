"""Track points in a video, segment them by motion, write an annotated video and a PNG.

Usage::

    python apps/motion_video.py SOURCE [--motions K|auto] [--out DIR] [--max-frames N]

SOURCE is a video file, a camera index (``0``) or ``synth:motions=3,frames=30,seed=0`` (a rendered
video of rigid motions, no camera needed). Points are detected on the first frame and tracked with
pyramidal Lucas-Kanade; a trajectory lost in any frame (tracker failure, forward-backward error
> 1 px, or leaving the image) is dropped, so only complete trajectories are segmented (see
:mod:`cvfs.motion.tracking`). Outputs in DIR: ``<name>_motion.avi`` (tracks coloured by motion),
``<name>_motion.png`` (all trajectories on the first frame) and ``<name>_motion.json``.
"""

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.io import atomic_path, atomic_write_text  # noqa: E402
from cvfs.io.video import read_frames, write_video  # noqa: E402
from cvfs.motion import segment_tracks  # noqa: E402
from cvfs.motion.tracking import track_points  # noqa: E402
from cvfs.viz.motion import draw_tracks, plot_trajectories  # noqa: E402

log = logging.getLogger("motion_video")


def _name(source):
    s = str(source)
    if s.startswith("synth"):
        return "synth"
    if s.isdigit():
        return f"camera{s}"
    return Path(s).stem


def run(source, out, *, n_motions=None, max_frames=None, max_points=500, model=None, fps=10.0):
    """Track, segment and render one source; returns a summary dict (also written as JSON)."""
    import matplotlib.pyplot as plt

    out = Path(out)
    name = _name(source)
    t0 = time.perf_counter()
    frames = read_frames(source, max_frames=max_frames)
    points = track_points(frames, max_points=max_points)
    t1 = time.perf_counter()
    labels, k = segment_tracks(points, n_motions, model=model)
    t2 = time.perf_counter()
    annotated = [draw_tracks(f, points, labels, i) for i, f in enumerate(frames)]
    video_path = write_video(out / f"{name}_motion.avi", annotated, fps=fps)
    ax = plot_trajectories(points, labels, image=frames[0],
                           title=f"{name}: {points.shape[0]} tracks, K={k}")
    png_path = out / f"{name}_motion.png"
    with atomic_path(png_path, suffix=".png") as tmp:
        ax.figure.savefig(tmp, dpi=100)
    plt.close(ax.figure)
    summary = {"source": str(source), "frames": len(frames), "tracks": int(points.shape[0]),
               "n_motions": int(k), "points_per_motion": np.bincount(labels, minlength=k).tolist(),
               "track_seconds": t1 - t0, "segment_seconds": t2 - t1,
               "video": str(video_path), "figure": str(png_path)}
    atomic_write_text(out / f"{name}_motion.json", json.dumps(summary, indent=1))
    return summary


def main(argv=None):
    """Command line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="video file, camera index, or synth:motions=3,frames=30")
    parser.add_argument("--motions", default="auto", help="K, or 'auto' (ranker picks K in 2..4)")
    parser.add_argument("--out", default="out/motion_video", help="output folder")
    parser.add_argument("--max-frames", type=int, default=None)
    parser.add_argument("--max-points", type=int, default=500)
    parser.add_argument("--model", default=None, help="ranker file (default: models/)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.motions != "auto" and not args.motions.isdigit():
        parser.error(f"--motions must be an int or 'auto'; got {args.motions!r}")
    k = None if args.motions == "auto" else int(args.motions)
    try:
        s = run(args.source, args.out, n_motions=k, max_frames=args.max_frames,
                max_points=args.max_points, model=args.model)
    except (FileNotFoundError, ValueError) as exc:
        print(f"motion_video: error: {exc}", file=sys.stderr)
        return 2
    print(f"{s['source']}: {s['frames']} frames, {s['tracks']} tracks, K={s['n_motions']}, "
          f"points per motion {s['points_per_motion']}; track {s['track_seconds']:.2f} s, "
          f"segment {s['segment_seconds']:.2f} s")
    print(f"written {s['video']}, {s['figure']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
