"""Astronomy: crowded objects (footprints of several tiles) fitted from their detection peaks."""

import importlib

import numpy as np
import pytest

from cvfs import astro
from cvfs.astro.fit import _independent, _local_merge_delta, _residual_peaks, chi2, fit_sources

pointfit = importlib.import_module("cvfs.astro.pointfit")


def test_residual_peaks_are_the_largest_distinct_ones():
    params = np.array([[10.0, 10.0, 1.0], [10.5, 10.0, 1.0], [20.0, 10.0, 1.5],
                       [14.0, 10.0, 1.0], [30.0, 30.0, 2.0]])
    corr = np.array([9.0, 8.5, 7.0, 6.5, 5.0])
    # atom 1 is within 1.5 (1 + 1) px of atom 0, atom 3 is 4 px from it (> 3 px)
    np.testing.assert_array_equal(_residual_peaks(corr, params, 6.0, 10), [0, 2, 3])
    np.testing.assert_array_equal(_residual_peaks(corr, params, 6.0, 2), [0, 2])
    # one per round is the largest correlation, as an argmax
    np.testing.assert_array_equal(_residual_peaks(corr, params, 6.0, 1), [0])
    assert _residual_peaks(corr, params, 10.0, 3).size == 0


def test_independent_sources_do_not_overlap():
    src = np.array([[5.0, 5.0, 1.0, 10.0], [9.0, 5.0, 1.0, 10.0], [20.0, 5.0, 1.0, 10.0],
                    [5.0, 12.0, 1.0, 10.0]])
    # weakest first: 1, then 0 is 4 px from it (< 6 px), 2 is 11 px away, 3 is 8.1 px away
    np.testing.assert_array_equal(_independent(src, np.array([1, 0, 2, 3])), [1, 2, 3])
    assert _independent(src, np.array([], dtype=np.intp)).size == 0


def _merge_deltas(sep_px, seed=0):
    """chi^2 change of merging a pair ``sep_px`` apart (two stars, or one star fitted as two when
    ``sep_px`` is 0) on the pair's window and on the whole 28 x 28 tile, among two other stars."""
    rng = np.random.default_rng(seed)
    xs, ys = np.array([6.0, 20.0, 20.0]), np.array([6.0, 8.0, 20.0])
    flux = np.array([800.0, 700.0, 600.0])
    if sep_px:
        xs, ys, flux = np.r_[xs, 20.0 + sep_px], np.r_[ys, 20.0], np.r_[flux, 500.0]
    img = astro.render_psf((28, 28), xs, ys, 1.4, flux, background=5.0)
    img = img + rng.standard_normal(img.shape)
    wt = np.ones_like(img)
    start = np.column_stack([np.r_[6.0, 20.0, 19.8, 20.4 + sep_px],
                             np.r_[6.0, 8.0, 20.0, 20.0], np.full(4, 1.4),
                             np.r_[800.0, 700.0, 300.0, 300.0 + 500.0 * bool(sep_px)]])
    src, bg = fit_sources(img, wt, start, 5.0, 1.0, 2.0, 1.0)
    i, j = 2, 3
    f = src[i, 3] + src[j, 3]
    merged = np.r_[(src[i, :3] * src[i, 3] + src[j, :3] * src[j, 3]) / f, f]
    local = _local_merge_delta(img, wt, src, bg, i, j, merged, 1.0, 2.0, 1.0, None, 1e-6)
    cand, cb = fit_sources(img, wt, np.vstack([src[:2], merged]), bg, 1.0, 2.0, 1.0, tol=1e-10)
    full = chi2(img, wt, cand, cb) - chi2(img, wt, src, bg)
    return local, full


@pytest.mark.slow
def test_a_merge_is_decided_on_the_pair_window_as_on_the_tile():
    thr = 5.0**2
    # two stars 3 px apart: the window rejects the merge (2 thr or more), as the tile does
    local, full = _merge_deltas(3.0)
    assert local >= 2 * thr and full >= thr
    # one star split in two: both accept it, and the window's change is the tile's
    local, full = _merge_deltas(0.0)
    assert local < thr and full < thr
    assert abs(local - full) < 0.5 * thr


def _cluster(seed=0):
    """A 5 x 5 grid of bright stars 7 px apart (one footprint of several tiles) with one star
    2.6 px from a grid star (a pair the detection image does not resolve)."""
    rng = np.random.default_rng(seed)
    gx, gy = np.meshgrid(np.arange(5) * 7.0 + 30, np.arange(5) * 7.0 + 30)
    xs = np.r_[gx.ravel() + rng.uniform(-0.5, 0.5, 25), 46.6]
    ys = np.r_[gy.ravel() + rng.uniform(-0.5, 0.5, 25), 45.0]
    flux = np.r_[rng.uniform(1500, 3000, 25), 1200.0]
    img = astro.render_psf((96, 96), xs, ys, 1.4, flux, background=10.0)
    img = img + rng.standard_normal(img.shape)
    truth = np.zeros(len(xs), astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = xs, ys
    return img, truth


def test_crowded_object_is_fitted_from_its_peaks_without_the_sbl(monkeypatch):
    img, truth = _cluster()
    calls = []
    real = pointfit.sbl_fit
    monkeypatch.setattr(pointfit, "sbl_fit", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = astro.localise_and_denoise(img, noise_sigma=1.0)
    assert res.segmentation.max() == 1  # one object
    assert calls == []
    s = astro.detection_scores(res.catalogue, truth)
    assert s["f1"] == 1.0
    assert s["rmse"] < 0.05


def test_peak_candidates_of_a_tile():
    from cvfs.astro.objects import _Object

    patch = np.zeros((40, 50))
    peaks = np.array([[5, 6], [30, 8], [10, 40], [12, 14]])
    patch[peaks[:, 0], peaks[:, 1]] = [50.0, 40.0, 30.0, 20.0]
    ob = _Object(1, 0, 0, patch, np.ones_like(patch), patch > 0, peaks,
                 np.array([12.0, 9.0, 7.0, 4.0]))
    st = astro.settings.resolve_settings(None)[1]  # detect_snr 5, psf_sigma (1, 2)
    # the tile of rows 2-29, columns 0-27 holds peaks 0 and 3; 3 is below detect_snr
    cand = pointfit.peak_candidates(ob, 2, 0, 28, 28, st)
    np.testing.assert_allclose(cand, [[6.0, 3.0, 1.5, 50.0 * 2 * np.pi * 1.5**2]])


def test_star_beside_a_galaxy_in_one_footprint_is_a_point_source():
    """A galaxy and a star sharing one footprint: the extended object is processed part by part,
    so the star is fitted as a point source and the galaxy keeps its moment row."""
    yy, xx = np.mgrid[:64, :72].astype(float)
    galaxy = 15.0 * np.exp(-0.5 * (((xx - 26) / 7.0) ** 2 + ((yy - 30) / 4.0) ** 2))
    for seed in range(3):
        img = galaxy + astro.render_psf((64, 72), [43.0], [31.0], 1.3, [400.0], background=10.0)
        img = img + np.random.default_rng(seed).standard_normal(img.shape)
        res = astro.localise_and_denoise(img, levels="all")
        cat = res.catalogue
        assert res.segmentation.max() == 1 and len(cat) == 2
        star, gal = cat[~cat["extended"]], cat[cat["extended"]]
        assert len(star) == 1 and len(gal) == 1
        assert np.hypot(star["x"][0] - 43.0, star["y"][0] - 31.0) < 0.15
        assert star["sigma"][0] == pytest.approx(1.3, abs=0.1)
        assert star["flux"][0] == pytest.approx(400.0, rel=0.15)
        assert abs(gal["x"][0] - 26.0) < 1.0 and gal["sigma"][0] > 4.0
        assert (cat["flags"] & astro.FLAGS["blended"]).all()
