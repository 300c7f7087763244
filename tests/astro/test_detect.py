"""Detection in units of the local noise: the detection image, the background mesh on a sky
gradient, and completeness on faint fields."""

import numpy as np
import pytest

from cvfs import astro
from cvfs.astro.background import estimate_background
from cvfs.astro.detect import detection_image


def test_detection_image_is_the_matched_filter_snr():
    rng = np.random.default_rng(0)
    rms = np.where(np.arange(200)[None, :] < 100, 1.0, 3.0) * np.ones((200, 1))
    noise = rms * rng.standard_normal(rms.shape)
    mask = np.zeros(rms.shape, bool)
    mask[50:60, 20:40] = True
    det = detection_image(noise, rms, mask, 1.5)
    # unit variance on both noise levels (white noise: no correlation correction)
    for half in (det[:, 5:95], det[:, 105:195]):
        assert abs(half.std() - 1.0) < 0.05
    # a point source of the filter's width: SNR = flux * ||psf|| / rms at its centre
    flux = 60.0
    src = astro.render_psf(rms.shape, 150.0, 140.0, 1.5, flux)
    det = detection_image(src, rms, mask, 1.5, white=True)
    norm = np.sqrt(np.sum(astro.render_psf((41, 41), 20.0, 20.0, 1.5) ** 2))
    assert det[140, 150] == pytest.approx(flux * norm / 3.0, rel=0.02)
    # masked pixels carry no signal, whatever their values
    spoilt = np.where(mask, 1e6, src)
    assert np.array_equal(detection_image(spoilt, rms, mask, 1.5, white=True), det)
    # correlated noise (smoothed) is divided out: unit variance again
    corr = detection_image(np.sqrt(2.0) * _smooth(rng.standard_normal(rms.shape)), np.ones(
        rms.shape), np.zeros(rms.shape, bool), 1.5)
    assert abs(corr.std() - 1.0) < 0.1


def _smooth(x):
    from scipy import ndimage

    out = ndimage.uniform_filter(x, 2)
    return out / out.std()


def test_background_follows_a_sky_gradient_and_the_noise_map_excludes_it():
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:256, :256]
    sky = 10.0 + 0.06 * xx + 0.04 * yy  # 25 noise sigma across the frame
    bkg = estimate_background(sky + rng.standard_normal(sky.shape))
    assert np.median(np.abs(bkg.background - sky)) < 0.03
    assert np.abs(bkg.background - sky).max() < 0.3
    # the noise, not the slope across a 64 px box (which alone would add 37 %)
    assert 0.93 < bkg.rms.min() and bkg.rms.max() < 1.05


def test_faint_sources_on_a_sky_gradient_are_found_without_false_ones():
    found, false, n = 0, 0, 0
    for seed in range(3):
        img, _, truth, blobs = astro.make_field((160, 160), 40, n_blobs=1, random_state=seed)
        cat = astro.localise(img)
        d = np.hypot(truth["x"][:, None] - cat["x"][None], truth["y"][:, None] - cat["y"][None])
        found += int(np.sum(d.min(1) <= 2.0))
        n += len(truth)
        d_blob = np.hypot(cat["x"] - blobs[0, 0], cat["y"] - blobs[0, 1])
        false += int(np.sum((d.min(0) > 3.0) & (d_blob > 15.0)))
    # 115 of 120 found and no false row at the default detect_snr = 5 (sep at the same
    # matched-filter threshold: benchmarks/astro/astro_faint.py)
    assert found >= 0.93 * n
    assert false <= 1


def test_make_field_rejects_an_unknown_snr_scale():
    with pytest.raises(ValueError, match="snr_scale must be 'linear' or 'log'"):
        astro.make_scene((20, 20), 2, snr_scale="sqrt")
    img, clean, truth, blobs = astro.make_field((64, 64), 5, n_blobs=1, random_state=0)
    assert img.shape == clean.shape == (64, 64) and len(truth) == 5 and blobs.shape == (1, 2)
    # log-uniform peak SNRs in [5, 50]
    peak = truth["flux"] * astro.delta_e(0.0, truth["sigma"]) ** 2
    assert np.all((peak >= 5.0 - 1e-9) & (peak <= 50.0 + 1e-9))


def test_noise_scale_ignores_sources_filling_the_frame():
    """The noise of detection values is measured below their mode: positive values of sources
    and nebulosity covering 60% of the pixels widen the clipped distribution, not the noise."""
    from cvfs.astro.background import _clipped_stats
    from cvfs.astro.detect import noise_scale

    rng = np.random.default_rng(0)
    noise = 2.0 * rng.standard_normal(100_000)
    assert noise_scale(noise) == pytest.approx(2.0, rel=0.05)
    crowded = noise + np.where(rng.random(noise.size) < 0.6, rng.exponential(8.0, noise.size), 0)
    assert float(_clipped_stats(crowded[None, :], 3.0, 20)[2][0]) > 4.0
    assert noise_scale(crowded) == pytest.approx(2.0, rel=0.15)


def test_noise_tail_width_is_not_moved_by_the_mode():
    """Faint sources on every other pixel move the mode of the values up and widen the spread
    below it; the shape of the negative tail still gives the noise."""
    from cvfs.astro.detect import _below_mode, _tail_width, noise_scale

    rng = np.random.default_rng(1)
    noise = 2.0 * rng.standard_normal(200_000)
    assert _tail_width(noise, 2.0) == pytest.approx(2.0, rel=0.03)
    faint = noise + np.where(rng.random(noise.size) < 0.5, rng.uniform(0, 4.0, noise.size), 0)
    assert _below_mode(faint) > 2.2
    assert noise_scale(faint) == pytest.approx(2.0, rel=0.05)
    # too few negative values: no estimate
    assert np.isnan(_tail_width(noise[:300], 2.0))


def test_source_cap_is_per_fitted_tile():
    """A large footprint may hold max_sources point sources per tile of its fit."""
    from cvfs.astro.objects import source_cap
    from cvfs.astro.settings import resolve_settings

    _, st, _ = resolve_settings(None)
    assert source_cap((20, 28), st) == st.max_sources
    # 57 x 73 px: tiles of 28 px overlapping by 8 -> 3 x 4 tiles
    assert source_cap((57, 73), st) == 12 * st.max_sources
