"""Detected objects: their patches, the extent test and the per-object fit, in processes.

Each detected object is cut out with a margin (pixels of other objects and masked pixels get zero
weight) and tested for extent: a fit of one integrated Gaussian per detection peak with widths up
to ``extended_factor`` times the PSF range. Extended objects become deblended moment rows
(:mod:`cvfs.astro.deblend`); one of several deblended parts is processed part by part (a star
beside a galaxy becomes a point source, the galaxy a moment row). Point-like objects get the
fast path of :mod:`cvfs.astro.fastfit` (one PSF per detection peak) and, when it does not
explain them, the tiled fit of
:mod:`cvfs.astro.pointfit` (SBL candidates in an object of one tile, detection peaks in an
object of several). Objects are independent: ``n_jobs`` processes share them, BLAS runs
on one thread per process.
"""

from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from threadpoolctl import threadpool_limits

from cvfs.astro.deblend import deblend, extended_rows, parents
from cvfs.astro.fastfit import fit_isolated
from cvfs.astro.fit import fit_sources, significance
from cvfs.astro.pointfit import fit_point_sources, tile_starts

__all__ = ["cut_objects", "is_extended", "process_objects", "run_objects", "source_cap"]


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
    #: detection SNR at each of ``peaks``
    peak_snr: np.ndarray = None



def is_extended(ob, noise, st):
    """Fit one Gaussian per peak with widths up to ``extended_factor`` * s_hi: extended when
    significant components wider than 1.5 s_hi carry at least half of the fitted flux, or when
    at least two components, and at least half of them, are at the lower width bound."""
    return _extent_fit(ob, noise, st)[0]


def _extent_fit(ob, noise, st):
    """:func:`is_extended` and its fit: (extended, sources (k, 4), constant)."""
    peaks = ob.peaks[: st.max_sources]
    start = np.column_stack([peaks[:, 1], peaks[:, 0], np.full(len(peaks), st.s_hi),
                             np.maximum(ob.patch[peaks[:, 0], peaks[:, 1]], 0) * 4 * np.pi
                             * st.s_hi**2])
    src, bg = fit_sources(ob.patch, ob.weights, start, 0.0, st.s_lo,
                          st.extended_factor * st.s_hi, st.margin, profile=st.psf)
    sig = significance(src, ob.patch.shape, noise, st.psf)
    wide = (src[:, 2] > 1.5 * st.s_hi) & (sig >= st.detect_snr)
    # blends of point sources with a missed peak get a component up to ~1.5 s_hi wide carrying a
    # third of the flux; galaxies one carrying nearly all of it (measured on synthetic blends
    # and the Hubble Deep Field)
    if src[wide, 3].sum() >= 0.5 * max(src[:, 3].sum(), 1e-300):
        return True, src, bg
    # several components sharper than the narrowest PSF: resolved structure (as in the point fit,
    # see process_objects); the upper bound is not used here, a missed peak of a blend can reach it
    sharp = int(np.sum(src[:, 2] < st.s_lo * (1 + 1e-6)))
    return sharp >= 2 and 2 * sharp >= len(src), src, bg


def source_cap(shape, st):
    """Most point sources an object of patch ``shape`` may hold before it counts as extended:
    ``max_sources`` per fitted tile (:func:`cvfs.astro.pointfit.tile_starts`), so a large
    footprint of a crowded or nebulous field keeps the stars of every tile."""
    h, w = shape
    return st.max_sources * len(tile_starts(h, st.tile, st.overlap)) \
        * len(tile_starts(w, st.tile, st.overlap))


#: dictionaries of the most recent fit settings in this process: {settings: {shape: dictionary}}
_DICTIONARIES = {}


def process(obj_list, st, pin_blas=True):
    """Fit a list of objects (one process); returns per object (kind, rows, model, screening).
    ``pin_blas`` limits BLAS to one thread here; False when the caller already does (setting the
    limit scans the process's libraries, a few ms per call)."""
    if not pin_blas:
        return process_objects(obj_list, st)
    with threadpool_limits(1):
        return process_objects(obj_list, st)


def process_objects(obj_list, st, split=True):
    """:func:`process` with BLAS already limited. An extended object of several deblended parts
    (:func:`cvfs.astro.deblend.deblend`) gives ``("parts", (sub-objects, their results), None,
    [])``, each part processed as an object of its own (``split=False``: not split again)."""
    if st not in _DICTIONARIES:
        _DICTIONARIES.clear()  # one set of settings at a time bounds the memory
        _DICTIONARIES[st] = {}
    cache, results = _DICTIONARIES[st], []
    for ob in obj_list:
        noise = float(np.median(1.0 / ob.weights[ob.own & (ob.weights > 0)])) \
            if (ob.own & (ob.weights > 0)).any() else 1.0
        rms_patch = np.where(ob.weights > 0, 1.0 / np.maximum(ob.weights, 1e-300), 0.0)
        if st.refine:
            extended, src, bg = _extent_fit(ob, noise, st)
            if extended:
                parts = deblend(ob, st) if split else [ob.own]
                if len(parts) < 2:
                    results.append(("extended", extended_rows(ob, rms_patch), None, []))
                else:
                    # a blend of galaxies and stars: each part is tested and fitted on its own
                    subs = [_part(ob, part) for part in parts]
                    results.append(("parts", (subs, process_objects(subs, st, split=False)),
                                    None, []))
                continue
            if st.fast_path:
                rows, model = fit_isolated(ob, noise, st, src, bg)
                if rows is not None and not split and not _one_star(rows, st):
                    results.append(("extended", extended_rows(ob, rms_patch), None, []))
                    continue
                if rows is not None:
                    results.append(("points", (rows, parents(ob, rows, rms_patch, st)), model,
                                    []))
                    continue
        rows, model, screened = fit_point_sources(ob, noise, st, cache)
        if rows is None:
            results.append(("extended", extended_rows(ob, rms_patch, st if split else None), None,
                            screened))
            continue
        at_bound = int(np.sum(rows[:, 7] > 0)) if len(rows) else 0
        # several sources with the width at a bound: the object is not a sum of PSFs; a part
        # of an extended object that is not one star holds diffuse light
        if at_bound >= 2 and 2 * at_bound >= len(rows) or not (split or _one_star(rows, st)):
            results.append(("extended", extended_rows(ob, rms_patch, st if split else None), None,
                            screened))
        elif len(rows) > source_cap(ob.patch.shape, st):
            results.append(("capped", extended_rows(ob, rms_patch), None, screened))
        elif len(rows) == 0:
            results.append(("none", None, None, screened))
        else:
            results.append(("points", (rows, parents(ob, rows, rms_patch, st)), model,
                            screened))
    return results


def _one_star(rows, st):
    """Whether fitted ``rows`` are one source narrower than the widest PSF: what a deblended part
    of an extended object must be to count as a star."""
    return len(rows) == 1 and bool(rows[0, 2] < st.s_hi * (1 - 1e-6))


def _part(ob, part):
    """The object restricted to one deblended part: the other parts' pixels get zero weight, the
    part keeps its detection peaks."""
    wt = np.where(ob.own & ~part, 0.0, ob.weights)
    keep = part[ob.peaks[:, 0], ob.peaks[:, 1]] if len(ob.peaks) else np.zeros(0, bool)
    if not keep.any():  # a part without a peak of its own: its brightest pixel
        r, c = np.unravel_index(np.argmax(np.where(part, ob.patch, -np.inf)), part.shape)
        return _Object(ob.index, ob.r0, ob.c0, ob.patch, wt, part, np.array([[r, c]]),
                       np.zeros(1))
    snr = ob.peak_snr[keep] if ob.peak_snr is not None else None
    return _Object(ob.index, ob.r0, ob.c0, ob.patch, wt, part, ob.peaks[keep], snr)


def cut_objects(sub, weights, labels, slices, det, pad):
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
        snr = det[r0:r1, c0:c1][pk[:, 0], pk[:, 1]]
        order = np.argsort(-snr)
        out.append(_Object(i + 1, r0, c0, np.where(wt > 0, sub[r0:r1, c0:c1], 0.0), wt, own,
                           pk[order], snr[order]))
    return out


def run_objects(objs, st, n_jobs, verbose=False):
    """:func:`process` over the objects, in ``n_jobs`` processes, with a progress bar when
    ``verbose``; results in the objects' order."""
    from tqdm.auto import tqdm

    out = [None] * len(objs)
    with tqdm(total=len(objs), desc="objects", unit="obj", disable=not verbose) as bar:
        if n_jobs == 1 or len(objs) < 2:
            with threadpool_limits(1):
                for i, ob in enumerate(objs):
                    out[i] = process([ob], st, pin_blas=False)[0]
                    bar.update(1)
            return out
        # interleaved chunks balance large and small objects; results are put back in order
        n_chunks = min(len(objs), 16 * n_jobs)
        with ProcessPoolExecutor(max_workers=n_jobs) as ex:
            futures = {ex.submit(process, objs[i::n_chunks], st): i for i in range(n_chunks)}
            for fut in as_completed(futures):
                i = futures[fut]
                out[i::n_chunks] = fut.result()
                bar.update(len(out[i::n_chunks]))
    return out
