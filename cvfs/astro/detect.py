"""Object detection: a matched-filter detection image, thresholding and connected components.

The detection image is the matched filter of a point source (a Gaussian of the PSF width) in
units of the local noise: at every pixel, the SNR of a source centred there, from the noise map
and with masked pixels left out (:func:`detection_image`). Correlated pixel noise (drizzled or
resampled images) is measured on the filtered image (the spread of its values below their
mode, :func:`noise_scale`) and divided out. Objects are 8-connected regions above ``thresh``
with at least ``min_area`` pixels whose peak reaches ``peak_snr``.
"""

import math

import numpy as np
from scipy import ndimage
from scipy.optimize import brentq

from cvfs.astro.background import _clipped_stats

__all__ = ["detection_image", "moments", "noise_scale", "segment"]


def _gaussian_taps(sigma, truncate=3.0):
    """The sampled, normalised 1-D Gaussian of :func:`scipy.ndimage.gaussian_filter`."""
    r = int(truncate * sigma + 0.5)
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-0.5 * (x / sigma) ** 2)
    return g / g.sum()


def _separable(img, taps):
    out = ndimage.correlate1d(img, taps, axis=0, mode="constant")
    return ndimage.correlate1d(out, taps, axis=1, mode="constant")


def detection_image(sub, rms, mask, sigma, white=False):
    """Matched-filter SNR image in units of the local noise.

    With weights w = 1 / rms^2 (0 on masked pixels) and the Gaussian kernel k of width
    ``sigma``, the detection SNR is sum(k w sub) / sqrt(sum(k^2 w)) over the kernel around each
    pixel: the SNR of a point source of that width centred there, with the local noise and
    masked pixels accounted for (the same statistic as sep's matched filter). Unless ``white``,
    it is divided by the standard deviation of its noise (:func:`noise_scale`) when that
    exceeds 1: correlated pixel noise (drizzled or resampled images) would otherwise give false
    detections. The noise is measured below the mode of the filtered values, so sources and
    nebulosity filling a crowded frame do not raise the threshold.

    Parameters
    ----------
    sub : ndarray of shape (height, width)
        Background-subtracted image.
    rms : ndarray of shape (height, width)
        Noise standard deviation per pixel.
    mask : ndarray of bool of shape (height, width)
        True where pixels are ignored.
    sigma : float
        Gaussian width of the filter (the PSF width).
    white : bool
        Take the pixel noise as uncorrelated (no correction; frames too small to measure it).

    Returns
    -------
    ndarray of shape (height, width)
        Detection SNR per pixel (0 where the kernel covers only masked pixels).

    References
    ----------
    Bertin & Arnouts 1996, Sec. 3.2 (detection filtering); sep's matched filter
    (Barbary 2016, JOSS 1, 58).
    """
    taps = _gaussian_taps(sigma)
    wt = np.where(mask, 0.0, 1.0 / (rms * rms))
    num = _separable(np.where(mask, 0.0, sub) * wt, taps)
    den = np.sqrt(_separable(wt, taps * taps))
    with np.errstate(divide="ignore", invalid="ignore"):
        det = np.where(den > 0, num / den, 0.0)
    if white:
        return det
    valid = ~mask & (den > 0)
    # a regular subgrid of about 2^18 pixels measures the spread to 0.3 % at a fraction of the
    # cost on large frames
    step = max(1, int(math.sqrt(valid.sum() / 2**18)))
    vals = det[::step, ::step][valid[::step, ::step]]
    if vals.size < 100:
        return det
    # correlated pixel noise raises the filtered image's noise above its white-noise value 1:
    # divided out
    factor = noise_scale(vals)
    return det / factor if np.isfinite(factor) and factor > 1.0 else det


def noise_scale(vals):
    """Standard deviation of the noise of detection-image values: the smallest of their clipped
    standard deviation, the spread of the values below their mode (the mode from a histogram
    of the clipped values) and the width of their negative tail (:func:`_tail_width`). Sources
    and nebulosity only add positive values, so on a crowded or nebulous frame, where they fill
    most pixels and widen the clipped distribution, the negative side still holds the noise
    alone."""
    scale = _below_mode(vals)
    tail = _tail_width(vals, scale)
    return min(scale, tail) if np.isfinite(tail) else scale


#: P(z < -2) / P(z < -1) of a standard normal variable z
_TAIL_RATIO = 0.02275013194817921 / 0.15865525393145707


def _tail_width(vals, guess, least=200):
    """Standard deviation s of a zero-mean Gaussian noise whose negative tail the values follow:
    the share of values below -2 s is the normal share (0.1434) of those below -s. The share of
    pixels sources cover cancels in the ratio, so it holds where sources fill most of a frame
    and shift the mode of the values; NaN with fewer than ``least`` values below -s."""
    neg = np.sort(-vals[vals < 0])  # magnitudes of the negative values, ascending
    if neg.size < least:
        return float("nan")

    def excess(s):  # ratio of the counts beyond 2 s and beyond s, less the normal ratio
        n1 = neg.size - np.searchsorted(neg, s)
        n2 = neg.size - np.searchsorted(neg, 2 * s)
        return n2 / max(n1, 1) - _TAIL_RATIO

    lo, hi = 0.2 * guess, 2.0 * guess
    if not excess(lo) < 0 < excess(hi) and not excess(lo) > 0 > excess(hi):
        return float("nan")
    s = brentq(excess, lo, hi, xtol=1e-4 * guess)
    if neg.size - np.searchsorted(neg, s) < least:
        return float("nan")
    return float(s)


def _below_mode(vals):
    """The smaller of the clipped standard deviation of ``vals`` and the spread of the values
    below their mode."""
    med, _, std, _ = _clipped_stats(vals[None, :], 3.0, 20)
    med, std = float(med[0]), float(std[0])
    if not (np.isfinite(std) and std > 0):
        return std
    # a histogram of bins of std / 10 over the clipped range locates the mode
    lo = vals[np.abs(vals - med) <= 3.0 * std]
    counts, edges = np.histogram(lo, bins=60, range=(med - 3.0 * std, med + 3.0 * std))
    k = np.convolve(counts, np.ones(5) / 5.0, mode="same").argmax()
    mode = 0.5 * (edges[k] + edges[k + 1])
    below = vals[vals < mode] - mode
    if below.size < 50:
        return std
    return min(std, float(np.sqrt(np.mean(below * below))))


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
