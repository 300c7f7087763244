"""Shared subspace-distance memos change no result: refinements and K-subspaces restarts that
share one memo (across restarts, K and refined spectral candidates) give the labellings of
independent calls, bit for bit."""

import numpy as np
import pytest

from cvfs.motion.candidates import (
    _ClusterFits,
    _ksubspace_state,
    _refine,
    generate_candidates,
    ksubspace_candidates,
    refine_subspaces,
    velocity_matrix,
)
from cvfs.motion.kselect import k_labellings, k_labellings_residuals, k_residuals
from cvfs.motion.synthetic import make_rigid_motions


def _refine_without_memo(Y, labels, n_motions, dim=3, max_iter=20):
    """The refinement fitting every label's subspace afresh in every iteration."""
    labels = np.asarray(labels, dtype=np.int64)
    dist = np.empty((Y.shape[0], n_motions))
    for _ in range(max_iter):
        for k in range(n_motions):
            dist[:, k] = _ClusterFits(Y, dim)(labels == k)
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels) or np.bincount(new, minlength=n_motions).min() <= dim:
            break
        labels = new
    return labels


@pytest.mark.parametrize("noise", [0.002, 0.0])
def test_refinements_sharing_a_memo_equal_fresh_ones(noise):
    pts, truth = make_rigid_motions(3, 300, 10, noise=noise, random_state=3)
    Y = velocity_matrix(pts).T
    rng = np.random.default_rng(0)
    memo = _ClusterFits(Y, 3)
    for _ in range(6):
        start = np.where(rng.random(len(truth)) < 0.4, rng.integers(0, 3, len(truth)), truth)
        shared = _refine(Y, start, 3, 3, 20, memo)
        np.testing.assert_array_equal(shared, refine_subspaces(Y, start, 3))
        np.testing.assert_array_equal(shared, _refine_without_memo(Y, start, 3))
    assert len(memo.columns) > 0


def test_memo_keeps_at_most_max_bytes():
    Y = np.random.default_rng(0).normal(size=(50, 6))
    memo = _ClusterFits(Y, 2, max_bytes=8 * 50 * 3)
    masks = [np.arange(50) % 4 == r for r in range(4)]
    first = memo(masks[0]).copy()
    for m in masks[1:]:
        memo(m)
    assert len(memo.columns) == 3 and masks[0].tobytes() not in memo.columns
    np.testing.assert_array_equal(memo(masks[0]), first)  # refitted: the same column


def test_k_labellings_equal_independent_ksubspace_calls():
    pts, _ = make_rigid_motions(3, 200, 10, random_state=1)
    Y = velocity_matrix(pts).T
    got = k_labellings(pts, range(2, 7), spectral_k=())
    for k, labels in got.items():
        np.testing.assert_array_equal(labels, ksubspace_candidates(Y, k, random_state=0))


def test_generate_candidates_sharing_the_velocity_memo():
    pts, _ = make_rigid_motions(4, 200, 10, random_state=2)
    Y = velocity_matrix(pts).T
    cand = generate_candidates(pts, 4, ksubspaces=5, random_state=0)
    spectral = generate_candidates(pts, 4, ksubspaces=0, random_state=0)
    seed = int(np.random.default_rng(0).integers(0, 2**31 - 1))
    ksub = ksubspace_candidates(Y, 4, n_restarts=5, random_state=seed)
    seen = {lab.tobytes() for lab in spectral.labels}
    extra = [lab for lab in ksub if lab.tobytes() not in seen]
    extra = [lab for i, lab in enumerate(extra)
             if all(lab.tobytes() != e.tobytes() for e in extra[:i])]
    np.testing.assert_array_equal(cand.labels, np.vstack([spectral.labels] + extra))


def test_ksubspace_state_neighbours_start_with_the_point():
    Y = np.random.default_rng(0).normal(size=(30, 5))
    near, memo = _ksubspace_state(Y)
    assert near.shape == (30, 8) and np.array_equal(near[:, 0], np.arange(30))
    assert memo.dim == 3 and memo.Y is Y


def test_k_labellings_residuals_equal_the_separate_calls():
    pts, _ = make_rigid_motions(3, 160, 10, random_state=4)
    labellings, residuals, planar = k_labellings_residuals(pts, range(2, 6))
    separate = k_labellings(pts, range(2, 6))
    assert labellings.keys() == separate.keys()
    for k in separate:
        np.testing.assert_array_equal(labellings[k], separate[k])
    r, q = k_residuals(pts, range(2, 6), return_planar=True, labellings=separate)
    assert residuals == r and planar == q  # exact floats


def test_k_capped_costs_equal_separate_capped_costs():
    from cvfs.motion.kselect import capped_cost, k_capped_costs, noise_variance

    pts, _ = make_rigid_motions(3, 160, 10, random_state=5)
    Y = velocity_matrix(pts).T
    labellings = k_labellings(pts, range(2, 6))
    got = k_capped_costs(pts, labellings=labellings, cap=8.0, dim_cost=50.0)
    sigma2 = noise_variance(Y)
    for k, labs in labellings.items():
        assert got[k] == float(np.min(capped_cost(Y, labs, sigma2, cap=8.0, dim_cost=50.0)))
    with pytest.raises(TypeError, match="caps"):
        k_capped_costs(pts, labellings=labellings, caps=8.0)
