"""Track points in a video, segment them by motion, write an annotated video, a figure and JSON.

Usage::

    python apps/motion_video.py SOURCE [--motions K|auto] [--out DIR] [--max-frames N]

SOURCE is a video file, a folder of frames, a camera index (``0``) or
``synth:motions=3,frames=30,seed=0`` (a rendered video of rigid motions, no camera needed).

This script is ``cvfs motion segment`` (it calls :func:`cvfs.cli.main`; the work is
:func:`cvfs.cli.commands.motion_segment`): the same options, defaults and outputs. With
``--out DIR`` it writes ``<name>_motion.avi`` (tracks coloured by motion), ``<name>_motion.png``
(all trajectories on the first frame) and ``<name>_motion.json`` (the summary).
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.cli import main as cvfs_main  # noqa: E402

__all__ = ["main"]


def main(argv=None):
    """Run ``cvfs motion segment`` with ``argv`` (default: the command line); returns the exit
    code."""
    return cvfs_main(["motion", "segment", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
