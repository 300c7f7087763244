"""Fast path of the point fit: isolated sources fitted as one PSF, agreeing with the SBL path;
blends and ambiguous objects still fitted by the screened SBL."""

import importlib

import numpy as np
import pytest

from cvfs import astro
from cvfs.astro.evaluate import match_sources, position_crlb


def _spy_sbl(monkeypatch):
    pointfit = importlib.import_module("cvfs.astro.pointfit")
    calls = []
    real = pointfit.sbl_fit

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pointfit, "sbl_fit", spy)
    return calls


def test_fast_path_agrees_with_the_sbl_path_on_isolated_sources(monkeypatch):
    img, _, truth = astro.make_scene((96, 96), n_sources=12, psf_sigma=(1.0, 2.0),
                                     snr=(8.0, 40.0), min_separation=14.0, border=8.0,
                                     random_state=5)
    calls = _spy_sbl(monkeypatch)
    fast = astro.localise(img, random_state=0)
    assert len(calls) == 0  # every object is an isolated star: no SBL fit
    slow = astro.localise(img, random_state=0, fast_path=False)
    assert len(calls) > 0
    assert len(fast) == len(slow) == len(truth)
    fi, si = match_sources(fast, slow).T
    assert len(fi) == len(truth)
    ti = match_sources(fast[fi], truth)[:, 1]
    crlb = position_crlb(truth[ti], img.shape, 1.0)
    d = np.hypot(fast["x"][fi] - slow["x"][si], fast["y"][fi] - slow["y"][si])
    assert np.all(d <= 0.05 * crlb)
    np.testing.assert_allclose(fast["flux"][fi], slow["flux"][si], rtol=1e-3)
    np.testing.assert_allclose(fast["x_err"][fi], slow["x_err"][si], rtol=1e-2)
    np.testing.assert_allclose(fast["flux_err"][fi], slow["flux_err"][si], rtol=1e-2)
    np.testing.assert_array_equal(fast["flags"][fi], slow["flags"][si])


def test_unresolved_blend_goes_to_the_sbl_fit(monkeypatch):
    # two stars 2.2 px apart: one detection peak, and one PSF leaves a residual peak (an
    # object of one tile: a larger one would be fitted from its detection peaks)
    xs, ys, fl = np.array([20.0, 22.2]), np.array([20.0, 20.0]), np.array([2000.0, 1500.0])
    img = astro.render_psf((40, 40), xs, ys, 1.1, fl, background=10.0)
    img = img + np.random.default_rng(2).standard_normal(img.shape)
    calls = _spy_sbl(monkeypatch)
    cat = astro.localise(img, random_state=0, tile=40)
    assert len(calls) > 0 and len(cat) == 2
    truth = np.zeros(2, astro.CATALOGUE_DTYPE)
    truth["x"], truth["y"] = xs, ys
    assert astro.detection_scores(cat, truth)["f1"] == 1.0


def test_residual_peak_is_in_noise_units():
    from cvfs.astro.fastfit import residual_peak

    rng = np.random.default_rng(0)
    noise = rng.standard_normal((40, 40))
    region = np.ones((40, 40), bool)
    assert residual_peak(noise, np.ones((40, 40)), region, 1.0, 2.0) < 5.0
    star = astro.render_psf((40, 40), 20.0, 20.0, 1.5, 200.0)
    # a unit-norm PSF's correlation with flux * PSF is flux * ||PSF||
    expect = 200.0 * np.sqrt(np.sum(astro.render_psf((40, 40), 20.0, 20.0, 1.5, 1.0) ** 2))
    assert residual_peak(star, np.ones((40, 40)), region, 1.5, 1.5) == pytest.approx(expect,
                                                                                    rel=1e-6)


def test_model_tolerance_accepts_a_bright_star_whose_psf_is_not_gaussian(monkeypatch):
    # a bright star with a core and a wider wing: one Gaussian leaves structured residuals
    from cvfs.astro import fastfit

    img = astro.render_psf((48, 48), [24.3, 24.3], [23.6, 23.6], [1.2, 2.6], [6000.0, 1500.0],
                           background=5.0)
    img = img + np.random.default_rng(1).standard_normal(img.shape)
    reasons = []
    real = fastfit._fit

    def spy(*a, **k):
        out = real(*a, **k)
        reasons.append(out[2])
        return out

    monkeypatch.setattr(fastfit, "_fit", spy)
    astro.localise(img, random_state=0)
    assert reasons[0] == "residual peak"  # exact-model acceptance: the residuals are not noise
    reasons.clear()
    cat = astro.localise(img, random_state=0, model_tolerance=0.2)
    assert reasons[0] is None and len(cat) == 1  # the star's object took the fast path
    assert abs(cat["x"][0] - 24.3) < 0.05 and abs(cat["y"][0] - 23.6) < 0.05
    with pytest.raises(ValueError, match="model_tolerance"):
        astro.localise(img, model_tolerance=1.5)
