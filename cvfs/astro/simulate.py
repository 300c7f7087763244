"""Synthetic star fields: point sources with the integrated Gaussian PSF (eq. 66) plus noise."""

import numpy as np

from cvfs.astro.psf import render_psf
from cvfs.base import check_random_state

__all__ = ["CATALOGUE_DTYPE", "make_scene"]

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
