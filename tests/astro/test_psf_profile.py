"""The fitted PSF (``psf="fitted"``): mixture profiles, their dictionary and compiled fit, and a
Moffat-PSF field fitted with one row per star where the integrated Gaussian is not enough."""

import numpy as np
import pytest
from scipy.spatial import cKDTree

from cvfs import astro
from cvfs.astro._lm import chi2_of, normal_equations
from cvfs.astro.dictionary import ProfileDictionary, PSFDictionary, sample_atoms
from cvfs.astro.psf import GAUSSIAN, PSFProfile

PROFILE = PSFProfile((0.5, 0.3, 0.2), (0.8, 1.3, 2.5))


def test_profile_validation():
    with pytest.raises(ValueError, match="beta > 1"):
        astro.render_moffat((8, 8), [4.0], [4.0], [1.0], beta=1.0)
    with pytest.raises(ValueError, match="same, nonzero length"):
        PSFProfile((0.5, 0.5), (1.0,))
    with pytest.raises(ValueError, match="sum to 1"):
        PSFProfile((0.5, 0.6), (1.0, 2.0))
    assert PSFProfile().is_gaussian and GAUSSIAN.is_gaussian and not PROFILE.is_gaussian
    with pytest.raises(ValueError, match="psf must be one of 'gaussian', 'fitted'"):
        astro.localise(np.random.default_rng(0).normal(size=(32, 32)), psf="moffat")


def test_profile_render_integrates_to_flux():
    img = PROFILE.render((61, 61), 30.2, 29.7, 1.5, flux=3.0)
    assert img.sum() == pytest.approx(3.0, rel=1e-6)
    norms = PROFILE.norms((61, 61), [30.2], [29.7], [1.5])
    assert norms[0] == pytest.approx(np.sqrt(np.sum((img / 3.0) ** 2)), rel=1e-9)


def test_profile_dictionary_is_its_dense_matrix():
    P = sample_atoms((14, 12), 300, (1, 2), random_state=0)
    d = ProfileDictionary((14, 12), P, PROFILE)
    dense = np.stack([PROFILE.render((14, 12), *p) for p in P], -1).reshape(-1, len(P))
    dense /= np.linalg.norm(dense, axis=0)
    M = d.matrix()
    np.testing.assert_allclose(M, dense, atol=1e-12)
    R = np.random.default_rng(1).normal(size=(168, 3))
    np.testing.assert_allclose(d.rmatvec(R), M.T @ R, atol=1e-12)
    np.testing.assert_allclose(d.rmatvec(R[:, 0]), M.T @ R[:, 0], atol=1e-12)
    idx = np.array([3, 7, 50])
    np.testing.assert_allclose(d.gram_columns(idx), M.T @ M[:, idx], atol=1e-12)
    np.testing.assert_allclose(d.subset(idx).matrix(), M[:, idx], atol=0)
    c = d.crop((10, 9))
    dense = np.stack([PROFILE.render((10, 9), *p) for p in c.params], -1).reshape(-1, c.shape[1])
    np.testing.assert_allclose(c.matrix(), dense / np.linalg.norm(dense, axis=0), atol=1e-12)
    # the one-component profile is the integrated Gaussian dictionary
    np.testing.assert_allclose(ProfileDictionary((14, 12), P, GAUSSIAN).matrix(),
                               PSFDictionary((14, 12), P).matrix(), atol=1e-14)


def test_mixture_normal_equations_match_finite_differences():
    h, w = 15, 17
    p = np.array([7.3, 6.8, 1.4, 500.0, 10.2, 8.1, 1.6, 300.0, 0.7])
    rng = np.random.default_rng(2)
    wt = rng.uniform(0.5, 1.5, (h, w))
    src = p[:-1].reshape(2, 4)
    img = PROFILE.render((h, w), src[:, 0], src[:, 1], src[:, 2], src[:, 3], 0.4) \
        + rng.normal(0, 1, (h, w))
    amp, ratio = PROFILE.arrays()
    chi, A, g = normal_equations(img, wt, p, amp, ratio)
    assert chi == pytest.approx(chi2_of(img, wt, p, amp, ratio), rel=1e-12)
    num = np.empty(p.size)
    for i in range(p.size):
        d = np.zeros(p.size)
        d[i] = 1e-5 * max(1.0, abs(p[i]))
        num[i] = (chi2_of(img, wt, p + d, amp, ratio) - chi2_of(img, wt, p - d, amp, ratio)) \
            / (2 * d[i])
    np.testing.assert_allclose(2 * g, num, rtol=1e-4, atol=1e-3)


def _match(cat, pos):
    pts = cat[~cat["extended"]]
    d, j = cKDTree(np.column_stack([pts["x"], pts["y"]])).query(pos)
    return pts, d < 1.0, j


@pytest.mark.slow
def test_gaussian_psf_on_a_moffat_field():
    img, pos, _ = astro.make_moffat_field()
    gauss = astro.localise(img)
    # the integrated Gaussian cannot represent the wings (wider than any Gaussian of the range):
    # it takes stars for extended objects or splits them into a core and a halo source, so far
    # from one point-source row per star
    assert gauss["extended"].sum() >= 10
    assert len(gauss) - len(pos) >= 10
    assert _match(gauss, pos)[1].sum() < 0.8 * len(pos)


def test_fitted_psf_on_a_moffat_field():
    img, pos, flux = astro.make_moffat_field()
    res = astro.localise_and_denoise(img, psf="fitted")
    cat = res.catalogue
    assert not res.psf.is_gaussian and res.psf_stars >= 10
    # the fitted profile gives one point-source row per star
    assert len(cat) == len(pos) and not cat["extended"].any()
    pts, ok, j = _match(cat, pos)
    assert ok.all() and len(set(j)) == len(pos)
    dx, dy = pts["x"][j] - pos[:, 0], pts["y"][j] - pos[:, 1]
    assert abs(dx.mean()) < 0.005 and abs(dy.mean()) < 0.005
    assert np.sqrt(np.mean(dx**2 + dy**2)) < 0.03
    ratio = pts["flux"][j] / flux
    assert abs(np.median(ratio) - 1) < 0.01
    # the fitted profile passed back, with its width range, fits the frame the same way
    again = astro.localise(img, psf=res.psf, psf_sigma=res.psf_sigma)
    assert len(again) == len(pos) and not again["extended"].any()
    assert _match(again, pos)[1].all()


def test_fitted_psf_needs_stars(caplog):
    img, _, _ = astro.make_moffat_field()
    with caplog.at_level("WARNING", logger="cvfs.astro.psfmodel"):
        res = astro.localise_and_denoise(img[:40, :40], psf="fitted")
    assert res.psf.is_gaussian and res.psf_stars < 5 and res.psf_sigma == (1.0, 2.0)
    assert "the Gaussian PSF is used" in caplog.text
