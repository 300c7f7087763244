"""iBUG 68-point .pts loader: format, mapping to AFLW names, the picture-grouped split."""

import cv2
import numpy as np
import pytest

from cvfs.datasets import DATASETS
from cvfs.datasets.faces import ANNOTATED, FIRST_PIXEL, KEYPOINTS, keypoint_index
from cvfs.datasets.ibug68 import (
    IBUG68_TO_AFLW,
    ibug68_to_keypoints,
    load_faces68,
    read_pts,
    split_faces68,
    write_pts,
)


def _face(seed):
    return np.random.default_rng(seed).uniform(1, 60, (68, 2)).round(3)


@pytest.mark.parametrize("header", [True, False])
def test_pts_round_trip(tmp_path, header):
    pts = _face(0)
    write_pts(tmp_path / "a.pts", pts, header=header)
    text = (tmp_path / "a.pts").read_text()
    assert text.startswith("version: 1\nn_points: 68\n{\n") == header
    np.testing.assert_array_equal(read_pts(tmp_path / "a.pts", 68), pts)


def test_read_pts_300w_layout(tmp_path):
    # 300-W's own spacing ("n_points:  68"), CRLF endings and a trailing blank line
    body = "".join(f"{x} {y}\r\n" for x, y in _face(1))
    (tmp_path / "b.pts").write_text(f"version: 1\r\nn_points:  68\r\n{{\r\n{body}}}\r\n\r\n")
    np.testing.assert_array_equal(read_pts(tmp_path / "b.pts"), _face(1))


@pytest.mark.parametrize("text, match", [
    ("", "no points in the file"),
    ("version: 1\nn_points: 68\n{\n1 2\n3 4\n", "closing '}' is missing"),
    ("version: 1\nn_points: 3\n{\n1 2\n3 4\n}\n", "n_points: 3 but the file holds 2"),
    ("1 2\n3 x\n", r":2: expected two numbers 'x y'; got '3 x'"),
    ("1 2 3\n", r":1: expected two numbers"),
    ("n_points: many\n", "n_points is not an integer"),
    ("1 2\n}\n", "'}' without an opening '{'"),
    ("{\n1 2\n}\n5 6\n", "text after the closing"),
    ("1 2\nnan 3\n", "finite"),
])
def test_read_pts_corrupt(tmp_path, text, match):
    (tmp_path / "c.pts").write_text(text)
    with pytest.raises(ValueError, match=match):
        read_pts(tmp_path / "c.pts")


def test_read_pts_other_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_pts(tmp_path / "none.pts")
    (tmp_path / "bin.pts").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(ValueError, match="not a text .pts file"):
        read_pts(tmp_path / "bin.pts")
    write_pts(tmp_path / "five.pts", np.ones((5, 2)))
    with pytest.raises(ValueError, match="expected 68 points; got 5"):
        read_pts(tmp_path / "five.pts", 68)
    with pytest.raises(ValueError, match=r"shape \(n_points, 2\)"):
        write_pts(tmp_path / "bad.pts", np.ones((5, 3)))


def test_mapping():
    p = _face(2)
    k = ibug68_to_keypoints(p)
    assert k.shape == (21, 2)
    np.testing.assert_allclose(k[keypoint_index("left_eye_center")], p[36:42].mean(0))
    np.testing.assert_allclose(k[keypoint_index("right_eye_center")], p[42:48].mean(0))
    np.testing.assert_array_equal(k[keypoint_index("nose_left")], p[31])    # 1-based 32
    np.testing.assert_array_equal(k[keypoint_index("nose_right")], p[35])   # 1-based 36
    np.testing.assert_array_equal(k[keypoint_index("nose_center")], p[30])  # 1-based 31
    np.testing.assert_array_equal(k[keypoint_index("mouth_left_corner")], p[48])
    np.testing.assert_array_equal(k[keypoint_index("mouth_right_corner")], p[54])
    np.testing.assert_array_equal(k[keypoint_index("chin_center")], p[8])   # 1-based 9
    mapped = [keypoint_index(n) for n in IBUG68_TO_AFLW]
    assert np.isnan(np.delete(k, mapped, axis=0)).all()
    assert set(ANNOTATED["faces_68"]) == set(IBUG68_TO_AFLW)
    assert FIRST_PIXEL["faces_68"] == 1.0
    assert ibug68_to_keypoints(np.stack([p, p])).shape == (2, 21, 2)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 68, 2\); got \(5, 2\)"):
        ibug68_to_keypoints(np.ones((5, 2)))


def _make_faces68(root):
    """Two AFW photos (2 + 1 faces), three HELEN files of two pictures."""
    (root / "afw").mkdir(parents=True)
    (root / "helen_train").mkdir()
    img = np.full((64, 64, 3), 90, np.uint8)
    for name in ("p1", "p2"):
        cv2.imwrite(str(root / "afw" / f"{name}.jpg"), img)
    write_pts(root / "afw" / "p1_1.pts", _face(10))
    write_pts(root / "afw" / "p1_2.pts", _face(11))
    write_pts(root / "afw" / "p2_1.pts", _face(12), header=False)
    for i, name in enumerate(("7_1", "7_2", "8_1")):
        cv2.imwrite(str(root / "helen_train" / f"{name}.jpg"), img)
        write_pts(root / "helen_train" / f"{name}.pts", _face(20 + i))


def test_load_faces68(tmp_path):
    _make_faces68(tmp_path)
    ims = load_faces68(tmp_path)
    assert [im.path.name for im in ims] == ["p1.jpg", "p2.jpg", "7_1.jpg", "7_2.jpg", "8_1.jpg"]
    assert [im.n_faces for im in ims] == [2, 1, 1, 1, 1]
    assert ims[0].attrs["pts"] == ["p1_1.pts", "p1_2.pts"]
    assert [im.attrs["picture"] for im in ims] == ["p1", "p2", "7", "7", "8"]
    assert {im.dataset for im in ims} == {"faces_68"}
    # 0-based: the files' 1-based values minus 1
    np.testing.assert_allclose(ims[0].attrs["points68"][1], _face(11) - 1)
    np.testing.assert_allclose(ims[0].points[1, keypoint_index("chin_center")],
                               _face(11)[8] - 1)
    assert ims[0].points.shape == (2, len(KEYPOINTS), 2)
    assert len(load_faces68(tmp_path, subsets=("afw",))) == 2


def test_load_faces68_errors(tmp_path):
    with pytest.raises(ValueError, match="subsets must be"):
        load_faces68(tmp_path, subsets=("lfpw",))
    with pytest.raises(FileNotFoundError, match="afw does not exist"):
        load_faces68(tmp_path)
    _make_faces68(tmp_path)
    (tmp_path / "afw" / "p2.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=r"p2_1.pts: no image"):
        load_faces68(tmp_path)
    cv2.imwrite(str(tmp_path / "afw" / "p2.jpg"), np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "helen_train" / "8_1.pts").write_text("version: 1\nn_points: 68\n{\n1 2\n}\n")
    with pytest.raises(ValueError, match=r"8_1.pts: header says n_points: 68 but .* 1 points"):
        load_faces68(tmp_path)


def test_split_keeps_pictures_together(tmp_path):
    _make_faces68(tmp_path)
    ims = load_faces68(tmp_path)
    train, test = split_faces68(ims, test_size=0.5, random_state=0)
    assert len(train) + len(test) == len(ims)
    for part in (train, test):
        assert {im.attrs["subset"] for im in part} == {"afw", "helen_train"}
    pics = lambda part: {(im.attrs["subset"], im.attrs["picture"]) for im in part}  # noqa: E731
    assert not pics(train) & pics(test)
    # both files of HELEN picture 7 land together; the split is reproducible
    assert [im.path.name for im in split_faces68(ims, 0.5, 0)[1]] == [im.path.name for im in test]
    with pytest.raises(ValueError, match=r"test_size must be a fraction in \(0, 1\); got 1.5"):
        split_faces68(ims, test_size=1.5)
    with pytest.raises(ValueError, match="attrs lack 'picture'"):
        split_faces68([type(ims[0])(ims[0].path, ims[0].points, "faces_68")])


def test_registered():
    ds = DATASETS["faces_68"]
    assert "cvfs.datasets.ibug68.load_faces68" in ds.used_by


@pytest.mark.slow
def test_real_faces68():
    from cvfs.datasets import data_home

    root = data_home() / "faces_68"
    if not root.is_dir():
        pytest.skip("faces_68 not in the data home")
    ims = load_faces68()
    afw = [im for im in ims if im.attrs["subset"] == "afw"]
    helen = [im for im in ims if im.attrs["subset"] == "helen_train"]
    assert (len(afw), sum(im.n_faces for im in afw)) == (185, 337)
    assert (len(helen), sum(im.n_faces for im in helen)) == (870, 870)
    pts = np.concatenate([im.points for im in ims])
    names = [keypoint_index(n) for n in IBUG68_TO_AFLW]
    assert np.isfinite(pts[:, names]).all()
    # image-left eye left of the image-right one, nostrils beside the tip, chin below the mouth
    x = lambda n: pts[:, keypoint_index(n), 0]  # noqa: E731
    y = lambda n: pts[:, keypoint_index(n), 1]  # noqa: E731
    assert np.mean(x("left_eye_center") < x("right_eye_center")) > 0.99
    assert np.mean(x("nose_left") < x("nose_right")) > 0.99
    assert np.mean(y("chin_center") > y("mouth_left_corner")) > 0.99
    assert np.median(np.concatenate([im.ied() for im in ims])) > 20
    train, test = split_faces68(ims)
    assert not ({im.attrs["picture"] for im in train if im.attrs["subset"] == "afw"}
                & {im.attrs["picture"] for im in test if im.attrs["subset"] == "afw"})
    assert 0.2 < sum(im.n_faces for im in test) / len(pts) < 0.3
    for im in test[:3]:
        h, w = cv2.imread(str(im.path)).shape[:2]
        assert (im.points[..., 0][np.isfinite(im.points[..., 0])] < w).all()
        assert (im.points[..., 1][np.isfinite(im.points[..., 1])] < h).all()


def test_face_sets(tmp_path):
    from cvfs.cli.handlers import KP_DATASETS
    from cvfs.datasets.faces import FACE_SETS, load_face_set

    assert KP_DATASETS == FACE_SETS
    _make_faces68(tmp_path)
    train, test = split_faces68(load_faces68(tmp_path))
    assert ([im.path for im in load_face_set("faces68-train", tmp_path)]
            == [im.path for im in train])
    assert ([im.path for im in load_face_set("faces68-test", tmp_path)]
            == [im.path for im in test])
    with pytest.raises(ValueError, match="face set must be one of"):
        load_face_set("lfpw")
