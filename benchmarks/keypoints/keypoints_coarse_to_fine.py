r"""The margin of the coarse-to-fine scan of the upsampled levels, chosen on training photos.

On HELEN training photos (``faces_68/helen_train``, not an evaluation set), each resized so that
its face's inter-eye distance is drawn uniformly in ``--ied`` pixels (Caltech WebFaces' small
faces; fixed seed), every window of every upsampled pyramid level (scale > 1, up to scale 2) is
scored by the soft cascades of the five face keypoints (the scan of ``detect_faces``); the
peaks of each keypoint's score grid are the reference. For each peak it finds the smallest
margin (on the grid ``--margins``) by which the cascade thresholds must be lowered for a lattice
window (stride ``--stride``) within ``stride - 1`` rows and columns of it to pass the looser
cascade of some keypoint: the coarse-to-fine scan (:mod:`cvfs.keypoints._coarse`) with that
margin finds the peak. Prints, per margin, the share of the reference peaks found (all peaks,
and those scoring > 0) and the windows scored against the full scan's, with the CPU seconds of
the scans.

Example::

    NUMBA_NUM_THREADS=1 python benchmarks/run.py keypoints/keypoints_coarse_to_fine --photos 20
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, limit_threads, result_path, write_json


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos", type=int, default=20, help="HELEN training photos (evenly spaced)")
    ap.add_argument("--ied", type=float, nargs=2, default=[8.0, 20.0])
    ap.add_argument("--stride", type=int, default=2)
    ap.add_argument("--margins", type=float, nargs="+",
                    default=[0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])
    ap.add_argument("--window-margins", type=float, nargs="*", default=[0.5, 1.0, 1.5, 2.0],
                    help="margins whose scan is run to count its windows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()

    import cv2

    from cvfs.datasets.ibug68 import load_faces68
    from cvfs.datasets.landmarks import inter_eye_distance
    from cvfs.io.images import read_image
    from cvfs.keypoints import load_detector
    from cvfs.keypoints._coarse import coarse_to_fine_scores
    from cvfs.keypoints.faces import FACE_KEYPOINTS
    from cvfs.keypoints.peaks import grid_peaks
    from cvfs.vision import HALF, LevelCache, as_float_rgb

    det = load_detector()
    names = [k for k in det.keypoints if k in FACE_KEYPOINTS]
    plan = det._scan_plan(names)
    faces = load_faces68(subsets=("helen_train",))
    faces = [faces[i] for i in np.linspace(0, len(faces) - 1, args.photos).astype(int)]
    rng = np.random.default_rng(args.seed)
    margins = np.sort(np.asarray(args.margins, dtype=float))
    st, reach = args.stride, args.stride - 1
    needed, peak_scores = [], []
    n_full = n_lattice = 0
    windows = dict.fromkeys(args.window_margins, 0)
    cpu = {"full": 0.0, **{m: 0.0 for m in args.window_margins}}
    for face in faces:
        img = read_image(face.path)
        ied = float(inter_eye_distance(face.points[0]))
        ied = ied if np.isfinite(ied) and ied > 0 else 0.25 * max(img.shape[:2])
        f = rng.uniform(*args.ied) / ied
        img = cv2.resize(img, (max(24, round(img.shape[1] * f)), max(24, round(img.shape[0] * f))),
                         interpolation=cv2.INTER_AREA)
        rgb = as_float_rgb(img, min_size=det.pool.window)
        levels, scales, _ = det._pyramid(rgb, 2.0, 0.0)
        for _ in scales:
            level = next(levels)
            if level.index <= 0:
                continue
            cache = LevelCache(level)
            gh, gw = level.shape[0] - 2 * HALF + 1, level.shape[1] - 2 * HALF + 1
            every = np.argwhere(np.ones((gh, gw), bool)).astype(np.int64)
            t0 = time.process_time()
            full = plan.scores(cache, every).reshape(-1, gh, gw)
            cpu["full"] += time.process_time() - t0
            n_full += gh * gw
            n_lattice += len(range(0, gh, st)) * len(range(0, gw, st))
            pk = [grid_peaks(g, -np.inf) for g in full]
            rc = np.concatenate([np.column_stack(p) for p in pk]).reshape(-1, 2)
            peak_scores.append(np.concatenate([g[r, c] for g, (r, c) in zip(full, pk,
                                                                           strict=True)]))
            # lattice windows within reach of each peak, and the margin each one needs
            offs = np.arange(-reach, reach + 1)
            near = []
            for dr in offs:
                for dc in offs:
                    q = rc + (dr, dc)
                    ok = (q[:, 0] % st == 0) & (q[:, 1] % st == 0) & (q >= 0).all(axis=1) & (
                        q[:, 0] < gh) & (q[:, 1] < gw)
                    near.append(np.where(ok, q[:, 0] * gw + q[:, 1], -1))
            near = np.column_stack(near) if rc.size else np.zeros((0, 1), np.int64)
            lat = np.unique(near[near >= 0])
            need = np.full(lat.size, np.inf)
            for m in margins[::-1]:
                tl = np.column_stack([lat // gw, lat % gw]).astype(np.int64)
                ok = np.isfinite(plan.scores(cache, tl, margin=float(m))).any(axis=0)
                need[ok] = m
            per_win = np.full(gh * gw, np.inf)
            per_win[lat] = need
            needed.append(np.where(near >= 0, per_win[np.maximum(near, 0)], np.inf).min(
                axis=1, initial=np.inf))
            for m in args.window_margins:
                t0 = time.process_time()
                windows[m] += coarse_to_fine_scores(plan, cache, gh, gw, 0, st, float(m))[2]
                cpu[m] += time.process_time() - t0
            cache.clear()
    needed, peak_scores = np.concatenate(needed), np.concatenate(peak_scores)
    rows, res = [], {"photos": len(faces), "stride": st, "ied": args.ied, "peaks": int(needed.size),
                     "full_windows": n_full, "lattice_windows": n_lattice,
                     "cpu_full_scan_s": cpu["full"], "margins": {}}
    for m in margins:
        found, found_pos = float((needed <= m).mean()), float(
            (needed[peak_scores > 0] <= m).mean()) if (peak_scores > 0).any() else float("nan")
        w = windows.get(float(m))
        res["margins"][float(m)] = {"peaks_found": found, "positive_peaks_found": found_pos,
                                    "windows": w, "cpu_s": cpu.get(float(m))}
        rows.append([f"{m:g}", f"{found:.4f}", f"{found_pos:.4f}",
                     "" if w is None else f"{w / n_full:.3f}",
                     "" if w is None else f"{cpu[float(m)]:.2f}"])
    print(format_table(["margin", "peaks found", "peaks > 0 found", "windows / full scan",
                        "CPU s"], rows,
                       title=f"{len(faces)} photos, {needed.size} peaks "
                             f"({int((peak_scores > 0).sum())} > 0), full scan {n_full} windows "
                             f"in {cpu['full']:.2f} CPU s, lattice {n_lattice / n_full:.3f}"))
    write_json(args.out, res)


if __name__ == "__main__":
    main()
