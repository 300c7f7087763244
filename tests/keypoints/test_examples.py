"""Example sampling: levels, positives within 1 px, negatives >= 0.5 IED away."""

import numpy as np
import pytest

from cvfs.keypoints.examples import (
    EXAMPLE_DTYPE,
    LevelGeometry,
    face_levels,
    negative_mask,
    positive_examples,
    random_negatives,
    training_levels,
)


def test_training_levels():
    # IED 40 at k=0; 4 levels per octave: IED 40 * 2^(k/4) in [20, 40] -> k = 0..-4
    np.testing.assert_array_equal(training_levels(40.0), [0, -1, -2, -3, -4])
    # IED 14 (Caltech) needs upsampling: 14 * 2^(k/4) in [20, 40] -> k = 6..3
    np.testing.assert_array_equal(training_levels(14.0), [6, 5, 4, 3])
    assert training_levels(np.nan).size == 0
    with pytest.raises(ValueError, match="ied_range must be"):
        training_levels(30.0, ied_range=(40, 20))


def test_level_geometry_round_trip():
    g = LevelGeometry((250, 250), -2)
    assert g.shape == (177, 177)
    xy = np.array([[10.0, 20.0], [100.5, 3.25]])
    np.testing.assert_allclose(g.to_original(g.from_original(xy)), xy)


def test_positives_within_one_pixel():
    pts = np.array([[100.3, 120.0]])
    ex = positive_examples(pts, [40.0], (250, 250), image_index=7)
    assert ex.dtype == EXAMPLE_DTYPE and (ex["image"] == 7).all()
    assert set(ex["level"].tolist()) == {0, -1, -2, -3, -4}
    for k in range(-4, 1):
        g = LevelGeometry((250, 250), k)
        q = g.from_original(pts[0])
        e = ex[ex["level"] == k]
        d = np.hypot(e["x"] - q[0], e["y"] - q[1])
        assert (d <= 1.0).all() and len(e) >= 2
        # every grid point within 1 px is there
        xs, ys = np.meshgrid(np.arange(int(q[0]) - 2, int(q[0]) + 3),
                             np.arange(int(q[1]) - 2, int(q[1]) + 3))
        n_expected = int((np.hypot(xs - q[0], ys - q[1]) <= 1.0).sum())
        assert len(e) == n_expected
    # at (0, 0) the window does not fit: no positives; NaN points are skipped
    assert positive_examples([[0.0, 0.0]], [40.0], (250, 250)).size == 0
    assert positive_examples([[np.nan, np.nan]], [40.0], (250, 250)).size == 0


def test_negative_mask():
    g = LevelGeometry((100, 120), 0)
    m = negative_mask(g, [[60.0, 50.0], [np.nan, np.nan]], [40.0, 30.0], margin=12)
    assert m.shape == (100, 120)
    yy, xx = np.mgrid[0:100, 0:120]
    inside = (xx >= 12) & (xx <= 108) & (yy >= 12) & (yy <= 88)
    far = np.hypot(xx - 60, yy - 50) >= 20.0
    np.testing.assert_array_equal(m, inside & far)


def test_random_negatives():
    pts = np.array([[125.0, 125.0]])
    ex = random_negatives(pts, [40.0], (250, 250), 500, image_index=3, random_state=0)
    assert ex.size == 500 and np.unique(ex).size == 500 and (ex["image"] == 3).all()
    assert set(np.unique(ex["level"])) <= {0, -1, -2, -3, -4}
    for k in np.unique(ex["level"]):
        g = LevelGeometry((250, 250), k)
        q = g.from_original(pts[0])
        e = ex[ex["level"] == k]
        assert (np.hypot(e["x"] - q[0], e["y"] - q[1]) >= 20.0 * g.scale_x - 1e-9).all()
    again = random_negatives(pts, [40.0], (250, 250), 500, image_index=3, random_state=0)
    np.testing.assert_array_equal(ex, again)
    assert random_negatives(pts, [np.nan], (250, 250), 10).size == 0


def test_face_levels_and_negatives_on_given_levels():
    pts = np.array([[125.0, 125.0], [np.nan, np.nan], [60.0, 60.0]])
    # union of the training levels of the annotated faces (IED 40: 0..-4, IED 28: 2..-1)
    assert face_levels(pts, [40.0, 30.0, 28.0]) == [2, 1, 0, -1, -2, -3, -4]
    ex = random_negatives(pts[:1], [40.0], (250, 250), 300, levels=[-6, -8], random_state=0)
    assert ex.size == 300 and set(np.unique(ex["level"])) == {-6, -8}
    for k in (-6, -8):
        g = LevelGeometry((250, 250), k)
        q = g.from_original(pts[0])
        e = ex[ex["level"] == k]
        assert (np.hypot(e["x"] - q[0], e["y"] - q[1]) >= 20.0 * g.scale_x - 1e-9).all()


def test_mirrored_annotations():
    from cvfs.datasets.faces import KEYPOINTS, MIRROR_INDEX, AnnotatedImage, mirrored

    names = list(KEYPOINTS)
    assert (MIRROR_INDEX[MIRROR_INDEX] == np.arange(len(names))).all()
    assert names[MIRROR_INDEX[names.index("left_eye_center")]] == "right_eye_center"
    assert names[MIRROR_INDEX[names.index("left_brow_left_corner")]] == "right_brow_right_corner"
    assert names[MIRROR_INDEX[names.index("nose_left")]] == "nose_right"
    assert names[MIRROR_INDEX[names.index("chin_center")]] == "chin_center"
    pts = np.full((2, 21, 2), np.nan)
    le, re, nose = (names.index(n) for n in ("left_eye_center", "right_eye_center",
                                              "nose_center"))
    pts[0, le], pts[0, re], pts[0, nose] = (30.0, 40.0), (60.0, 42.0), (44.0, 60.0)
    pts[1, le], pts[1, re] = (70.0, 10.0), (90.0, 10.0)
    im = AnnotatedImage("face.png", pts, "mtfl", {"shape": (80, 100)})
    m = mirrored(im, 100)
    assert m.attrs["mirror"] and m.attrs["shape"] == (80, 100) and not im.attrs.get("mirror")
    np.testing.assert_array_equal(m.points[0, le], [99 - 60.0, 42.0])
    np.testing.assert_array_equal(m.points[0, re], [99 - 30.0, 40.0])
    np.testing.assert_array_equal(m.points[0, nose], [99 - 44.0, 60.0])
    np.testing.assert_array_equal(m.ied(), im.ied())
    back = mirrored(m, 100)
    np.testing.assert_array_equal(back.points, im.points)
    assert not back.attrs["mirror"]
    with pytest.raises(ValueError, match="width must be a positive int"):
        mirrored(im, 0)


def test_example_features_of_mirrored_images(tmp_path):
    import cv2

    from cvfs.datasets.faces import AnnotatedImage, mirrored
    from cvfs.io.images import read_image
    from cvfs.keypoints.train import ExampleFeatures, with_mirrored
    from cvfs.vision import FeaturePool, LevelCache, pyramid_level

    rng = np.random.default_rng(0)
    path = tmp_path / "face.png"
    cv2.imwrite(str(path), rng.integers(0, 256, (60, 70, 3), dtype=np.uint8))
    pts = np.full((1, 21, 2), np.nan)
    im = AnnotatedImage(path, pts, "mtfl")
    ims = with_mirrored([im])
    assert len(ims) == 2 and ims[1].attrs["mirror"]
    np.testing.assert_array_equal(ims[1].points, mirrored(im, 70).points)
    pool = FeaturePool(haar_per_channel=50)
    feats = ExampleFeatures.from_images(ims, pool)
    ex = np.array([(0, 0, 20, 30), (1, 0, 20, 30), (1, -1, 15, 14)], dtype=EXAMPLE_DTYPE)
    X = feats(ex)
    img = read_image(path)
    flipped = np.ascontiguousarray(img[:, ::-1])
    np.testing.assert_array_equal(X[0], pool.compute(LevelCache(pyramid_level(img, 0)),
                                                     [[30, 20]])[0])
    np.testing.assert_array_equal(X[1], pool.compute(LevelCache(pyramid_level(flipped, 0)),
                                                     [[30, 20]])[0])
    np.testing.assert_array_equal(X[2], pool.compute(LevelCache(pyramid_level(flipped, -1)),
                                                     [[14, 15]])[0])
    with pytest.raises(ValueError, match="flips must have one entry per path"):
        ExampleFeatures([path], pool, flips=[True, False])
