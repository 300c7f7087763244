"""Face tracks across video frames: association by box overlap, smoothed keypoints.

:class:`FaceTracker` takes the faces of each frame (:meth:`KeypointDetector.detect_faces`) and
assigns them to tracks by maximum total box IoU (:func:`scipy.optimize.linear_sum_assignment`,
pairs below ``min_iou`` left unmatched). A matched face's box and keypoints are smoothed by an
exponential moving average with its track (a keypoint missing in the frame keeps the track's
position for ``max_missed`` frames); an unmatched face starts a track; a track unseen for more
than ``max_missed`` frames ends.
"""

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["FaceTracker", "TrackedFace", "box_iou"]


def box_iou(a, b):
    """IoU of boxes.

    Parameters
    ----------
    a : ndarray of shape (n, 4)
    b : ndarray of shape (m, 4)
        ``x0, y0, x1, y1``.

    Returns
    -------
    iou : ndarray of shape (n, m)
    """
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0],
                                                                      b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1],
                                                                      b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


@dataclass
class TrackedFace:
    """A face of one frame on a track.

    Attributes
    ----------
    track_id : int
        From 1, unique over the tracker's life.
    face : cvfs.keypoints.faces.Face
        The smoothed face (box and keypoints); its score is the frame's.
    age : int
        Frames the track has been matched in, this one included.
    """

    track_id: int
    face: object
    age: int


class FaceTracker:
    """Associate faces across frames and smooth their keypoints.

    Parameters
    ----------
    min_iou : float, default=0.3
        A face continues a track only if their boxes overlap at least this much.
    smoothing : float, default=0.5
        Weight of the track's previous position in the moving average (0: no smoothing).
    max_missed : int, default=5
        Frames a track (or one of its keypoints) may go unseen before it ends.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, min_iou=0.3, smoothing=0.5, max_missed=5):
        if not 0.0 < min_iou <= 1.0:
            raise ValueError(f"min_iou must be in (0, 1]; got {min_iou!r}")
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1); got {smoothing!r}")
        if not (isinstance(max_missed, int) and max_missed >= 0):
            raise ValueError(f"max_missed must be an int >= 0; got {max_missed!r}")
        self.min_iou = float(min_iou)
        self.smoothing = float(smoothing)
        self.max_missed = max_missed
        self._tracks = {}  # id -> dict(face, missed, age, kp_missed)
        self._next = 1

    def update(self, faces):
        """Add one frame's faces; returns them on their tracks (same order as ``faces``).

        Parameters
        ----------
        faces : list of cvfs.keypoints.faces.Face

        Returns
        -------
        tracked : list of TrackedFace
        """
        ids = list(self._tracks)
        prev = np.array([self._tracks[i]["face"].box for i in ids]).reshape(-1, 4)
        cur = np.array([f.box for f in faces]).reshape(-1, 4)
        match = {}
        if len(ids) and len(faces):
            iou = box_iou(cur, prev)
            rows, cols = linear_sum_assignment(-iou)
            match = {int(r): ids[c] for r, c in zip(rows, cols, strict=True)
                     if iou[r, c] >= self.min_iou}
        out = []
        for j, f in enumerate(faces):
            if j in match:
                tid = match[j]
                tr = self._tracks[tid]
                f = self._smooth(tr, f)
                tr.update(face=f, missed=0, age=tr["age"] + 1)
            else:
                tid = self._next
                self._next += 1
                self._tracks[tid] = {"face": f, "missed": 0, "age": 1,
                                     "kp_missed": dict.fromkeys(f.keypoints, 0)}
            out.append(TrackedFace(tid, f, self._tracks[tid]["age"]))
        seen = {t.track_id for t in out}
        for tid in list(self._tracks):
            if tid not in seen:
                self._tracks[tid]["missed"] += 1
                if self._tracks[tid]["missed"] > self.max_missed:
                    del self._tracks[tid]
        return out

    def _smooth(self, track, face):
        a = self.smoothing
        old = track["face"]
        box = tuple(a * o + (1 - a) * n for o, n in zip(old.box, face.box, strict=True))
        kps = {}
        for name, (x, y, s) in face.keypoints.items():
            ox, oy, os_ = old.keypoints.get(name, (math.nan,) * 3)
            if math.isfinite(x) and math.isfinite(ox):
                kps[name] = (a * ox + (1 - a) * x, a * oy + (1 - a) * y, s)
                track["kp_missed"][name] = 0
            elif math.isfinite(x):
                kps[name] = (x, y, s)
                track["kp_missed"][name] = 0
            else:  # not found in this frame: hold the track's position for a few frames
                track["kp_missed"][name] = track["kp_missed"].get(name, 0) + 1
                held = math.isfinite(ox) and track["kp_missed"][name] <= self.max_missed
                kps[name] = (ox, oy, os_) if held else (math.nan,) * 3
        ied = a * old.ied + (1 - a) * face.ied if math.isfinite(old.ied) else face.ied
        return replace(face, box=box, keypoints=kps, ied=ied)
