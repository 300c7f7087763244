"""Faces in video: scanned every few frames, followed between (cvfs.keypoints.video)."""

import math

import cv2
import numpy as np
import pytest
from skimage import data

from cvfs.keypoints import load_detector
from cvfs.keypoints.video import VideoFaceDetector

EYES = ("left_eye_center", "right_eye_center")


def _pan(n, step=(3, 2), zoom=0.0):
    """``n`` 480 x 640 frames of the astronaut panned by ``step`` px (x, y) per frame and
    enlarged by ``zoom`` per frame (a camera moving over the picture)."""
    big = cv2.resize(data.astronaut(), (800, 800), interpolation=cv2.INTER_AREA)
    out = []
    for i in range(n):
        z = (1.0 + zoom) ** i
        m = np.array([[z, 0, -40.0 - step[0] * i], [0, z, -20.0 - step[1] * i]])
        out.append(cv2.warpAffine(big, m, (640, 480), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REFLECT))
    return out


@pytest.fixture(scope="module")
def det():
    return load_detector()


def _eye_error(a, b):
    """Largest distance between the eyes of two faces, in b's inter-eye distances."""
    return max(math.hypot(a.keypoints[k][0] - b.keypoints[k][0],
                          a.keypoints[k][1] - b.keypoints[k][1]) for k in EYES) / b.ied


def test_followed_faces_match_a_scan_of_every_frame(det):
    frames = _pan(6, zoom=0.01)
    video = VideoFaceDetector(det, rescan=10)
    got = [video(f) for f in frames]
    assert video.scanned == [True, False, False, False, False, False]
    assert [len(g) for g in got] == [1] * 6
    assert all(math.isfinite(v) for g in got for p in g[0].keypoints.values() for v in p)
    for i in (2, 5):  # the followed face where a scan of the frame puts it
        (scan,) = det.detect_faces(frames[i], top_down=True, max_scale=1.0)
        assert _eye_error(got[i][0], scan) < 0.03
        assert got[i][0].score > 0.5 and abs(got[i][0].ied - scan.ied) < 0.05 * scan.ied
    # the eyes' midpoint follows the camera's motion (frame i = 1.01^i x picture - shift)
    x = np.array([0.5 * (g[0].keypoints[EYES[0]][0] + g[0].keypoints[EYES[1]][0]) for g in got])
    i = np.arange(6)
    np.testing.assert_allclose(x, 1.01 ** i * (x[0] + 40.0) - 40.0 - 3.0 * i, atol=1.0)
    assert got[5][0].ied > got[0][0].ied


def test_rescan_period_and_a_lost_face_rescans(det):
    frames = _pan(4)
    video = VideoFaceDetector(det, rescan=2)
    for f in frames:
        video(f)
    assert video.scanned == [True, False, True, False]
    # the face leaves the picture: nothing follows it, so the frame is scanned (and has none)
    blank = np.full((480, 640, 3), 128, np.uint8)
    video = VideoFaceDetector(det, rescan=10)
    assert len(video(frames[0])) == 1
    assert video(blank) == [] and video.scanned == [True, True]
    assert video(blank) == [] and video.scanned == [True, True, True]


def test_bad_settings(det):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="rescan"):
            VideoFaceDetector(det, rescan=bad)
    for bad in (0, -0.1, 2.0, "x"):
        with pytest.raises(ValueError, match="radius"):
            VideoFaceDetector(det, radius=bad)
