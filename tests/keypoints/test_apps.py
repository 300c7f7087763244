"""The keypoint app (= ``cvfs keypoints detect``) on an image folder, a video file and the
synthetic clip; atomic output sets; the demo part."""


import cv2
import numpy as np
import pytest

from cvfs.keypoints import KeypointDetector
from cvfs.keypoints._additive import AdditiveModel
from tests.scripts import load_script


def _app():
    return load_script("apps/keypoints_detect.py")


@pytest.fixture
def toy_models(tmp_path, monkeypatch):
    m = AdditiveModel([864 + 1, 0], [-0.5, 0.0], [8.0, 10.0], [[0, 1, 2, 3, 4], [0, 1, 0, 1, 0]],
                      -2.0)
    d = tmp_path / "models"
    KeypointDetector({"left_eye_center": m, "nose_center": m}, {"haar_per_channel": 5},
                     max_scale=1.0).save(d / "keypoints_toy.h5")
    monkeypatch.setenv("CVFS_MODELS", str(d))
    return d


def test_app_folder_video_synthetic(tmp_path, toy_models, capsys):
    app = _app()
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        cv2.imwrite(str(imgs / f"im{i}.png"), (rng.random((48, 64, 3)) * 255).astype(np.uint8))
    assert app.main([str(imgs), "--out", str(tmp_path / "o1")]) == 0
    assert sorted(p.name for p in (tmp_path / "o1").iterdir()) == [".cvfs-output",
                                                                   "im0_keypoints.png",
                                                                   "im1_keypoints.png"]
    video = tmp_path / "clip.avi"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (64, 48))
    for _ in range(3):
        w.write((rng.random((48, 64, 3)) * 255).astype(np.uint8))
    w.release()
    assert app.main([str(video), "--out", str(tmp_path / "o2"), "--max-frames", "2"]) == 0
    assert (tmp_path / "o2" / "clip_keypoints.avi").is_file()
    assert app.main(["synthetic", "--max-frames", "1", "--out", str(tmp_path / "o3")]) == 0
    text = capsys.readouterr()
    assert "synthetic_0000" in text.err and "frames/s" in text.err
    assert (tmp_path / "o3" / "synthetic_keypoints.avi").is_file()
    # the same output folder again: the previous run's files are replaced, no leftovers
    assert app.main([str(imgs / "im0.png"), "--out", str(tmp_path / "o1")]) == 0
    assert sorted(p.name for p in (tmp_path / "o1").iterdir()) == [".cvfs-output",
                                                                   "im0_keypoints.png"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_app_max_scale(tmp_path, toy_models, monkeypatch):
    """Images use the detector's pyramid, video frames VIDEO_MAX_SCALE; --max-scale overrides."""
    app = _app()
    seen = []
    detect = KeypointDetector.detect

    def spy(self, image, **kw):
        seen.append(kw["max_scale"])
        return detect(self, image, **kw)

    monkeypatch.setattr(KeypointDetector, "detect", spy)
    img = tmp_path / "im.png"
    cv2.imwrite(str(img), np.random.default_rng(0).integers(0, 256, (48, 64, 3), np.uint8))
    assert app.main([str(img), "--out", str(tmp_path / "o")]) == 0
    assert app.main(["synthetic", "--max-frames", "1", "--out", str(tmp_path / "o")]) == 0
    assert app.main(["synthetic", "--max-frames", "1", "--max-scale", "2",
                     "--out", str(tmp_path / "o")]) == 0
    assert seen == [None, app.VIDEO_MAX_SCALE, 2.0]


def test_app_errors(tmp_path, toy_models, capsys):
    app = _app()
    assert app.main([str(tmp_path / "none.jpg")]) == 2
    assert "source not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert app.main([str(tmp_path / "empty")]) == 2
    assert "no images" in capsys.readouterr().err
    assert app.main(["0x"]) == 2
    assert "source not found: 0x" in capsys.readouterr().err
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"corrupt")
    assert app.main([str(bad)]) == 2
    assert "could not decode" in capsys.readouterr().err
    notvideo = tmp_path / "x.avi"
    notvideo.write_bytes(b"corrupt")
    assert app.main([str(notvideo)]) == 2
    assert "cannot open video file" in capsys.readouterr().err


def test_demo_keypoints_part(tmp_path, toy_models):
    from cvfs import demo

    lines = demo.PARTS["keypoints"](tmp_path, False)
    assert lines[0].startswith("Keypoints (shipped detectors left_eye_center, nose_center)")
    assert (tmp_path / "keypoints_astronaut.png").is_file()


def test_app_jobs(tmp_path, toy_models, monkeypatch, capsys):
    """--jobs reaches detect(n_jobs=...) (default: every core); a bad value is a clear error."""
    app = _app()
    seen = []
    detect = KeypointDetector.detect

    def spy(self, image, **kw):
        seen.append(kw["n_jobs"])
        return detect(self, image, **kw)

    monkeypatch.setattr(KeypointDetector, "detect", spy)
    out = str(tmp_path / "o")
    assert app.main(["synthetic", "--max-frames", "1", "--out", out]) == 0
    assert app.main(["synthetic", "--max-frames", "1", "--jobs", "2", "--out", out]) == 0
    assert seen == [-1, 2]
    assert app.main(["synthetic", "--max-frames", "1", "--jobs", "0", "--out", out]) == 2
    assert "n_jobs must be a positive int or -1" in capsys.readouterr().err
