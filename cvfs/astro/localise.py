"""Source localisation and denoising: detection, then screened SBL over sampled PSFs per object.

Pipeline:

1. background and noise maps (:mod:`cvfs.astro.background`; ``error=`` or ``noise_sigma=``
   replace the noise map); NaN pixels and ``mask=`` are ignored everywhere;
2. detection (:mod:`cvfs.astro.detect`): matched-filter detection image, threshold, connected
   components; only these objects are fitted, empty sky never is;
3. per object, a patch around its footprint (pixels of other objects and masked pixels get zero
   weight) is tested for extent: a fit of one integrated Gaussian per detection peak with widths
   up to ``extended_factor`` times the PSF range; an object with a significant component wider than
   the PSF range is *extended* and becomes one row (footprint flux, centroid, moments);
4. a point-like (or crowded) object is fitted as in the SBL paper, per ``tile`` of the patch:
   nonnegative SBL (Alg. 1, lambda = ``lam_factor`` sigma^2, see :data:`LAMBDA_FACTOR`) with
   dynamic gap-safe screening over sampled atoms (x0, y0, sigma) of the integrated Gaussian PSF
   (eq. 66) centred on the footprint grown by 3 px -> atoms grouped into candidates -> weighted
   nonlinear least squares with the analytic Jacobian, pruning, merging and residual peaks
   (:mod:`cvfs.astro.fit`); uncertainties from the inverse Fisher information; sources are kept
   by the tile whose core contains them and when they lie on the object's footprint; more than
   ``max_sources`` sources make the object extended;
5. a point-fitted object with several sources is split into parts by the watershed of the
   extended objects; a part holding two or more sources becomes a parent row (isophotal centroid
   and flux of its pixels) whose children are those sources (:mod:`cvfs.astro.catalogue`);
6. objects are independent: ``n_jobs`` processes share them, BLAS runs on one thread per process.
"""

import logging
import math
import numbers
import os
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage
from threadpoolctl import threadpool_limits

from cvfs.astro import catalogue as catmod
from cvfs.astro.background import estimate_background
from cvfs.astro.detect import detection_image, moments, segment
from cvfs.astro.dictionary import PSFDictionary, _sigma_range, sample_atoms
from cvfs.astro.fit import fit_sources, model_and_jac, refine, significance, uncertainties
from cvfs.base import check_random_state
from cvfs.core.sbl import sbl_fit

__all__ = ["LAMBDA_FACTOR", "Localisation", "estimate_background_noise", "localise",
           "localise_and_denoise"]

log = logging.getLogger(__name__)

# the fit's model and Jacobian (the NumPy reference of the compiled fit), under the name the
# tests use
_model_and_jac = model_and_jac

#: lambda = LAMBDA_FACTOR * sigma^2. The Bayesian choice lambda = sigma^2 fits noise peaks (F1 of
#: the raw SBL atoms 0.45 on held-out scenes); with our gamma = 0 start the first penalty is
#: sqrt(lambda) per unit-norm atom, i.e. a matched-filter detection threshold of
#: sqrt(LAMBDA_FACTOR) sigma. Chosen on 20 held-out synthetic scenes
#: (benchmarks/astro/astro_lambda.py, seeds 3000-3019): the full pipeline's F1 is flat (0.989-0.990)
#: for factors 4-256 and its RMSE is lowest (0.109 px) for factors <= 16; 16 is the largest such
#: factor (fewest atoms).
LAMBDA_FACTOR = 16.0

#: smallest noise sigma relative to max |pixel| (float64 resolves 2.2e-16 of it): an estimate
#: below is raised to it, and a given ``noise_sigma`` or ``error`` below it is refused
_NOISE_FLOOR = 1e-12


@dataclass
class Localisation:
    """Result of :func:`localise_and_denoise`.

    Attributes
    ----------
    catalogue : structured ndarray of :func:`cvfs.astro.catalogue.catalogue_dtype`
        Sorted by decreasing flux; parent rows of blends included (``n_children`` > 0).
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


def estimate_background_noise(image):
    """Background level (sigma-clipped median) and noise sigma (wavelet MAD) of an image.

    Parameters
    ----------
    image : ndarray of shape (height, width)

    Returns
    -------
    background, noise_sigma : float

    References
    ----------
    Donoho & Johnstone, "Ideal spatial adaptation by wavelet shrinkage", 1994 (MAD estimator).
    """
    from skimage.restoration import estimate_sigma

    img = np.asarray(image, dtype=np.float64)
    peak = float(np.max(np.abs(img))) if img.size else 0.0
    if not np.isfinite(peak):
        raise ValueError("image has NaN or infinite pixels; mask or fill them first")
    if peak == 0.0:
        return 0.0, 0.0
    # estimates on the image scaled by a power of two (exact) to max |pixel| in [0.5, 1), then
    # mapped back: every step is relative to the image's own scale, and nothing overflows
    e = math.frexp(peak)[1]
    bg, sigma = _background_noise(np.ldexp(img, -e), estimate_sigma)
    return math.ldexp(bg, e), math.ldexp(sigma, e)


def _background_noise(img, estimate_sigma):
    """:func:`estimate_background_noise` of an image with max |pixel| in [0.5, 1)."""
    with warnings.catch_warnings():
        # a grey image 3 or 4 pixels wide is not a colour image
        warnings.filterwarnings("ignore", message=".*channel_axis is None")
        sigma = float(estimate_sigma(img))
    vals = img.ravel()
    med = float(np.median(vals))
    for _ in range(10):
        s = sigma if sigma > 0 else float(np.std(vals))
        keep = np.abs(vals - med) < 3.0 * s
        if keep.sum() < 10:
            break
        new = float(np.median(vals[keep]))
        if new == med:
            break
        med = new
        vals = vals[keep] if keep.sum() > 0.2 * img.size else vals
    if not sigma > 0:
        # no noise measurable: the MAD, else the float64 resolution of the image
        sigma = float(1.4826 * np.median(np.abs(img - med))) or _NOISE_FLOOR
    return med, max(sigma, _NOISE_FLOOR)


def _check_positive(name, value):
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number; got {value!r}")
    return float(value)


def _tile_starts(n, tile, overlap):
    """Tile starts along one axis and the core [lo, hi) of each tile (disjoint, covering)."""
    if n <= tile:
        return [(0, -np.inf, np.inf)]
    stride = tile - overlap
    starts = sorted(set(list(range(0, n - tile, stride)) + [n - tile]))
    mids = [(b + a + tile) / 2.0 for a, b in zip(starts[:-1], starts[1:], strict=True)]
    cuts = [-np.inf, *mids, np.inf]
    return [(s, cuts[i], cuts[i + 1]) for i, s in enumerate(starts)]


def _group_atoms(params, flux, radius=1.0):
    """Greedy flux-weighted grouping of atoms within ``radius`` -> (k, 4) x, y, sigma, flux."""
    order = np.argsort(-flux)
    groups = []
    for i in order:
        for g in groups:
            if np.hypot(*(g["c"] - params[i, :2])) <= radius:
                g["w"].append(i)
                ws = flux[g["w"]]
                g["c"] = (params[g["w"], :2] * ws[:, None]).sum(0) / ws.sum()
                break
        else:
            groups.append({"c": params[i, :2].copy(), "w": [i]})
    out = []
    for g in groups:
        ws = flux[g["w"]]
        out.append([*g["c"], float((params[g["w"], 2] * ws).sum() / ws.sum()), float(ws.sum())])
    return np.array(out).reshape(-1, 4)


@dataclass(frozen=True)
class _Settings:
    """Fit settings shared by every object (validated by :func:`localise_and_denoise`)."""

    s_lo: float
    s_hi: float
    n_atoms: int
    tile: int
    overlap: int
    lam_factor: float
    detect_snr: float
    sbl_iter: int
    refine: bool
    max_sources: int
    extended_factor: float
    seed: int
    margin: float = 1.0


@dataclass
class _Object:
    """One detected object: its patch (background subtracted), weights and footprint."""

    index: int
    r0: int
    c0: int
    patch: np.ndarray
    weights: np.ndarray
    own: np.ndarray
    peaks: np.ndarray


def _dictionary(cache, shape, st):
    """Atoms for a patch shape: the ``tile`` x ``tile`` dictionary of ``n_atoms`` atoms (seeded by
    ``seed``, so every process draws the same), cropped to the shape (same atom density)."""
    if shape not in cache:
        if "base" not in cache:
            base = (st.tile, st.tile)
            rng = np.random.default_rng(st.seed)
            cache["base"] = PSFDictionary(base, sample_atoms(base, st.n_atoms, (st.s_lo, st.s_hi),
                                                             margin=st.margin, random_state=rng))
        cache[shape] = cache["base"].crop(shape, st.margin)
    return cache[shape]


def _is_extended(ob, noise, st):
    """Fit one Gaussian per peak with widths up to ``extended_factor`` * s_hi: extended when
    significant components wider than 1.5 s_hi carry at least half of the fitted flux, or when
    at least two components, and at least half of them, are at the lower width bound."""
    peaks = ob.peaks[: st.max_sources]
    start = np.column_stack([peaks[:, 1], peaks[:, 0], np.full(len(peaks), st.s_hi),
                             np.maximum(ob.patch[peaks[:, 0], peaks[:, 1]], 0) * 4 * np.pi
                             * st.s_hi**2])
    src, _ = fit_sources(ob.patch, ob.weights, start, 0.0, st.s_lo,
                         st.extended_factor * st.s_hi, st.margin)
    sig = significance(src, ob.patch.shape, noise)
    wide = (src[:, 2] > 1.5 * st.s_hi) & (sig >= st.detect_snr)
    # blends of point sources with a missed peak get a component up to ~1.5 s_hi wide carrying a
    # third of the flux; galaxies one carrying nearly all of it (measured on synthetic blends
    # and the Hubble Deep Field)
    if src[wide, 3].sum() >= 0.5 * max(src[:, 3].sum(), 1e-300):
        return True
    # several components sharper than the narrowest PSF: resolved structure (as in the point fit,
    # see _process); the upper bound is not used here, a missed peak of a blend can reach it
    sharp = int(np.sum(src[:, 2] < st.s_lo * (1 + 1e-6)))
    return sharp >= 2 and 2 * sharp >= len(src)


def _widths_at_bounds(src, shape, noise, st):
    """True when at least three significant sources of a first fit, and two thirds of them, have
    their width at a bound of the PSF range."""
    sig = significance(src, shape, noise) >= st.detect_snr
    at = (src[:, 2] <= st.s_lo * (1 + 1e-6)) | (src[:, 2] >= st.s_hi * (1 - 1e-6))
    n = int(np.sum(at & sig))
    return n >= 3 and 3 * n >= 2 * int(sig.sum())


def _fit_point_sources(ob, noise, st, cache):
    """SBL + refinement per tile of the patch -> rows (x, y, sigma, flux, x_err, y_err, flux_err,
    at_bound), the model of the patch and the mean screening fraction per tile; rows and model
    are None when a tile's first fit has its widths at the bounds (:func:`_widths_at_bounds`)."""
    h, w = ob.patch.shape
    rows, cols = _tile_starts(h, st.tile, st.overlap), _tile_starts(w, st.tile, st.overlap)
    th, tw = min(st.tile, h), min(st.tile, w)
    dico = _dictionary(cache, (th, tw), st)
    lam = st.lam_factor * noise**2
    on_own = ndimage.binary_dilation(ob.own, iterations=2)
    # atoms are centred on the footprint grown by 3 px: a source is reported only on the
    # footprint grown by 2 px, and an atom centred farther out lies below the detection isophote
    near = ndimage.binary_dilation(ob.own, iterations=3)
    ax = np.clip(np.rint(dico.params[:, 0]), 0, tw - 1).astype(np.intp)
    ay = np.clip(np.rint(dico.params[:, 1]), 0, th - 1).astype(np.intp)
    screened, first = [], []
    # first pass: SBL candidates and a first fit of every tile; an object whose widths sit at the
    # bounds in any tile is not a sum of PSFs, so no tile is refined (the costly part of a galaxy)
    for r0, y_lo, y_hi in rows:
        for c0, x_lo, x_hi in cols:
            p = ob.patch[r0:r0 + th, c0:c0 + tw]
            wt = ob.weights[r0:r0 + th, c0:c0 + tw]
            if not (wt > 0).any():
                continue
            tdico = dico.subset(np.flatnonzero(near[r0 + ay, c0 + ax]))
            if tdico.shape[1] == 0:
                continue
            # sbl_iter reweighting steps are the stopping rule: the candidates are the atoms
            # of the code, which the later steps only sparsify (docs/methods.md)
            res = sbl_fit(tdico, (p * (wt > 0)).ravel(), lam, screening="gap", positive=True,
                          max_iter=st.sbl_iter, tol=1e-3, lasso_tol=1e-6, lasso_max_iter=100,
                          step_budget=True)
            screened.append(float(np.mean(res.screening)) if res.screening else 0.0)
            nz = np.flatnonzero(res.coef > 0)
            cand = _group_atoms(tdico.params[nz], res.coef[nz] * tdico.flux_per_unit[nz])
            cand = cand[np.argsort(-cand[:, 3])][: st.max_sources]
            src, bgt = cand, 0.0
            if st.refine:
                src, bgt = fit_sources(p, wt, cand, 0.0, st.s_lo, st.s_hi, st.margin)
                if _widths_at_bounds(src, p.shape, noise, st):
                    return None, None, screened
            first.append((r0, y_lo, y_hi, c0, x_lo, x_hi, src, bgt, tdico))
    out = []
    model = np.zeros((h, w))
    for r0, y_lo, y_hi, c0, x_lo, x_hi, src, bgt, tdico in first:
        p = ob.patch[r0:r0 + th, c0:c0 + tw]
        wt = ob.weights[r0:r0 + th, c0:c0 + tw]
        if st.refine:
            src, bgt = refine(p, wt, src, bgt, noise, tdico, st.s_lo, st.s_hi, st.margin,
                              st.detect_snr)
            err = uncertainties(p, wt, src, bgt, st.s_lo, st.s_hi, st.margin)
        else:
            err = (np.full(len(src), np.nan),) * 3 + (np.zeros(len(src), bool),)
        ry = [int(np.clip(np.ceil(v - 0.5), 0, h)) for v in (y_lo, y_hi)]
        rx = [int(np.clip(np.ceil(v - 0.5), 0, w)) for v in (x_lo, x_hi)]
        # sources, and the fitted background offset on the object's pixels
        tile_model = model_and_jac(np.r_[src.ravel(), 0.0], p.shape, jac=False)[0]
        tile_model += bgt * on_own[r0:r0 + th, c0:c0 + tw]
        model[ry[0]:ry[1], rx[0]:rx[1]] = tile_model[ry[0] - r0:ry[1] - r0,
                                                      rx[0] - c0:rx[1] - c0]
        for i, (x, y, s, f) in enumerate(src):
            gx, gy = x + c0, y + r0
            ix, iy = int(round(gx)), int(round(gy))
            if not (x_lo <= gx < x_hi and y_lo <= gy < y_hi and 0 <= ix < w and 0 <= iy < h
                    and on_own[iy, ix]):
                continue
            out.append((gx + ob.c0, gy + ob.r0, s, f, err[0][i], err[1][i], err[2][i],
                        err[3][i]))
    return np.array(out, dtype=np.float64).reshape(-1, 8), model, screened


def _moment_row(ob, own, rms_patch):
    x, y, cxx, cyy, _, flux = moments(ob.patch, own, ob.r0, ob.c0)
    var = rms_patch[own] ** 2
    flux_err = float(np.sqrt(var.sum()))
    rr, cc = np.nonzero(own)
    f = max(abs(flux), 1e-300)
    x_err = float(np.sqrt(np.sum((cc + ob.c0 - x) ** 2 * var)) / f)
    y_err = float(np.sqrt(np.sum((rr + ob.r0 - y) ** 2 * var)) / f)
    return (x, y, float(np.sqrt(max((cxx + cyy) / 2, 0.0))), flux, x_err, y_err, flux_err)


#: smallest share of an extended footprint's flux a deblended part must carry
DEBLEND_CONTRAST = 0.05


def _deblend(ob, st):
    """Parts of an extended footprint: watershed of the PSF-smoothed patch from its detection
    peaks at least 2 s_hi apart; a part carrying less than :data:`DEBLEND_CONTRAST` of the flux
    or with a peak less than ``detect_snr`` noise units above the saddle to a neighbour is merged
    into the neighbour it touches most. Returns a list of boolean footprints."""
    from skimage.segmentation import watershed

    peaks = []
    for r, c in ob.peaks[: st.max_sources]:
        if all(np.hypot(r - a, c - b) >= 2 * st.s_hi for a, b in peaks):
            peaks.append((r, c))
    if len(peaks) < 2:
        return [ob.own]
    smooth = ndimage.gaussian_filter(np.where(ob.weights > 0, ob.patch, 0.0), st.s_lo)
    markers = np.zeros(ob.own.shape, np.int32)
    for i, (r, c) in enumerate(peaks):
        markers[r, c] = i + 1
    lab = watershed(-smooth, markers, mask=ob.own)
    # noise of the smoothed image: the Gaussian's white-noise gain times the pixel noise
    noise = float(np.median(1.0 / ob.weights[ob.own & (ob.weights > 0)]))
    gain = 1.0 / (2.0 * np.sqrt(np.pi) * st.s_lo)
    pos = np.clip(ob.patch, 0.0, None)
    while True:
        ids = [i for i in np.unique(lab) if i > 0]
        if len(ids) < 2:
            break
        total = sum(float(pos[lab == i].sum()) for i in ids)
        weakest, score = None, np.inf
        for i in ids:
            part = lab == i
            ring = ndimage.binary_dilation(part) & ~part & (lab > 0)
            if not ring.any():
                continue
            saddle = float(smooth[ring].max())
            contrast = (float(smooth[part].max()) - saddle) / (noise * gain)
            share = float(pos[part].sum()) / max(total, 1e-300)
            if share < DEBLEND_CONTRAST or contrast < st.detect_snr:
                if share < score:
                    weakest, score = i, share
        if weakest is None:
            break
        part = lab == weakest
        ring = ndimage.binary_dilation(part) & ~part & (lab > 0)
        lab[part] = np.bincount(lab[ring]).argmax() if ring.any() else 0
    return [lab == i for i in np.unique(lab) if i > 0]


def _extended_row(ob, rms_patch, st=None):
    """Rows (x, y, sigma, flux, x_err, y_err, flux_err) of an extended object: one per
    deblended part (:func:`_deblend`) when ``st`` is given, else one for the footprint."""
    parts = [ob.own] if st is None else _deblend(ob, st)
    return [(_moment_row(ob, own, rms_patch), own) for own in parts]


#: dictionaries of the most recent fit settings in this process: {settings: {shape: dictionary}}
_DICTIONARIES = {}


def _process(obj_list, st, pin_blas=True):
    """Fit a list of objects (one process); returns per object (kind, rows, model, screening).
    ``pin_blas`` limits BLAS to one thread here; False when the caller already does (setting the
    limit scans the process's libraries, a few ms per call)."""
    if not pin_blas:
        return _process_objects(obj_list, st)
    with threadpool_limits(1):
        return _process_objects(obj_list, st)


def _process_objects(obj_list, st):
    """:func:`_process` with BLAS already limited."""
    if st not in _DICTIONARIES:
        _DICTIONARIES.clear()  # one set of settings at a time bounds the memory
        _DICTIONARIES[st] = {}
    cache, results = _DICTIONARIES[st], []
    for ob in obj_list:
        noise = float(np.median(1.0 / ob.weights[ob.own & (ob.weights > 0)])) \
            if (ob.own & (ob.weights > 0)).any() else 1.0
        rms_patch = np.where(ob.weights > 0, 1.0 / np.maximum(ob.weights, 1e-300), 0.0)
        if st.refine and _is_extended(ob, noise, st):
            results.append(("extended", _extended_row(ob, rms_patch, st), None, []))
            continue
        rows, model, screened = _fit_point_sources(ob, noise, st, cache)
        if rows is None:
            results.append(("extended", _extended_row(ob, rms_patch, st), None, screened))
            continue
        at_bound = int(np.sum(rows[:, 7] > 0)) if len(rows) else 0
        if at_bound >= 2 and 2 * at_bound >= len(rows):
            # several sources with the width at a bound: the object is not a sum of PSFs
            results.append(("extended", _extended_row(ob, rms_patch, st), None, screened))
        elif len(rows) > st.max_sources:
            results.append(("capped", _extended_row(ob, rms_patch), None, screened))
        elif len(rows) == 0:
            results.append(("none", None, None, screened))
        else:
            results.append(("points", (rows, _parents(ob, rows, rms_patch, st)), model,
                            screened))
    return results


def _parents(ob, rows, rms_patch, st):
    """Parent rows of a point-fitted object: its deblended parts (:func:`_deblend`, as for an
    extended object) holding two or more of the fitted sources ``rows``. Returns a list of
    (row (x, y, sigma, flux, x_err, y_err, flux_err), part footprint, indices of the children in
    ``rows``); each source belongs to the part nearest to its pixel."""
    if len(rows) < 2:
        return []
    parts = _deblend(ob, st)
    lab = np.zeros(ob.own.shape, np.int32)
    for i, part in enumerate(parts):
        lab[part] = i + 1
    # label of the nearest part pixel, for sources fitted just outside the footprint
    _, (ir, ic) = ndimage.distance_transform_edt(lab == 0, return_indices=True)
    h, w = lab.shape
    r = np.clip(np.rint(rows[:, 1] - ob.r0).astype(np.intp), 0, h - 1)
    c = np.clip(np.rint(rows[:, 0] - ob.c0).astype(np.intp), 0, w - 1)
    which = lab[ir[r, c], ic[r, c]]
    out = []
    for i, part in enumerate(parts):
        kids = np.flatnonzero(which == i + 1)
        if len(kids) >= 2:
            out.append((_moment_row(ob, part, rms_patch), part, kids))
    return out


def _objects(sub, weights, labels, slices, det, pad):
    """Patches of the detected objects, with weights zero outside the image, on masked pixels
    and on other objects' footprints."""
    h, w = sub.shape
    peak_mask = (det == ndimage.maximum_filter(det, size=3)) & (labels > 0)
    out = []
    for i, sl in enumerate(slices):
        r0, r1 = max(sl[0].start - pad, 0), min(sl[0].stop + pad, h)
        c0, c1 = max(sl[1].start - pad, 0), min(sl[1].stop + pad, w)
        lab = labels[r0:r1, c0:c1]
        own = lab == i + 1
        wt = np.where((lab == 0) | own, weights[r0:r1, c0:c1], 0.0)
        pk = np.argwhere(peak_mask[r0:r1, c0:c1] & own)
        pk = pk[np.argsort(-det[r0:r1, c0:c1][pk[:, 0], pk[:, 1]])]
        out.append(_Object(i + 1, r0, c0, np.where(wt > 0, sub[r0:r1, c0:c1], 0.0), wt, own, pk))
    return out


def _run(objs, st, n_jobs, verbose=False):
    """:func:`_process` over the objects, in ``n_jobs`` processes, with a progress bar when
    ``verbose``; results in the objects' order."""
    from tqdm.auto import tqdm

    out = [None] * len(objs)
    with tqdm(total=len(objs), desc="objects", unit="obj", disable=not verbose) as bar:
        if n_jobs == 1 or len(objs) < 2:
            with threadpool_limits(1):
                for i, ob in enumerate(objs):
                    out[i] = _process([ob], st, pin_blas=False)[0]
                    bar.update(1)
            return out
        # interleaved chunks balance large and small objects; results are put back in order
        n_chunks = min(len(objs), 16 * n_jobs)
        with ProcessPoolExecutor(max_workers=n_jobs) as ex:
            futures = {ex.submit(_process, objs[i::n_chunks], st): i for i in range(n_chunks)}
            for fut in as_completed(futures):
                i = futures[fut]
                out[i::n_chunks] = fut.result()
                bar.update(len(out[i::n_chunks]))
    return out


def localise_and_denoise(image, *, psf_sigma=(1.0, 2.0), n_atoms=10_000, noise_sigma=None,
                         random_state=None, mask=None, error=None, wcs=None, n_jobs=1, tile=28,
                         overlap=8, lam_factor=LAMBDA_FACTOR, detect_snr=5.0, detect_thresh=3.0,
                         min_area=5, box=None, max_sources=30, extended_factor=4.0, sbl_iter=5,
                         refine=True, verbose=False):
    """Localise point sources and extended objects and denoise the image (one run, both outputs).

    Parameters
    ----------
    image : array-like of shape (height, width)
        Intensities (any units); NaN and infinite pixels are ignored.
    psf_sigma : float or (float, float)
        PSF width in pixels, or the range of widths to sample.
    n_atoms : int
        Atoms per ``tile`` x ``tile`` patch of the dictionary (the same density for other sizes).
    noise_sigma : float, optional
        Noise standard deviation of every pixel; a noise map is estimated when None.
    random_state : None, int or numpy.random.Generator
        Seeds the dictionary sampling (grid jitter).
    mask : ndarray of bool of shape (height, width), optional
        True where pixels must be ignored (bad pixels, saturated stars, borders).
    error : ndarray of shape (height, width), optional
        Noise standard deviation per pixel (overrides ``noise_sigma`` and the estimated map).
    wcs : astropy.wcs.WCS, optional
        Celestial WCS of the image: the catalogue gets ``ra`` and ``dec`` in degrees.
    n_jobs : int
        Processes fitting objects in parallel (-1 = one per CPU).
    tile, overlap : int
        Tile size and overlap in pixels of the SBL fits inside large objects.
    lam_factor : float
        lambda = lam_factor * noise_sigma^2.
    detect_snr : float
        Matched-filter SNR below which a fitted source is dropped and smallest peak SNR of a
        detected object.
    detect_thresh : float
        Detection threshold of the footprints, in noise units of the detection image.
    min_area : int
        Smallest footprint in pixels.
    box : int, optional
        Box size of the background mesh (:func:`cvfs.astro.background.default_box_size`).
    max_sources : int
        Most point sources per object; an object needing more is reported as extended.
    extended_factor : float
        Widest component of the extent test, in units of the largest PSF width.
    sbl_iter : int
        Reweighting steps of SBL per tile.
    refine : bool
        Continuous refinement. False reports the grouped SBL atoms on the footprints as they are
        (the sampled-dictionary estimate of the thesis; for ablations), without extent test.
    verbose : bool
        A progress bar over the detected objects (tqdm, on stderr).

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
        If ``image`` is not a numeric array.
    ValueError
        If ``image`` is not 2-D (a colour image or a cube), is smaller than 4 x 4, is empty, has no
        finite pixel or is constant; if ``mask`` or ``error`` do not have the image's shape, if
        ``noise_sigma`` (or the median of ``error``) is below 1e-12 of the largest |pixel|, or a
        parameter is out of range.
    """
    img = _check_image(image)
    s_lo, s_hi = _sigma_range(psf_sigma)
    for name, val, least in (("n_atoms", n_atoms, 1), ("tile", tile, 8), ("min_area", min_area, 1),
                             ("max_sources", max_sources, 1), ("sbl_iter", sbl_iter, 1)):
        if not isinstance(val, numbers.Integral) or val < least:
            raise ValueError(f"{name} must be " + ("a positive int" if least == 1 else
                                                   f"an int >= {least}") + f"; got {val!r}")
    if not isinstance(overlap, numbers.Integral) or not 0 <= overlap < tile // 2:
        raise ValueError(f"overlap must be an int in [0, tile // 2); got {overlap!r}")
    if not isinstance(n_jobs, numbers.Integral) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be a positive int or -1; got {n_jobs!r}")
    lam_factor = _check_positive("lam_factor", lam_factor)
    detect_snr = _check_positive("detect_snr", detect_snr)
    detect_thresh = _check_positive("detect_thresh", detect_thresh)
    extended_factor = _check_positive("extended_factor", extended_factor)
    if extended_factor <= 1.5:
        raise ValueError(f"extended_factor must be > 1.5; got {extended_factor!r}")
    rng = check_random_state(random_state)
    if noise_sigma is not None:
        noise_sigma = _check_positive("noise_sigma", noise_sigma)
    bad = ~np.isfinite(img)
    if mask is not None:
        bad |= _check_map("mask", mask, img.shape, boolean=True)
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
    if noise < _NOISE_FLOOR * peak:
        raise ValueError(f"{name}={noise!r} is below the float64 resolution of the image "
                         f"({_NOISE_FLOOR:g} of its largest |pixel|, {peak!r})")
    if wcs is not None and not hasattr(wcs, "pixel_to_world_values"):
        raise ValueError(f"wcs must be an astropy.wcs.WCS; got {type(wcs).__name__}")
    n_jobs = (os.cpu_count() or 1) if n_jobs == -1 else int(n_jobs)
    st = _Settings(s_lo, s_hi, int(n_atoms), int(tile), int(overlap), lam_factor, detect_snr,
                   int(sbl_iter), bool(refine), int(max_sources), extended_factor,
                   int(rng.integers(2**31)))
    # work in units of the noise: the image divided by a power of two near its noise sigma
    # (exact), so every threshold and tolerance is relative to the data; fluxes, the denoised
    # image, the background and noise maps, the noise and lambda are mapped back to input units
    e = int(round(math.log2(noise)))
    res = _localise_normalised(
        np.ldexp(img, -e), bad, None if error is None else np.ldexp(error, -e),
        None if noise_sigma is None else math.ldexp(noise_sigma, -e), st, detect_thresh,
        min_area, box, n_jobs, verbose)
    cat = res.catalogue
    for f in ("flux", "flux_err"):
        cat[f] = np.ldexp(cat[f], e)
    with np.errstate(over="ignore"):
        res.model = np.ldexp(res.model, e)
        res.background_map = np.ldexp(res.background_map, e)
        res.rms_map = np.ldexp(res.rms_map, e)
    res.background = math.ldexp(res.background, e)
    res.noise_sigma = math.ldexp(res.noise_sigma, e)
    res.lam = lam_factor * res.noise_sigma * res.noise_sigma  # inf past 1e154 (float64)
    if wcs is not None:
        res.catalogue = catmod.add_sky_coordinates(cat, wcs)
    return res


def _localise_normalised(img, bad, error, noise_sigma, st, detect_thresh, min_area, box, n_jobs,
                         verbose=False):
    """:func:`localise_and_denoise` of checked parameters, on an image whose noise sigma is
    about 1 (between 0.7 and 1.4); NaN pixels are in ``bad``."""
    s_lo, s_hi, detect_snr = st.s_lo, st.s_hi, st.detect_snr
    with threadpool_limits(1):
        bkg = estimate_background(img, mask=bad, box=box)
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
    det = detection_image(sub, rms, bad, 0.5 * (s_lo + s_hi), white=min(img.shape) < 64)
    labels, slices = segment(det, bad, detect_thresh, min_area, detect_snr)
    pad = int(np.ceil(3 * s_hi)) + 1
    objs = _objects(sub, weights, labels, slices, det, pad)
    log.info("%d objects detected", len(objs))
    results = _run(objs, st, n_jobs, verbose)

    h, w = img.shape
    rows, screened = [], []
    model = bkg.background.copy() if error is None else np.where(bad, 0.0, bkg.background)
    smooth = ndimage.gaussian_filter(sub, s_lo)
    # an extended object's model is the smoothed image on its footprint grown by 2 px (its halo
    # below the detection isophote), on pixels no other object claims
    claimed = labels > 0
    # parent rows carry family number k in column 9, their children -k (0: no family)
    families = 0
    for ob, (kind, res, pmodel, scr) in zip(objs, results, strict=True):
        screened += scr
        sl = (slice(ob.r0, ob.r0 + ob.patch.shape[0]), slice(ob.c0, ob.c0 + ob.patch.shape[1]))
        touches = bool((ob.r0 == 0 and ob.own[0].any()) or (ob.c0 == 0 and ob.own[:, 0].any())
                       or (sl[0].stop == h and ob.own[-1].any())
                       or (sl[1].stop == w and ob.own[:, -1].any()))
        masked = bool(bad[sl][ndimage.binary_dilation(ob.own, iterations=2)].any())
        base = catmod.FLAG_MASKED * masked
        if kind in ("extended", "capped"):
            blended = catmod.FLAG_BLENDED * (len(res) > 1)
            for (x, y, s, f, xe, ye, fe), own in res:
                if not f > 2 * detect_snr * fe:
                    # a diffuse object is kept only at twice the point-source significance:
                    # the mesh's edge extrapolation leaves residuals of a few sigma
                    continue
                flags = base | blended | catmod.FLAG_EDGE * touches \
                    | catmod.FLAG_CAPPED * (kind == "capped")
                rows.append((x, y, s, f, xe, ye, fe, True, flags, 0, 0))
                halo = ndimage.binary_dilation(own, iterations=2) & ~claimed[sl]
                grow = own | halo
                model[sl][grow] += smooth[sl][grow]
                claimed[sl] |= halo
        elif kind == "points":
            res, parents = res
            model[sl] += pmodel
            blended = catmod.FLAG_BLENDED * (len(res) > 1)
            family = np.zeros(len(res), np.int64)
            for prow, part, kids in parents:
                families += 1
                family[kids] = families
                edge = (ob.r0 == 0 and part[0].any()) or (ob.c0 == 0 and part[:, 0].any()) \
                    or (sl[0].stop == h and part[-1].any()) \
                    or (sl[1].stop == w and part[:, -1].any())
                flags = base | catmod.FLAG_BLENDED | catmod.FLAG_EDGE * bool(edge)
                rows.append((*prow, False, flags, families, len(kids)))
            for (x, y, s, f, xe, ye, fe, at_bound), fam in zip(res, family, strict=True):
                near = min(x, y, w - 1 - x, h - 1 - y) < 3 * s
                flags = base | blended | catmod.FLAG_AT_BOUND * bool(at_bound) \
                    | catmod.FLAG_EDGE * near
                rows.append((x, y, s, f, xe, ye, fe, False, flags, -fam, 0))
    cat = catmod.empty_catalogue(len(rows))
    if rows:
        arr = np.array(rows, dtype=np.float64)
        for j, name in enumerate(("x", "y", "sigma", "flux", "x_err", "y_err", "flux_err")):
            cat[name] = arr[:, j]
        cat["extended"] = arr[:, 7] > 0
        cat["flags"] = arr[:, 8].astype(np.int32)
        with np.errstate(divide="ignore", invalid="ignore"):
            cat["snr"] = cat["flux"] / cat["flux_err"]
        inside = (cat["x"] >= -0.5) & (cat["x"] < w - 0.5) & (cat["y"] >= -0.5) \
            & (cat["y"] < h - 0.5)
        fam = arr[:, 9].astype(np.int64)
        order = np.argsort(-cat["flux"][inside], kind="stable")
        cat = _link_families(cat[inside][order], fam[inside][order])
    return Localisation(cat, model, bkg.global_background, noise, st.lam_factor * noise**2,
                        screened, bkg.background, rms, labels)


def _link_families(cat, fam):
    """Set ``id`` (1..n in row order), ``parent`` and ``n_children`` of a catalogue whose parent
    rows have ``fam`` k > 0 and their children -k (0: no family). A parent left with fewer than
    two children (the others were outside the frame) is dropped and its child becomes a plain
    row."""
    cat = cat.copy()
    cat["id"] = np.arange(1, len(cat) + 1)
    ids = np.zeros(int(np.abs(fam).max(initial=0)) + 1, np.int64)
    ids[fam[fam > 0]] = cat["id"][fam > 0]
    kid = fam < 0
    cat["parent"] = 0
    cat["parent"][kid] = ids[-fam[kid]]
    cat["n_children"] = np.bincount(cat["parent"], minlength=len(cat) + 1)[cat["id"]]
    lone = (fam > 0) & (cat["n_children"] < 2)
    if not lone.any():
        return cat
    cat["parent"][np.isin(cat["parent"], cat["id"][lone])] = 0
    cat = cat[~lone]
    remap = np.zeros(len(lone) + 1, np.int64)
    remap[cat["id"]] = np.arange(1, len(cat) + 1)
    cat["id"] = remap[cat["id"]]
    cat["parent"] = remap[cat["parent"]]
    cat["n_children"] = np.bincount(cat["parent"], minlength=len(cat) + 1)[cat["id"]]
    return cat


def localise(image, *, psf_sigma=(1.0, 2.0), n_atoms=10_000, noise_sigma=None,
             random_state=None, mask=None, error=None, wcs=None, n_jobs=1, **options):
    """Find point sources and extended objects: a catalogue with uncertainties and flags.

    Parameters
    ----------
    image : array-like of shape (height, width)
        NaN and infinite pixels are ignored.
    psf_sigma : float or (float, float)
        PSF width (pixels) or the range sampled by the dictionary.
    n_atoms : int
        Dictionary atoms per 28 x 28 patch (the paper: 10,000 atoms for 28 x 28 images).
    noise_sigma : float, optional
        Noise standard deviation; a noise map is estimated from the image when None.
    random_state : None, int or numpy.random.Generator
    mask : ndarray of bool of shape (height, width), optional
        True = ignore the pixel.
    error : ndarray of shape (height, width), optional
        Noise standard deviation per pixel.
    wcs : astropy.wcs.WCS, optional
        Adds ``ra``, ``dec`` (degrees) from ``wcs.pixel_to_world_values(x, y)``.
    n_jobs : int
        Processes (-1 = one per CPU).
    **options
        The other keywords of :func:`localise_and_denoise`.

    Returns
    -------
    catalogue : structured ndarray of :func:`cvfs.astro.catalogue.catalogue_dtype`
        x (column), y (row) with pixel centres at integer coordinates from 0, sigma, flux,
        x_err, y_err, flux_err, snr, extended, flags (:data:`cvfs.astro.catalogue.FLAGS`), id,
        parent, n_children (parent rows of blends and their children: :func:`cvfs.astro.leaves`
        keeps one row per source) and, with ``wcs``, ra, dec; sorted by decreasing flux.

    Raises
    ------
    TypeError, ValueError
        See :func:`localise_and_denoise`.

    References
    ----------
    Jiang & Chen, Sec. 5-B/5-C (sampled PSF dictionary, SBL source localisation); Bertin &
    Arnouts 1996 (background, detection).
    """
    return localise_and_denoise(image, psf_sigma=psf_sigma, n_atoms=n_atoms,
                                noise_sigma=noise_sigma, random_state=random_state, mask=mask,
                                error=error, wcs=wcs, n_jobs=n_jobs, **options).catalogue
