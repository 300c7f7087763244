"""Detect and draw faces and their keypoints on an image, a folder, a video, a camera or a clip.

Examples::

    python apps/keypoints_detect.py photo.jpg --out out/          # photo_faces.png + .json
    python apps/keypoints_detect.py photos/ --out out/ --format csv   # one faces.csv
    python apps/keypoints_detect.py clip.avi --out out/           # clip_faces.avi + .json
    python apps/keypoints_detect.py photo.jpg --what keypoints --top 3 --out out/
    python apps/keypoints_detect.py 0 --max-frames 100 --out out/  # camera 0
    python apps/keypoints_detect.py synth:scene=face --max-frames 5 --out out/   # no camera

This script is ``cvfs keypoints detect`` (it calls :func:`cvfs.cli.main`; the work is
:func:`cvfs.cli.commands.keypoints_detect`): the same options, defaults and outputs. Run it with
``--help`` for the options. With the shipped models it finds faces
(:meth:`cvfs.keypoints.KeypointDetector.detect_faces`; tracked across the frames of a video):
stdout holds one tab-separated line per face keypoint (frame, face or track id, face score,
keypoint, x, y, probability). With ``--what keypoints``, or a model without the face model's
keypoints, one line per detection (frame, keypoint, x, y, score). stderr has the per-frame
timing and the frame rate.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.cli import main as cvfs_main  # noqa: E402
from cvfs.cli.commands import VIDEO_MAX_SCALE  # noqa: E402

__all__ = ["VIDEO_MAX_SCALE", "main"]


def main(argv=None):
    """Run ``cvfs keypoints detect`` with ``argv`` (default: the command line); returns the exit
    code."""
    return cvfs_main(["keypoints", "detect", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
