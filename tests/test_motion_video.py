"""Video sources, the Lucas-Kanade tracker and the drawing helpers."""

import numpy as np
import pytest

from cvfs.io.video import SyntheticRigidVideo, open_video, read_frames, write_video
from cvfs.motion.candidates import generate_candidates
from cvfs.motion.evaluate import misclassification
from cvfs.motion.tracking import track_points
from cvfs.viz.motion import draw_tracks


def test_synthetic_source_reads_like_a_capture():
    cap = open_video("synth:motions=2,frames=4,seed=1,width=160,height=120")
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    assert len(frames) == 4 and frames[0].shape == (120, 160, 3) and frames[0].dtype == np.uint8
    assert not np.array_equal(frames[0], frames[3])
    np.testing.assert_array_equal(frames[2], cap.render(2))  # deterministic rendering


def test_open_video_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_video(tmp_path / "missing.avi")
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"this is not a video")
    with pytest.raises(ValueError, match="cannot open|no frame"):
        read_frames(junk)
    with pytest.raises(ValueError, match="unknown synthetic parameter 'colour'"):
        open_video("synth:colour=3")
    with pytest.raises(ValueError, match="n_motions and n_frames must be >= 1"):
        SyntheticRigidVideo(n_motions=0)


def test_write_video_roundtrip(tmp_path):
    frames = [SyntheticRigidVideo(2, 3, size=(64, 48)).render(f) for f in range(3)]
    path = write_video(tmp_path / "a.avi", frames)
    back = read_frames(path)
    assert len(back) == 3 and back[0].shape == (48, 64, 3)
    with pytest.raises(ValueError, match="at least one frame"):
        write_video(tmp_path / "b.avi", [])


def test_tracker_follows_synthetic_rigid_motions():
    src = SyntheticRigidVideo(n_motions=3, n_frames=20, seed=0)
    frames = [src.render(f) for f in range(20)]
    pts = track_points(frames)
    assert pts.ndim == 3 and pts.shape[1:] == (20, 2) and pts.shape[0] > 150
    assert np.all(np.isfinite(pts))
    truth = src.track_labels(pts)
    assert np.mean(truth >= 0) > 0.9 and set(truth[truth >= 0]) == {0, 1, 2}
    # the candidate pool contains a near-perfect segmentation of the tracks
    ok = truth >= 0
    cand = generate_candidates(pts / 160.0 - 1.0, 3)
    assert misclassification(cand.labels[:, ok], truth[ok]).min() < 0.03


def test_tracker_errors():
    frame = np.zeros((40, 40, 3), np.uint8)
    with pytest.raises(ValueError, match="at least 2 images"):
        track_points([frame])
    with pytest.raises(ValueError, match="same size"):
        track_points([frame, np.zeros((30, 40, 3), np.uint8)])
    with pytest.raises(ValueError, match="no trackable corner"):
        track_points([frame, frame])


def test_tracker_on_a_real_video(real_data):
    frames = read_frames(real_data / "hopkins155_videos" / "three-cars.avi")
    pts = track_points(frames)
    assert len(frames) == 15 and pts.shape[1] == 15 and pts.shape[0] > 100


def test_draw_tracks_draws_on_a_copy():
    frame = np.zeros((50, 50, 3), np.uint8)
    pts = np.array([[[10, 10], [12, 12], [14, 14]], [[30, 30], [30, 32], [30, 34]]], float)
    out = draw_tracks(frame, pts, np.array([0, 1]), 2)
    assert frame.sum() == 0 and out.sum() > 0
    assert tuple(out[14, 14]) != (0, 0, 0)
