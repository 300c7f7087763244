"""The PSF width measured on the frame (``psf_sigma="auto"``) and multi-part extended objects."""

import logging

import numpy as np
import pytest

from cvfs import astro


def _stars(sigma, n=40, shape=(128, 128), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(8, shape[1] - 8, n)
    y = rng.uniform(8, shape[0] - 8, n)
    flux = np.exp(rng.uniform(np.log(300.0), np.log(5000.0), n))
    img = astro.render_psf(shape, x, y, sigma, flux, background=20.0)
    return img + rng.standard_normal(shape), x, y


def test_auto_width_measures_the_frame_psf():
    img, x, y = _stars(0.9, n=30, shape=(96, 96))
    res = astro.localise_and_denoise(img, psf_sigma="auto")
    lo, hi = res.psf_sigma
    # the range is centred (geometrically) on the stars' width
    assert abs(np.sqrt(lo * hi) - 0.9) < 0.05 and hi / lo == pytest.approx(1.5625)
    cat = res.catalogue
    assert np.median(cat["sigma"]) == pytest.approx(0.9, abs=0.05)
    # the default range (1, 2 px) cannot fit these stars' width
    fixed = astro.localise_and_denoise(img).catalogue
    assert np.median(fixed["sigma"]) > 0.95
    d = np.hypot(cat["x"][:, None] - x, cat["y"][:, None] - y).min(axis=0)
    assert np.mean(d < 1) >= np.mean(np.hypot(fixed["x"][:, None] - x,
                                              fixed["y"][:, None] - y).min(axis=0) < 1)


def test_auto_width_is_the_stellar_locus_not_the_galaxies():
    """Bright compact galaxies (width 2.2 px, as many of the bright isolated sources as the
    0.9 px stars) do not widen the measured PSF: the width is the median of the narrowest
    sources' locus, not of all of them (about 1.5 px here)."""
    img, _, _ = _stars(0.9, n=16, shape=(160, 160), seed=4)
    rng = np.random.default_rng(5)
    gx, gy = rng.uniform(12, 148, 10), rng.uniform(12, 148, 10)
    img = img + astro.render_psf(img.shape, gx, gy, 2.2, np.full(10, 3000.0))
    lo, hi = astro.localise_and_denoise(img, psf_sigma="auto").psf_sigma
    assert abs(np.sqrt(lo * hi) - 0.9) < 0.1


def test_auto_width_without_stars_keeps_the_default_range(caplog):
    img, _, _ = _stars(1.3, n=2, shape=(64, 64))
    with caplog.at_level(logging.WARNING, logger="cvfs.astro.localise"):
        res = astro.localise_and_denoise(img, psf_sigma="auto")
    assert res.psf_sigma == (1.0, 2.0)
    assert "fewer than 5" in caplog.text
    assert len(res.catalogue) == 2


def test_psf_sigma_string_other_than_auto_is_refused():
    with pytest.raises(ValueError, match="psf_sigma must be .*'auto'"):
        astro.localise(np.random.default_rng(0).standard_normal((32, 32)), psf_sigma="wide")


def test_cli_psf_sigma_auto_and_bad_values(tmp_path, capsys):
    pytest.importorskip("astropy")
    from cvfs.astro.readers import read_catalogue, write_fits
    from cvfs.cli import main

    img, x, y = _stars(0.9, n=20, shape=(80, 80))
    p = tmp_path / "stars.fits"
    write_fits(p, img)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet",
                 "--psf-sigma", "auto"]) == 0
    cat = astro.leaves(read_catalogue(out / "catalogue.csv"))
    assert np.median(cat["sigma"]) == pytest.approx(0.9, abs=0.05)
    for bad in (["auto", "2"], ["1", "2", "3"]):
        assert main(["astro", "localise", str(p), "--out", str(out), "--quiet",
                     "--psf-sigma", *bad]) != 0
        assert "--psf-sigma takes one width" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["astro", "localise", str(p), "--psf-sigma", "wide"])
