"""The PSF of a frame, fitted to its bright isolated stars (``psf="fitted"``).

As DAOPHOT's and photutils' PSF builders do, the profile is learnt from the frame itself:

1. stars: detected objects with one detection peak, their stamp of radius ``5 s_hi`` (other
   objects' and masked pixels weighted 0) inside the frame, valid pixels on their 3 x 3 core (no
   saturated or masked core) and a Gaussian fit of matched-filter SNR at least
   :data:`MIN_STAR_SNR`; the :data:`MAX_STARS` most significant are kept;
2. profile: a mixture of integrated Gaussians of fixed widths ``WIDTH_RATIOS`` times the stars'
   median Gaussian width, amplitudes >= 0 summing to 1 (:class:`cvfs.astro.psf.PSFProfile`),
   fitted to the flux-normalised stamps by nonnegative least squares, alternating with each
   star's flux and constant, then with each star's position and width under the mixture (the
   compiled fit of :mod:`cvfs.astro.fit`); stars whose normalised residual is an outlier
   (median + 3 MAD) are dropped once;
3. the profile's width parameter then ranges over ``1 / WIDTH_SPREAD`` to ``WIDTH_SPREAD`` times
   the stars' median (the PSF's variation over the frame);
4. the profile's own error: the largest residual peak (:func:`cvfs.astro.fastfit.residual_peak`)
   of each bright star's fit in units of its signal (matched-filter SNR); ``TOLERANCE_MARGIN``
   times the 90th percentile over the stars becomes the fits' ``model_tolerance`` (at least
   the one set), so the residuals the profile leaves on bright stars are not taken for
   sources.

A mixture of Gaussians represents the usual ground-based PSFs (a core with Moffat-like wings)
to a few per mille of their peak, and keeps every source separable per component, so the fits
and the residual test of :mod:`cvfs.astro.fastfit` and :mod:`cvfs.astro.pointfit` use it as
they use the integrated Gaussian.
"""

import logging

import numpy as np
from scipy.optimize import nnls

from cvfs.astro.fastfit import residual_peak
from cvfs.astro.fit import fit_sources, model_and_jac, significance
from cvfs.astro.psf import PSFProfile, psf_factors

__all__ = ["MAX_STARS", "MAX_TOLERANCE", "MIN_STAR_SNR", "MIN_STARS", "TOLERANCE_MARGIN",
           "WIDTH_RATIOS", "WIDTH_SPREAD", "fit_profile", "measure_width",
           "star_stamps"]

log = logging.getLogger(__name__)

#: stars fitted for the profile: the most significant ones
MAX_STARS = 80
#: fewest stars a profile is fitted to; with fewer the Gaussian PSF is kept
MIN_STARS = 5
#: smallest matched-filter SNR of a star used for the profile
MIN_STAR_SNR = 30.0
#: component widths of the mixture, in units of the stars' median Gaussian width
WIDTH_RATIOS = (0.6, 0.85, 1.2, 1.7, 2.4, 3.4, 4.8)
#: the fitted width ranges over [s / WIDTH_SPREAD, s * WIDTH_SPREAD] around the median s
WIDTH_SPREAD = 1.25
#: components with a smaller amplitude (relative to the largest) are dropped
MIN_AMP = 0.005
#: model tolerance: this factor times the 90th percentile of the stars' residual peak / signal
TOLERANCE_MARGIN = 1.25
#: largest model tolerance the profile's error sets
MAX_TOLERANCE = 0.2


def star_stamps(sub, weights, labels, objs, st, radius):
    """Stamps of the candidate stars: one-peak objects whose stamp of ``radius`` lies in the
    frame with a valid 3 x 3 core.

    Returns
    -------
    stamps, wts : ndarray of shape (n, 2 radius + 1, 2 radius + 1)
        Pixels and weights (0 on other objects' and masked pixels).
    """
    h, w = sub.shape
    n = 2 * radius + 1
    stamps, wts = [], []
    for ob in objs:
        if len(ob.peaks) != 1:
            continue
        r, c = ob.peaks[0, 0] + ob.r0, ob.peaks[0, 1] + ob.c0
        if r < radius or c < radius or r + radius >= h or c + radius >= w:
            continue
        sl = (slice(r - radius, r + radius + 1), slice(c - radius, c + radius + 1))
        lab = labels[sl]
        wt = np.where((lab == 0) | (lab == ob.index), weights[sl], 0.0)
        if not (wt[radius - 1:radius + 2, radius - 1:radius + 2] > 0).all() \
                or np.mean(wt > 0) < 0.7:
            continue
        stamps.append(np.where(wt > 0, sub[sl], 0.0))
        wts.append(wt)
    return np.array(stamps).reshape(-1, n, n), np.array(wts).reshape(-1, n, n)


def _basis(n, x, y, widths):
    """Integrated Gaussians of ``widths`` at (x, y) on an n x n stamp: (m, n * n)."""
    m = len(widths)
    Ey, Ex = psf_factors((n, n), np.full(m, x), np.full(m, y), np.asarray(widths))
    return (Ey[:, :, None] * Ex[:, None, :]).reshape(m, -1)


def _bases(n, pos, widths):
    """Integrated Gaussians of ``widths`` at each star's position: (stars, m, n * n)."""
    return np.array([_basis(n, x, y, widths) for x, y in pos]).reshape(len(pos), len(widths),
                                                                       n * n)


def _amplitudes(stamps, wts, bases, flux, bg):
    """Nonnegative least squares of the mixture amplitudes on the flux-normalised stamps."""
    A, b = [], []
    for i in range(len(stamps)):
        wt = wts[i].ravel() / flux[i]
        keep = wt > 0
        A.append((bases[i][:, keep] * (flux[i] * wt[keep])).T)
        b.append((stamps[i].ravel()[keep] - bg[i]) * wt[keep])
    amp, _ = nnls(np.vstack(A), np.concatenate(b))
    return amp


def _flux_and_bg(stamps, wts, bases, amp):
    """Per-star weighted linear least squares of flux and constant under the mixture."""
    flux, bg = np.empty(len(stamps)), np.empty(len(stamps))
    for i in range(len(stamps)):
        wt = wts[i].ravel()
        P = amp @ bases[i]
        M = np.column_stack([P, np.ones_like(P)]) * wt[:, None]
        (flux[i], bg[i]), *_ = np.linalg.lstsq(M, stamps[i].ravel() * wt, rcond=None)
    return flux, bg


def _residuals(stamps, wts, bases, flux, bg, amp):
    """Root-mean-square residual of each star in units of its flux (per valid pixel)."""
    out = np.empty(len(stamps))
    for i in range(len(stamps)):
        keep = wts[i].ravel() > 0
        model = flux[i] * (amp @ bases[i]) + bg[i]
        out[i] = np.sqrt(np.mean((stamps[i].ravel() - model)[keep] ** 2)) / flux[i]
    return out


def _star_fits(sub, weights, labels, objs, noise, st, radius):
    """Gaussian fits (width from half ``s_lo`` to ``extended_factor * s_hi``) to the candidate
    stars' stamps: stamps, weights, rows (ok, snr, x, y, sigma, flux, constant) and the indices
    of the qualifying stars, most significant first (at most :data:`MAX_STARS`)."""
    stamps, wts = star_stamps(sub, weights, labels, objs, st, radius)
    lo, hi = 0.5 * st.s_lo, st.extended_factor * st.s_hi
    rows = []
    for stamp, wt in zip(stamps, wts, strict=True):
        start = np.array([[radius, radius, 0.5 * (st.s_lo + st.s_hi),
                           max(float(stamp[radius, radius]), 1e-3) * 4 * np.pi * st.s_hi**2]])
        src, bg = fit_sources(stamp, wt, start, 0.0, lo, hi, st.margin)
        snr = significance(src, stamp.shape, noise)[0]
        x, y, s = src[0, :3]
        ok = snr >= MIN_STAR_SNR and abs(x - radius) <= 1 and abs(y - radius) <= 1 \
            and lo * 1.001 < s < hi * 0.999
        rows.append((ok, snr, *src[0], bg))
    rows = np.array(rows, dtype=np.float64).reshape(-1, 7)
    sel = np.flatnonzero(rows[:, 0] > 0)
    return stamps, wts, rows, sel[np.argsort(-rows[sel, 1])][:MAX_STARS]


#: the stellar locus: widths within this factor of the narrowest quarter's upper bound
LOCUS = 1.15


def measure_width(sub, weights, labels, objs, noise, st):
    """The Gaussian width of a frame's PSF (``psf_sigma="auto"``): Gaussian fits to its bright
    isolated sources (as :func:`fit_profile` selects them), the median of the stellar locus
    (widths within :data:`LOCUS` of their 25th percentile: galaxies are wider than stars).
    Returns (width, number of stars in the locus); the width is NaN with fewer than
    :data:`MIN_STARS`."""
    radius = int(np.ceil(5.0 * st.s_hi))
    _, _, rows, sel = _star_fits(sub, weights, labels, objs, noise, st, radius)
    if sel.size < MIN_STARS:
        return float("nan"), int(sel.size)
    widths = rows[sel, 4]
    ref = np.percentile(widths, 25)
    locus = widths[(widths > ref / LOCUS) & (widths < ref * LOCUS)]
    if locus.size < MIN_STARS:
        return float("nan"), int(locus.size)
    return float(np.median(locus)), int(locus.size)


def fit_profile(sub, weights, labels, objs, noise, st, rounds=3):
    """PSF profile of a frame fitted to its bright isolated stars.

    Parameters
    ----------
    sub : ndarray of shape (height, width)
        Background-subtracted image (0 on masked pixels).
    weights : ndarray of shape (height, width)
        1 / noise sigma per pixel (0 = masked).
    labels : ndarray of int of shape (height, width)
        Detected footprints (object i is label i).
    objs : list of cvfs.astro.objects._Object
        The detected objects.
    noise : float
        Typical noise sigma.
    st : cvfs.astro.settings.FitSettings
        Its PSF width range sets the stamp radius and the range of the stars' Gaussian fits.
    rounds : int
        Alternations of amplitudes, fluxes and star positions.

    Returns
    -------
    profile : PSFProfile or None
        None when fewer than :data:`MIN_STARS` stars qualify.
    sigma : float
        The stars' median width parameter under ``profile``.
    tolerance : float
        The profile's error on the bright stars as a fraction of their signal (0 without a
        profile).
    n_stars : int
        Stars the profile was fitted to.

    References
    ----------
    Stetson 1987, PASP 99, 191 (DAOPHOT: the PSF from the frame's bright isolated stars);
    Anderson & King 2000, PASP 112, 1360 (empirical PSFs).
    """
    radius = int(np.ceil(5.0 * st.s_hi))
    stamps, wts, rows, sel = _star_fits(sub, weights, labels, objs, noise, st, radius)
    if sel.size < MIN_STARS:
        log.warning("fitted PSF: %d bright isolated stars (fewer than %d); the Gaussian PSF is "
                    "used", sel.size, MIN_STARS)
        return None, float("nan"), 0.0, int(sel.size)
    stamps, wts = stamps[sel], wts[sel]
    pos, flux, bg = rows[sel, 2:4].copy(), rows[sel, 5].copy(), rows[sel, 6].copy()
    s_g = float(np.median(rows[sel, 4]))
    widths = s_g * np.asarray(WIDTH_RATIOS)
    n = stamps.shape[1]
    for r in range(rounds):
        # the stars' bases at their current positions serve the amplitudes, the fluxes and
        # (first round) the outlier test
        bases = _bases(n, pos, widths)
        amp = _amplitudes(stamps, wts, bases, flux, bg)
        if amp.sum() <= 0:
            return None, float("nan"), 0.0, int(len(stamps))
        amp /= amp.sum()
        flux, bg = _flux_and_bg(stamps, wts, bases, amp)
        if r == 0:  # outliers are dropped once
            res = _residuals(stamps, wts, bases, flux, bg, amp)
            med = np.median(res)
            keep = res <= med + 3.0 * 1.4826 * np.median(np.abs(res - med))
            if keep.sum() >= MIN_STARS:
                stamps, wts, pos, flux, bg = (a[keep] for a in (stamps, wts, pos, flux, bg))
        # positions under the mixture (a Gaussian fit of a profile with wings is unbiased in
        # position only for symmetric stamps; weights 0 on neighbours break the symmetry)
        profile = _profile(amp, widths / s_g)
        for i in range(len(stamps)):
            src, bgi = fit_sources(stamps[i], wts[i], np.array([[*pos[i], s_g, flux[i]]]),
                                   bg[i], s_g / 2, 2 * s_g, st.margin, profile=profile)
            pos[i], flux[i], bg[i] = src[0, :2], src[0, 3], bgi
    amp = _amplitudes(stamps, wts, _bases(n, pos, widths), flux, bg)
    amp /= amp.sum()
    profile = _profile(amp, widths / s_g)
    # the width parameter of the stars under the final profile, and the profile's error
    sig, ratio, signal = [], [], []
    yy, xx = np.mgrid[:n, :n]
    for i in range(len(stamps)):
        src, bgi = fit_sources(stamps[i], wts[i], np.array([[*pos[i], s_g, flux[i]]]), bg[i],
                               s_g / 2, 2 * s_g, st.margin, profile=profile)
        sig.append(src[0, 2])
        model = model_and_jac(np.r_[src.ravel(), 0.0], (n, n), jac=False, profile=profile)[0]
        near = (np.hypot(xx - src[0, 0], yy - src[0, 1]) <= 3 * s_g) & (wts[i] > 0)
        sn = float(np.sqrt(np.sum((model[near] * wts[i][near]) ** 2)))
        peak = residual_peak(stamps[i] - model - bgi, wts[i], near, s_g, s_g, profile)
        signal.append(sn)
        ratio.append(peak / sn)
    signal, ratio = np.array(signal), np.array(ratio)
    bright = signal >= 20 * st.detect_snr
    if bright.sum() >= 3:
        ratio = ratio[bright]
    tol = min(TOLERANCE_MARGIN * float(np.quantile(ratio, 0.9)), MAX_TOLERANCE)
    return profile, float(np.median(sig)), tol, int(len(stamps))


def _profile(amp, ratio):
    keep = amp >= MIN_AMP * amp.max()
    a = amp[keep] / amp[keep].sum()
    return PSFProfile(tuple(a), tuple(np.asarray(ratio)[keep]))
