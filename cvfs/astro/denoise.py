"""Denoising of point-source images: the fitted sources plus the background (SBL paper Sec. 5-D).

The model is the one :func:`cvfs.astro.localise.localise_and_denoise` fits; use that function to
get the catalogue and the denoised image from a single run.
"""

from cvfs.astro.localise import localise_and_denoise

__all__ = ["denoise"]


def denoise(image, settings=None, *, noise_sigma=None, **options):
    """Denoised image: the fitted sources Phi theta plus the background, shaped like ``image``.

    Parameters and errors as :func:`cvfs.astro.localise.localise`.

    Returns
    -------
    ndarray of shape (height, width)

    References
    ----------
    Jiang & Chen, Sec. 5-D (eq. 73).
    """
    return localise_and_denoise(image, settings, noise_sigma=noise_sigma, **options).model
