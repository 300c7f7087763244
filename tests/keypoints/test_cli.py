"""`cvfs keypoints train|evaluate|detect`, the training script, and the figures."""

import json

import numpy as np
import pytest

from cvfs.cli import main
from cvfs.keypoints import load_detector
from cvfs.keypoints.evaluate import evaluate_keypoint
from cvfs.viz import save_figure
from cvfs.viz.keypoints import draw_keypoints, plot_pr_curves
from tests.scripts import load_script


def _train_script():
    return load_script("data_prep/train_keypoints.py")


def test_cli_train_evaluate_detect(real_data, tmp_path, capsys):
    model = tmp_path / "eye.h5"
    rc = _train_script().main([
        "--n-images", "5", "--keypoints", "left_eye_center", "--method", "logitboost",
        "--k", "20", "--rounds", "1", "--haar-per-channel", "50", "--out", str(model), "--quiet",
    ])
    assert rc == 0 and model.is_file()
    det = load_detector(model)
    assert det.keypoints == ["left_eye_center"]
    tr = det.info["training"]
    assert tr["n_images"] == 5 and tr["data"] == "mtfl-train"
    assert tr["command"].startswith("cvfs keypoints train --n-images 5")
    assert len(tr["images_sha256"]) == 64
    out = tmp_path / "eval.json"
    fig = tmp_path / "pr.png"
    rc = main(["keypoints", "evaluate", "--model", str(model), "--n-images", "3", "--json",
               str(out), "--figure", str(fig), "--quiet"])
    assert rc == 0
    res = json.loads(out.read_text())
    row = res["keypoints"]["left_eye_center"]
    assert res["n_images"] == 3 and row["n_positives"] == 3 and 0 <= row["average_precision"] <= 1
    assert "recall_at_precision_0.67" in row and fig.stat().st_size > 1000
    img = real_data / "faces" / "mtfl" / "AFLW" / "0001-image20056.jpg"
    capsys.readouterr()
    rc = main(["keypoints", "detect", str(img), "--model", str(model), "--threshold=-1e9",
               "--top", "2", "--out", str(tmp_path / "drawn")])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].split("\t")[1] == "left_eye_center"
    assert (tmp_path / "drawn" / "0001-image20056_keypoints.png").is_file()


def test_cli_errors(tmp_path, capsys):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    m = tmp_path / "none.h5"
    assert main(["keypoints", "detect", str(bad), "--model", str(m)]) == 2
    assert "model file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["keypoints", "train", "--method", "adaboost", "--out", "x.h5"])
    assert "method must be one of ['fsa-logistic'" in capsys.readouterr().err
    # one unreadable photo given alone: an error naming it, nothing written
    out = tmp_path / "drawn"
    assert main(["keypoints", "detect", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no image could be read: bad.jpg: could not decode" in err
    assert not out.exists()


def test_viz(tmp_path):
    c = evaluate_keypoint([np.array([[1, 1, 0.9], [9, 9, 0.5]])], [np.array([[1.0, 1.0]])],
                          [np.array([10.0])])
    axes = plot_pr_curves({"FSA": {"left_eye_center": c, "nose_center": c}, "LB": {
        "left_eye_center": c}}, baselines={"dlib": {"left_eye_center": (0.67, 0.34)}})
    assert len(axes) == 2 and axes[0].get_title() == "left eye center"
    assert len(axes[0].lines) == 3
    p = save_figure(axes, tmp_path / "f.png")
    assert p.stat().st_size > 1000
    img = np.zeros((50, 60, 3), np.uint8)
    det = {"left_eye_center": np.array([[10.0, 20.0, 1.5]])}
    drawn = draw_keypoints(img, det, radius=3, thickness=2, labels=False, legend=False,
                           min_side=None)
    assert drawn.shape == img.shape and drawn.sum() > 0 and img.sum() == 0
    assert tuple(drawn[20, 13]) == (255, 64, 64)  # on the circle of radius 3, left-eye colour
    # a small image is enlarged (integer factor) so the labels and the legend are readable
    big = draw_keypoints(img, det)
    s = int(np.ceil(480 / 50))
    assert big.shape == (50 * s, 60 * s, 3) and img.sum() == 0
    legend = big[4:40, 4:200]
    assert np.any(np.all(legend == (255, 64, 64), axis=-1))  # the left eye's legend entry
    assert np.any(np.all(big[160:240, 100:400] == (255, 64, 64), axis=-1))  # its circle, label
    with pytest.raises(ValueError, match=r"image must have shape \(H, W, 3\)"):
        draw_keypoints(np.zeros((5, 5)), {})


def test_cli_train_on_aflw_sqlite(real_data, tmp_path):
    """`--aflw-sqlite`: an AFLW-schema database over four real face images (MTFL's LFW faces
    copied into flickr/0, their eye annotations written as AFLW FeatureCoords)."""
    import shutil
    import sqlite3

    from cvfs.datasets.faces import load_mtfl

    src = load_mtfl("train")[:4]
    (tmp_path / "flickr" / "0").mkdir(parents=True)
    db = tmp_path / "aflw.sqlite"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE FaceImages(image_id INTEGER, db_id TEXT, file_id TEXT, filepath TEXT);"
        "CREATE TABLE Faces(face_id INTEGER, file_id TEXT, db_id TEXT);"
        "CREATE TABLE FeatureCoordTypes(feature_id INTEGER, descr TEXT, code TEXT);"
        "CREATE TABLE FeatureCoords(face_id INTEGER, feature_id INTEGER, x REAL, y REAL);"
    )
    con.execute("INSERT INTO FeatureCoordTypes VALUES (8, 'LeftEyeCenter', 'LEC')")
    con.execute("INSERT INTO FeatureCoordTypes VALUES (11, 'RightEyeCenter', 'REC')")
    for i, im in enumerate(src):
        name = f"image{i:05d}.jpg"
        shutil.copy(im.path, tmp_path / "flickr" / "0" / name)
        con.execute("INSERT INTO FaceImages VALUES (?, 'flickr', ?, ?)", (i, name, f"0/{name}"))
        con.execute("INSERT INTO Faces VALUES (?, ?, 'flickr')", (100 + i, name))
        for fid, col in ((8, 7), (11, 10)):
            x, y = im.points[0, col]
            con.execute("INSERT INTO FeatureCoords VALUES (?, ?, ?, ?)", (100 + i, fid, x, y))
    con.commit()
    con.close()
    model = tmp_path / "aflw_eye.h5"
    rc = main(["keypoints", "train", "--aflw-sqlite", str(db), "--keypoints", "left_eye_center",
               "--method", "logitboost", "--k", "10", "--rounds", "1", "--haar-per-channel",
               "20", "--out", str(model), "--quiet"])
    assert rc == 0
    det = load_detector(model)
    assert det.info["training"]["n_images"] == 4
    assert det.info["training"]["data"].startswith("AFLW ")
    assert det.info["training"]["keypoints"]["left_eye_center"]["n_positives"] > 30
