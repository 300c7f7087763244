"""The tracker's appearance check on the five shared Hopkins155 videos: whom it drops.

Usage::

    python benchmarks/motion/motion_track_ncc.py [--data DIR] [--min-ncc R] [--no-warp]
        [--videos NAME ...]

Each video of ``hopkins155_videos/`` is tracked with the default settings but the appearance
check off (``min_ncc=-1``, full trajectories); every track's first-frame patch is then aligned
to each later frame (:class:`cvfs.motion.tracking.PatchTemplates`, as the tracker does) and the
track's lowest NCC over the clip is recorded (``--no-warp``: the patches compared translated
only, ``cv2.getRectSubPix`` at the track's positions). Per truth motion (tracks within 3 px of a
truth track at its first frame) the table gives the median lowest NCC and how many tracks fall
below ``--min-ncc`` (default: the tracker's). On ``people2`` the tracks are also classed by
their largest distance to the background's affine camera model (a 4-D linear subspace of the
2F-vectors fitted to the tracks within 2 px of it, iterated from all tracks): "dragged" start on
the background (they move more than 70 px, as the panning background does, the walker under
70) and end 9 px or more off it, "background" within 2 px.

Writes ``benchmarks/results/motion/motion_track_ncc.json`` (``motion_track_ncc_nowarp.json``).
"""

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
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
from cvfs.motion.tracking import (
    PatchTemplates,
    TrackerSettings,
    _ncc,
    track_points,
)


def _patches(grey, points, size):
    return np.stack([cv2.getRectSubPix(grey, (size, size), (float(x), float(y))).ravel()
                     for x, y in points])


def lowest_ncc(frames, points, size, warp=True):
    """Each track's lowest NCC over the clip against its first-frame patch (``warp``: after the
    tracker's affine alignment; else translated only)."""
    grey = [np.float32(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) if np.ndim(f) == 3 else f)
            for f in frames]
    if warp:
        t = PatchTemplates(grey[0], points[:, 0], size)
    else:
        first = _patches(grey[0], points[:, 0], size)
    low = np.ones(len(points))
    for f in range(1, points.shape[1]):
        ncc = t.align(grey[f], points[:, f]) if warp else _ncc(
            first, _patches(grey[f], points[:, f], size))
        low = np.minimum(low, ncc)
    return low


def affine_distance(points, tol=2.0, rounds=6):
    """Largest distance (px) of each track to the 4-D subspace fitted to the tracks within
    ``tol`` of it (iterated from all tracks)."""
    P, F = points.shape[:2]
    W = points.transpose(0, 2, 1).reshape(P, 2 * F)
    keep = np.ones(P, dtype=bool)
    for _ in range(rounds):
        V = np.linalg.svd(W[keep], full_matrices=False)[2][:4]
        R = (W - W @ V.T @ V).reshape(P, 2, F)
        dist = np.linalg.norm(R, axis=1).max(axis=1)
        keep = dist < max(tol, 3 * np.median(dist))
    return dist


def video_row(data, name, settings, min_ncc, warp=True):
    truth = load_video_truth(name, Path(data) / "hopkins155")
    frames = read_frames(Path(data) / "hopkins155_videos" / f"{name}.avi")
    points = track_points(frames, settings)
    low = lowest_ncc(frames, points, settings.win_size, warp)
    j = match_truth(points, truth)
    label = np.where(j >= 0, truth.labels[np.maximum(j, 0)], -1)
    groups = {f"motion {m}": label == m for m in range(truth.n_motions)}
    groups["unmatched"] = label < 0
    if name == "people2":
        dist = affine_distance(points)
        moved = np.linalg.norm(points[:, -1] - points[:, 0], axis=1)
        groups["dragged"] = (dist >= 9) & (moved >= 70)
        groups["background"] = (dist < 2) & (moved >= 70)
        groups["walker"] = moved < 70
    return {"video": name, "tracks": len(points), "below": int((low < min_ncc).sum()),
            "groups": {g: {"tracks": int(sel.sum()), "below": int((low[sel] < min_ncc).sum()),
                           "median_lowest_ncc": float(np.median(low[sel])) if sel.any()
                           else float("nan")}
                       for g, sel in groups.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: $CVFS_DATA)")
    ap.add_argument("--min-ncc", type=float, default=TrackerSettings().min_ncc,
                    help="threshold counted against (default: the tracker's)")
    ap.add_argument("--no-warp", action="store_true",
                    help="compare the patches translated only (no affine alignment)")
    ap.add_argument("--videos", nargs="+", default=list(VIDEO_TRUTH), choices=list(VIDEO_TRUTH))
    args = ap.parse_args(argv)
    limit_threads()
    data = Path(args.data) if args.data else Path(data_home())
    settings = TrackerSettings(min_ncc=-1)
    rows = [video_row(data, name, settings, args.min_ncc, not args.no_warp)
            for name in tqdm(args.videos, desc="videos")]
    table = [[r["video"], g, v["tracks"], v["below"], f"{v['median_lowest_ncc']:.3f}"]
             for r in rows for g, v in r["groups"].items()]
    print(format_table(["video", "group", "tracks", f"below {args.min_ncc:g}",
                        "median lowest NCC"], table,
                       title=f"{'no warp; ' if args.no_warp else ''}appearance check off "
                       f"while tracking: {settings.as_dict()}"))
    name = "motion_track_ncc_nowarp" if args.no_warp else "motion_track_ncc"
    write_json(result_path(__file__, name),
               {"tracker": settings.as_dict(), "min_ncc": args.min_ncc, "warp": not args.no_warp,
                "rows": rows})


if __name__ == "__main__":
    main()
