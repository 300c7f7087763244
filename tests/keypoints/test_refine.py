"""Keypoint refinement: quadratic sub-pixel peaks and the dense local rescan around faces."""

import math

import numpy as np
import pytest

from cvfs.keypoints.faces import Face
from cvfs.keypoints.refine import quadratic_peak, refine_face_keypoints, refine_points


def _patch(f):
    y, x = np.mgrid[-1:2, -1:2].astype(float)
    return f(x, y)


def test_quadratic_peak_exact_on_a_quadratic():
    """A quadratic with a cross term is fitted exactly: its maximum is recovered."""
    x0, y0 = 0.3, -0.2
    p = _patch(lambda x, y: 2.0 - (x - x0) ** 2 - 2.0 * (y - y0) ** 2
               + 0.5 * (x - x0) * (y - y0))
    np.testing.assert_allclose(quadratic_peak(p), [x0, y0], atol=1e-12)


def test_quadratic_peak_gaussian_and_degenerate():
    """A sampled Gaussian peak is found to a tenth of a pixel; flat or saddle patches fall back
    to per-axis vertices (0 without curvature); bad input raises."""
    g = _patch(lambda x, y: np.exp(-((x + 0.25) ** 2 + (y - 0.35) ** 2) / (2 * 1.5 ** 2)))
    np.testing.assert_allclose(quadratic_peak(g), [-0.25, 0.35], atol=0.1)
    np.testing.assert_array_equal(quadratic_peak(np.ones((3, 3))), [0.0, 0.0])
    ridge = _patch(lambda x, y: -(x - 0.2) ** 2 + 0.0 * y)  # curved in x only
    np.testing.assert_allclose(quadratic_peak(ridge), [0.2, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="3 x 3"):
        quadratic_peak(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        quadratic_peak(np.full((3, 3), np.nan))


class _BlobDetector:
    """Stand-in detector: a window's score is the darkness of the level image at its centre."""

    classifiers = {"left_eye_center": None, "right_eye_center": None}
    keypoints = list(classifiers)

    def __init__(self):
        self.calls = 0
        self.levels = {}  # id -> level; holding the level keeps its id from being reused

    def score_level(self, cache, centres, keypoints, *, cascade=True):
        self.calls += 1
        self.levels[id(cache)] = cache
        assert cascade is False
        v = 1.0 - cache.image[centres[:, 0], centres[:, 1]].mean(axis=1)
        return centres, dict.fromkeys(keypoints, v.astype(np.float64))


def _blob_image(points, sigma=2.5, size=(90, 120)):
    y, x = np.mgrid[0:size[0], 0:size[1]].astype(float)
    img = np.ones(size)
    for px, py in points:
        img -= 0.8 * np.exp(-((x - px) ** 2 + (y - py) ** 2) / (2 * sigma ** 2))
    return np.repeat(img[..., None], 3, axis=2).astype(np.float32)


def test_refine_points_finds_sub_pixel_blob_centres():
    """Rescanning at several scales moves each point from a pixel-off start to the sub-pixel
    centre of the dark blob under it; NaN rows are returned unchanged."""
    truth = np.array([[40.3, 45.6], [70.7, 44.2]])
    img = _blob_image(truth)
    det = _BlobDetector()
    start = np.vstack([truth + [[0.8, -0.6], [-0.7, 0.9]], [[np.nan, np.nan]]])
    out = refine_points(det, img, start, ["left_eye_center", "right_eye_center",
                                          "left_eye_center"], np.array([30.0, 30.0, 30.0]))
    assert out.shape == (3, 3)
    np.testing.assert_allclose(out[:2, :2], truth, atol=0.15)
    assert np.all(np.abs(out[:2, 2] - 0.8) < 0.05)
    assert np.isnan(out[2]).sum() == 3
    assert len(det.levels) == 5  # five scales, the two points of one face on one level each
    single = _BlobDetector()
    alone = refine_points(single, img, start, ["left_eye_center", "right_eye_center",
                                               "left_eye_center"], np.array([30.0] * 3),
                          shared=False)
    assert len(single.levels) == 10
    np.testing.assert_allclose(alone, out, atol=1e-6)


def test_refine_face_keypoints_moves_only_positions():
    truth = np.array([[40.3, 45.6], [70.7, 44.2]])
    img = _blob_image(truth)
    kp = {"left_eye_center": (41.0, 45.0, 0.9), "right_eye_center": (70.0, 45.0, 0.7),
          "nose_center": (55.0, 60.0, 0.4), "mouth_left_corner": (math.nan,) * 3}
    face = Face(0.8, (20.0, 20.0, 90.0, 90.0), kp, ied=30.0)
    (new,) = refine_face_keypoints(_BlobDetector(), img, [face])
    assert face.keypoints["left_eye_center"] == (41.0, 45.0, 0.9)  # input untouched
    for i, k in enumerate(("left_eye_center", "right_eye_center")):
        np.testing.assert_allclose(new.keypoints[k][:2], truth[i], atol=0.15)
        assert new.keypoints[k][2] == kp[k][2]
    assert new.keypoints["nose_center"] == kp["nose_center"]  # not a detector keypoint
    assert math.isnan(new.keypoints["mouth_left_corner"][0])
    assert (new.score, new.box, new.ied) == (face.score, face.box, face.ied)
    (p,) = refine_face_keypoints(_BlobDetector(), img, [face],
                                 probability=lambda k, s: 0.5 * s)
    assert p.keypoints["left_eye_center"][2] == pytest.approx(0.4, abs=0.03)
    assert refine_face_keypoints(_BlobDetector(), img, []) == []
    # a radius per keypoint name: the same as one radius for all when they agree
    (r,) = refine_face_keypoints(_BlobDetector(), img, [face],
                                 radius={"left_eye_center": 0.1, "right_eye_center": 0.1})
    assert r.keypoints == new.keypoints


def test_level_ied_per_point_and_per_keypoint():
    """``level_ied`` per point rescans each point at its own scales: points of one face with
    different values get separate levels, and a per-keypoint dict in refine_face_keypoints equals
    the per-point array; both still find the blob centres."""
    truth = np.array([[40.3, 45.6], [70.7, 44.2]])
    img = _blob_image(truth)
    start = truth + [[0.8, -0.6], [-0.7, 0.9]]
    names = ["left_eye_center", "right_eye_center"]
    det = _BlobDetector()
    out = refine_points(det, img, start, names, np.array([30.0, 30.0]),
                        level_ied=np.array([28.0, 40.0]))
    np.testing.assert_allclose(out[:, :2], truth, atol=0.15)
    assert len(det.levels) == 10  # no shared level: 5 scales per point
    same = refine_points(_BlobDetector(), img, start, names, np.array([30.0, 30.0]),
                         level_ied=[28.0, 28.0])
    np.testing.assert_allclose(same, refine_points(_BlobDetector(), img, start, names,
                                                   np.array([30.0, 30.0])))
    kp = {k: (*xy, 0.9) for k, xy in zip(names, start.tolist(), strict=True)}
    face = Face(0.8, (20.0, 20.0, 90.0, 90.0), kp, ied=30.0)
    (f,) = refine_face_keypoints(_BlobDetector(), img, [face],
                                 level_ied={"right_eye_center": 40.0})
    np.testing.assert_allclose([f.keypoints[k][:2] for k in names], out[:, :2], atol=1e-9)
    with pytest.raises(ValueError, match="level_ied"):
        refine_points(_BlobDetector(), img, start, names, np.ones(2), level_ied=[28.0] * 3)
    with pytest.raises(ValueError, match="level_ied > 0"):
        refine_points(_BlobDetector(), img, start, names, np.ones(2), level_ied=[28.0, 0.0])


def test_refine_points_bad_input():
    det, img = _BlobDetector(), _blob_image([])
    with pytest.raises(ValueError, match="one row each"):
        refine_points(det, img, np.zeros((2, 2)), ["left_eye_center"], np.ones(2))
    with pytest.raises(ValueError, match="unknown keypoints"):
        refine_points(det, img, np.zeros((1, 2)), ["chin"], np.ones(1))
    with pytest.raises(ValueError, match="one per point"):
        refine_points(det, img, np.zeros((2, 2)), ["left_eye_center"] * 2, np.ones(2),
                      radius=[0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="scale_step"):
        refine_points(det, img, np.zeros((1, 2)), ["left_eye_center"], np.ones(1),
                      scale_step=1.0)
    with pytest.raises(ValueError):
        refine_points(det, np.zeros((10, 10, 3)), np.zeros((1, 2)), ["left_eye_center"],
                      np.ones(1))


def test_refine_face_keypoints_fills_missing_at_predicted_position():
    """A keypoint the face lacks is searched around its fitted-model position and scored by the
    given probability; without ``fill_missing``, or without a prediction, it stays NaN."""
    truth = np.array([[40.3, 45.6], [70.7, 44.2]])
    img = _blob_image(truth)
    kp = {"left_eye_center": (41.0, 45.0, 0.9), "right_eye_center": (math.nan,) * 3}
    pred = {"left_eye_center": (41.0, 45.0), "right_eye_center": (66.0, 47.0)}
    face = Face(0.8, (20.0, 20.0, 90.0, 90.0), kp, ied=30.0, predicted=pred)
    (same,) = refine_face_keypoints(_BlobDetector(), img, [face])
    assert math.isnan(same.keypoints["right_eye_center"][0])
    (new,) = refine_face_keypoints(_BlobDetector(), img, [face],
                                   fill_missing=lambda k, s: 0.5 * s)
    np.testing.assert_allclose(new.keypoints["right_eye_center"][:2], truth[1], atol=0.15)
    assert new.keypoints["right_eye_center"][2] == pytest.approx(0.4, abs=0.03)
    assert new.keypoints["left_eye_center"][2] == 0.9  # found keypoints keep their score
    # the default fill radius (0.25 IED = 7.5 px) does not reach a blob 12 px away
    far = Face(0.8, face.box, kp, ied=30.0,
               predicted={"right_eye_center": (58.7, 44.2)})
    (f,) = refine_face_keypoints(_BlobDetector(), img, [far], fill_missing=lambda k, s: s)
    assert abs(f.keypoints["right_eye_center"][0] - 70.7) > 3.0
    (nopred,) = refine_face_keypoints(_BlobDetector(), img,
                                      [Face(0.8, face.box, kp, ied=30.0)],
                                      fill_missing=lambda k, s: s)
    assert math.isnan(nopred.keypoints["right_eye_center"][0])
    with pytest.raises(ValueError, match="fill_missing"):
        refine_face_keypoints(_BlobDetector(), img, [face], fill_missing=0.5)
    with pytest.raises(ValueError, match="fill_radius"):
        refine_face_keypoints(_BlobDetector(), img, [face], fill_missing=lambda k, s: s,
                              fill_radius=0.0)


def test_sub_level_is_a_piece_of_the_resampled_image():
    """A rectangle of the resampled image equals the same rectangle of the whole image
    resampled as the pyramid does (blur, then bilinear resize), wherever it starts."""
    import cv2

    from cvfs.keypoints.refine import _sub_level

    rng = np.random.default_rng(0)
    img = cv2.GaussianBlur(rng.random((96, 128, 3)).astype(np.float32), (0, 0), 1.5)
    for scale in (0.5, 1.5):
        whole = img
        if scale < 1:
            s = math.sqrt(1 / scale ** 2 - 1) / 2
            whole = cv2.GaussianBlur(img, (0, 0), sigmaX=s, sigmaY=s,
                                     borderType=cv2.BORDER_REFLECT_101)
        whole = cv2.resize(whole, (int(128 * scale), int(96 * scale)),
                           interpolation=cv2.INTER_LINEAR)
        for r0, c0 in ((0, 0), (5, 17), (20, 30)):
            piece = _sub_level(img, scale, r0, c0, 24, 30)
            np.testing.assert_allclose(piece, whole[r0:r0 + 24, c0:c0 + 30], atol=2e-6)
        a = _sub_level(img, scale, 3, 4, 30, 40)
        np.testing.assert_array_equal(a[7:27, 9:39], _sub_level(img, scale, 10, 13, 20, 30))


def test_shared_levels_equal_one_level_per_keypoint_on_astronaut():
    """With the shipped detector, the keypoints of the astronaut's face refined on one shared
    level per scale equal those refined one keypoint at a time, and the full-classifier scores
    of ``score_level`` equal the feature pool's."""
    import cv2
    from skimage import data

    from cvfs.keypoints import load_detector
    from cvfs.keypoints.level_scan import level_scores as _level_scores
    from cvfs.vision import LevelCache

    det = load_detector()
    frame = cv2.resize(data.astronaut(), (320, 240), interpolation=cv2.INTER_AREA)
    cache = LevelCache(frame[40:120, 100:200])
    centres = np.array([[30, 40], [31, 40], [50, 60], [60, 80]])
    for k, m in det.classifiers.items():
        got = det.score_level(cache, centres, [k], cascade=False)[1][k]
        np.testing.assert_array_equal(got, _level_scores(det.pool, cache, centres, [m], False)[0])
    (face,) = det.detect_faces(frame, max_scale=2.0, threshold=0.0, refine=False)[:1]
    fm = det._face_model
    shared = refine_face_keypoints(det, frame, [face], fill_missing=fm.probability)[0]
    alone = refine_face_keypoints(det, frame, [face], fill_missing=fm.probability,
                                  shared=False)[0]
    assert set(shared.keypoints) == set(alone.keypoints)
    for k, v in shared.keypoints.items():
        np.testing.assert_allclose(v, alone.keypoints[k], atol=1e-5)
    moved = [np.hypot(v[0] - face.keypoints[k][0], v[1] - face.keypoints[k][1])
             for k, v in shared.keypoints.items() if np.isfinite(face.keypoints[k][0])]
    assert max(moved) <= 0.1 * face.ied + 2.0  # within the search radius (plus a level pixel)
