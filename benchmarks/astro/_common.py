"""Shared helpers of the astronomy benchmarks: scenes, peer methods, result files."""

import numpy as np

from cvfs.astro import CATALOGUE_DTYPE, make_scene


def scenes(n, seed0=1000, **kw):
    """n synthetic scenes (image, clean, truth) with seeds seed0, seed0 + 1, ..."""
    return [make_scene(random_state=seed0 + i, **kw) for i in range(n)]



def _cat(x, y, sigma, flux):
    out = np.zeros(len(x), CATALOGUE_DTYPE)
    out["x"], out["y"], out["sigma"], out["flux"] = x, y, sigma, flux
    return out


def run_sep(image, thresh=3.0):
    """sep (SExtractor): background, extract at ``thresh`` sigma, windowed positions."""
    import sep

    data = np.ascontiguousarray(image, dtype=np.float64)
    bkg = sep.Background(data, bw=16, bh=16)
    sub = data - bkg.back()
    objs = sep.extract(sub, thresh, err=bkg.globalrms, minarea=3)
    if len(objs) == 0:
        return _cat([], [], [], [])
    x, y = objs["x"], objs["y"]
    try:
        x, y, _ = sep.winpos(sub, x, y, np.full(len(x), 1.5))
    except Exception:  # noqa: BLE001 - winpos may fail on edge objects: keep isophotal centroids
        pass
    return _cat(x, y, np.sqrt(objs["a"] * objs["b"]), objs["flux"])


def _bkg_rms(image):
    """Sigma-clipped median background and the wavelet-MAD noise (the same estimator cvfs uses;
    the clipped std is inflated by the sources in these small crowded images)."""
    from astropy.stats import sigma_clipped_stats
    from skimage.restoration import estimate_sigma

    _, med, _ = sigma_clipped_stats(image, sigma=3.0)
    return med, float(estimate_sigma(image))


# Peer settings, chosen on tuning scenes (seeds 9000-9014, never the evaluation scenes) by F1:
# DAOStarFinder at 4 sigma, FWHM 2.35 px, with photutils 3 defaults that would otherwise drop
# sources overridden: min_separation (its default grows with the FWHM and suppressed ~25% of the
# sources even at >= 5 px separation) and the sharpness/roundness ranges (broad sources, sigma up to
# 2 px, fall below the default sharpness 0.2). Non-iterative PSF photometry
# (IterativePSFPhotometry raised inside photutils 3.0 on these scenes).


def _dao_finder(std, thresh, fwhm):
    from photutils.detection import DAOStarFinder

    return DAOStarFinder(thresh * std, fwhm, min_separation=2.0, sharpness_range=(0.0, 2.0),
                         roundness_range=(-2.0, 2.0))


def run_dao(image, fwhm=2.3548, thresh=4.0):
    """photutils DAOStarFinder at ``thresh`` x noise sigma."""
    med, std = _bkg_rms(image)
    tab = _dao_finder(std, thresh, fwhm)(image - med)
    if tab is None:
        return _cat([], [], [], [])
    return _cat(tab["x_centroid"], tab["y_centroid"], np.full(len(tab), fwhm / 2.3548),
                tab["flux"])


def run_psf_photometry(image, sigma=1.5, fit_sigma=True, fwhm=2.3548, thresh=4.0):
    """photutils PSFPhotometry: DAOStarFinder detections, integrated Gaussian PRF fit
    (sigma free per source when ``fit_sigma``), local background subtracted globally."""
    from photutils.psf import CircularGaussianSigmaPRF, PSFPhotometry, SourceGrouper

    med, std = _bkg_rms(image)
    model = CircularGaussianSigmaPRF(sigma=sigma)
    model.sigma.fixed = not fit_sigma
    if fit_sigma:
        model.sigma.bounds = (0.5, 3.0)
    finder = _dao_finder(std, thresh, fwhm)
    phot = PSFPhotometry(model, (7, 7), finder=finder, grouper=SourceGrouper(min_separation=6),
                         aperture_radius=3)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = phot(image - med, error=np.full(image.shape, std))
    if tab is None or len(tab) == 0:
        return _cat([], [], [], [])
    sig = tab["sigma_fit"] if "sigma_fit" in tab.colnames else np.full(len(tab), sigma)
    return _cat(tab["x_fit"], tab["y_fit"], sig, tab["flux_fit"])
