"""Source localisation and denoising: detection, then screened SBL over sampled PSFs per object.

Pipeline (settings: :class:`cvfs.astro.settings.LocalisationSettings`):

1. background and noise maps (:mod:`cvfs.astro.background`; ``error=`` or ``noise_sigma=``
   replace the noise map); NaN pixels and ``mask=`` are ignored everywhere;
2. detection (:mod:`cvfs.astro.detect`): matched-filter detection image, threshold, connected
   components; only these objects are fitted, empty sky never is. With ``psf_sigma="auto"``
   the PSF width is measured on the bright isolated stars of a first pass
   (:func:`cvfs.astro.psfmodel.measure_width`) and detection is run again at that width;
3. per object (:mod:`cvfs.astro.objects`), a patch around its footprint (pixels of other objects
   and masked pixels get zero weight) is tested for extent: a fit of one integrated Gaussian per
   detection peak with widths up to ``extended_factor`` times the PSF range; an object with a
   significant component wider than the PSF range is *extended* and becomes one row per
   deblended part (footprint flux, centroid, moments; :mod:`cvfs.astro.deblend`); an
   extended object of several parts is processed part by part, so a star beside a galaxy is
   fitted as a point source;
4. fast path (``fast_path``, :mod:`cvfs.astro.fastfit`): an object with one to four well
   separated detection peaks is fitted with one PSF per peak by the compiled Levenberg-Marquardt
   fit, kept when every source is significant and the residuals hold no point source and no
   excess chi^2; other objects go to the SBL fit;
5. a point-like object the fast path leaves is fitted per ``tile`` of the patch
   (:mod:`cvfs.astro.pointfit`): candidates -> weighted nonlinear least squares with the
   analytic Jacobian, pruning, merging and residual peaks (:mod:`cvfs.astro.fit`);
   uncertainties from the inverse Fisher information. An object of one tile gets its
   candidates as in the SBL paper: nonnegative SBL (Alg. 1, lambda = ``lam_factor`` sigma^2,
   see :data:`LAMBDA_FACTOR`) with dynamic gap-safe screening over sampled atoms (x0, y0,
   sigma) of the PSF (eq. 66) centred on the footprint grown by 3 px, atoms grouped into
   candidates; an object of several tiles (a crowded footprint) gets them from its detection
   peaks, and its residual peaks are added several at a time. Sources are kept by the tile
   whose core contains them and when they lie on the object's footprint; more than
   ``max_sources`` sources per tile make the object extended;
6. a point-fitted object with several sources is split into parts by the watershed of the
   extended objects; a part holding two or more sources becomes a parent row (isophotal centroid
   and flux of its pixels) whose children are those sources (:mod:`cvfs.astro.catalogue`);
7. objects are independent: ``n_jobs`` processes share them, BLAS runs on one thread per process.
"""

import dataclasses
import logging
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage
from threadpoolctl import threadpool_limits

from cvfs.astro import catalogue as catmod
from cvfs.astro.background import NOISE_FLOOR, estimate_background, estimate_background_noise
from cvfs.astro.detect import detection_image, segment
from cvfs.astro.objects import cut_objects, run_objects
from cvfs.astro.psfmodel import MIN_STARS, WIDTH_SPREAD, fit_profile, measure_width
from cvfs.astro.settings import (
    DEFAULT_PSF_SIGMA,
    LAMBDA_FACTOR,
    LocalisationSettings,
    _check_positive,
    resolve_settings,
)

__all__ = ["LAMBDA_FACTOR", "Localisation", "LocalisationSettings", "estimate_background_noise",
           "localise", "localise_and_denoise"]

log = logging.getLogger(__name__)



@dataclass
class Localisation:
    """Result of :func:`localise_and_denoise`.

    Attributes
    ----------
    catalogue : structured ndarray of :func:`cvfs.astro.catalogue.catalogue_dtype`
        Sorted by decreasing flux; one row per source unless the settings' ``levels`` ask for
        the parent rows of blends (``n_children`` > 0).
    model : ndarray of shape (height, width)
        The denoised image: background + point sources + smoothed extended objects.
    background : float
        Global background (median of the background mesh).
    noise_sigma : float
        Typical noise standard deviation (median of the noise map).
    lam : float
        The SBL noise variance lambda at ``noise_sigma``.
    screening : list of float
        Mean fraction of atoms screened per fitted tile.
    background_map, rms_map : ndarray of shape (height, width)
        Background and noise maps used.
    segmentation : ndarray of int of shape (height, width)
        Detected objects: 0 = sky, i = the object of footprint i.
    psf : PSFProfile
        The PSF profile of the fits (:data:`cvfs.astro.psf.GAUSSIAN` unless ``psf`` is fitted or
        given).
    psf_sigma : (float, float)
        The range of its width parameter.
    psf_stars : int
        Stars the fitted PSF was fitted to (0 unless ``psf="fitted"``).
    """

    catalogue: np.ndarray
    model: np.ndarray
    background: float
    noise_sigma: float
    lam: float
    screening: list
    background_map: np.ndarray = field(default=None, repr=False)
    rms_map: np.ndarray = field(default=None, repr=False)
    segmentation: np.ndarray = field(default=None, repr=False)
    psf: object = None
    psf_sigma: tuple = None
    psf_stars: int = 0


def _check_image(image):
    if isinstance(image, (str, bytes)) or image is None:
        raise TypeError(f"image must be a 2-D array; got {type(image).__name__}")
    arr = np.asarray(image)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"image must be a numeric array; got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[-1] in (3, 4):
        raise ValueError(f"image must be 2-D (height, width); got shape {arr.shape}, a colour "
                         "image: pick one channel (image[..., 0]) or convert it to grey "
                         "(skimage.color.rgb2gray(image))")
    if arr.ndim != 2:
        raise ValueError(f"image must be 2-D (height, width); got shape {arr.shape}"
                         + (" (a cube or colour image: pass one plane)" if arr.ndim == 3 else ""))
    if arr.size == 0 or min(arr.shape) < 4:
        raise ValueError(f"image must be at least 4 x 4 pixels; got shape {arr.shape}"
                         + (" (an empty image)" if arr.size == 0 else ""))
    arr = arr.astype(np.float32 if arr.dtype == np.float32 else np.float64).astype(np.float64)
    if not np.isfinite(arr).any():
        raise ValueError(f"image has only NaN or infinite pixels ({arr.size} of them): nothing "
                         "to localise")
    return arr


def _check_map(name, value, shape, *, boolean=False):
    arr = np.asarray(value, dtype=bool if boolean else np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have the image's shape {shape}; got shape {arr.shape}")
    return arr


def localise_and_denoise(image, settings=None, *, noise_sigma=None, mask=None, error=None,
                         saturation=None, wcs=None, verbose=False, **options):
    """Localise point sources and extended objects and denoise the image (one run, both outputs).

    Parameters
    ----------
    image : array-like of shape (height, width)
        Intensities (any units); NaN and infinite pixels are ignored.
    settings : LocalisationSettings, optional
        Tuning settings (:class:`cvfs.astro.LocalisationSettings`; its defaults when None).
    noise_sigma : float, optional
        Noise standard deviation of every pixel; a noise map is estimated when None.
    mask : ndarray of bool of shape (height, width), optional
        True where pixels must be ignored (bad pixels, saturated stars, borders).
    error : ndarray of shape (height, width), optional
        Noise standard deviation per pixel (overrides ``noise_sigma`` and the estimated map).
    saturation : float, optional
        Saturation level in the image's units (a FITS header's ``SATURATE``): pixels at or
        above it are masked, and rows whose object has such pixels on its footprint grown by
        2 px get the ``saturated`` flag (:data:`cvfs.astro.FLAGS`).
    wcs : astropy.wcs.WCS, optional
        Celestial WCS of the image: the catalogue gets ``ra`` and ``dec`` in degrees.
    verbose : bool
        A progress bar over the detected objects (tqdm, on stderr).
    **options
        Any field of :class:`cvfs.astro.LocalisationSettings` (``psf_sigma``, ``n_atoms``,
        ``random_state``, ``n_jobs``, ``tile``, ``overlap``, ``lam_factor``, ``detect_snr``,
        ``detect_thresh``, ``min_area``, ``box``, ``max_sources``, ``extended_factor``,
        ``sbl_iter``, ``refine``, ``fast_path``, ``model_tolerance``, ``levels``, ``psf``):
        overrides
        the value of ``settings``.

    Returns
    -------
    Localisation
        Fluxes, flux errors, the denoised image, background and noise maps, noise sigma and
        lambda in the units of ``image``. The work is done on the image divided by a power of
        two near its noise sigma, so the results do not depend on the image's units:
        ``image * c`` gives the same positions and widths and ``c`` times the fluxes and maps.

    Raises
    ------
    TypeError
        If ``image`` is not a numeric array, ``settings`` is not a LocalisationSettings or an
        option is not one of its fields.
    ValueError
        If ``image`` is not 2-D (a colour image or a cube), is smaller than 4 x 4, is empty, has no
        finite pixel or is constant; if ``mask`` or ``error`` do not have the image's shape,
        ``saturation`` is not a finite number, if
        ``noise_sigma`` (or the median of ``error``) is below 1e-12 of the largest |pixel|, or a
        setting is out of range.
    """
    img = _check_image(image)
    settings, st, n_jobs = resolve_settings(settings, **options)
    if noise_sigma is not None:
        noise_sigma = _check_positive("noise_sigma", noise_sigma)
    bad = ~np.isfinite(img)
    if mask is not None:
        bad |= _check_map("mask", mask, img.shape, boolean=True)
    saturated = None
    if saturation is not None:
        if isinstance(saturation, bool) or not isinstance(saturation, numbers.Real) \
                or not np.isfinite(saturation):
            raise ValueError(f"saturation must be a finite number (a level in the image's "
                             f"units); got {saturation!r}")
        with np.errstate(invalid="ignore"):
            saturated = img >= saturation
        bad |= saturated
    if bad.all():
        raise ValueError("mask leaves no pixel to fit: every pixel is masked, NaN or infinite")
    good = img[~bad]
    peak = float(np.max(np.abs(good)))
    if peak == 0.0 or np.ptp(np.ldexp(good, -math.frexp(peak)[1])) == 0:
        raise ValueError("image is constant (empty): there is nothing to localise")
    if error is not None:
        error = _check_map("error", error, img.shape)
        bad |= ~(np.isfinite(error) & (error > 0))
        if bad.all():
            raise ValueError("error is not positive and finite on any unmasked pixel")
        name, noise = "error (median)", float(np.median(error[~bad]))
    elif noise_sigma is not None:
        name, noise = "noise_sigma", noise_sigma
    else:
        name, noise = "noise sigma", estimate_background_noise(
            np.where(bad, np.median(good), img))[1]
    if noise < NOISE_FLOOR * peak:
        raise ValueError(f"{name}={noise!r} is below the float64 resolution of the image "
                         f"({NOISE_FLOOR:g} of its largest |pixel|, {peak!r})")
    if wcs is not None and not hasattr(wcs, "pixel_to_world_values"):
        raise ValueError(f"wcs must be an astropy.wcs.WCS; got {type(wcs).__name__}")
    # work in units of the noise: the image divided by a power of two near its noise sigma
    # (exact), so every threshold and tolerance is relative to the data; fluxes, the denoised
    # image, the background and noise maps, the noise and lambda are mapped back to input units
    e = int(round(math.log2(noise)))
    res = _localise_normalised(
        np.ldexp(img, -e), bad, None if error is None else np.ldexp(error, -e),
        None if noise_sigma is None else math.ldexp(noise_sigma, -e), st, settings, n_jobs,
        verbose, saturated)
    cat = res.catalogue
    for f in ("flux", "flux_err"):
        cat[f] = np.ldexp(cat[f], e)
    with np.errstate(over="ignore"):
        res.model = np.ldexp(res.model, e)
        res.background_map = np.ldexp(res.background_map, e)
        res.rms_map = np.ldexp(res.rms_map, e)
    res.background = math.ldexp(res.background, e)
    res.noise_sigma = math.ldexp(res.noise_sigma, e)
    res.lam = st.lam_factor * res.noise_sigma * res.noise_sigma  # inf past 1e154 (float64)
    if wcs is not None:
        cat = catmod.add_sky_coordinates(cat, wcs)
    res.catalogue = catmod.select_levels(cat, settings.levels)
    return res


def _localise_normalised(img, bad, error, noise_sigma, st, settings, n_jobs, verbose=False,
                         saturated=None):
    """:func:`localise_and_denoise` of checked parameters (fit settings ``st``, detection and
    background from ``settings``), on an image whose noise sigma is about 1 (between 0.7 and
    1.4); NaN and saturated pixels are in ``bad``, saturated ones also in ``saturated``."""
    s_lo, s_hi, detect_snr = st.s_lo, st.s_hi, st.detect_snr
    with threadpool_limits(1):
        bkg = estimate_background(img, mask=bad, box=settings.box)
    rms = bkg.rms
    if min(img.shape) < 128 and noise_sigma is None and error is None:
        # boxes of small frames are too small to clip the sources out of the noise estimate:
        # the wavelet MAD of the whole frame (robust to sources and smooth gradients) instead
        rms = np.full(img.shape, estimate_background_noise(np.where(bad, bkg.background,
                                                                     img))[1])
    if error is not None:
        rms = np.where(bad, 1.0, error)
    elif noise_sigma is not None:
        rms = np.full(img.shape, noise_sigma)
    sub = np.where(bad, 0.0, img - bkg.background)
    weights = np.where(bad, 0.0, 1.0 / rms)
    noise = float(np.median(rms[~bad]))

    def detect(s_lo, s_hi):
        det = detection_image(sub, rms, bad, 0.5 * (s_lo + s_hi), white=min(img.shape) < 64)
        labels, slices = segment(det, bad, float(settings.detect_thresh),
                                 int(settings.min_area), detect_snr)
        pad = int(np.ceil(3 * s_hi)) + 1
        return labels, cut_objects(sub, weights, labels, slices, det, pad)

    labels, objs = detect(s_lo, s_hi)
    if isinstance(settings.psf_sigma, str):  # "auto": the width of the frame's stars
        with threadpool_limits(1):
            s_ref, n_width = measure_width(sub, weights, labels, objs, noise, st)
        if np.isfinite(s_ref):
            st = dataclasses.replace(st, s_lo=s_ref / WIDTH_SPREAD, s_hi=s_ref * WIDTH_SPREAD)
            log.info("PSF width %.3f px from %d stars", s_ref, n_width)
            labels, objs = detect(st.s_lo, st.s_hi)
        else:
            log.warning("psf_sigma='auto': %d bright isolated stars (fewer than %d); the range "
                        "%s px is used", n_width, MIN_STARS, DEFAULT_PSF_SIGMA)
    log.info("%d objects detected", len(objs))
    n_stars = 0
    if isinstance(settings.psf, str) and settings.psf == "fitted":
        with threadpool_limits(1):
            profile, s_ref, tol, n_stars = fit_profile(sub, weights, labels, objs, noise, st)
        if profile is not None:
            st = dataclasses.replace(st, psf=profile, s_lo=s_ref / WIDTH_SPREAD,
                                     s_hi=s_ref * WIDTH_SPREAD,
                                     model_tolerance=max(st.model_tolerance, tol))
            log.info("fitted PSF from %d stars: amplitudes %s, widths %s x %.3f px, model "
                     "tolerance %.3f", n_stars, np.round(profile.amp, 3),
                     np.round(profile.ratio, 2), s_ref, st.model_tolerance)
    results = run_objects(objs, st, n_jobs, verbose)

    h, w = img.shape
    rows, screened = [], []
    model = bkg.background.copy() if error is None else np.where(bad, 0.0, bkg.background)
    smooth = ndimage.gaussian_filter(sub, st.s_lo)
    # an extended object's model is the smoothed image on its footprint grown by 2 px (its halo
    # below the detection isophote), on pixels no other object claims
    claimed = labels > 0
    # rows: x, y, sigma, flux, x_err, y_err, flux_err, extended, flags, family (parent rows
    # carry family number k, their children -k, 0 for none; catalogue.from_rows)
    families = 0

    def emit(ob, kind, res, pmodel, split=False):
        # split: a part of an extended object processed on its own (a blend of its parts)
        nonlocal families
        sl = (slice(ob.r0, ob.r0 + ob.patch.shape[0]), slice(ob.c0, ob.c0 + ob.patch.shape[1]))
        touches = bool((ob.r0 == 0 and ob.own[0].any()) or (ob.c0 == 0 and ob.own[:, 0].any())
                       or (sl[0].stop == h and ob.own[-1].any())
                       or (sl[1].stop == w and ob.own[:, -1].any()))
        near_own = ndimage.binary_dilation(ob.own, iterations=2)
        base = catmod.FLAG_MASKED * bool(bad[sl][near_own].any())
        if saturated is not None:
            base |= catmod.FLAG_SATURATED * bool(saturated[sl][near_own].any())
        if kind in ("extended", "capped"):
            blended = catmod.FLAG_BLENDED * (len(res) > 1 or split)
            for (x, y, s, f, xe, ye, fe), own in res:
                if not f > 2 * detect_snr * fe:
                    # a diffuse object is kept only at twice the point-source significance:
                    # the mesh's edge extrapolation leaves residuals of a few sigma
                    continue
                flags = base | blended | catmod.FLAG_EDGE * touches \
                    | catmod.FLAG_CAPPED * (kind == "capped")
                rows.append((x, y, s, f, xe, ye, fe, True, flags, 0))
                halo = ndimage.binary_dilation(own, iterations=2) & ~claimed[sl]
                grow = own | halo
                model[sl][grow] += smooth[sl][grow]
                claimed[sl] |= halo
        elif kind == "points":
            res, parents = res
            model[sl] += pmodel
            drop = _unsupported(res, bad, detect_snr)
            blended = catmod.FLAG_BLENDED * (int(np.sum(~drop)) > 1 or split)
            family = np.zeros(len(res), np.int64)
            for prow, part, kids in parents:
                families += 1
                family[kids] = families
                edge = (ob.r0 == 0 and part[0].any()) or (ob.c0 == 0 and part[:, 0].any()) \
                    or (sl[0].stop == h and part[-1].any()) \
                    or (sl[1].stop == w and part[:, -1].any())
                flags = base | catmod.FLAG_BLENDED | catmod.FLAG_EDGE * bool(edge)
                rows.append((*prow, False, flags, families))
            for (x, y, s, f, xe, ye, fe, at_bound), fam in zip(res[~drop], family[~drop],
                                                                strict=True):
                near = min(x, y, w - 1 - x, h - 1 - y) < 3 * s
                flags = base | blended | catmod.FLAG_AT_BOUND * bool(at_bound) \
                    | catmod.FLAG_EDGE * near
                rows.append((x, y, s, f, xe, ye, fe, False, flags, -fam))
    for ob, (kind, res, pmodel, scr) in zip(objs, results, strict=True):
        screened += scr
        if kind == "parts":
            for part, (k, r, m, s) in zip(*res, strict=True):
                screened += s
                emit(part, k, r, m, split=True)
        else:
            emit(ob, kind, res, pmodel)
    cat = catmod.from_rows(rows, img.shape)
    return Localisation(cat, model, bkg.global_background, noise, st.lam_factor * noise**2,
                        screened, bkg.background, rms, labels, st.psf, (st.s_lo, st.s_hi),
                        n_stars)


def _unsupported(rows, bad, detect_snr):
    """Point sources of one object that the observed pixels do not support: centred on a masked
    pixel with flux below ``detect_snr`` flux errors, while another source of the object is
    kept. A fit next to a masked band (saturated columns) can put such a source on the band,
    where nothing constrains it, splitting a star at the band's edge in two; a lone star under
    a mask is kept (flagged masked)."""
    h, w = bad.shape
    iy = np.clip(np.rint(rows[:, 1]), 0, h - 1).astype(np.intp)
    ix = np.clip(np.rint(rows[:, 0]), 0, w - 1).astype(np.intp)
    # sources without an uncertainty (refine=False) are kept
    weak = bad[iy, ix] & np.isfinite(rows[:, 6]) & ~(rows[:, 3] > detect_snr * rows[:, 6])
    if weak.all():  # keep the most significant one
        with np.errstate(divide="ignore", invalid="ignore"):
            weak[np.argmax(np.nan_to_num(rows[:, 3] / rows[:, 6], nan=-np.inf))] = False
    return weak


def localise(image, settings=None, *, noise_sigma=None, mask=None, error=None, wcs=None,
             **options):
    """Find point sources and extended objects: a catalogue with uncertainties and flags.

    Parameters
    ----------
    image : array-like of shape (height, width)
        NaN and infinite pixels are ignored.
    settings : LocalisationSettings, optional
        Tuning settings (:class:`cvfs.astro.LocalisationSettings`; its defaults when None):
        ``psf_sigma`` (PSF width or range in pixels, or ``"auto"``), ``n_atoms`` (atoms per 28 x 28
        patch; the paper: 10,000), ``random_state``, ``n_jobs`` (processes, -1 = one per CPU)
        and the detection and fit settings.
    noise_sigma : float, optional
        Noise standard deviation; a noise map is estimated from the image when None.
    mask : ndarray of bool of shape (height, width), optional
        True = ignore the pixel.
    error : ndarray of shape (height, width), optional
        Noise standard deviation per pixel.
    wcs : astropy.wcs.WCS, optional
        Adds ``ra``, ``dec`` (degrees) from ``wcs.pixel_to_world_values(x, y)``.
    **options
        Fields of :class:`cvfs.astro.LocalisationSettings` overriding ``settings``, and
        ``verbose``.

    Returns
    -------
    catalogue : structured ndarray of :func:`cvfs.astro.catalogue.catalogue_dtype`
        x (column), y (row) with pixel centres at integer coordinates from 0, sigma, flux,
        x_err, y_err, flux_err, snr, extended, flags (:data:`cvfs.astro.catalogue.FLAGS`), id,
        parent, n_children and, with ``wcs``, ra, dec; sorted by decreasing flux. One row per
        source by default; ``levels="objects"`` or ``"all"`` gives the parent rows of blends
        (:mod:`cvfs.astro.catalogue`).

    Raises
    ------
    TypeError, ValueError
        See :func:`localise_and_denoise`.

    References
    ----------
    Jiang & Chen, Sec. 5-B/5-C (sampled PSF dictionary, SBL source localisation); Bertin &
    Arnouts 1996 (background, detection).
    """
    return localise_and_denoise(image, settings, noise_sigma=noise_sigma, mask=mask, error=error,
                                wcs=wcs, **options).catalogue
