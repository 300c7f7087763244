"""The top-down scan of detect_faces: nose and mouth scanned only around eye pairs."""

import math

import cv2
import numpy as np
import pytest
from skimage import data

from cvfs.keypoints import load_detector, load_face_model
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints._topdown import band_rows, eye_pairs, level_regions, single_eye_hypotheses
from cvfs.keypoints.level_scan import region_peaks
from cvfs.keypoints.peaks import grid_peaks, parabolic_offsets
from cvfs.vision import HALF, WINDOW, LevelCache, level_bands, pyramid_level

OTHERS = ["nose_center", "mouth_left_corner", "mouth_right_corner"]


@pytest.fixture(scope="module")
def setup():
    det, fm = load_detector(), load_face_model()
    img = cv2.resize(data.astronaut(), (320, 240), interpolation=cv2.INTER_AREA)
    return det, fm, img


def _eyes(det, fm, img, **kw):
    return det._detect(img, threshold=-math.inf, max_scale=1.0, min_scale=0.0, nms_radius=None,
                       refine=True, cascade=True, n_jobs=1, merge_radius=None, pairs=None,
                       max_memory=None, names=["left_eye_center", "right_eye_center"], **kw)


def test_region_peaks_equal_full_level_peaks(setup):
    """Inside a region the peaks (positions, sub-pixel offsets, scores) are those of the scan
    of the whole level; the ring of scanned windows around it only feeds the peak test."""
    det, fm, img = setup
    found, scale = _eyes(det, fm, img)
    c, t = eye_pairs(found, scale, fm)
    assert len(c) >= 1
    level = pyramid_level(img, 0)
    cache = LevelCache(level)
    h, w = level.shape
    grid = (h - WINDOW + 1, w - WINDOW + 1)
    regions, scan = level_regions(level, grid, OTHERS, fm, c, t, scales_per_octave=4, pad=6.0)
    n_checked = 0
    for k in OTHERS:
        assert regions[k] is not None and regions[k].sum() < 0.5 * regions[k].size
        assert (scan[k] >= regions[k]).all() and scan[k].sum() > regions[k].sum()
        plan = ScanPlan(det.pool, [det.classifiers[k]])
        tl = np.argwhere(np.ones(grid, dtype=bool)).astype(np.int64)
        full = plan.scores(cache, tl)[0].reshape(grid)
        r, cc = grid_peaks(full, -math.inf)
        inside = regions[k][r, cc]
        got = region_peaks(plan, cache, scan[k], regions[k], (0, grid[0]), 0)
        assert got is not None and len(got) == inside.sum()
        r, cc = r[inside], cc[inside]
        xy = np.column_stack([cc, r]).astype(np.float64) + HALF
        xy = level.to_original(xy + parabolic_offsets(full, r, cc))
        # the same peaks in the same (row-major) order, scores and sub-pixel positions
        np.testing.assert_array_equal(got[:, 2], full[r, cc])
        np.testing.assert_array_equal(got[:, :2], xy)
        n_checked += len(got)
    assert n_checked > 0


def test_bands_equal_cached_levels(setup):
    """The second scan on the eye scan's kept level maps equals the one on rebuilt levels in
    bands, also when a small memory budget splits the bands."""
    det, fm, img = setup
    keep = []
    found, scale = _eyes(det, fm, img, keep=keep)
    assert keep and all(isinstance(k, LevelCache) for k in keep)
    c, t = eye_pairs(found, scale, fm)
    a, sa = det._detect_in_regions(img, OTHERS, fm, c, t, max_scale=1.0, max_memory=None,
                                   caches=keep)
    b, sb = det._detect_in_regions(img, OTHERS, fm, c, t, max_scale=1.0, max_memory=None)
    small, ss = det._detect_in_regions(img, OTHERS, fm, c, t, max_scale=1.0,
                                       max_memory=(16 << 20) + 300_000)
    for k in OTHERS:
        assert len(a[k]) > 0
        np.testing.assert_array_equal(a[k], b[k])
        np.testing.assert_array_equal(sa[k], sb[k])
        np.testing.assert_array_equal(a[k], small[k])


def test_top_down_faces_match_full_scan(setup):
    """The astronaut's face: the same keypoints and score from both scans."""
    det, _, img = setup
    td = det.detect_faces(img, max_scale=1.0, top_down=True)
    full = det.detect_faces(img, max_scale=1.0)
    assert len(td) == len(full) == 1
    assert td[0].score == pytest.approx(full[0].score, abs=1e-12)
    for k, v in full[0].keypoints.items():
        np.testing.assert_allclose(td[0].keypoints[k], v, rtol=0, atol=1e-9)


def test_top_down_keypoints_are_full_scan_detections(setup):
    """The detections of the top-down scan lie at detections of the full scan, but for at most
    one per keypoint (or 10%): a peak at a region's border that a stronger peak just outside
    the region suppresses in the full scan."""
    det, fm, img = setup
    kw = dict(max_scale=1.0, n_jobs=1, max_memory=None)
    td, _ = det._face_detections(img, fm, top_down=True, **kw)
    full, _ = det._face_detections(img, fm, top_down=False, **kw)
    for k in fm.shape.names:
        assert len(td[k]) <= len(full[k])
        d = np.hypot(td[k][:, None, 0] - full[k][None, :, 0],
                     td[k][:, None, 1] - full[k][None, :, 1]).min(axis=1)
        assert (d >= 1e-6).sum() <= max(1, 0.1 * len(d))


def test_no_eye_candidate_scans_the_others_everywhere(setup):
    """Where no eye candidate places a face, the nose and mouth come from the full scan; a flat
    image gives no face."""
    det, fm, img = setup
    flat = np.full((120, 160, 3), 128, dtype=np.uint8)
    assert det.detect_faces(flat, max_scale=1.0, top_down=True) == []
    mouth = np.ascontiguousarray(img[110:200, 90:230])  # below the astronaut's eyes
    kw = dict(max_scale=1.0, n_jobs=1, max_memory=None)
    found, scale = det._face_detections(mouth, fm, top_down=True, **kw)
    c, t = eye_pairs(found, scale, fm)
    assert len(c) == 0 and len(single_eye_hypotheses(found, scale, fm, c, t)[0]) == 0
    full, _ = det._face_detections(mouth, fm, top_down=False, **kw)
    assert sum(len(found[k]) for k in OTHERS) > 0
    for k in OTHERS:
        np.testing.assert_array_equal(found[k], full[k])


def test_single_eye_hypotheses(setup):
    """An unpaired probable eye gives hypotheses through it over the eye's size and roll ranges;
    an improbable one, or one in a valid eye pair, gives none."""
    _, fm, _ = setup
    names = fm.shape.names
    hi = fm.calibration["left_eye_center"][0][-1]  # a raw score of the highest probability
    lo = fm.calibration["left_eye_center"][0][0] - 1.0
    found = {"left_eye_center": np.array([[100.0, 80.0, hi], [30.0, 20.0, lo]]),
             "right_eye_center": np.zeros((0, 3))}
    scale = {"left_eye_center": np.array([0.5, 0.5]), "right_eye_center": np.zeros(0)}
    none = np.zeros(0, complex)
    c, t = single_eye_hypotheses(found, scale, fm, none, none, n_ied=4, n_roll=3)
    assert len(c) == 12
    m = fm.shape.mean[names.index("left_eye_center")]
    np.testing.assert_allclose(c * complex(*m) + t, 100.0 + 80.0j, atol=1e-9)
    a, b = fm.scale_range["left_eye_center"]
    np.testing.assert_allclose([np.abs(c).min(), np.abs(c).max()], [a / 0.5, b / 0.5])
    roll = np.degrees(np.angle(c))
    np.testing.assert_allclose([roll.min(), roll.max()], fm.shape.roll_range)
    # the eye is in a pair: no single hypotheses
    pair = np.array([c[0]]), np.array([t[0]])
    assert len(single_eye_hypotheses(found, scale, fm, *pair)[0]) == 0


def test_level_regions_and_band_rows(setup):
    """A face hypothesis of IED 40 px at (100, 80): its nose region covers the predicted nose on
    the levels of the nose's scale range, none on a level far outside it."""
    _, fm, img = setup
    c, t = np.array([40.0 + 0j]), np.array([100.0 + 80.0j])
    level = pyramid_level(img, 0)
    h, w = level.shape
    regions, scan = level_regions(level, (h - 23, w - 23), ["nose_center"], fm, c, t,
                                  scales_per_octave=4, pad=0.0)
    nose = c[0] * complex(*fm.shape.mean[fm.shape.names.index("nose_center")]) + t[0]
    r, cc = int(round(nose.imag)) - HALF, int(round(nose.real)) - HALF
    assert regions["nose_center"][r, cc]
    rows = np.flatnonzero(regions["nose_center"].any(axis=1))
    half = (fm.radius[2] + 0.25) * 40
    assert rows[-1] - rows[0] + 1 <= 2 * half + 3
    assert band_rows(scan, WINDOW) == [(rows[0] - 1, rows[-1] + 2)]
    tiny = np.array([0.5 + 0j])  # IED 0.5 px: the nose would be found below every level
    regions, scan = level_regions(level, (h - 23, w - 23), ["nose_center"], fm, tiny, t,
                                  scales_per_octave=4, pad=0.0)
    assert regions["nose_center"] is None and band_rows(scan, WINDOW) == []
    assert level_bands(level, [(0, WINDOW)])[0].shape == (WINDOW, w)


def test_paint_equals_numpy_slices():
    from cvfs.keypoints._topdown import _paint

    rng = np.random.default_rng(0)
    r0, c0 = rng.integers(0, 30, 20), rng.integers(0, 40, 20)
    r1, c1 = r0 + rng.integers(0, 10, 20), c0 + rng.integers(0, 10, 20)
    got = np.zeros((40, 50), dtype=bool)
    _paint(got, r0, r1, c0, c1)
    want = np.zeros((40, 50), dtype=bool)
    for a, b, c, d in zip(r0, r1, c0, c1, strict=True):
        want[a:b, c:d] = True
    np.testing.assert_array_equal(got, want)


def test_keypoints_beyond_the_five_are_scanned_in_regions(setup):
    """A face model with a keypoint beyond the five (here a chin found by the mouth corner's
    classifier): the five come from the full scan unchanged, the chin only from inside the
    regions the eye hypotheses give it, each at a detection of its full scan."""
    from dataclasses import replace

    from cvfs.keypoints import KeypointDetector
    from cvfs.keypoints.faces import FACE_KEYPOINTS, FaceModel, ShapeModel

    det, fm, img = setup
    # the shipped detectors and face model restricted to the five MTFL keypoints
    five_names = tuple(FACE_KEYPOINTS)
    idx = [fm.shape.names.index(k) for k in five_names]
    cols = np.ravel([[2 * i, 2 * i + 1] for i in idx])
    s = fm.shape
    fm = FaceModel(ShapeModel(five_names, s.mean[idx], s.modes[:, cols], s.variances,
                              s.sigma[idx], s.roll_range),
                   {k: fm.calibration[k] for k in five_names}, fm.face_calibration,
                   {k: fm.scale_range[k] for k in five_names}, threshold=fm.threshold)
    det = KeypointDetector({k: det.classifiers[k] for k in five_names}, det.pool_params,
                           thresholds={k: det.thresholds[k] for k in five_names},
                           scales_per_octave=det.scales_per_octave, max_scale=det.max_scale,
                           nms_radius=det.nms_radius, merge_radius=det.merge_radius)
    extra = "chin_center"
    clfs = {**det.classifiers, extra: det.classifiers["mouth_left_corner"]}
    thr = {**det.thresholds, extra: det.thresholds["mouth_left_corner"]}
    det7 = KeypointDetector(clfs, det.pool_params, thresholds=thr,
                            scales_per_octave=det.scales_per_octave, max_scale=det.max_scale,
                            nms_radius=det.nms_radius, merge_radius=det.merge_radius)
    s = fm.shape
    shape = replace(s, names=s.names + (extra,), mean=np.vstack([s.mean, [[0.0, 1.45]]]),
                    modes=np.hstack([s.modes, np.zeros((len(s.modes), 2))]),
                    sigma=np.append(s.sigma, 0.1))
    fm7 = FaceModel(shape, {**fm.calibration, extra: fm.calibration["mouth_left_corner"]},
                    fm.face_calibration,
                    {**fm.scale_range, extra: fm.scale_range["mouth_left_corner"]},
                    threshold=fm.threshold)
    kw = dict(max_scale=1.0, n_jobs=1, max_memory=None)
    five, _ = det._face_detections(img, fm, top_down=False, **kw)
    got, scale = det7._face_detections(img, fm7, top_down=False, **kw)
    for k in fm.shape.names:
        np.testing.assert_array_equal(got[k], five[k])
    full, _ = det7._detect(img, threshold=-math.inf, min_scale=0.0, nms_radius=None,
                           refine=True, cascade=True, merge_radius=None, pairs=None,
                           names=[extra], **kw)
    assert 0 < len(got[extra]) < len(full[extra])
    d = np.hypot(got[extra][:, None, 0] - full[extra][None, :, 0],
                 got[extra][:, None, 1] - full[extra][None, :, 1]).min(axis=1)
    assert (d >= 1e-6).sum() <= max(1, 0.1 * len(d))
    # the face calibration is the eight-keypoint model's, so this face's score is lower
    faces = det7.detect_faces(img, max_scale=1.0, face_model=fm7, threshold=0.05)
    assert len(faces) == 1 and set(faces[0].keypoints) == set(fm7.shape.names)
    le, re = faces[0].keypoints["left_eye_center"], faces[0].keypoints["right_eye_center"]
    assert 20 < re[0] - le[0] < 30  # the astronaut's eyes, 25 px apart at this size
