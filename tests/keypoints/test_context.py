"""Geometric context: pairing rescoring of left/right detections, and its use in detect()."""

import numpy as np
import pytest

from cvfs.io import load_model
from cvfs.keypoints import KeypointDetector
from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints.context import PairModel, pair_rescore, partner_values
from cvfs.keypoints.peaks import nms
from tests import naive


def test_pairing_prefers_a_consistent_pair_over_an_isolated_peak():
    model = PairModel()  # spacing 27.3 level px; at scale 1 the partner is 27.3 px away
    # a face: left eye at (100, 50), right eye 27 px to its right (score 0.5);
    # an isolated background peak scoring higher than the true left eye
    left = np.array([[100.0, 50.0, 1.0, 1.0],
                     [300.0, 200.0, 1.5, 1.0]])
    right = np.array([[127.0, 51.0, 0.5, 1.0]])
    sl, sr = pair_rescore(left, right, model)
    assert sl[0] > sl[1]  # the paired left eye now outranks the isolated peak
    assert sl[0] == pytest.approx(1.0 - model.weight * max(0.0, model.tau - (0.5 - 0.5 * (
        np.hypot(-0.3, 1.0) / (model.sigma * 27.3)) ** 2)))
    assert sl[1] == pytest.approx(1.5 - model.weight * model.cap)  # no partner: full penalty
    assert sr[0] == pytest.approx(0.5)  # its partner (1.0) is above tau: unchanged
    # scores never rise
    assert (sl <= left[:, 2]).all() and (sr <= right[:, 2]).all()


def test_pairing_uses_the_level_scale():
    model = PairModel()
    # found on level 0.5: the partner is expected 27.3 / 0.5 = 54.6 original px away
    left = np.array([[100.0, 50.0, 1.0, 0.5]])
    near = np.array([[127.3, 50.0, 2.0, 0.5]])
    far = np.array([[154.6, 50.0, 2.0, 0.5]])
    assert pair_rescore(left, far, model)[0][0] == pytest.approx(1.0)
    assert pair_rescore(left, near, model)[0][0] == pytest.approx(1.0 - model.weight * model.cap)
    # a right eye looks to its left
    assert partner_values(far, left, -1, model)[0] == pytest.approx(1.0)
    assert partner_values(far, left, 1, model)[0] == -np.inf


def test_pair_rescore_matches_naive():
    rng = np.random.default_rng(0)
    for model in (PairModel(), PairModel(spacing=20.0, sigma=0.3, weight=1.0, tau=-0.5, cap=1.0,
                                         gate=2.0)):
        left = np.column_stack([rng.uniform(0, 120, 60), rng.uniform(0, 80, 60),
                                rng.normal(0, 1, 60), rng.choice([0.5, 1.0, 1.41, 2.0], 60)])
        right = np.column_stack([rng.uniform(0, 120, 50), rng.uniform(0, 80, 50),
                                 rng.normal(0, 1, 50), rng.choice([0.5, 1.0, 2.0], 50)])
        got = pair_rescore(left, right, model)
        want = naive.pair_rescore(left, right, model.spacing, model.sigma, model.weight,
                                  model.tau, model.cap, model.gate)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    # empty sides
    sl, sr = pair_rescore(np.zeros((0, 4)), right[:3])
    assert sl.shape == (0,)
    np.testing.assert_allclose(sr, right[:3, 2] - PairModel().weight * PairModel().cap)


def test_pair_model_errors():
    with pytest.raises(ValueError, match="spacing must be a positive finite"):
        PairModel(spacing=0.0)
    with pytest.raises(ValueError, match="cap must be a finite number >= 0"):
        PairModel(cap=-1.0)
    with pytest.raises(ValueError, match="tau must be finite"):
        PairModel(tau=np.inf)
    with pytest.raises(ValueError, match="must differ"):
        PairModel(left="left_eye_center", right="left_eye_center")
    with pytest.raises(ValueError, match=r"left must have shape \(n, 4\)"):
        pair_rescore(np.zeros((2, 3)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="scales .* must be positive"):
        pair_rescore(np.zeros((1, 4)), np.ones((1, 4)))
    with pytest.raises(ValueError, match="direction must be 1 or -1"):
        partner_values(np.ones((1, 4)), np.ones((1, 4)), 0, PairModel())


def test_nms_merge_radius():
    d = np.array([[1.0, 0, 2.0], [0.0, 0, 1.0], [3.0, 0, 1.5]])
    # merge radius 1.5: (0, 0) joins the mean, (3, 0) is suppressed but too far to move it
    merged = nms(d, np.full(3, 2.5), merge=True, merge_radius=np.full(3, 1.5))
    np.testing.assert_allclose(merged, [[(1 * 2.0 + 0 * 1.0) / 3.0, 0, 2.0]])
    # default: every suppressed detection joins
    merged = nms(d, np.full(3, 2.5), merge=True)
    np.testing.assert_allclose(merged, [[(1 * 2.0 + 3 * 1.5) / 4.5, 0, 2.0]])


def _toy_eyes():
    m = AdditiveModel([0, 864 + 3], [0.0, -1.0], [4.0, 2.0],
                      [[0, 1, 2, 3, 4], [0, 0.5, 1, 1.5, 2]], -1.0)
    return KeypointDetector({"left_eye_center": m, "right_eye_center": m, "nose_center": m},
                            {"haar_per_channel": 10}, merge_radius=2.0)


def test_detect_pairs(tmp_path):
    det = _toy_eyes()
    img = (np.random.default_rng(1).random((60, 70, 3)) * 255).astype(np.uint8)
    plain = det.detect(img, max_scale=1.0, threshold=-np.inf)
    paired = det.detect(img, max_scale=1.0, threshold=-np.inf, pairs=True)
    for k in ("left_eye_center", "right_eye_center"):
        assert paired[k].shape == plain[k].shape
        assert (np.diff(paired[k][:, 2]) <= 0).all()
        # same positions, scores never higher
        a = plain[k][np.lexsort(plain[k][:, :2].T)]
        b = paired[k][np.lexsort(paired[k][:, :2].T)]
        np.testing.assert_allclose(b[:, :2], a[:, :2])
        assert (b[:, 2] <= a[:, 2] + 1e-12).all()
    np.testing.assert_array_equal(paired["nose_center"], plain["nose_center"])
    # the threshold applies to the rescored scores
    thr = det.detect(img, max_scale=1.0, threshold=0.2, pairs=PairModel(weight=1.0))
    assert all((v[:, 2] >= 0.2).all() for v in thr.values())
    # merge_radius is a saved setting
    back = KeypointDetector.from_saved(load_model(det.save(tmp_path / "eyes.h5")))
    assert back.merge_radius == 2.0


def test_detect_pairs_errors():
    det = _toy_eyes()
    img = np.zeros((40, 40, 3), np.uint8)
    with pytest.raises(TypeError, match="pairs must be a bool, None or a PairModel"):
        det.detect(img, pairs="eyes")
    lone = KeypointDetector({"left_eye_center": det.classifiers["left_eye_center"]},
                            {"haar_per_channel": 10})
    with pytest.raises(ValueError, match=r"lacks \['right_eye_center'\]"):
        lone.detect(img, pairs=True)
