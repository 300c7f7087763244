"""Deblending of a detected object into parts, and the rows of extended objects and blend parents.

An extended footprint is cut by the watershed of its PSF-smoothed pixels from its detection peaks;
weak parts (little flux or a low peak above the saddle) are merged into their neighbours. Each
part becomes a row of isophotal moments (centroid, width, flux). A point-fitted object whose part
holds two or more fitted sources gives that part as a blend *parent* row of those sources.
"""

import numpy as np
from scipy import ndimage

from cvfs.astro.detect import moments

__all__ = ["DEBLEND_CONTRAST", "deblend", "extended_rows", "moment_row", "parents"]


def moment_row(ob, own, rms_patch):
    x, y, cxx, cyy, _, flux = moments(ob.patch, own, ob.r0, ob.c0)
    var = rms_patch[own] ** 2
    flux_err = float(np.sqrt(var.sum()))
    rr, cc = np.nonzero(own)
    f = max(abs(flux), 1e-300)
    x_err = float(np.sqrt(np.sum((cc + ob.c0 - x) ** 2 * var)) / f)
    y_err = float(np.sqrt(np.sum((rr + ob.r0 - y) ** 2 * var)) / f)
    return (x, y, float(np.sqrt(max((cxx + cyy) / 2, 0.0))), flux, x_err, y_err, flux_err)


#: smallest share of an extended footprint's flux a deblended part must carry (SExtractor's and
#: sep's default DEBLEND_MINCONT)
DEBLEND_CONTRAST = 0.005


def deblend(ob, st):
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
    h, w = lab.shape

    def part_ring(i, box):
        # the part and its ring of other parts' pixels, on its bounding box grown by 1 px
        sl = (slice(max(box[0].start - 1, 0), min(box[0].stop + 1, h)),
              slice(max(box[1].start - 1, 0), min(box[1].stop + 1, w)))
        part = lab[sl] == i
        return sl, part, ndimage.binary_dilation(part) & ~part & (lab[sl] > 0)

    def stats(i, box):
        # the part's share numerator, peak contrast above its saddle, and its ring
        sl, part, ring = part_ring(i, box)
        flux = float(pos[sl][part].sum())
        if not ring.any():
            return sl, part, ring, flux, np.inf
        saddle = float(smooth[sl][ring].max())
        return sl, part, ring, flux, (float(smooth[sl][part].max()) - saddle) / (noise * gain)

    # a merge changes only the receiving part (and the ring labels of the merged part's
    # neighbours, which the tests do not read): the other parts' statistics are kept
    boxes = ndimage.find_objects(lab)
    cache = {i: stats(i, boxes[i - 1]) for i in np.unique(lab) if i > 0}
    while len(cache) >= 2:
        ids = sorted(cache)
        total = sum(cache[i][3] for i in ids)
        weakest, score = None, np.inf
        for i in ids:
            sl, part, ring, flux, contrast = cache[i]
            if not ring.any():
                continue
            share = flux / max(total, 1e-300)
            if share < DEBLEND_CONTRAST or contrast < st.detect_snr:
                if share < score:
                    weakest, score = i, share
        if weakest is None:
            break
        sl, part, ring = cache.pop(weakest)[:3]
        into = np.bincount(lab[sl][ring]).argmax() if ring.any() else 0
        lab[sl][part] = into
        if into > 0:
            cache[into] = stats(into, ndimage.find_objects(lab, max_label=into)[into - 1])
    return [lab == i for i in np.unique(lab) if i > 0]


def extended_rows(ob, rms_patch, st=None):
    """Rows (x, y, sigma, flux, x_err, y_err, flux_err) of an extended object: one per
    deblended part (:func:`deblend`) when ``st`` is given, else one for the footprint."""
    parts = [ob.own] if st is None else deblend(ob, st)
    return [(moment_row(ob, own, rms_patch), own) for own in parts]



def parents(ob, rows, rms_patch, st):
    """Parent rows of a point-fitted object: its deblended parts (:func:`deblend`, as for an
    extended object) holding two or more of the fitted sources ``rows``. Returns a list of
    (row (x, y, sigma, flux, x_err, y_err, flux_err), part footprint, indices of the children in
    ``rows``); each source belongs to the part nearest to its pixel."""
    if len(rows) < 2:
        return []
    parts = deblend(ob, st)
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
            out.append((moment_row(ob, part, rms_patch), part, kids))
    return out
