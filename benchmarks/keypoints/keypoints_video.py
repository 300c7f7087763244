"""Faces in video: frames per second of a scan of every frame against scans every N frames with
the faces followed between (``cvfs.keypoints.video.VideoFaceDetector``), and how far the
followed faces lie from the scan's.

Clips (640 x 480, rendered from scikit-image's astronaut, so no data is needed): ``pan`` -- the
camera pans 3 px right and 2 px down per frame and zooms in by 1 % per frame (the face grows
from an inter-eye distance of ~46 to ~110 px over 90 frames); ``two`` -- the astronaut beside her
mirror image (two faces), panning 2 px per frame. Per clip: ``detect_faces(frame,
top_down=True, max_scale=1)`` on every frame (the video default of ``cvfs keypoints detect``
before following), then ``VideoFaceDetector`` with each ``--rescan``; CPU seconds of one
thread. Agreement per followed frame: faces found by both (eye midpoints within 0.5 IED), the
largest eye distance between them in the scan's inter-eye distances (median and 95th
percentile), and frames where the face counts differ.

    NUMBA_NUM_THREADS=1 python benchmarks/keypoints/keypoints_video.py [--frames 90]
        [--rescan 5 15 30]
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, limit_threads, result_path, write_json

EYES = ("left_eye_center", "right_eye_center")


def render(name, n):
    """The ``n`` frames of clip ``name`` (uint8, 480 x 640 x 3)."""
    import cv2
    from skimage import data

    img = data.astronaut()
    if name == "pan":
        src = cv2.resize(img, (800, 800), interpolation=cv2.INTER_AREA)

        def warp(i):
            z = 1.01 ** i
            return np.array([[z, 0, -40.0 - 3.0 * i], [0, z, -20.0 - 2.0 * i]])
    elif name == "two":
        half = cv2.resize(img, (420, 420), interpolation=cv2.INTER_AREA)
        src = np.concatenate([half, half[:, ::-1]], axis=1)

        def warp(i):
            return np.array([[1.0, 0, -2.0 * (i % 100)], [0, 1.0, -0.5 * (i % 100)]])
    else:
        raise ValueError(name)
    return [cv2.warpAffine(src, warp(i), (640, 480), flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_REFLECT) for i in range(n)]


def agreement(scan, got):
    """(faces matched, largest eye distance in IED per matched face, count differs)."""
    errs, used = [], set()
    for g in got:
        c = np.mean([g.keypoints[k][:2] for k in EYES], axis=0)
        best, bj = math.inf, None
        for j, s in enumerate(scan):
            d = math.dist(c, np.mean([s.keypoints[k][:2] for k in EYES], axis=0)) / s.ied
            if j not in used and d < min(best, 0.5):
                best, bj = d, j
        if bj is None:
            continue
        used.add(bj)
        s = scan[bj]
        errs.append(max(math.dist(g.keypoints[k][:2], s.keypoints[k][:2]) for k in EYES) / s.ied)
    return len(errs), errs, len(scan) != len(got)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--rescan", type=int, nargs="+", default=[5, 15, 30])
    ap.add_argument("--clips", nargs="+", choices=("pan", "two"), default=["pan", "two"])
    ap.add_argument("--out", type=Path, default=result_path(__file__))
    args = ap.parse_args(argv)
    limit_threads()
    from tqdm import tqdm

    from cvfs.keypoints import load_detector
    from cvfs.keypoints.video import VideoFaceDetector

    det = load_detector()
    scan_kw = dict(top_down=True, max_scale=1.0)
    rows, out = [], {"clips": {}}
    for clip in args.clips:
        frames = render(clip, args.frames)
        det.detect_faces(frames[0], **scan_kw)  # compile and load, untimed
        t = time.process_time()
        scans = [det.detect_faces(f, **scan_kw) for f in tqdm(frames, desc=f"{clip}: scan",
                                                               leave=False)]
        cpu = time.process_time() - t
        res = {"scan_every_frame": {"cpu_s": cpu, "fps": len(frames) / cpu,
                                    "faces": [len(s) for s in scans]}}
        rows.append([clip, "scan every frame", f"{cpu / len(frames) * 1e3:.0f}",
                     f"{len(frames) / cpu:.1f}", f"{np.mean([len(s) for s in scans]):.2f}",
                     "", "", "", ""])
        for n in args.rescan:
            video = VideoFaceDetector(det, rescan=n, **scan_kw)
            t = time.process_time()
            got = [video(f) for f in tqdm(frames, desc=f"{clip}: rescan {n}", leave=False)]
            cpu = time.process_time() - t
            follow = [i for i, s in enumerate(video.scanned) if not s]
            errs, matched, differ = [], 0, 0
            for i in follow:
                m, e, d = agreement(scans[i], got[i])
                matched += m
                errs += e
                differ += d
            n_scan = sum(len(scans[i]) for i in follow)
            res[f"rescan_{n}"] = {
                "cpu_s": cpu, "fps": len(frames) / cpu, "scanned": int(sum(video.scanned)),
                "faces": [len(g) for g in got], "matched": matched, "scan_faces": n_scan,
                "eye_error_ied_median": float(np.median(errs)) if errs else None,
                "eye_error_ied_p95": float(np.percentile(errs, 95)) if errs else None,
                "frames_count_differs": differ}
            rows.append([clip, f"rescan {n} ({sum(video.scanned)} scanned)",
                         f"{cpu / len(frames) * 1e3:.0f}", f"{len(frames) / cpu:.1f}",
                         f"{np.mean([len(g) for g in got]):.2f}", f"{matched} / {n_scan}",
                         f"{np.median(errs):.3f}" if errs else "-",
                         f"{np.percentile(errs, 95):.3f}" if errs else "-", differ])
        out["clips"][clip] = res
        rows.append(None)
    print(format_table(
        ["clip", "faces by", "CPU ms/frame", "fps (CPU)", "faces/frame", "followed = scan",
         "eye error median", "eye error p95", "count differs"], rows[:-1],
        title=f"{args.frames} frames of 640x480, one thread; eye error: largest eye distance "
              "from the scan's face, in its IED (followed frames)"))
    out["settings"] = {"frames": args.frames, "rescan": args.rescan, "clips": args.clips,
                       "scan": scan_kw}
    print(f"written {write_json(args.out, out)}")


if __name__ == "__main__":
    main()
