"""Ground truth of the Hopkins155 videos in ``hopkins155_videos/``, in the videos' own frames.

The truth files (``hopkins155/<name>/<name>_truth.mat``) do not always use the video's pixel
grid and frame numbering:

* ``cars1`` and ``people2``: ``y`` is measured from the bottom row, ``row = (H - 1) - y``;
* ``1RT2RCR`` and ``2T3RCR``: the truth's first frame is the video's frame 1 (the truth has one
  frame fewer than the video);
* ``three-cars``: the truth's first frame is near the video's frame 0 (median 2 px from the
  nearest corner of the 320 x 240 video), but the truth's later frames are further apart in time
  than the video's (its tracks move about four times as far over 15 frames), so only the first
  frame is comparable. Its truth tracks only the three moving objects; the video's camera is
  still, and tracks on the static background (table, chairs, the person's body) are a fourth
  motion, so the video holds K = 4 motions (``VideoTruth.video_motions``).

Checked by tracking the truth's first-frame points through the video with Lucas-Kanade: the
truth tracks are reproduced within 0.2 px (cars1, people2) and 0.7 px (1RT2RCR, 2T3RCR) at
their last frame, and the truth's first-frame points sit on the video's corners with no offset.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cvfs.datasets.hopkins155 import hopkins155_home, load_sequence

__all__ = ["VIDEO_TRUTH", "VideoTruth", "load_video_truth", "match_truth"]

# name -> (video frame of the truth's first frame, y measured from the bottom row,
#          number of truth frames that line up with consecutive video frames,
#          motions the truth leaves out: a static background it does not track)
VIDEO_TRUTH = {
    "cars1": (0, True, None, 0),
    "people2": (0, True, None, 0),
    "1RT2RCR": (1, False, None, 0),
    "2T3RCR": (1, False, None, 0),
    "three-cars": (0, False, 1, 1),
}


@dataclass
class VideoTruth:
    """Truth tracks of one video in its pixel grid.

    Attributes
    ----------
    name : str
    pixels : ndarray of shape (P, F_t, 2)
        Truth positions (x = column, y = row of the video), for video frames
        ``first_frame .. first_frame + F_t - 1``.
    labels : ndarray of shape (P,), int64
        Motion of each truth track, 0..K-1.
    n_motions : int
        Motions of the truth tracks.
    first_frame : int
        Video frame of ``pixels[:, 0]``.
    video_motions : int
        Motions in the video: ``n_motions`` plus a static background the truth does not track
        (three-cars).
    """

    name: str
    pixels: np.ndarray
    labels: np.ndarray
    n_motions: int
    first_frame: int
    video_motions: int = 0

    def __post_init__(self):
        if not self.video_motions:
            self.video_motions = self.n_motions


def load_video_truth(name, root=None):
    """The truth tracks of one of the five shared videos, in the video's pixel grid.

    Parameters
    ----------
    name : str
        One of ``VIDEO_TRUTH``.
    root : str or Path, optional
        Hopkins155 folder (default: in the data home).

    Returns
    -------
    truth : VideoTruth

    Raises
    ------
    ValueError
        If ``name`` is not one of the shared videos.
    FileNotFoundError
        If the truth file is missing.
    """
    if name not in VIDEO_TRUTH:
        raise ValueError(f"name must be one of {sorted(VIDEO_TRUTH)}; got {name!r}")
    first, from_bottom, n_frames, untracked = VIDEO_TRUTH[name]
    seq = load_sequence(Path(hopkins155_home(root)) / name)
    pixels = seq.pixels.copy()
    if from_bottom:
        pixels[..., 1] = (seq.height - 1) - pixels[..., 1]
    if n_frames is not None:
        pixels = pixels[:, :n_frames]
    return VideoTruth(name=name, pixels=pixels, labels=seq.labels, n_motions=seq.n_motions,
                      first_frame=first, video_motions=seq.n_motions + untracked)


def match_truth(points, truth, *, visible=None, tol=3.0):
    """Index of the nearest truth track of each output track, at the truth's first frame.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Output tracks in video frames 0..F-1 (NaN where not observed).
    truth : VideoTruth
    visible : ndarray of shape (P, F), bool, optional
        Default: where ``points`` is finite.
    tol : float, default 3.0
        Largest distance (pixels) to the nearest truth track.

    Returns
    -------
    index : ndarray of shape (P,), int64
        Index into ``truth.labels`` of the nearest truth track, -1 when the track is not visible
        at the truth's first frame or no truth track is within ``tol``.
    """
    points = np.asarray(points, dtype=np.float64)
    f = truth.first_frame
    vis = np.isfinite(points[..., 0]) if visible is None else np.asarray(visible, bool)
    out = np.full(points.shape[0], -1, dtype=np.int64)
    idx = np.flatnonzero(vis[:, f]) if points.shape[1] > f else np.array([], dtype=np.int64)
    if idx.size == 0:
        return out
    from scipy.spatial import cKDTree

    d, j = cKDTree(truth.pixels[:, 0]).query(points[idx, f], k=1)
    ok = d <= tol
    out[idx[ok]] = j[ok]
    return out
