"""Soft-cascade calibration of trained keypoint classifiers (no retraining).

:func:`calibrate_detector` turns every classifier of a :class:`KeypointDetector` into a soft
cascade with a rejection threshold after every feature (:meth:`AdditiveModel.soft_cascade`):

1. positives: the windows within 1 px of the keypoint on the levels where the face's inter-eye
   distance is in [20, 40] px (the training rule, :mod:`cvfs.keypoints.examples`), one bag per
   annotated face; the best-scoring window of each face is what the cascade must keep;
2. negatives: windows drawn uniformly from the whole detection pyramid of each image (the
   windows a detection scan visits), at least 0.5 IED from the keypoint of every face;
3. the features are ordered greedily (most negatives rejected per unit of cost, a HOG column
   costing ``hog_cost`` Haar columns) and the thresholds lose at most ``miss_rate`` of the faces,
   spread over the thresholds by the rejection distribution (``front_load``).

The scores of windows that pass every threshold are unchanged, so only the windows rejected early
change (to -inf): detections keep their scores.

References
----------
Bourdev and Brandt, "Robust object detection via soft cascade", CVPR 2005. Zhang and Viola,
"Multiple-instance pruning for learning efficient cascade detectors", NIPS 2007.
"""

import logging

import numpy as np
from tqdm.auto import tqdm

from cvfs.base import check_random_state
from cvfs.datasets.landmarks import keypoint_index
from cvfs.io.images import read_image
from cvfs.keypoints._additive import best_of_bags
from cvfs.keypoints.degrade import degrade_pixels
from cvfs.keypoints.detector import KeypointDetector
from cvfs.keypoints.examples import negative_mask, positive_examples
from cvfs.keypoints.train import ExampleFeatures
from cvfs.vision import HALF, LevelCache, gaussian_pyramid, window_centres

__all__ = ["calibrate_detector", "cascade_statistics"]

log = logging.getLogger(__name__)


def calibrate_detector(detector, images, *, miss_rate=0.005, n_negatives=60_000, hog_cost=8.0,
                       neg_radius=0.5, ied_range=(20.0, 40.0), front_load=0.0,
                       random_state=None, verbose=False):
    """Recalibrate the soft cascades of a detector on annotated images.

    Parameters
    ----------
    detector : KeypointDetector
    images : list of cvfs.datasets.faces.AnnotatedImage
        Calibration images (training data: they must annotate the detector's keypoints and the
        eye centres); mirrored or degraded ones (``attrs["mirror"]``, ``attrs["degrade"]``,
        :func:`cvfs.keypoints.degrade.with_degraded`) are read as training reads them.
    miss_rate : float
        Fraction of the annotated faces whose best window the cascade may reject.
    n_negatives : int
        Negative windows drawn (uniformly over the pyramids of all images).
    hog_cost : float
        Cost of a HOG column relative to a Haar column, for the feature order.
    neg_radius : float
        Negatives lie at least ``neg_radius`` IED from the keypoint of every face.
    ied_range : (float, float)
        Levels of the positives (the training rule).
    front_load : float
        Exponent of the rejection distribution (0: the miss budget spread evenly over the
        thresholds; > 0: spent early), see :meth:`AdditiveModel.soft_cascade`.
    random_state : None, int or Generator
    verbose : bool

    Returns
    -------
    detector : KeypointDetector
        Same classifiers, features reordered, a threshold after every feature;
        ``info["training"]["calibration"]`` records the settings and, per keypoint, the
        calibration statistics of :func:`cascade_statistics`.

    Raises
    ------
    ValueError
        If ``images`` is empty, ``n_negatives`` < 1 or a keypoint has no positives.
    """
    if not images:
        raise ValueError("images must hold at least one annotated image")
    if int(n_negatives) < 1:
        raise ValueError(f"n_negatives must be a positive int; got {n_negatives!r}")
    rng = check_random_state(random_state)
    names = detector.keypoints
    feats = ExampleFeatures.from_images(images, detector.pool, detector.scales_per_octave)
    X_all, columns, far = _negatives(detector, images, int(n_negatives), neg_radius, rng, verbose)
    out, stats = {}, {}
    for name in tqdm(names, desc="calibrate", disable=not verbose):
        model = detector.classifiers[name]
        kidx = keypoint_index(name)
        pos, bags = [], []
        for i, im in enumerate(images):
            shape = _shape(im)
            for f in range(im.n_faces):
                p = positive_examples(im.points[f:f + 1, kidx], im.ied()[f:f + 1], shape,
                                      image_index=i, ied_range=ied_range,
                                      scales_per_octave=detector.scales_per_octave)
                pos.append(p)
                bags.append(np.full(p.size, len(bags)))
        pos, bags = np.concatenate(pos), np.concatenate(bags)
        if pos.size == 0:
            raise ValueError(f"no positive examples for {name!r}: is it annotated in the images?")
        X_pos = feats(pos, columns=model.features)
        X_neg = X_all[far[name]][:, np.searchsorted(columns, model.features)]
        cost = np.where(detector.pool.is_hog(model.features), float(hog_cost), 1.0)
        out[name] = model.soft_cascade(X_pos, X_neg, bags=bags, miss_rate=miss_rate, cost=cost,
                                       front_load=front_load)
        where = {int(f): j for j, f in enumerate(model.features)}
        perm = [where[int(f)] for f in out[name].features]  # new order in old columns
        stats[name] = cascade_statistics(out[name], X_pos[:, perm], X_neg[:, perm], bags)
        log.info("%s: %s", name, stats[name])
    info = dict(detector.info)
    info["training"] = dict(info.get("training", {}))
    info["training"]["calibration"] = {
        "method": "soft cascade: greedy order, a threshold after every feature",
        "n_images": len(images), "miss_rate": miss_rate, "n_negatives": int(len(X_all)),
        "hog_cost": hog_cost, "neg_radius": neg_radius, "ied_range": list(ied_range),
        "front_load": front_load,
        "keypoints": stats}
    return KeypointDetector(out, detector.pool_params, thresholds=detector.thresholds,
                            scales_per_octave=detector.scales_per_octave,
                            max_scale=detector.max_scale, nms_radius=detector.nms_radius,
                            info=info)


def cascade_statistics(model, X_pos, X_neg, bags=None):
    """How a cascaded model treats positives and negatives.

    Parameters
    ----------
    model : AdditiveModel
        With a cascade.
    X_pos, X_neg : ndarray of shape (n, k)
        Features in model order.
    bags : array_like of int of shape (n_pos,), optional

    Returns
    -------
    stats : dict
        ``positives_rejected`` (fraction of windows), ``bags_rejected`` (fraction of bags whose
        best window is rejected), ``negatives_passing`` (fraction of negatives passing every
        threshold) and ``features_per_negative`` (mean number of features computed).
    """
    def run(X):
        c = model.contributions(X)
        z = np.full(len(X), model.intercept)
        alive = np.ones(len(X), dtype=bool)
        n_feat = np.zeros(len(X))
        thr = np.full(model.n_features, -np.inf)
        thr[model.cascade_ends - 1] = model.cascade_thresholds
        for j in range(model.n_features):
            n_feat += alive
            z += c[:, j]
            alive &= z >= thr[j]
        return alive, n_feat, z

    alive_p, _, z = run(X_pos)
    alive_n, n_feat, _ = run(X_neg)
    stats = {"positives_rejected": float(1 - alive_p.mean()),
             "negatives_passing": float(alive_n.mean()),
             "features_per_negative": float(n_feat.mean())}
    if bags is not None:
        stats["bags_rejected"] = float(1 - alive_p[best_of_bags(z, np.asarray(bags))].mean())
    return stats


def _shape(im):
    if "shape" not in im.attrs:
        im.attrs["shape"] = read_image(im.path).shape[:2]
    return tuple(im.attrs["shape"])


def _negatives(detector, images, n_total, neg_radius, rng, verbose):
    """Features (every column any classifier uses) of negative windows drawn uniformly over the
    detection pyramids, and per keypoint a mask of the windows far enough from it."""
    columns = np.unique(np.concatenate([m.features for m in detector.classifiers.values()]))
    per_image = np.bincount(rng.integers(0, len(images), n_total), minlength=len(images))
    X, masks = [], {k: [] for k in detector.keypoints}
    for im, n_i in tqdm(list(zip(images, per_image, strict=True)), desc="negatives",
                        disable=not verbose):
        if n_i == 0:
            continue
        img = read_image(im.path)
        if im.attrs.get("degrade") is not None:  # cvfs.keypoints.degrade.with_degraded
            img = degrade_pixels(img, **im.attrs["degrade"])
        if im.attrs.get("mirror", False):
            img = np.ascontiguousarray(img[:, ::-1])
        levels = gaussian_pyramid(img, scales_per_octave=detector.scales_per_octave,
                                  max_scale=detector.max_scale, min_size=detector.pool.window)
        sizes = np.array([len(window_centres(lv.shape)) for lv in levels])
        draw = rng.choice(sizes.sum(), size=min(int(n_i), int(sizes.sum())), replace=False)
        which = np.searchsorted(np.cumsum(sizes), draw, side="right")
        for li in np.unique(which):
            lv = levels[li]
            idx = draw[which == li] - (sizes[:li].sum())
            w = lv.shape[1] - 2 * HALF + 1
            centres = np.column_stack([idx // w + HALF, idx % w + HALF]).astype(np.int64)
            X.append(detector.pool.compute(LevelCache(lv), centres, columns=columns))
            for k in detector.keypoints:
                ok = negative_mask(lv, im.points[:, keypoint_index(k)], im.ied(),
                                   neg_radius=neg_radius)
                masks[k].append(ok[centres[:, 0], centres[:, 1]])
    return np.concatenate(X), columns, {k: np.concatenate(v) for k, v in masks.items()}

