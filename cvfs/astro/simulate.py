"""Synthetic star fields: point sources with the integrated Gaussian PSF (eq. 66) plus noise.

:func:`make_scene` draws point sources on a flat sky; :func:`make_field` adds a sky gradient and
extended elliptical blobs, the structures a detection stage must not take for sources;
:func:`inject_stars` adds artificial stars to a real frame; :func:`render_moffat` renders stars of
a Moffat PSF and :func:`make_moffat_field` a grid of them with noise.
"""

import numpy as np

from cvfs.astro.psf import render_psf
from cvfs.base import check_random_state

__all__ = ["CATALOGUE_DTYPE", "inject_stars", "make_field", "make_moffat_field", "make_scene",
           "render_moffat"]

#: fields of a source catalogue (x = column, y = row, pixel centres at integer coordinates)
CATALOGUE_DTYPE = np.dtype([("x", "f8"), ("y", "f8"), ("sigma", "f8"), ("flux", "f8")])


def make_scene(shape=(28, 28), n_sources=(4, 8), psf_sigma=(1.0, 2.0), snr=(5.0, 50.0), *,
               noise_sigma=1.0, background=10.0, min_separation=2.0, border=1.0,
               snr_scale="linear", random_state=None):
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
        ``noise_sigma`` (drawn in the range, uniformly in ``snr_scale``).
    noise_sigma : float
        Standard deviation of the additive Gaussian noise.
    background : float
        Constant sky level.
    min_separation : float
        Minimum distance between sources (pixels), so that "within 1 px" matching is unambiguous.
    border : float
        Sources lie at least this far inside the image edges (pixel centres).
    snr_scale : {"linear", "log"}
        Peak SNRs uniform in the range, or uniform in its logarithm (as many faint as bright
        sources per octave, closer to the counts of real sky).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    image : ndarray of shape ``shape``
        Noisy image.
    clean : ndarray of shape ``shape``
        Noise-free image (background included).
    truth : structured ndarray of dtype :data:`CATALOGUE_DTYPE`

    Raises
    ------
    ValueError
        If ``snr_scale`` is not "linear" or "log".
    """
    if snr_scale not in ("linear", "log"):
        raise ValueError(f"snr_scale must be 'linear' or 'log'; got {snr_scale!r}")
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
    if snr_scale == "log":
        peak_snr = np.exp(rng.uniform(np.log(r_lo), np.log(r_hi), k))
    else:
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


def make_field(shape=(256, 256), n_sources=110, psf_sigma=(1.0, 2.0), snr=(5.0, 50.0), *,
               snr_scale="log", noise_sigma=1.0, background=10.0, gradient=16.0, n_blobs=2,
               blob_sigma=(5.0, 9.0), blob_peak=(8.0, 15.0), min_separation=2.0, border=3.0,
               random_state=None):
    """A sky field: point sources (:func:`make_scene`) on a sky gradient with extended blobs.

    Parameters
    ----------
    shape, n_sources, psf_sigma, snr, snr_scale, noise_sigma, background, min_separation, border
        As in :func:`make_scene` (here the peak SNRs are log-uniform by default).
    gradient : float
        Rise of the sky across the frame in units of ``noise_sigma``: a plane
        ``gradient * noise_sigma * (0.6 x / width + 0.4 y / height)``.
    n_blobs : int
        Extended elliptical Gaussian blobs (axis-aligned), centred at least 20 px inside the
        frame (or in its middle when it is smaller than 40 px).
    blob_sigma : (float, float)
        Range of the blobs' Gaussian widths along each axis (pixels, uniform).
    blob_peak : (float, float)
        Range of the blobs' peak values in units of ``noise_sigma`` (uniform).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    image : ndarray of shape ``shape``
        Noisy image.
    clean : ndarray of shape ``shape``
        Noise-free image (sky and blobs included).
    truth : structured ndarray of dtype :data:`CATALOGUE_DTYPE`
        The point sources.
    blobs : ndarray of shape (n_blobs, 2)
        Blob centres (x, y).
    """
    rng = check_random_state(random_state)
    image, clean, truth = make_scene(shape, n_sources, psf_sigma, snr, noise_sigma=noise_sigma,
                                     background=background, min_separation=min_separation,
                                     border=border, snr_scale=snr_scale, random_state=rng)
    h, w = shape
    yy, xx = np.mgrid[:h, :w]
    sky = gradient * noise_sigma * (0.6 * xx / w + 0.4 * yy / h)
    lo = np.minimum(20.0, [(w - 1) / 2.0, (h - 1) / 2.0])
    blobs = rng.uniform(lo, [w - 1 - lo[0], h - 1 - lo[1]], (int(n_blobs), 2))
    for bx, by in blobs:
        sx, sy = rng.uniform(*blob_sigma, 2)
        sky = sky + rng.uniform(*blob_peak) * noise_sigma * np.exp(
            -0.5 * (((xx - bx) / sx) ** 2 + ((yy - by) / sy) ** 2))
    return image + sky, clean + sky, truth, blobs


def render_moffat(shape, x, y, flux, fwhm=3.0, beta=3.5, *, radius=25, supersample=5):
    """Point sources of a pixel-integrated Moffat PSF (a ground-based PSF with power-law wings,
    unlike the integrated Gaussian of :func:`cvfs.astro.psf.render_psf`).

    Parameters
    ----------
    shape : tuple of int
        (height, width).
    x, y, flux : array-like of shape (n,)
        Columns, rows and total fluxes (the profile integrates to 1 over the plane).
    fwhm : float
        Full width at half maximum in pixels.
    beta : float
        Moffat exponent (> 1): (1 + r^2 / alpha^2)^-beta; smaller beta, broader wings.
    radius : int
        Each source is drawn within this many pixels of its centre.
    supersample : int
        Sub-pixel samples per axis integrating each pixel.

    Returns
    -------
    ndarray of shape ``shape``

    Raises
    ------
    ValueError
        If ``beta`` <= 1 or ``fwhm`` <= 0.

    References
    ----------
    Moffat 1969, A&A 3, 455; Trujillo et al. 2001, MNRAS 328, 977 (FWHM = 2 alpha
    sqrt(2^(1/beta) - 1)).
    """
    if not beta > 1 or not fwhm > 0:
        raise ValueError(f"render_moffat needs beta > 1 and fwhm > 0; got beta={beta!r}, "
                         f"fwhm={fwhm!r}")
    h, w = shape
    alpha = fwhm / (2.0 * np.sqrt(2.0 ** (1.0 / beta) - 1.0))
    x, y, flux = (np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (x, y, flux))
    o = (np.arange(supersample) + 0.5) / supersample - 0.5
    out = np.zeros((h, w))
    for xs, ys, f in zip(x, y, flux, strict=True):
        r0, r1 = max(int(ys) - radius, 0), min(int(ys) + radius + 1, h)
        c0, c1 = max(int(xs) - radius, 0), min(int(xs) + radius + 1, w)
        if r0 >= r1 or c0 >= c1:
            continue
        yy = (np.arange(r0, r1)[:, None] + o[None, :] - ys).ravel()
        xx = (np.arange(c0, c1)[:, None] + o[None, :] - xs).ravel()
        r2 = yy[:, None] ** 2 + xx[None, :] ** 2
        prof = (beta - 1.0) / (np.pi * alpha**2) * (1.0 + r2 / alpha**2) ** (-beta)
        prof = prof.reshape(r1 - r0, supersample, c1 - c0, supersample).mean(axis=(1, 3))
        out[r0:r1, c0:c1] += f * prof
    return out


def make_moffat_field(size=128, fwhm=3.2, beta=3.5, *, random_state=0):
    """A square field of Moffat-PSF stars on a jittered 17 px grid with noise.

    Stars 12 px or more from the edges, positions jittered by up to 2 px, fluxes log-uniform in
    [400, 12000], background 10, unit Gaussian noise: a field whose PSF is not a Gaussian, for
    testing PSF models fitted to the frame.

    Returns
    -------
    image : ndarray (size, size)
    positions : ndarray (n, 2)
        x (column), y (row) of each star.
    flux : ndarray (n,)
    """
    rng = check_random_state(random_state)
    g = np.arange(12, size - 11, 17.0)
    pos = np.array([(x, y) for x in g for y in g]) + rng.uniform(-2, 2, (g.size**2, 2))
    flux = np.exp(rng.uniform(np.log(400), np.log(12000), len(pos)))
    img = render_moffat((size, size), pos[:, 0], pos[:, 1], flux, fwhm, beta)
    return img + 10.0 + rng.normal(0, 1.0, img.shape), pos, flux
