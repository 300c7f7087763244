"""Training keypoint detectors: examples -> features -> classifier -> hard-negative mining.

:func:`train_detector` trains one classifier per keypoint on annotated images
(:class:`cvfs.datasets.faces.AnnotatedImage`) and returns a :class:`KeypointDetector`:

1. positives within 1 px of the keypoint on the pyramid levels where the face's IED is in
   [20, 40] px, and random negatives >= 0.5 IED from it on those levels (or, with
   ``negative_levels="all"``, on every level of the image) (:mod:`cvfs.keypoints.examples`); with
   ``mirror=True`` the mirrored copy of every image (left and right points swapped) adds its
   examples too;
2. features of the examples computed from their positions (one pyramid level and one
   :class:`cvfs.vision.LevelCache` per image and level), once per example and run, never stored
   on disk;
3. a classifier (FSA with piecewise-linear learners and the Lorenz, logistic or SVM loss, or the
   LogitBoost baseline) on all pool columns, optionally with each column clipped to its central
   quantiles so the learners' equal bins cover the bulk of the data;
4. hard-negative mining rounds (:func:`cvfs.keypoints.mining.run_mining`): every training image
   is scanned and the highest-scoring negatives are added; a checkpoint per keypoint is written
   after every round so an interrupted run resumes.

Every fitted classifier is turned into a soft cascade right after fitting (a threshold after
every feature, the features in the order that rejects the training negatives soonest, 0.1% of
the training positives lost in all by default; :func:`with_cascade`), so the mining scans
and the returned detector reject most windows after a few features.

References
----------
Barbu, She, Ding, Gramajo, TPAMI 2017, section 3.3.
"""

import hashlib
import logging
import time
from pathlib import Path

import numpy as np

from cvfs.base import check_random_state, seed_from
from cvfs.datasets.faces import mirrored
from cvfs.datasets.landmarks import keypoint_index
from cvfs.io.images import read_image
from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints.boosting import LogitBoostClassifier
from cvfs.keypoints.degrade import degrade_pixels, with_degraded
from cvfs.keypoints.detector import KeypointDetector
from cvfs.keypoints.examples import (
    EXAMPLE_DTYPE,
    face_levels,
    negative_mask,
    positive_examples,
    random_negatives,
)
from cvfs.keypoints.level_scan import cascade_hardness
from cvfs.keypoints.mining import run_mining
from cvfs.keypoints.recipe import NEGATIVE_LEVELS, TrainingRecipe, check_method, methods
from cvfs.vision import FeaturePool, LevelCache, pyramid_level, pyramid_scales

__all__ = ["NEGATIVE_LEVELS", "ExampleFeatures", "TrainingRecipe", "additive_from_fsa",
           "check_method", "data_description", "fit_classifier", "methods", "train_detector",
           "with_cascade", "with_mirrored"]

log = logging.getLogger(__name__)

class ExampleFeatures:
    """Feature rows of examples recomputed from their positions.

    Parameters
    ----------
    paths : list of Path
        Training images; ``examples["image"]`` indexes this list.
    pool : cvfs.vision.FeaturePool
    scales_per_octave : int
    flips : sequence of bool, optional
        Per path: use the horizontally mirrored pixels (see :func:`cvfs.datasets.faces.mirrored`).
    degrades : sequence of dict or None, optional
        Per path: keyword arguments of :func:`cvfs.keypoints.degrade.degrade_pixels` applied to
        the pixels before any flip (None: the image as read).
    """

    def __init__(self, paths, pool, scales_per_octave=4, flips=None, degrades=None):
        self.paths = list(paths)
        self.pool = pool
        self.scales_per_octave = scales_per_octave
        self.flips = [False] * len(self.paths) if flips is None else [bool(f) for f in flips]
        self.degrades = [None] * len(self.paths) if degrades is None else list(degrades)
        for name, v in (("flips", self.flips), ("degrades", self.degrades)):
            if len(v) != len(self.paths):
                raise ValueError(f"{name} must have one entry per path ({len(self.paths)}); "
                                 f"got {len(v)}")

    @classmethod
    def from_images(cls, images, pool, scales_per_octave=4):
        """Features of examples of annotated images (mirrored ones, ``attrs["mirror"]``, are
        flipped; degraded ones, ``attrs["degrade"]``, degraded: :mod:`cvfs.keypoints.degrade`)."""
        return cls([im.path for im in images], pool, scales_per_octave,
                   flips=[im.attrs.get("mirror", False) for im in images],
                   degrades=[im.attrs.get("degrade") for im in images])

    def levels(self, i, ks):
        """LevelCaches of image ``i`` for level exponents ``ks`` (dict k -> LevelCache)."""
        img = read_image(self.paths[i])
        if self.degrades[i] is not None:
            img = degrade_pixels(img, **self.degrades[i])
        if self.flips[i]:
            img = np.ascontiguousarray(img[:, ::-1])
        return {int(k): LevelCache(pyramid_level(img, int(k),
                                                 scales_per_octave=self.scales_per_octave))
                for k in ks}

    def __call__(self, examples, columns=None):
        """Features of ``examples`` (EXAMPLE_DTYPE) as float32 of shape (n, len(columns))."""
        examples = np.asarray(examples, dtype=EXAMPLE_DTYPE)
        m = self.pool.n_features if columns is None else len(columns)
        X = np.empty((examples.size, m), dtype=np.float32)
        order = np.lexsort((examples["level"], examples["image"]))
        ex = examples[order]
        bounds = np.flatnonzero(np.diff(ex["image"])) + 1
        for grp in np.split(np.arange(ex.size), bounds):
            if grp.size == 0:
                continue
            i = int(ex["image"][grp[0]])
            caches = self.levels(i, np.unique(ex["level"][grp]))
            for k, cache in caches.items():
                sel = grp[ex["level"][grp] == k]
                centres = np.column_stack([ex["y"][sel], ex["x"][sel]]).astype(np.int64)
                X[order[sel]] = self.pool.compute(cache, centres, columns=columns)
        return X


def with_mirrored(images):
    """``images`` followed by their mirrored copies (:func:`cvfs.datasets.faces.mirrored`): the
    example images of a run with ``mirror=True`` (image ``i + len(images)`` is image ``i``
    flipped)."""
    images = list(images)
    return images + [mirrored(im, _image_shape(im)[1]) for im in images]


def additive_from_fsa(est):
    """A fitted piecewise-linear :class:`cvfs.FSAClassifier` as an :class:`AdditiveModel` on
    its selected columns (``get_support(indices=True)`` order; ``response_table_`` rows hold
    each selected feature's bin origin and bins per unit).

    Raises
    ------
    ValueError
        If the classifier was fitted without piecewise-linear learners (``bins=None``).
    """
    if not est.bins:
        raise ValueError("FSAClassifier must be fitted with piecewise-linear learners "
                         f"(bins >= 1); got bins={est.bins!r}")
    support = est.get_support(indices=True)
    coef = np.asarray(est.coef_).reshape(support.size, -1)
    return AdditiveModel(support, est.response_table_[:, 0], est.response_table_[:, 1],
                         coef, est.intercept_, "linear")


def clip_ranges(X, quantile, *, max_rows=20000, block=1024, random_state=None):
    """Per-column ``[q, 1 - q]`` quantiles of ``X`` (on at most ``max_rows`` random rows).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    quantile : float in [0, 0.5)
    max_rows, block : int
        Rows sampled; columns per block (bounds the memory to ``max_rows * block`` floats).
    random_state : None, int or Generator

    Returns
    -------
    lo, hi : ndarray of shape (n_features,)

    Raises
    ------
    ValueError
        If ``quantile`` is not in [0, 0.5).
    """
    if not 0.0 <= quantile < 0.5:
        raise ValueError(f"quantile must be in [0, 0.5); got {quantile!r}")
    rng = check_random_state(random_state)
    n, m = X.shape
    rows = np.sort(rng.choice(n, size=min(n, max_rows), replace=False))
    lo, hi = np.empty(m), np.empty(m)
    for j in range(0, m, block):
        q = np.quantile(np.asarray(X[rows, j:j + block], dtype=np.float64),
                        [quantile, 1.0 - quantile], axis=0)
        lo[j:j + block], hi[j:j + block] = q
    return lo, hi


def fit_classifier(X, y, method="fsa-lorenz", *, k=300, bins=8, n_iter=300, mu=300,
                   annealing_boost=None, n_estimators=None, clip_quantile=None,
                   random_state=None, verbose=False):
    """Fit one keypoint classifier and return it as an :class:`AdditiveModel`.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) in {0, 1}
    method : str
        One of :func:`methods`: "fsa-<loss>" (FSAClassifier with that classifier loss of
        :data:`cvfs.core.losses.LOSSES`) or "logitboost".
    k : int
        Features kept by FSA (the paper: 1500).
    bins : int
        Bins of the piecewise-linear (FSA) or piecewise-constant (LogitBoost) learners.
    n_iter, mu : int
        FSA iterations and annealing parameter (paper: 500, 300).
    annealing_boost : float, optional
        Factor by which FSA lengthens its step while features are being removed
        (:mod:`cvfs.core.fsa`); None: the loss's default (Lorenz 10, logistic 4, SVM 10); 1.0:
        the plain 1/L step throughout. On the 600-face eye recipe the Lorenz default selects
        far better than 1.0, whose 500 short steps (1/L with the Lorenz curvature bound 2, 8x
        the logistic one) leave the selection unconverged: held-out AUC 0.984 vs 0.955, left-eye
        AP 0.454 vs 0.400 on the MTFL test crops (``docs/methods.md``, "Step size").
    n_estimators : int, optional
        LogitBoost rounds (default ``k``).
    clip_quantile : float, optional
        Clip every column to its ``[q, 1 - q]`` quantiles (:func:`clip_ranges`) before fitting,
        so the equal bins of the learners span the bulk of the data instead of its extremes
        (outside values fall in the end bins, as they do at detection time).
    random_state : None, int or Generator
    verbose : bool

    Returns
    -------
    model : AdditiveModel

    Raises
    ------
    ValueError
        If ``method`` is unknown.
    """
    check_method(method)
    if clip_quantile is not None:
        rng = check_random_state(random_state)
        lo, hi = clip_ranges(X, clip_quantile, random_state=rng)
        X = np.clip(X, lo.astype(X.dtype), hi.astype(X.dtype))
        random_state = seed_from(rng)
    if method == "logitboost":
        clf = LogitBoostClassifier(n_estimators=n_estimators or k, bins=bins,
                                   random_state=random_state, verbose=verbose)
        return clf.fit(X, y).model_
    from cvfs.estimators import FSAClassifier

    est = FSAClassifier(k=k, loss=method.split("-", 1)[1], n_iter=n_iter, mu=mu,
                        annealing_boost=annealing_boost, bins=bins, random_state=random_state,
                        verbose=verbose)
    return additive_from_fsa(est.fit(X, y))


def with_cascade(model, X, y, is_hog, miss_rate, *, front_load=10.0, hog_cost=8.0,
                 max_examples=(2000, 4000), random_state=None):
    """``model`` as a soft cascade for the mining scans: a threshold after every feature, the
    features in a rejection-first order (:meth:`AdditiveModel.soft_cascade` with the training
    negatives ``X[y == 0]``), losing at most ``miss_rate`` of the training positives; a HOG
    column (``is_hog``, a callable on pool columns) costs ``hog_cost`` Haar columns. Unchanged
    if ``miss_rate`` is None.

    At most ``max_examples`` = (positives, negatives) drawn at random (``random_state``) set
    the thresholds and the order: the greedy order costs O(k) partial-score quantiles per
    feature while negatives are alive.

    Mining ranks windows by how far they get through this cascade, then by score
    (:func:`cvfs.keypoints.level_scan.cascade_hardness`), so it takes the windows that pass, by
    score, and fills up with those rejected last. A cascade of only a few stages (e.g. after
    10/30/100 features) lets most windows of a training image reach all 1,500 features, which
    makes the mining scans about 20x slower."""
    if miss_rate is None:
        return model
    rng = check_random_state(random_state)
    X = np.asarray(X)
    y = np.asarray(y)
    rows = []
    for label, cap in zip((1, 0), max_examples):
        idx = np.flatnonzero(y == label)
        rows.append(np.sort(rng.choice(idx, cap, replace=False)) if idx.size > cap else idx)
    cols = model.features
    cost = np.where(is_hog(cols), float(hog_cost), 1.0)
    return model.soft_cascade(X[np.ix_(rows[0], cols)], X[np.ix_(rows[1], cols)],
                              miss_rate=miss_rate, cost=cost, front_load=front_load)


def _negative_levels(im, kidx, mode, ied_range, spo):
    """Level exponents an image's negatives come from (see :data:`NEGATIVE_LEVELS`)."""
    if mode == "training":
        return face_levels(im.points[:, kidx], im.ied(), ied_range, spo)
    return [int(k) for k in pyramid_scales(_image_shape(im), scales_per_octave=spo)[0]]


def _scanner(feats, images, name, n_keep, neg_radius, ied_range, spo, stride=1,
             levels="training"):
    kidx = keypoint_index(name)
    plans = {}  # the scan plan of the current round's model, built once for all its scans

    def scan(model, i):
        if plans.get("model") is not model:
            plans.update(model=model, plan=ScanPlan(feats.pool, [model]))
        im = images[i]
        pts, ieds = im.points[:, kidx], im.ied()
        ks = _negative_levels(im, kidx, levels, ied_range, spo)
        if not ks:
            return np.zeros(0, EXAMPLE_DTYPE), np.zeros(0)
        cands, scores = [], []
        for k, cache in feats.levels(i, ks).items():
            mask = negative_mask(cache.level, pts, ieds, neg_radius=neg_radius)
            if stride > 1:
                grid = np.zeros_like(mask)
                grid[i % stride::stride, (i // stride) % stride::stride] = True
                mask &= grid
            ys, xs = np.nonzero(mask)
            if xs.size == 0:
                continue
            s = cascade_hardness(feats.pool, cache, np.column_stack([ys, xs]), model,
                                 plans["plan"])
            top = np.argsort(-s, kind="stable")[:n_keep]
            rec = np.empty(top.size, EXAMPLE_DTYPE)
            rec["image"], rec["level"], rec["x"], rec["y"] = i, k, xs[top], ys[top]
            cands.append(rec)
            scores.append(s[top])
        if not cands:
            return np.zeros(0, EXAMPLE_DTYPE), np.zeros(0)
        return np.concatenate(cands), np.concatenate(scores)

    return scan


def data_description(images):
    """What identifies a set of annotated training images (stored in mining checkpoints).

    Parameters
    ----------
    images : list of cvfs.datasets.faces.AnnotatedImage

    Returns
    -------
    description : dict
        ``n_images``; ``datasets`` (sorted dataset keys); ``images_sha256``, the sha256 of the
        file names one per line (as ``cvfs keypoints train`` records it in the model file); and
        ``points_sha256``, of every file name with its annotations (float64 ``points``).
    """
    names = "\n".join(Path(im.path).name for im in images).encode()
    h = hashlib.sha256()
    for im in images:
        h.update(Path(im.path).name.encode() + b"\0")
        h.update(np.ascontiguousarray(im.points, dtype=np.float64).tobytes())
    return {"n_images": len(images),
            "datasets": sorted({str(getattr(im, "dataset", "")) for im in images}),
            "images_sha256": hashlib.sha256(names).hexdigest(), "points_sha256": h.hexdigest()}


def train_detector(images, keypoints, recipe=None, *, max_scale=2.0, checkpoint_dir=None,
                   random_state=None, verbose=False):
    """Train a :class:`KeypointDetector` with hard-negative mining.

    Parameters
    ----------
    images : list of cvfs.datasets.faces.AnnotatedImage
        Training images (their ``points`` must annotate ``keypoints`` and both eye centres).
    keypoints : list of str
        Keypoint names to train (one classifier each).
    recipe : TrainingRecipe, optional
        The training settings (default: ``TrainingRecipe()``, the shipped models' recipe).
    max_scale : float, default=2.0
        Largest pyramid scale the returned detector scans.
    checkpoint_dir : str or Path, optional
        Folder of per-keypoint mining checkpoints (``<keypoint>.h5``); resumed when present.
        A checkpoint stores the keypoint's recipe, the images (as :func:`data_description`)
        and its seed; a resume with any of these different, or a checkpoint lacking one, is
        refused.
    random_state : None, int or Generator
    verbose : bool

    Returns
    -------
    detector : KeypointDetector
        ``detector.info["params"]`` holds the recipe, ``detector.info["training"]`` per-keypoint
        example counts, rounds and times. Its classifiers carry the mining cascades, set on the
        training positives only; before use, calibrate them on held-out faces and negatives
        from whole pyramids (``data_prep/calibrate_keypoints.py``,
        :func:`cvfs.keypoints.calibrate.calibrate_detector`), as the shipped files were.

    Raises
    ------
    ValueError
        For an unknown keypoint, no images, or no positives for a keypoint; or a checkpoint
        made with another recipe or images (the message names each differing key with both
        values).
    TypeError
        If ``recipe`` is not a :class:`TrainingRecipe`.

    Notes
    -----
    Mining ranks the windows by how far they get through each classifier's soft cascade, then
    by score (:func:`cvfs.keypoints.level_scan.cascade_hardness`): taking only the windows that
    pass starved the mining (300 faces, second round: 122-145 of the 3,000 negatives asked for
    LogitBoost's mouth corners, 933-3,000 for FSA's).
    """
    r = TrainingRecipe() if recipe is None else recipe
    if not isinstance(r, TrainingRecipe):
        raise TypeError(f"recipe must be a TrainingRecipe; got {type(recipe).__name__}")
    if not images:
        raise ValueError("images must hold at least one annotated image")
    for name in keypoints:
        keypoint_index(name)
    rng = check_random_state(random_state)
    pool = FeaturePool(haar_per_channel=r.haar_per_channel, hog_border=r.hog_border)
    if r.degrade:
        images = with_degraded(list(images), [_image_shape(im) for im in images], r.degrade,
                               recipe=r.degrade_recipe, random_state=seed_from(rng))
    examples_from = with_mirrored(images) if r.mirror else list(images)
    feats = ExampleFeatures.from_images(examples_from, pool, r.scales_per_octave)
    classifiers, record = {}, {}
    data = data_description(images)
    for name in keypoints:
        kidx = keypoint_index(name)
        t0 = time.perf_counter()
        pos, neg = [], []
        for i, im in enumerate(examples_from):
            shape = _image_shape(im)
            pts, ieds = im.points[:, kidx], im.ied()
            pos.append(positive_examples(pts, ieds, shape, image_index=i,
                                         ied_range=r.ied_range, pos_radius=r.pos_radius,
                                         scales_per_octave=r.scales_per_octave))
            neg.append(random_negatives(
                pts, ieds, shape, r.neg_per_image, image_index=i, ied_range=r.ied_range,
                neg_radius=r.neg_radius, scales_per_octave=r.scales_per_octave,
                levels=_negative_levels(im, kidx, r.negative_levels, r.ied_range,
                                        r.scales_per_octave),
                random_state=rng))
        pos, neg = np.concatenate(pos), np.concatenate(neg)
        if pos.size == 0:
            raise ValueError(f"no positive examples for {name!r}: is it annotated in the images?")
        if r.max_positives is not None and pos.size > r.max_positives:
            pos = pos[np.sort(rng.choice(pos.size, r.max_positives, replace=False))]
        seed = seed_from(rng)
        n_keep = max(1, int(np.ceil(4 * r.n_hard / len(images))))
        config = {**r.to_dict(), "keypoint": name, "seed": seed, "data": data}
        ckpt = Path(checkpoint_dir) / f"{name}.h5" if checkpoint_dir is not None else None
        state = run_mining(
            pos, neg,
            features=feats,
            fit=lambda X, y, _s=seed: fit_classifier(
                X, y, r.method, k=r.k, bins=r.bins, n_iter=r.n_iter, mu=r.mu,
                annealing_boost=r.annealing_boost, clip_quantile=r.clip_quantile,
                random_state=_s, verbose=verbose),
            cascade=lambda m, X, y, _s=seed: with_cascade(
                m, X, y, pool.is_hog, r.cascade_miss_rate, front_load=r.cascade_front_load,
                random_state=_s),
            scan=_scanner(feats, images, name, n_keep, r.neg_radius, r.ied_range,
                          r.scales_per_octave, r.scan_stride, r.negative_levels),
            n_images=len(images), n_rounds=r.n_rounds, n_hard=r.n_hard, checkpoint=ckpt,
            config=config, verbose=verbose,
        )
        classifiers[name] = state.model
        record[name] = {"n_positives": int(state.positives.size),
                        "n_negatives": int(state.negatives.size), "rounds": state.history,
                        "seconds": time.perf_counter() - t0,
                        "fit_seconds": float(sum(h["fit_s"] for h in state.history)),
                        "fit_cpu_seconds": float(sum(h.get("fit_cpu_s", np.nan)
                                                     for h in state.history))}
        log.info("%s: %d positives, %d negatives, %.0f s", name, state.positives.size,
                 state.negatives.size, record[name]["seconds"])
    info = {"params": r.to_dict(), "training": {"n_images": len(images), "keypoints": record},
            "random_state": random_state if isinstance(random_state, int) else None}
    return KeypointDetector(classifiers, pool.get_params(), scales_per_octave=r.scales_per_octave,
                            max_scale=max_scale, info=info)


def _image_shape(im):
    """(H, W) of an annotated image (read once, remembered in ``im.attrs["shape"]``)."""
    if "shape" not in im.attrs:
        im.attrs["shape"] = read_image(im.path).shape[:2]
    return tuple(im.attrs["shape"])
