"""Train the shipped keypoint detectors (``cvfs/models/keypoints_*.h5``).

The shipped models were trained with (see ``cvfs/models/README.md`` for hashes and timings)::

    python data_prep/train_keypoints.py --out keypoints_eyes.h5 \\
        --keypoints left_eye_center right_eye_center ... [options of `cvfs keypoints train`]

This script is ``cvfs keypoints train`` with the same arguments; ``main(argv=None)`` so tests can
call it directly.
"""

import sys

from cvfs.cli import main as cvfs_main

__all__ = ["main"]


def main(argv=None):
    """Run ``cvfs keypoints train`` with ``argv`` (default: the command line). Returns the exit
    code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return cvfs_main(["keypoints", "train", *argv])


if __name__ == "__main__":
    raise SystemExit(main())
