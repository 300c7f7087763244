"""Face dataset loaders on fixtures built here, and a check on the real copies."""

import sqlite3

import cv2
import numpy as np
import pytest
from scipy.io import savemat

from cvfs.datasets.aflw import load_aflw, snake_case
from cvfs.datasets.faces import (
    ANNOTATED,
    KEYPOINTS,
    inter_eye_distance,
    keypoint_index,
    load_aflw2000,
    load_caltech_webfaces,
    load_mtfl,
)
from cvfs.io.images import read_image

AFLW_DESCR = [
    "LeftBrowLeftCorner", "LeftBrowCenter", "LeftBrowRightCorner", "RightBrowLeftCorner",
    "RightBrowCenter", "RightBrowRightCorner", "LeftEyeLeftCorner", "LeftEyeCenter",
    "LeftEyeRightCorner", "RightEyeLeftCorner", "RightEyeCenter", "RightEyeRightCorner",
    "LeftEar", "NoseLeft", "NoseCenter", "NoseRight", "RightEar", "MouthLeftCorner",
    "MouthCenter", "MouthRightCorner", "ChinCenter",
]


def _img(path, h=20, w=30):
    cv2.imwrite(str(path), np.full((h, w, 3), 128, np.uint8))


def test_vocabulary():
    assert len(KEYPOINTS) == 21
    assert [snake_case(d) for d in AFLW_DESCR] == list(KEYPOINTS)
    assert keypoint_index("left_eye_center") == 7
    assert keypoint_index("right_eye_center") == 10
    assert keypoint_index("nose_center") == 14
    for ds, names in ANNOTATED.items():
        assert set(names) <= set(KEYPOINTS), ds
    with pytest.raises(ValueError, match="keypoint must be one of"):
        keypoint_index("left_eye")


def test_inter_eye_distance():
    pts = np.full((2, 21, 2), np.nan)
    pts[:, 7] = [[10, 10], [0, 0]]
    pts[:, 10] = [[13, 14], [0, 7]]
    np.testing.assert_allclose(inter_eye_distance(pts), [5.0, 7.0])


def _make_mtfl(root):
    (root / "lfw_5590").mkdir(parents=True)
    (root / "AFLW").mkdir()
    _img(root / "lfw_5590" / "A_0001.jpg")
    _img(root / "AFLW" / "0001-image1.jpg")
    (root / "training.txt").write_text(
        "lfw_5590\\A_0001.jpg 1 2 3 4 5 6 7 8 9 10 1 2 2 3\n"
        " net_7876\\missing.jpg 1 2 3 4 5 6 7 8 9 10 1 2 2 3\n\n"
    )
    (root / "testing.txt").write_bytes(
        b" AFLW/0001-image1.jpg 10.5 20 30 40 50 60 70 80 90 100 2 1 1 5\r\n"
    )


def test_mtfl(tmp_path):
    _make_mtfl(tmp_path)
    train = load_mtfl("train", tmp_path)
    assert len(train) == 1  # the missing web image is skipped
    im = train[0]
    assert im.path == tmp_path / "lfw_5590" / "A_0001.jpg"
    assert im.points.shape == (1, 21, 2)
    cols = [KEYPOINTS.index(n) for n in ANNOTATED["mtfl"]]
    # the files count pixels from 1; points are 0-based
    np.testing.assert_array_equal(im.points[0, cols, 0], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(im.points[0, cols, 1], [5, 6, 7, 8, 9])
    assert np.isnan(np.delete(im.points[0], cols, axis=0)).all()
    assert im.attrs == {"gender": [1], "smile": [2], "glasses": [2], "pose": [3]}
    test = load_mtfl("test", tmp_path)
    assert test[0].points[0, 7, 0] == 9.5 and test[0].attrs["pose"] == [5]
    np.testing.assert_allclose(test[0].ied(), [np.hypot(20 - 10.5, 70 - 60)])


def test_mtfl_errors(tmp_path):
    with pytest.raises(ValueError, match="split must be 'train' or 'test'; got 'val'"):
        load_mtfl("val", tmp_path)
    with pytest.raises(FileNotFoundError, match="training.txt does not exist"):
        load_mtfl("train", tmp_path)
    (tmp_path / "training.txt").write_text("a.jpg 1 2 3\n")
    with pytest.raises(ValueError, match=r"training.txt:1: expected 15 fields .* got 4"):
        load_mtfl("train", tmp_path)


def test_caltech(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "WebFaces_GroundThruth.txt").write_text(
        "p1.jpg 1 2 3 4 5 6 7 8 \np2.jpg 9 9 9 9 9 9 9 9\np1.jpg 11 12 13 14 15 16 17 18\n"
    )
    ims = load_caltech_webfaces(tmp_path)
    assert [i.path.name for i in ims] == ["p1.jpg", "p2.jpg"]
    assert ims[0].n_faces == 2 and ims[1].n_faces == 1
    assert ims[0].path.parent.name == "images"
    p = ims[0].points
    assert tuple(p[1, keypoint_index("left_eye_center")]) == (10, 11)  # 1-based in the file
    assert tuple(p[1, keypoint_index("right_eye_center")]) == (12, 13)
    assert tuple(p[1, keypoint_index("nose_center")]) == (14, 15)
    assert tuple(p[1, keypoint_index("mouth_center")]) == (16, 17)
    assert np.isnan(p[:, keypoint_index("mouth_left_corner")]).all()


def test_caltech_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="WebFaces_GroundThruth.txt does not exist"):
        load_caltech_webfaces(tmp_path)
    (tmp_path / "WebFaces_GroundThruth.txt").write_text("p.jpg 1 2 3\n")
    with pytest.raises(ValueError, match="expected an image name and 8 numbers; got 4"):
        load_caltech_webfaces(tmp_path)


def test_aflw2000(tmp_path):
    pt = np.arange(42, dtype=float).reshape(2, 21) + 1
    pt[:, 3] = [-1, 452]
    savemat(tmp_path / "image00001.mat", {"pt2d": pt, "roi": np.zeros((1, 4))})
    ims = load_aflw2000(tmp_path)
    assert len(ims) == 1 and ims[0].path.name == "image00001.jpg"
    np.testing.assert_array_equal(ims[0].points[0, 7], [8, 29])
    assert np.isnan(ims[0].points[0, 3]).all()
    savemat(tmp_path / "image00002.mat", {"pt2d": np.zeros((2, 19))})
    with pytest.raises(ValueError, match=r"expected 'pt2d' of shape \(2, 21\); got \(2, 19\)"):
        load_aflw2000(tmp_path)
    with pytest.raises(FileNotFoundError, match="no .mat files"):
        load_aflw2000(tmp_path / "nothing")


def _make_aflw(path):
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE FaceImages(image_id INTEGER PRIMARY KEY, db_id TEXT, file_id TEXT,
                                filepath TEXT, bw INTEGER, width INTEGER, height INTEGER);
        CREATE TABLE Faces(face_id INTEGER PRIMARY KEY, file_id TEXT, db_id TEXT);
        CREATE TABLE FeatureCoordTypes(feature_id INTEGER PRIMARY KEY, descr TEXT, code TEXT,
                                       x REAL, y REAL, z REAL);
        CREATE TABLE FeatureCoords(face_id INTEGER, feature_id INTEGER, x REAL, y REAL,
                                   annot_type_id INTEGER);
        CREATE TABLE FaceRect(face_id INTEGER, x INTEGER, y INTEGER, w INTEGER, h INTEGER,
                              annot_type_id INTEGER);
        CREATE TABLE FacePose(face_id INTEGER, roll REAL, pitch REAL, yaw REAL,
                              annot_type_id INTEGER);
        """
    )
    # ids deliberately permuted: the loader maps by descr, not by id
    for i, d in enumerate(AFLW_DESCR):
        con.execute("INSERT INTO FeatureCoordTypes VALUES (?,?,?,0,0,0)", (100 - i, d, d[:3]))
    con.execute("INSERT INTO FaceImages VALUES (1,'flickr','image00002.jpg','3/image00002.jpg',"
                "0,640,480)")
    con.execute("INSERT INTO FaceImages VALUES (2,'flickr','image00001.jpg','0/image00001.jpg',"
                "0,320,240)")
    con.execute("INSERT INTO Faces VALUES (39341,'image00002.jpg','flickr')")
    con.execute("INSERT INTO Faces VALUES (39342,'image00002.jpg','flickr')")
    con.execute("INSERT INTO Faces VALUES (39343,'image00001.jpg','flickr')")
    eye_l, eye_r = 100 - 7, 100 - 10
    con.execute("INSERT INTO FeatureCoords VALUES (39341,?,10,20,1)", (eye_l,))
    con.execute("INSERT INTO FeatureCoords VALUES (39341,?,40,22,1)", (eye_r,))
    con.execute("INSERT INTO FeatureCoords VALUES (39342,?,100,120,1)", (100 - 20,))
    con.execute("INSERT INTO FeatureCoords VALUES (39343,?,5,6,1)", (eye_l,))
    con.execute("INSERT INTO FaceRect VALUES (39341,1,2,30,40,1)")
    con.execute("INSERT INTO FacePose VALUES (39342,0.1,0.2,-0.3,1)")
    con.commit()
    con.close()


def test_aflw_sqlite(tmp_path):
    db = tmp_path / "aflw.sqlite"
    _make_aflw(db)
    ims = load_aflw(db)
    assert [i.attrs["file_id"] for i in ims] == ["image00001.jpg", "image00002.jpg"]
    assert ims[0].path == tmp_path / "flickr" / "0" / "image00001.jpg"
    assert ims[1].n_faces == 2 and ims[1].attrs["face_id"] == [39341, 39342]
    p = ims[1].points
    np.testing.assert_array_equal(p[0, keypoint_index("left_eye_center")], [10, 20])
    np.testing.assert_array_equal(p[0, keypoint_index("right_eye_center")], [40, 22])
    np.testing.assert_array_equal(p[1, keypoint_index("chin_center")], [100, 120])
    assert np.isnan(p[1, keypoint_index("left_eye_center")]).all()
    np.testing.assert_array_equal(ims[1].attrs["rect"][0], [1, 2, 30, 40])
    assert np.isnan(ims[1].attrs["rect"][1]).all()
    np.testing.assert_allclose(ims[1].attrs["pose"][1], [0.1, 0.2, -0.3])
    assert ims[1].attrs["width"] == 640
    np.testing.assert_allclose(ims[1].ied()[0], np.hypot(30, 2))
    # require_images drops images whose file is missing
    (tmp_path / "flickr" / "3").mkdir(parents=True)
    _img(tmp_path / "flickr" / "3" / "image00002.jpg")
    assert [i.path.name for i in load_aflw(db, require_images=True)] == ["image00002.jpg"]


def test_aflw_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="AFLW database not found"):
        load_aflw(tmp_path / "none.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 10)
    with pytest.raises(ValueError, match="is not an SQLite database"):
        load_aflw(bad)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE X(a)").connection.close()
    with pytest.raises(ValueError, match="table 'FaceImages' is missing"):
        load_aflw(empty)
    db = tmp_path / "aflw.sqlite"
    _make_aflw(db)
    con = sqlite3.connect(db)
    con.execute("INSERT INTO FeatureCoordTypes VALUES (7,'Forehead','F',0,0,0)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="'Forehead' is not one of AFLW's 21 points"):
        load_aflw(db)


def test_read_image_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="image file not found"):
        read_image(tmp_path / "none.jpg")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage")
    with pytest.raises(ValueError, match="could not decode image file"):
        read_image(bad)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="could not decode image file"):
        read_image(empty)
    good = tmp_path / "g.png"
    arr = np.zeros((4, 5, 3), np.uint8)
    arr[..., 0] = 200  # red in RGB
    cv2.imwrite(str(good), arr[..., ::-1])
    got = read_image(good)
    assert got.shape == (4, 5, 3) and got.dtype == np.uint8 and got[0, 0, 0] == 200


def test_real_face_data(real_data):
    train = load_mtfl("train")
    test = load_mtfl("test")
    assert len(train) == 4151 and len(test) == 2995
    assert train[0].path.is_file() and test[0].path.is_file()
    # "left" is image left: the left eye has the smaller x in (nearly) every face
    for ims in (train, test):
        p = np.concatenate([i.points for i in ims])
        assert (p[:, 7, 0] < p[:, 10, 0]).mean() > 0.99
    cal = load_caltech_webfaces()
    assert len(cal) == 447 and sum(i.n_faces for i in cal) == 1655
    assert all(i.path.is_file() for i in cal[:5])
    a2k = load_aflw2000()
    assert len(a2k) == 16
    p = np.concatenate([i.points for i in a2k])
    ok = ~np.isnan(p[:, 7, 0]) & ~np.isnan(p[:, 10, 0])
    assert (p[ok, 7, 0] < p[ok, 10, 0]).all()
    # AFLW order: left ear left of the nose tip, chin below the mouth centre
    ok = ~np.isnan(p[:, [12, 14, 18, 20], 0]).any(axis=1)
    assert (p[ok, 12, 0] < p[ok, 14, 0]).all() and (p[ok, 20, 1] > p[ok, 18, 1]).all()
