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
from cvfs.vision import FeaturePool, LevelCache, pyramid_level, pyramid_scales

__all__ = ["METHODS", "NEGATIVE_LEVELS", "ExampleFeatures", "additive_from_fsa",
           "data_description", "fit_classifier", "train_detector", "with_cascade",
           "with_mirrored"]

log = logging.getLogger(__name__)

#: Training methods: FSA with piecewise-linear learners on a loss, or the LogitBoost baseline.
METHODS = ("fsa-lorenz", "fsa-logistic", "fsa-svm", "logitboost")

#: Where negatives come from: the levels where a face's IED is in ``ied_range`` ("training"),
#: or every level of the image at scale <= 1 ("all", the levels a detector scans).
NEGATIVE_LEVELS = ("training", "all")


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
        One of :data:`METHODS`.
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
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
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


# train_detector arguments left out of the mining checkpoints' config: the images enter as
# their data_description, the keypoints one per checkpoint, random_state as the keypoint's seed;
# max_scale sets only the returned detector's scan range; the others do not change the result
_NOT_IN_CHECKPOINT = ("images", "keypoints", "random_state", "max_scale", "checkpoint_dir",
                      "verbose")


def train_detector(images, keypoints, *, method="fsa-lorenz", k=1500, bins=8, n_iter=1000,
                   mu=300, annealing_boost=None, clip_quantile=None, haar_per_channel=20000,
                   hog_border="window",
                   n_rounds=3, n_hard=3000,
                   neg_per_image=20, max_positives=None, ied_range=(20.0, 40.0),
                   pos_radius=1.0, neg_radius=0.5, negative_levels="training", mirror=False,
                   degrade=0.0, degrade_recipe=None, scales_per_octave=4, max_scale=2.0,
                   scan_stride=2,
                   cascade_miss_rate=0.001, cascade_front_load=10.0, checkpoint_dir=None,
                   random_state=None, verbose=False):
    """Train a :class:`KeypointDetector` with hard-negative mining.

    Parameters
    ----------
    images : list of cvfs.datasets.faces.AnnotatedImage
        Training images (their ``points`` must annotate ``keypoints`` and both eye centres).
    keypoints : list of str
        Keypoint names to train (one classifier each).
    method : str
        One of :data:`METHODS`.
    k, bins, n_iter, mu, annealing_boost, clip_quantile
        Classifier size, FSA settings and learner ranges (see :func:`fit_classifier`; the
        default ``annealing_boost=None`` is the loss's own, 10 for Lorenz). 1,000 iterations
        (the paper: 500): on the nose tip (300 faces) 500 left FSA-Lorenz behind LogitBoost
        (AP 0.087 vs 0.099) and 1,000 put it ahead (``docs/methods.md``, "Face keypoints").
    haar_per_channel : int
        Haar features per RGB channel in the pool (the paper's pool: 20,000 -> 60,864 columns).
    hog_border : {"image", "window"}
        HOG gradients on the window border from the level or from the crop alone
        (:class:`cvfs.vision.FeaturePool`; "window" equals skimage on each crop and is slower to
        scan).
    n_rounds : int
        Training rounds (mining happens between them; the paper uses 10).
    n_hard : int
        Hard negatives added per mining round (the paper: ~20,000).
    neg_per_image : int
        Random negatives per image in the first round.
    max_positives : int, optional
        Subsample the positives to at most this many.
    ied_range, pos_radius, neg_radius, scales_per_octave
        Example rules (:mod:`cvfs.keypoints.examples`).
    negative_levels : {"training", "all"}
        Levels the random and mined negatives come from (:data:`NEGATIVE_LEVELS`): only the
        training levels of the faces (the paper), or every level at scale <= 1 (the
        distribution the detector meets when it scans a pyramid).
    mirror : bool
        Add the horizontally mirrored copy of every image (left and right points swapped, see
        :func:`cvfs.datasets.faces.mirrored`): twice the positives and random negatives. Mining
        scans the original images only.
    degrade : float in [0, 1]
        Share of the training images replaced by versions degraded like small web faces
        (:func:`cvfs.keypoints.degrade.with_degraded`: shrunk to an IED of 8-16 px, blurred,
        JPEG-compressed; their training levels are upsampled pyramid levels). Their positives,
        random negatives and mined negatives all come from the degraded pixels; the other
        images stay sharp. 0: none (no random draw).
    degrade_recipe : dict, optional
        Parameter ranges of the degradation (:data:`cvfs.keypoints.degrade.DEGRADE_RECIPE`).
    max_scale : float
        Largest pyramid scale the returned detector scans.
    scan_stride : int
        Grid step of the mining scan on each training level (1 = every window; 2 scans a
        quarter of them, a speed/coverage trade-off).
    cascade_miss_rate, cascade_front_load : float
        Soft cascade of every fitted classifier (:func:`with_cascade`, used by the mining
        scans and kept in the returned detector until ``calibrate_keypoints`` replaces it):
        fraction of the training positives the whole cascade may reject, and the exponent of
        its rejection distribution. ``cascade_miss_rate=None``: no cascade. Mining ranks the
        windows by how far they get through it, then by score
        (:func:`cvfs.keypoints.level_scan.cascade_hardness`): taking only the windows that
        pass starved the mining (300 faces, second round: 122-145 of the 3,000 negatives
        asked for LogitBoost's mouth corners, 933-3,000 for FSA's).
    checkpoint_dir : str or Path, optional
        Folder of per-keypoint mining checkpoints (``<keypoint>.h5``); resumed when present.
        A checkpoint stores the keypoint's full configuration: every argument here but
        ``images`` (stored as :func:`data_description`), ``keypoints``, ``random_state`` (the
        keypoint's seed drawn from it), ``max_scale``, ``checkpoint_dir`` and ``verbose``. A
        resume with any of these different, or a checkpoint lacking one, is refused.
    random_state : None, int or Generator
    verbose : bool

    Returns
    -------
    detector : KeypointDetector
        ``detector.info["training"]`` records per-keypoint example counts, rounds and times.
        Its classifiers carry the mining cascades, set on the training positives only; before
        use, calibrate them on held-out faces and negatives from whole pyramids
        (``data_prep/calibrate_keypoints.py``, :func:`cvfs.keypoints.calibrate.calibrate_detector`),
        as the shipped files were.

    Raises
    ------
    ValueError
        For an unknown method, keypoint or ``negative_levels``, no images, or no positives for
        a keypoint; or a checkpoint made with other settings or images (the message names
        each differing key with both values).
    """
    settings = {k: v for k, v in locals().items() if k not in _NOT_IN_CHECKPOINT}
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if negative_levels not in NEGATIVE_LEVELS:
        raise ValueError(f"negative_levels must be one of {NEGATIVE_LEVELS}; got "
                         f"{negative_levels!r}")
    if not images:
        raise ValueError("images must hold at least one annotated image")
    for name in keypoints:
        keypoint_index(name)
    rng = check_random_state(random_state)
    pool = FeaturePool(haar_per_channel=haar_per_channel, hog_border=hog_border)
    if degrade:
        images = with_degraded(list(images), [_image_shape(im) for im in images], degrade,
                               recipe=degrade_recipe, random_state=seed_from(rng))
    examples_from = with_mirrored(images) if mirror else list(images)
    feats = ExampleFeatures.from_images(examples_from, pool, scales_per_octave)
    classifiers, record = {}, {}
    data = data_description(images)
    for name in keypoints:
        kidx = keypoint_index(name)
        t0 = time.perf_counter()
        pos, neg = [], []
        for i, im in enumerate(examples_from):
            shape = _image_shape(im)
            pts, ieds = im.points[:, kidx], im.ied()
            pos.append(positive_examples(pts, ieds, shape, image_index=i, ied_range=ied_range,
                                         pos_radius=pos_radius,
                                         scales_per_octave=scales_per_octave))
            neg.append(random_negatives(
                pts, ieds, shape, neg_per_image, image_index=i, ied_range=ied_range,
                neg_radius=neg_radius, scales_per_octave=scales_per_octave,
                levels=_negative_levels(im, kidx, negative_levels, ied_range, scales_per_octave),
                random_state=rng))
        pos, neg = np.concatenate(pos), np.concatenate(neg)
        if pos.size == 0:
            raise ValueError(f"no positive examples for {name!r}: is it annotated in the images?")
        if max_positives is not None and pos.size > max_positives:
            pos = pos[np.sort(rng.choice(pos.size, max_positives, replace=False))]
        seed = seed_from(rng)
        n_keep = max(1, int(np.ceil(4 * n_hard / len(images))))
        config = {**settings, "keypoint": name, "seed": seed, "data": data}
        ckpt = Path(checkpoint_dir) / f"{name}.h5" if checkpoint_dir is not None else None
        state = run_mining(
            pos, neg,
            features=feats,
            fit=lambda X, y, _s=seed: fit_classifier(
                X, y, method, k=k, bins=bins, n_iter=n_iter, mu=mu,
                annealing_boost=annealing_boost, clip_quantile=clip_quantile, random_state=_s,
                verbose=verbose),
            cascade=lambda m, X, y, _s=seed: with_cascade(
                m, X, y, pool.is_hog, cascade_miss_rate, front_load=cascade_front_load,
                random_state=_s),
            scan=_scanner(feats, images, name, n_keep, neg_radius, ied_range, scales_per_octave,
                          scan_stride, negative_levels),
            n_images=len(images), n_rounds=n_rounds, n_hard=n_hard, checkpoint=ckpt,
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
    params = {"method": method, "k": k, "bins": bins, "n_iter": n_iter, "mu": mu,
              "clip_quantile": clip_quantile, "annealing_boost": annealing_boost,
              "n_rounds": n_rounds, "n_hard": n_hard, "neg_per_image": neg_per_image,
              "scan_stride": scan_stride, "cascade_miss_rate": cascade_miss_rate,
              "cascade_front_load": cascade_front_load,
              "max_positives": max_positives, "ied_range": list(ied_range),
              "pos_radius": pos_radius, "neg_radius": neg_radius,
              "negative_levels": negative_levels, "mirror": bool(mirror),
              "degrade": float(degrade), "degrade_recipe": degrade_recipe}
    info = {"params": params, "training": {"n_images": len(images), "keypoints": record},
            "random_state": random_state if isinstance(random_state, int) else None}
    return KeypointDetector(classifiers, pool.get_params(), scales_per_octave=scales_per_octave,
                            max_scale=max_scale, info=info)


def _image_shape(im):
    """(H, W) of an annotated image (read once, remembered in ``im.attrs["shape"]``)."""
    if "shape" not in im.attrs:
        im.attrs["shape"] = read_image(im.path).shape[:2]
    return tuple(im.attrs["shape"])
