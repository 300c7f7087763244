"""Ranking features of candidate labellings that do not assume an affine camera.

The features of :mod:`cvfs.motion.features` measure distances to affine subspaces of the
trajectories, which hold for an affine camera only. These measure how well two-view models
explain each cluster of a labelling, frame pair by frame pair, on the observed entries only (no
completion), so they apply to perspective footage with tracks that start and stop:

1. **Coordinates** are centred and scaled once per sequence (mean distance sqrt(2) from the
   centroid of the observed points), so the features do not depend on the image size.
2. **Fits.** For each model type (fundamental matrix, homography, affine map) and each cluster,
   one model per frame pair of the affinities (gaps ``1, 2, 4``) with at least
   :data:`MIN_TRACKS` of the cluster's tracks observed in both frames: a weighted normalised
   linear fit on all of them, refitted on the 80 % with the smallest residuals (the fundamental
   matrix by :mod:`cvfs.motion.geometry_merge`'s fit). The whole set of tracks is fitted the
   same way, as the sequence's reference.
3. **Track residuals.** A track's residual under a fit: the median over the fitted pairs that
   observe it of its Sampson distance (fundamental matrix) or squared transfer error
   (homography, affine map). Its *own* residual is under its cluster's fit (under the whole
   set's fit when the cluster is too small for any fit); its *other* residual the smallest under
   another cluster's fit.
4. **Pooled per labelling** (fixed length for any K, invariant to the numbering of the
   clusters): quantiles and mean of the own residuals in log units of the whole set's median
   residual, the fraction of tracks another cluster's model explains better and the mean log
   ratio of own to other, the per-cluster median residual (largest, size-weighted mean,
   smallest), the merge cost of the two clusters one model explains best together (lowest and
   mean over the pairs of clusters; :mod:`cvfs.motion.geometry_merge`'s cost), and the share of
   tracks in clusters too small for a fit.
5. **Cuts and sizes.** The normalised cut of the labelling on every affinity of
   :func:`cvfs.motion.geometry.geometric_affinities` divided by K, its largest per-cluster term,
   the log of :func:`~cvfs.motion.geometry.selection_scores`; the smallest and largest cluster
   fractions, the size entropy over log K and the log of the smallest cluster's track count.
6. **Relative blocks**, as :mod:`cvfs.motion.features`: every feature minus its smallest value
   over the candidates of the sequence (``rel/...``) and its z-score over them (``z/...``).

:func:`geometry_features` returns the (C, :func:`n_geometry_features`) matrix of a sequence's
candidates; :func:`geometry_feature_names` names the columns.
"""

import numpy as np

from cvfs.motion._geometry_kernels import AFFINE, FUNDAMENTAL, HOMOGRAPHY, pair_fits, track_medians
from cvfs.motion.geometry import _CUT_FLOOR, DEFAULT_GAPS, _tracks, cut_terms, frame_pairs

__all__ = ["FIT_MODELS", "MIN_TRACKS", "RESIDUAL_QUANTILES", "geometry_feature_names",
           "geometry_features", "n_geometry_features", "normalise_tracks"]

# model types fitted per cluster, and the tracks a cluster needs in a frame pair for a fit
FIT_MODELS = ("fundamental", "homography", "affine")
MIN_TRACKS = {"fundamental": 12, "homography": 8, "affine": 6}
RESIDUAL_QUANTILES = (0.5, 0.75, 0.9, 0.95)
AFFINITY_NAMES = ("affine", "homography", "fundamental", "fused")
# share of a cluster's tracks kept for the refit
_KEEP = 0.8
# added to residuals (normalised units, squared) before logs
_EPS = 1e-12
# log ratios are clipped to this magnitude
_CLIP = 20.0


def _residual_names():
    q = [f"q{int(round(100 * p))}" for p in RESIDUAL_QUANTILES]
    return q + ["mean", "frac_other_better", "log_own_other", "cluster_max", "cluster_wmean",
                "cluster_min", "merge_min", "merge_mean", "frac_unfitted"]


def _base_names():
    names = [f"res/{m}/{s}" for m in FIT_MODELS for s in _residual_names()]
    names += [f"cut/{a}/per_k" for a in AFFINITY_NAMES]
    names += [f"cut/{a}/max_cluster" for a in AFFINITY_NAMES]
    names += ["cut/log_score", "size/min_frac", "size/max_frac", "size/entropy",
              "size/log_min_count"]
    return names


def geometry_feature_names():
    """Names of the columns of :func:`geometry_features`, in order.

    Returns
    -------
    names : list of str
    """
    base = _base_names()
    return base + [f"rel/{n}" for n in base] + [f"z/{n}" for n in base]


def n_geometry_features():
    """Number of columns of :func:`geometry_features`."""
    return 3 * len(_base_names())


def normalise_tracks(points, visible):
    """Tracks centred on the centroid of the observed points and scaled to mean distance sqrt(2)
    from it; entries not visible set to 0.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
    visible : ndarray of shape (P, F), bool

    Returns
    -------
    points : ndarray of shape (P, F, 2)
    """
    obs = points[visible]
    c = obs.mean(axis=0)
    d = np.linalg.norm(obs - c, axis=1).mean()
    out = (points - c) * (np.sqrt(2.0) / max(d, 1e-12))
    return np.where(visible[..., None], out, 0.0)


# model type -> the compiled kernels' code
_KIND = {"affine": AFFINE, "homography": HOMOGRAPHY, "fundamental": FUNDAMENTAL}


class _Fits:
    """Per-model fits of sets of tracks in every frame pair, and the per-track residuals under
    them, cached by the set."""

    def __init__(self, points, visible, pairs):
        self.x1 = np.ascontiguousarray(np.swapaxes(points[:, pairs[:, 0]], 0, 1),
                                       dtype=np.float64)  # (T, P, 2)
        self.x2 = np.ascontiguousarray(np.swapaxes(points[:, pairs[:, 1]], 0, 1),
                                       dtype=np.float64)
        self.both = np.ascontiguousarray(np.swapaxes(visible[:, pairs[:, 0]]
                                                     & visible[:, pairs[:, 1]], 0, 1))
        self._cache = {}

    def track_residuals(self, model, members, own_only=False):
        """(P,) median residual of every track over the fitted pairs observing it under the fit
        of ``members`` (NaN where none), or None when no pair has enough of them. With
        ``own_only`` only the members' residuals are computed (NaN elsewhere)."""
        members = np.asarray(members, dtype=np.int64)
        key = (model, members.tobytes())
        if key in self._cache:
            return self._cache[key]
        if own_only and (key, "own") in self._cache:
            return self._cache[(key, "own")]
        kind, need = _KIND[model], MIN_TRACKS[model]
        fits, fitted = pair_fits(kind, self.x1, self.x2, self.both, members, need, need, _KEEP)
        out = None
        if fitted.any():
            tracks = members if own_only else np.arange(self.both.shape[1])
            out = track_medians(kind, self.x1, self.x2, self.both, fits, fitted, tracks)
        self._cache[(key, "own") if own_only else key] = out
        return out


def _log_ratio(x, ref):
    return np.clip(np.log((x + _EPS) / (ref + _EPS)), -_CLIP, _CLIP)


def _residual_block(fits, model, labels, clusters, whole):
    """The residual features of one labelling under one model type."""
    P = labels.size
    K = len(clusters)
    R = np.full((K, P), np.nan)
    fitted = np.zeros(K, dtype=bool)
    for k, members in enumerate(clusters):
        r = fits.track_residuals(model, members)
        if r is not None:
            R[k], fitted[k] = r, True
    ref = whole if whole is not None else np.full(P, np.nan)
    scale = np.nanmedian(ref) if np.isfinite(ref).any() else np.nan
    own = R[labels, np.arange(P)]
    own = np.where(np.isfinite(own), own, ref)
    ok = np.isfinite(own)
    if not ok.any() or not np.isfinite(scale):
        return np.zeros(len(_residual_names()))
    lo = _log_ratio(own[ok], scale)
    out = list(np.quantile(lo, RESIDUAL_QUANTILES))
    out.append(float(_log_ratio(own[ok].mean(), scale)))
    others = np.where(np.arange(K)[:, None] == labels[None, :], np.inf,
                      np.where(np.isfinite(R), R, np.inf)).min(axis=0)
    has = ok & np.isfinite(others)
    out.append(float(np.mean(others[has] < own[has])) if has.any() else 0.0)
    out.append(float(np.mean(_log_ratio(own[has], others[has]))) if has.any() else 0.0)
    med = np.array([np.median(lo[labels[ok] == k]) if np.any(labels[ok] == k) else 0.0
                    for k in range(K)])
    sizes = np.array([m.size for m in clusters], dtype=np.float64)
    out += [float(med.max()), float(np.sum(med * sizes) / sizes.sum()), float(med.min())]
    out += list(_merge_costs(fits, model, clusters, R, fitted))
    out.append(float(sizes[~fitted].sum() / P))
    return np.array(out)


def _merge_costs(fits, model, clusters, R, fitted):
    """Lowest and mean over the pairs of clusters of the merge cost: the larger of the two
    clusters' median residual under the union's fit over that under their own (1 for a cluster
    without its own fit); in logs."""
    costs = []
    for a in range(len(clusters)):
        for b in range(a + 1, len(clusters)):
            union = np.sort(np.concatenate([clusters[a], clusters[b]]))
            r = fits.track_residuals(model, union, own_only=True)
            c = 0.0
            if r is not None:
                for k in (a, b):
                    own, uni = R[k, clusters[k]], r[clusters[k]]
                    if fitted[k] and np.isfinite(own).any() and np.isfinite(uni).any():
                        c = max(c, float(_log_ratio(np.nanmedian(uni), np.nanmedian(own))))
            costs.append(c)
    return (min(costs), float(np.mean(costs))) if costs else (0.0, 0.0)


def _check_labels(labels, P):
    labels = np.asarray(labels)
    if labels.ndim == 1:
        labels = labels[None]
    if labels.ndim != 2 or labels.shape[1] != P or labels.shape[0] < 1:
        raise ValueError(f"labels must have shape (C, {P}) with C >= 1; got {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
        raise ValueError("labels must be non-negative ints")
    return labels.astype(np.int64)


def geometry_features(points, labels, visible=None, *, affinities, gaps=DEFAULT_GAPS):
    """Ranking features of candidate labellings from two-view fits, cuts and cluster sizes.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates (pixels or any units: the features do not depend on them); entries
        not ``visible`` are ignored.
    labels : array_like of shape (C, P) or (P,), int
        Candidate labellings of the same tracks (any cluster numbering; K may differ between
        rows).
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite. Every track must be observed in >= 2 frames.
    affinities : dict of str -> sparse matrix of shape (P, P)
        :func:`cvfs.motion.geometry.geometric_affinities` with its four default outputs
        (``"affine"``, ``"homography"``, ``"fundamental"``, ``"fused"``).
    gaps : sequence of int, default (1, 2, 4)
        Frame gaps of the pairs fitted.

    Returns
    -------
    X : ndarray of shape (C, n_geometry_features())
        Columns named by :func:`geometry_feature_names`; finite.

    Raises
    ------
    ValueError
        Bad ``points`` or ``visible`` (:func:`cvfs.motion.missing.check_visible`), ``labels``
        not of shape (C, P) with non-negative ints, or ``affinities`` without the four names or
        of the wrong shape.

    References
    ----------
    R. Hartley, A. Zisserman, "Multiple view geometry in computer vision", 2nd ed., 2004
    (normalised DLT, section 4.4; Sampson distance, section 4.2.6; 8-point algorithm, section
    11.2). J. Shi, J. Malik, "Normalized cuts and image segmentation", TPAMI 2000. Barbu et al.,
    FSA paper, section 3.4 (ranking candidate segmentations; relative feature blocks as
    :mod:`cvfs.motion.features`).
    """
    points, visible = _tracks(points, visible)
    P = points.shape[0]
    labels = _check_labels(labels, P)
    missing = [n for n in AFFINITY_NAMES if n not in affinities]
    if missing:
        raise ValueError(f"affinities must hold {AFFINITY_NAMES}; missing {missing}")
    for n in AFFINITY_NAMES:
        if affinities[n].shape != (P, P):
            raise ValueError(f"affinities[{n!r}] must have shape ({P}, {P}); "
                             f"got {affinities[n].shape}")
    pts = normalise_tracks(points, visible)
    fits = _Fits(pts, visible, frame_pairs(points.shape[1], gaps))
    everyone = np.arange(P)
    whole = {m: fits.track_residuals(m, everyone) for m in FIT_MODELS}
    rows = []
    for lab in labels:
        _, lab = np.unique(lab, return_inverse=True)
        K = int(lab.max()) + 1
        clusters = [np.flatnonzero(lab == k) for k in range(K)]
        feats = [_residual_block(fits, m, lab, clusters, whole[m]) for m in FIT_MODELS]
        terms = [cut_terms(affinities[n], lab, K) for n in AFFINITY_NAMES]
        cuts = np.array([t.sum() for t in terms])
        feats.append(cuts / K)
        feats.append([t.max() for t in terms])
        frac = np.array([c.size for c in clusters]) / P
        ent = -np.sum(frac * np.log(frac)) / np.log(K) if K > 1 else 0.0
        feats.append([np.log(cuts + _CUT_FLOOR).mean(), frac.min(), frac.max(), ent,
                      np.log(frac.min() * P)])
        rows.append(np.concatenate([np.ravel(f) for f in feats]))
    X = np.nan_to_num(np.array(rows), nan=0.0, posinf=_CLIP, neginf=-_CLIP)
    rel = X - X.min(axis=0)
    z = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-9)
    return np.hstack([X, rel, z])
