"""Bottom-up keypoint detectors: scan every pyramid level, score windows, suppress non-maxima.

A :class:`KeypointDetector` holds one classifier per keypoint (an additive piecewise model on a
few columns of a :class:`cvfs.vision.FeaturePool`, trained by FSA or LogitBoost, see
:mod:`cvfs.keypoints.train`). :meth:`KeypointDetector.detect` builds the Gaussian pyramid
(4 levels per octave, upsampled levels up to ``max_scale`` for small faces) one level at a time,
computes only the selected feature columns at every window centre of every level, scores them,
keeps per-level local maxima above the threshold, maps them to original-image coordinates and
applies a greedy non-maximum suppression across levels. A level too large for the memory budget
is scanned in overlapping bands of rows with the same results (:mod:`cvfs.keypoints._tiling`).

Model files are written by :func:`cvfs.io.save_model` (kind ``"keypoint-detector"``) and read
by :func:`load_detector`; a reloaded detector gives identical detections.

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3.
"""

import logging
import math
import os
from pathlib import Path

import numpy as np

from cvfs.datasets import models_dir
from cvfs.datasets.landmarks import KEYPOINTS
from cvfs.io import load_model, save_model
from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints._tiling import (
    band_budget,
    band_bytes,
    check_max_memory,
    image_bytes,
    level_bytes,
    split_rows,
)
from cvfs.keypoints._topdown import (
    EYES,
    band_rows,
    eye_pairs,
    level_regions,
    single_eye_hypotheses,
)
from cvfs.keypoints.context import PairModel, pair_rescore
from cvfs.keypoints.level_scan import (
    EVERY_WINDOW,
    FullScorer,
    UpsampledScan,
    check_centres,
    check_n_jobs,
    level_scores,
    pyramid_peaks,
    region_peaks,
)
from cvfs.keypoints.model_check import check_saved
from cvfs.keypoints.peaks import merge_levels
from cvfs.vision import (
    N_HOG,
    WINDOW,
    FeaturePool,
    as_float_rgb,
    iter_pyramid,
    level_bands,
    pyramid_scales,
    to_rgb,
    window_centres,
)

__all__ = ["KIND", "KeypointDetector", "load_detector"]

log = logging.getLogger(__name__)

KIND = "keypoint-detector"
CHUNK = 16384  # windows per feature-computation chunk


def _face_scan_options(upsampled_stride, coarse_margin, hog_blocks):
    """The scan settings of :meth:`KeypointDetector.detect_faces` (its parameters of the same
    names), checked: ``{"upsampled": UpsampledScan, "hog_blocks": str}``."""
    if not (isinstance(upsampled_stride, (int, np.integer))
            and not isinstance(upsampled_stride, bool) and upsampled_stride >= 1):
        raise ValueError(f"upsampled_stride must be an int >= 1; got {upsampled_stride!r}")
    if coarse_margin is not None and not (
            isinstance(coarse_margin, (int, float, np.integer, np.floating))
            and not isinstance(coarse_margin, bool) and float(coarse_margin) >= 0.0):
        raise ValueError(f"coarse_margin must be None or a number >= 0; got {coarse_margin!r}")
    if hog_blocks not in ("maps", "pixels"):
        raise ValueError(f"hog_blocks must be 'maps' or 'pixels'; got {hog_blocks!r}")
    margin = None if coarse_margin is None else float(coarse_margin)
    return {"upsampled": UpsampledScan(int(upsampled_stride), margin), "hog_blocks": hog_blocks}


class KeypointDetector:
    """Detectors of named face keypoints sharing one feature pool.

    Parameters
    ----------
    classifiers : dict of str -> AdditiveModel
        One classifier per keypoint name (names from :data:`cvfs.datasets.faces.KEYPOINTS`).
    pool_params : dict
        ``FeaturePool(**pool_params)`` rebuilds the training feature pool.
    thresholds : dict of str -> float, optional
        Default score threshold per keypoint (default: 0.0 for every keypoint).
    scales_per_octave : int
    max_scale : float
        Largest pyramid scale scanned (2.0 adds an upsampled octave for small faces).
    nms_radius : float
        Suppression radius in level pixels (mapped to the original as ``nms_radius / scale``).
    merge_radius : float
        With ``detect(refine=True)``: only suppressed peaks within this many level pixels of
        the kept one move it (default 3, chosen on training images, see :meth:`detect`).
    info : dict, optional
        Training description kept in the model file.

    Raises
    ------
    ValueError
        If a name is not a keypoint, or there are no classifiers.
    """

    def __init__(self, classifiers, pool_params, *, thresholds=None, scales_per_octave=4,
                 max_scale=2.0, nms_radius=6.0, merge_radius=3.0, info=None):
        if not classifiers:
            raise ValueError("classifiers must map at least one keypoint name to a classifier")
        bad = [n for n in classifiers if n not in KEYPOINTS]
        if bad:
            raise ValueError(f"unknown keypoint names {bad}; expected names from {list(KEYPOINTS)}")
        self.classifiers = dict(classifiers)
        self.pool_params = dict(pool_params)
        self.pool = FeaturePool(**self.pool_params)
        self.thresholds = {n: float((thresholds or {}).get(n, 0.0)) for n in self.classifiers}
        self.scales_per_octave = int(scales_per_octave)
        self.max_scale = float(max_scale)
        self.nms_radius = float(nms_radius)
        self.merge_radius = float(merge_radius)
        self.info = dict(info or {})

    @property
    def keypoints(self):
        """list of str: the keypoint names this detector finds."""
        return list(self.classifiers)

    def score_level(self, cache, centres=None, keypoints=None, *, cascade=True):
        """Classifier scores of windows on one level.

        Parameters
        ----------
        cache : cvfs.vision.LevelCache
        centres : ndarray of shape (n, 2) of (row, col), optional
            Default: every valid centre (stride 1).
        keypoints : list of str, optional
            Default: all.
        cascade : bool
            Use the classifiers' soft cascades: windows rejected at a stage get score -inf.

        Returns
        -------
        centres : ndarray of shape (n, 2)
        scores : dict of str -> ndarray of shape (n,)
        """
        names = self.keypoints if keypoints is None else list(keypoints)
        if centres is None:
            centres = window_centres(cache.shape)
        centres = np.asarray(centres, dtype=np.int64).reshape(-1, 2)
        if cascade:
            s = level_scores(self.pool, cache, centres, [self.classifiers[k] for k in names],
                              True)
            return centres, dict(zip(names, s, strict=True))
        centres = check_centres(cache, centres)
        full = self.__dict__.setdefault("_full_scorers", {})
        for k in names:
            if k not in full:
                full[k] = FullScorer(self.pool, self.classifiers[k])
        return centres, {k: full[k](cache, centres) for k in names}

    def detect(self, image, *, threshold=None, max_scale=None, min_scale=0.0, nms_radius=None,
               refine=True, cascade=True, n_jobs=1, merge_radius=None, pairs=None,
               max_memory=None):
        """Detect every keypoint over the whole pyramid.

        Parameters
        ----------
        image : ndarray of shape (H, W, 3), (H, W) or (H, W, 4), or PIL.Image.Image
            RGB, grey or with alpha, uint8/uint16 or float in [0, 1], or a Pillow image of any
            8- or 16-bit mode (palette, CMYK, ...; :func:`cvfs.vision.to_rgb`). Grey is scanned
            as three equal channels (the detectors were trained on colour photos and find
            fewer keypoints on grey ones); alpha is dropped.
        threshold : float or dict of str -> float, optional
            Minimum score of a detection (default: the detector's thresholds).
        max_scale : float, optional
            Largest pyramid scale (default: the detector's ``max_scale``).
        min_scale : float
            Smallest pyramid scale scanned (levels below it are skipped).
        nms_radius : float, optional
            Suppression radius in level pixels (default: the detector's).
        refine : bool
            Sub-pixel peak positions from a parabola through the 3x3 neighbourhood, and each
            kept detection moved to the score-weighted mean of the peaks it suppressed within
            ``merge_radius`` (:func:`nms` with ``merge=True``).
        merge_radius : float, optional
            In level pixels (default: the detector's, 3). Chosen on training images (MTFL
            training faces 1,000-2,499, not used to train the shipped detectors, at their size
            and downscaled 2x and 3x) among 1.5-6: merging every suppressed peak (6, the
            suppression radius) gave mean eye AP 0.677 there, 3 gave 0.699.
        pairs : bool or PairModel, optional
            Rescore the eye detections by their partner (:func:`cvfs.keypoints.context.
            pair_rescore`): a left eye without a right-eye detection about one inter-eye
            distance to its right loses up to ``weight * cap`` (and vice versa), which demotes
            isolated background peaks. ``True`` uses ``PairModel()``, fitted on training
            images for the shipped eye detector. Off by default: it raises the AP of each eye
            but not of "eyes as one class" on the MTFL crops (see the README).
        cascade : bool
            Early rejection with the classifiers' soft cascades (when they have one).
        n_jobs : int, default=1
            Threads scanning pyramid levels (or bands of a level) in parallel (-1: one per
            available core); they share ``max_memory``. The detections do not depend on it.
        max_memory : int, optional
            Bytes this call may allocate for the image copy, the pyramid and the scan (default
            :data:`cvfs.keypoints._tiling.MAX_MEMORY`, 640 MiB), whatever the image size: the
            levels are built one at a time and a level whose maps do not fit is scanned in
            overlapping bands of rows (memory model in :mod:`cvfs.keypoints._tiling`). It
            takes at least the image copy, the largest level image and bands of
            ``min(80 MiB, max_memory / 8)``; a call that needs more (a large photo with
            upsampled levels: 4000x3000 at ``max_scale=2``) logs a warning with the excess.
            The detections do not depend on it.

        Returns
        -------
        detections : dict of str -> ndarray of shape (n, 3)
            ``x, y, score`` in original-image pixels (x = column), sorted by decreasing score.

        Raises
        ------
        TypeError
            If ``image`` is not an ndarray or has an unsupported dtype, or ``pairs`` is not a
            bool, None or a PairModel.
        ValueError
            If ``image`` is empty, has another shape than those above, is smaller than 24x24,
            or is float outside [0, 1], ``n_jobs`` is not a positive int or -1, or ``max_memory`` is
            not a positive
            number.
            If ``pairs`` names a keypoint this detector does not find.
        """
        image = to_rgb(image)
        return self._detect(image, threshold=threshold, max_scale=max_scale,
                            min_scale=min_scale, nms_radius=nms_radius, refine=refine,
                            cascade=cascade, n_jobs=n_jobs, merge_radius=merge_radius,
                            pairs=pairs, max_memory=max_memory)[0]

    def detect_faces(self, image, *, threshold=None, max_scale=None, face_model=None,
                     n_jobs=1, max_memory=None, max_faces=50, top_down=False,
                     refine=True, upsampled_stride=1, coarse_margin=None,
                     hog_blocks="maps"):
        """Detect faces: the face model fitted to the keypoint detections, best first.

        The keypoints are detected (:meth:`detect` with ``threshold=-inf``: every window the
        soft cascades keep), their scores become calibrated probabilities and the face shape
        model is fitted to them by :func:`cvfs.keypoints.faces.assemble_faces`. By default
        the five keypoints of :data:`cvfs.keypoints.faces.FACE_KEYPOINTS` (eyes, nose tip,
        mouth corners) are scanned everywhere and any other keypoint of the face model (nose
        sides, chin) only where a pair of eye candidates, or a probable eye without a partner,
        places it (:mod:`cvfs.keypoints._topdown`), and everywhere when no eye candidate
        places a face. With ``top_down`` (for video frames) only the eyes are scanned
        everywhere and every other keypoint that way:
        about twice as fast on a 640x480 frame with a face, with the same peaks inside those
        regions, but it misses faces whose eyes are weak (on Caltech WebFaces, whose faces are
        small, it finds about a tenth fewer).
        With ``refine``, each keypoint of a face is then rescanned at the face's own scale
        (:func:`cvfs.keypoints.refine.refine_face_keypoints`; the keypoints of a face share
        one small level per rescan scale), and moved by the face model's learned share of the
        way toward the position the face's other keypoints give it
        (:func:`cvfs.keypoints.fusion.fuse_keypoints`).

        Parameters
        ----------
        image : ndarray of shape (H, W, 3), (H, W) or (H, W, 4), or PIL.Image.Image
            RGB, grey or with alpha, uint8/uint16 or float in [0, 1], or a Pillow image of any
            8- or 16-bit mode (palette, CMYK, ...; :func:`cvfs.vision.to_rgb`). Grey is scanned
            as three equal channels (the detectors were trained on colour photos and find
            fewer keypoints on grey ones); alpha is dropped.
        threshold : float, optional
            Minimum face probability in [0, 1] (default: the face model's, chosen so that
            images without faces give none).
        max_scale : float, optional
            Largest pyramid scale (default: the detector's).
        face_model : FaceModel or str or Path, optional
            Default: the shipped ``faces.h5`` (:func:`cvfs.keypoints.faces.load_face_model`).
        n_jobs, max_memory :
            As :meth:`detect`.
        max_faces : int, default=50
        top_down : bool, default=False
            Scan the keypoints other than the eyes only around eye pairs and unpaired probable
            eyes, or everywhere when there is none (else only the keypoints beyond the five).
        refine : bool, default=True
            Move each keypoint of a found face to the sub-pixel maximum of a dense rescan of
            its neighbourhood on levels that bring the face to the detectors' training size.
        upsampled_stride : int, default=1
            Score only every ``upsampled_stride``-th window row and column of the upsampled
            pyramid levels (scale > 1, most of the windows of a photo; whole or in bands,
            the same lattice), their peaks taken on that grid; the keypoint refinement then
            restores the positions (``benchmarks/keypoints/keypoints_faces_speed.py``
            measures time and eye AP).
        coarse_margin : float or None, default=None
            With ``upsampled_stride > 1``: the lattice windows that pass the soft cascades
            with their thresholds lowered (the last by ``coarse_margin``, in score units, the
            one after feature ``j`` of ``k`` by ``coarse_margin * j / k``) get their
            neighbours within ``upsampled_stride - 1`` rows and columns scored, and the peaks
            there are those of every window's grid (a coarse-to-fine scan,
            :mod:`cvfs.keypoints._coarse`: nearly the full scan's peaks on a fraction of
            the windows; :data:`cvfs.keypoints._coarse.COARSE_MARGIN` = 1.0 was chosen on
            training photos). None: the peaks of the lattice's grid only.
        hog_blocks : {"maps", "pixels"}, default="maps"
            Where the scan takes a window's HOG blocks from: each level's cell-histogram maps
            (scores equal ``decision_function`` of the pool's features bitwise), or the
            window's pixels (no maps: few windows pass the cascades' leading Haar features to
            reach a HOG feature; scores equal up to float rounding); see
            :class:`cvfs.keypoints._scan.ScanPlan`.

        Returns
        -------
        faces : list of cvfs.keypoints.faces.Face
            ``score``, ``box (x0, y0, x1, y1)``, ``keypoints {name: (x, y, probability)}``
            (NaN where a keypoint is not found), sorted by decreasing score.

        Raises
        ------
        TypeError, ValueError
            As :meth:`detect`; ValueError if ``threshold`` is not in [0, 1], the face model
            uses a keypoint this detector does not find, ``upsampled_stride`` is not an int
            >= 1, ``coarse_margin`` is neither None nor a number >= 0 or ``hog_blocks`` is
            neither ``"maps"`` nor ``"pixels"``.
        """
        from cvfs.keypoints.faces import FaceModel, assemble_faces, load_face_model
        from cvfs.keypoints.fusion import fuse_keypoints

        image = to_rgb(image)
        if face_model is None:
            if getattr(self, "_face_model", None) is None:
                self._face_model = load_face_model()
            face_model = self._face_model
        elif not isinstance(face_model, FaceModel):
            face_model = load_face_model(face_model)
        missing = [k for k in face_model.shape.names if k not in self.classifiers]
        if missing:
            raise ValueError(f"the face model needs detectors of {missing}; this detector "
                             f"finds {self.keypoints}")
        if threshold is not None and not (isinstance(threshold, (int, float, np.number))
                                          and not isinstance(threshold, bool)
                                          and 0.0 <= float(threshold) <= 1.0):
            raise ValueError(f"threshold must be a face probability in [0, 1]; got "
                             f"{threshold!r}")
        scan = _face_scan_options(upsampled_stride, coarse_margin, hog_blocks)
        found, scale = self._face_detections(image, face_model, max_scale=max_scale,
                                             n_jobs=n_jobs, max_memory=max_memory,
                                             top_down=top_down, **scan)
        faces = assemble_faces(found, face_model, scales=scale, threshold=threshold,
                               max_faces=max_faces)
        if refine:
            from cvfs.keypoints.refine import refine_face_keypoints

            faces = refine_face_keypoints(self, image, faces,
                                          fill_missing=face_model.probability)
            faces = fuse_keypoints(faces, face_model)
        return faces

    def _face_detections(self, image, face_model, *, max_scale, n_jobs, max_memory,
                         top_down, upsampled=EVERY_WINDOW, hog_blocks="maps"):
        """Detections and scales of the face model's keypoints for :meth:`detect_faces`."""
        kw = dict(threshold=-math.inf, max_scale=max_scale, min_scale=0.0, nms_radius=None,
                  refine=True, cascade=True, n_jobs=n_jobs, merge_radius=None, pairs=None,
                  max_memory=max_memory, upsampled=upsampled, hog_blocks=hog_blocks)
        from cvfs.keypoints.faces import FACE_KEYPOINTS

        names = list(face_model.shape.names)
        # scanned everywhere: the eyes (top-down) or the five keypoints MTFL annotates; the
        # others only where eye hypotheses place them
        everywhere = [k for k in names if k in (EYES if top_down else FACE_KEYPOINTS)]
        others = [k for k in names if k not in everywhere]
        if not others:
            return self._detect(image, names=names, **kw)
        image = as_float_rgb(image, min_size=self.pool.window)  # checked once, reused
        # the first scan keeps every level's maps for the second scan when they fit the budget
        keep = [] if n_jobs == 1 and self._maps_fit(image, max_scale, others,
                                                     max_memory) else None
        found, scale = self._detect(image, names=everywhere, keep=keep, **kw)
        c, t = eye_pairs(found, scale, face_model)
        c1, t1 = single_eye_hypotheses(found, scale, face_model, c, t)
        c, t = np.concatenate([c, c1]), np.concatenate([t, t1])
        if len(c) == 0:  # no eye candidate places a face: the other keypoints everywhere
            more, more_scale = self._detect(image, names=others, **kw)
            found.update(more)
            scale.update(more_scale)
            return found, scale
        more, more_scale = self._detect_in_regions(image, others, face_model, c, t,
                                                   max_scale=max_scale, max_memory=max_memory,
                                                   caches=keep, hog_blocks=hog_blocks)
        found.update(more)
        scale.update(more_scale)
        return found, scale

    def _maps_fit(self, image, max_scale, names, max_memory):
        """Whether the level images, integral images and HOG maps of every pyramid level and
        the scan of keypoints ``names`` on the largest level fit ``max_memory`` together."""
        rgb_shape = np.shape(image)[:2]
        _, scales = pyramid_scales(rgb_shape, scales_per_octave=self.scales_per_octave,
                                   min_size=self.pool.window,
                                   max_scale=self.max_scale if max_scale is None else max_scale)
        px = float(rgb_shape[0]) * float(rgb_shape[1])
        maps = (12 + 24 + 135) * px * float((scales ** 2).sum())
        per_pixel, fixed = band_bytes([self.classifiers[k] for k in names] or
                                      list(self.classifiers.values())[:1], True, True, True)
        scan = per_pixel * px * float(scales.max() ** 2) + fixed if scales.size else 0.0
        return image_bytes(rgb_shape) + maps + scan <= check_max_memory(max_memory)

    def _detect_in_regions(self, image, names, face_model, c, t, *, max_scale, max_memory,
                           caches=None, hog_blocks="maps"):
        """Detections (``threshold=-inf``, refined) of keypoints ``names`` inside the regions
        the face hypotheses ``(c, t)`` give them (:func:`cvfs.keypoints._topdown.level_regions`)
        on each level: on the levels' ``caches`` (:class:`LevelCache` per level, from the eye
        scan) when given, else on the pyramid built again one level at a time, in bands of the
        rows holding a region (split further when they exceed ``max_memory``)."""
        rgb = as_float_rgb(image, min_size=self.pool.window)
        max_memory = check_max_memory(max_memory)
        if caches is not None and any(cc is None for cc in caches):
            caches = None
        levels, scales, _ = self._pyramid(rgb, max_scale, 0.0)
        if caches is not None:
            levels = iter([cc.level for cc in caches])
        plans = {k: self._scan_plan([k], hog_blocks) for k in names}
        models = [self.classifiers[k] for k in names]
        feats = np.concatenate([m.features for m in models]) if models else np.zeros(0, int)
        per_pixel, fixed = band_bytes(models or [self.classifiers[self.keypoints[0]]],
                                      bool((feats >= N_HOG).any()), bool((feats < N_HOG).any()),
                                      True)
        avail = max_memory - image_bytes(rgb.shape)

        def level_peaks():
            if not names or len(c) == 0:
                return
            for scale in scales:
                level = next(levels)
                h, w = level.shape
                grid = (h - WINDOW + 1, w - WINDOW + 1)
                regions, scan = level_regions(level, grid, names, face_model, c, t,
                                              scales_per_octave=self.scales_per_octave,
                                              pad=self.nms_radius)
                if caches is not None:  # the level's maps are all there
                    cache = caches.pop(0)
                    out = []
                    for k in names:
                        out.append(None if scan[k] is None else region_peaks(
                            plans[k], cache, scan[k], regions[k], (0, grid[0]), 0))
                    cache.clear()
                    yield scale, out
                    continue
                budget = band_budget(avail, level_bytes(rgb.shape, scale, False), 1,
                                     max_memory)
                # separate bands for row runs further apart than a window: their maps overlap
                for r0, r1 in band_rows(scan, WINDOW):
                    parts, _ = split_rows((r1 - r0 + WINDOW - 1, w), budget, per_pixel, fixed)
                    for p in parts:
                        s, e = r0 + p.s, r0 + p.e
                        band = level_bands(level, [(s, e + WINDOW - 1)])[0]
                        out = []
                        for k in names:
                            out.append(None if scan[k] is None else region_peaks(
                                plans[k], band, scan[k][s:e], regions[k][s:e],
                                (r0 + p.k0 - s, r0 + p.k1 - s), s))
                        band.clear()
                        yield scale, out

        return merge_levels(level_peaks(), names, self.nms_radius, self.merge_radius, True)

    def _pyramid(self, rgb, max_scale, min_scale):
        """``(levels, scales, blurred)`` of the pyramid scanned (see :func:`pyramid_peaks`)."""
        spo = self.scales_per_octave
        kw = dict(scales_per_octave=spo, min_size=self.pool.window,
                  max_scale=self.max_scale if max_scale is None else max_scale)
        indices, scales = pyramid_scales(rgb.shape, **kw)
        n_levels = int((scales >= min_scale).sum())
        scales, indices = scales[:n_levels], indices[:n_levels]
        levels = iter_pyramid(rgb, max_levels=n_levels, **kw) if n_levels else iter(())
        return levels, scales, (indices < 0) & (indices % spo != 0)

    def _detect(self, image, *, threshold, max_scale, min_scale, nms_radius, refine, cascade,
                n_jobs, merge_radius, pairs, max_memory, names=None, keep=None,
                upsampled=EVERY_WINDOW, hog_blocks="maps"):
        """:meth:`detect`, and per keypoint the pyramid scale of each detection (the
        score-weighted geometric mean over the peaks merged into it), ndarray of shape (n,).
        ``names``: the keypoints detected (default: all); ``keep``: see
        :func:`pyramid_peaks`; ``upsampled``: how the upsampled levels are scanned
        (:class:`cvfs.keypoints.level_scan.UpsampledScan`); ``hog_blocks``: see
        :class:`ScanPlan`."""
        rgb = as_float_rgb(image, min_size=self.pool.window)
        names = self.keypoints if names is None else list(names)
        thr = self._thresholds(threshold)
        n_jobs = check_n_jobs(n_jobs)
        max_memory = check_max_memory(max_memory)
        pyramid = self._pyramid(rgb, max_scale, min_scale)
        radius = self.nms_radius if nms_radius is None else float(nms_radius)
        mrad = self.merge_radius if merge_radius is None else float(merge_radius)
        pair, out_thr = self._pair_model(pairs), thr
        if pair is not None:  # partners scoring below the model's floor never change a score
            thr = {k: min(v, pair.floor) if k in (pair.left, pair.right) else v
                   for k, v in thr.items()}
        models = [self.classifiers[k] for k in names]
        plan = self._scan_plan(names, hog_blocks) if cascade else None
        peaks = pyramid_peaks(self.pool, plan, models, rgb, pyramid,
                               [thr[k] for k in names], refine, n_jobs, max_memory, keep,
                               upsampled)
        out, scale = merge_levels(peaks, names, radius, mrad, refine)
        if pair is not None:
            new = pair_rescore(*(np.column_stack([out[n], scale[n]])
                                 for n in (pair.left, pair.right)), pair)
            for n, s in zip((pair.left, pair.right), new, strict=True):
                keep = s >= out_thr[n]
                d, sc = np.column_stack([out[n][:, :2], s])[keep], scale[n][keep]
                order = np.argsort(-d[:, 2], kind="stable")
                out[n], scale[n] = d[order], sc[order]
        return out, scale

    def _scan_plan(self, names, hog_blocks="maps"):
        """The :class:`ScanPlan` of the soft cascades of keypoints ``names`` (HOG blocks from
        ``hog_blocks``), built once per detector (again if a classifier of
        ``self.classifiers`` is replaced)."""
        plans = self.__dict__.setdefault("_scan_plans", {})
        models = [self.classifiers[k] for k in names]
        key = tuple(names) if hog_blocks == "maps" else (*names, hog_blocks)
        cached = plans.get(key)
        if cached is None or any(a is not b for a, b in zip(cached[0], models, strict=True)):
            cached = plans[key] = (models, ScanPlan(self.pool, models, hog_blocks=hog_blocks))
        return cached[1]

    def _pair_model(self, pairs):
        if pairs is None or pairs is False:
            return None
        model = PairModel() if pairs is True else pairs
        if not isinstance(model, PairModel):
            raise TypeError("pairs must be a bool, None or a PairModel; got "
                            f"{type(pairs).__name__}")
        missing = [n for n in (model.left, model.right) if n not in self.classifiers]
        if missing:
            raise ValueError(f"pairs needs detectors of {model.left!r} and {model.right!r}; "
                             f"this detector lacks {missing} (it finds {self.keypoints})")
        return model

    def _thresholds(self, threshold):
        if threshold is None:
            return dict(self.thresholds)
        if isinstance(threshold, dict):
            return {k: float(threshold.get(k, self.thresholds[k])) for k in self.keypoints}
        if not math.isfinite(float(threshold)) and float(threshold) != -math.inf:
            raise ValueError(f"threshold must be a number or -inf; got {threshold!r}")
        return {k: float(threshold) for k in self.keypoints}

    def save(self, path):
        """Write the detector to an HDF5 model file (atomic; see :func:`cvfs.io.save_model`).

        Returns
        -------
        path : Path
        """
        arrays = {}
        for i, m in enumerate(self.classifiers.values()):
            arrays.update(m.to_arrays(f"clf{i}"))
        settings = {
            "keypoints": self.keypoints,
            "pool": self.pool_params,
            "thresholds": self.thresholds,
            "scales_per_octave": self.scales_per_octave,
            "max_scale": self.max_scale,
            "nms_radius": self.nms_radius,
            "merge_radius": self.merge_radius,
            "window": int(self.pool.window),
        }
        return save_model(path, KIND, arrays, params=self.info.get("params", {}),
                          settings=settings, training=self.info.get("training", {}),
                          random_state=self.info.get("random_state"))

    @classmethod
    def from_saved(cls, model):
        """Build from a :class:`cvfs.io.SavedModel` of kind ``"keypoint-detector"``.

        Every setting, array name, shape, feature index and value range is checked first
        (:func:`check_saved`), so the scan kernels, which do not check bounds, only ever see
        indices inside the feature pool.

        Raises
        ------
        ValueError
            Naming the file and the failed check.
        """
        s, pool = check_saved(model)
        where = model.path or "keypoint model"
        try:
            clfs = {name: AdditiveModel.from_arrays(model.arrays, f"clf{i}")
                    for i, name in enumerate(s["keypoints"])}
            info = {"params": model.params, "training": model.training,
                    "random_state": model.meta.get("random_state"), "meta": model.meta}
            return cls(clfs, pool, thresholds=s["thresholds"],
                       scales_per_octave=s.get("scales_per_octave", 4),
                       max_scale=s.get("max_scale", 2.0), nms_radius=s.get("nms_radius", 6.0),
                       merge_radius=s.get("merge_radius", 3.0), info=info)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from exc


def load_detector(path=None):
    """Load a keypoint detector.

    Parameters
    ----------
    path : str, Path or sequence of them, optional
        A model file written by :meth:`KeypointDetector.save`, or several merged into one
        detector (they must share the feature pool; a keypoint in several files comes from the
        first file). Default: every ``keypoints_*.h5`` in :func:`cvfs.datasets.models_dir` (the
        shipped models) in name order.

    Returns
    -------
    detector : KeypointDetector

    Raises
    ------
    FileNotFoundError
        If a file does not exist, or no shipped model is found.
    ValueError
        If a file is not a keypoint-detector model, fails a check of :func:`cvfs.io.load_model`
        (checksums, layout) or of the detector (settings, array names, shapes, feature indices
        inside the pool, finite values), the sequence is empty, or the files use different
        pools.
    """
    if isinstance(path, (str, os.PathLike)):
        return KeypointDetector.from_saved(load_model(path, kind=KIND))
    if path is None:
        files = sorted(Path(models_dir()).glob("keypoints_*.h5"))
        if not files:
            raise FileNotFoundError(
                f"no shipped keypoint models (keypoints_*.h5) in {models_dir()}; train one with "
                "`cvfs keypoints train` or pass a path"
            )
    else:
        files = [Path(p) for p in path]
        if not files:
            raise ValueError("path is an empty sequence of model files")
    dets = [KeypointDetector.from_saved(load_model(f, kind=KIND)) for f in files]
    if len(dets) == 1:
        return dets[0]
    first = dets[0]
    clfs, thr = {}, {}
    for f, d in zip(files, dets, strict=True):
        if d.pool_params != first.pool_params:
            raise ValueError(f"{f} uses feature pool {d.pool_params}, {files[0]} uses "
                             f"{first.pool_params}: merged models must share one pool")
        for k in d.keypoints:
            if k not in clfs:
                clfs[k] = d.classifiers[k]
                thr[k] = d.thresholds[k]
    return KeypointDetector(clfs, first.pool_params, thresholds=thr,
                            scales_per_octave=first.scales_per_octave,
                            max_scale=first.max_scale, nms_radius=first.nms_radius,
                            merge_radius=first.merge_radius, info=first.info)
