"""Point-source fit of one object: candidates per tile, then refinement.

Per ``tile`` of an object's patch, candidates, then the weighted nonlinear least-squares
refinement of :mod:`cvfs.astro.fit` (drops, merges, residual peaks). An object of one tile (a
blend or an ambiguous object the fast path left) gets its candidates from nonnegative SBL (Alg. 1
of the SBL paper) with dynamic gap-safe screening over atoms centred on the object's footprint
grown by 3 px, grouped into sources. With ``fast_path``, an object of several tiles (a crowded
footprint: a cluster of stars, or stars on nebulosity) gets them from its detection peaks in the
tile instead, one PSF per peak as photutils' and DAOPHOT's group fits are seeded, and its
refinement adds up to :data:`CROWDED_PER_ROUND` distinct residual peaks per round (the
unresolved neighbours the peaks miss). Sources are kept by the tile whose core contains them,
on the footprint grown by 2 px.
"""

import numpy as np
from scipy import ndimage

from cvfs.astro.dictionary import make_dictionary, sample_atoms
from cvfs.astro.fit import fit_sources, model_and_jac, refine, significance, uncertainties
from cvfs.core.sbl import sbl_fit

__all__ = ["CROWDED_PER_ROUND", "fit_point_sources", "group_atoms", "peak_candidates",
           "tile_starts", "widths_at_bounds"]

#: residual peaks added per round of the refinement in a tile of a crowded object (one in the
#: SBL-seeded tiles, whose candidates already hold the unresolved sources)
CROWDED_PER_ROUND = 4


def tile_starts(n, tile, overlap):
    """Tile starts along one axis and the core [lo, hi) of each tile (disjoint, covering)."""
    if n <= tile:
        return [(0, -np.inf, np.inf)]
    stride = tile - overlap
    starts = sorted(set(list(range(0, n - tile, stride)) + [n - tile]))
    mids = [(b + a + tile) / 2.0 for a, b in zip(starts[:-1], starts[1:], strict=True)]
    cuts = [-np.inf, *mids, np.inf]
    return [(s, cuts[i], cuts[i + 1]) for i, s in enumerate(starts)]


def group_atoms(params, flux, radius=1.0):
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



def _dictionary(cache, shape, st):
    """Atoms for a patch shape: the ``tile`` x ``tile`` dictionary of ``n_atoms`` atoms (seeded by
    ``seed``, so every process draws the same), cropped to the shape (same atom density)."""
    if shape not in cache:
        if "base" not in cache:
            base = (st.tile, st.tile)
            rng = np.random.default_rng(st.seed)
            cache["base"] = make_dictionary(base, sample_atoms(
                base, st.n_atoms, (st.s_lo, st.s_hi), margin=st.margin, random_state=rng),
                st.psf)
        cache[shape] = cache["base"].crop(shape, st.margin)
    return cache[shape]



def peak_candidates(ob, r0, c0, th, tw, st):
    """Candidates of a tile from the object's detection peaks in it with detection SNR at least
    ``detect_snr``: (k, 4) x, y, sigma (the middle of the PSF range), flux (the peak pixel times
    the PSF's inverse peak value), tile coordinates."""
    pk = ob.peaks - (r0, c0)
    inside = (pk[:, 0] >= 0) & (pk[:, 0] < th) & (pk[:, 1] >= 0) & (pk[:, 1] < tw)
    if ob.peak_snr is not None:
        inside &= ob.peak_snr >= st.detect_snr
    pk = pk[inside]
    s = 0.5 * (st.s_lo + st.s_hi)
    val = np.maximum(ob.patch[pk[:, 0] + r0, pk[:, 1] + c0], 0.0)
    return np.column_stack([pk[:, 1].astype(float), pk[:, 0].astype(float), np.full(len(pk), s),
                            val * 2.0 * np.pi * s * s]).reshape(-1, 4)


def widths_at_bounds(src, shape, noise, st):
    """True when at least three significant sources of a first fit, and two thirds of them, have
    their width at a bound of the PSF range."""
    sig = significance(src, shape, noise, st.psf) >= st.detect_snr
    at = (src[:, 2] <= st.s_lo * (1 + 1e-6)) | (src[:, 2] >= st.s_hi * (1 - 1e-6))
    n = int(np.sum(at & sig))
    return n >= 3 and 3 * n >= 2 * int(sig.sum())


def fit_point_sources(ob, noise, st, cache):
    """Candidates (SBL, or the detection peaks of an object of several tiles) + refinement per
    tile of the patch -> rows (x, y, sigma, flux, x_err, y_err, flux_err,
    at_bound), the model of the patch and the mean screening fraction per tile; rows and model
    are None when the patch is one tile whose first fit has its widths at the bounds
    (:func:`widths_at_bounds`)."""
    h, w = ob.patch.shape
    rows, cols = tile_starts(h, st.tile, st.overlap), tile_starts(w, st.tile, st.overlap)
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
    # an object of several tiles is a crowded footprint: its candidates are its detection peaks
    # (with the fast path on; refine=False reports SBL atoms)
    crowded = len(rows) * len(cols) > 1 and st.fast_path and st.refine
    # first pass: SBL candidates and a first fit of every tile; a one-tile object whose widths
    # sit at the bounds is not a sum of PSFs, so it is not refined (the costly part of a galaxy)
    for r0, y_lo, y_hi in rows:
        for c0, x_lo, x_hi in cols:
            p = ob.patch[r0:r0 + th, c0:c0 + tw]
            wt = ob.weights[r0:r0 + th, c0:c0 + tw]
            if not (wt > 0).any():
                continue
            sel = near[r0 + ay, c0 + ax]
            if not sel.any():
                continue
            # a crowded tile uses the dictionary only for residual peaks: the atoms on the
            # footprint, copied when the tile is refined (not held for every tile at once)
            tdico, allowed = (dico, sel) if crowded else (dico.subset(np.flatnonzero(sel)), None)
            if crowded:
                cand = peak_candidates(ob, r0, c0, th, tw, st)
            else:
                # sbl_iter reweighting steps are the stopping rule: the candidates are the atoms
                # of the code, which the later steps only sparsify (docs/methods.md)
                res = sbl_fit(tdico, (p * (wt > 0)).ravel(), lam, screening="gap",
                              positive=True, max_iter=st.sbl_iter, tol=1e-3, lasso_tol=1e-6,
                              lasso_max_iter=100, step_budget=True)
                screened.append(float(np.mean(res.screening)) if res.screening else 0.0)
                nz = np.flatnonzero(res.coef > 0)
                cand = group_atoms(tdico.params[nz], res.coef[nz] * tdico.flux_per_unit[nz])
            cand = cand[np.argsort(-cand[:, 3])][: st.max_sources]
            src, bgt = cand, 0.0
            if st.refine:
                src, bgt = fit_sources(p, wt, cand, 0.0, st.s_lo, st.s_hi, st.margin,
                                       profile=st.psf)
                # a single-tile object only: in a large (crowded, nebulous) footprint one tile
                # of nebulosity would otherwise turn every star of the object into moment rows
                if len(rows) * len(cols) == 1 and widths_at_bounds(src, p.shape, noise, st):
                    return None, None, screened
            first.append((r0, y_lo, y_hi, c0, x_lo, x_hi, src, bgt, tdico, allowed))
    out = []
    model = np.zeros((h, w))
    for r0, y_lo, y_hi, c0, x_lo, x_hi, src, bgt, tdico, allowed in first:
        p = ob.patch[r0:r0 + th, c0:c0 + tw]
        wt = ob.weights[r0:r0 + th, c0:c0 + tw]
        if st.refine:
            if allowed is not None:  # the atoms on the footprint, while the tile is refined
                tdico, allowed = tdico.subset(np.flatnonzero(allowed)), None
            src, bgt = refine(p, wt, src, bgt, noise, tdico, st.s_lo, st.s_hi, st.margin,
                              st.detect_snr, profile=st.psf, tolerance=st.model_tolerance,
                              per_round=CROWDED_PER_ROUND if crowded else 1, allowed=allowed)
            err = uncertainties(p, wt, src, bgt, st.s_lo, st.s_hi, st.margin, st.psf)
        else:
            err = (np.full(len(src), np.nan),) * 3 + (np.zeros(len(src), bool),)
        ry = [int(np.clip(np.ceil(v - 0.5), 0, h)) for v in (y_lo, y_hi)]
        rx = [int(np.clip(np.ceil(v - 0.5), 0, w)) for v in (x_lo, x_hi)]
        # sources, and the fitted background offset on the object's pixels
        tile_model = model_and_jac(np.r_[src.ravel(), 0.0], p.shape, jac=False,
                                   profile=st.psf)[0]
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
