"""Weighted nonlinear least-squares fits of point sources (eq. 66 with analytic derivatives).

A patch is modelled as k sources (x, y, sigma, flux) of a PSF profile (the integrated Gaussian
by default, or a :class:`cvfs.astro.psf.PSFProfile` mixture, ``profile=``) plus a constant; each
pixel residual is multiplied by its weight 1 / noise sigma (0 for masked pixels), so chi^2 is in
noise units and the inverse of J^T W^2 J is the covariance of the fitted parameters (Fisher
information).
:func:`refine` drops sources that are not significant, merges pairs one source explains as well
and adds significant residual peaks.
"""

import numpy as np
from scipy.special import erf

from cvfs.astro._lm import chi2_of, lm_fit, normal_equations
from cvfs.astro.psf import GAUSSIAN, psf_factors

__all__ = ["fit_sources", "model_and_jac", "refine", "uncertainties"]

_SQ2 = np.sqrt(2.0)
_SQPI = np.sqrt(np.pi)


def _de_and_grads(n, c, s):
    """Delta E along one axis for sources at c with widths s, and its derivatives in c and s.

    Returns arrays of shape (k, n): value, d/dc, d/ds.
    """
    u = np.arange(n)[None, :] - c[:, None]
    s = s[:, None]
    a = (u + 0.5) / (_SQ2 * s)
    b = (u - 0.5) / (_SQ2 * s)
    ea, eb = np.exp(-a * a), np.exp(-b * b)
    val = 0.5 * (erf(a) - erf(b))
    d_c = -(ea - eb) / (_SQ2 * _SQPI * s)
    d_s = (-a * ea + b * eb) / (_SQPI * s)
    return val, d_c, d_s


def model_and_jac(p, shape, jac=True, profile=None):
    """Model image of parameters p = (x, y, sigma, flux) * k + (background,) and its Jacobian.

    Parameters
    ----------
    p : ndarray of shape (4 k + 1,)
    shape : tuple of int
        (height, width).
    jac : bool
        The Jacobian (integrated Gaussian only).
    profile : PSFProfile, optional
        The PSF (:data:`cvfs.astro.psf.GAUSSIAN` when None).

    Returns
    -------
    model : ndarray of shape (height, width)
    J : ndarray of shape (height * width, 4 k + 1) or None
    """
    h, w = shape
    k = (p.size - 1) // 4
    x, y, s, f = p[:-1].reshape(k, 4).T
    if profile is not None and not profile.is_gaussian:
        if jac:
            raise ValueError("model_and_jac: the Jacobian is computed for the Gaussian PSF only")
        return profile.render(shape, x, y, s, f, p[-1]), None
    ey, ey_c, ey_s = _de_and_grads(h, y, s)
    ex, ex_c, ex_s = _de_and_grads(w, x, s)
    model = np.einsum("k,kh,kw->hw", f, ey, ex) + p[-1]
    if not jac:
        return model, None
    J = np.empty((h, w, p.size))
    J[:, :, 0:-1:4] = f * np.einsum("kh,kw->hwk", ey, ex_c)
    J[:, :, 1:-1:4] = f * np.einsum("kh,kw->hwk", ey_c, ex)
    J[:, :, 2:-1:4] = f * (np.einsum("kh,kw->hwk", ey_s, ex) + np.einsum("kh,kw->hwk", ey, ex_s))
    J[:, :, 3:-1:4] = np.einsum("kh,kw->hwk", ey, ex)
    J[:, :, -1] = 1.0
    return model, J.reshape(h * w, p.size)


def _bounds(k, shape, s_lo, s_hi, margin):
    h, w = shape
    lo, hi = np.empty(4 * k + 1), np.empty(4 * k + 1)
    lo[0:-1:4], lo[1:-1:4], lo[2:-1:4], lo[3:-1:4], lo[-1] = -margin, -margin, s_lo, 0.0, -np.inf
    hi[0:-1:4], hi[1:-1:4], hi[2:-1:4] = w - 1 + margin, h - 1 + margin, s_hi
    hi[3:-1:4], hi[-1] = np.inf, np.inf
    return lo, hi


def fit_sources(patch, weights, src, bg, s_lo, s_hi, margin, tol=1e-6, profile=None):
    """Weighted least-squares fit of k sources (x, y, sigma, flux) + a constant to a patch.

    Parameters
    ----------
    patch, weights : ndarray of shape (h, w)
        Pixels and their weights (1 / noise sigma; 0 = ignored).
    src : ndarray of shape (k, 4)
        Starting x, y, sigma, flux.
    bg : float
        Starting constant.
    s_lo, s_hi : float
        Bounds of sigma.
    margin : float
        Positions may lie ``margin`` pixels outside the patch.
    tol : float
        Relative chi^2 decrease and relative step below which the bounded Levenberg-Marquardt
        iterations (:func:`cvfs.astro._lm.lm_fit`) stop.
    profile : PSFProfile, optional
        The PSF (:data:`cvfs.astro.psf.GAUSSIAN` when None).

    Returns
    -------
    src : ndarray of shape (k, 4)
    bg : float
    """
    k = len(src)
    wt = weights.ravel()
    if k == 0:
        return np.zeros((0, 4)), float(np.sum(patch.ravel() * wt**2) / max(np.sum(wt**2), 1e-300))
    p0 = np.concatenate([np.asarray(src, float).ravel(), [bg]])
    lo, hi = _bounds(k, patch.shape, s_lo, s_hi, margin)
    p0[:-1] = np.clip(p0[:-1], lo[:-1] + 1e-9, hi[:-1] - 1e-9)
    # tolerance 1e-6 and a cap on iterations: positions converge to ~1e-3 px well before tighter
    # tolerances (same F1/RMSE on benchmarks/astro/astro_localisation.py); borderline
    # model-selection decisions are re-fitted with a tight ``tol`` (see _prune) and four times the
    # iterations
    max_iter = (40 + 5 * k) * (1 if tol >= 1e-6 else 4)
    p, _, _ = lm_fit(np.ascontiguousarray(patch, dtype=np.float64),
                     np.ascontiguousarray(weights, dtype=np.float64), p0, lo, hi, float(tol),
                     max_iter, *(profile or GAUSSIAN).arrays())
    return p[:-1].reshape(k, 4), float(p[-1])


def uncertainties(patch, weights, src, bg, s_lo, s_hi, margin, profile=None):
    """Standard deviations of x, y, flux from the inverse Fisher information (J^T W^2 J)^-1.

    Parameters at a bound (an active constraint) are held fixed: their columns are left out.

    Returns
    -------
    x_err, y_err, flux_err : ndarray of shape (k,)
    at_bound : ndarray of bool of shape (k,)
        Width or position of the source at its bound.
    """
    k = len(src)
    if k == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, bool)
    p = np.concatenate([np.asarray(src, float).ravel(), [bg]])
    lo, hi = _bounds(k, patch.shape, s_lo, s_hi, margin)
    tol = 1e-6 * np.maximum(1.0, np.abs(p))
    fixed = (np.abs(p - lo) < tol) | (np.abs(hi - p) < tol)
    fixed[3:-1:4] = False  # flux >= 0 at zero is not a fit of interest; keep it free
    _, A, _ = normal_equations(np.ascontiguousarray(patch, dtype=np.float64),
                               np.ascontiguousarray(weights, dtype=np.float64), p,
                               *(profile or GAUSSIAN).arrays())
    cov = np.full((p.size, p.size), np.nan)
    cov[np.ix_(~fixed, ~fixed)] = np.linalg.pinv(A[np.ix_(~fixed, ~fixed)])
    var = np.diag(cov)[:-1].reshape(k, 4)
    at_bound = fixed[:-1].reshape(k, 4)[:, :3].any(axis=1)
    with np.errstate(invalid="ignore"):
        return np.sqrt(var[:, 0]), np.sqrt(var[:, 1]), np.sqrt(var[:, 3]), at_bound


def significance(src, shape, noise, profile=None):
    """Matched-filter SNR flux * ||psf|| / sigma of each source."""
    if len(src) == 0:
        return np.zeros(0)
    if profile is not None and not profile.is_gaussian:
        return src[:, 3] * profile.norms(shape, src[:, 0], src[:, 1], src[:, 2]) / noise
    Ey, Ex = psf_factors(shape, src[:, 0], src[:, 1], src[:, 2])
    return src[:, 3] * np.sqrt((Ey**2).sum(1) * (Ex**2).sum(1)) / noise


def chi2(patch, weights, src, bg, profile=None):
    """Weighted chi^2 of a fit (in noise units): the objective :func:`fit_sources` minimises."""
    return float(chi2_of(np.ascontiguousarray(patch, dtype=np.float64),
                         np.ascontiguousarray(weights, dtype=np.float64),
                         np.concatenate([np.asarray(src, dtype=np.float64).ravel(), [bg]]),
                         *(profile or GAUSSIAN).arrays()))


def model_floor(shape, wt, src, profile, tolerance):
    """The PSF model's error under each source: ``tolerance`` times the other sources' weighted
    model correlated with the source's unit-norm weighted PSF (noise units; zeros when
    ``tolerance`` is 0 or there is one source)."""
    k = len(src)
    if tolerance <= 0 or k < 2:
        return np.zeros(k)
    prof = profile or GAUSSIAN
    Ey, Ex = prof.factors(shape, src[:, 0], src[:, 1], src[:, 2])
    each = np.einsum("nch,ncw->nhw", Ey, Ex) * wt  # unit-flux weighted PSFs
    total = np.einsum("n,nhw->hw", src[:, 3], each)
    norm = np.sqrt(np.einsum("nhw,nhw->n", each, each))
    other = np.einsum("nhw,hw->n", each, total) - src[:, 3] * norm**2
    return tolerance * np.maximum(other, 0.0) / np.where(norm > 0, norm, 1.0)


def _window(src, idx, shape):
    """The window of sources ``idx``: their box grown by 2 max(sigma) + 2 px, as
    (r0, r1, c0, c1), and the mask of the sources centred in it (``idx`` always)."""
    h, w = shape
    rad = 2.0 * src[idx, 2].max() + 2.0
    xs, ys = src[idx, 0], src[idx, 1]
    c0, c1 = max(int(np.floor(xs.min() - rad)), 0), min(int(np.ceil(xs.max() + rad)) + 1, w)
    r0, r1 = max(int(np.floor(ys.min() - rad)), 0), min(int(np.ceil(ys.max() + rad)) + 1, h)
    inside = ((src[:, 0] >= c0 - 0.5) & (src[:, 0] < c1 - 0.5)
              & (src[:, 1] >= r0 - 0.5) & (src[:, 1] < r1 - 0.5))
    inside[idx] = True
    return (r0, r1, c0, c1), inside


def _window_problem(patch, wt, src, box, inside, profile):
    """The window's pixels less the model of the sources outside it, its weights, and the
    sources inside it in window coordinates."""
    r0, r1, c0, c1 = box
    shift = np.array([c0, r0, 0.0, 0.0])
    sub = patch[r0:r1, c0:c1]
    out = src[~inside] - shift
    if len(out):
        sub = sub - model_and_jac(np.r_[out.ravel(), 0.0], sub.shape, jac=False,
                                  profile=profile)[0]
    return sub, wt[r0:r1, c0:c1], src[inside] - shift, shift


def _local_merge_delta(patch, wt, src, bgf, i, j, merged, s_lo, s_hi, margin, profile, tol):
    """chi^2 change of merging sources i and j on the window around the pair (:func:`_window`).

    The merged source, the other sources centred in the window and the constant are fitted on
    the window's pixels, the sources outside it held at their values and subtracted; the pair's
    chi^2 is that of the current fit there, which a fit on the window could only lower, so the
    change returned is at most the change between the two fits on the window. None when the
    window covers more than 60 % of the patch (no saving over the fit of the whole patch).
    """
    box, inside = _window(src, np.array([i, j]), patch.shape)
    r0, r1, c0, c1 = box
    if (r1 - r0) * (c1 - c0) > 0.6 * patch.size:
        return None
    sub, wsub, keep, shift = _window_problem(patch, wt, src, box, inside, profile)
    pair = np.isin(np.flatnonzero(inside), [i, j])
    start = np.vstack([keep[~pair], merged - shift])
    cand_s, cand_b = fit_sources(sub, wsub, start, bgf, s_lo, s_hi, margin, tol=tol,
                                 profile=profile)
    return (chi2(sub, wsub, cand_s, cand_b, profile)
            - chi2(sub, wsub, keep, bgf, profile))


def _independent(src, order):
    """Of the sources ``order`` (weakest first), those farther than 3 (sigma_1 + sigma_2) from
    every one taken before them: sources whose PSFs do not overlap, so dropping them together
    gives the fit of dropping them one at a time."""
    out = []
    for i in order:
        d = np.hypot(src[out, 0] - src[i, 0], src[out, 1] - src[i, 1])
        if np.all(d > 3.0 * (src[out, 2] + src[i, 2])):
            out.append(i)
    return np.array(out, dtype=np.intp)


def _prune(patch, wt, src, bgf, noise, s_lo, s_hi, margin, detect_snr, max_pairs=4,
           profile=None, tolerance=0.0, fresh=None):
    """Drop insignificant sources and merge pairs that one source explains as well.

    Repeated until nothing changes. The insignificant sources are dropped weakest first,
    several at once when their PSFs do not overlap (:func:`_independent`). A source is
    insignificant when its matched-filter SNR is below
    ``detect_snr`` or, with a model ``tolerance`` t > 0, below the model's error under it
    (:func:`model_floor`: the wings the PSF model misses of brighter neighbours). Two sources
    closer than 1.5 (sigma_1 + sigma_2) are merged when the merged fit raises chi^2 by less than
    ``detect_snr**2`` (the chi^2 a source at the detection threshold explains); the
    ``max_pairs`` closest pairs are tried per round. A merge is first fitted on the window
    around the pair (:func:`_local_merge_delta`, a fraction of the patch's pixels and
    sources): when chi^2 rises there by twice ``detect_snr**2`` or more it is rejected without
    the fit of the whole patch.

    Only pairs near a changed source are tested: with ``fresh`` (a mask of the sources new
    since the last prune of the same fit), a pair with a fresh source, a merged one, or a source
    whose PSF overlaps theirs or a dropped one's (3 (sigma_1 + sigma_2)); a pair whose merge
    was rejected is not tried again unless such a change comes near it.
    """
    thr = detect_snr**2
    ids = np.arange(len(src))
    nxt = len(src)
    changed = src[:0] if fresh is None else src[np.asarray(fresh, bool)]
    everything = fresh is None
    rejected = set()

    def near_changed(i):
        if everything:
            return True
        if len(changed) == 0:
            return False
        d = np.hypot(changed[:, 0] - src[i, 0], changed[:, 1] - src[i, 1])
        return bool(np.any(d < 3.0 * (changed[:, 2] + src[i, 2])))

    while len(src):
        # drop the weakest insignificant sources, refit, and start over
        sig = significance(src, patch.shape, noise, profile)
        if tolerance > 0:
            sig = sig - np.maximum(model_floor(patch.shape, wt, src, profile, tolerance)
                                   - detect_snr, 0.0)
        drop = _independent(src, np.flatnonzero(sig < detect_snr)[np.argsort(
            sig[sig < detect_snr], kind="stable")])
        if drop.size:
            changed = np.vstack([changed, src[drop]])
            rejected.clear()
            ids = np.delete(ids, drop)
            src, bgf = fit_sources(patch, wt, np.delete(src, drop, axis=0), bgf, s_lo, s_hi,
                                   margin, profile=profile)
            continue
        if len(src) < 2:
            break
        d = np.hypot(src[:, None, 0] - src[None, :, 0], src[:, None, 1] - src[None, :, 1])
        d[np.tril_indices(len(src))] = np.inf
        close = np.argwhere(d < 1.5 * (src[:, None, 2] + src[None, :, 2]))
        # test the closest pairs first; merge the first pair one source explains as well
        close = [(i, j) for i, j in close[np.argsort(d[close[:, 0], close[:, 1]])]
                 if (ids[i], ids[j]) not in rejected and (near_changed(i) or near_changed(j))]
        if not close:
            break
        base = chi2(patch, wt, src, bgf, profile)
        # the test fit stops when a step lowers chi^2 by less than a hundredth of thr: the
        # decision needs chi^2 to that precision (borderline ones are refitted tightly)
        test_tol = max(1e-6, 0.01 * thr / max(base, 1e-300))
        for i, j in close[:max_pairs]:
            f = src[i, 3] + src[j, 3]
            merged = np.r_[(src[i, :3] * src[i, 3] + src[j, :3] * src[j, 3]) / f, f]
            start = np.vstack([np.delete(src, [i, j], axis=0), merged])
            # a merge the pair's window rejects clearly is not tried on the whole patch
            local = _local_merge_delta(patch, wt, src, bgf, i, j, merged, s_lo, s_hi, margin,
                                       profile, test_tol)
            if local is not None and local >= 2.0 * thr:
                rejected.add((ids[i], ids[j]))
                continue
            cand, cb = fit_sources(patch, wt, start, bgf, s_lo, s_hi, margin, tol=test_tol,
                                   profile=profile)
            delta = chi2(patch, wt, cand, cb, profile) - base
            if 0.5 * thr < delta < 2.0 * thr:  # borderline: decide on tightly converged fits
                src, bgf = fit_sources(patch, wt, src, bgf, s_lo, s_hi, margin, tol=1e-10,
                                       profile=profile)
                base = chi2(patch, wt, src, bgf, profile)
                cand, cb = fit_sources(patch, wt, cand, cb, s_lo, s_hi, margin, tol=1e-10,
                                       profile=profile)
                delta = chi2(patch, wt, cand, cb, profile) - base
            if delta < thr:
                changed = np.vstack([changed, cand[-1:]])
                rejected.clear()
                ids = np.r_[np.delete(ids, [i, j]), nxt]
                nxt += 1
                src, bgf = fit_sources(patch, wt, cand, cb, s_lo, s_hi, margin,
                                       profile=profile)
                break
            rejected.add((ids[i], ids[j]))
        else:
            break
    return src, bgf


def _residual_peaks(corr, params, thresh, n):
    """Atoms of the ``n`` largest residual correlations at or above ``thresh``, each farther
    than 1.5 (sigma_1 + sigma_2) from those taken before it (distinct sources), largest first."""
    idx = np.flatnonzero(corr >= thresh)
    c, x, y, s = corr[idx], params[idx, 0], params[idx, 1], params[idx, 2]
    out = []
    while len(out) < n and idx.size:
        b = int(np.argmax(c))
        out.append(idx[b])
        far = np.hypot(x - x[b], y - y[b]) > 1.5 * (s + s[b])
        idx, c, x, y, s = idx[far], c[far], x[far], y[far], s[far]
    return np.array(out, dtype=np.intp)


def refine(patch, weights, cand, bg, noise, dico, s_lo, s_hi, margin, detect_snr, max_add=3,
           profile=None, tolerance=0.0, per_round=1, allowed=None):
    """Fit, drop or merge insignificant sources, add significant residual peaks, refit.

    Parameters
    ----------
    patch, weights : ndarray of shape (h, w)
    cand : ndarray of shape (k, 4)
        Starting sources (x, y, sigma, flux).
    bg : float
        Starting constant.
    noise : float
        Typical noise sigma of the patch (significance of sources and residual peaks).
    dico : PSFDictionary
        Atoms of the patch shape, for residual peaks.
    s_lo, s_hi, margin, detect_snr : float
    max_add : int
        Most rounds of residual peaks added.
    per_round : int
        Most residual peaks added per round: the largest correlations, each farther than
        1.5 (sigma_1 + sigma_2) from the others.
    allowed : ndarray of bool of shape (n_atoms,), optional
        The atoms of ``dico`` residual peaks may be taken from (all when None).
    profile : PSFProfile, optional
        The PSF (:data:`cvfs.astro.psf.GAUSSIAN` when None).
    tolerance : float
        Model tolerance t: sources below t times the model's signal under them
        (:func:`model_floor`) are dropped, and a residual peak is added only above t times the
        model's correlation with its atom.

    Returns
    -------
    src : ndarray of shape (k', 4)
    bg : float
    """
    src, bgf = fit_sources(patch, weights, cand, bg, s_lo, s_hi, margin, profile=profile)
    src, bgf = _prune(patch, weights, src, bgf, noise, s_lo, s_hi, margin, detect_snr,
                      profile=profile, tolerance=tolerance)
    for _ in range(max_add):
        model = model_and_jac(np.concatenate([src.ravel(), [bgf]]), patch.shape, jac=False,
                              profile=profile)[0]
        if tolerance > 0:  # minus t times the model's correlation (one product: linear)
            corr = dico.rmatvec((((patch - model) - tolerance * (model - bgf)) * weights).ravel())
        else:
            corr = dico.rmatvec(((patch - model) * weights).ravel())  # in noise units
        if allowed is not None:
            corr = np.where(allowed, corr, -np.inf)
        best = _residual_peaks(corr, dico.params, detect_snr + 1.0, per_round)
        if best.size == 0:
            break
        new = np.column_stack([dico.params[best], corr[best] * noise * dico.flux_per_unit[best]])
        n_before = len(src)
        src, bgf = fit_sources(patch, weights, np.vstack([src, new]) if len(src) else new, bgf,
                               s_lo, s_hi, margin, profile=profile)
        # the pairs of the sources before these were tested by the previous prune
        src, bgf = _prune(patch, weights, src, bgf, noise, s_lo, s_hi, margin, detect_snr,
                          profile=profile, tolerance=tolerance,
                          fresh=np.arange(len(src)) >= n_before)
        if len(src) <= n_before:
            break
    return src, bgf
