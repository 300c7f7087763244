"""Candidate segmentations from two-view geometry (perspective camera), with missing entries.

The velocity and K-subspace candidates (:mod:`~cvfs.motion.candidates`) assume an affine camera:
the trajectories of one rigid motion span a 3-D affine subspace. Under perspective (driving
footage: a wide field of view and depth from a few metres to infinity) they do not. Two views of a
rigid motion are related instead by a fundamental matrix (any scene), a homography (a plane, or a
rotation of the camera) or an affine map (far, shallow objects). Following the multi-model
approach of Xu, Cheong & Li, every model type gives one affinity between tracks:

1. **Frame pairs.** ``(f, f + g)`` for every frame f and every gap g in ``gaps``. Only the tracks
   observed in both frames take part in a pair, so missing entries are used as they are (no
   completion).
2. **Hypotheses.** In each pair, ``n_hypotheses`` models are fitted to minimal sets drawn from
   local neighbourhoods: a seed track drawn uniformly and the rest drawn among its
   ``neighbours x minimal`` nearest tracks in the first frame (nearby tracks mostly move
   together). Affine: 3 tracks, exact solve; homography: 4, DLT; fundamental matrix: 8, the
   normalised 8-point algorithm with rank 2 enforced. Every fit is Hartley-normalised and solved
   by batched SVD.
3. **Residuals.** Every track of the pair against every hypothesis: the transfer error for the
   affine map and the homography, the Sampson distance for the fundamental matrix (pixels^2).
4. **Ordered-residual kernel.** Each track keeps the ``top_fraction`` of the pair's hypotheses
   that fit it best (of hypotheses tied at the cut, the first drawn); two tracks' affinity in
   that pair is the fraction of their kept hypotheses they share (Chin, Wang & Suter's ordered
   residual kernel). Over the pairs, the affinity is the sum divided by the number of pairs in
   which both tracks are observed.
5. **Clustering.** Each row keeps its ``n_neighbors`` largest affinities (a sparse, symmetrised
   k-nearest-neighbour graph, so thousands of tracks stay tractable) and normalised spectral
   clustering (Ng, Jordan & Weiss) gives K labels. The *fused* affinity is the mean of the model
   types' affinities (kernel addition), sparsified the same way.

:func:`geometric_candidates` returns one labelling per model type plus the fused one.

6. **Merged candidates.** Each affinity is also clustered into K + 2 clusters, which are merged
   back to K, each time the two clusters one fundamental matrix per frame pair explains best
   together (:mod:`cvfs.motion.geometry_merge`): a background split by depth is put back
   together while a small moving object keeps its own cluster.
7. **Selection.** :func:`segment_perspective` keeps the labelling of :func:`candidate_pool` (the
   candidates of steps 5 and 6) that cuts the affinities least: the geometric mean, over the
   model types' affinities and the fused one, of its normalised cut (Shi & Malik) on each
   (:func:`selection_scores`). No labels and no trained model are involved; K is given.

References
----------
X. Xu, L.-F. Cheong, Z. Li, "Motion segmentation by exploiting complementary geometric models",
CVPR 2018; "3D rigid motion segmentation with mixed and unknown number of models", TPAMI 2019.
T.-J. Chin, H. Wang, D. Suter, "The ordered residual kernel for robust motion subspace
clustering", NeurIPS 2009. J. Shi, J. Malik, "Normalized cuts and image segmentation", TPAMI
2000. R. Hartley, "In defense of the eight-point algorithm", TPAMI 1997.
"""

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg import eigh
from scipy.sparse.linalg import ArpackError, eigsh
from scipy.spatial import cKDTree
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from cvfs.base import check_random_state
from cvfs.motion._geometry_kernels import SAMPSON, TRANSFER, kept_hypotheses, shared_counts
from cvfs.motion.candidates import canonical_labels, trajectory_array
from cvfs.motion.missing import check_visible

__all__ = ["GEOMETRIC_MODELS", "GeometricCandidates", "candidate_pool", "cut_terms", "fit_affine",
           "fit_fundamental",
           "fit_homography", "frame_pairs", "geometric_affinities", "geometric_candidates",
           "normalised_cut", "sampson_residuals", "segment_perspective", "selection_scores",
           "spectral_labels_sparse", "transfer_residuals"]

# model type -> minimal sample size
GEOMETRIC_MODELS = {"affine": 3, "homography": 4, "fundamental": 8}
DEFAULT_MODELS = ("affine", "homography", "fundamental")
DEFAULT_GAPS = (1, 2, 4)
# rows of the affinity computed at once (memory: chunk x P floats per model)
_CHUNK = 512
# spectral embeddings of up to this many tracks use the dense eigensolver
_DENSE_MAX = 1500
# added to the normalised cuts before their geometric mean (a perfect cut on one affinity does not
# decide alone)
_CUT_FLOOR = 1e-6


@dataclass
class GeometricCandidates:
    """Candidate segmentations from two-view geometry.

    Attributes
    ----------
    labels : ndarray of shape (C, P)
        Canonical int64 labels in 0..K-1, one row per name (duplicates kept).
    names : tuple of str
        The affinity of each row: a model type of ``GEOMETRIC_MODELS`` or ``"fused"``.
    n_motions : int
    """

    labels: np.ndarray
    names: tuple
    n_motions: int

    def __len__(self):
        return self.labels.shape[0]


def _normalising_transform(x):
    """Hartley normalisation of point sets ``x`` (M, n, 2): (M, 3, 3) similarities taking each set
    to centroid 0 and mean distance sqrt(2)."""
    c = x.mean(axis=1)
    d = np.linalg.norm(x - c[:, None, :], axis=2).mean(axis=1)
    s = np.sqrt(2.0) / np.maximum(d, 1e-12)
    T = np.zeros((x.shape[0], 3, 3))
    T[:, 0, 0] = s
    T[:, 1, 1] = s
    T[:, 0, 2] = -s * c[:, 0]
    T[:, 1, 2] = -s * c[:, 1]
    T[:, 2, 2] = 1.0
    return T


def _apply(T, x):
    """``T`` (M, 3, 3) applied to points ``x`` (M, n, 2) (similarity: no division needed)."""
    return np.einsum("mij,mnj->mni", T[:, :2, :2], x) + T[:, None, :2, 2]


def _homogeneous(x):
    """Points ``x`` (n, 2) as homogeneous rows (n, 3)."""
    return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def _null_vector(A):
    """Unit right null vectors of a batch ``A`` (M, r, c): the last right singular vectors."""
    _, _, vt = np.linalg.svd(A, full_matrices=True)
    return vt[:, -1, :]


def fit_affine(x1, x2):
    """Affine maps ``x2 ~ A x1`` from 3 point pairs each: (M, 3, 3) with last row (0, 0, 1).

    Parameters
    ----------
    x1, x2 : ndarray of shape (M, 3, 2)
    """
    T1, T2 = _normalising_transform(x1), _normalising_transform(x2)
    a, b = _apply(T1, x1), _apply(T2, x2)
    X = np.concatenate([a, np.ones(a.shape[:2] + (1,))], axis=2)  # (M, 3, 3)
    # X @ An^T = b; pinv copes with collinear samples (their maps fit nothing well)
    An = np.zeros((x1.shape[0], 3, 3))
    An[:, :2, :] = np.swapaxes(np.linalg.pinv(X) @ b, 1, 2)
    An[:, 2, 2] = 1.0
    return np.linalg.inv(T2) @ An @ T1


def fit_homography(x1, x2):
    """Homographies ``x2 ~ H x1`` from 4 point pairs each (normalised DLT): (M, 3, 3).

    Parameters
    ----------
    x1, x2 : ndarray of shape (M, 4, 2)
    """
    T1, T2 = _normalising_transform(x1), _normalising_transform(x2)
    a, b = _apply(T1, x1), _apply(T2, x2)
    M, n = a.shape[:2]
    A = np.zeros((M, 2 * n, 9))
    x, y = a[..., 0], a[..., 1]
    u, v = b[..., 0], b[..., 1]
    one = np.ones_like(x)
    A[:, 0::2, 0], A[:, 0::2, 1], A[:, 0::2, 2] = x, y, one
    A[:, 0::2, 6], A[:, 0::2, 7], A[:, 0::2, 8] = -u * x, -u * y, -u
    A[:, 1::2, 3], A[:, 1::2, 4], A[:, 1::2, 5] = x, y, one
    A[:, 1::2, 6], A[:, 1::2, 7], A[:, 1::2, 8] = -v * x, -v * y, -v
    Hn = _null_vector(A).reshape(M, 3, 3)
    return np.linalg.inv(T2) @ Hn @ T1


def fit_fundamental(x1, x2):
    """Fundamental matrices ``x2^T F x1 = 0`` from 8 point pairs each (normalised 8-point, rank 2
    enforced): (M, 3, 3), unit Frobenius norm.

    Parameters
    ----------
    x1, x2 : ndarray of shape (M, 8, 2)
    """
    T1, T2 = _normalising_transform(x1), _normalising_transform(x2)
    a, b = _apply(T1, x1), _apply(T2, x2)
    M, n = a.shape[:2]
    A = np.empty((M, n, 9))
    A[..., 0] = b[..., 0] * a[..., 0]
    A[..., 1] = b[..., 0] * a[..., 1]
    A[..., 2] = b[..., 0]
    A[..., 3] = b[..., 1] * a[..., 0]
    A[..., 4] = b[..., 1] * a[..., 1]
    A[..., 5] = b[..., 1]
    A[..., 6] = a[..., 0]
    A[..., 7] = a[..., 1]
    A[..., 8] = 1.0
    Fn = _null_vector(A).reshape(M, 3, 3)
    u, s, vt = np.linalg.svd(Fn)
    s[:, 2] = 0.0
    F = np.swapaxes(T2, 1, 2) @ ((u * s[:, None, :]) @ vt) @ T1
    return F / np.maximum(np.linalg.norm(F, axis=(1, 2), keepdims=True), 1e-300)


def transfer_residuals(H, x1, x2):
    """Squared transfer errors ``|x2 - H x1|^2`` of every point against every map.

    Parameters
    ----------
    H : ndarray of shape (M, 3, 3)
    x1, x2 : ndarray of shape (n, 2)

    Returns
    -------
    r : ndarray of shape (n, M)
    """
    X = _homogeneous(x1)
    p = np.einsum("mij,nj->nmi", H, X)  # (n, M, 3)
    w = p[..., 2]
    w = np.where(np.abs(w) < 1e-12, 1e-12, w)
    dx = p[..., 0] / w - x2[:, None, 0]
    dy = p[..., 1] / w - x2[:, None, 1]
    return dx * dx + dy * dy


def sampson_residuals(F, x1, x2):
    """Sampson distances (squared, first-order geometric error) of every point pair against every
    fundamental matrix.

    Parameters
    ----------
    F : ndarray of shape (M, 3, 3)
    x1, x2 : ndarray of shape (n, 2)

    Returns
    -------
    r : ndarray of shape (n, M)
    """
    X1, X2 = _homogeneous(x1), _homogeneous(x2)
    Fx1 = np.einsum("mij,nj->nmi", F, X1)  # (n, M, 3)
    Ftx2 = np.einsum("mji,nj->nmi", F, X2)
    num = np.einsum("nmi,ni->nm", Fx1, X2)
    den = Fx1[..., 0] ** 2 + Fx1[..., 1] ** 2 + Ftx2[..., 0] ** 2 + Ftx2[..., 1] ** 2
    return num * num / np.maximum(den, 1e-300)


_FIT = {"affine": fit_affine, "homography": fit_homography, "fundamental": fit_fundamental}


# residual of each model type in the compiled kernel (the values of the two functions above)
_KIND = {"affine": TRANSFER, "homography": TRANSFER, "fundamental": SAMPSON}


def _local_samples(x1, size, n_samples, n_local, rng):
    """Index sets (n_samples, size): a uniform seed and ``size - 1`` distinct tracks among its
    ``n_local`` nearest neighbours in ``x1`` (the seed included in the count)."""
    n = x1.shape[0]
    n_local = min(max(n_local, size), n)
    _, near = cKDTree(x1).query(x1, k=n_local)
    near = near.reshape(n, n_local)
    seeds = rng.integers(n, size=n_samples)
    # distinct neighbours: the `size - 1` smallest of random keys over the seed's other neighbours
    keys = rng.random((n_samples, n_local - 1))
    pick = np.argpartition(keys, size - 2, axis=1)[:, : size - 1] + 1 if size > 1 else \
        np.zeros((n_samples, 0), dtype=np.int64)
    rows = near[seeds]
    return np.concatenate([rows[:, :1], np.take_along_axis(rows, pick, axis=1)], axis=1)


def frame_pairs(n_frames, gaps=DEFAULT_GAPS):
    """The frame pairs ``(f, f + g)`` for every gap g (< ``n_frames``) and frame f, as (T, 2)."""
    out = [(f, f + g) for g in sorted(set(int(g) for g in gaps)) if 0 < g < n_frames
           for f in range(n_frames - g)]
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def _check_options(models, gaps, n_hypotheses, top_fraction, n_local):
    models = (models,) if isinstance(models, str) else tuple(models)
    if not models:
        raise ValueError("models must name at least one model type")
    for m in models:
        if m not in GEOMETRIC_MODELS:
            raise ValueError(f"models must be among {tuple(GEOMETRIC_MODELS)}; got {m!r}")
    gaps = tuple(int(g) for g in np.atleast_1d(gaps))
    if not gaps or min(gaps) < 1:
        raise ValueError(f"gaps must be a non-empty list of positive ints; got {gaps}")
    if int(n_hypotheses) < 1:
        raise ValueError(f"n_hypotheses must be >= 1; got {n_hypotheses}")
    if not 0.0 < float(top_fraction) <= 1.0:
        raise ValueError(f"top_fraction must be in (0, 1]; got {top_fraction}")
    if float(n_local) < 1.0:
        raise ValueError(f"neighbours must be >= 1; got {n_local}")
    return models, gaps


def _kept_hypotheses(points, visible, models, pairs, n_hypotheses, top_fraction, neighbours,
                     rng):
    """Per model: the sparse (P, T * n_hypotheses) matrix of each track's kept hypotheses in
    every pair (entries 1/h), the dense (P, T) 0/1 matrix of the pairs each track takes part in,
    and h."""
    P = points.shape[0]
    h = max(1, int(round(top_fraction * n_hypotheses)))
    rows = {m: [] for m in models}
    cols = {m: [] for m in models}
    both = np.zeros((P, len(pairs)), dtype=np.float64)
    for t, (f, g) in enumerate(pairs):
        idx = np.flatnonzero(visible[:, f] & visible[:, g])
        x1 = np.ascontiguousarray(points[idx, f], dtype=np.float64)
        x2 = np.ascontiguousarray(points[idx, g], dtype=np.float64)
        for m in models:
            size = GEOMETRIC_MODELS[m]
            if idx.size < 2 * size:
                continue
            s = _local_samples(x1, size, n_hypotheses, int(round(neighbours * size)), rng)
            hyp = np.ascontiguousarray(_FIT[m](x1[s], x2[s]))
            kept = kept_hypotheses(_KIND[m], hyp, x1, x2, h)
            rows[m].append(np.repeat(idx, h))
            cols[m].append((kept + t * n_hypotheses).ravel())
            both[idx, t] = 1.0
    out = {}
    shape = (P, len(pairs) * n_hypotheses)
    for m in models:
        r = np.concatenate(rows[m]) if rows[m] else np.zeros(0, dtype=np.int64)
        c = np.concatenate(cols[m]) if cols[m] else np.zeros(0, dtype=np.int64)
        out[m] = sparse.csr_matrix((np.full(r.size, 1.0 / h), (r, c)), shape=shape)
    return out, both, h


def _top_k_rows(A, k, offset):
    """Sparse rows keeping each row's ``k`` largest entries of the dense block ``A`` (the diagonal,
    at column ``offset + i``, excluded)."""
    n, P = A.shape
    A = A.copy()
    A[np.arange(n), offset + np.arange(n)] = -np.inf
    k = min(k, P - 1)
    idx = np.argpartition(-A, k - 1, axis=1)[:, :k]
    val = np.take_along_axis(A, idx, axis=1)
    val = np.maximum(val, 0.0)
    return np.repeat(np.arange(n), k), idx.ravel(), val.ravel()


def _tracks(points, visible, n_motions=None):
    """Validated (P, F, 2) float64 tracks and their (P, F) mask (default: the finite entries)."""
    arr = trajectory_array(points)
    if visible is None:
        visible = np.isfinite(arr).all(axis=2)
    return check_visible(arr, visible, n_motions)


def geometric_affinities(points, visible=None, *, models=DEFAULT_MODELS, gaps=DEFAULT_GAPS,
                         n_hypotheses=300, top_fraction=0.1, neighbours=3.0, n_neighbors=20,
                         fuse=True, random_state=0):
    """Sparse affinities between tracks from two-view models over frame pairs.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels (any consistent units); entries not ``visible`` are ignored.
    visible : array_like of shape (P, F), bool, optional
        True where a track is observed; default: wherever ``points`` is finite. Every track must
        be observed in at least 2 frames.
    models : sequence of {"affine", "homography", "fundamental"}, default all three
    gaps : sequence of int, default (1, 2, 4)
        Frame gaps of the pairs (:func:`frame_pairs`).
    n_hypotheses : int, default 300
        Hypotheses per model type and frame pair.
    top_fraction : float, default 0.1
        Fraction of a pair's hypotheses each track keeps (its best-fitting ones).
    neighbours : float, default 3.0
        A minimal set is drawn among the ``neighbours x minimal size`` tracks nearest to its seed.
    n_neighbors : int, default 20
        Affinities kept per track (k-nearest-neighbour sparsification, then symmetrised by the
        maximum).
    fuse : bool, default True
        Also return ``"fused"``: the mean of the model types' affinities, sparsified the same way.
    random_state : None, int or numpy.random.Generator, default 0
        Seeds the hypothesis sampling.

    Returns
    -------
    affinities : dict of str -> scipy.sparse.csr_matrix of shape (P, P)
        Symmetric, non-negative, zero diagonal; entries in [0, 1].

    Raises
    ------
    ValueError
        Bad ``points`` or ``visible`` (see :func:`cvfs.motion.missing.check_visible`), an unknown
        model type, gaps < 1, ``n_hypotheses`` < 1, ``top_fraction`` outside (0, 1],
        ``neighbours`` < 1 or ``n_neighbors`` < 1.
    """
    points, visible = _tracks(points, visible)
    models, gaps = _check_options(models, gaps, n_hypotheses, top_fraction, neighbours)
    if int(n_neighbors) < 1:
        raise ValueError(f"n_neighbors must be >= 1; got {n_neighbors}")
    n_hypotheses, n_neighbors = int(n_hypotheses), int(n_neighbors)
    rng = check_random_state(random_state)
    P = points.shape[0]
    pairs = frame_pairs(points.shape[1], gaps)
    names = list(models) + (["fused"] if fuse and len(models) > 1 else [])
    with threadpool_limits(limits=1, user_api="blas"):
        kept, both, h = _kept_hypotheses(points, visible, models, pairs, n_hypotheses,
                                         top_fraction, float(neighbours), rng)
        kept_t = {m: kept[m].T.tocsr() for m in models}
        # K K^T of the kept matrices (entries 1/h): n shared hypotheses sum to sums[n], the
        # float an accumulator reaches adding n equal products in any order
        sums = np.zeros(len(pairs) * h + 1)
        for k in range(1, sums.size):
            sums[k] = sums[k - 1] + (1.0 / h) * (1.0 / h)
        trip = {n: ([], [], []) for n in names}
        for start in range(0, P, _CHUNK):
            stop = min(P, start + _CHUNK)
            n_both = both[start:stop] @ both.T  # 0/1 products: exact counts
            scale = 1.0 / np.maximum(n_both, 1.0)
            total = None
            for m in models:
                n_shared = shared_counts(kept[m].indptr, kept[m].indices, kept_t[m].indptr,
                                         kept_t[m].indices, start, stop, P)
                A = sums[n_shared] * scale
                total = A if total is None else total + A
                _append(trip[m], _top_k_rows(A, n_neighbors, start), start)
            if "fused" in trip:
                _append(trip["fused"], _top_k_rows(total / len(models), n_neighbors, start),
                        start)
    out = {}
    for n in names:
        r, c, v = (np.concatenate(x) for x in trip[n])
        A = sparse.csr_matrix((v, (r, c)), shape=(P, P))
        A = A.maximum(A.T).tocsr()
        A.eliminate_zeros()
        out[n] = A
    return out


def _append(acc, rcv, start):
    r, c, v = rcv
    acc[0].append(r + start)
    acc[1].append(c)
    acc[2].append(v)


def spectral_labels_sparse(A, n_motions, *, n_init=10, random_state=0):
    """Normalised spectral clustering (Ng, Jordan & Weiss) of a sparse symmetric affinity.

    Parameters
    ----------
    A : scipy.sparse matrix of shape (P, P)
        Symmetric, non-negative affinity.
    n_motions : int
        K.
    n_init : int, default 10
        k-means restarts on the embedding.
    random_state : int, default 0
        Seeds k-means (and the Lanczos start vector).

    Returns
    -------
    labels : ndarray of shape (P,), int64
    """
    A = sparse.csr_matrix(A, dtype=np.float64)
    P = A.shape[0]
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv = 1.0 / np.sqrt(np.maximum(deg, 1e-12))
    M = sparse.diags(inv) @ A @ sparse.diags(inv)
    vec = None
    if P > _DENSE_MAX:
        try:
            _, vec = eigsh(M, k=n_motions, which="LA", tol=1e-8,
                           v0=np.random.default_rng(random_state).standard_normal(P))
        except ArpackError:
            vec = None
    if vec is None:
        _, vec = eigh(M.toarray(), subset_by_index=[P - n_motions, P - 1], driver="evr",
                      check_finite=False)
    vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
    km = KMeans(n_clusters=n_motions, n_init=n_init, random_state=random_state)
    return km.fit_predict(vec).astype(np.int64)


def geometric_candidates(points, n_motions, visible=None, *, models=DEFAULT_MODELS,
                         gaps=DEFAULT_GAPS, n_hypotheses=300, top_fraction=0.1, neighbours=3.0,
                         n_neighbors=20, fuse=True, random_state=0, return_affinities=False):
    """Candidate segmentations by spectral clustering of two-view-geometry affinities.

    One candidate per model type of ``models`` and, with ``fuse``, one from their mean affinity
    (:func:`geometric_affinities`; the parameters are the same).

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels; entries not ``visible`` are ignored.
    n_motions : int
        K.
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite.
    models, gaps, n_hypotheses, top_fraction, neighbours, n_neighbors, fuse
        As :func:`geometric_affinities`.
    random_state : None, int or numpy.random.Generator, default 0
        Seeds the hypothesis sampling; an int also seeds k-means, otherwise k-means gets a seed
        drawn from the generator after the sampling.
    return_affinities : bool, default False
        Also return the affinities clustered (:func:`geometric_affinities`).

    Returns
    -------
    candidates : GeometricCandidates
    affinities : dict of str -> scipy.sparse.csr_matrix
        Only with ``return_affinities``.

    Raises
    ------
    ValueError
        As :func:`geometric_affinities`, and ``n_motions`` < 2 or more than P / 4.
    TypeError
        If ``n_motions`` is not an int.
    """
    out = _candidates(points, n_motions, visible, models=models, gaps=gaps,
                      n_hypotheses=n_hypotheses, top_fraction=top_fraction,
                      neighbours=neighbours, n_neighbors=n_neighbors, fuse=fuse,
                      random_state=random_state)
    return out if return_affinities else out[0]


def _candidates(points, n_motions, visible, *, models, gaps, n_hypotheses, top_fraction,
                neighbours, n_neighbors, fuse, random_state):
    """:func:`geometric_candidates` and the affinities it clustered."""
    points, visible = _tracks(points, visible, n_motions)
    aff = geometric_affinities(points, visible, models=models, gaps=gaps,
                               n_hypotheses=n_hypotheses, top_fraction=top_fraction,
                               neighbours=neighbours, n_neighbors=n_neighbors, fuse=fuse,
                               random_state=random_state)
    seed = _kmeans_seed(random_state)
    return _cluster(aff, int(n_motions), seed), aff


def _kmeans_seed(random_state):
    """k-means' seed: an int ``random_state`` as it is, else one drawn from the generator (after
    the hypothesis sampling drew from it)."""
    return int(random_state) if isinstance(random_state, (int, np.integer)) else \
        int(check_random_state(random_state).integers(0, 2**31 - 1))


def _cluster(aff, n_motions, seed):
    """The candidates of K = ``n_motions``: every affinity of ``aff`` spectrally clustered."""
    names = tuple(aff)
    # one thread for BLAS and for k-means' OpenMP (small problems; same labels)
    with threadpool_limits(limits=1):
        labels = np.vstack([canonical_labels(spectral_labels_sparse(aff[n], n_motions,
                                                                    random_state=seed))
                            for n in names])
    return GeometricCandidates(labels=labels, names=names, n_motions=n_motions)


def normalised_cut(A, labels):
    """Normalised cut of a labelling on a symmetric affinity: ``sum_k cut(C_k, rest) / vol(C_k)``.

    Parameters
    ----------
    A : scipy.sparse matrix or ndarray of shape (P, P)
        Symmetric, non-negative affinity.
    labels : array_like of shape (P,)
        Cluster of each point, ints in 0..K-1.

    Returns
    -------
    ncut : float
        In [0, K]; 0 when no affinity crosses clusters. A cluster with no affinity at all
        counts 1.
    """
    A = sparse.csr_matrix(A, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (A.shape[0],):
        raise ValueError(f"labels must have shape ({A.shape[0]},); got {labels.shape}")
    return float(np.sum(cut_terms(A, labels, int(labels.max()) + 1)))


def cut_terms(A, labels, K):
    """Per-cluster terms ``cut(C_k, rest) / vol(C_k)`` of :func:`normalised_cut` (1 for a
    cluster without affinity), for K clusters."""
    A = sparse.csr_matrix(A, dtype=np.float64)
    Y = sparse.csr_matrix((np.ones(labels.size), (np.arange(labels.size), labels)),
                          shape=(labels.size, K))
    within = np.asarray((Y.T @ (A @ Y)).diagonal()).ravel()
    vol = np.asarray(Y.T @ np.asarray(A.sum(axis=1)).ravel()).ravel()
    return np.where(vol > 0, 1.0 - within / np.maximum(vol, 1e-300), 1.0)


def selection_scores(affinities, labels):
    """The selection score of each candidate labelling (lower is better): the geometric mean of
    its normalised cuts (:func:`normalised_cut`) on every affinity.

    Parameters
    ----------
    affinities : dict of str -> sparse matrix, or sequence of sparse matrices
        E.g. the output of :func:`geometric_affinities`.
    labels : ndarray of shape (C, P)

    Returns
    -------
    scores : ndarray of shape (C,)
    """
    mats = list(affinities.values()) if isinstance(affinities, dict) else list(affinities)
    if not mats:
        raise ValueError("affinities must hold at least one matrix")
    labels = np.atleast_2d(np.asarray(labels, dtype=np.int64))
    cuts = np.array([[normalised_cut(A, lab) for A in mats] for lab in labels])
    return np.exp(np.log(cuts + _CUT_FLOOR).mean(axis=1))


def segment_perspective(points, n_motions, visible=None, *, random_state=0, **options):
    """Segment tracks by motion under a perspective camera, K given: the labelling of
    :func:`candidate_pool` (the candidates of :func:`geometric_candidates` and those merged by
    two-view fit) with the lowest :func:`selection_scores`.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Track coordinates in pixels; entries not ``visible`` are ignored.
    n_motions : int
        K.
    visible : array_like of shape (P, F), bool, optional
        Default: wherever ``points`` is finite.
    random_state : None, int or numpy.random.Generator, default 0
        As :func:`geometric_candidates`.
    **options
        The other keywords of :func:`geometric_candidates` (``models``, ``gaps``, ...).

    Returns
    -------
    labels : ndarray of shape (P,), int64
        In 0..K-1.

    Raises
    ------
    ValueError, TypeError
        As :func:`geometric_candidates`.
    """
    kw = _options(options, "segment_perspective")
    points, visible = _tracks(points, visible, n_motions)
    aff = geometric_affinities(points, visible, random_state=random_state, **kw)
    labels = candidate_pool(points, visible, aff, int(n_motions), _kmeans_seed(random_state),
                            gaps=kw["gaps"])
    return labels[int(np.argmin(selection_scores(aff, labels)))].copy()


def candidate_pool(points, visible, affinities, n_motions, seed, *, gaps=DEFAULT_GAPS):
    """The labellings :func:`segment_perspective` ranks: each affinity spectrally clustered into
    K (:func:`geometric_candidates`' candidates), then each clustered into K + 2 and merged back
    to K by two-view fit (:func:`cvfs.motion.geometry_merge.merged_candidates`).

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
    visible : ndarray of shape (P, F), bool
        Validated tracks.
    affinities : dict of str to sparse matrix
        :func:`geometric_affinities`.
    n_motions : int
    seed : int
        k-means seed.
    gaps : sequence of int
        The affinities' frame gaps, also those of the merge fits.

    Returns
    -------
    labels : ndarray of shape (C, P), int64
    """
    from cvfs.motion.geometry_merge import merged_candidates

    direct = _cluster(affinities, n_motions, seed).labels
    merged = merged_candidates(points, visible, affinities, n_motions, seed, gaps=gaps)
    return np.vstack([direct, merged])


def _options(options, caller):
    """The keywords of :func:`geometric_candidates` with their defaults, updated by
    ``options``."""
    kw = dict(models=DEFAULT_MODELS, gaps=DEFAULT_GAPS, n_hypotheses=300, top_fraction=0.1,
              neighbours=3.0, n_neighbors=20, fuse=True)
    unknown = set(options) - set(kw)
    if unknown:
        raise TypeError(f"{caller} got unknown options {sorted(unknown)}")
    kw.update(options)
    return kw
