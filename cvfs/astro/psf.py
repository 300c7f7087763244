"""The pixel-integrated Gaussian point-spread function (SBL paper eq. 64-66), vectorised.

Coordinates: ``x`` is the column, ``y`` the row, and pixel centres sit at integer coordinates
starting at 0, so pixel (row j, column i) covers [i - 1/2, i + 1/2] x [j - 1/2, j + 1/2].
"""

import numpy as np
from scipy.special import erf

__all__ = ["delta_e", "psf_factors", "render_psf"]

_SQRT2 = np.sqrt(2.0)


def delta_e(u, sigma):
    """Integral of a unit Gaussian over a unit pixel: Delta E(u) (eq. 64).

    Parameters
    ----------
    u : array-like
        Pixel centre minus source position, in pixels.
    sigma : array-like
        Gaussian standard deviation in pixels (broadcast against ``u``).

    Returns
    -------
    ndarray
        1/2 [erf((u + 1/2) / (sqrt(2) sigma)) - erf((u - 1/2) / (sqrt(2) sigma))].
    """
    u = np.asarray(u, dtype=np.float64)
    s = _SQRT2 * np.asarray(sigma, dtype=np.float64)
    return 0.5 * (erf((u + 0.5) / s) - erf((u - 0.5) / s))


def psf_factors(shape, x0, y0, sigma):
    """Separable factors of the PSF: rows ``Ey`` and columns ``Ex`` such that
    PSF_n[j, i] = Ey[n, j] * Ex[n, i].

    Parameters
    ----------
    shape : tuple of int
        (height, width) of the image.
    x0, y0, sigma : array-like of shape (n,)
        Source columns, rows and widths.

    Returns
    -------
    Ey : ndarray of shape (n, height)
    Ex : ndarray of shape (n, width)
    """
    x0, y0, sigma = (np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (x0, y0, sigma))
    h, w = shape
    Ey = delta_e(np.arange(h)[None, :] - y0[:, None], sigma[:, None])
    Ex = delta_e(np.arange(w)[None, :] - x0[:, None], sigma[:, None])
    return Ey, Ex


def render_psf(shape, x0, y0, sigma, flux=1.0, background=0.0):
    """Expected counts of point sources (eq. 66): flux * Delta E(x - x0) Delta E(y - y0) + bg.

    Parameters
    ----------
    shape : tuple of int
        (height, width); any shape, not only the 28 x 28 dictionary patch.
    x0, y0, sigma : float or array-like of shape (n,)
        Source columns, rows and PSF widths (pixels).
    flux : float or array-like of shape (n,)
        Total counts of each source (the PSF integrates to 1 over the infinite plane).
    background : float
        Constant background added once.

    Returns
    -------
    ndarray of shape ``shape``
        The sum of the sources plus the background.

    References
    ----------
    Jiang & Chen, eq. (64)-(67); Smith et al., Nat. Methods 7 (2010) for the integrated PSF.
    """
    Ey, Ex = psf_factors(shape, x0, y0, sigma)
    flux = np.broadcast_to(np.asarray(flux, dtype=np.float64), (Ey.shape[0],))
    return np.einsum("n,nh,nw->hw", flux, Ey, Ex) + background
