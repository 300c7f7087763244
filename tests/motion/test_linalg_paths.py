"""The fast linear-algebra paths of the candidate generator agree with the plain computations:
subspace fits from the scatter matrix, nearest neighbours by partition, Lanczos spectral
embeddings of large affinities."""

import numpy as np
import pytest

from cvfs.motion.candidates import (
    DENSE_EIGH_MAX_POINTS,
    _nearest,
    _principal_directions,
    _spectral_embedding,
    refine_subspaces,
    velocity_matrix,
)
from cvfs.motion.synthetic import make_rigid_motions


def _projector(rows):
    q, _ = np.linalg.qr(rows.T)
    return q @ q.T


@pytest.mark.parametrize("n", [5, 40, 300])
def test_principal_directions_span_the_leading_singular_vectors(n):
    rng = np.random.default_rng(n)
    R = rng.normal(size=(n, 3)) @ rng.normal(size=(3, 40)) * [10.0, 5.0, 2.0][0]
    R += rng.normal(scale=0.01, size=R.shape)
    R -= R.mean(axis=0)
    s, vt = np.linalg.svd(R, full_matrices=False)[1:]
    for dim in (2, 3, 4):
        got = _principal_directions(R, dim)
        assert got.shape == (min(dim, n), 40)
        np.testing.assert_allclose(got @ got.T, np.eye(len(got)), atol=1e-12)
        # the scatter-matrix path resolves a subspace to rounding x s_1^2 over the gap of the
        # squared singular values at its edge: the 4th direction of this rank-3 matrix lies in
        # the noise, where that gap is small
        gap = s[dim - 1] ** 2 - (s[dim] ** 2 if dim < len(s) else 0.0)
        tol = max(1e-12, 10 * np.finfo(float).eps * s[0] ** 2 / gap)
        np.testing.assert_allclose(_projector(got), _projector(vt[:dim]), atol=tol)
    # largest first: the first direction carries the most energy
    energy = np.sum((R @ _principal_directions(R, 3).T) ** 2, axis=0)
    assert np.all(np.diff(energy) <= 0)


def _refine_by_svd(Y, labels, n_motions, dim=3, max_iter=20):
    """The K-subspaces iteration written out with one SVD per cluster and iteration."""
    labels = np.asarray(labels, dtype=np.int64)
    for _ in range(max_iter):
        dist = np.empty((Y.shape[0], n_motions))
        for k in range(n_motions):
            members = Y[labels == k]
            mean = members.mean(axis=0)
            vt = np.linalg.svd(members - mean, full_matrices=False)[2][:dim]
            R = Y - mean
            dist[:, k] = np.sum(R * R, axis=1) - np.sum((R @ vt.T) ** 2, axis=1)
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels) or np.bincount(new, minlength=n_motions).min() <= dim:
            break
        labels = new
    return labels


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_refine_subspaces_matches_the_svd_iteration(seed):
    pts, truth = make_rigid_motions(3, 240, 12, random_state=seed)
    Y = velocity_matrix(pts).T
    rng = np.random.default_rng(seed)
    start = np.where(rng.random(len(truth)) < 0.3, rng.integers(0, 3, len(truth)), truth)
    got = refine_subspaces(Y, start, 3)
    np.testing.assert_array_equal(got, _refine_by_svd(Y, start, 3))
    assert not np.array_equal(got, start)  # the iteration moved points


def test_nearest_equals_a_stable_argsort_with_ties():
    rng = np.random.default_rng(0)
    for P, nn in [(200, 8), (30, 8), (9, 8), (8, 8), (50, 1)]:
        D2 = np.round(rng.uniform(0, 5, size=(P, P)))  # many ties
        D2 = D2 + D2.T
        expected = np.argsort(D2, axis=1, kind="stable")[:, :nn]
        np.testing.assert_array_equal(_nearest(D2, nn), expected)


def _normalised_affinity(P, n_blocks, rng, cross):
    labels = rng.integers(0, n_blocks, P)
    A = rng.uniform(0.5, 1.0, size=(P, P)) * np.where(labels[:, None] == labels[None, :], 1.0,
                                                         cross)
    return (A + A.T) / 2.0


@pytest.mark.parametrize("cross", [0.3, 0.0])  # 0: disconnected blocks, eigenvalue 1 repeated
def test_lanczos_embedding_spans_the_dense_one(cross):
    from scipy.linalg import eigh

    rng = np.random.default_rng(1)
    P, K = DENSE_EIGH_MAX_POINTS + 50, 3
    A = _normalised_affinity(P, K, rng, cross)
    inv = 1.0 / np.sqrt(A.sum(axis=1))
    vec = eigh(A * inv[:, None] * inv[None, :], subset_by_index=[P - K, P - 1])[1]
    emb = _spectral_embedding(A.copy(), K)
    assert emb.shape == (P, K)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-12)
    # unit rows of an orthonormal basis of the same subspace: equal up to a rotation
    rows = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    rot, *_ = np.linalg.lstsq(rows, emb, rcond=None)
    np.testing.assert_allclose(rows @ rot, emb, atol=1e-8)
    np.testing.assert_allclose(rot @ rot.T, np.eye(K), atol=1e-8)
