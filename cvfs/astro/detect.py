"""Object detection: a matched-filter detection image, thresholding and connected components.

The detection image is the background-subtracted image divided by the noise map, smoothed with a
Gaussian of the PSF width (the matched filter of a point source) and divided by its own
sigma-clipped standard deviation, so that it is in units of its noise even when the pixel noise is
correlated (drizzled or resampled images). Frames too small to hold enough sky (crowded 28 x 28
scenes) are divided by the filter's white-noise standard deviation instead. Objects are
8-connected regions above ``thresh`` with at least ``min_area`` pixels whose peak reaches
``peak_snr``.
"""

import numpy as np
from scipy import ndimage

from cvfs.astro.background import _clipped_stats

__all__ = ["detection_image", "moments", "segment"]


def detection_image(sub, rms, mask, sigma, white=False):
    """Noise-normalised, matched-filter-smoothed image.

    Parameters
    ----------
    sub : ndarray of shape (height, width)
        Background-subtracted image.
    rms : ndarray of shape (height, width)
        Noise standard deviation per pixel.
    mask : ndarray of bool of shape (height, width)
        True where pixels are ignored (they count as zero signal).
    sigma : float
        Gaussian width of the filter (the PSF width).
    white : bool
        Normalise by the filter's standard deviation on white noise of unit variance, not by the
        clipped standard deviation of the filtered image (which sources inflate when they cover
        much of the frame).

    Returns
    -------
    ndarray of shape (height, width)
        Detection SNR per pixel.
    """
    snr = np.where(mask, 0.0, sub / rms)
    det = ndimage.gaussian_filter(snr, sigma, mode="nearest", truncate=3.0)
    if white:
        delta = np.zeros((int(6 * sigma) * 2 + 1,) * 2)
        delta[delta.shape[0] // 2, delta.shape[1] // 2] = 1.0
        kern = ndimage.gaussian_filter(delta, sigma, mode="constant", truncate=3.0)
        return det / float(np.sqrt(np.sum(kern**2)))
    vals = det[~mask]
    _, _, std, _ = _clipped_stats(vals[None, :], 3.0, 20)
    std = float(std[0]) if np.isfinite(std[0]) and std[0] > 0 else 1.0
    return det / std


def segment(det, mask, thresh, min_area, peak_snr):
    """Objects of a detection image.

    Parameters
    ----------
    det : ndarray of shape (height, width)
        Detection SNR (:func:`detection_image`).
    mask : ndarray of bool of shape (height, width)
    thresh : float
        Pixels above ``thresh`` belong to objects.
    min_area : int
        Smallest object, in pixels.
    peak_snr : float
        Smallest peak detection SNR of an object.

    Returns
    -------
    labels : ndarray of int of shape (height, width)
        0 = sky, 1..n = objects.
    slices : list of tuple of slice
        Bounding box of each object (``labels[slices[i]] == i + 1`` is its footprint there).
    """
    above = (det > thresh) & ~mask
    labels, n = ndimage.label(above, structure=np.ones((3, 3), bool))
    if n == 0:
        return labels, []
    idx = np.arange(1, n + 1)
    area = ndimage.sum_labels(np.ones_like(det), labels, idx)
    peak = ndimage.maximum(det, labels, idx)
    keep = (area >= min_area) & (peak >= peak_snr)
    lut = np.zeros(n + 1, np.int64)
    lut[1:][keep] = np.arange(1, int(keep.sum()) + 1)
    labels = lut[labels]
    return labels, ndimage.find_objects(labels)


def moments(patch, footprint, y0, x0):
    """Centroid and second moments of the positive flux in a footprint.

    Parameters
    ----------
    patch : ndarray of shape (h, w)
        Background-subtracted pixels.
    footprint : ndarray of bool of shape (h, w)
    y0, x0 : int
        Position of ``patch[0, 0]`` in the image.

    Returns
    -------
    x, y : float
        Centroid (image coordinates).
    cxx, cyy, cxy : float
        Second central moments (pixel^2).
    flux : float
        Sum of the footprint pixels.
    """
    f = np.where(footprint, np.clip(patch, 0.0, None), 0.0)
    tot = f.sum()
    flux = float(patch[footprint].sum())
    if tot <= 0:
        r, c = np.argwhere(footprint).mean(axis=0)
        return x0 + c, y0 + r, 0.0, 0.0, 0.0, flux
    rr, cc = np.indices(patch.shape)
    yc, xc = (f * rr).sum() / tot, (f * cc).sum() / tot
    cyy = (f * (rr - yc) ** 2).sum() / tot
    cxx = (f * (cc - xc) ** 2).sum() / tot
    cxy = (f * (rr - yc) * (cc - xc)).sum() / tot
    return x0 + xc, y0 + yc, cxx, cyy, cxy, flux
