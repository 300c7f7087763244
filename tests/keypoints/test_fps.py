"""The shipped detectors' soft-cascade scan (the per-window kernel that computes only the
features a window reaches) against the reference scoring: every selected feature computed by the
feature pool, then the cascade rule applied to the partial sums."""

import cv2
import numpy as np
from skimage import data

from cvfs.keypoints import load_detector
from cvfs.vision import LevelCache, pyramid_level


def _face_level():
    """A small level holding the astronaut's face (eyes, nose and mouth at the detector's
    size), so every shipped classifier has windows that pass its whole cascade."""
    img = cv2.resize(data.astronaut(), (320, 320), interpolation=cv2.INTER_AREA)
    return LevelCache(pyramid_level(img[20:110, 90:190], 0))


def test_shipped_cascade_scan_equals_reference_scores():
    det = load_detector()
    cache = _face_level()
    centres, got = det.score_level(cache)
    _, full = det.score_level(cache, centres, cascade=False)
    n_pass = 0
    for k, m in det.classifiers.items():
        X = det.pool.compute(cache, centres, columns=m.features)
        np.testing.assert_allclose(full[k], m.decision_function(X), rtol=0, atol=1e-5)
        z = m.intercept + np.cumsum(m.contributions(X), axis=1)
        ends = m.cascade_ends
        margin = z[:, ends - 1] - m.cascade_thresholds
        expect = (margin >= 0).all(axis=1)
        # HOG values may differ from the pool's by a float32 ulp: skip windows whose partial
        # score ties a threshold within 1e-6
        clear = np.abs(margin).min(axis=1) > 1e-6
        assert clear.mean() > 0.99
        alive = np.isfinite(got[k])
        np.testing.assert_array_equal(alive[clear], expect[clear])
        np.testing.assert_allclose(got[k][alive], full[k][alive], rtol=0, atol=1e-5)
        assert np.all(got[k][~alive] == -np.inf)
        n_pass += int(alive.sum())
    assert n_pass >= 5  # not vacuous: windows pass the full cascades


def test_detect_faces_matches_detect_peaks():
    """detect_faces fits the face model to the scan's peaks: without refinement its keypoints
    are detections of detect(threshold=-inf) on the same frame (same positions within 1e-6 px);
    the refinement moves them by at most its search radius (0.1 IED) plus one level pixel
    (at most 0.15 IED), scores unchanged; a keypoint the assembly left missing may be filled
    within the fill radius (0.25 IED) of the face model's position, with a probability."""
    det = load_detector()
    img = cv2.resize(data.astronaut(), (320, 240), interpolation=cv2.INTER_AREA)
    faces = det.detect_faces(img, max_scale=1.0, threshold=0.0, refine=False)
    found = det.detect(img, threshold=-np.inf, max_scale=1.0)
    assert faces
    for f in faces:
        for k, (x, y, _) in f.keypoints.items():
            if np.isfinite(x):
                d = np.hypot(found[k][:, 0] - x, found[k][:, 1] - y)
                assert d.min() < 1e-6
    refined = det.detect_faces(img, max_scale=1.0, threshold=0.0)
    assert [f.score for f in refined] == [f.score for f in faces]
    for f, g in zip(faces, refined, strict=True):
        for k, (x, y, p) in f.keypoints.items():
            gx, gy, gp = g.keypoints[k]
            if np.isnan(p):
                if np.isfinite(gp):
                    px, py = f.predicted[k]
                    assert 0.0 <= gp <= 1.0
                    assert np.hypot(gx - px, gy - py) <= 0.3 * f.ied
                continue
            assert gp == p
            assert np.hypot(gx - x, gy - y) <= 0.15 * f.ied
