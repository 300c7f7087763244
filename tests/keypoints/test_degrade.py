"""Training faces degraded like small web faces (cvfs.keypoints.degrade) and training on them."""

import numpy as np
import pytest

from cvfs.datasets.faces import AnnotatedImage, keypoint_index
from cvfs.keypoints.degrade import DEGRADE_RECIPE, degrade_pixels, degraded, with_degraded
from cvfs.keypoints.examples import EXAMPLE_DTYPE, training_levels

LE, RE = keypoint_index("left_eye_center"), keypoint_index("right_eye_center")


def _face(path="face.png", shape=(120, 100)):
    pts = np.full((1, 21, 2), np.nan)
    pts[0, LE], pts[0, RE] = (30.0, 50.0), (70.0, 50.0)  # IED 40
    return AnnotatedImage(path, pts, "mtfl", {"shape": shape})


def test_degrade_pixels_shrinks_blurs_and_compresses():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (120, 100, 3), dtype=np.uint8)
    np.testing.assert_array_equal(degrade_pixels(img, 1.0), img)
    small = degrade_pixels(img, 4.0)
    assert small.shape == (30, 25, 3) and small.dtype == np.uint8
    # the anti-aliasing blur averages the noise: far less contrast than the original
    assert small.std() < 0.4 * img.std()
    blurred = degrade_pixels(img, 1.0, blur_sigma=1.0)
    assert blurred.std() < 0.5 * img.std()
    jpeg = degrade_pixels(img, 1.0, jpeg_quality=30)
    assert jpeg.shape == img.shape and 5 < np.abs(jpeg.astype(int) - img).mean() < 80
    for kw, msg in (({"factor": 0.5}, "factor must be >= 1"),
                    ({"factor": 2.0, "blur_sigma": -1.0}, "blur_sigma must be >= 0"),
                    ({"factor": 2.0, "jpeg_quality": 0}, r"jpeg_quality must be in \[1, 100\]")):
        with pytest.raises(ValueError, match=msg):
            degrade_pixels(img, **kw)
    with pytest.raises(ValueError, match=r"rgb must have shape \(H, W, 3\)"):
        degrade_pixels(img[..., 0], 2.0)


def test_degraded_scales_the_annotations_with_the_pixels():
    im = _face()
    d = degraded(im, (120, 100), ied=10.0, blur_sigma=0.5, jpeg_quality=50)
    assert d.attrs["shape"] == (30, 25) and d.path == im.path
    assert d.attrs["degrade"] == {"factor": 4.0, "blur_sigma": 0.5, "jpeg_quality": 50}
    np.testing.assert_allclose(d.ied(), [10.0])
    # centre-aligned mapping, as the pyramid maps points: (x + 0.5) / 4 - 0.5
    np.testing.assert_allclose(d.points[0, LE], [(30.5 / 4) - 0.5, (50.5 / 4) - 0.5])
    # its training levels (IED 20-40) are upsampled levels: scale 2 to 4
    assert training_levels(10.0).tolist() == [8, 7, 6, 5, 4]
    # a face already smaller than the target is not shrunk
    assert degraded(im, (120, 100), ied=50.0).attrs["degrade"]["factor"] == 1.0
    noeyes = AnnotatedImage("x.png", np.full((1, 21, 2), np.nan), "mtfl")
    with pytest.raises(ValueError, match="no face with both eye centres"):
        degraded(noeyes, (10, 10))
    with pytest.raises(ValueError, match="ied must be positive"):
        degraded(im, (120, 100), ied=0.0)


def test_with_degraded_replaces_a_seeded_share():
    ims = [_face(f"f{i}.png") for i in range(10)]
    shapes = [(120, 100)] * 10
    assert with_degraded(ims, shapes, 0.0, random_state=0) == ims
    a = with_degraded(ims, shapes, 0.5, random_state=1)
    b = with_degraded(ims, shapes, 0.5, random_state=1)
    picked = [i for i, im in enumerate(a) if "degrade" in im.attrs]
    assert len(picked) == 5 and picked == [i for i, im in enumerate(b) if "degrade" in im.attrs]
    assert [a[i].attrs["degrade"] for i in picked] == [b[i].attrs["degrade"] for i in picked]
    lo, hi = DEGRADE_RECIPE["ied_range"]
    for i in picked:
        p = a[i].attrs["degrade"]
        assert lo - 0.5 <= a[i].ied()[0] <= hi + 0.5
        assert 30 <= p["jpeg_quality"] <= 80 and 0.0 <= p["blur_sigma"] <= 1.0
    assert all(a[i] is ims[i] for i in range(10) if i not in picked)
    only = with_degraded(ims, shapes, 1.0, recipe={"ied_range": (12.0, 12.0)}, random_state=0)
    np.testing.assert_allclose([im.ied()[0] for im in only], 12.0, atol=0.3)
    with pytest.raises(ValueError, match=r"share must be in \[0, 1\]"):
        with_degraded(ims, shapes, 1.5)
    with pytest.raises(ValueError, match="shapes must have one entry per image"):
        with_degraded(ims, shapes[:3], 0.5)
    with pytest.raises(ValueError, match="unknown recipe keys"):
        with_degraded(ims, shapes, 0.5, recipe={"noise": (0, 1)})
    with pytest.raises(ValueError, match="invalid recipe"):
        with_degraded(ims, shapes, 0.5, recipe={"jpeg_quality": (80, 30)})


def test_example_features_read_the_degraded_pixels(tmp_path):
    import cv2

    from cvfs.io.images import read_image
    from cvfs.keypoints.train import ExampleFeatures, with_mirrored
    from cvfs.vision import FeaturePool, LevelCache, pyramid_level

    rng = np.random.default_rng(0)
    path = tmp_path / "face.png"
    cv2.imwrite(str(path), rng.integers(0, 256, (120, 100, 3), dtype=np.uint8))
    d = degraded(_face(path), (120, 100), ied=10.0, blur_sigma=0.3, jpeg_quality=40)
    ims = with_mirrored([d])  # the mirrored copy uses the shrunk width and stays degraded
    assert ims[1].attrs["degrade"] == d.attrs["degrade"]
    np.testing.assert_allclose(ims[1].points[0, LE, 0], 24 - d.points[0, RE, 0])
    pool = FeaturePool(haar_per_channel=50)
    feats = ExampleFeatures.from_images(ims, pool)
    ex = np.array([(0, 6, 15, 20), (1, 6, 15, 20)], dtype=EXAMPLE_DTYPE)
    X = feats(ex)
    small = degrade_pixels(read_image(path), **d.attrs["degrade"])
    lev = pyramid_level(small, 6)
    assert lev.shape == (round(30 * 2 ** 1.5), round(25 * 2 ** 1.5))
    np.testing.assert_array_equal(X[0], pool.compute(LevelCache(lev), [[20, 15]])[0])
    flipped = np.ascontiguousarray(small[:, ::-1])
    np.testing.assert_array_equal(X[1], pool.compute(LevelCache(pyramid_level(flipped, 6)),
                                                     [[20, 15]])[0])
    with pytest.raises(ValueError, match="degrades must have one entry per path"):
        ExampleFeatures([path], pool, degrades=[None, None])


def test_train_detector_with_degraded_images(real_data):
    """A tiny run with half the images degraded: positives from their upsampled levels, the
    setting recorded, and the same seed giving the same detector."""
    from cvfs.datasets.faces import load_mtfl
    from cvfs.io.images import read_image
    from cvfs.keypoints.train import TrainingRecipe, train_detector

    train = load_mtfl("train")[:4]
    recipe = TrainingRecipe(method="logitboost", k=5, bins=8, haar_per_channel=30, n_rounds=2,
                            n_hard=20, neg_per_image=10, degrade=0.5)
    det = train_detector(train, ["left_eye_center"], recipe, random_state=0)
    rec = det.info["training"]["keypoints"]["left_eye_center"]
    assert det.info["params"]["degrade"] == 0.5
    # two sharp faces (IED ~40 px: 2-3 training levels) and two shrunk to IED 8-16 px
    # (4-5 upsampled levels each), ~5 positions per level
    assert rec["n_positives"] > 40 and len(rec["rounds"]) == 2
    again = train_detector(train, ["left_eye_center"], recipe, random_state=0)
    img = read_image(train[0].path)
    np.testing.assert_array_equal(again.detect(img, max_scale=1.0)["left_eye_center"],
                                  det.detect(img, max_scale=1.0)["left_eye_center"])
    # the cascade calibrated on the same mix: every face (sharp or degraded) keeps a window
    from cvfs.keypoints.calibrate import calibrate_detector
    from cvfs.keypoints.train import _image_shape

    mix = with_degraded(train, [_image_shape(im) for im in train], 0.5, random_state=0)
    cal = calibrate_detector(det, mix, miss_rate=0.0, n_negatives=200, random_state=0)
    stats = cal.info["training"]["calibration"]["keypoints"]["left_eye_center"]
    assert stats["bags_rejected"] == 0.0 and cal.info["training"]["calibration"]["n_images"] == 4
