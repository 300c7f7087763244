"""Frame sources and video files: one :func:`open_source` for images, folders, videos, cameras and
synthetic clips; an atomic video writer.

Every frame cvfs reads or writes is RGB uint8 of shape (H, W, 3) (OpenCV's BGR is converted at
this boundary), read one at a time (a source never holds all its frames).

Synthetic sources (no camera or file needed) are written ``synth`` or ``synthetic``, optionally
with parameters: ``"synth:motions=3,frames=30,seed=0"`` renders :class:`SyntheticRigidVideo`
(textured objects moving rigidly in front of a translating background); ``scene=face`` gives a
moving crop of scikit-image's astronaut photo instead (a face, for the keypoint detectors).
"""

import contextlib
import logging
import warnings
from pathlib import Path

import cv2
import numpy as np

from cvfs.io._atomic import atomic_path
from cvfs.io.images import IMAGE_SUFFIXES, read_image

__all__ = ["FrameSource", "SyntheticRigidVideo", "VideoWriter", "is_synthetic", "open_source",
           "read_frames", "write_video"]

log = logging.getLogger(__name__)

_SYNTH_KEYS = ("motions", "frames", "seed", "width", "height", "scene")
_SCENES = ("rigid", "face")


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
        """Frame ``f`` (RGB uint8, shape (H, W, 3))."""
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

    def frames(self):
        """Iterator over the ``n_frames`` rendered frames (RGB uint8)."""
        for f in range(self.n_frames):
            yield self.render(f)


def is_synthetic(source):
    """Whether ``source`` names a synthetic clip (``synth`` or ``synthetic``, with parameters)."""
    return isinstance(source, str) and source.split(":", 1)[0] in ("synth", "synthetic")


def _parse_synth(spec):
    params = {}
    body = spec.split(":", 1)[1] if ":" in spec else ""
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        if key not in _SYNTH_KEYS:
            raise ValueError(f"source: unknown synthetic parameter {key!r} in {spec!r} "
                             f"(use {', '.join(_SYNTH_KEYS)})")
        if key == "scene":
            if value not in _SCENES:
                raise ValueError(f"source: scene must be one of {_SCENES}; got {value!r} in "
                                 f"{spec!r}")
            params[key] = value
            continue
        try:
            params[key] = int(value)
        except ValueError:
            raise ValueError(f"source: synthetic parameter {key} must be an int; got {value!r} "
                             f"in {spec!r}") from None
    return params


def _face_frames(n_frames):
    """A 320 x 320 crop of scikit-image's astronaut sliding left and right (RGB uint8)."""
    from skimage import data

    img = data.astronaut()
    for i in range(n_frames):
        off = (8 * i) % 264
        dx = off if off <= 132 else 264 - off
        yield np.ascontiguousarray(img[40:360, 60 + dx:380 + dx])


def _capture_frames(cap, label, path, max_frames, strict):
    """Frames of an opened ``cv2.VideoCapture`` as RGB; checks the container's frame count."""
    declared = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if path is not None else 0
    n = 0
    try:
        while max_frames is None or n < max_frames:
            ok, bgr = cap.read()
            if not ok or bgr is None:
                break
            yield cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            n += 1
    finally:
        cap.release()
    if n == 0:
        raise ValueError(f"source: no frame could be decoded from {label}")
    if path is not None and n < declared and (max_frames is None or n < max_frames):
        msg = (f"video file {path}: {n} frames could be decoded of the {declared} its container "
               "declares (truncated or corrupt file)")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=3)


class FrameSource:
    """An opened source: iterate for ``(name, frame)`` pairs, frames RGB uint8 (H, W, 3).

    Made by :func:`open_source`. Each iteration reads the source again from its start (a camera
    continues), one frame at a time.

    Attributes
    ----------
    kind : {"images", "video"}
        ``"images"`` for an image file or a folder of images (each frame named after its file),
        ``"video"`` for a video file, a camera or a synthetic clip (frames named
        ``<name>_0000``, ``<name>_0001``, ...).
    name : str
        File or folder stem, ``camera<i>``, ``synth`` or ``synthetic``.
    fps : float
        Frame rate of a video file (10 when the container has none, and for the other sources).
    replayable : bool
        Whether a second iteration yields the same frames again (False for a camera).
    skipped : list of (str, str) or None
        Opened with ``on_error="skip"``: the ``(file name, reason)`` of every image file the
        last iteration could not read (it went on with the next file); else None.
    """

    def __init__(self, kind, name, frames, fps=10.0, replayable=True, skipped=None):
        self.kind = kind
        self.name = name
        self.fps = float(fps)
        self.replayable = bool(replayable)
        self.skipped = skipped
        self._frames = frames

    def __iter__(self):
        if self.kind == "images":
            if self.skipped is not None:
                self.skipped.clear()
            yield from self._frames()
            return
        for i, frame in enumerate(self._frames()):
            yield f"{self.name}_{i:04d}", frame


def _image_frames(files, skipped):
    """``(stem, RGB uint8)`` of each file; an unreadable file raises, or with a ``skipped`` list
    is recorded there and passed over."""
    for p in files:
        try:
            image = read_image(p)
        except (ValueError, OSError) as exc:
            if skipped is None:
                raise
            log.warning("%s: skipped: %s", p, exc)
            skipped.append((p.name, str(exc)))
            continue
        yield p.stem, image


def open_source(source, max_frames=None, *, strict=False, on_error="raise"):
    """Open an image, a folder of images, a video file, a camera index or a synthetic clip.

    Parameters
    ----------
    source : str, Path or int
        An image file (:data:`~cvfs.io.images.IMAGE_SUFFIXES`); a folder (its images in name
        order); a video file; a camera index (int, or a string of digits); or ``"synth"`` /
        ``"synthetic"``, optionally with parameters ``"synth:motions=3,frames=30,seed=0"``
        (also ``width``, ``height``; ``scene=face`` for the astronaut clip).
    max_frames : int, optional
        At most this many frames (every source kind).
    strict : bool, default False
        A video file yielding fewer frames than its container declares raises ValueError
        instead of a warning.
    on_error : {"raise", "skip"}, default "raise"
        Image sources: an image file that cannot be read (corrupt, empty, unknown format, over
        the pixel limit) raises ValueError while iterating, or with ``"skip"`` is logged, listed
        in :attr:`FrameSource.skipped` and passed over.

    Returns
    -------
    source : FrameSource
        Iterate for ``(name, RGB uint8 ndarray of shape (H, W, 3))``.

    Raises
    ------
    FileNotFoundError
        If a path does not exist or a folder holds no images.
    ValueError
        If ``max_frames`` is not positive, a synthetic parameter is unknown, or a camera or video
        cannot be opened; while iterating, if no frame can be decoded, an image file is corrupt,
        or (``strict``) a video is shorter than its container declares.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip'; got {on_error!r}")
    if max_frames is not None and int(max_frames) < 1:
        raise ValueError(f"max_frames must be a positive int or None; got {max_frames!r}")
    limit = None if max_frames is None else int(max_frames)
    if is_synthetic(source):
        params = _parse_synth(source)
        n = params.get("frames", 30) if limit is None else min(params.get("frames", 30), limit)
        name = source.split(":", 1)[0]
        if params.get("scene", "rigid") == "face":
            return FrameSource("video", name, lambda: _face_frames(n))
        video = SyntheticRigidVideo(n_motions=params.get("motions", 3), n_frames=n,
                                    size=(params.get("width", 320), params.get("height", 240)),
                                    seed=params.get("seed", 0))
        return FrameSource("video", name, video.frames)
    if isinstance(source, (int, np.integer)) or (isinstance(source, str) and source.isdigit()):
        index = int(source)
        cap = cv2.VideoCapture(index)
        if not cap.isOpened():
            raise ValueError(f"source: cannot open camera {index}")
        cap.release()
        return FrameSource("video", f"camera{index}", lambda: _capture_frames(
            cv2.VideoCapture(index), f"camera {index}", None, limit, strict), replayable=False)
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"source not found: {path}")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise FileNotFoundError(f"source: no images ({', '.join(IMAGE_SUFFIXES)}) in {path}")
        files = files[:limit]
        skipped = [] if on_error == "skip" else None
        return FrameSource("images", path.name, lambda: _image_frames(files, skipped),
                           skipped=skipped)
    if path.suffix.lower() in IMAGE_SUFFIXES:
        skipped = [] if on_error == "skip" else None
        return FrameSource("images", path.stem, lambda: _image_frames([path], skipped),
                           skipped=skipped)
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"source: cannot open video file {path} (unreadable or unknown codec)")
    fps = cap.get(cv2.CAP_PROP_FPS) or 10.0
    cap.release()
    return FrameSource("video", path.stem, lambda: _capture_frames(
        cv2.VideoCapture(str(path)), str(path), path, limit, strict), fps=fps if fps > 0 else 10.0)


def read_frames(source, max_frames=None, *, strict=False):
    """All frames of a source (up to ``max_frames``) as a list of RGB uint8 arrays.

    For algorithms that need every frame at once (the point tracker); everything else iterates
    :func:`open_source`.

    Parameters and errors as :func:`open_source`.

    Returns
    -------
    frames : list of ndarray of shape (H, W, 3), uint8
    """
    return [frame for _, frame in open_source(source, max_frames, strict=strict)]


class VideoWriter:
    """Write RGB uint8 frames to an MJPG ``.avi`` atomically (temporary file, renamed on close).

    Use as a context manager: the file appears at ``path`` when the block ends without an
    exception; on an exception or Ctrl-C the temporary file is removed and ``path`` untouched.

    Parameters
    ----------
    path : str or Path
    fps : float, default 10.0

    Raises
    ------
    ValueError
        On the first :meth:`write` if OpenCV cannot open a writer; on :meth:`close` if no frame
        was written.
    """

    def __init__(self, path, fps=10.0):
        self.path = Path(path)
        self.fps = float(fps)
        self.n_frames = 0
        self._stack = contextlib.ExitStack()
        self._writer = None
        self._size = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._abort(exc_type, exc, tb)
        return False

    def write(self, frame):
        """Append one RGB uint8 frame of shape (H, W, 3) (the first fixes the size)."""
        frame = np.asarray(frame)
        if self._writer is None:
            tmp = self._stack.enter_context(atomic_path(self.path, suffix=".avi"))
            h, w = frame.shape[:2]
            self._size = (w, h)
            self._writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"MJPG"), self.fps,
                                           self._size)
            if not self._writer.isOpened():
                err = ValueError(f"cannot open a video writer for {self.path}")
                self._abort(ValueError, err, None)
                raise err
        if (frame.shape[1], frame.shape[0]) != self._size:
            raise ValueError(f"frames written to {self.path} must all be {self._size[0]}x"
                             f"{self._size[1]}; got {frame.shape[1]}x{frame.shape[0]}")
        self._writer.write(np.ascontiguousarray(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)))
        self.n_frames += 1

    def close(self):
        """Finish the file and move it to ``path``; returns ``path``."""
        if self._writer is None:
            raise ValueError(f"no frame was written to {self.path}")
        self._writer.release()
        self._stack.close()
        return self.path

    def _abort(self, exc_type, exc, tb):
        if self._writer is not None:
            self._writer.release()
        self._stack.__exit__(exc_type, exc, tb)


def write_video(path, frames, fps=10.0):
    """Write RGB uint8 frames to an MJPG ``.avi`` atomically (see :class:`VideoWriter`).

    Returns
    -------
    path : Path

    Raises
    ------
    ValueError
        If ``frames`` is empty or OpenCV cannot open a writer.
    """
    if not len(frames):
        raise ValueError("frames must hold at least one frame")
    with VideoWriter(path, fps=fps) as writer:
        for frame in frames:
            writer.write(frame)
    return Path(path)
