"""Faces in video: the face scan on some frames, the faces followed on the frames between.

:class:`VideoFaceDetector` runs :meth:`KeypointDetector.detect_faces` on every ``rescan``-th
frame (and on any frame where no face is followed). On the other frames each face of the
previous frame is followed: every keypoint of the face model (a missing one at the model's
predicted position), shifted by the face's motion over the last frame, is rescanned within
``radius`` inter-eye distances (:func:`cvfs.keypoints.refine.refine_points`, the scan of the
keypoint refinement), the face model is fitted to the rescanned windows
(:func:`cvfs.keypoints.faces.assemble_faces`, the face threshold as in the scan) and the
keypoints are fused with the face shape (:func:`cvfs.keypoints.fusion.fuse_keypoints`). A face
that no longer fits is dropped. Faces that enter the picture are found at the next scan.

A followed face costs the refinement's rescan (about 0.04 CPU s per face, against 0.4-0.7 s for a
top-down scan of a 640x480 frame); ``benchmarks/keypoints/keypoints_video.py`` measures
frames per second and the agreement with a scan of every frame.
"""

import math
from dataclasses import replace

import numpy as np

from cvfs.keypoints.faces import FaceModel, _iou, assemble_faces, load_face_model
from cvfs.keypoints.fusion import fuse_keypoints
from cvfs.keypoints.refine import DEFAULT_LEVEL_IED, LEVEL_IED, refine_points

__all__ = ["VideoFaceDetector"]


class VideoFaceDetector:
    """Faces of consecutive video frames (call it once per frame, in order).

    Parameters
    ----------
    detector : KeypointDetector
    face_model : FaceModel or str or Path, optional
        Default: the shipped ``faces.h5``.
    rescan : int, default=15
        Scan every ``rescan``-th frame with :meth:`KeypointDetector.detect_faces` (1: every
        frame); the frames between follow the faces found.
    radius : float, default=0.1
        Search radius of a followed keypoint around its predicted position (its position in
        the previous frame moved by the face's last motion), in inter-eye distances (0.1:
        6 px at an IED of 60 px; the refinement's radius).
    threshold : float, optional
        Minimum face probability, of the scans and of the followed faces (default: the face
        model's).
    max_scale : float, default=1.0
        Largest pyramid scale of the scans (1: faces with an IED of about 20 px and more).
    top_down : bool, default=True
        Scans only the eyes everywhere (:meth:`KeypointDetector.detect_faces`).
    **scan_options
        Other options of :meth:`KeypointDetector.detect_faces` for the scans (``n_jobs``,
        ``max_memory``, ``max_faces``, ...).

    Attributes
    ----------
    scanned : list of bool
        Per frame so far, whether it was scanned (else its faces were followed).
    """

    def __init__(self, detector, *, face_model=None, rescan=15, radius=0.1, threshold=None,
                 max_scale=1.0, top_down=True, **scan_options):
        if isinstance(rescan, bool) or not isinstance(rescan, (int, np.integer)) or rescan < 1:
            raise ValueError(f"rescan must be an int >= 1; got {rescan!r}")
        if not (isinstance(radius, (int, float)) and 0 < radius <= 1):
            raise ValueError(f"radius must be in (0, 1] inter-eye distances; got {radius!r}")
        if not isinstance(face_model, FaceModel):  # None: the shipped model, or a path
            face_model = load_face_model(face_model)
        missing = [k for k in face_model.shape.names if k not in detector.classifiers]
        if missing:
            raise ValueError(f"the face model needs detectors of {missing}; this detector "
                             f"finds {detector.keypoints}")
        self.detector, self.face_model = detector, face_model
        self.rescan, self.radius = int(rescan), float(radius)
        self.threshold = threshold
        self.scan_options = dict(scan_options, max_scale=max_scale, top_down=top_down)
        self.scanned = []
        self._faces, self._motion = [], []

    def __call__(self, frame):
        """Faces of the next frame (list of :class:`cvfs.keypoints.faces.Face`, best first)."""
        faces, motion, scan = [], [], True
        if self._faces and len(self.scanned) % self.rescan != 0:
            faces, motion = self._follow(frame)
            scan = not faces  # every face lost: scan this frame
        if scan:
            faces = self.detector.detect_faces(frame, threshold=self.threshold,
                                               face_model=self.face_model, **self.scan_options)
            motion = [np.zeros(2)] * len(faces)
        self.scanned.append(scan)
        self._faces, self._motion = faces, motion
        return list(faces)

    def _follow(self, frame):
        """The previous frame's faces followed into ``frame``, and their motion (px)."""
        fm = self.face_model
        names = list(fm.shape.names)
        level = np.array([LEVEL_IED.get(k, DEFAULT_LEVEL_IED) for k in names])
        out, motion = [], []
        for f, v in zip(self._faces, self._motion, strict=True):
            if not (f.ied > 0):
                continue
            # a keypoint the face lacks starts where its model places it (NaN: not searched)
            start = np.array([f.keypoints[k][:2] if k in f.keypoints
                              and math.isfinite(f.keypoints[k][0])
                              else f.predicted.get(k, (math.nan, math.nan))
                              for k in names], np.float64) + v
            got = refine_points(self.detector, frame, start, names, np.full(len(names), f.ied),
                                radius=self.radius, level_ied=level)
            ok = np.isfinite(got[:, 2])
            found = {k: got[i][None] for i, k in enumerate(names) if ok[i]}
            # the rescan's middle scale: the face at the level IED the refinement uses
            scales = {k: np.array([level[i] / f.ied]) for i, k in enumerate(names) if ok[i]}
            fit = assemble_faces(found, fm, scales=scales, threshold=self.threshold, max_faces=1)
            if not fit:
                continue
            # as the scan's refinement fills them: a keypoint the fit leaves out takes its best
            # rescanned window, with that window's probability
            kp = dict(fit[0].keypoints)
            for i in np.flatnonzero(ok):
                if not math.isfinite(kp.get(names[i], (math.nan,))[0]):
                    kp[names[i]] = (float(got[i, 0]), float(got[i, 1]),
                                    float(fm.probability(names[i], got[i, 2])))
            g = fuse_keypoints([replace(fit[0], keypoints=kp)], fm)[0]
            out.append(g)
            motion.append(_centre(g) - _centre(f))
        # two followed faces that became one: the better one stays
        order = np.argsort([-g.score for g in out], kind="stable")
        kept = []
        for i in order:
            if all(_iou(out[i].box, out[j].box) <= 0.3 for j in kept):
                kept.append(i)
        return [out[i] for i in kept], [motion[i] for i in kept]


def _centre(face):
    x0, y0, x1, y1 = face.box
    return np.array([0.5 * (x0 + x1), 0.5 * (y0 + y1)])
