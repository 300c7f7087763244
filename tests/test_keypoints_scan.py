"""The detection scan's speed paths give the plain scan's results: threads, plan reuse, and the
front-loaded soft-cascade calibration."""

import cv2
import numpy as np
import pytest
from skimage import data

from cvfs.keypoints import KeypointDetector, load_detector
from cvfs.keypoints._additive import AdditiveModel, _rejection_distribution


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
