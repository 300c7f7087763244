"""Video sources (OpenCV-samples style): a file, a camera index, or a synthetic rendering.

:func:`open_video` returns an object with ``read() -> (ok, frame)`` and ``release()`` for all three,
so every video app runs without a camera. The synthetic source renders textured objects moving
rigidly (rotation + translation) in front of a textured background that translates (camera
motion); ``"synth:motions=3,frames=30,seed=0"`` selects its parameters.

Frames are BGR uint8 arrays of shape (H, W, 3), as OpenCV returns them.
"""

from pathlib import Path

import cv2
import numpy as np

from cvfs.io._atomic import atomic_path

__all__ = ["SyntheticRigidVideo", "open_video", "read_frames", "write_video"]


class SyntheticRigidVideo:
    """Rendered video of ``n_motions`` rigid motions (background + ``n_motions - 1`` objects).

    Parameters
    ----------
    n_motions : int, default 3
        Motions including the background's (camera) motion; >= 1.
    n_frames : int, default 30
    size : tuple of int, default (320, 240)
        (width, height).
    seed : int, default 0

    Notes
    -----
    Textures are random blobs (good corners for a tracker). Object i rotates by a constant angle
    per frame about its centre and translates with constant velocity; the background translates.
    ``labels_at(points, frame)`` gives the true motion of image points (for tests).
    """

    def __init__(self, n_motions=3, n_frames=30, size=(320, 240), seed=0):
        if int(n_motions) < 1 or int(n_frames) < 1:
            raise ValueError(f"n_motions and n_frames must be >= 1; got {n_motions}, {n_frames}")
        self.n_motions = int(n_motions)
        self.n_frames = int(n_frames)
        self.width, self.height = (int(s) for s in size)
        rng = np.random.default_rng(seed)
        pad = 80
        self._bg = self._texture(rng, self.height + 2 * pad, self.width + 2 * pad)
        self._pad = pad
        self._bg_vel = rng.uniform(1.0, 2.0, size=2) * rng.choice([-1, 1], size=2)
        self._bg_wobble = (rng.uniform(0.15, 0.4), rng.uniform(0, 2 * np.pi))
        self._objects = []
        n_obj = self.n_motions - 1
        for i in range(n_obj):
            side = int(min(self.width / (n_obj + 0.6), self.height) * rng.uniform(0.55, 0.65))
            tex = self._texture(rng, side, side, bright=True)
            cx = self.width * (i + 1) / (n_obj + 1)
            cy = self.height * rng.uniform(0.4, 0.6)
            self._objects.append(dict(
                tex=tex, side=side, centre=np.array([cx, cy]),
                vel=rng.uniform(-1.5, 1.5, size=2),
                omega=rng.uniform(1.5, 3.0) * rng.choice([-1, 1]),
                freq=rng.uniform(0.15, 0.45, size=2), phase=rng.uniform(0, 2 * np.pi, size=2)))
        self._frame = 0

    @staticmethod
    def _texture(rng, h, w, bright=False):
        img = np.full((h, w, 3), 200 if bright else 60, np.uint8)
        n = max(8, h * w // (90 if bright else 200))
        for _ in range(n):
            c = tuple(int(v) for v in rng.integers(0, 256, size=3))
            x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
            r = int(rng.integers(2, 6))
            if rng.random() < 0.5:
                cv2.circle(img, (x, y), r, c, -1)
            else:
                cv2.rectangle(img, (x - r, y - r), (x + r, y + r), c, -1)
        return img

    def _object_affine(self, obj, f):
        """2x3 map from the object's texture to the image at frame f."""
        s = obj["side"]
        # non-uniform motion (constant velocities would make every motion's velocity vector
        # nearly constant over time, a degenerate case for velocity clustering)
        angle = obj["omega"] * f + 10.0 * np.sin(obj["freq"][0] * f + obj["phase"][0])
        wobble = 6.0 * np.sin(obj["freq"][1] * f + obj["phase"][1])
        centre = obj["centre"] + obj["vel"] * f + wobble
        M = cv2.getRotationMatrix2D((s / 2, s / 2), angle, 1.0)
        M[:, 2] += centre - s / 2
        return M

    def render(self, f):
        """Frame ``f`` (BGR uint8, shape (H, W, 3))."""
        w, ph = self._bg_wobble
        shift = self._bg_vel * f + 4.0 * np.array([np.sin(w * f + ph), np.cos(w * f + ph)])
        M = np.array([[1.0, 0, -self._pad + shift[0]], [0, 1.0, -self._pad + shift[1]]])
        frame = cv2.warpAffine(self._bg, M, (self.width, self.height), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT)
        for obj in self._objects:
            M = self._object_affine(obj, f)
            warped = cv2.warpAffine(obj["tex"], M, (self.width, self.height),
                                    flags=cv2.INTER_LINEAR)
            mask = cv2.warpAffine(np.full(obj["tex"].shape[:2], 255, np.uint8), M,
                                  (self.width, self.height), flags=cv2.INTER_NEAREST)
            frame[mask > 0] = warped[mask > 0]
        return frame

    def labels_at(self, points, f):
        """True motion (0 = background, i = object i) of image points (N, 2) at frame f."""
        points = np.asarray(points, dtype=float).reshape(-1, 2)
        labels = np.zeros(points.shape[0], dtype=np.int64)
        for i, obj in enumerate(self._objects):
            M = self._object_affine(obj, f)
            inv = cv2.invertAffineTransform(M)
            uv = points @ inv[:, :2].T + inv[:, 2]
            inside = np.all((uv >= 0) & (uv < obj["side"]), axis=1)
            labels[inside] = i + 1  # later objects are drawn on top
        return labels

    def track_labels(self, tracks):
        """True motion of trajectories (P, F, 2) tracked from frame 0; -1 where the point is not
        on the same motion in every frame (occluded, or a corner sliding along an edge)."""
        tracks = np.asarray(tracks, dtype=float)
        per_frame = np.stack([self.labels_at(tracks[:, f], f) for f in range(tracks.shape[1])])
        consistent = np.all(per_frame == per_frame[:1], axis=0)
        return np.where(consistent, per_frame[0], -1)

    def isOpened(self):  # noqa: N802 - the cv2.VideoCapture name
        return True

    def read(self):
        """``(ok, frame)`` like :meth:`cv2.VideoCapture.read`."""
        if self._frame >= self.n_frames:
            return False, None
        frame = self.render(self._frame)
        self._frame += 1
        return True, frame

    def release(self):
        self._frame = self.n_frames


def _parse_synth(spec):
    params = {}
    body = spec.split(":", 1)[1] if ":" in spec else ""
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        if key not in ("motions", "frames", "seed", "width", "height"):
            raise ValueError(f"source: unknown synthetic parameter {key!r} in {spec!r} "
                             "(use motions, frames, seed, width, height)")
        params[key] = int(value)
    return SyntheticRigidVideo(n_motions=params.get("motions", 3),
                               n_frames=params.get("frames", 30),
                               size=(params.get("width", 320), params.get("height", 240)),
                               seed=params.get("seed", 0))


def open_video(source):
    """Open a video file, a camera index or a synthetic source.

    Parameters
    ----------
    source : str, Path or int
        A file path; a camera index (int, or a string of digits); or ``"synth"`` /
        ``"synth:motions=3,frames=30,seed=0"`` for :class:`SyntheticRigidVideo`.

    Returns
    -------
    capture : cv2.VideoCapture or SyntheticRigidVideo
        Has ``read() -> (ok, frame)`` and ``release()``.

    Raises
    ------
    FileNotFoundError
        If a file source does not exist.
    ValueError
        If the source cannot be opened or decoded.
    """
    if isinstance(source, str) and source.startswith("synth"):
        return _parse_synth(source)
    if isinstance(source, (int, np.integer)) or (isinstance(source, str) and source.isdigit()):
        cap = cv2.VideoCapture(int(source))
        if not cap.isOpened():
            raise ValueError(f"source: cannot open camera {int(source)}")
        return cap
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"source: video file {path} does not exist")
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"source: cannot open {path} as a video (unreadable or unknown codec)")
    return cap


def read_frames(source, max_frames=None):
    """All frames of a source (up to ``max_frames``) as a list of BGR uint8 arrays.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`open_video`; ValueError also if no frame can be decoded.
    """
    cap = open_video(source)
    frames = []
    try:
        while max_frames is None or len(frames) < max_frames:
            ok, frame = cap.read()
            if not ok or frame is None:
                break
            frames.append(frame)
    finally:
        cap.release()
    if not frames:
        raise ValueError(f"source: no frame could be decoded from {source!r}")
    return frames


def write_video(path, frames, fps=10.0):
    """Write BGR uint8 frames to an MJPG ``.avi`` atomically.

    Raises
    ------
    ValueError
        If ``frames`` is empty or OpenCV cannot open a writer.
    """
    if not len(frames):
        raise ValueError("frames must hold at least one frame")
    h, w = frames[0].shape[:2]
    with atomic_path(path, suffix=".avi") as tmp:
        writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"MJPG"), float(fps), (w, h))
        if not writer.isOpened():
            raise ValueError(f"cannot open a video writer for {path}")
        try:
            for frame in frames:
                writer.write(np.ascontiguousarray(frame))
        finally:
            writer.release()
    return Path(path)
