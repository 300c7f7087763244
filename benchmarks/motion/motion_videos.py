"""Per-track error of ``cvfs motion segment`` on the five shared Hopkins155 videos.

Usage::

    python benchmarks/motion/motion_videos.py [--data DIR] [--partial] [--videos NAME ...]
        [--cell PX] [--per-cell N] [--max-points N] [--fb-threshold PX] [--min-ncc R]
        [--moving-density N] [--camera affine|perspective|auto] [--out NAME]

Each video of ``hopkins155_videos/`` goes through :func:`cvfs.motion.video.segment_video` (the
implementation of ``cvfs motion segment``) with the default tracker settings (``--partial``:
partial tracks with re-detection), twice: K chosen and K given (the motions in the video: the
truth's K, plus the static background that three-cars' truth does not track; with the truth's K
as well where the two differ). Each output track
visible at the truth's first frame takes the label of the nearest truth track within 3 px there
(:func:`cvfs.datasets.hopkins155_videos.match_truth`; the truth converted to the video's pixel
grid and frames by :func:`~cvfs.datasets.hopkins155_videos.load_video_truth`); the error is the
misclassified fraction of the matched tracks after the best label permutation.

Writes ``benchmarks/results/motion/motion_videos.json`` (``motion_videos_partial.json`` with
``--partial``).
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from matplotlib.path import Path as MplPath
from scipy.spatial import ConvexHull
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.datasets import data_home
from cvfs.datasets.hopkins155_videos import (
    VIDEO_TRUTH,
    load_video_truth,
    match_truth,
)
from cvfs.io.video import read_frames
from cvfs.motion.evaluate import misclassification
from cvfs.motion.tracking import TrackerSettings
from cvfs.motion.video import segment_tracked, segment_video

HEADERS = ["video", "tracks", "matched", "matched per motion", "truth points hit", "K truth",
           "K video", "K chosen", "error K chosen %", "error K video %", "error K truth %",
           "in hull per motion", "s K chosen", "s K video"]


def tracks_in_hull(points, truth, label):
    """Tracks inside the convex hull (widened by 3 px) of the truth points of motion ``label``
    at the truth's first, middle and last frames: tracks on that object, counted without the
    3 px match to one of its (sparse) truth points."""
    obj = truth.pixels[truth.labels == label]
    F = min(points.shape[1], obj.shape[1])
    inside = np.ones(len(points), dtype=bool)
    for f in (0, F // 2, F - 1):
        hull = obj[:, f][ConvexHull(obj[:, f]).vertices]
        inside &= MplPath(hull).contains_points(np.nan_to_num(points[:, f], nan=-1e9),
                                                radius=3.0)
    return int(inside.sum())


def video_row(data, name, tracker, camera="affine"):
    truth = load_video_truth(name, Path(data) / "hopkins155")
    frames = read_frames(Path(data) / "hopkins155_videos" / f"{name}.avi")
    row = {"video": name, "k_truth": truth.n_motions, "k_video": truth.video_motions}
    tracked = segment_video(frames, truth.video_motions, tracker=tracker, camera=camera)
    runs = [("chosen", None), ("given", truth.video_motions)]
    if truth.n_motions != truth.video_motions:
        runs.append(("truth", truth.n_motions))
    for key, k in runs:
        # the tracks once; the segmentation with K chosen and with K given
        res = tracked if k == truth.video_motions else segment_tracked(
            tracked.points, tracked.visible, k, tracker=tracker,
            track_seconds=tracked.track_seconds, camera=camera)
        j = match_truth(res.points, truth, visible=res.visible)
        ok = j >= 0
        true = truth.labels[j[ok]]
        row.update({
            "tracks": int(res.points.shape[0]), "matched": int(ok.sum()),
            "matched_per_motion": np.bincount(true, minlength=truth.n_motions).tolist(),
            "truth_points_hit": [len(set(j[ok][true == m].tolist()))
                                 for m in range(truth.n_motions)],
            f"k_{key}": res.n_motions,
            f"error_{key}": 100 * float(misclassification(res.labels[ok], true))
            if ok.any() else float("nan"),
            f"seconds_{key}": res.track_seconds + res.segment_seconds,
            **({"k_residuals": res.k_residuals} if res.k_chosen else {}),
            "visible_fraction": float(res.visible.mean()),
            "in_hull_per_motion": [tracks_in_hull(res.points, truth, m)
                                   for m in range(truth.n_motions)]})
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: $CVFS_DATA)")
    ap.add_argument("--partial", action="store_true", help="partial tracks with re-detection")
    ap.add_argument("--cell", type=int, default=None, help="tracker cell size (px)")
    ap.add_argument("--per-cell", type=int, default=None, help="tracker corners per cell")
    ap.add_argument("--max-points", type=int, default=None, help="tracker track limit")
    ap.add_argument("--fb-threshold", type=float, default=None,
                    help="tracker forward-backward threshold (px)")
    ap.add_argument("--min-ncc", type=float, default=None,
                    help="tracker appearance check: least correlation with the first patch "
                    "(-1: off)")
    ap.add_argument("--moving-density", type=int, default=None,
                    help="tracker extra density on independently moving regions (1: off)")
    ap.add_argument("--out", default=None, help="JSON name (default by --partial)")
    ap.add_argument("--videos", nargs="+", default=list(VIDEO_TRUTH), choices=list(VIDEO_TRUTH))
    ap.add_argument("--camera", default="affine", choices=("affine", "perspective", "auto"),
                    help="segment's camera (default affine)")
    args = ap.parse_args(argv)
    limit_threads()
    data = Path(args.data) if args.data else Path(data_home())
    given = {"cell": args.cell, "per_cell": args.per_cell, "fb_threshold": args.fb_threshold,
             "max_points": args.max_points, "moving_density": args.moving_density,
             "min_ncc": args.min_ncc}
    tracker = TrackerSettings(partial=args.partial,
                              **{k: v for k, v in given.items() if v is not None})
    rows = [video_row(data, name, tracker, args.camera)
            for name in tqdm(args.videos, desc="videos")]
    table = [[r["video"], r["tracks"], r["matched"], "/".join(map(str, r["matched_per_motion"])),
              "/".join(map(str, r["truth_points_hit"])), r["k_truth"], r["k_video"],
              r["k_chosen"], f"{r['error_chosen']:.2f}", f"{r['error_given']:.2f}",
              f"{r['error_truth']:.2f}" if "error_truth" in r else "=",
              "/".join(map(str, r["in_hull_per_motion"])), f"{r['seconds_chosen']:.0f}",
              f"{r['seconds_given']:.0f}"]
             for r in rows]
    title = f"camera={args.camera}; tracker: {tracker.as_dict()}"
    print(format_table(HEADERS, table, title=title))
    name = args.out or ("motion_videos_partial" if args.partial else "motion_videos")
    write_json(result_path(__file__, name),
               {"camera": args.camera, "tracker": tracker.as_dict(), "rows": rows})


if __name__ == "__main__":
    main()
