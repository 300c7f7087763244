"""Fast path of the point fit: one PSF per detection peak, kept when it explains the object.

An object with one to :data:`MAX_PEAKS` detection peaks is fitted as one PSF (the settings'
profile, the integrated Gaussian by default) per peak (position, width in the PSF range, flux)
plus a constant by the compiled bounded Levenberg-Marquardt fit of :mod:`cvfs.astro.fit`,
started from the extent test's fit. The fit is
kept when the object is what it looks like, isolated or well separated point sources:

- every source is significant (matched-filter SNR at least ``detect_snr``) and lies on the
  footprint grown by 2 px (the rule the tiled fit reports sources by);
- no width is at the upper bound of the PSF range (a width at the bound can be an unresolved
  pair);
- no two sources are closer than 1.5 (sigma_1 + sigma_2), a pair the tiled fit would test for a
  merge;
- the weighted residuals hold no peak of a point source: their correlation with unit-norm PSFs of
  the PSF range, at every pixel of the footprint grown by 3 px, stays below ``detect_snr`` noise
  units (the tiled fit adds residual peaks at ``detect_snr + 1`` on jittered positions; the
  integer grid reads a peak up to 12 % low);
- chi^2 on the footprint grown by 3 px is within 5 standard deviations of its expectation.

With ``model_tolerance`` t > 0 (a PSF that the model matches only to a fraction t of its
signal, as on real frames; ``psf="fitted"`` measures t on the frame's stars), residual peaks
up to t times the sources' signal in noise units, and a chi^2 excess up to its square, are
accepted as the model's error.

Anything else (more peaks, an unresolved blend, a fit the checks reject) goes to the tiled fit
of :mod:`cvfs.astro.pointfit`. Uncertainties are those of the tiled fit
(:func:`cvfs.astro.fit.uncertainties`).
"""

import numpy as np
from scipy import ndimage

from cvfs._jit import njit
from cvfs.astro.fit import fit_sources, model_and_jac, significance, uncertainties
from cvfs.astro.psf import GAUSSIAN, delta_e

__all__ = ["MAX_PEAKS", "fit_isolated", "residual_peak"]

#: most detection peaks of an object the fast path fits (one source each)
MAX_PEAKS = 4

_KERNELS = {}


def _kernels(s_lo, s_hi, profile=GAUSSIAN):
    """Unit-norm PSFs of ``profile`` centred on a pixel, widths s_lo, their mean and s_hi, cut
    to 3 s_hi, as one zero-padded stack (n, 2 r + 1, 2 r + 1)."""
    key = (s_lo, s_hi, profile)
    if key not in _KERNELS:
        widths = sorted({s_lo, 0.5 * (s_lo + s_hi), s_hi})
        r = int(np.ceil(3.0 * widths[-1]))
        out = np.zeros((len(widths), 2 * r + 1, 2 * r + 1))
        for i, s in enumerate(widths):
            if profile.is_gaussian:
                e = delta_e(np.arange(-r, r + 1), s)
                k = np.outer(e, e)
            else:
                k = profile.render((2 * r + 1, 2 * r + 1), r, r, s)
            out[i] = k / np.sqrt(np.sum(k * k))
        _KERNELS[key] = out
    return _KERNELS[key]


@njit(cache=True)
def _max_correlation(rw, rows, cols, kernels):
    """Largest correlation of ``rw`` (zero outside) with any kernel centred on (rows, cols)."""
    h, w = rw.shape
    r = kernels.shape[1] // 2
    best = -np.inf
    for q in range(rows.size):
        i, j = rows[q], cols[q]
        for k in range(kernels.shape[0]):
            acc = 0.0
            for a in range(max(0, r - i), min(2 * r + 1, h - i + r)):
                for b in range(max(0, r - j), min(2 * r + 1, w - j + r)):
                    acc += kernels[k, a, b] * rw[i + a - r, j + b - r]
            best = max(best, acc)
    return best


def residual_peak(resid, weights, region, s_lo, s_hi, profile=GAUSSIAN):
    """Largest correlation of the weighted residuals with a unit-norm PSF of width s_lo, their
    mean or s_hi, centred on a pixel of ``region`` (noise units)."""
    rows, cols = np.nonzero(region)
    if rows.size == 0:
        return -np.inf
    return float(_max_correlation(np.ascontiguousarray(resid * weights, dtype=np.float64),
                                  rows.astype(np.int64), cols.astype(np.int64),
                                  _kernels(float(s_lo), float(s_hi), profile)))


def fit_isolated(ob, noise, st, start, bg, max_peaks=MAX_PEAKS):
    """PSF fit of an object with up to ``max_peaks`` well separated detection peaks, one source
    per peak.

    Parameters
    ----------
    ob : cvfs.astro.objects._Object
    noise : float
        Typical noise sigma of the object.
    st : cvfs.astro.settings.FitSettings
    start : ndarray of shape (k, 4)
        Starting x, y, sigma, flux (patch coordinates) of one source per peak, e.g. the extent
        test's fit.
    bg : float
        Starting constant.
    max_peaks : int
        Most peaks of an object fitted here.

    Returns
    -------
    rows : ndarray of shape (k, 8) or None
        x, y (image coordinates), sigma, flux, x_err, y_err, flux_err, at_bound, as
        :func:`cvfs.astro.pointfit.fit_point_sources`; None when the object needs the tiled
        SBL fit.
    model : ndarray of shape (h, w) or None
        The sources and, on the footprint grown by 2 px, the fitted constant.
    """
    return _fit(ob, noise, st, start, bg, max_peaks)[:2]


def _fit(ob, noise, st, start, bg, max_peaks):
    """:func:`fit_isolated` and why it left the object to the SBL fit (None when it did not)."""
    h, w = ob.patch.shape
    k = len(ob.peaks)
    if not 1 <= k <= max_peaks or len(start) != k:
        return None, None, "peaks"
    src0 = np.array(start, dtype=np.float64).reshape(k, 4)
    src0[:, 2] = np.clip(src0[:, 2], st.s_lo, st.s_hi)
    src, bgf = fit_sources(ob.patch, ob.weights, src0, bg, st.s_lo, st.s_hi, st.margin,
                           profile=st.psf)
    x, y, s = src[:, 0], src[:, 1], src[:, 2]
    if st.s_hi > st.s_lo and np.any(s >= st.s_hi * (1 - 1e-6)):
        return None, None, "width at s_hi"
    if k > 1:
        # pairs the tiled fit would test for a merge (fit.refine) are left to it
        d = np.hypot(x[:, None] - x[None], y[:, None] - y[None])
        d[np.diag_indices(k)] = np.inf
        if np.any(d < 1.5 * (s[:, None] + s[None])):
            return None, None, "close pair"
    ix, iy = np.rint(x).astype(np.intp), np.rint(y).astype(np.intp)
    if np.any((ix < 0) | (ix >= w) | (iy < 0) | (iy >= h)):
        return None, None, "off patch"
    on_own = ndimage.binary_dilation(ob.own, iterations=2)
    if not on_own[iy, ix].all():
        return None, None, "off footprint"
    if np.any(significance(src, ob.patch.shape, noise, st.psf) < st.detect_snr):
        return None, None, "not significant"
    near = ndimage.binary_dilation(on_own, iterations=1) & (ob.weights > 0)
    model = model_and_jac(np.r_[src.ravel(), 0.0], ob.patch.shape, jac=False,
                          profile=st.psf)[0]
    resid = ob.patch - model - bgf
    # a PSF model off by a fraction t of the signal leaves residuals up to t * signal
    signal = float(np.sqrt(np.sum((model[near] * ob.weights[near]) ** 2)))
    if residual_peak(resid, ob.weights, near, st.s_lo, st.s_hi, st.psf) >= max(
            st.detect_snr, st.model_tolerance * signal):
        return None, None, "residual peak"
    n = int(near.sum())
    c2 = float(np.sum((resid[near] * ob.weights[near]) ** 2))
    if c2 > n + 5.0 * np.sqrt(2.0 * n) + (st.model_tolerance * signal) ** 2:
        return None, None, "chi2"
    x_err, y_err, f_err, at_bound = uncertainties(ob.patch, ob.weights, src, bgf, st.s_lo,
                                                  st.s_hi, st.margin, st.psf)
    model += bgf * on_own
    rows = np.column_stack([x + ob.c0, y + ob.r0, s, src[:, 3], x_err, y_err, f_err, at_bound])
    return rows, model, None
