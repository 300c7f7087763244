"""Evaluation of keypoint detections with the FSA paper's criteria (section 3.3).

For one keypoint type (say ``left_eye_center``) in one image with faces f = 1..F:

- a *visible* keypoint k_f (annotated, with a finite inter-eye distance IED_f) is **detected** at
  threshold t if some detection with score >= t lies within ``detect_radius`` x IED_f of it
  (0.05 in the paper);
- a detection p is a **false positive** if ||p - k_f|| >= ``fp_radius`` x IED_f for every face f
  whose keypoint is annotated (0.10 in the paper). Detections between the two radii are neither
  missed nor false: they are not counted against the detector.

Over a set of images, at each threshold t: recall = detected keypoints / visible keypoints, and
precision = detections that are not false positives / all detections (both over score >= t).
Average precision is the step integral sum_i (R_i - R_{i-1}) P_i over decreasing thresholds
(scikit-learn's definition), so it is at most the highest recall reached.

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3 (detection criteria) and Fig. 7.
"""

from dataclasses import dataclass

import numpy as np

__all__ = [
    "PRCurve",
    "evaluate_detections",
    "evaluate_detector",
    "evaluate_faces",
    "evaluate_keypoint",
    "evaluate_merged",
    "face_keypoint_errors",
    "match_image",
    "recall_at_precision",
]


@dataclass
class PRCurve:
    """Precision-recall curve of one keypoint over a set of images.

    Attributes
    ----------
    precision, recall, thresholds : ndarray of shape (n_thresholds,)
        At each distinct detection score, in decreasing order of threshold.
    average_precision : float
    n_positives : int
        Visible keypoints evaluated.
    n_detections : int
        Detections evaluated (all scores).
    """

    precision: np.ndarray
    recall: np.ndarray
    thresholds: np.ndarray
    average_precision: float
    n_positives: int
    n_detections: int

    def as_dict(self):
        """JSON-friendly summary (AP, counts, best recall)."""
        return {
            "average_precision": float(self.average_precision),
            "n_positives": int(self.n_positives),
            "n_detections": int(self.n_detections),
            "max_recall": float(self.recall.max()) if self.recall.size else 0.0,
        }


def _check_radii(detect_radius, fp_radius):
    if not (0 < detect_radius <= fp_radius):
        raise ValueError(
            f"need 0 < detect_radius <= fp_radius; got detect_radius={detect_radius}, "
            f"fp_radius={fp_radius}"
        )


def _as_detections(detections, name="detections"):
    det = np.asarray(detections, dtype=np.float64)
    if det.size == 0:
        return np.zeros((0, 3))
    if det.ndim != 2 or det.shape[1] != 3:
        raise ValueError(f"{name} must have shape (n, 3) of x, y, score; got {det.shape}")
    return det


def match_image(detections, points, ied, *, detect_radius=0.05, fp_radius=0.10):
    """Apply the detection criteria in one image for one keypoint type.

    Parameters
    ----------
    detections : array_like of shape (n_detections, 3)
        x, y, score.
    points : array_like of shape (n_faces, 2)
        x, y of this keypoint for every face; NaN where not annotated.
    ied : array_like of shape (n_faces,)
        Inter-eye distance of every face (NaN if unknown: that face is not evaluated and does
        not excuse detections).
    detect_radius, fp_radius : float
        In units of IED.

    Returns
    -------
    false_positive : ndarray of shape (n_detections,), bool
    best_score : ndarray of shape (n_visible,)
        For every visible keypoint (finite point and IED, in face order), the highest score of a
        detection within ``detect_radius`` x IED; ``-inf`` when none.

    Raises
    ------
    ValueError
        If shapes disagree or the radii are not 0 < detect_radius <= fp_radius.
    """
    _check_radii(detect_radius, fp_radius)
    det = _as_detections(detections)
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ied = np.asarray(ied, dtype=np.float64).reshape(-1)
    if ied.shape[0] != pts.shape[0]:
        raise ValueError(f"ied has {ied.shape[0]} faces but points has {pts.shape[0]}")
    ok = np.isfinite(pts).all(axis=1) & np.isfinite(ied) & (ied > 0)
    pts, ied = pts[ok], ied[ok]
    if pts.shape[0] == 0:
        return np.ones(det.shape[0], dtype=bool), np.zeros(0)
    # relative distance of every detection to every face's keypoint: (n_det, n_faces)
    rel = np.hypot(det[:, None, 0] - pts[None, :, 0], det[:, None, 1] - pts[None, :, 1])
    rel /= ied[None, :]
    false_positive = (rel >= fp_radius).all(axis=1)
    within = rel <= detect_radius
    scores = np.where(within, det[:, 2:3], -np.inf)
    best = scores.max(axis=0) if det.shape[0] else np.full(pts.shape[0], -np.inf)
    return false_positive, best


def evaluate_keypoint(detections, points, ieds, *, detect_radius=0.05, fp_radius=0.10):
    """Precision-recall curve of one keypoint over a set of images.

    Parameters
    ----------
    detections : list of array_like of shape (n_i, 3)
        Per image: x, y, score.
    points : list of array_like of shape (n_faces_i, 2)
        Per image: the keypoint of every face (NaN where not annotated).
    ieds : list of array_like of shape (n_faces_i,)
        Per image: inter-eye distance of every face.
    detect_radius, fp_radius : float
        In units of IED (paper: 0.05 and 0.10).

    Returns
    -------
    curve : PRCurve

    Raises
    ------
    ValueError
        If the three lists differ in length, or an entry has the wrong shape.
    """
    if not (len(detections) == len(points) == len(ieds)):
        raise ValueError(
            f"detections, points and ieds must list the same images; got lengths "
            f"{len(detections)}, {len(points)}, {len(ieds)}"
        )
    all_scores, all_fp, all_best = [], [], []
    for det, pts, ied in zip(detections, points, ieds, strict=True):
        det = _as_detections(det)
        fp, best = match_image(det, pts, ied, detect_radius=detect_radius, fp_radius=fp_radius)
        all_scores.append(det[:, 2])
        all_fp.append(fp)
        all_best.append(best)
    scores = np.concatenate(all_scores) if all_scores else np.zeros(0)
    fp = np.concatenate(all_fp) if all_fp else np.zeros(0, bool)
    best = np.concatenate(all_best) if all_best else np.zeros(0)
    return _curve(scores, fp, best)


def _curve(scores, fp, best):
    n_pos, n_det = best.size, scores.size
    thresholds = np.unique(scores)[::-1]
    if thresholds.size == 0:
        return PRCurve(np.zeros(0), np.zeros(0), thresholds, 0.0, n_pos, n_det)
    neg = -np.sort(-scores)  # scores descending
    neg_good = -np.sort(-scores[~fp])
    neg_best = -np.sort(-best)
    # counts of values >= t for descending arrays: searchsorted on the negated ascending array
    n_at = np.searchsorted(-neg, -thresholds, side="right")
    good_at = np.searchsorted(-neg_good, -thresholds, side="right")
    found_at = np.searchsorted(-neg_best, -thresholds, side="right")
    precision = good_at / n_at
    recall = found_at / n_pos if n_pos else np.zeros(thresholds.size)
    ap = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))
    return PRCurve(precision, recall, thresholds, ap, n_pos, n_det)


def evaluate_detections(detections, images, keypoints, *, detect_radius=0.05, fp_radius=0.10):
    """PR curves per keypoint for detector outputs on annotated images.

    Parameters
    ----------
    detections : list of dict
        Per image, ``{name: ndarray (n, 3)}`` as returned by ``KeypointDetector.detect``.
    images : list of cvfs.datasets.faces.AnnotatedImage
        The same images, in the same order.
    keypoints : list of str
        Names to evaluate (each must be a key of every detection dict).
    detect_radius, fp_radius : float
        In units of IED.

    Returns
    -------
    curves : dict of str -> PRCurve

    Raises
    ------
    ValueError
        If the lists differ in length or a keypoint is missing from a detection dict.
    """
    from cvfs.datasets.landmarks import keypoint_index

    if len(detections) != len(images):
        raise ValueError(
            f"detections and images must have the same length; got {len(detections)} and "
            f"{len(images)}"
        )
    curves = {}
    for name in keypoints:
        k = keypoint_index(name)
        dets = []
        for i, d in enumerate(detections):
            if name not in d:
                raise ValueError(f"detections[{i}] has no keypoint {name!r}; has {sorted(d)}")
            dets.append(d[name])
        curves[name] = evaluate_keypoint(
            dets, [im.points[:, k] for im in images], [im.ied() for im in images],
            detect_radius=detect_radius, fp_radius=fp_radius,
        )
    return curves


def evaluate_merged(detections, images, keypoints, *, detect_radius=0.05, fp_radius=0.10):
    """One PR curve for several keypoints taken as one class (e.g. "eye" = both eye centres).

    Used to compare with detectors that do not tell the keypoints apart (OpenCV's eye cascade):
    every annotated point of ``keypoints`` of every face is a target, a detection is a false
    positive if it is >= ``fp_radius`` IED from all of them.

    Parameters
    ----------
    detections : list of ndarray of shape (n_i, 3)
        Per image, the merged detections (e.g. left and right eye detections concatenated).
    images : list of AnnotatedImage
    keypoints : list of str

    Returns
    -------
    curve : PRCurve
    """
    from cvfs.datasets.landmarks import keypoint_index

    idx = [keypoint_index(k) for k in keypoints]
    pts = [im.points[:, idx].reshape(-1, 2) for im in images]
    ieds = [np.repeat(im.ied(), len(idx)) for im in images]
    return evaluate_keypoint(detections, pts, ieds, detect_radius=detect_radius,
                             fp_radius=fp_radius)


def evaluate_detector(detector, images, keypoints=None, *, threshold=-np.inf, max_scale=None,
                      detect_radius=0.05, fp_radius=0.10, verbose=False):
    """Run a detector on annotated images and evaluate it with the paper's criteria.

    Parameters
    ----------
    detector : KeypointDetector
    images : list of cvfs.datasets.faces.AnnotatedImage
    keypoints : list of str, optional
        Default: the detector's keypoints that the images' dataset annotates.
    threshold : float
        Detection threshold (default -inf: every local maximum, the full PR curve).
    max_scale : float, optional
        Largest pyramid scale (default: the detector's).
    detect_radius, fp_radius : float
    verbose : bool
        Progress bar.

    Returns
    -------
    curves : dict of str -> PRCurve
    seconds_per_image : float
        Mean detection time.

    Raises
    ------
    ValueError
        If no keypoint is both detected and annotated.
    """
    import time

    from tqdm.auto import tqdm

    from cvfs.datasets.faces import ANNOTATED
    from cvfs.io.images import read_image

    if keypoints is None:
        annotated = set.intersection(*(set(ANNOTATED[im.dataset]) for im in images)) \
            if images else set()
        keypoints = [k for k in detector.keypoints if k in annotated]
    if not keypoints:
        raise ValueError(
            f"no keypoint to evaluate: the detector finds {detector.keypoints}, the images "
            "annotate none of them"
        )
    dets, t = [], 0.0
    for im in tqdm(images, disable=not verbose, desc="detect"):
        img = read_image(im.path)
        t0 = time.perf_counter()
        dets.append(detector.detect(img, threshold=threshold, max_scale=max_scale))
        t += time.perf_counter() - t0
    curves = evaluate_detections(dets, images, keypoints, detect_radius=detect_radius,
                                 fp_radius=fp_radius)
    return curves, t / max(len(images), 1)


def recall_at_precision(curve, precision):
    """Highest recall reached at a threshold whose precision is at least ``precision``.

    Parameters
    ----------
    curve : PRCurve
    precision : float in [0, 1]

    Returns
    -------
    recall : float
        0.0 if no threshold reaches that precision.

    Raises
    ------
    ValueError
        If ``precision`` is outside [0, 1].
    """
    if not 0.0 <= precision <= 1.0:
        raise ValueError(f"precision must be in [0, 1]; got {precision}")
    ok = curve.precision >= precision
    return float(curve.recall[ok].max()) if ok.any() else 0.0


def _check_face_lists(faces, images, **positive):
    """Raise ValueError unless ``faces`` and ``images`` have the same length and the keyword
    value is positive."""
    if len(faces) != len(images):
        raise ValueError(f"faces and images must list the same images; got lengths "
                         f"{len(faces)}, {len(images)}")
    (name, value), = positive.items()
    if not value > 0:
        raise ValueError(f"{name} must be positive; got {value!r}")


def evaluate_faces(faces, images, *, radius=0.10):
    """Face-level precision-recall: a face is right when both its eyes match an annotated face.

    Within each image, faces in decreasing score order are matched greedily: a face matches
    the first annotated face not yet matched whose left and right eye centres both lie within
    ``radius`` x IED of the face's (a face without both eyes matches none); unmatched faces are
    false positives.

    Parameters
    ----------
    faces : list of list of cvfs.keypoints.faces.Face
        Per image.
    images : list of cvfs.datasets.faces.AnnotatedImage
        Annotated faces with both eyes and a positive IED count as positives.
    radius : float
        In units of IED.

    Returns
    -------
    curve : PRCurve

    Raises
    ------
    ValueError
        If the lists differ in length or ``radius`` is not positive.
    """
    from cvfs.datasets.landmarks import keypoint_index

    _check_face_lists(faces, images, radius=radius)
    le, re = keypoint_index("left_eye_center"), keypoint_index("right_eye_center")
    scores, fp, best = [], [], []
    for fl, im in zip(faces, images, strict=True):
        pts = np.asarray(im.points, np.float64)[:, [le, re]]
        ied = im.ied()
        ok = np.isfinite(pts).all(axis=(1, 2)) & np.isfinite(ied) & (ied > 0)
        pts, ied = pts[ok], ied[ok]
        got = np.full(len(pts), -np.inf)
        for f in sorted(fl, key=lambda f: -f.score):
            eyes = np.array([f.keypoints["left_eye_center"][:2],
                             f.keypoints["right_eye_center"][:2]])
            hit = -1
            if np.isfinite(eyes).all() and len(pts):
                d = np.hypot(*(pts - eyes[None]).transpose(2, 0, 1)) / ied[:, None]
                cand = np.flatnonzero((d < radius).all(axis=1) & ~np.isfinite(got))
                hit = int(cand[0]) if len(cand) else -1
            if hit >= 0:
                got[hit] = f.score
            scores.append(f.score)
            fp.append(hit < 0)
        best.append(got)
    return _curve(np.array(scores, np.float64), np.array(fp, bool),
                  np.concatenate(best) if best else np.zeros(0))


def face_keypoint_errors(faces, images, keypoints=("left_eye_center", "right_eye_center"), *,
                         max_distance=0.5):
    """Error vectors of the keypoints of the face nearest to each annotated face.

    For every annotated face with both eyes and a positive inter-eye distance (IED), the face
    (of the same image) whose eyes are nearest -- the larger of its two eye distances, in units
    of the annotated IED -- is taken when that distance is below ``max_distance``; each of its
    ``keypoints`` gives an error vector ``found - annotated`` in pixels. Several annotated faces
    may take the same face. Used to tell a systematic offset (bias) from spread, by face size.

    Parameters
    ----------
    faces : list of list of cvfs.keypoints.faces.Face
        Per image.
    images : list of cvfs.datasets.faces.AnnotatedImage
    keypoints : sequence of str
        Keypoints whose errors are returned.
    max_distance : float
        Largest eye distance (IED) of a match.

    Returns
    -------
    result : dict
        ``ied`` (n,), ``distance`` (n,; the matched face's eye distance in IED, ``inf`` when no
        face has both eyes), ``matched`` (n, bool), ``score`` (n,; the matched face's score,
        NaN when unmatched), ``errors`` (n, len(keypoints), 2; pixels, NaN when unmatched or
        where the face or the annotation lacks the keypoint), ``image`` (n,; image index),
        over the n annotated faces in image order.

    Raises
    ------
    ValueError
        If the lists differ in length or ``max_distance`` is not positive.
    """
    from cvfs.datasets.landmarks import keypoint_index

    _check_face_lists(faces, images, max_distance=max_distance)
    eyes = [keypoint_index("left_eye_center"), keypoint_index("right_eye_center")]
    kidx = [keypoint_index(k) for k in keypoints]
    ieds, dist, score, errs, img = [], [], [], [], []
    for i, (fl, im) in enumerate(zip(faces, images, strict=True)):
        pts = np.asarray(im.points, np.float64)
        ied = im.ied()
        ok = np.isfinite(pts[:, eyes]).all(axis=(1, 2)) & np.isfinite(ied) & (ied > 0)
        found = np.array([[f.keypoints.get(k, (np.nan, np.nan))[:2] for k in
                           ("left_eye_center", "right_eye_center", *keypoints)] for f in fl],
                         np.float64).reshape(len(fl), 2 + len(kidx), 2)
        for g in np.flatnonzero(ok):
            d = np.full(len(fl), np.inf)
            if len(fl):
                e = np.hypot(*(found[:, :2] - pts[g, eyes][None]).transpose(2, 0, 1))
                d = np.where(np.isfinite(e).all(axis=1), e.max(axis=1) / ied[g], np.inf)
            j = int(np.argmin(d)) if len(fl) else -1
            dj = float(d[j]) if j >= 0 else np.inf
            hit = dj < max_distance
            ieds.append(ied[g])
            dist.append(dj)
            score.append(float(fl[j].score) if hit else np.nan)
            errs.append(found[j, 2:] - pts[g, kidx] if hit else np.full((len(kidx), 2), np.nan))
            img.append(i)
    dist = np.array(dist, np.float64)
    return {"ied": np.array(ieds, np.float64), "distance": dist,
            "matched": dist < max_distance, "score": np.array(score, np.float64),
            "errors": np.array(errs, np.float64).reshape(len(dist), len(kidx), 2),
            "image": np.array(img, np.int64)}
