"""Candidates that over-segment and merge by two-view fit (perspective camera).

Spectral clustering of the two-view affinities (:mod:`cvfs.motion.geometry`) into K fails in one
typical way on driving footage: the static background, spread over depths from a few metres to
infinity, is split into two or three pieces before a small moving object separates from it, so
the object is merged into the background. These candidates cluster each affinity into
``K + extra`` clusters instead, where the small objects have their own clusters, and merge
clusters back to K, each time the two clusters one rigid motion explains best together:

1. A cluster's fit: in every frame pair of the affinities (gaps ``1, 2, 4``) with at least
   :data:`MIN_FIT` of its tracks observed in both frames, a fundamental matrix by the normalised
   8-point algorithm on all of them, refitted on the 80 % with the smallest Sampson distances.
2. A set of tracks' residual under a fit: the median over the frame pairs of the median Sampson
   distance of the set's tracks.
3. The cost of merging clusters a and b: the larger of ``r_a(F_ab) / r_a(F_a)`` and
   ``r_b(F_ab) / r_b(F_b)``, how much worse each is explained by the union's fit than by its
   own (1 where a cluster is too small for a fit of its own). Pieces of one rigid background
   cost about 1; an object moving on its own costs much more.
4. The pair of lowest cost is merged, until K clusters remain.

:func:`merged_candidates` returns one such labelling per affinity; :func:`~cvfs.motion.geometry.
segment_perspective` ranks them with the direct spectral candidates by the same normalised cuts.
"""

import numpy as np

from cvfs.motion._geometry_kernels import FUNDAMENTAL, pair_fits
from cvfs.motion.geometry import frame_pairs

__all__ = ["MIN_FIT", "OVER_SEGMENT", "merge_clusters", "merged_candidates"]

# clusters added before merging back to K
OVER_SEGMENT = 2
# tracks of a cluster observed in both frames of a pair for a fit in that pair
MIN_FIT = 12
# share of the tracks kept for the refit
_KEEP = 0.8


def _sampson(F, x1, x2):
    """Sampson distances of point pairs (T, n, 2) under F (T, 3, 3): (T, n)."""
    X1 = np.concatenate([x1, np.ones(x1.shape[:2] + (1,))], axis=2)
    X2 = np.concatenate([x2, np.ones(x2.shape[:2] + (1,))], axis=2)
    Fx1 = X1 @ np.swapaxes(F, 1, 2)
    Ftx2 = X2 @ F
    num = np.sum(Fx1 * X2, axis=2)
    den = Fx1[..., 0] ** 2 + Fx1[..., 1] ** 2 + Ftx2[..., 0] ** 2 + Ftx2[..., 1] ** 2
    return num * num / np.maximum(den, 1e-300)


class _Fits:
    """Fundamental-matrix fits of sets of tracks, all frame pairs at once, cached by set."""

    def __init__(self, points, visible, pairs):
        self.pairs = pairs
        # (T, P, 2) coordinates in the two frames of each pair, (T, P) observed in both
        self.x1 = np.ascontiguousarray(np.swapaxes(points[:, pairs[:, 0]], 0, 1),
                                       dtype=np.float64)
        self.x2 = np.ascontiguousarray(np.swapaxes(points[:, pairs[:, 1]], 0, 1),
                                       dtype=np.float64)
        self.both = np.ascontiguousarray(np.swapaxes(visible[:, pairs[:, 0]]
                                                     & visible[:, pairs[:, 1]], 0, 1))
        self._fits, self._res = {}, {}

    def fits(self, key, members):
        """``(F, fitted)``: the fundamental matrix of ``members`` (the union of the base
        clusters in ``key``) in every pair, and which pairs had :data:`MIN_FIT` tracks."""
        if key not in self._fits:
            # refitted on the tracks up to the Sampson distance ranked ceil(0.8 n) of the n
            # observed, when 8 or more remain
            F, fitted = pair_fits(FUNDAMENTAL, self.x1, self.x2, self.both,
                                  np.asarray(members, dtype=np.int64), MIN_FIT, 8, _KEEP)
            self._fits[key] = (F[fitted], fitted)
        return self._fits[key]

    def residual(self, key, fit, set_key, tracks):
        """Median over the fitted pairs of the median Sampson distance of ``tracks`` (cluster
        ``set_key``) under the fits of ``key``; NaN when no fitted pair observes any of them."""
        if (key, set_key) not in self._res:
            F, fitted = fit
            pairs = np.flatnonzero(fitted)
            seen = self.both[np.ix_(pairs, tracks)]
            value = np.nan
            if seen.any():
                rows = seen.any(axis=1)
                seen = seen[rows]
                at_pairs = np.ix_(pairs[rows], tracks)  # only these pairs and tracks are copied
                r = _sampson(F[rows], self.x1[at_pairs], self.x2[at_pairs])
                # per pair the median over its observed tracks (unobserved sorted last)
                r = np.sort(np.where(seen, r, np.inf), axis=1)
                n = seen.sum(axis=1)
                at = np.arange(r.shape[0])
                value = float(np.median(0.5 * (r[at, (n - 1) // 2] + r[at, n // 2])))
            self._res[(key, set_key)] = value
        return self._res[(key, set_key)]


def _ratio(union, own):
    return union / own if np.isfinite(union) and np.isfinite(own) and own > 0 else 1.0


def merge_clusters(points, visible, labels, n_motions, *, gaps=(1, 2, 4)):
    """Merge clusters by two-view fit until ``n_motions`` remain.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Validated track coordinates (any finite value where not visible).
    visible : ndarray of shape (P, F), bool
    labels : ndarray of shape (P,), int
        The over-segmentation.
    n_motions : int
        K.
    gaps : sequence of int, default (1, 2, 4)
        Frame gaps of the pairs fitted.

    Returns
    -------
    labels : ndarray of shape (P,), int64
        In 0..K-1 (numbered by first appearance).
    """
    fits = _Fits(points, visible, frame_pairs(points.shape[1], gaps))
    ids = np.unique(labels)
    clusters = {frozenset([int(a)]): np.flatnonzero(labels == a) for a in ids}
    own = {}
    while len(clusters) > n_motions:
        keys = list(clusters)
        for k in keys:
            if k not in own:
                own[k] = fits.residual(k, fits.fits(k, clusters[k]), k, clusters[k])
        best, best_cost = None, np.inf
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                union = a | b
                f = fits.fits(union, np.concatenate([clusters[a], clusters[b]]))
                cost = max(_ratio(fits.residual(union, f, a, clusters[a]), own[a]),
                           _ratio(fits.residual(union, f, b, clusters[b]), own[b]))
                if cost < best_cost:
                    best, best_cost = (a, b), cost
        a, b = best
        clusters[a | b] = np.concatenate([clusters.pop(a), clusters.pop(b)])
    out = np.empty(labels.shape[0], dtype=np.int64)
    for i, members in enumerate(sorted(clusters.values(), key=lambda m: int(m.min()))):
        out[members] = i
    return out


def merged_candidates(points, visible, affinities, n_motions, seed, *, extra=OVER_SEGMENT,
                      gaps=(1, 2, 4)):
    """One labelling per affinity: spectral clustering into ``K + extra`` clusters, merged back
    to K by :func:`merge_clusters`.

    Parameters
    ----------
    points, visible : validated tracks, as :func:`merge_clusters`
    affinities : dict of str to sparse matrix
        :func:`cvfs.motion.geometry.geometric_affinities`.
    n_motions : int
    seed : int
        k-means seed.
    extra : int, default ``OVER_SEGMENT``
    gaps : sequence of int

    Returns
    -------
    labels : ndarray of shape (len(affinities), P), int64
        Canonically numbered; empty (0 rows) when ``K + extra`` leaves fewer than 4 tracks per
        cluster.
    """
    from threadpoolctl import threadpool_limits

    from cvfs.motion.candidates import canonical_labels
    from cvfs.motion.geometry import spectral_labels_sparse

    n_over = int(n_motions) + int(extra)
    if extra <= 0 or 4 * n_over > points.shape[0]:
        return np.empty((0, points.shape[0]), dtype=np.int64)
    pts = np.where(visible[..., None], points, 0.0)
    out = []
    with threadpool_limits(limits=1):  # BLAS and k-means' OpenMP
        for name in affinities:
            over = spectral_labels_sparse(affinities[name], n_over, random_state=seed)
            out.append(canonical_labels(merge_clusters(pts, visible, over, int(n_motions),
                                                       gaps=gaps)))
    return np.vstack(out) if out else np.empty((0, points.shape[0]), dtype=np.int64)
