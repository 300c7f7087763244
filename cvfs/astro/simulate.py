"""Synthetic star fields: point sources with the integrated Gaussian PSF (eq. 66) plus noise, and
artificial stars added to a real frame."""

import numpy as np

from cvfs.astro.psf import render_psf
from cvfs.base import check_random_state

__all__ = ["CATALOGUE_DTYPE", "inject_stars", "make_scene"]

#: fields of a source catalogue (x = column, y = row, pixel centres at integer coordinates)
CATALOGUE_DTYPE = np.dtype([("x", "f8"), ("y", "f8"), ("sigma", "f8"), ("flux", "f8")])


def make_scene(shape=(28, 28), n_sources=(4, 8), psf_sigma=(1.0, 2.0), snr=(5.0, 50.0), *,
               noise_sigma=1.0, background=10.0, min_separation=2.0, border=1.0,
               random_state=None):
    """A noisy image of point sources with known positions, widths and fluxes.

    Parameters
    ----------
    shape : tuple of int
        (height, width).
    n_sources : int or (int, int)
        Number of sources, or an inclusive range to draw it from.
    psf_sigma : float or (float, float)
        PSF width or its range (uniform).
    snr : float or (float, float)
        Peak signal-to-noise ratio of each source: peak pixel value above background divided by
        ``noise_sigma`` (drawn uniformly in the range).
    noise_sigma : float
        Standard deviation of the additive Gaussian noise.
    background : float
        Constant sky level.
    min_separation : float
        Minimum distance between sources (pixels), so that "within 1 px" matching is unambiguous.
    border : float
        Sources lie at least this far inside the image edges (pixel centres).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    image : ndarray of shape ``shape``
        Noisy image.
    clean : ndarray of shape ``shape``
        Noise-free image (background included).
    truth : structured ndarray of dtype :data:`CATALOGUE_DTYPE`
    """
    rng = check_random_state(random_state)
    h, w = shape
    lo, hi = np.broadcast_to(np.asarray(n_sources), (2,))
    k = int(rng.integers(lo, hi + 1))
    pos = []
    while len(pos) < k:
        p = rng.uniform([border, border], [w - 1 - border, h - 1 - border])
        if all(np.hypot(*(p - q)) >= min_separation for q in pos):
            pos.append(p)
    pos = np.array(pos).reshape(-1, 2)
    s_lo, s_hi = np.broadcast_to(np.asarray(psf_sigma, float), (2,))
    sig = rng.uniform(s_lo, s_hi, k)
    r_lo, r_hi = np.broadcast_to(np.asarray(snr, float), (2,))
    peak_snr = rng.uniform(r_lo, r_hi, k)
    # peak of a centred unit-flux integrated PSF
    from cvfs.astro.psf import delta_e

    peak1 = delta_e(0.0, sig) ** 2
    flux = peak_snr * noise_sigma / peak1
    truth = np.zeros(k, CATALOGUE_DTYPE)
    truth["x"], truth["y"], truth["sigma"], truth["flux"] = pos[:, 0], pos[:, 1], sig, flux
    clean = render_psf(shape, pos[:, 0], pos[:, 1], sig, flux, background)
    image = clean + noise_sigma * rng.standard_normal(shape)
    return image, clean, truth


def inject_stars(image, x, y, flux, sigma, *, gain=None, random_state=None):
    """Add artificial point sources with a Gaussian PSF to a frame (artificial-star tests).

    As DAOPHOT's ADDSTAR: the frame keeps its own sky and noise, and each star is the
    pixel-integrated Gaussian PSF (:func:`cvfs.astro.psf.render_psf`) scaled to its flux, with the
    star's own photon noise when ``gain`` is given.

    Parameters
    ----------
    image : array-like of shape (height, width)
        The frame; NaN pixels stay NaN.
    x, y : array-like of shape (n,)
        Star columns and rows (pixel centres at integer coordinates from 0).
    flux : float or array-like of shape (n,)
        Total counts of each star, in the frame's units.
    sigma : float or array-like of shape (n,)
        PSF width (pixels), e.g. the frame's PSF measured on its bright isolated stars.
    gain : float, optional
        Electrons per frame unit: the added counts get Poisson noise (``poisson(gain * model) /
        gain``); None adds the noise-free model.
    random_state : None, int or numpy.random.Generator
        Seeds the Poisson noise (unused without ``gain``).

    Returns
    -------
    out : ndarray of float64, shaped like ``image``
        The frame with the stars added.
    truth : structured ndarray of dtype :data:`CATALOGUE_DTYPE`
        x, y, sigma and flux of the added stars.

    Raises
    ------
    ValueError
        ``image`` is not 2-D, the star arrays differ in length, a flux is negative or not finite,
        a width is not positive, or ``gain`` is not positive.
    """
    img = np.asarray(image, dtype=np.float64)
    if img.ndim != 2:
        raise ValueError(f"inject_stars: image must be 2-D, got shape {img.shape}")
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    y = np.atleast_1d(np.asarray(y, dtype=np.float64))
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"inject_stars: x and y must be 1-D of one length, got {x.shape} and "
                         f"{y.shape}")
    n = len(x)
    flux = np.broadcast_to(np.asarray(flux, dtype=np.float64), (n,)).copy()
    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,)).copy()
    if not (np.all(np.isfinite(flux)) and np.all(flux >= 0)):
        raise ValueError("inject_stars: fluxes must be finite and >= 0")
    if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
        raise ValueError("inject_stars: sigma must be finite and > 0")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("inject_stars: positions must be finite")
    truth = np.zeros(n, CATALOGUE_DTYPE)
    truth["x"], truth["y"], truth["sigma"], truth["flux"] = x, y, sigma, flux
    if n == 0:
        return img.copy(), truth
    model = render_psf(img.shape, x, y, sigma, flux)
    if gain is not None:
        if not (np.isfinite(gain) and gain > 0):
            raise ValueError(f"inject_stars: gain must be finite and > 0, got {gain}")
        rng = check_random_state(random_state)
        model = rng.poisson(gain * model) / gain
    return img + model, truth
