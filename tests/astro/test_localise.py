"""Astronomy: PSF, dictionary, localisation, denoising, metrics (synthetic and real images)."""

import numpy as np
import pytest
from scipy import integrate

from cvfs import astro
from cvfs.astro.dictionary import PSFDictionary, sample_atoms
from cvfs.astro.fit import model_and_jac as _model_and_jac
from cvfs.astro.pointfit import tile_starts as _tile_starts
from cvfs.core.sbl import weighted_lasso
from cvfs.core.screening import as_operator, static_test


def test_delta_e_is_the_pixel_integral_of_a_gaussian():
    for u, s in [(0.0, 1.0), (1.3, 1.7), (-2.2, 0.8)]:
        ref = integrate.quad(lambda t, s=s: np.exp(-t * t / (2 * s * s)) / (np.sqrt(2 * np.pi) * s),
                             u - 0.5, u + 0.5)[0]
        assert astro.delta_e(u, s) == pytest.approx(ref, rel=1e-10)
    assert astro.delta_e(np.arange(-30, 31), 2.0).sum() == pytest.approx(1.0, abs=1e-12)


def test_render_psf_convention_and_shapes():
    img = astro.render_psf((20, 31), x0=7.0, y0=12.0, sigma=1.5, flux=100.0, background=2.0)
    assert img.shape == (20, 31)
    r, c = np.unravel_index(np.argmax(img), img.shape)
    assert (r, c) == (12, 7)  # x is the column, y the row
    assert (img - 2.0).sum() == pytest.approx(100.0, rel=1e-6)
    two = astro.render_psf((9, 9), [2.0, 6.0], [2.0, 6.0], [1.0, 1.0], [1.0, 3.0])
    one = astro.render_psf((9, 9), 6.0, 6.0, 1.0, 3.0) + astro.render_psf((9, 9), 2.0, 2.0, 1.0)
    np.testing.assert_allclose(two, one, atol=1e-14)


def test_psf_dictionary_operator_matches_dense_matrix():
    params = sample_atoms((12, 15), 500, random_state=0)
    D = PSFDictionary((12, 15), params)
    M = D.matrix()
    assert M.shape == (180, D.shape[1])
    np.testing.assert_allclose(np.linalg.norm(M, axis=0), 1.0, rtol=1e-12)
    raw = astro.render_psf((12, 15), *params[3]).ravel()
    np.testing.assert_allclose(M[:, 3], raw / np.linalg.norm(raw), atol=1e-12)
    assert D.flux_per_unit[3] == pytest.approx(1 / np.linalg.norm(raw))
    rng = np.random.default_rng(1)
    r = rng.standard_normal(180)
    R = rng.standard_normal((180, 3))
    np.testing.assert_allclose(D.rmatvec(r), M.T @ r, atol=1e-12)
    np.testing.assert_allclose(D.rmatvec(R), M.T @ R, atol=1e-12)
    np.testing.assert_allclose(D.gram_columns([4, 9]), M.T @ M[:, [4, 9]], atol=1e-12)
    sub = D.subset(np.array([9, 4]))
    np.testing.assert_allclose(sub.matrix(), M[:, [9, 4]], atol=1e-14)


def test_sample_atoms_methods_and_determinism():
    a = sample_atoms((28, 28), 10_000, (1.0, 2.0), random_state=3)
    b = sample_atoms((28, 28), 10_000, (1.0, 2.0), random_state=3)
    np.testing.assert_array_equal(a, b)
    assert abs(len(a) - 10_000) < 600
    assert a[:, 0].min() >= -1 and a[:, 0].max() <= 28 and a[:, 2].min() >= 1 and a[:, 2].max() <= 2
    u = sample_atoms((10, 20), 300, 1.5, method="uniform", random_state=0)
    assert u.shape == (300, 3) and np.all(u[:, 2] == 1.5) and u[:, 0].max() > 15
    p = sample_atoms((10, 10), 5, method=lambda n, rng: np.tile([1.0, 2.0, 1.5], (n, 1)))
    assert p.shape == (5, 3)


@pytest.mark.parametrize("kw, err, msg", [
    ({"n_atoms": 0}, ValueError, "n_atoms must be a positive int; got 0"),
    ({"psf_sigma": (1.0, -2.0)}, ValueError, "psf_sigma must be a positive float"),
    ({"method": "sobol"}, ValueError, "method must be 'grid', 'uniform' or a callable"),
    ({"method": lambda n, rng: np.zeros((n, 2))}, ValueError, r"must return an \(n, 3\) array"),
])
def test_sample_atoms_errors(kw, err, msg):
    with pytest.raises(err, match=msg):
        sample_atoms((10, 10), **{"n_atoms": 10, **kw})


@pytest.mark.parametrize("positive", [True, False])
def test_screening_safe_on_psf_operator(positive):
    """Static rules through the on-the-fly operator (gram_columns path) are safe."""
    img, _, _ = astro.make_scene((16, 16), 3, random_state=4, background=0.0)
    D = PSFDictionary((16, 16), sample_atoms((16, 16), 2000, random_state=0))
    y = img.ravel() / np.linalg.norm(img) * 5  # |dtheta| scales with y: compare at ||y|| = 5
    rho = D.rmatvec(y)
    c = rho if positive else np.abs(rho)
    for ratio in (0.3, 0.7):
        pen = ratio * c.max() * np.ones(D.shape[1])
        ref = weighted_lasso(D, y, pen, positive=positive, gap_safe=False, tol=1e-8)
        for rule in ("sphere", "dome", "wtht"):
            keep = static_test(rule, D, rho, np.ones(D.shape[1]), pen, y, positive)
            assert not np.any((ref.coef != 0) & ~keep)
            got = weighted_lasso(D, y, pen, positive=positive, keep=keep, gap_safe=False, tol=1e-8)
            assert np.abs(got.coef - ref.coef).max() <= 1e-6
        dyn = weighted_lasso(D, y, pen, positive=positive, tol=1e-8)
        assert np.abs(dyn.coef - ref.coef).max() <= 1e-6
        dense = static_test("wtht", as_operator(D.matrix()), rho, np.ones(D.shape[1]), pen, y,
                            positive)
        np.testing.assert_array_equal(dense, static_test("wtht", D, rho, np.ones(D.shape[1]),
                                                         pen, y, positive))


def test_model_jacobian_matches_finite_differences():
    p = np.array([5.3, 7.1, 1.4, 120.0, 9.0, 3.2, 1.8, 60.0, 2.0])
    _, J = _model_and_jac(p, (12, 14))
    eps = 1e-6
    num = np.empty_like(J)
    for i in range(p.size):
        d = np.zeros_like(p)
        d[i] = eps
        num[:, i] = ((_model_and_jac(p + d, (12, 14), False)[0]
                      - _model_and_jac(p - d, (12, 14), False)[0]) / (2 * eps)).ravel()
    np.testing.assert_allclose(J, num, atol=1e-5)


def test_tiles_cover_with_disjoint_cores():
    for n, tile, ov in [(64, 28, 8), (100, 28, 8), (28, 28, 8), (20, 28, 4), (57, 16, 6)]:
        t = _tile_starts(n, tile, ov)
        assert t[0][1] == -np.inf and t[-1][2] == np.inf
        for (s, _lo, hi), (s2, lo2, _) in zip(t[:-1], t[1:], strict=True):
            assert hi == lo2 and s <= lo2 < s + tile and s2 <= hi
        assert t[-1][0] + min(tile, n) == n


def _check_hierarchy(cat):
    """ids 1..n; every child points to a parent row that counts it; parents have >= 2 children
    and no parent themselves."""
    np.testing.assert_array_equal(cat["id"], np.arange(1, len(cat) + 1))
    parents = cat["n_children"] > 0
    for p in cat[parents]:
        kids = cat[cat["parent"] == p["id"]]
        assert len(kids) == p["n_children"] >= 2 and np.all(kids["n_children"] == 0)
        assert p["parent"] == 0 and p["flags"] & astro.FLAGS["blended"]
    assert set(cat["parent"][cat["parent"] > 0]) <= set(cat["id"][parents])


def test_localise_synthetic_scenes():
    f1, err = [], []
    for seed in range(3):
        img, clean, truth = astro.make_scene(random_state=seed)
        res = astro.localise_and_denoise(img, random_state=0, levels="all")
        full = res.catalogue
        assert full.dtype.names[:4] == ("x", "y", "sigma", "flux")
        assert not full["extended"].any() and np.all(full["flux_err"] > 0)
        assert np.all(np.diff(full["flux"]) <= 0)
        _check_hierarchy(full)
        # the default catalogue is the deblended rows, one per source
        cat = astro.localise(img, random_state=0)
        np.testing.assert_array_equal(cat, astro.leaves(full))
        s = astro.detection_scores(cat, truth)
        f1.append(s["f1"])
        err.append(s["rmse"])
        assert res.model.shape == img.shape
        # the sky is a background mesh (it follows gradients), not one constant: ~0.6 dB less
        assert astro.psnr(clean, res.model) > astro.psnr(clean, img) + 4
        assert res.noise_sigma == pytest.approx(1.0, rel=0.25)
    assert np.mean(f1) == 1.0
    assert max(err) < 0.2


def test_localise_coordinates_and_fixed_noise():
    img = astro.render_psf((28, 28), 9.3, 17.6, 1.3, 400.0, background=5.0)
    img = img + 0.5 * np.random.default_rng(0).standard_normal(img.shape)
    cat = astro.localise(img, noise_sigma=0.5, random_state=1)
    assert len(cat) == 1
    assert cat["x"][0] == pytest.approx(9.3, abs=0.1)
    assert cat["y"][0] == pytest.approx(17.6, abs=0.1)
    assert cat["sigma"][0] == pytest.approx(1.3, abs=0.1)
    assert cat["flux"][0] == pytest.approx(400.0, rel=0.05)
    den = astro.denoise(img, noise_sigma=0.5, random_state=1)
    assert den.shape == img.shape and den.min() > 4.0


def test_localise_large_image_merges_sources_across_tile_borders():
    # sources straddling tile borders (tiles start at 0, 20, 36 for a 64-pixel axis)
    xs = np.array([19.6, 24.2, 40.0, 44.5, 10.0, 55.0])
    ys = np.array([23.9, 40.1, 19.8, 45.2, 50.0, 8.0])
    img = astro.render_psf((64, 70), xs, ys, 1.5, 300.0, background=3.0)
    img += np.random.default_rng(5).standard_normal(img.shape)
    truth = np.zeros(6, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = xs, ys
    cat = astro.leaves(astro.localise(img, random_state=0, n_atoms=4000))
    s = astro.detection_scores(cat, truth)
    assert s["f1"] == 1.0 and s["rmse"] < 0.15


def test_localise_is_deterministic_with_seed():
    img, _, _ = astro.make_scene(random_state=11)
    a = astro.localise(img, random_state=2, n_atoms=3000)
    b = astro.localise(img, random_state=2, n_atoms=3000)
    np.testing.assert_array_equal(a, b)


def test_localise_and_denoise_are_deterministic_by_default():
    """The default seed is fixed: two calls without one give the same catalogue and image."""
    img, _, _ = astro.make_scene((48, 48), n_sources=8, random_state=12)
    assert astro.LocalisationSettings().random_state == 0
    a, b = astro.localise(img), astro.localise(img)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, astro.localise(img, random_state=0))
    np.testing.assert_array_equal(astro.denoise(img), astro.denoise(img))


@pytest.mark.parametrize("image, err, msg", [
    (np.full((28, 28), np.nan), ValueError, "NaN or infinite pixels"),
    (np.zeros((0, 0)), ValueError, "at least 4 x 4 pixels; got shape"),
    (np.ones((5, 28, 28)), ValueError, r"must be 2-D .*a cube"),
    (np.ones((28, 28)), ValueError, "image is constant"),
    ("image.fits", TypeError, "image must be a 2-D array; got str"),
    (np.array([["a", "b"]] * 4), TypeError, "numeric array"),
])
def test_localise_bad_images(image, err, msg):
    with pytest.raises(err, match=msg):
        astro.localise(image)


@pytest.mark.parametrize("kw, msg", [
    ({"noise_sigma": -1.0}, "noise_sigma must be a positive number; got -1.0"),
    ({"psf_sigma": (0, 1)}, "psf_sigma must be a positive float"),
    ({"n_atoms": 2.5}, "n_atoms must be a positive int; got 2.5"),
    ({"tile": 4}, "tile must be an int >= 8; got 4"),
    ({"overlap": 20}, r"overlap must be an int in \[0, tile // 2\); got 20"),
    ({"lam_factor": 0}, "lam_factor must be a positive number; got 0"),
    ({"detect_snr": float("nan")}, "detect_snr must be a positive number"),
])
def test_localise_bad_parameters(kw, msg):
    img, _, _ = astro.make_scene(random_state=0)
    with pytest.raises(ValueError, match=msg):
        astro.localise(img, **kw)


def test_detection_scores_and_group_iou():
    truth = np.zeros(3, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"], truth["flux"] = [1, 5, 9], [1, 5, 9], [10, 20, 30]
    pred = np.zeros(3, astro.CATALOGUE_DTYPE)
    pred["x"], pred["y"], pred["flux"] = [1.3, 5.0, 20.0], [1.4, 5.0, 20.0], [11, 20, 5]
    s = astro.detection_scores(pred, truth)
    assert s["tp"] == 2 and s["precision"] == pytest.approx(2 / 3) and s["recall"] == 2 / 3
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["rmse"] == pytest.approx(np.sqrt((0.5**2 + 0) / 2))
    assert s["flux_error"] == pytest.approx(0.05)
    # one-to-one: two detections near one source count once
    two = np.array([[5.0, 5.0], [5.2, 5.0]])
    assert astro.detection_scores(two, truth[1:2])["tp"] == 1
    assert astro.group_iou(truth, truth) == 1.0
    assert astro.group_iou(pred[:0], truth) == 0.0
    # shifted by (0.5, 0) with 3-px boxes: IoU = 2.5*3 / (2*9 - 7.5)
    shifted = np.column_stack([truth["x"] + 0.5, truth["y"]])
    assert astro.group_iou(shifted, truth) == pytest.approx(7.5 / 10.5)


def test_psnr():
    a = np.zeros((4, 4))
    a[0, 0] = 10.0
    b = a.copy()
    b[1, 1] = 1.0
    assert astro.psnr(a, b) == pytest.approx(20 * np.log10(10 / np.sqrt(1 / 16)))
    assert astro.psnr(a, a) == np.inf
    with pytest.raises(ValueError, match="same shape"):
        astro.psnr(a, a[:2])


def _hdf_crop(n):
    from skimage import data
    from skimage.color import rgb2gray

    return rgb2gray(data.hubble_deep_field())[:n, :n]


def test_hubble_deep_field_crop():
    """Real image: the Hubble Deep Field bundled with scikit-image (64 x 64 crop)."""
    crop = _hdf_crop(64)
    _check_hierarchy(astro.localise(crop, random_state=0, levels="all"))
    res = astro.localise_and_denoise(crop, random_state=0)
    cat = res.catalogue
    # galaxies are single extended rows, not shredded into point sources
    assert 5 <= len(cat) <= 60 and cat["extended"].any() and not cat["extended"].all()
    assert np.all((cat["x"] >= -0.5) & (cat["x"] < 63.5) & (cat["y"] >= -0.5) & (cat["y"] < 63.5))
    # every detection sits on a local brightness peak of the smoothed image (the faintest point
    # source, flux 10 times its error, peaks 2.3 noise sigma above the background there)
    from scipy.ndimage import gaussian_filter, maximum_filter

    sm = gaussian_filter(crop, 1.0)
    peaks = np.argwhere((sm == maximum_filter(sm, 5)) & (sm > res.background + 2 * res.noise_sigma))
    d = np.hypot(cat["y"][:, None] - peaks[None, :, 0], cat["x"][:, None] - peaks[None, :, 1])
    inner = (np.minimum(cat["x"], cat["y"]) >= 3) & (np.maximum(cat["x"], cat["y"]) <= 60)
    # the 10 brightest point sources (the catalogue is sorted); an extended row is a centroid
    bright = (np.cumsum(~cat["extended"]) <= 10) & inner & ~cat["extended"]
    assert np.all(d[bright].min(axis=1) <= 2.0)
    # the residual is close to the noise level (1.5-1.6 sigma over dictionary seeds: faint
    # galaxy halos below the detection threshold stay in it)
    assert np.std(crop - res.model) < 1.7 * res.noise_sigma


def test_localise_without_refinement_reports_grouped_atoms():
    img, _, truth = astro.make_scene(random_state=21)
    raw = astro.localise(img, random_state=0, refine=False)
    assert len(raw) >= len(truth)
    assert np.all((raw["sigma"] >= 1.0) & (raw["sigma"] <= 2.0)) and np.all(raw["flux"] > 0)
    # the sampled dictionary alone is less precise than the refined fit
    full = astro.localise(img, random_state=0)
    assert astro.detection_scores(full, truth)["rmse"] < astro.detection_scores(raw, truth)["rmse"]


def test_position_crlb_matches_the_analytic_bound_of_an_isolated_source():
    from cvfs.astro import position_crlb

    truth = np.zeros(1, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"], truth["sigma"], truth["flux"] = 20.0, 20.0, 3.0, 500.0
    bound = position_crlb(truth, (41, 41), noise_sigma=1.0)
    # continuous Gaussian PSF: var_x = var_y = 8 pi sigma^4 noise^2 / flux^2
    analytic = np.sqrt(2 * 8 * np.pi * 3.0**4 / 500.0**2)
    np.testing.assert_allclose(bound, analytic, rtol=0.02)
    # a close neighbour makes both positions harder to estimate
    pair = np.zeros(2, astro.CATALOGUE_DTYPE)
    pair["x"], pair["y"], pair["sigma"], pair["flux"] = [19.0, 21.0], 20.0, 3.0, 500.0
    assert np.all(position_crlb(pair, (41, 41), 1.0) > bound)
    with pytest.raises(ValueError, match="noise_sigma must be > 0"):
        position_crlb(truth, (41, 41), 0.0)
    assert position_crlb(truth[:0], (41, 41), 1.0).size == 0


def test_no_false_source_on_a_sky_gradient():
    rng = np.random.default_rng(3)
    sky = 100.0 + 2.0 * np.arange(56)[None, :] + np.zeros((56, 1))
    img = sky + 5.0 * rng.standard_normal((56, 56))
    res = astro.localise_and_denoise(img, random_state=0)
    assert len(res.catalogue) == 0
    # within a quarter of the noise sigma (5) on 16 px boxes
    assert np.median(np.abs(res.background_map - sky)) < 1.25
    # a star on the gradient is found, with the new fields
    star = img + astro.render_psf(img.shape, 30.2, 20.7, 1.4, 2000.0)
    cat = astro.localise(star, random_state=0)
    assert len(cat) == 1 and abs(cat["x"][0] - 30.2) < 0.2 and abs(cat["y"][0] - 20.7) < 0.2
    assert not cat["extended"][0] and cat["flags"][0] == 0 and cat["snr"][0] > 10


def test_background_map_against_sextractor():
    fits = pytest.importorskip("astropy.io.fits")
    from cvfs.datasets import data_home

    d = data_home() / "astro" / "sep_image"
    if not (d / "image.fits").exists():
        pytest.skip("sep test image not in the data home")
    img = fits.getdata(d / "image.fits").astype(np.float64)
    bkg = astro.estimate_background(img, box=64)
    back, rms = fits.getdata(d / "back.fits"), fits.getdata(d / "rms.fits")
    assert np.max(np.abs(bkg.background - back) / back) < 5e-3
    assert np.median(np.abs(bkg.rms - rms) / rms) < 0.01


def test_mask_nan_and_error_inputs():
    img, _, truth = astro.make_scene((40, 40), 4, random_state=5, min_separation=6.0, border=4)
    bad = img.copy()
    bad[:, :3] = np.nan
    mask = np.zeros(img.shape, bool)
    mask[-3:] = True
    cat = astro.localise(bad, mask=mask, error=np.ones(img.shape), random_state=0)
    assert astro.detection_scores(cat, truth)["recall"] >= 0.75
    assert np.all(np.isfinite(cat["x_err"]))


@pytest.mark.parametrize("image, kw, msg", [
    (np.ones((20, 20, 3)), {}, r"colour image: pick one channel \(image\[..., 0\]\)"),
    (np.full((20, 20), np.nan), {}, "only NaN or infinite pixels"),
    (np.zeros((0, 5)), {}, "an empty image"),
    (np.eye(20), {"mask": np.zeros((5, 5), bool)}, r"mask must have the image's shape \(20, 20\)"),
    (np.eye(20), {"error": np.ones(3)}, r"error must have the image's shape"),
    (np.eye(20), {"mask": np.ones((20, 20), bool)}, "mask leaves no pixel"),
    (np.eye(20), {"n_jobs": 0}, "n_jobs must be a positive int or -1; got 0"),
])
def test_localise_bad_inputs(image, kw, msg):
    with pytest.raises(ValueError, match=msg):
        astro.localise(image, **kw)


def test_uncertainties_are_calibrated():
    zx, zf = [], []
    for seed in range(12):
        img, _, truth = astro.make_scene((40, 40), 5, random_state=100 + seed,
                                         min_separation=6.0, border=3.0)
        cat = astro.localise(img, noise_sigma=1.0, random_state=0)
        pairs = astro.match_sources(cat, truth)
        c, t = cat[pairs[:, 0]], truth[pairs[:, 1]]
        zx.append((c["x"] - t["x"]) / c["x_err"])
        zf.append((c["flux"] - t["flux"]) / c["flux_err"])
    zx, zf = np.concatenate(zx), np.concatenate(zf)
    assert len(zx) >= 50
    assert 0.7 < np.std(zx) < 1.4 and 0.7 < np.std(zf) < 1.4


def test_sky_coordinates_match_astropy(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    wcs_mod = pytest.importorskip("astropy.wcs")
    from cvfs.datasets import data_home

    path = data_home() / "astro" / "m17" / "aK_asky_990502s1350080.fits.gz"
    if not path.exists():
        pytest.skip("m17 tile not in the data home")
    with fits.open(path) as hdul:
        data, header = hdul[0].data[200:264, 100:164].astype(np.float64), hdul[0].header
    wcs = wcs_mod.WCS(header).slice((slice(200, 264), slice(100, 164)))
    cat = astro.localise(data, wcs=wcs, random_state=0)
    assert len(cat) > 0 and "ra" in cat.dtype.names
    sky = wcs.pixel_to_world(cat["x"], cat["y"])
    np.testing.assert_allclose(cat["ra"], sky.ra.deg, atol=1e-6)
    np.testing.assert_allclose(cat["dec"], sky.dec.deg, atol=1e-6)
    with pytest.raises(ValueError, match="wcs must be an astropy.wcs.WCS; got dict"):
        astro.localise(data, wcs={})


def test_bounded_lm_matches_scipy_least_squares():
    """The compiled Levenberg-Marquardt reaches scipy's trust-region optimum (chi^2 and
    parameters) on blended sources with masked pixels, and its normal equations are J^T W^2 J."""
    from scipy.optimize import least_squares

    from cvfs.astro._lm import normal_equations
    from cvfs.astro.fit import _bounds, chi2, fit_sources

    rng = np.random.default_rng(3)
    h = w = 24
    true = np.array([[8.0, 9.0, 1.3, 150.0], [10.5, 10.0, 1.7, 90.0], [17.0, 15.0, 1.1, 60.0]])
    img = _model_and_jac(np.r_[true.ravel(), 0.4], (h, w), jac=False)[0] \
        + rng.normal(0, 1, (h, w))
    wt = np.ones((h, w))
    wt[:4, :6] = 0.0
    wt[12, 12] = 0.5
    start = true + np.c_[rng.normal(0, 0.4, (3, 2)), np.zeros((3, 2))]
    start[:, 2] = 1.5
    src, bg = fit_sources(img, wt, start, 0.0, 1.0, 2.0, 1.0, tol=1e-10)
    lo, hi = _bounds(3, (h, w), 1.0, 2.0, 1.0)
    keep = wt.ravel() > 0

    def fun(p):
        return ((_model_and_jac(p, (h, w), jac=False)[0] - img).ravel() * wt.ravel())[keep]

    def jac(p):
        return (_model_and_jac(p, (h, w))[1] * wt.ravel()[:, None])[keep]

    ref = least_squares(fun, np.r_[start.ravel(), 0.0], jac=jac, bounds=(lo, hi),
                        x_scale="jac", ftol=1e-12, xtol=1e-12, gtol=1e-12)
    # the exact model's chi^2 at the compiled fit's optimum; the compiled model leaves out the
    # pixels where a source's profile is below FLOOR noise sigma, its chi^2 differs by ~1e-6
    p_fit = np.r_[src.ravel(), bg]
    assert fun(p_fit) @ fun(p_fit) == pytest.approx(2 * ref.cost, rel=1e-7)
    assert chi2(img, wt, src, bg) == pytest.approx(2 * ref.cost, rel=1e-5)
    np.testing.assert_allclose(np.r_[src.ravel(), bg], ref.x, rtol=1e-4, atol=1e-4)
    p = np.r_[start.ravel(), 0.0]  # away from the optimum, where the gradient is not ~0
    # weights 1e4 times larger put every source's FLOOR radius beyond REACH widths (the whole
    # profile): the normal equations of the exact model, scaled by 1e8
    big = 1e4
    chi, A, g = normal_equations(img, big * wt, p, np.ones(1), np.ones(1))
    A, g, chi = A / big**2, g / big**2, chi / big**2
    J, r = jac(p), fun(p)
    np.testing.assert_allclose(A, J.T @ J, rtol=1e-6, atol=1e-9 * np.abs(A).max())
    np.testing.assert_allclose(g, J.T @ r, rtol=1e-6, atol=1e-9 * np.abs(J.T @ r).max())
    assert chi == pytest.approx(r @ r, rel=1e-9)


def test_dictionary_crop_equals_a_dictionary_of_the_cropped_atoms():
    params = sample_atoms((20, 20), 2000, (1.0, 2.0), random_state=0)
    base = PSFDictionary((20, 20), params)
    sub = base.crop((9, 13), margin=1.0)
    inside = (params[:, 0] <= 13) & (params[:, 1] <= 9)
    np.testing.assert_array_equal(sub.params, params[inside])
    fresh = PSFDictionary((9, 13), params[inside])
    np.testing.assert_allclose(sub.matrix(), fresh.matrix(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sub.flux_per_unit, fresh.flux_per_unit, rtol=1e-12)
    with pytest.raises(ValueError, match="exceeds"):
        base.crop((21, 5))


def test_tile_fits_use_only_atoms_near_the_footprint(monkeypatch):
    """Each tile's SBL sees only atoms centred on the object's footprint grown by 3 px (the
    SBL path: the fast path would fit this isolated star without it)."""
    import importlib

    loc = importlib.import_module("cvfs.astro.pointfit")
    seen = []
    real = loc.sbl_fit

    def spy(dico, y, *a, **k):
        seen.append((dico, y.reshape(dico.image_shape)))
        return real(dico, y, *a, **k)

    monkeypatch.setattr(loc, "sbl_fit", spy)
    img = astro.render_psf((64, 64), 30.2, 33.7, 1.3, 600.0, background=2.0)
    img = img + np.random.default_rng(3).standard_normal(img.shape)
    res = astro.localise_and_denoise(img, random_state=0, fast_path=False)
    assert len(res.catalogue) == 1 and len(seen) == 1
    rr, cc = np.nonzero(res.segmentation == 1)
    radius = np.hypot(rr - 33.7, cc - 30.2).max()
    dico, tile = seen[0]
    py, px = np.unravel_index(np.argmax(tile), tile.shape)
    d = np.hypot(dico.params[:, 0] - px, dico.params[:, 1] - py)
    assert 0 < dico.shape[1] < 10_000 and d.max() <= radius + 3 + 2
    assert res.catalogue["x"][0] == pytest.approx(30.2, abs=0.15)
    assert res.catalogue["y"][0] == pytest.approx(33.7, abs=0.15)


def test_match_levels_picks_the_level_of_each_family():
    cat = astro.catalogue.empty_catalogue(6)
    # family 1: parent (id 1) at the blend's centroid, children 2 and 3 on either side
    # family 4: parent (id 4), children 5 and 6 matching two reference objects
    cat["x"] = [10.0, 9.0, 11.5, 30.0, 29.0, 31.0]
    cat["y"] = 10.0
    cat["parent"] = [0, 1, 1, 0, 4, 4]
    cat["n_children"] = [2, 0, 0, 2, 0, 0]
    truth = np.zeros(3, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = [10.1, 29.0, 31.0], 10.0
    keep = astro.match_levels(cat, truth)
    np.testing.assert_array_equal(keep, [True, False, False, False, True, True])
    assert astro.detection_scores(cat[keep], truth)["recall"] == 1.0
    assert astro.detection_scores(astro.leaves(cat), truth)["recall"] == 2 / 3
    np.testing.assert_array_equal(astro.top_level(cat)["id"], [1, 4])
    # a flat catalogue is kept whole
    assert astro.match_levels(truth, truth).all()


def test_blend_of_two_stars_is_a_parent_with_two_children(tmp_path):
    from cvfs.astro.readers import read_catalogue, write_catalogue

    xs, ys, fl = np.array([20.0, 23.2]), np.array([20.0, 20.6]), np.array([3000.0, 1500.0])
    img = astro.render_psf((40, 44), xs, ys, 1.3, fl, background=10.0)
    img = img + np.random.default_rng(4).standard_normal(img.shape)
    cat = astro.localise(img, random_state=0, levels="all")
    _check_hierarchy(cat)
    # by default one row per source; "objects" gives the blend as its parent row
    np.testing.assert_array_equal(astro.localise(img, random_state=0), astro.leaves(cat))
    np.testing.assert_array_equal(astro.localise(img, random_state=0, levels="objects"),
                                  astro.top_level(cat))
    assert len(cat) == 3 and cat["n_children"].tolist().count(2) == 1
    parent = cat[cat["n_children"] == 2][0]
    kids = cat[cat["parent"] == parent["id"]]
    truth = np.zeros(2, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = xs, ys
    assert astro.detection_scores(kids, truth)["f1"] == 1.0
    # the parent is the blend's isophotal centroid and flux
    assert abs(parent["x"] - np.average(xs, weights=fl)) < 0.3
    assert abs(parent["y"] - np.average(ys, weights=fl)) < 0.3
    assert 0.8 * fl.sum() < parent["flux"] < 1.1 * fl.sum() and not parent["extended"]
    write_catalogue(tmp_path / "c.csv", cat)
    back = read_catalogue(tmp_path / "c.csv")
    for f in ("id", "parent", "n_children"):
        np.testing.assert_array_equal(back[f], cat[f])


def test_sep_image_recall_of_sextractor_objects():
    """Real image: SExtractor's objects with SNR >= 10 on sep's test image, each family of the
    catalogue at its matched level."""
    fits = pytest.importorskip("astropy.io.fits")
    import warnings

    from cvfs.datasets import data_home

    d = data_home() / "astro" / "sep_image"
    if not (d / "image.cat").exists():
        pytest.skip("sep test image not in the data home")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        img = fits.getdata(d / "image.fits").astype(np.float64)
    ref = np.loadtxt(d / "image.cat")
    with np.errstate(divide="ignore", invalid="ignore"):
        sel = ref[:, 15] / ref[:, 16] >= 10  # FLUX_AUTO / FLUXERR_AUTO
    truth = np.zeros(int(sel.sum()), astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = ref[sel, 1] - 1, ref[sel, 2] - 1
    cat = astro.localise(img, random_state=0, levels="all")
    _check_hierarchy(cat)
    # 32 of 34: besides an edge object, a three-source blend whose parent row (the isophotal
    # centroid of a footprint at cvfs's own threshold) lies 1.5 px from SExtractor's X_IMAGE
    assert astro.detection_scores(cat[astro.match_levels(cat, truth)], truth)["recall"] >= 0.94


def test_link_families_drops_a_parent_left_with_one_child():
    from cvfs.astro.catalogue import link_families as _link_families

    cat = astro.catalogue.empty_catalogue(6)
    cat["x"] = np.arange(6.0)
    cat["flags"][[0, 3]] = astro.FLAGS["blended"]
    # rows: parent of family 1, its two children, parent of family 2 with one child left, plain
    fam = np.array([1, -1, -1, 2, -2, 0])
    out = _link_families(cat, fam)
    _check_hierarchy(out)
    np.testing.assert_array_equal(out["x"], [0, 1, 2, 4, 5])
    np.testing.assert_array_equal(out["parent"], [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(out["n_children"], [2, 0, 0, 0, 0])


def test_settings_object_and_keyword_overrides():
    """A LocalisationSettings object and keyword overrides give the same catalogue; unknown
    names and wrong types are refused."""
    img, _, _ = astro.make_scene((28, 28), n_sources=3, random_state=4)
    st = astro.LocalisationSettings(n_atoms=3000, detect_snr=6.0)
    a = astro.localise(img, st)
    b = astro.localise(img, n_atoms=3000, detect_snr=6.0)
    c = astro.localise(img, astro.LocalisationSettings(n_atoms=500), n_atoms=3000,
                       detect_snr=6.0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    with pytest.raises(TypeError, match="unknown localisation setting.*'n_atom'"):
        astro.localise(img, n_atom=3000)
    with pytest.raises(TypeError, match="settings must be a LocalisationSettings"):
        astro.localise(img, {"n_atoms": 3000})
    with pytest.raises(ValueError, match="tile must be an int >= 8"):
        astro.localise(img, st.replace(tile=4))


def test_default_catalogue_is_one_row_per_source():
    """On 28 x 28 scenes with blends the default catalogue scores as the deblended rows (F1 1.0)
    and holds no parent row; the full hierarchy holds the parents."""
    n_parents = 0
    for seed in range(3):
        img, _, truth = astro.make_scene(random_state=seed)
        cat = astro.localise(img)
        full = astro.localise(img, levels="all")
        assert np.all(cat["n_children"] == 0)
        n_parents += int(np.sum(full["n_children"] > 0))
        assert astro.detection_scores(cat, truth)["f1"] == \
            astro.detection_scores(astro.leaves(full), truth)["f1"] == 1.0
    assert n_parents > 0
    with pytest.raises(ValueError, match="levels must be one of"):
        astro.localise(img, levels="parents")


def _saturated_scene(x_near=29.0):
    """64 x 64 scene, 8 stars, 4 columns (30-33) at 65535; one star ``x_near`` at the band."""
    xs = np.array([10.3, 20.6, 45.2, 52.1, 12.4, x_near, 40.9, 27.0])
    ys = np.array([12.2, 50.4, 8.7, 40.3, 33.1, 22.6, 55.8, 45.2])
    fl = np.array([3000, 2500, 2000, 4000, 1800, 2200, 3500, 2600.0])
    img = astro.render_psf((64, 64), xs, ys, 1.5, fl, background=100.0)
    img = img + 3 * np.random.default_rng(0).standard_normal(img.shape)
    img[:, 30:34] = 65535.0
    truth = np.zeros(8, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = xs, ys
    return img, truth


@pytest.mark.parametrize("x_near", [29.0, 29.5, 31.0, 35.0])
def test_saturated_columns_are_masked_and_flagged(x_near):
    """Saturated columns are masked: all 8 stars found, one row each, also the star whose
    centre is at or on the band (unmasked, a fit on the band's remaining side put a second,
    unsupported source on the masked pixels); rows next to the band are flagged."""
    img, truth = _saturated_scene(x_near)
    cat = astro.localise(img, saturation=65535)
    s = astro.detection_scores(cat, truth)
    assert len(cat) == 8 and s["f1"] == 1.0
    sat = (cat["flags"] & astro.FLAGS["saturated"]) > 0
    assert np.all(cat["flags"][sat] & astro.FLAGS["masked"])
    # distance to the band (columns 29.5-33.5): rows on or next to it are flagged, and those of
    # objects whose footprint (grown by 2 px) reaches it (a bright star's, or a pair's), rows
    # far from it are not
    dist = np.maximum(np.abs(cat["x"] - 31.5) - 2.0, 0.0)
    assert np.all(sat[dist < 3]) and not np.any(sat[dist > 11])
    # the same as masking the columns by hand, apart from the flag
    masked = astro.localise(img, mask=img >= 65535)
    np.testing.assert_array_equal(masked["x"], cat["x"])
    assert not np.any(masked["flags"] & astro.FLAGS["saturated"])


def test_saturation_must_be_a_number():
    img, _ = _saturated_scene()
    with pytest.raises(ValueError, match="saturation must be a finite number"):
        astro.localise(img, saturation="65535")
    with pytest.raises(ValueError, match="saturation must be a finite number"):
        astro.localise(img, saturation=np.nan)
