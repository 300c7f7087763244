"""Faces from keypoint detections: a face shape model fitted top-down to the bottom-up detections.

:meth:`KeypointDetector.detect` returns independent lists per keypoint. :func:`assemble_faces`
groups them into faces:

1. every detection's score becomes a probability with its keypoint's calibration (isotonic
   regression on held-out training faces), so one threshold means the same for every keypoint;
2. every pair of detections of two different keypoints gives a similarity transform of the
   :class:`ShapeModel`'s mean shape (a hypothesis), kept if its roll and its inter-eye distance
   (against the pyramid scale each detection was found at) lie in the range seen in training;
3. a hypothesis scores ``sum_k max(0, logit p_k - logit p_min) * exp(-d_k^2 / 2 sigma_k^2)``
   over the keypoints k, with p_k the best detection within ``radius_k`` of k's predicted
   position (d_k its distance in inter-eye distances): a RANSAC-style consensus in which a
   keypoint may be missing;
4. the best hypotheses in turn are refitted (similarity plus the principal shape modes, by
   weighted least squares on their inliers), rescored, and kept unless a kept face overlaps them
   or already uses one of their detections (non-maximum suppression between faces);
5. the face score is the refitted consensus score mapped to a probability by a logistic
   calibration (a face is right when both eyes lie within 10% IED of an annotated face): the
   score is a sum of log-odds margins, and a strictly increasing map keeps the order of faces
   that a step function would tie.

After the keypoints are refined, :func:`cvfs.keypoints.fusion.fuse_keypoints` moves each one
part of the way toward the position the face's other keypoints give it through the shape model
(``FaceModel.fusion_gain``).

The shape model, calibrations and default threshold are learned by ``data_prep/train_faces.py``
and shipped in ``cvfs/models/faces.h5`` (kind ``"face-model"``, :func:`load_face_model`).

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3.1 (FSA-Lor Face: top-down pruning of the keypoint
detections by a face model). Cootes, Taylor, Cooper, Graham, "Active shape models", CVIU 1995.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cvfs.datasets import models_dir
from cvfs.datasets.landmarks import KEYPOINTS
from cvfs.io import load_model, save_model

__all__ = [
    "FACE_KIND",
    "FACE_KEYPOINTS",
    "Face",
    "FaceModel",
    "ShapeModel",
    "assemble_faces",
    "fit_shape_model",
    "load_face_model",
]

FACE_KIND = "face-model"
#: The five keypoints of the face model (MTFL's), in model order.
FACE_KEYPOINTS = ("left_eye_center", "right_eye_center", "nose_center", "mouth_left_corner",
                  "mouth_right_corner")
#: Face box in the model frame (origin at the eye midpoint, inter-eye distance 1, y down):
#: x0, y0, x1, y1, about the extent of a frontal face around its five keypoints.
BOX = (-1.0, -0.9, 1.0, 1.7)
_EPS = 0.005  # probabilities are clipped to [_EPS, 1 - _EPS] before the logit


@dataclass
class Face:
    """One face found in an image.

    Attributes
    ----------
    score : float
        Calibrated probability that the face is real (both eyes right).
    box : tuple of float
        ``(x0, y0, x1, y1)`` in image pixels (x = column).
    keypoints : dict of str -> tuple of float
        ``name -> (x, y, score)`` with the detection's calibrated probability; ``(nan, nan,
        nan)`` where the keypoint is not found.
    ied : float
        Inter-eye distance of the fitted face model, pixels.
    roll : float
        Angle of the line from the left to the right eye, degrees (image y down).
    evidence : float
        Consensus score of the fitted face model (before calibration).
    predicted : dict of str -> tuple of float
        ``name -> (x, y)``: every keypoint's position in the fitted face model (also where the
        keypoint is not found; :func:`cvfs.keypoints.refine.refine_face_keypoints` searches
        there for missing keypoints).
    """

    score: float
    box: tuple
    keypoints: dict
    ied: float = float("nan")
    roll: float = 0.0
    evidence: float = 0.0
    predicted: dict = field(default_factory=dict)

    def as_dict(self):
        """JSON-friendly dictionary (NaN keypoints become ``null``)."""
        def num(v):
            return None if not math.isfinite(v) else round(float(v), 4)

        return {"score": num(self.score), "box": [num(v) for v in self.box],
                "ied": num(self.ied), "roll": num(self.roll), "evidence": num(self.evidence),
                "keypoints": {k: {"x": num(x), "y": num(y), "score": num(s)}
                              for k, (x, y, s) in self.keypoints.items()}}


@dataclass
class ShapeModel:
    """Procrustes mean and principal modes of a face's keypoints.

    Attributes
    ----------
    names : tuple of str
        Keypoints, in row order.
    mean : ndarray of shape (n, 2)
        Mean shape in the model frame: eye midpoint at the origin, eyes on the x axis, mean
        inter-eye distance 1.
    modes : ndarray of shape (m, 2 n)
        Principal modes (unit rows) of the aligned shapes.
    variances : ndarray of shape (m,)
        Variance of the training shapes along each mode.
    sigma : ndarray of shape (n,)
        Per keypoint, the r.m.s. distance of the aligned training shapes to the mean.
    roll_range : ndarray of shape (2,)
        Range of the eye-line angle (degrees) seen in training, with a margin.
    """

    names: tuple
    mean: np.ndarray
    modes: np.ndarray
    variances: np.ndarray
    sigma: np.ndarray
    roll_range: np.ndarray


def _similarity(src, dst, w=None):
    """Weighted least-squares similarity ``dst ~ c * src + t`` in complex numbers: (c, t)."""
    w = np.ones(len(src)) if w is None else np.asarray(w, np.float64)
    zs, zd = src[:, 0] + 1j * src[:, 1], dst[:, 0] + 1j * dst[:, 1]
    ws = w.sum()
    ms, md = (w * zs).sum() / ws, (w * zd).sum() / ws
    a, b = zs - ms, zd - md
    den = (w * np.abs(a) ** 2).sum()
    c = (w * np.conj(a) * b).sum() / den if den > 0 else 1.0 + 0j
    return c, md - c * ms


def fit_shape_model(points, names=FACE_KEYPOINTS, *, n_modes=4, margin=10.0):
    """Learn a face shape model from annotated faces (generalised Procrustes analysis + PCA).

    Parameters
    ----------
    points : ndarray of shape (n_faces, n, 2)
        Keypoints ``(x, y)`` of each face in ``names`` order; faces with a NaN are skipped.
    names : sequence of str
        Keypoint names; must hold ``left_eye_center`` and ``right_eye_center``.
    n_modes : int
        Principal modes kept.
    margin : float
        Degrees added on both sides of the training roll range.

    Returns
    -------
    model : ShapeModel

    Raises
    ------
    ValueError
        If the shapes disagree, the eyes are not among ``names``, or fewer than 10 complete
        faces remain.
    """
    pts = np.asarray(points, dtype=np.float64)
    names = tuple(names)
    if pts.ndim != 3 or pts.shape[1:] != (len(names), 2):
        raise ValueError(f"points must have shape (n_faces, {len(names)}, 2); got {pts.shape}")
    if "left_eye_center" not in names or "right_eye_center" not in names:
        raise ValueError(f"names must include both eye centres; got {names}")
    pts = pts[np.isfinite(pts).all(axis=(1, 2))]
    if len(pts) < 10:
        raise ValueError(f"need at least 10 complete faces; got {len(pts)}")
    if not 0 <= int(n_modes) <= 2 * len(names) - 4:
        raise ValueError(f"n_modes must be in [0, {2 * len(names) - 4}]; got {n_modes!r}")
    le, re = names.index("left_eye_center"), names.index("right_eye_center")

    def frame(shape):  # eye midpoint at 0, eyes on the x axis, IED 1
        c, t = _similarity(shape[[le, re]], np.array([[-0.5, 0.0], [0.5, 0.0]]))
        z = c * (shape[:, 0] + 1j * shape[:, 1]) + t
        return np.column_stack([z.real, z.imag])

    rolls = np.degrees(np.arctan2(pts[:, re, 1] - pts[:, le, 1], pts[:, re, 0] - pts[:, le, 0]))
    mean = np.mean([frame(p) for p in pts], axis=0)
    for _ in range(10):  # generalised Procrustes: align every shape to the mean, re-average
        aligned = np.empty_like(pts)
        for i, p in enumerate(pts):
            c, t = _similarity(p, mean)
            z = c * (p[:, 0] + 1j * p[:, 1]) + t
            aligned[i] = np.column_stack([z.real, z.imag])
        new = frame(aligned.mean(axis=0))
        done = np.abs(new - mean).max() < 1e-9
        mean = new
        if done:
            break
    resid = (aligned - mean).reshape(len(pts), -1)
    _, sv, vt = np.linalg.svd(resid - resid.mean(axis=0), full_matrices=False)
    k = int(n_modes)
    sigma = np.sqrt(((aligned - mean) ** 2).sum(axis=2).mean(axis=0))
    return ShapeModel(names, mean, vt[:k].copy(), (sv[:k] ** 2) / (len(pts) - 1), sigma,
                      np.array([rolls.min() - margin, rolls.max() + margin]))


@dataclass
class FaceModel:
    """Everything :func:`assemble_faces` needs: shape model, calibrations, search settings.

    Attributes
    ----------
    shape : ShapeModel
    calibration : dict of str -> (ndarray, ndarray)
        Per keypoint the isotonic map from detector score to probability: increasing scores
        and the probabilities at them (linear in between, constant outside).
    face_calibration : (float, float)
        Slope (> 0) and intercept of the logistic map from consensus score to face
        probability, ``1 / (1 + exp(-(slope * score + intercept)))``.
    scale_range : dict of str -> (float, float)
        Per keypoint, the range of ``IED x pyramid scale`` of its true detections in training
        (the pyramid level a keypoint is found at fixes the face's size).
    threshold : float
        Default minimum face probability.
    p_min : float
        Detections with a lower probability are ignored.
    radius : ndarray of shape (n,)
        Per keypoint, search radius around the predicted position, in IED.
    loc_sigma : ndarray of shape (n,)
        Per keypoint, the spread (IED) of its detections around the fitted shape.
    fusion_gain : ndarray of shape (n, 2)
        Per keypoint, the share of the way from its refined detection to the position the
        other keypoints predict, along and across the eye line
        (:func:`cvfs.keypoints.fusion.fuse_keypoints`;
        zeros: detections kept).
    info : dict
        Training description kept in the model file.
    """

    shape: ShapeModel
    calibration: dict
    face_calibration: tuple
    scale_range: dict
    threshold: float = 0.5
    p_min: float = 0.02
    radius: np.ndarray = None
    loc_sigma: np.ndarray = None
    fusion_gain: np.ndarray = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.shape.names)
        if self.loc_sigma is None:
            self.loc_sigma = np.sqrt(self.shape.sigma ** 2 + 0.05 ** 2)
        if self.radius is None:
            self.radius = np.clip(3.0 * self.loc_sigma, 0.1, 0.5)
        self.radius = np.asarray(self.radius, np.float64).reshape(n)
        self.loc_sigma = np.asarray(self.loc_sigma, np.float64).reshape(n)
        if self.fusion_gain is None:
            self.fusion_gain = np.zeros((n, 2))
        self.fusion_gain = np.asarray(self.fusion_gain, np.float64).reshape(n, 2)
        if not (np.isfinite(self.fusion_gain).all() and (self.fusion_gain >= 0).all()
                and (self.fusion_gain <= 1).all()):
            raise ValueError(f"fusion_gain must lie in [0, 1]; got {self.fusion_gain.tolist()}")
        fc = np.asarray(self.face_calibration, np.float64)
        if fc.shape != (2,) or not np.isfinite(fc).all() or fc[0] <= 0:
            raise ValueError("face_calibration must be a finite slope > 0 and an intercept; "
                             f"got {fc.tolist()}")
        self.face_calibration = (float(fc[0]), float(fc[1]))

    def probability(self, name, scores):
        """Calibrated probability of detections of keypoint ``name`` with these ``scores``."""
        x, y = self.calibration[name]
        return np.interp(np.asarray(scores, np.float64), x, y)

    def face_probability(self, raw):
        """Face probability of consensus scores ``raw``."""
        a, b = self.face_calibration
        return 1.0 / (1.0 + np.exp(-(a * np.asarray(raw, np.float64) + b)))

    def face_evidence(self, p):
        """Consensus score whose face probability is ``p`` (-inf at 0, inf at 1)."""
        a, b = self.face_calibration
        with np.errstate(divide="ignore"):
            return (np.log(p) - np.log1p(-p) - b) / a

    def save(self, path):
        """Write the model to an HDF5 file (kind ``"face-model"``, :func:`cvfs.io.save_model`).

        Returns
        -------
        path : Path
        """
        s = self.shape
        arrays = {"shape/mean": s.mean, "shape/modes": s.modes, "shape/variances": s.variances,
                  "shape/sigma": s.sigma, "shape/roll_range": s.roll_range,
                  "radius": self.radius, "loc_sigma": self.loc_sigma,
                  "fusion_gain": self.fusion_gain,
                  "face_calibration": np.asarray(self.face_calibration, np.float64)}
        for i, k in enumerate(s.names):
            arrays[f"calibration/{i}/x"], arrays[f"calibration/{i}/y"] = self.calibration[k]
        settings = {"keypoints": list(s.names), "threshold": float(self.threshold),
                    "p_min": float(self.p_min),
                    "scale_range": {k: [float(a), float(b)] for k, (a, b) in
                                    self.scale_range.items()}}
        return save_model(path, FACE_KIND, arrays, settings=settings,
                          params=self.info.get("params", {}),
                          training=self.info.get("training", {}),
                          random_state=self.info.get("random_state"))

    @classmethod
    def from_saved(cls, model):
        """Build from a :class:`cvfs.io.SavedModel` of kind ``"face-model"``.

        Raises
        ------
        ValueError
            Naming the file and the failed check.
        """
        where = model.path or "face model"
        s, a = model.settings, model.arrays
        try:
            names = tuple(s["keypoints"])
            n = len(names)
            if not n or any(k not in KEYPOINTS for k in names) or \
                    "left_eye_center" not in names or "right_eye_center" not in names:
                raise ValueError(f"setting 'keypoints' must list keypoint names with both eyes; "
                                 f"got {list(names)}")
            shapes = {"shape/mean": (n, 2), "shape/sigma": (n,), "shape/roll_range": (2,),
                      "radius": (n,), "loc_sigma": (n,)}
            for key, shp in shapes.items():
                if a[key].shape != shp:
                    raise ValueError(f"array {key} must have shape {shp}; got {a[key].shape}")
            m = a["shape/modes"]
            if m.ndim != 2 or m.shape[1] != 2 * n or a["shape/variances"].shape != (m.shape[0],):
                raise ValueError("shape/modes must be (m, 2n) and shape/variances (m,)")

            def curve(prefix):
                x, y = a[f"{prefix}/x"], a[f"{prefix}/y"]
                if x.ndim != 1 or x.shape != y.shape or x.size < 1 or np.any(np.diff(x) < 0) \
                        or y.min() < 0 or y.max() > 1:
                    raise ValueError(f"{prefix} must be increasing x and probabilities y of one "
                                     "length")
                return x, y

            cal = {k: curve(f"calibration/{i}") for i, k in enumerate(names)}
            sr = {k: tuple(float(v) for v in s["scale_range"][k]) for k in names}
            shape = ShapeModel(names, a["shape/mean"], m, a["shape/variances"],
                               a["shape/sigma"], a["shape/roll_range"])
            info = {"params": model.params, "training": model.training, "meta": model.meta}
            thr, pmin = float(s["threshold"]), float(s["p_min"])
            if not (0 <= thr <= 1 and 0 < pmin < 1):
                raise ValueError(f"threshold must be in [0, 1] and p_min in (0, 1); got {thr}, "
                                 f"{pmin}")
            gain = a.get("fusion_gain")  # absent in models without fusion
            if gain is not None and gain.shape != (n, 2):
                raise ValueError(f"array fusion_gain must have shape {(n, 2)}; got {gain.shape}")
            return cls(shape, cal, a["face_calibration"], sr, threshold=thr, p_min=pmin,
                       radius=a["radius"], loc_sigma=a["loc_sigma"], fusion_gain=gain,
                       info=info)
        except KeyError as exc:
            raise ValueError(f"{where}: the face model lacks {exc}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from exc


def load_face_model(path=None):
    """Load a face model (default: the shipped ``faces.h5`` in :func:`cvfs.datasets.models_dir`).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a valid face model (see :func:`cvfs.io.load_model`).
    """
    path = Path(models_dir()) / "faces.h5" if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no face model at {path}; build one with "
                                "`python data_prep/train_faces.py`")
    return FaceModel.from_saved(load_model(path, kind=FACE_KIND))


def _logit(p):
    p = np.clip(p, _EPS, 1 - _EPS)
    return np.log(p / (1 - p))


def _candidates(detections, scales, model, max_per_keypoint):
    """Per model keypoint: (x, y, probability, scale) rows with probability >= p_min, best
    first, at most ``max_per_keypoint``."""
    out = []
    for k in model.shape.names:
        d = np.asarray(detections.get(k, np.zeros((0, 3))), np.float64).reshape(-1, 3)
        s = (np.full(len(d), np.nan) if scales is None or k not in scales
             else np.asarray(scales[k], np.float64).reshape(-1))
        p = model.probability(k, d[:, 2]) if len(d) else np.zeros(0)
        keep = np.flatnonzero(p >= model.p_min)
        keep = keep[np.argsort(-p[keep], kind="stable")][:max_per_keypoint]
        out.append(np.column_stack([d[keep, :2], p[keep], s[keep]]))
    return out


def _scale_ok(model, k, ied, scale):
    """Whether a face of inter-eye distance ``ied`` fits detections of keypoint ``k`` found at
    pyramid ``scale`` (NaN scale: unknown, accepted)."""
    lo, hi = model.scale_range[model.shape.names[k]]
    r = ied * scale
    return ~((r < lo) | (r > hi))


def _evidence(model, cands, c, t, ied, mean=None):
    """Consensus of hypotheses (c, t) of ``mean`` (default the model's mean shape): per
    hypothesis and keypoint the evidence of the best detection near the predicted position,
    and its row (-1: none). Shapes (H, n)."""
    mean = model.shape.mean if mean is None else mean
    n = len(mean)
    ev = np.zeros((len(c), n))
    row = np.full((len(c), n), -1, dtype=np.int64)
    lo = _logit(model.p_min)
    for k in range(n):
        cand = cands[k]
        if len(cand) == 0:
            continue
        pred = c * (mean[k, 0] + 1j * mean[k, 1]) + t
        d = np.abs((cand[None, :, 0] + 1j * cand[None, :, 1]) - pred[:, None]) / ied[:, None]
        e = np.maximum(_logit(cand[:, 2]) - lo, 0.0)[None, :] * np.exp(
            -0.5 * (d / model.loc_sigma[k]) ** 2)
        ok = (d <= model.radius[k]) & _scale_ok(model, k, ied[:, None], cand[None, :, 3])
        e = np.where(ok, e, -1.0)
        j = np.argmax(e, axis=1)
        best = e[np.arange(len(c)), j]
        ev[:, k] = np.maximum(best, 0.0)
        row[:, k] = np.where(best >= 0, j, -1)
    return ev, row


def _hypotheses(model, cands):
    """Similarity transforms (c, t) of the mean shape through every pair of detections of two
    different keypoints, within the training roll and scale ranges."""
    mean = model.shape.mean
    zm = mean[:, 0] + 1j * mean[:, 1]
    lo, hi = np.radians(model.shape.roll_range)
    cs, ts = [], []
    n = len(mean)
    for a in range(n):
        for b in range(a + 1, n):
            A, B = cands[a], cands[b]
            if len(A) == 0 or len(B) == 0:
                continue
            za = (A[:, 0] + 1j * A[:, 1])[:, None]
            zb = (B[:, 0] + 1j * B[:, 1])[None, :]
            c = (zb - za) / (zm[b] - zm[a])
            t = za - c * zm[a]
            ied = np.abs(c)
            roll = np.angle(c)
            ok = (roll >= lo) & (roll <= hi) & (ied >= 2.0)
            ok &= _scale_ok(model, a, ied, A[:, None, 3]) & _scale_ok(model, b, ied, B[None, :, 3])
            cs.append(c[ok])
            ts.append(t[ok])
    if not cs:
        return np.zeros(0, complex), np.zeros(0, complex)
    return np.concatenate(cs), np.concatenate(ts)


def _refit(model, cands, rows, ev):
    """Weighted least-squares similarity + shape modes through the inlier detections of one
    hypothesis; returns (c, t, b) with b the clipped mode coefficients."""
    inl = np.flatnonzero(rows >= 0)
    dst = np.array([cands[k][rows[k], :2] for k in inl])
    w = np.maximum(ev[inl], 1e-3) / model.loc_sigma[inl] ** 2  # evidence x precision
    return _fit_similarity_modes(model, inl, dst, w)


def assemble_faces(detections, model, *, scales=None, threshold=None, max_faces=50,
                   max_per_keypoint=60, overlap=0.3):
    """Fit the face model to keypoint detections: faces, best first.

    Parameters
    ----------
    detections : dict of str -> ndarray of shape (n_k, 3)
        ``x, y, score`` per keypoint (raw detector scores, as :meth:`KeypointDetector.detect`
        returns them); keypoints the model does not use are ignored, missing ones count as
        undetected.
    model : FaceModel
    scales : dict of str -> ndarray of shape (n_k,), optional
        Pyramid scale of each detection; restricts hypotheses to faces of the matching size.
    threshold : float, optional
        Minimum face probability (default ``model.threshold``).
    max_faces : int
    max_per_keypoint : int
        Most probable detections per keypoint used.
    overlap : float
        A face whose box overlaps a better face's by more than this IoU is suppressed.

    Returns
    -------
    faces : list of Face
        Sorted by decreasing score.

    Raises
    ------
    ValueError
        If ``threshold`` is not in [0, 1] or a detection array is not (n, 3).
    """
    thr = model.threshold if threshold is None else float(threshold)
    if not 0.0 <= thr <= 1.0:
        raise ValueError(f"threshold must be a probability in [0, 1]; got {threshold!r}")
    for k, d in detections.items():
        d = np.asarray(d)
        if d.size and (d.ndim != 2 or d.shape[1] != 3):
            raise ValueError(f"detections[{k!r}] must have shape (n, 3); got {d.shape}")
    names = model.shape.names
    cands = _candidates(detections, scales, model, int(max_per_keypoint))
    c, t = _hypotheses(model, cands)
    if len(c) == 0:
        return []
    ev, rows = _evidence(model, cands, c, t, np.abs(c))
    raw = ev.sum(axis=1)
    order = np.argsort(-raw, kind="stable")
    # hypotheses are refitted best first; the refit can raise a score (a better transform
    # finds more inliers), so only those below half the score the threshold needs are skipped
    raw_min = model.face_evidence(thr)
    kept, used, boxes = [], [set() for _ in names], []
    for h in order[:2000]:
        if raw[h] < 0.5 * raw_min or len(kept) >= max_faces:
            break
        if any(rows[h, k] in used[k] for k in range(len(names)) if rows[h, k] >= 0):
            continue
        cf, tf, b = _refit(model, cands, rows[h], ev[h])
        ied = np.abs(cf)
        if not ied > 0:
            continue
        shp = model.shape.mean + (b @ model.shape.modes).reshape(-1, 2) if len(b) else \
            model.shape.mean
        zs = shp[:, 0] + 1j * shp[:, 1]
        ev2, rows2 = _evidence(model, cands, np.array([cf]), np.array([tf]), np.array([ied]),
                               mean=shp)
        ev2, rows2 = ev2[0], rows2[0]
        if (rows2 < 0).sum() > len(names) - 2:
            continue
        if any(rows2[k] in used[k] for k in range(len(names)) if rows2[k] >= 0):
            continue
        score = float(model.face_probability(ev2.sum()))
        if score < thr:
            continue
        corners = np.array([BOX[0] + 1j * BOX[1], BOX[2] + 1j * BOX[1], BOX[2] + 1j * BOX[3],
                            BOX[0] + 1j * BOX[3]])
        zc = cf * (corners + 0.5 * (zs[names.index("left_eye_center")]
                                    + zs[names.index("right_eye_center")])) + tf
        box = (zc.real.min(), zc.imag.min(), zc.real.max(), zc.imag.max())
        if any(_iou(box, bx) > overlap for bx in boxes):
            continue
        kps = {}
        zp = cf * zs + tf
        predicted = {name: (float(zp[k].real), float(zp[k].imag)) for k, name in enumerate(names)}
        for k, name in enumerate(names):
            if rows2[k] >= 0:
                x, y, p, _ = cands[k][rows2[k]]
                kps[name] = (float(x), float(y), float(p))
                used[k].add(int(rows2[k]))
            else:
                kps[name] = (math.nan, math.nan, math.nan)
        boxes.append(box)
        kept.append(Face(score, tuple(float(v) for v in box), kps, float(ied),
                         float(np.degrees(np.angle(cf))), float(ev2.sum()), predicted))
    kept.sort(key=lambda f: -f.score)
    return kept


def _fit_similarity_modes(model, idx, dst, w):
    """Weighted least-squares similarity + shape modes of the model's keypoints ``idx`` onto
    image points ``dst`` (weights ``w``): (c, t, b) with b the clipped mode coefficients."""
    shape = model.shape
    c, t = _similarity(shape.mean[idx], dst, w)
    b = np.zeros(len(shape.variances))
    if len(idx) >= 4 and len(b):
        # residual in the model frame, projected on the modes of the given coordinates
        zd = (dst[:, 0] + 1j * dst[:, 1] - t) / c
        r = np.column_stack([zd.real, zd.imag]) - shape.mean[idx]
        cols = np.column_stack([2 * idx, 2 * idx + 1]).reshape(-1)
        sw = np.repeat(np.sqrt(w), 2)
        P = shape.modes[:, cols].T * sw[:, None]
        reg = np.diag(0.05 ** 2 / np.maximum(shape.variances, 1e-12))
        b = np.linalg.solve(P.T @ P + reg, P.T @ (r.reshape(-1) * sw))
        lim = 3.0 * np.sqrt(shape.variances)
        b = np.clip(b, -lim, lim)
    return c, t, b


def _iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
