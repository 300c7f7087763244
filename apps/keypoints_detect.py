"""Detect and draw face keypoints on an image, a folder, a video file, a camera or a synthetic clip.

Examples::

    python apps/keypoints_detect.py photo.jpg --out out/          # one image
    python apps/keypoints_detect.py photos/ --out out/            # every image of a folder
    python apps/keypoints_detect.py clip.avi --out out/           # -> out/clip_keypoints.avi
    python apps/keypoints_detect.py 0 --max-frames 100 --out out/  # camera 0
    python apps/keypoints_detect.py synthetic --max-frames 5 --out out/   # no camera needed

Detection (``cvfs.keypoints``) is separate from drawing (``cvfs.viz.keypoints``) and from the
capture loop (:func:`open_source`), as in OpenCV's samples; ``--model`` defaults to the shipped
detectors. The app prints per-frame timing and the best detection of each keypoint.

Pyramid: images are scanned up to the detector's ``max_scale`` (2 for the shipped models:
upsampled levels find faces with an inter-eye distance down to ~10 px); video frames up to scale
1 (:data:`VIDEO_MAX_SCALE`: faces with an inter-eye distance of at least ~20 px, about 4 times
fewer windows, see ``benchmarks/keypoints_speed.py``). ``--max-scale`` overrides both.
``--jobs`` threads scan the pyramid levels of a frame (default: every core; same detections).
"""

import argparse
import logging
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from cvfs.datasets.faces import load_image
from cvfs.io import atomic_path
from cvfs.keypoints import load_detector
from cvfs.viz.keypoints import draw_keypoints

__all__ = ["VIDEO_MAX_SCALE", "main", "open_source"]

#: Largest pyramid scale scanned on video frames (no upsampled levels).
VIDEO_MAX_SCALE = 1.0

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}


def _synthetic_frames(n):
    """A moving crop of scikit-image's astronaut (RGB uint8 frames)."""
    from skimage import data

    img = data.astronaut()
    for i in range(n):
        dx = 8 * i
        yield f"synthetic_{i:04d}", np.ascontiguousarray(img[40:360, 60 + dx:380 + dx])


def _video_frames(cap, name, n):
    i = 0
    while n is None or i < n:
        ok, bgr = cap.read()
        if not ok:
            break
        yield f"{name}_{i:04d}", cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        i += 1
    cap.release()


def open_source(source, max_frames=None):
    """Frames of an image, a folder of images, a video file, a camera index or ``"synthetic"``.

    Parameters
    ----------
    source : str
    max_frames : int, optional
        At most this many frames from a video, camera or the synthetic clip.

    Returns
    -------
    kind : {"images", "video"}
    frames : iterator of (name, RGB uint8 ndarray)

    Raises
    ------
    FileNotFoundError
        If a path does not exist or a folder holds no images.
    ValueError
        If a camera or video cannot be opened.
    """
    if source == "synthetic":
        return "video", _synthetic_frames(max_frames or 10)
    if source.isdigit():
        cap = cv2.VideoCapture(int(source))
        if not cap.isOpened():
            raise ValueError(f"cannot open camera {source}")
        return "video", _video_frames(cap, f"camera{source}", max_frames)
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"source not found: {path}")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise FileNotFoundError(f"no images ({sorted(IMAGE_SUFFIXES)}) in {path}")
        return "images", ((p.stem, load_image(p)) for p in files)
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return "images", iter([(path.stem, load_image(path))])
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"cannot open video file {path}")
    return "video", _video_frames(cap, path.stem, max_frames)


def main(argv=None):
    """Run the app; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="image, folder, video file, camera index or 'synthetic'")
    ap.add_argument("--model", default=None, help="model file (default: shipped detectors)")
    ap.add_argument("--out", default="cvfs-out/keypoints", help="output folder")
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--max-scale", type=float, default=None,
                    help="largest pyramid scale (default: the detector's for images, "
                    f"{VIDEO_MAX_SCALE} for video frames)")
    ap.add_argument("--top", type=int, default=1, help="detections drawn per keypoint")
    ap.add_argument("--jobs", type=int, default=-1,
                    help="threads scanning pyramid levels (-1: every core)")
    ap.add_argument("--max-frames", type=int, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        det = load_detector(args.model)
        kind, frames = open_source(args.source, args.max_frames)
        max_scale = args.max_scale
        if max_scale is None and kind == "video":
            max_scale = VIDEO_MAX_SCALE
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        writer, video_path, times = None, None, []
        for name, rgb in frames:
            t0 = time.perf_counter()
            found = det.detect(rgb, threshold=args.threshold, max_scale=max_scale,
                               n_jobs=args.jobs)
            times.append(time.perf_counter() - t0)
            drawn = draw_keypoints(rgb, {k: v[: args.top] for k, v in found.items()})
            best = ", ".join(f"{k} ({v[0, 0]:.0f}, {v[0, 1]:.0f})" for k, v in found.items()
                             if len(v))
            print(f"{name}: {times[-1] * 1e3:.0f} ms  {best or 'no detections'}")
            bgr = cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR)
            if kind == "images":
                with atomic_path(out / f"{name}_keypoints.png") as tmp:
                    cv2.imwrite(str(tmp), bgr)
            else:
                if writer is None:
                    stem = name.rsplit("_", 1)[0]
                    video_path = out / f"{stem}_keypoints.avi"
                    writer = cv2.VideoWriter(str(video_path), cv2.VideoWriter_fourcc(*"MJPG"),
                                             10.0, (bgr.shape[1], bgr.shape[0]))
                writer.write(bgr)
        if writer is not None:
            writer.release()
            print(f"video written to {video_path}")
        if times:
            print(f"{len(times)} frame(s), mean {np.mean(times) * 1e3:.0f} ms "
                  f"({1 / np.mean(times):.2f} frames/s)")
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"keypoints_detect: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
