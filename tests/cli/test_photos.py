"""``cvfs keypoints detect`` on every kind of photo, and a folder run with files it cannot read."""

import json

import cv2
import numpy as np
import pytest
from PIL import Image

from cvfs.cli import main
from cvfs.cli.handlers import EXIT_SKIPPED
from cvfs.keypoints import KeypointDetector
from cvfs.keypoints._additive import AdditiveModel


@pytest.fixture
def toy_models(tmp_path, monkeypatch):
    """A models folder holding a two-keypoint toy detector and no face model: keypoints mode."""
    m = AdditiveModel([0, 864 + 3], [0.0, -1.0], [4.0, 2.0],
                      [[0, 1, 2, 3, 4], [0, 0.5, 1, 1.5, 2]], -1.0)
    det = KeypointDetector({"left_eye_center": m, "nose_center": m}, {"haar_per_channel": 10},
                           max_scale=1.0)
    d = tmp_path / "models"
    det.save(d / "keypoints_toy.h5")
    monkeypatch.setenv("CVFS_MODELS", str(d))
    return det


def _photos(folder):
    folder.mkdir()
    rgb = np.random.default_rng(1).integers(0, 256, (40, 48, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(folder / "a_colour.png")
    Image.fromarray(rgb[..., 0]).save(folder / "b_grey.png")
    Image.fromarray(np.dstack([rgb, np.full((40, 48), 200, np.uint8)])).save(
        folder / "c_rgba.png")
    Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=8).save(
        folder / "d_palette.png")
    cv2.imwrite(str(folder / "e_deep.png"), (rgb.astype(np.uint16) * 257)[..., ::-1])
    (folder / "f_broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    Image.fromarray(rgb[:10, :10]).save(folder / "g_tiny.png")
    return folder


def test_folder_run_skips_bad_files_and_says_so(tmp_path, toy_models, capsys):
    folder = _photos(tmp_path / "photos")
    out = tmp_path / "out"
    assert main(["keypoints", "detect", str(folder), "--out", str(out), "--jobs", "1"]) \
        == EXIT_SKIPPED == 3
    cap = capsys.readouterr()
    written = sorted(p.name for p in out.iterdir())
    assert written == [".cvfs-output"] + [f"{n}_keypoints.png" for n in (
        "a_colour", "b_grey", "c_rgba", "d_palette", "e_deep")]
    assert "b_grey (grey):" in cap.err
    summary = [line for line in cap.err.splitlines() if "skipped" in line][-1]
    assert summary.startswith("2 image file(s) skipped, the others processed: ")
    assert "f_broken.jpg: could not decode" in summary
    assert "g_tiny: 10x10 pixels, smaller than the 24x24 detection window" in summary
    frames = {line.split("\t")[0] for line in cap.out.splitlines()}
    assert frames <= {"a_colour", "b_grey", "c_rgba", "d_palette", "e_deep"}
    assert set(json.loads((out / ".cvfs-output").read_text())["files"]) == set(written[1:])
    # the colour photo, its RGBA and 16-bit copies give the same detections
    by_frame = {}
    for line in cap.out.splitlines():
        name, *rest = line.split("\t")
        by_frame.setdefault(name, []).append(rest)
    assert by_frame["a_colour"] == by_frame["c_rgba"] == by_frame["e_deep"]


def test_folder_of_unreadable_files_is_an_error(tmp_path, toy_models, capsys):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "x.png").write_bytes(b"")
    (folder / "y.jpg").write_bytes(b"nothing")
    out = tmp_path / "out"
    assert main(["keypoints", "detect", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error: no image could be read: x.png: could not decode" in err
    assert "y.jpg: could not decode" in err
    assert not out.exists()
