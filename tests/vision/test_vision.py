"""cvfs.vision: HOG against skimage, Haar against naive sums, pyramid mapping, the feature pool."""

import pickle

import cv2
import numpy as np
import pytest
from skimage.feature import hog as sk_hog

from cvfs.vision import (
    N_HOG,
    FeaturePool,
    LevelCache,
    as_float_rgb,
    gaussian_pyramid,
    haar_features,
    haar_windows,
    hog_level,
    hog_windows,
    integral_image,
    iter_pyramid,
    level_bands,
    pyramid_level,
    pyramid_scales,
    select_haar,
    valid_centres,
    window_centres,
)
from cvfs.vision.hog import _COS, _SIN, _orient_bin
from cvfs.vision.hog_direct import block_from_cells, hog_direct, hog_slots
from tests.naive import naive_haar, naive_hog_cells

SK = dict(orientations=8, pixels_per_cell=(6, 6), cells_per_block=(2, 2), block_norm="L2-Hys")


def _sk_window(f, r, c):
    return np.concatenate([sk_hog(f[r:r + 24, c:c + 24, ch].astype(np.float64), **SK)
                           for ch in range(3)])


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(5)
    smooth = np.cumsum(np.cumsum(rng.normal(size=(50, 61, 3)), 0), 1)
    smooth = ((smooth - smooth.min()) / np.ptp(smooth)).astype(np.float32)
    return {
        "float": rng.random((50, 61, 3)).astype(np.float32),
        "uint8": rng.integers(0, 256, (50, 61, 3)).astype(np.uint8),
        "levels": (rng.integers(0, 4, (50, 61, 3)) * 85).astype(np.uint8),  # many ties/45 deg
        "smooth": smooth,
    }


@pytest.mark.parametrize("kind", ["float", "uint8", "levels", "smooth"])
def test_hog_equals_skimage_per_window(images, kind):
    img = images[kind]
    f = as_float_rgb(img)
    rng = np.random.default_rng(1)
    tl = np.stack([rng.integers(0, 50 - 24 + 1, 40), rng.integers(0, 61 - 24 + 1, 40)], 1)
    tl = np.vstack([tl, [[0, 0], [26, 37], [0, 37], [26, 0]]])  # windows at the level's corners
    ours = hog_windows(hog_level(img), tl, border="window")
    ref = np.stack([_sk_window(f, r, c) for r, c in tl])
    assert ours.shape == (44, N_HOG) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-7)


def test_hog_image_border_equals_skimage_on_whole_level(images):
    f = images["smooth"]
    hl = hog_level(f)
    for dr, dc in [(0, 0), (2, 5)]:
        full = [sk_hog(f[dr:, dc:, ch].astype(np.float64), feature_vector=False, **SK)
                for ch in range(3)]
        # a shifted crop has zero gradients on its first row/column: skip windows touching them
        for bi, bj in [(0, 0), (2, 3), (4, 4)] if dr == 0 else [(2, 3), (4, 4), (1, 1)]:
            ours = hog_windows(hl, [[dr + 6 * bi, dc + 6 * bj]], border="image")[0]
            ref = np.concatenate([full[ch][bi:bi + 3, bj:bj + 3].ravel() for ch in range(3)])
            np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-7)


def test_hog_cell_maps_equal_naive(images):
    img = images["uint8"][:30, :33]
    hl = hog_level(img)
    f = as_float_rgb(img)
    for ch in range(3):
        np.testing.assert_allclose(hl.cells[ch], naive_hog_cells(f[:, :, ch]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("border", ["image", "window"])
def test_hog_column_subset(images, border):
    hl = hog_level(images["float"])
    tl = [[0, 0], [26, 37], [3, 11]]
    full = hog_windows(hl, tl, border=border)
    cols = [863, 0, 300, 300, 577]
    np.testing.assert_array_equal(hog_windows(hl, tl, columns=cols, border=border), full[:, cols])


def test_hog_per_window_factors_equal_level_maps(images):
    img = images["smooth"]
    tl = [[0, 0], [26, 37], [3, 11], [13, 2]]
    cols = [863, 0, 300, 300, 577, 100, 101]
    few = hog_level(img)
    a = hog_windows(few, tl, columns=cols)
    assert few._norms is None  # 4 windows: factors computed per window
    maps = hog_level(img)
    maps.block_factors()
    np.testing.assert_array_equal(a, hog_windows(maps, tl, columns=cols))
    many = hog_level(img)  # a stride-1 scan switches to the level maps
    hog_windows(many, window_centres(many.shape) - 12)
    assert many._norms is not None


def test_hog_orientation_bins_equal_atan2():
    rng = np.random.default_rng(6)
    g = np.concatenate([rng.normal(size=4000), rng.integers(-3, 4, 4000) / 255.0,
                        [0.0, 1.0, -1.0, 0.5, -0.5]])
    g_row, g_col = np.meshgrid(g[::37], g[::41])
    g_row = np.concatenate([g_row.ravel(), g, -g, g, np.zeros_like(g)])
    g_col = np.concatenate([g_col.ravel(), g, g, np.zeros_like(g), g])
    orient = np.rad2deg(np.arctan2(g_row, g_col)) % 180
    ref = np.floor(orient / 22.5).astype(int)
    ours = np.array([_orient_bin(c, r, _COS, _SIN) for r, c in zip(g_row, g_col, strict=True)])
    np.testing.assert_array_equal(ours, ref)


def test_haar_feature_list_is_deterministic():
    full = haar_features(24)
    assert len(full) == 162_336
    np.testing.assert_array_equal(np.bincount(full["type"]), [43200, 43200, 27600, 27600, 20736])
    sel = select_haar(20_000)
    assert len(sel) == 20_000 and len(np.unique(sel)) == 20_000
    np.testing.assert_array_equal(sel, select_haar(20_000))
    assert (sel["x"] + sel["w"]).max() <= 24 and (sel["y"] + sel["h"]).max() <= 24
    assert tuple(sel[1].tolist()) == (0, 8, 0, 2, 1)


def test_haar_equals_naive_sums():
    rng = np.random.default_rng(2)
    img = rng.random((40, 50, 3)).astype(np.float32)
    feats = haar_features(24)[rng.choice(162_336, 250, replace=False)]
    tl = np.array([[0, 0], [5, 7], [16, 26]])
    vals = haar_windows(img, tl, feats)
    assert vals.shape == (3, 750)
    for i, (r, c) in enumerate(tl):
        for ch in range(3):
            ref = [naive_haar(img[r:r + 24, c:c + 24, ch], f) for f in feats]
            np.testing.assert_allclose(vals[i, ch * 250:(ch + 1) * 250], ref, rtol=0, atol=1e-6)
    # reuse of the integral image gives the same values; constant windows give zero
    np.testing.assert_array_equal(haar_windows(integral_image(img), tl, feats), vals)
    flat = np.full((24, 24, 3), 0.3, dtype=np.float32)
    assert np.abs(haar_windows(flat, [[0, 0]], feats)).max() < 1e-6


def test_haar_contiguous_and_gathered_windows_agree():
    rng = np.random.default_rng(7)
    img = rng.random((30, 140, 3)).astype(np.float32)
    feats = select_haar(400)
    tl = np.stack([np.full(100, 3), np.arange(100)], 1)  # one run of adjacent windows
    perm = rng.permutation(100)
    run = haar_windows(img, tl, feats)
    np.testing.assert_array_equal(haar_windows(img, tl[perm], feats), run[perm])  # patch table
    few = haar_windows(img, tl[perm], feats[:50])  # 150 columns: direct gathers
    np.testing.assert_array_equal(few, run[perm][:, np.r_[0:50, 400:450, 800:850]])
    for i in (0, 63, 64, 99):
        ref = [naive_haar(img[3:27, i:i + 24, 1], f) for f in feats]
        np.testing.assert_allclose(run[i, 400:800], ref, rtol=0, atol=1e-6)


def test_pyramid_scales_and_mapping():
    idx, scales = pyramid_scales((480, 640), max_levels=18)
    np.testing.assert_array_equal(idx, -np.arange(18))
    np.testing.assert_allclose(scales, 2.0 ** (-np.arange(18) / 4))
    rng = np.random.default_rng(3)
    img = (rng.random((100, 130, 3)) * 255).astype(np.uint8)
    levels = gaussian_pyramid(img, max_scale=2.0)
    assert [lv.index for lv in levels] == list(range(4, 4 - len(levels), -1))
    assert levels[0].shape == (200, 260) and levels[4].shape == (100, 130)
    assert min(levels[-1].shape) >= 24 and min(pyramid_level(img, levels[-1].index - 1).shape) < 24
    for lv in levels:
        assert lv.image.dtype == np.float32 and lv.image.shape[2] == 3
        assert abs(lv.scale_y - lv.scale) < 0.02 and abs(lv.scale_x - lv.scale) < 0.02
        pts = np.array([[0.0, 0.0], [129.0, 99.0], [40.5, 17.25]])
        np.testing.assert_allclose(lv.to_original(lv.from_original(pts)), pts, atol=1e-9)
    lv = levels[8]  # scale 1/2: level pixel 0 covers original pixels 0 and 1 -> centre 0.5
    np.testing.assert_allclose(lv.to_original([[0, 0]]), [[0.5, 0.5]])
    # a level is identical built alone or in the pyramid
    np.testing.assert_array_equal(pyramid_level(img, -6).image, levels[10].image)
    # a bright dot keeps its original position on every level (centre-aligned resampling)
    dot = np.zeros((96, 128, 3), dtype=np.float32)
    dot[60:62, 40:42] = 1.0
    for lv in gaussian_pyramid(dot, max_scale=2.0, max_levels=10):
        m = lv.image[:, :, 0]
        y, x = np.unravel_index(np.argmax(m), m.shape)
        w = m[max(y - 3, 0):y + 4, max(x - 3, 0):x + 4]
        yy, xx = np.mgrid[max(y - 3, 0):y + 4, max(x - 3, 0):x + 4]
        cx, cy = (w * xx).sum() / w.sum(), (w * yy).sum() / w.sum()
        np.testing.assert_allclose(lv.to_original([cx, cy]), [40.5, 60.5], atol=0.35)


def test_iter_pyramid_equals_gaussian_pyramid():
    rng = np.random.default_rng(4)
    img = (rng.random((90, 120, 3)) * 255).astype(np.uint8)
    whole = gaussian_pyramid(img, max_scale=2.0, max_levels=12)
    one_by_one = list(iter_pyramid(img, max_scale=2.0, max_levels=12))
    assert [lv.index for lv in one_by_one] == [lv.index for lv in whole]
    for a, b in zip(one_by_one, whole, strict=True):
        np.testing.assert_array_equal(a.image, b.image)
        assert (a.scale, a.scale_x, a.scale_y) == (b.scale, b.scale_x, b.scale_y)
    with pytest.raises(ValueError, match="max_scale must be a positive finite float"):
        next(iter_pyramid(img, max_scale=0.0))


def test_level_bands_equal_whole_level_maps():
    """Integral images and HOG maps of bands of rows (aligned or not with the 64-row re-sums of
    the cell maps, overlapping, at the bottom) are bitwise those rows of the whole level's."""
    rng = np.random.default_rng(6)
    smooth = np.cumsum(np.cumsum(rng.normal(size=(230, 75, 3)), 0), 1)
    img = ((smooth - smooth.min()) / np.ptp(smooth)).astype(np.float32)
    for level in (pyramid_level(img, 0), pyramid_level(img, 2)):
        whole = LevelCache(level)
        h = level.shape[0]
        rows = [(0, 24), (64, 130), (17, 101), (129, 200), (h - 30, h), (0, h)]
        for band in level_bands(level, rows):
            a, b = band.row0, band.row0 + band.shape[0]
            assert band.shape == (b - a, level.shape[1])
            np.testing.assert_array_equal(band.integral, whole.integral[:, a:b + 1])
            for name in ("bins", "mag", "abs_g_row", "abs_g_col"):
                np.testing.assert_array_equal(getattr(band.hog, name),
                                              getattr(whole.hog, name)[:, a:b])
            np.testing.assert_array_equal(band.hog.cells, whole.hog.cells[:, a:b - 5])
            band.clear()
    # the integral recurrence is OpenCV's: the integral images equal cv2.integral's
    for img in (level.image, level.image.astype(np.float64)):
        np.testing.assert_array_equal(
            integral_image(img), np.moveaxis(cv2.integral(img, sdepth=cv2.CV_64F), 2, 0))
    np.testing.assert_array_equal(level_bands(level, [(0, 40)])[0].integral,
                                  integral_image(level.image)[:, :41])
    for bad in ((-1, 30), (10, 30), (0, h + 1)):
        with pytest.raises(ValueError, match="rows: band"):
            level_bands(level, [bad])


def test_pool_columns_and_subsets():
    pool = FeaturePool(haar_per_channel=500)
    assert pool.n_features == 864 + 1500 and len(pool.names()) == pool.n_features
    assert pool.names([0, 864])[0] == "hog_r_b0_0_c0_0_o0"
    assert pool.names([864])[0].startswith("haar_r_edge_x")
    assert FeaturePool(**pool.get_params()).names() == pool.names()
    rng = np.random.default_rng(4)
    img = rng.random((40, 52, 3)).astype(np.float32)
    cache = LevelCache(img)
    centres = np.array([[12, 12], [28, 40], [20, 13]])
    X = pool.compute(cache, centres)
    assert X.shape == (3, pool.n_features) and X.dtype == np.float32
    # HOG block equals hog_windows, Haar block equals haar_windows on the same windows
    np.testing.assert_array_equal(X[:, :864], hog_windows(img, centres - 12, border="image"))
    np.testing.assert_array_equal(X[:, 864:], haar_windows(img, centres - 12, pool.haar))
    cols = rng.choice(pool.n_features, 200, replace=False)
    np.testing.assert_array_equal(pool.compute(cache, centres, cols), X[:, cols])
    skimage_pool = FeaturePool(haar_per_channel=500, hog_border="window")
    np.testing.assert_allclose(skimage_pool.compute(cache, centres, np.arange(864)),
                               np.stack([_sk_window(img, r - 12, c - 12) for r, c in centres]),
                               rtol=0, atol=2e-7)
    out = np.empty((3, 200), dtype=np.float32)
    assert pool.compute(img, centres, cols, out=out) is out
    np.testing.assert_array_equal(out, X[:, cols])
    assert pool.compute(cache, np.empty((0, 2), dtype=int), cols).shape == (0, 200)


def test_pool_on_pyramid_levels_and_names():
    pool = FeaturePool(haar_per_channel=300)
    names = pool.names()
    assert len(set(names)) == pool.n_features
    np.testing.assert_array_equal(pool.is_hog([0, 863, 864, 1763]), [True, True, False, False])
    rng = np.random.default_rng(8)
    img = (rng.random((70, 90, 3)) * 255).astype(np.uint8)
    level = gaussian_pyramid(img, max_scale=2.0)[2]
    cache = LevelCache(level)
    assert cache.level is level and cache.shape == level.shape
    assert np.shares_memory(cache.image, level.image)  # float32 levels are not copied
    centres = window_centres(cache.shape, stride=9)
    X = pool.compute(cache, centres)
    np.testing.assert_array_equal(X, pool.compute(level, centres))
    np.testing.assert_array_equal(X, pool.compute(level.image, centres))
    # pool and cache survive pickling (one worker process per image)
    twin_pool, twin_cache = pickle.loads(pickle.dumps((pool, cache)))
    np.testing.assert_array_equal(twin_pool.compute(twin_cache, centres), X)
    # uint8 and the same image as float give the same features
    np.testing.assert_array_equal(pool.compute(img, [[20, 30]]),
                                  pool.compute(img.astype(np.float32) / 255, [[20, 30]]))


def test_as_float_rgb_conversions():
    u16 = np.full((2, 3, 3), 65535, np.uint16)
    np.testing.assert_array_equal(as_float_rgb(u16), np.ones((2, 3, 3), np.float32))
    f64 = np.full((2, 3, 3), 0.25)
    out = as_float_rgb(f64)
    assert out.dtype == np.float32 and out.flags.c_contiguous and f64.dtype == np.float64
    view = np.zeros((3, 4, 3), np.float32)[:, ::2]
    assert as_float_rgb(view).flags.c_contiguous


def test_haar_terms_per_type():
    from cvfs.vision.haar import haar_terms

    feats = haar_features(24)
    _, _, weight, n_terms = haar_terms(feats)
    for t, k in enumerate([6, 6, 8, 8, 9]):
        assert (n_terms[feats["type"] == t] == k).all()
    # weights sum to zero: constant images give zero
    np.testing.assert_allclose(weight.sum(1), 0, atol=1e-12)


def test_window_centres_grid():
    c = window_centres((30, 40), stride=2)
    assert c.min(0).tolist() == [12, 12] and c.max(0).tolist() == [18, 28]
    assert valid_centres((30, 40), c).all()
    assert window_centres((30, 40)).shape == (7 * 17, 2)
    assert not valid_centres((30, 40), [[11, 20], [19, 28], [18, 29]]).any()


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("image, exc, match", [
    (np.zeros((0, 10, 3), np.uint8), ValueError, "empty"),
    (np.zeros((30, 30), np.uint8), ValueError, "grayscale"),
    (np.zeros((30, 30, 1), np.float32), ValueError, "grayscale"),
    (np.zeros((30, 30, 4), np.uint8), ValueError, r"shape \(H, W, 3\)"),
    (np.zeros((30, 30, 3), np.int32), TypeError, "dtype int32"),
    (np.zeros((30, 30, 3), bool), TypeError, "dtype bool"),
    (np.full((30, 30, 3), np.nan, np.float32), ValueError, "NaN"),
    (np.full((30, 30, 3), 2.0), ValueError, r"expected values in \[0, 1\]"),
    ([[0, 1]], TypeError, "numpy ndarray"),
    (np.zeros((20, 30, 3), np.uint8), ValueError, "too small"),
])
def test_bad_images_raise_clear_errors(image, exc, match):
    with pytest.raises(exc, match=match):
        LevelCache(image)


def test_bad_images_in_pyramid_and_hog():
    with pytest.raises(ValueError, match="grayscale"):
        gaussian_pyramid(np.zeros((64, 64), np.uint8))
    with pytest.raises(ValueError, match="no pyramid level"):
        gaussian_pyramid(np.zeros((10, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="NaN"):
        hog_level(np.full((30, 30, 3), np.inf))
    with pytest.raises(TypeError, match="dtype complex"):
        integral_image(np.zeros((30, 30, 3), complex))


def test_bad_arguments_raise_clear_errors():
    img = np.zeros((30, 40, 3), np.uint8)
    pool = FeaturePool(haar_per_channel=10)
    with pytest.raises(ValueError, match="leave the level"):
        pool.compute(img, [[11, 20]])
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        pool.compute(img, [12, 20])
    with pytest.raises(ValueError, match="integers"):
        pool.compute(img, [[12.0, 20.0]])
    with pytest.raises(ValueError, match=r"columns must lie in \[0, 894\)"):
        pool.compute(img, [[12, 20]], columns=[894])
    with pytest.raises(ValueError, match="out must be"):
        pool.compute(img, [[12, 20]], columns=[1], out=np.empty((1, 1)))
    with pytest.raises(ValueError, match="haar_per_channel"):
        FeaturePool(haar_per_channel=-1)
    with pytest.raises(ValueError, match="border must be one of"):
        FeaturePool(hog_border="zero")
    with pytest.raises(ValueError, match="leave the level"):
        hog_windows(img, [[7, 17]], border="window")
    with pytest.raises(ValueError, match="n must be an int"):
        select_haar(0)
    with pytest.raises(ValueError, match="scales_per_octave"):
        pyramid_scales((100, 100), scales_per_octave=0)
    with pytest.raises(ValueError, match="index must be an int"):
        pyramid_level(img, 1.5)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        window_centres((30, 40), stride=0)
    with pytest.raises(TypeError, match="structured array"):
        haar_windows(img, [[0, 0]], np.zeros(3))
    with pytest.raises(ValueError, match="outside the image"):
        haar_windows(img, [[7, 39]], select_haar(10))


@pytest.mark.parametrize("kind", ["float", "uint8", "levels", "smooth"])
def test_hog_direct_equals_skimage(images, kind):
    img = images[kind]
    f = as_float_rgb(img)
    rng = np.random.default_rng(2)
    tl = np.stack([rng.integers(0, 50 - 24 + 1, 30), rng.integers(0, 61 - 24 + 1, 30)], 1)
    tl = np.vstack([tl, [[0, 0], [26, 37], [0, 37], [26, 0]]])
    ours = hog_direct(img, tl, border="window")
    ref = np.stack([_sk_window(f, r, c) for r, c in tl])
    assert ours.shape == (34, N_HOG) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-7)
    # the level's gradients on the window border: as the per-level maps compute them
    maps = hog_windows(hog_level(img), tl, border="image")
    np.testing.assert_allclose(hog_direct(img, tl, border="image"), maps, rtol=0, atol=2e-7)


@pytest.mark.parametrize("border", ["window", "image"])
def test_block_from_cells_equals_hog_windows(images, border):
    img = images["uint8"]
    hl = hog_level(img)
    maps = (hl.cells, hl.bins, hl.mag, hl.abs_g_row, hl.abs_g_col)
    tl = np.array([[0, 0], [26, 37], [0, 37], [26, 0], [7, 19]])
    ref = hog_windows(hl, tl, border=border)
    got = np.empty_like(ref)
    buf, block = np.empty((2, 2, 8)), np.empty(32)
    for i, (r, c) in enumerate(tl):
        for s in range(27):
            block_from_cells(maps, s, r, c, border == "window", buf, block)
            cols = (s // 9) * 288 + (s % 9) * 32 + np.arange(32)
            got[i, cols] = block
    if border == "window":  # the same arithmetic as hog_windows: bitwise
        np.testing.assert_array_equal(got, ref)
    else:  # hog_windows folds the normalisation into per-level factors
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-7)


def test_hog_direct_columns_and_errors(images):
    img = images["smooth"]
    tl = [[0, 0], [26, 37], [3, 11]]
    cols = [863, 0, 300, 300, 577]
    full = hog_direct(img, tl, border="window")
    np.testing.assert_array_equal(hog_direct(img, tl, columns=cols, border="window"),
                                  full[:, cols])
    slot, within = hog_slots([0, 31, 32, 288, 863])
    assert slot.tolist() == [0, 0, 1, 9, 26] and within.tolist() == [0, 31, 0, 0, 31]
    with pytest.raises(ValueError, match="border must be one of"):
        hog_direct(img, tl, border="crop")
    with pytest.raises(ValueError, match="leave the level"):
        hog_direct(img, [[27, 0]])
    with pytest.raises(ValueError, match=r"columns must lie in \[0, 864\)"):
        hog_direct(img, tl, columns=[864])
