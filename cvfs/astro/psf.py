"""Point-spread functions: the pixel-integrated Gaussian (SBL paper eq. 64-66) and mixtures of
them sharing a centre (:class:`PSFProfile`, the profile fitted to a frame's stars by
:func:`cvfs.astro.psfmodel.fit_profile`), vectorised.

Coordinates: ``x`` is the column, ``y`` the row, and pixel centres sit at integer coordinates
starting at 0, so pixel (row j, column i) covers [i - 1/2, i + 1/2] x [j - 1/2, j + 1/2].
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import erf

__all__ = ["GAUSSIAN", "PSFProfile", "delta_e", "psf_factors", "render_psf"]

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


@dataclass(frozen=True)
class PSFProfile:
    """A radially symmetric PSF: a mixture of pixel-integrated Gaussians sharing a centre.

    A source of width parameter ``sigma`` and flux ``f`` is
    f * sum_c amp[c] * DeltaE(x - x0, ratio[c] sigma) DeltaE(y - y0, ratio[c] sigma); the
    amplitudes sum to 1, so ``f`` is the total flux. A Gaussian core with broader wings (a
    Moffat-like PSF, as on ground-based frames) is a few components of increasing ratio.

    Parameters
    ----------
    amp : tuple of float
        Component amplitudes (positive, summing to 1).
    ratio : tuple of float
        Component widths in units of the source's width parameter (positive).

    Attributes
    ----------
    is_gaussian : bool
        True for the single integrated Gaussian (:data:`GAUSSIAN`).
    """

    amp: tuple = (1.0,)
    ratio: tuple = (1.0,)

    def __post_init__(self):
        amp = tuple(float(a) for a in np.atleast_1d(self.amp))
        ratio = tuple(float(r) for r in np.atleast_1d(self.ratio))
        if len(amp) != len(ratio) or not amp:
            raise ValueError(f"PSFProfile amp and ratio must have the same, nonzero length; got "
                             f"{len(amp)} and {len(ratio)}")
        if not all(np.isfinite(amp + ratio)) or min(amp) <= 0 or min(ratio) <= 0 \
                or abs(sum(amp) - 1.0) > 1e-6:
            raise ValueError(f"PSFProfile amplitudes must be positive and sum to 1 and ratios "
                             f"positive; got amp={amp}, ratio={ratio}")
        object.__setattr__(self, "amp", amp)
        object.__setattr__(self, "ratio", ratio)

    @property
    def is_gaussian(self):
        return self.amp == (1.0,) and self.ratio == (1.0,)

    def arrays(self):
        """(amp, ratio) as float64 arrays, for the compiled kernels."""
        return np.array(self.amp), np.array(self.ratio)

    def factors(self, shape, x0, y0, sigma):
        """Per-component separable factors: ``Ey`` (n, m, height) with the amplitudes folded
        in and ``Ex`` (n, m, width), such that PSF_n = sum_c Ey[n, c, :, None] * Ex[n, c]."""
        x0, y0, sigma = (np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (x0, y0, sigma))
        amp, ratio = self.arrays()
        s = (sigma[:, None] * ratio[None]).ravel()
        n, m = sigma.size, ratio.size
        Ey, Ex = psf_factors(shape, np.repeat(x0, m), np.repeat(y0, m), s)
        h, w = shape
        return Ey.reshape(n, m, h) * amp[None, :, None], Ex.reshape(n, m, w)

    def norms(self, shape, x0, y0, sigma):
        """Euclidean norm over the pixels of ``shape`` of each unit-flux source (n,)."""
        Ey, Ex = self.factors(shape, x0, y0, sigma)
        gy = np.einsum("nah,nbh->nab", Ey, Ey)
        gx = np.einsum("naw,nbw->nab", Ex, Ex)
        return np.sqrt(np.maximum(np.einsum("nab,nab->n", gy, gx), 0.0))

    def render(self, shape, x0, y0, sigma, flux=1.0, background=0.0):
        """Expected counts of sources of this profile plus a constant (as :func:`render_psf`).

        Parameters
        ----------
        shape : tuple of int
        x0, y0, sigma, flux : float or array-like of shape (n,)
        background : float

        Returns
        -------
        ndarray of shape ``shape``
        """
        Ey, Ex = self.factors(shape, x0, y0, sigma)
        flux = np.broadcast_to(np.asarray(flux, dtype=np.float64), (Ey.shape[0],))
        return np.einsum("n,nch,ncw->hw", flux, Ey, Ex) + background

    def radial(self, r, sigma):
        """The (not pixel-integrated) profile at radius ``r`` of a unit-flux source."""
        r = np.asarray(r, dtype=np.float64)[..., None]
        s = sigma * np.array(self.ratio)
        return np.sum(np.array(self.amp) * np.exp(-0.5 * (r / s) ** 2) / (2 * np.pi * s * s),
                      axis=-1)


#: the pixel-integrated Gaussian (eq. 64-66)
GAUSSIAN = PSFProfile()
