"""The paper's detection criteria on hand-made cases."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from cvfs.datasets.faces import AnnotatedImage
from cvfs.keypoints.evaluate import (
    evaluate_detections,
    evaluate_keypoint,
    match_image,
    recall_at_precision,
)


def test_match_image_radii():
    # two faces, IED 100 and 20; keypoints at (0, 0) and (500, 500)
    pts = np.array([[0.0, 0.0], [500.0, 500.0]])
    ied = np.array([100.0, 20.0])
    det = np.array([
        [4.0, 3.0, 0.9],      # 5 px = 0.05 IED of face 0 -> detects it, not FP
        [0.0, 8.0, 0.8],      # 0.08 IED: neither detection nor FP
        [0.0, 10.0, 0.7],     # exactly 0.10 IED -> FP
        [501.0, 500.0, 0.6],  # 0.05 IED of face 1 -> detects it
        [502.0, 500.0, 0.95],  # 0.10 IED of face 1 -> FP
    ])
    fp, best = match_image(det, pts, ied)
    np.testing.assert_array_equal(fp, [False, False, True, False, True])
    np.testing.assert_array_equal(best, [0.9, 0.6])


def test_match_image_missing_faces():
    pts = np.array([[0.0, 0.0], [np.nan, np.nan], [50.0, 0.0]])
    ied = np.array([10.0, 10.0, np.nan])
    fp, best = match_image([[0.0, 0.0, 1.0], [50.0, 0.0, 2.0]], pts, ied)
    # only face 0 is evaluated; the detection on face 2 (unknown IED) is a false positive
    np.testing.assert_array_equal(fp, [False, True])
    np.testing.assert_array_equal(best, [1.0])
    fp, best = match_image(np.zeros((0, 3)), pts, ied)
    assert fp.shape == (0,) and best.tolist() == [-np.inf]
    fp, best = match_image([[1.0, 1.0, 0.5]], np.full((1, 2), np.nan), [10.0])
    assert fp.tolist() == [True] and best.size == 0


def test_curve_by_hand():
    # image A: one face, keypoint (10, 10), IED 100; image B: one face, keypoint (0, 0), IED 40
    dets = [
        np.array([[10, 10, 0.9], [80, 80, 0.8], [12, 10, 0.3]]),
        np.array([[0, 1, 0.5], [30, 30, 0.7]]),
    ]
    pts = [np.array([[10.0, 10.0]]), np.array([[0.0, 0.0]])]
    ieds = [np.array([100.0]), np.array([40.0])]
    c = evaluate_keypoint(dets, pts, ieds)
    np.testing.assert_array_equal(c.thresholds, [0.9, 0.8, 0.7, 0.5, 0.3])
    np.testing.assert_allclose(c.precision, [1, 1 / 2, 1 / 3, 2 / 4, 3 / 5])
    np.testing.assert_allclose(c.recall, [0.5, 0.5, 0.5, 1.0, 1.0])
    assert c.average_precision == pytest.approx(0.5 * 1 + 0.5 * 0.5)
    assert c.n_positives == 2 and c.n_detections == 5
    assert recall_at_precision(c, 0.5) == 1.0
    assert recall_at_precision(c, 0.9) == 0.5
    assert recall_at_precision(c, 1.0) == 0.5
    # equals scikit-learn's AP when each detection hits a distinct keypoint or nothing
    y = np.array([1, 0, 0, 1, 0])
    s = np.array([0.9, 0.8, 0.7, 0.5, 0.3])
    d2 = [np.array([[10, 10, 0.9], [80, 80, 0.8]]), np.array([[0, 1, 0.5], [30, 30, 0.7]]),
          np.array([[90, 90, 0.3]])]
    c2 = evaluate_keypoint(d2, pts + [np.array([[0.0, 0.0]])], ieds + [np.array([40.0])])
    # the third image's keypoint is never found: recall tops at 2/3
    assert c2.average_precision == pytest.approx(average_precision_score(y, s) * 2 / 3)


def test_ties_and_empty():
    c = evaluate_keypoint([np.zeros((0, 3))], [np.array([[1.0, 1.0]])], [np.array([10.0])])
    assert c.average_precision == 0.0 and c.n_positives == 1 and c.thresholds.size == 0
    assert recall_at_precision(c, 0.5) == 0.0
    # two detections with the same score: one hit, one FP -> one threshold, P = 1/2, R = 1
    c = evaluate_keypoint([np.array([[1, 1, 0.5], [9, 9, 0.5]])], [np.array([[1.0, 1.0]])],
                          [np.array([10.0])])
    np.testing.assert_allclose(c.precision, [0.5])
    np.testing.assert_allclose(c.recall, [1.0])


def test_evaluate_detections():
    pts = np.full((1, 21, 2), np.nan)
    pts[0, 7] = [10, 10]
    pts[0, 10] = [30, 10]
    im = AnnotatedImage(path=None, points=pts, dataset="mtfl")
    dets = [{"left_eye_center": np.array([[10.5, 10, 1.0]]),
             "right_eye_center": np.array([[10, 10, 1.0]])}]
    curves = evaluate_detections(dets, [im], ["left_eye_center", "right_eye_center"])
    assert curves["left_eye_center"].average_precision == 1.0
    assert curves["right_eye_center"].average_precision == 0.0
    assert curves["left_eye_center"].as_dict()["max_recall"] == 1.0


def test_errors():
    with pytest.raises(ValueError, match="need 0 < detect_radius <= fp_radius"):
        match_image(np.zeros((0, 3)), np.zeros((1, 2)), [1.0], detect_radius=0.2)
    with pytest.raises(ValueError, match=r"detections must have shape \(n, 3\)"):
        match_image(np.zeros((2, 2)), np.zeros((1, 2)), [1.0])
    with pytest.raises(ValueError, match="ied has 2 faces but points has 1"):
        match_image(np.zeros((1, 3)), np.zeros((1, 2)), [1.0, 2.0])
    with pytest.raises(ValueError, match="must list the same images"):
        evaluate_keypoint([np.zeros((0, 3))], [], [])
    with pytest.raises(ValueError, match="precision must be in"):
        recall_at_precision(None, 1.5)
    im = AnnotatedImage(path=None, points=np.zeros((1, 21, 2)), dataset="mtfl")
    with pytest.raises(ValueError, match="same length"):
        evaluate_detections([], [im], ["left_eye_center"])
    with pytest.raises(ValueError, match="has no keypoint 'nose_center'"):
        evaluate_detections([{}], [im], ["nose_center"])
    with pytest.raises(ValueError, match="keypoint must be one of"):
        evaluate_detections([{}], [im], ["eye"])


def test_evaluate_merged():
    from cvfs.keypoints.evaluate import evaluate_merged

    pts = np.full((1, 21, 2), np.nan)
    pts[0, 7] = [10, 10]
    pts[0, 10] = [30, 10]
    im = AnnotatedImage(path=None, points=pts, dataset="caltech_webfaces")
    # one detection on each eye, one between them (10 px = 0.5 IED from both: FP)
    c = evaluate_merged([np.array([[10, 10, 3.0], [30.5, 10, 2.0], [20, 10, 1.0]])], [im],
                        ["left_eye_center", "right_eye_center"])
    np.testing.assert_allclose(c.recall, [0.5, 1.0, 1.0])
    np.testing.assert_allclose(c.precision, [1.0, 1.0, 2 / 3])
    assert c.n_positives == 2


def _two_faces():
    pts = np.full((3, 21, 2), np.nan)
    pts[0, 7], pts[0, 10] = [10, 10], [30, 10]  # IED 20
    pts[1, 7], pts[1, 10] = [100, 50], [110, 50]  # IED 10
    pts[2, 7] = [200, 200]  # one eye: not evaluated
    return AnnotatedImage(path=None, points=pts, dataset="mtfl")


def _face(score, left, right):
    from cvfs.keypoints.faces import Face

    return Face(score, (0, 0, 1, 1), {"left_eye_center": (*left, 0.9),
                                      "right_eye_center": (*right, 0.8),
                                      "nose_center": (np.nan, np.nan, np.nan)}, 1.0)


def test_face_keypoint_errors():
    from cvfs.keypoints.evaluate import face_keypoint_errors

    im = _two_faces()
    faces = [[_face(0.3, (11, 9), (30.5, 10)),  # face 0: errors (+1, -1), (+0.5, 0)
              _face(0.9, (14, 10), (34, 10)),  # farther from face 0 (0.2 IED)
              _face(0.5, (103, 50), (110, 50))]]  # face 1 at 0.3 IED: beyond max_distance 0.25
    r = face_keypoint_errors(faces, [im], max_distance=0.25)
    assert r["ied"].tolist() == [20.0, 10.0]
    assert r["matched"].tolist() == [True, False]
    np.testing.assert_allclose(r["distance"], [np.hypot(1, 1) / 20, 0.3])
    np.testing.assert_allclose(r["errors"][0], [[1, -1], [0.5, 0]])
    assert np.isnan(r["errors"][1]).all() and np.isnan(r["score"][1])
    assert r["score"][0] == 0.3 and r["image"].tolist() == [0, 0]
    # a keypoint the face lacks gives NaN errors; no faces at all: unmatched, distance inf
    r = face_keypoint_errors([faces[0][:1]], [im], ("nose_center", "left_eye_center"))
    assert np.isnan(r["errors"][0, 0]).all() and r["errors"][0, 1].tolist() == [1, -1]
    r = face_keypoint_errors([[]], [im])
    assert not r["matched"].any() and np.isinf(r["distance"]).all()
    assert r["errors"].shape == (2, 2, 2)


def test_face_keypoint_errors_bad_input():
    from cvfs.keypoints.evaluate import face_keypoint_errors

    with pytest.raises(ValueError, match="same images"):
        face_keypoint_errors([[], []], [_two_faces()])
    with pytest.raises(ValueError, match="max_distance"):
        face_keypoint_errors([[]], [_two_faces()], max_distance=0)
