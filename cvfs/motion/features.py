"""Ranking features of a candidate motion segmentation (likelihood + prior features).

Every sequence gives the same feature layout whatever K, P or F, so one ranker serves all.

Spaces (7): the trajectories (2F-dim, normalised coordinates), the velocity vectors (eq. 26), and
the whitened projections (unit rows of ``V[:, :d]``) at five dimension slots
``d_j = 2K + floor(j K / 2)``, j = 0..4 (spanning [2K, 4K]).

Likelihood features (paper appendix): in each space and for each label, a least-squares affine
subspace of dimension m in ``SUBSPACE_DIMS`` (3 is the paper's rigid-motion model; 1, 2, 4 add
degenerate and articulated cases) is fitted through the points of that label; with D the point's
distance to its label's subspace, divided by the space's RMS spread: the mean of D, the mean of D^2,
and the fraction with D >= tau for every tau in ``THRESHOLDS``. Over all d in [2K, 4K], the mean and
mean squared distances are sorted and the smallest 4 kept (as in VC).

Prior features: kNN graphs in every space with Euclidean or angular (1 - cos^2) distance and k in
``KNN_KS``: the fraction of edges joining different labels.

Also: cluster-size balance (smallest, largest fraction, entropy / log K) and the candidate's
generating parameters (log2 alpha, d / K, one indicator per K-subspace refinement space).

Relative blocks: every feature above minus its smallest value over the candidates of the same
sequence (``rel/...``), and its z-score over them (``z/...``, ``(x - mean) / (std + 1e-9)``).
Rankers compare candidates only within a sequence, and these blocks let non-linear responses (bins,
stumps) act on "how much worse than the other candidates here" instead of on absolute values that
vary from video to video; on Hopkins155 both blocks lower the cross-validated test error of
both rankers (``cvfs motion evaluate``; numbers in ``docs/methods.md``).

References
----------
Barbu et al., FSA paper, appendix "Likelihood and Prior Based Features".
"""

import numpy as np
from threadpoolctl import threadpool_limits

from cvfs._jit import njit
from cvfs.motion.candidates import (
    REFINE_SPACES,
    Candidates,
    _unit_rows,
    check_points,
    velocity_matrix,
)

__all__ = ["FEATURE_VERSION", "KNN_KS", "SUBSPACE_DIMS", "THRESHOLDS", "cut_fractions",
           "candidate_features", "feature_names", "n_features", "dim_slots"]

FEATURE_VERSION = 6
SUBSPACE_DIMS = (1, 2, 3, 4)
THRESHOLDS = tuple(float(t) for t in np.geomspace(0.002, 0.5, 16))
KNN_KS = tuple(range(1, 11)) + (12, 14, 16, 18, 20, 25, 30, 35, 40, 45, 50)
_N_SLOTS = 5
_SPACES = ("traj", "vel") + tuple(f"proj{j}" for j in range(_N_SLOTS))


def dim_slots(n_motions):
    """The five projection dimensions of the feature spaces: ``2K + floor(j K / 2)``, j=0..4."""
    return tuple(2 * n_motions + (j * n_motions) // 2 for j in range(_N_SLOTS))


def feature_names():
    """Names of the features, in column order.

    Returns
    -------
    names : list of str
    """
    names = []
    for sp in _SPACES:
        for m in SUBSPACE_DIMS:
            names += [f"lik/{sp}/m{m}/mean", f"lik/{sp}/m{m}/meansq"]
            names += [f"lik/{sp}/m{m}/frac>={t:.4g}" for t in THRESHOLDS]
    for m in SUBSPACE_DIMS:
        for stat in ("mean", "meansq"):
            names += [f"lik/sorted_d/m{m}/{stat}/{i}" for i in range(4)]
    for sp in _SPACES:
        for metric in ("euclid", "angular"):
            names += [f"prior/{sp}/{metric}/k{k}" for k in KNN_KS]
    names += ["size/min_frac", "size/max_frac", "size/entropy", "param/log2_alpha",
              "param/d_over_k"] + [f"param/refined_{space}" for space in REFINE_SPACES]
    return names + [f"rel/{n}" for n in names] + [f"z/{n}" for n in names]


def n_features():
    """Number of features per candidate."""
    return len(feature_names())


@njit(cache=True)
def cut_fractions(labels, neighbors, ks):
    """Fraction of kNN edges that join different labels, for every candidate and every k.

    Parameters
    ----------
    labels : ndarray of shape (C, P), int64
    neighbors : ndarray of shape (P, k_max), int64
        Neighbours of each point, nearest first (the point itself excluded).
    ks : ndarray of shape (n_k,), int64
        Increasing values in 1..k_max.

    Returns
    -------
    frac : ndarray of shape (C, n_k), float64
    """
    n_cand, n_pts = labels.shape
    k_max = neighbors.shape[1]
    out = np.zeros((n_cand, ks.shape[0]))
    for c in range(n_cand):
        cum = np.zeros(k_max)
        for i in range(n_pts):
            li = labels[c, i]
            for j in range(k_max):
                if labels[c, neighbors[i, j]] != li:
                    cum[j] += 1.0
        total = 0.0
        kk = 0
        for j in range(k_max):
            total += cum[j]
            while kk < ks.shape[0] and ks[kk] == j + 1:
                out[c, kk] = total / (n_pts * (j + 1))
                kk += 1
    return out


def _neighbors(X, k_max, metric):
    """Indices of the k_max nearest neighbours of each row (self excluded), nearest first."""
    if metric == "euclid":
        sq = np.sum(X * X, axis=1)
        dist = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    else:
        U = _unit_rows(X)
        cos = U @ U.T
        dist = 1.0 - cos * cos
    np.fill_diagonal(dist, np.inf)
    k = min(k_max, X.shape[0] - 1)
    part = np.argpartition(dist, k - 1, axis=1)[:, :k]
    order = np.argsort(np.take_along_axis(dist, part, axis=1), axis=1, kind="stable")
    nb = np.take_along_axis(part, order, axis=1)
    if k < k_max:  # tiny sequences: repeat the farthest neighbour
        nb = np.concatenate([nb, np.repeat(nb[:, -1:], k_max - k, axis=1)], axis=1)
    return np.ascontiguousarray(nb, dtype=np.int64)


def _affine_residuals(Y, labels, n_motions, dims=SUBSPACE_DIMS):
    """Distances of each point to the affine subspace of its label, per subspace dimension.

    Returns
    -------
    dist : ndarray of shape (len(dims), P)
    """
    out = np.zeros((len(dims), Y.shape[0]))
    m_max = max(dims)
    for lab in range(n_motions):
        idx = np.flatnonzero(labels == lab)
        if idx.size == 0:
            continue
        Yc = Y[idx] - Y[idx].mean(axis=0)
        total = np.einsum("ij,ij->i", Yc, Yc)
        if Yc.shape[1] <= idx.size:
            _, vec = np.linalg.eigh(Yc.T @ Yc)
            proj = Yc @ vec[:, ::-1][:, :m_max]
        else:  # fewer points than dimensions: work in the span of the points
            w, vec = np.linalg.eigh(Yc @ Yc.T)
            w, vec = w[::-1][:m_max], vec[:, ::-1][:, :m_max]
            proj = vec * np.sqrt(np.maximum(w, 0.0))
        proj2 = np.cumsum(proj * proj, axis=1)
        for i, m in enumerate(dims):
            mm = min(m, proj2.shape[1])
            res = total - proj2[:, mm - 1] if mm > 0 else total
            out[i, idx] = np.sqrt(np.maximum(res, 0.0))
    return out


def _scale(Y):
    Yc = Y - Y.mean(axis=0)
    return np.sqrt(np.mean(np.einsum("ij,ij->i", Yc, Yc))) + 1e-12


def candidate_features(points, candidates):
    """Features of every candidate segmentation of one sequence.

    Parameters
    ----------
    points : array_like of shape (P, F, 2)
        The trajectories the candidates segment (normalised coordinates).
    candidates : Candidates
        From :func:`cvfs.motion.candidates.generate_candidates` on the same points.

    Returns
    -------
    X : ndarray of shape (C, n_features())
        float64; columns named by :func:`feature_names`.

    Raises
    ------
    ValueError
        If ``points`` is malformed or does not match the candidates.

    References
    ----------
    Barbu et al., FSA paper, appendix "Likelihood and Prior Based Features".
    """
    if not isinstance(candidates, Candidates):
        raise TypeError(f"candidates must be a Candidates; got {type(candidates).__name__}")
    K = candidates.n_motions
    points, _ = check_points(points, K)
    labels = candidates.labels
    if labels.ndim != 2 or labels.shape[1] != points.shape[0]:
        raise ValueError(f"candidates label {labels.shape[-1]} points; points has "
                         f"{points.shape[0]}")
    n_cand, n_pts = labels.shape
    V = candidates.basis
    slots = [min(d, V.shape[1]) for d in dim_slots(K)]
    d_range = [min(d, V.shape[1]) for d in range(2 * K, 4 * K + 1)]
    spaces = {"traj": points.reshape(n_pts, -1), "vel": velocity_matrix(points).T}
    for j, d in enumerate(slots):
        spaces[f"proj{j}"] = _unit_rows(V[:, :d])
    thr = np.asarray(THRESHOLDS)
    ks = np.asarray(KNN_KS, dtype=np.int64)
    blocks = []
    with threadpool_limits(limits=1, user_api="blas"):
        scaled = {name: Y / _scale(Y) for name, Y in spaces.items()}
        # likelihood features in the 7 spaces
        lik = np.empty((n_cand, len(_SPACES), len(SUBSPACE_DIMS), 2 + thr.size))
        for s_i, name in enumerate(_SPACES):
            Y = scaled[name]
            for c in range(n_cand):
                D = _affine_residuals(Y, labels[c], K)  # (n_dims, P)
                lik[c, s_i, :, 0] = D.mean(axis=1)
                lik[c, s_i, :, 1] = np.mean(D * D, axis=1)
                lik[c, s_i, :, 2:] = np.mean(D[:, :, None] >= thr[None, None, :], axis=1)
        blocks.append(lik.reshape(n_cand, -1))
        # sorted smallest-4 over d in [2K, 4K]
        per_d = np.empty((n_cand, len(d_range), len(SUBSPACE_DIMS), 2))
        cache = {}
        for di, d in enumerate(d_range):
            if d not in cache:
                Y = _unit_rows(V[:, :d])
                cache[d] = Y / _scale(Y)
            for c in range(n_cand):
                D = _affine_residuals(cache[d], labels[c], K)
                per_d[c, di, :, 0] = D.mean(axis=1)
                per_d[c, di, :, 1] = np.mean(D * D, axis=1)
        srt = np.sort(per_d, axis=1)
        if srt.shape[1] < 4:
            srt = np.concatenate([srt, np.repeat(srt[:, -1:], 4 - srt.shape[1], axis=1)], axis=1)
        blocks.append(srt[:, :4].transpose(0, 2, 3, 1).reshape(n_cand, -1))
        # prior features: cut-edge fractions of kNN graphs
        prior = []
        for name in _SPACES:
            for metric in ("euclid", "angular"):
                nb = _neighbors(scaled[name], int(ks.max()), metric)
                prior.append(cut_fractions(labels, nb, ks))
        blocks.append(np.concatenate(prior, axis=1))
    counts = np.stack([np.bincount(row, minlength=K) for row in labels]) / n_pts
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.sum(np.where(counts > 0, counts * np.log(counts), 0.0), axis=1) / np.log(K)
    params = candidates.params
    refined = params[:, 2:3] == 1 + np.arange(len(REFINE_SPACES))[None, :]
    blocks.append(np.column_stack([counts.min(axis=1), counts.max(axis=1), ent,
                                   np.log2(params[:, 0]), params[:, 1] / K, refined]))
    X = np.concatenate(blocks, axis=1)
    # relative blocks: each feature minus its smallest value over the sequence's candidates, and
    # its z-score over them (~0 where the feature is constant within the sequence)
    rel = X - X.min(axis=0, keepdims=True)
    z = (X - X.mean(axis=0, keepdims=True)) / (X.std(axis=0, keepdims=True) + 1e-9)
    return np.concatenate([X, rel, z], axis=1)
