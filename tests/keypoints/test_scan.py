"""The detection scan's speed paths give the plain scan's results: threads, plan reuse, and the
front-loaded soft-cascade calibration."""

import cv2
import numpy as np
import pytest
from skimage import data

from cvfs.keypoints import KeypointDetector, level_scan, load_detector
from cvfs.keypoints._additive import AdditiveModel, _rejection_distribution
from cvfs.keypoints._tiling import (
    BAND_FLOOR,
    MAX_MEMORY,
    band_budget,
    band_bytes,
    band_floor,
    check_max_memory,
    image_bytes,
    level_bytes,
    split_rows,
)


def _frame(size=(320, 240)):
    return cv2.resize(data.astronaut(), size, interpolation=cv2.INTER_AREA)


def test_detect_threads_match_serial():
    """Levels scanned by two threads give the serial detections bitwise (every window's score
    is computed alone), with the shipped detectors and with every cascade survivor kept."""
    det = load_detector()
    img = _frame()
    for threshold in (None, -np.inf):
        serial = det.detect(img, threshold=threshold, max_scale=1.0)
        for n_jobs in (2, 3, -1):
            par = det.detect(img, threshold=threshold, max_scale=1.0, n_jobs=n_jobs)
            assert list(par) == list(serial)
            for k in serial:
                np.testing.assert_array_equal(par[k], serial[k])
    # not a vacuous comparison: every keypoint has cascade survivors on the frame
    assert all(len(v) > 0 for v in serial.values())
    assert sum(len(v) for v in serial.values()) >= 5 * len(serial)


def test_detect_n_jobs_errors():
    det = load_detector()
    img = _frame((64, 48))
    for bad in (0, -2, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="n_jobs must be a positive int or -1"):
            det.detect(img, n_jobs=bad)


def test_detect_threads_full_scan_and_min_scale():
    """n_jobs also drives the scan without cascade, and min_scale skips levels as before."""
    m = AdditiveModel([0, 864 + 3], [0.0, -1.0], [4.0, 2.0],
                      [[0, 1, 2, 3, 4], [0, 0.5, 1, 1.5, 2]], -1.0)
    det = KeypointDetector({"nose_center": m}, {"haar_per_channel": 10})
    img = _frame((120, 90))
    for kw in ({"cascade": False}, {"min_scale": 0.5}):
        a = det.detect(img, max_scale=1.0, **kw)["nose_center"]
        b = det.detect(img, max_scale=1.0, n_jobs=2, **kw)["nose_center"]
        np.testing.assert_array_equal(a, b)
        assert len(a) > 0
    # min_scale=0.5 keeps only detections from the levels of scale >= 0.5
    few = det.detect(img, max_scale=1.0, min_scale=0.5)["nose_center"]
    every = det.detect(img, max_scale=1.0)["nose_center"]
    assert few.shape != every.shape or not np.array_equal(few, every)


def _count_bands(monkeypatch):
    """Record the number of bands of every level cut into bands by detect."""
    seen, real = [], level_scan.level_bands

    def spy(level, rows):
        seen.append(len(rows))
        return real(level, rows)

    monkeypatch.setattr(level_scan, "level_bands", spy)
    return seen


@pytest.mark.slow
def test_detect_in_bands_matches_whole_levels(monkeypatch):
    """A max_memory that cuts the large levels into bands of rows gives the whole-level
    detections bitwise (positions, scores, order), serially and with two threads, with the
    shipped detectors and with every cascade survivor's peak kept."""
    det = load_detector()
    img = _frame((640, 480))
    seen = _count_bands(monkeypatch)
    for threshold in (None, -np.inf):
        whole = det.detect(img, threshold=threshold, max_scale=1.0)
        assert seen == []  # the default budget holds every level of a 640x480 frame
        for n_jobs in (1, 2):
            banded = det.detect(img, threshold=threshold, max_scale=1.0, max_memory=40e6,
                                n_jobs=n_jobs)
            assert list(banded) == list(whole)
            for k in whole:
                np.testing.assert_array_equal(banded[k], whole[k])
        assert seen and max(seen) >= 5
        seen.clear()
    assert all(len(v) > 0 for v in whole.values())


def test_detect_in_bands_full_scan_and_one_row_bands(monkeypatch, caplog):
    """The scan without cascade in bands, and the smallest bands (one window row, when the
    budget holds less: a warning) give the whole-level detections."""
    m = AdditiveModel([0, 864 + 3, 200], [0.0, -1.0, 0.0], [4.0, 2.0, 5.0],
                      [[0, 1, 2, 3, 4], [0, 0.5, 1, 1.5, 2], [0, 1, 0, 1, 0]], -1.0)
    det = KeypointDetector({"nose_center": m}, {"haar_per_channel": 10})
    img = _frame((150, 110))
    seen = _count_bands(monkeypatch)
    per_pixel, fixed = band_bytes([m], True, True, False)
    # room for bands of 20 window rows on the first level (110 x 150)
    budget = (image_bytes(img.shape) + level_bytes(img.shape, 1.0, False) + fixed
              + per_pixel * 150 * (20 + 25))
    for kw in ({"cascade": False, "max_memory": budget}, {"max_memory": 1}):
        whole = det.detect(img, max_scale=1.0, **{k: v for k, v in kw.items()
                                                 if k != "max_memory"})["nose_center"]
        banded = det.detect(img, max_scale=1.0, **kw)["nose_center"]
        np.testing.assert_array_equal(banded, whole)
        assert len(whole) > 0 and max(seen) >= 4
        seen.clear()
    assert "max_memory=1 bytes is too small" in caplog.text


def test_split_rows_cover_the_level():
    """Own rows of the bands partition the window rows; each band holds its own rows and their
    neighbours, its level rows stay inside the level, and it fits the budget when it says so."""
    per_pixel, fixed = 300, 1000
    for shape in ((24, 30), (25, 40), (480, 640), (1000, 97), (6000, 8000)):
        gh = shape[0] - 23
        for rows in (1, 26, 27, 90, 89 + 64, 500, 1e9):
            budget = fixed + per_pixel * shape[1] * rows
            bands, fits = split_rows(shape, budget, per_pixel, fixed)
            own = np.concatenate([np.arange(b.k0, b.k1) for b in bands])
            np.testing.assert_array_equal(own, np.arange(gh))
            for b in bands:
                assert b.s <= max(b.k0 - 1, 0) and min(b.k1 + 1, gh) <= b.e <= gh
                r0, r1 = b.pixel_rows
                assert 0 <= r0 < r1 <= shape[0] and r1 - r0 >= 24
                if fits and len(bands) > 1:
                    assert fixed + per_pixel * shape[1] * (r1 - r0) <= budget
            assert fits == (rows >= 26 or len(bands) == 1 and rows >= shape[0])


def test_detect_max_memory_errors():
    det = load_detector()
    img = _frame((64, 48))
    for bad in (0, -1, float("nan"), True, "1e9"):
        with pytest.raises(ValueError, match="max_memory must be a positive number of bytes"):
            det.detect(img, max_memory=bad)
    assert check_max_memory(None) == MAX_MEMORY and check_max_memory(2e9) == 2_000_000_000


def test_rejection_distribution():
    np.testing.assert_allclose(_rejection_distribution(4, 0.0), [0.25, 0.5, 0.75, 1.0])
    v = _rejection_distribution(100, 20.0)
    assert v[-1] == 1.0 and (np.diff(v) > 0).all()
    assert v[4] > 0.6  # most of the budget is spent in the first 5 thresholds
    assert _rejection_distribution(0, 3.0).size == 0


def test_soft_cascade_front_load():
    """A front-loaded rejection distribution spends the miss budget at the first thresholds;
    the total loss stays within miss_rate, and the uniform one is unchanged."""
    rng = np.random.default_rng(0)
    k, n = 6, 200
    m = AdditiveModel(864 + np.arange(k), np.zeros(k), np.ones(k),
                      np.column_stack([np.zeros(k), np.ones(k)]), 0.0)
    X_pos = rng.random((n, k))
    X_neg = rng.random((400, k)) * 0.5
    uni = m.soft_cascade(X_pos, X_neg, miss_rate=0.1)
    same = m.soft_cascade(X_pos, X_neg, miss_rate=0.1, front_load=0.0)
    np.testing.assert_array_equal(uni.cascade_thresholds, same.cascade_thresholds)
    front = m.soft_cascade(X_pos, X_neg, miss_rate=0.1, front_load=50.0)

    def lost_after(c, t):
        z = np.cumsum(c.contributions(X_pos[:, c.features - 864]), axis=1)[:, :t]
        return int((z < c.cascade_thresholds[:t]).any(axis=1).sum())

    # uniform: floor(0.1 * 1 / 5 * 200) = 4 positives may go at the first threshold;
    # front-loaded: nearly all 20 of the budget
    assert lost_after(uni, 1) <= 4
    assert lost_after(front, 1) >= 19
    for c in (uni, front):
        assert lost_after(c, k - 1) <= 20
    # the front-loaded cascade rejects more negatives after one feature
    z1 = lambda c: c.contributions(X_neg[:, c.features - 864])[:, 0]  # noqa: E731
    assert (z1(front) < front.cascade_thresholds[0]).mean() > (
        z1(uni) < uni.cascade_thresholds[0]).mean()
    with pytest.raises(ValueError, match="front_load must be a finite float >= 0"):
        m.soft_cascade(X_pos, front_load=-1.0)


def test_band_budget_floor():
    """Bands get what the image and the level leave, but at least min(80 MiB, max_memory / 8)
    (whatever the threads, as such bands run one at a time): on the scale-2 level of a 4000x3000
    photo (576 MB, more than the
    640 MiB budget leaves) bands of ten window rows, not of one."""
    mm = MAX_MEMORY
    assert band_floor(mm) == BAND_FLOOR == 80 << 20
    assert band_floor(80 << 20) == 10 << 20
    assert band_budget(500e6, 100e6, 2, mm) == 200e6
    assert band_budget(500e6, 600e6, 1, mm) == BAND_FLOOR
    assert band_budget(500e6, 600e6, 2, mm) == BAND_FLOOR  # such bands run one at a time
    avail = mm - image_bytes((3000, 4000))
    per_pixel, fixed = band_bytes([None] * 5, True, True, True)
    bands, fits = split_rows((6000, 8000), band_budget(avail, level_bytes((3000, 4000), 2.0,
                                                                          False), 1, mm),
                             per_pixel, fixed)
    assert fits and bands[1].s - bands[0].s == 10 and len(bands) == 598
def test_upsampled_stride_scores_the_lattice_windows():
    """``stride=2`` on an upsampled level scores the windows on the even rows and columns with
    the scores every window gets, peaks taken on that grid; the original-size levels and the
    default stride keep every window; detect_faces checks its option."""
    from cvfs.keypoints._scan import ScanPlan
    from cvfs.vision import HALF, LevelCache, gaussian_pyramid

    det = load_detector()
    img = _frame((160, 120))
    names = ["left_eye_center", "right_eye_center"]
    models = [det.classifiers[k] for k in names]
    plan = ScanPlan(det.pool, models)
    up = next(lv for lv in gaussian_pyramid(img, max_scale=2.0, min_size=det.pool.window)
              if lv.index > 0)
    gh, gw = up.shape[0] - 2 * HALF, up.shape[1] - 2 * HALF
    rows = type("Rows", (), {"s": 0, "e": gh + 1, "k0": 0, "k1": gh + 1})()
    full = level_scan.band_peaks(det.pool, plan, models, LevelCache(up), rows, [-np.inf] * 2,
                                 False)
    coarse = level_scan.band_peaks(det.pool, plan, models, LevelCache(up), rows,
                                   [-np.inf] * 2, False,
                                   upsampled=level_scan.UpsampledScan(2))
    every = plan.scores(LevelCache(up), np.argwhere(np.ones((gh + 1, gw + 1), bool))).reshape(
        2, gh + 1, gw + 1)
    for q in range(2):
        assert coarse[q] is not None and len(coarse[q]) <= len(full[q])
        lvl = up.from_original(coarse[q][:, :2]) - HALF  # back to window corners
        c, r = np.round(lvl).astype(int).T
        assert (r % 2 == 0).all() and (c % 2 == 0).all()
        np.testing.assert_array_equal(coarse[q][:, 2], every[q][r, c])
    base = next(lv for lv in gaussian_pyramid(img, max_scale=1.0, min_size=det.pool.window)
                if lv.index == 0)
    gh0 = base.shape[0] - 2 * HALF
    rows0 = type("Rows", (), {"s": 0, "e": gh0 + 1, "k0": 0, "k1": gh0 + 1})()
    a = level_scan.band_peaks(det.pool, plan, models, LevelCache(base), rows0, [-np.inf] * 2,
                              True)
    b = level_scan.band_peaks(det.pool, plan, models, LevelCache(base), rows0, [-np.inf] * 2,
                              True, upsampled=level_scan.UpsampledScan(2))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="upsampled_stride must be an int >= 1"):
            det.detect_faces(img, upsampled_stride=bad)


def test_hog_blocks_from_pixels_match_the_maps():
    """HOG blocks from the window's pixels give the maps' scores up to float rounding, with
    the same windows rejected; the level's maps are not built; a bad value is refused."""
    from cvfs.keypoints._scan import ScanPlan
    from cvfs.vision import HALF, LevelCache, window_centres

    det = load_detector()
    models = list(det.classifiers.values())
    cache = LevelCache(_frame((200, 150)))
    tl = window_centres(cache.shape) - HALF
    direct = ScanPlan(det.pool, models, hog_blocks="pixels")
    a = direct.scores(cache, tl)
    assert cache._hog is None  # no maps built
    b = ScanPlan(det.pool, models).scores(cache, tl)
    _, depth, _ = ScanPlan(det.pool, models).scores(cache, tl, reached=True)
    np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
    np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=0, atol=1e-5)
    hog_at = [int(np.argmax(ScanPlan(det.pool, [m]).kind == 1)) for m in models]
    assert any((d > h).any() for d, h in zip(depth, hog_at, strict=True))  # HOG reached
    with pytest.raises(ValueError, match="hog_blocks must be 'maps' or 'pixels'"):
        ScanPlan(det.pool, models, hog_blocks="cells")
    with pytest.raises(ValueError, match="hog_blocks must be 'maps' or 'pixels'"):
        det.detect_faces(_frame((64, 48)), hog_blocks="cells")


def test_upsampled_stride_in_bands_matches_whole_levels(monkeypatch):
    """With ``stride=2`` an upsampled level cut into bands of rows gives the peaks of the whole
    level's lattice bitwise: the bands hold the lattice rows next to their own rows."""
    det = load_detector()
    img = _frame((160, 120))
    seen = _count_bands(monkeypatch)
    kw = dict(threshold=-np.inf, max_scale=2.0, min_scale=0.0, nms_radius=None, refine=True,
              cascade=True, n_jobs=1, merge_radius=None, pairs=None,
              upsampled=level_scan.UpsampledScan(2))
    whole = det._detect(img, max_memory=None, **kw)[0]
    assert seen == []
    banded = det._detect(img, max_memory=12e6, **kw)[0]
    assert seen and max(seen) >= 3
    assert list(banded) == list(whole)
    for k in whole:
        np.testing.assert_array_equal(banded[k], whole[k])
    assert all(len(v) > 0 for v in whole.values())
