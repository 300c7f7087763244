"""Candidate motion segmentations by velocity clustering (VC) with a parameter pool.

A trajectory ``t = [(x^1, y^1), ..., (x^F, y^F)]`` becomes the velocity vector (paper eq. 26)
``v(t) = [x^1 - x^2, y^1 - y^2, ..., x^(F-1) - x^F, y^(F-1) - y^F, x^F, y^F]``. With the SVD of the
velocity matrix ``W' = U S V^T`` (2F x P), the P points projected to dimension d are the rows of
``V[:, :d]`` (the *whitened* projection: ``U_d^T v`` would be dominated by the final-position
entries and gives ~25% error), normalised to unit length. Spectral clustering with the angular
affinity ``A_ij = (t_i^T t_j / (|t_i| |t_j|))^(2 alpha)`` (eq. 27;
Ng-Jordan-Weiss normalised embedding and k-means) gives one candidate per (alpha, d);
duplicates are removed.

The pool (``alphas``, ``dims``, ``refine``) is a parameter: the ranker can only pick what the pool
contains. The paper uses ``alpha = 2`` and ``d in [2K, 4K]``; the default pools
``alpha in {1, 2, 4, 8}``, and each spectral candidate is also refined by K-subspaces in the
velocity space (:func:`refine_subspaces`: every point moves to the nearest affine 3-D subspace of
the current clusters until nothing changes, the rigid-motion model under an affine camera); the
refined labellings join the pool (9.4 candidates per sequence on Hopkins155). Refining in the
whitened projection too (``refine=("velocity", "whitened")``) lowers the best achievable
(oracle) error but gives more candidates that are harder to rank. The oracle and test errors of
each pool: ``docs/methods.md`` ("Motion segmentation"), measured by ``cvfs motion evaluate`` and
``benchmarks/motion/motion_fold_seeds.py``.

References
----------
L. Ding, A. Barbu, A. Meyer-Baese, "Motion segmentation by velocity clustering with estimation of
subspace dimension", ACCV Workshops 2012. Barbu et al., "Feature selection with annealing for
computer vision and big data learning", appendix "Ranking for Motion Segmentation", eqs. 26-27.
"""

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh
from scipy.linalg.blas import dsymv
from scipy.linalg.lapack import dsyevr
from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from cvfs.base import check_random_state

__all__ = ["Candidates", "DEFAULT_ALPHAS", "DEFAULT_REFINE", "REFINE_SPACES", "default_dims",
           "generate_candidates", "ksubspace_candidates", "refine_subspaces", "velocity_matrix",
           "whitened_basis", "canonical_labels", "check_points", "KSUBSPACE_CODE",
           "DEFAULT_KSUBSPACE_RESTARTS"]

DEFAULT_ALPHAS = (1.0, 2.0, 4.0, 8.0)
# K-subspace refinement spaces; a candidate's params[:, 2] is 0 (spectral) or 1 + the index here
REFINE_SPACES = ("velocity", "whitened")
DEFAULT_REFINE = ("velocity",)
ISOLATED_FRACTION = 0.05
# params[:, 2] of a candidate from seeded K-subspaces (ksubspace_candidates)
KSUBSPACE_CODE = 1 + len(REFINE_SPACES)
# restarts of seeded K-subspaces added to the pool by default for K >= 4 (generate_candidates)
DEFAULT_KSUBSPACE_RESTARTS = 20
# K-subspaces iterations per restart (ksubspace_candidates)
KSUBSPACE_MAX_ITER = 50
# spectral embeddings of up to this many trajectories use the dense eigensolver, larger ones
# Lanczos (_spectral_embedding); every Hopkins155 sequence (39-556 trajectories) is below it
DENSE_EIGH_MAX_POINTS = 600


@dataclass
class Candidates:
    """Candidate segmentations of one sequence.

    Attributes
    ----------
    labels : ndarray of shape (C, P)
        int64 labels in 0..K-1, canonical (label order = order of first appearance), unique rows.
    params : ndarray of shape (C, 3)
        (alpha, d, refined) of the first candidate that produced each labelling: refined is 0 for
        a spectral candidate and ``1 + REFINE_SPACES.index(space)`` for its K-subspace refinement;
        a seeded K-subspaces candidate (:func:`ksubspace_candidates`) has
        ``(1, 0, KSUBSPACE_CODE)``.
    basis : ndarray of shape (P, r)
        Right singular vectors of the velocity matrix (whitened projection), r >= max d.
    singular_values : ndarray of shape (r,)
    n_motions : int
    """

    labels: np.ndarray
    params: np.ndarray
    basis: np.ndarray
    singular_values: np.ndarray
    n_motions: int

    def __len__(self):
        return self.labels.shape[0]


def trajectory_array(points, name="points"):
    """``points`` as a float64 (P, F, 2) array with F >= 2, else a ValueError naming ``name``."""
    arr = np.asarray(points)
    if arr.ndim != 3 or arr.shape[2] != 2:
        raise ValueError(f"{name} must have shape (P, F, 2) (trajectories x frames x xy); "
                         f"got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 frames; got F={arr.shape[1]}")
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric; got dtype {arr.dtype}") from exc
    return arr


def check_points(points, n_motions, *, name="points"):
    """Validate trajectories and the number of motions at a public boundary.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
    n_motions : int

    Returns
    -------
    points : ndarray of shape (P, F, 2), float64
    n_motions : int

    Raises
    ------
    ValueError
        Wrong shape, fewer than 2 frames, NaN/inf values, or ``n_motions`` not in
        [2, P] (or fewer than 2 points per motion on average).
    TypeError
        If ``n_motions`` is not an integer.
    """
    arr = trajectory_array(points, name)
    dead = np.flatnonzero(np.isnan(arr).all(axis=(1, 2)))
    if dead.size:
        raise ValueError(f"{name}: {dead.size} trajectories are NaN in every frame (indices "
                         f"{dead[:10].tolist()}{' ...' if dead.size > 10 else ''}): drop them")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values "
                         f"({int(np.sum(~np.isfinite(arr)))} entries): drop those trajectories")
    if isinstance(n_motions, bool) or not isinstance(n_motions, (int, np.integer)):
        raise TypeError(f"n_motions must be an int; got {type(n_motions).__name__}")
    n_motions = int(n_motions)
    if n_motions < 2:
        raise ValueError(f"n_motions must be >= 2; got {n_motions}")
    if 4 * n_motions > arr.shape[0]:
        raise ValueError(f"n_motions={n_motions} needs at least {4 * n_motions} trajectories "
                         f"(4 per motion); got P={arr.shape[0]} points")
    return arr, n_motions


def default_dims(n_motions):
    """The paper's projection dimensions: ``range(2K, 4K + 1)``."""
    return tuple(range(2 * n_motions, 4 * n_motions + 1))


def velocity_matrix(points):
    """The velocity matrix W' (paper eq. 26), one column per trajectory.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)

    Returns
    -------
    W : ndarray of shape (2F, P)
    """
    vel = points[:, :-1, :] - points[:, 1:, :]
    full = np.concatenate([vel, points[:, -1:, :]], axis=1)  # (P, F, 2)
    return full.reshape(points.shape[0], -1).T


def whitened_basis(points, max_dim):
    """Right singular vectors of the velocity matrix: the whitened projection.

    Returns
    -------
    V : ndarray of shape (P, r), r = min(max_dim, 2F, P)
    s : ndarray of shape (r,)
    """
    W = velocity_matrix(points)
    _, s, vt = np.linalg.svd(W, full_matrices=False)
    r = min(max_dim, vt.shape[0])
    return np.ascontiguousarray(vt[:r].T), s[:r]


def canonical_labels(labels):
    """Relabel so that labels appear in order 0, 1, ... (rows of a 2-D array independently)."""
    labels = np.atleast_2d(np.asarray(labels))
    out = np.empty_like(labels, dtype=np.int64)
    for i, row in enumerate(labels):
        _, first, inv = np.unique(row, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))
        out[i] = order[inv]
    return out


def _unit_rows(X):
    norm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norm, 1e-12)


def _affinity_powers(cos, alphas):
    """``cos ** (2 alpha)`` for every alpha, by repeated squaring when 2 alpha is a power of 2."""
    out = {}
    sq = cos * cos
    power, cur = 1.0, sq  # cur = cos ** (2 * power)
    for alpha in sorted(alphas):
        while power < alpha and float(alpha / power).is_integer() and (alpha / power) % 2 == 0:
            cur = cur * cur
            power *= 2
        out[alpha] = cur if power == alpha else np.power(sq, alpha)
    return out


def _spectral_embedding(A, n_motions):
    """Top-K eigenvectors of D^-1/2 A D^-1/2, rows normalised (Ng-Jordan-Weiss)."""
    inv = 1.0 / np.sqrt(np.maximum(A.sum(axis=1), 1e-12))
    M = A * inv[:, None]
    M *= inv[None, :]
    P = M.shape[0]
    if P > DENSE_EIGH_MAX_POINTS:
        # Lanczos (ARPACK, a fixed start vector): P^2 per iteration against P^3 for the dense
        # solver; on 1,000-1,100 trajectories it needs 20-175 products with M (the close
        # eigenvalues ~1 of well-separated motions take the most), 3-4x less CPU than evr
        Mt = M.T  # Fortran-ordered view of the symmetric M: symv reads one triangle, no copy
        op = LinearOperator((P, P), matvec=lambda x: dsymv(1.0, Mt, np.ravel(x)),
                            dtype=np.float64)
        try:
            _, vec = eigsh(op, k=n_motions, which="LA", tol=0.0,
                           v0=np.random.default_rng(0).standard_normal(P))
            return _unit_rows(vec)
        except ArpackError:
            pass
    # a full tridiagonalisation (LAPACK evr) beats ARPACK on the smaller matrices: with
    # well-separated motions the top eigenvalues are all ~1 and Lanczos needs many iterations
    _, vec = eigh(M, subset_by_index=[P - n_motions, P - 1], driver="evr", overwrite_a=True,
                  check_finite=False)
    return _unit_rows(vec)


def _spectral_labels(A, n_motions, kmeans):
    """Spectral clustering of affinity A; isolated points are labelled afterwards.

    A trajectory whose affinity to all others is tiny (degree < ISOLATED_FRACTION x the median
    degree; whitening gives a lone outlier its own singular direction) forms its own connected
    component and would take one of the K eigenvectors. Such points are left out of the
    embedding and then given the cluster of highest mean affinity.
    """
    deg = A.sum(axis=1)
    keep = deg >= ISOLATED_FRACTION * np.median(deg)
    if keep.sum() < 4 * n_motions:
        keep[:] = True
    if keep.all():
        return kmeans.fit_predict(_spectral_embedding(A, n_motions))
    kept = np.flatnonzero(keep)
    sub = kmeans.fit_predict(_spectral_embedding(A[np.ix_(kept, kept)], n_motions))
    labels = np.empty(A.shape[0], dtype=np.int64)
    labels[kept] = sub
    lone = np.flatnonzero(~keep)
    aff = np.stack([A[np.ix_(lone, kept[sub == k])].mean(axis=1) if np.any(sub == k)
                    else np.full(lone.size, -np.inf) for k in range(n_motions)], axis=1)
    labels[lone] = np.argmax(aff, axis=1)
    return labels


def _principal_directions(R, dim):
    """The ``dim`` leading right singular vectors of the centred rows ``R`` (rows of the result,
    largest first).

    With more rows than columns they are the top eigenvectors of the D x D scatter ``R^T R``
    (one small symmetric eigenproblem, LAPACK ``syevr``, instead of an SVD that also forms the
    n x D left factor); otherwise, or if ``syevr`` fails, the SVD of ``R``.
    """
    n, D = R.shape
    dim = min(int(dim), D)
    if n > D and dim > 0:
        _, v, m, _, info = dsyevr(R.T @ R, compute_v=1, range="I", il=D - dim + 1, iu=D)
        if info == 0 and m == dim:
            return v[:, dim - 1::-1].T
    _, _, vt = np.linalg.svd(R, full_matrices=False)
    return vt[:dim]


def refine_subspaces(Y, labels, n_motions, *, dim=3, max_iter=20):
    """K-subspaces refinement: move every point to the nearest affine subspace until stable.

    Each iteration fits a least-squares affine ``dim``-subspace through the points of every label
    and reassigns each point to the subspace nearest to it. It stops when the labels no longer
    change, after ``max_iter`` iterations, or before a step that would leave a label with ``dim``
    points or fewer (a subspace through them would fit exactly). A set of members fitted once
    (in an earlier iteration) is not fitted again: its distances are kept.

    Parameters
    ----------
    Y : ndarray of shape (P, D)
        Points (one row per trajectory).
    labels : ndarray of shape (P,)
        Starting labels in 0..K-1.
    n_motions : int
        K.
    dim : int, default 3
        Affine subspace dimension (3: a rigid motion under an affine camera).
    max_iter : int, default 20

    Returns
    -------
    labels : ndarray of shape (P,), int64
    """
    return _refine(Y, labels, n_motions, dim, max_iter, _ClusterFits(Y, dim))


class _ClusterFits:
    """Fits of sets of rows of ``Y`` (clusters, given as boolean masks), memoised by the set:
    calling it gives the squared distances of all rows to the cluster's affine ``dim``-subspace
    (the K-subspaces refinements), :meth:`singular_values` the singular values of the centred
    cluster (the subspace residuals of the labellings).

    Restarts of K-subspaces mostly reach the same clusters; a cluster met again is fitted from
    the same rows with the same arithmetic, so a stored result equals a recomputed one bit for
    bit. At most ``max_bytes`` of distance columns are kept (the oldest go first); the singular
    values (at most D per cluster) are all kept.
    """

    def __init__(self, Y, dim, max_bytes=2**26):
        self.Y, self.dim = Y, int(dim)
        self.max_items = max(1, int(max_bytes) // (8 * max(1, Y.shape[0])))
        self.columns = {}
        self.spectra = {}

    def singular_values(self, mask):
        """Singular values of the cluster's rows minus their mean, largest first."""
        key = mask.tobytes()
        s = self.spectra.get(key)
        if s is None:
            members = self.Y[mask]
            s = np.linalg.svd(members - members.mean(axis=0), compute_uv=False)
            self.spectra[key] = s
        return s

    def __call__(self, mask):
        key = mask.tobytes()
        col = self.columns.get(key)
        if col is None:
            col = self._compute(mask)
            if len(self.columns) >= self.max_items:
                del self.columns[next(iter(self.columns))]
            self.columns[key] = col
        return col

    def _compute(self, mask):
        Y = self.Y
        members = Y[mask]
        if members.shape[0] == 0:
            return np.full(Y.shape[0], np.inf)
        mean = members.mean(axis=0)
        basis = _principal_directions(members - mean, self.dim)
        R = Y - mean
        along = R @ basis.T
        return np.einsum("ij,ij->i", R, R) - np.einsum("ij,ij->i", along, along)


def _refine(Y, labels, n_motions, dim, max_iter, distances):
    """:func:`refine_subspaces` with the distance columns of ``distances``
    (a :class:`_ClusterFits` of ``Y`` and ``dim``)."""
    labels = np.asarray(labels, dtype=np.int64)
    dist = np.empty((Y.shape[0], n_motions))
    for _ in range(max_iter):
        for k in range(n_motions):
            dist[:, k] = distances(labels == k)
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels) or \
                np.bincount(new, minlength=n_motions).min() <= dim:
            break
        labels = new
    return labels


def _affine_fit(Y, dim):
    mean = Y.mean(axis=0)
    _, _, vt = np.linalg.svd(Y - mean, full_matrices=False)
    return mean, vt[:dim]


def _affine_dist(Y, fit):
    mean, basis = fit
    R = Y - mean
    along = R @ basis.T
    return np.maximum(np.einsum("ij,ij->i", R, R) - np.einsum("ij,ij->i", along, along), 0.0)


def _nearest(D2, nn):
    """The first ``nn`` columns of ``argsort(D2, axis=1, kind="stable")`` (nearest first, ties
    in index order), from a partition: every entry up to each row's ``nn``-th smallest value is
    kept and only those are sorted."""
    P = D2.shape[1]
    if nn >= P:
        return np.argsort(D2, axis=1, kind="stable")[:, :nn]
    kth = np.partition(D2, nn - 1, axis=1)[:, nn - 1:nn]
    rows, cols = np.nonzero(D2 <= kth)  # in row, then column order
    order = np.lexsort((cols, D2[rows, cols], rows))
    start = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=D2.shape[0]))[:-1]])
    return cols[order].reshape(-1)[(start[:, None] + np.arange(nn)).reshape(-1)].reshape(-1, nn)


def ksubspace_candidates(Y, n_motions, *, n_restarts=DEFAULT_KSUBSPACE_RESTARTS, dim=3,
                         n_neighbors=None, max_iter=KSUBSPACE_MAX_ITER, random_state=0):
    """K-subspaces from local seeds (K-subspaces++), one labelling per restart.

    Each restart seeds K affine ``dim``-subspaces, each fitted to one point and its
    ``n_neighbors - 1`` nearest neighbours (Euclidean, rows of ``Y``): the first point is drawn
    uniformly, every next one with probability proportional to its squared distance to the
    nearest subspace seeded so far (as k-means++ seeds centres). Every point then goes to its
    nearest seed subspace and :func:`refine_subspaces` iterates to a fixed point. A neighbourhood
    of a few points mostly lies on one motion, so unlike spectral clustering of a global affinity
    this does not need the motions' subspaces to be far apart, only K good seeds in some restart.

    Parameters
    ----------
    Y : ndarray of shape (P, D)
        Points, one row per trajectory (e.g. the velocity vectors, :func:`velocity_matrix`).
    n_motions : int
        K.
    n_restarts : int, default 20
    dim : int, default 3
        Affine subspace dimension (3: a rigid motion under an affine camera).
    n_neighbors : int, optional
        Points per seed fit; default ``2 (dim + 1)``.
    max_iter : int, default 50
        K-subspaces iterations per restart.
    random_state : None, int or numpy.random.Generator, default 0

    Returns
    -------
    labels : ndarray of shape (C, P), int64
        Canonical, unique labellings (C <= ``n_restarts``; a restart whose seeding leaves a
        label with ``dim`` points or fewer is dropped), in order of increasing subspace
        residual.

    Raises
    ------
    ValueError
        If ``Y`` is not 2-D and finite, ``n_motions < 1`` or ``P < n_motions (dim + 1)``, or
        ``n_restarts < 1``.
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or not np.all(np.isfinite(Y)):
        raise ValueError(f"Y must be a finite 2-D array (points x dims); got shape {Y.shape}")
    n_motions, n_restarts, dim = int(n_motions), int(n_restarts), int(dim)
    P = Y.shape[0]
    if n_motions < 1 or P < n_motions * (dim + 1):
        raise ValueError(f"n_motions={n_motions} needs at least {n_motions * (dim + 1)} points "
                         f"for {dim}-D subspaces; got P={P}")
    if n_restarts < 1:
        raise ValueError(f"n_restarts must be >= 1; got {n_restarts}")
    rng = check_random_state(random_state)
    near, distances = _ksubspace_state(Y, dim, n_neighbors)
    return _ksubspaces(Y, n_motions, n_restarts, near, max_iter, rng, distances)


def _ksubspace_state(Y, dim=3, n_neighbors=None):
    """What :func:`ksubspace_candidates` computes from ``Y`` alone, for any K: each row's
    ``n_neighbors`` nearest rows (itself first; default ``2 (dim + 1)``) and an empty
    :class:`_ClusterFits`."""
    P = Y.shape[0]
    nn = min(P, 2 * (dim + 1) if n_neighbors is None else int(n_neighbors))
    sq = np.einsum("ij,ij->i", Y, Y)
    near = _nearest(sq[:, None] + sq[None, :] - 2.0 * (Y @ Y.T), nn)
    return near, _ClusterFits(Y, dim)


def _ksubspaces(Y, n_motions, n_restarts, near, max_iter, rng, distances):
    """The restarts of :func:`ksubspace_candidates` on validated input: ``near`` from
    :func:`_ksubspace_state`, ``rng`` a Generator, ``distances`` a :class:`_ClusterFits`
    of ``Y`` (its ``dim`` is the subspace dimension). ``near`` and ``distances`` depend on
    ``Y`` alone, so calls for several K on one ``Y`` may share them."""
    dim = distances.dim
    P = Y.shape[0]
    seen, out, res = set(), [], []
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(n_restarts):
            dist = np.empty((P, n_motions))
            dist[:, 0] = _affine_dist(Y, _affine_fit(Y[near[rng.integers(P)]], dim))
            closest = dist[:, 0].copy()
            for k in range(1, n_motions):
                total = closest.sum()
                i = rng.choice(P, p=closest / total) if total > 0 else rng.integers(P)
                dist[:, k] = _affine_dist(Y, _affine_fit(Y[near[i]], dim))
                np.minimum(closest, dist[:, k], out=closest)
            lab = np.argmin(dist, axis=1)
            if np.bincount(lab, minlength=n_motions).min() <= dim:
                continue
            lab = canonical_labels(_refine(Y, lab, n_motions, dim, max_iter, distances))[0]
            key = lab.tobytes()
            if key in seen:
                continue
            seen.add(key)
            out.append(lab)
            res.append(sum(float(np.sum(distances.singular_values(lab == k)[dim:] ** 2))
                           for k in range(n_motions)))
    order = np.argsort(res, kind="stable")
    return np.array([out[i] for i in order], dtype=np.int64).reshape(len(out), P)


def generate_candidates(points, n_motions, *, alphas=DEFAULT_ALPHAS, dims=None,
                        refine=DEFAULT_REFINE, n_init=4, ksubspaces="auto", random_state=0):
    """Candidate segmentations by spectral clustering over a pool of (alpha, d).

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        Trajectories in normalised coordinates (roughly [-1, 1]).
    n_motions : int
        K, the number of motions.
    alphas : sequence of float, default (1, 2, 4, 8)
        Exponents of the angular affinity (eq. 27); the paper uses (2,).
    dims : sequence of int, optional
        Projection dimensions; default ``range(2K, 4K + 1)``. Dimensions above min(2F, P) are
        clipped.
    refine : sequence of {"velocity", "whitened"}, default ("velocity",)
        Spaces in which every spectral candidate is refined by :func:`refine_subspaces` (affine
        3-D subspaces); the refined labellings join the pool. ``"velocity"``: the velocity
        vectors (eq. 26); ``"whitened"``: the unit rows of ``V[:, :2K]``. ``()`` keeps only the
        spectral candidates (the paper's pool).
    n_init : int, default 4
        k-means restarts per candidate.
    ksubspaces : int or "auto", default "auto"
        Restarts of seeded K-subspaces in the velocity space (:func:`ksubspace_candidates`)
        whose labellings join the pool (``params`` = (1, 0, ``KSUBSPACE_CODE``)); 0 adds none.
        ``"auto"``: ``DEFAULT_KSUBSPACE_RESTARTS`` for K >= 4, none for K = 2, 3 (the pool the
        shipped ranker was trained on; spectral clustering of the velocity directions misses
        most segmentations once four or more motions share the image).
    random_state : None, int or numpy.random.Generator, default 0
        Seeds k-means and the K-subspaces seeds.

    Returns
    -------
    candidates : Candidates

    Raises
    ------
    ValueError
        Bad ``points`` / ``n_motions`` (see :func:`check_points`), empty ``alphas`` or ``dims``,
        non-positive alpha, d < 1, an unknown ``refine`` space, or ``ksubspaces`` neither
        "auto" nor a non-negative int.

    References
    ----------
    Barbu et al., FSA paper, appendix: eqs. 26-27 and Algorithm 2.
    """
    points, n_motions = check_points(points, n_motions)
    alphas = tuple(float(a) for a in np.atleast_1d(alphas))
    if not alphas or min(alphas) <= 0:
        raise ValueError(f"alphas must be a non-empty list of positive numbers; got {alphas}")
    dims = default_dims(n_motions) if dims is None else tuple(int(d) for d in np.atleast_1d(dims))
    if not dims or min(dims) < 1:
        raise ValueError(f"dims must be a non-empty list of positive ints; got {dims}")
    refine = (refine,) if isinstance(refine, str) else tuple(refine)
    for space in refine:
        if space not in REFINE_SPACES:
            raise ValueError(f"refine must hold spaces among {REFINE_SPACES}; got {space!r}")
    if isinstance(ksubspaces, str):
        if ksubspaces != "auto":
            raise ValueError(f"ksubspaces must be 'auto' or an int >= 0; got {ksubspaces!r}")
        ksubspaces = DEFAULT_KSUBSPACE_RESTARTS if n_motions >= 4 else 0
    elif isinstance(ksubspaces, bool) or not isinstance(ksubspaces, (int, np.integer)) \
            or ksubspaces < 0:
        raise ValueError(f"ksubspaces must be 'auto' or an int >= 0; got {ksubspaces!r}")
    rng = check_random_state(random_state)
    seed = int(rng.integers(0, 2**31 - 1))
    with threadpool_limits(limits=1, user_api="blas"):
        V, s = whitened_basis(points, max(dims))
        seen = set()
        labels, params = [], []

        def add(lab, param):
            lab = canonical_labels(lab)[0]
            key = lab.tobytes()
            if key not in seen:
                seen.add(key)
                labels.append(lab)
                params.append(param)

        for d in sorted(set(min(d, V.shape[1]) for d in dims)):
            X = _unit_rows(V[:, :d])
            cos = X @ X.T
            powers = _affinity_powers(cos, alphas)
            for alpha in alphas:
                km = KMeans(n_clusters=n_motions, n_init=n_init, random_state=seed)
                add(_spectral_labels(powers[alpha], n_motions, km), (alpha, d, 0))
        spaces = {"velocity": lambda: velocity_matrix(points).T,
                  "whitened": lambda: _unit_rows(V[:, :min(2 * n_motions, V.shape[1])])}
        spectral = list(zip(labels, params, strict=True))
        # one memo of subspace distances per space: the refinements (refine_subspaces'
        # defaults, 3-D) and, in the velocity space, the K-subspaces restarts share clusters
        memo = {}
        for space in refine:
            Y = spaces[space]()
            code = 1 + REFINE_SPACES.index(space)
            memo[space] = distances = _ClusterFits(Y, 3)
            for lab, (alpha, d, _) in spectral:
                add(_refine(Y, lab, n_motions, 3, 20, distances), (alpha, d, code))
        if ksubspaces:
            Y = memo["velocity"].Y if "velocity" in memo else spaces["velocity"]()
            near, distances = _ksubspace_state(Y)
            distances = memo.get("velocity", distances)
            for lab in _ksubspaces(Y, n_motions, ksubspaces, near, KSUBSPACE_MAX_ITER,
                                   check_random_state(seed), distances):
                add(lab, (1.0, 0, KSUBSPACE_CODE))
    return Candidates(labels=np.array(labels, dtype=np.int64), params=np.array(params),
                      basis=V, singular_values=s, n_motions=n_motions)
