"""Number of motions: the residual-ratio K rule, K > 3 segmentation, bad input."""

import numpy as np
import pytest

from cvfs.motion import _segment_tracks, normalise_points, rank_candidates, segment
from cvfs.motion.candidates import velocity_matrix
from cvfs.motion.kselect import (
    choose_k,
    choose_k_penalised,
    fit_threshold,
    k_labellings,
    k_residuals,
    subspace_residual,
)
from cvfs.motion.synthetic import make_rigid_motions


class _NoRanker:
    """A model that must not be consulted (K outside the ranked K)."""

    settings_ = {}

    def decision_function(self, X):  # pragma: no cover - the test fails if called
        raise AssertionError("ranker used outside its K")


def test_choose_k_keeps_the_k_before_the_ratio_flattens():
    r = {1: 1.0, 2: 0.3, 3: 0.05, 4: 0.045, 5: 0.04}
    assert choose_k(r, 0.5) == 3
    assert choose_k(r, 0.1) == 2
    assert choose_k(r, 0.95) == 5
    with pytest.raises(ValueError, match="no K >= 2"):
        choose_k({1: 1.0}, 0.5)


def test_fit_threshold_separates_training_sequences():
    res = [{1: 1.0, 2: 0.1, 3: 0.09}, {1: 1.0, 2: 0.5, 3: 0.05, 4: 0.045}]
    tau, acc = fit_threshold(res, [2, 3])
    assert acc == 1.0 and 0.1 < tau < 0.9


def test_subspace_residual_is_zero_on_exact_subspaces():
    rng = np.random.default_rng(0)
    Y = np.vstack([rng.normal(size=(10, 3)) @ rng.normal(size=(3, 8)) + rng.normal(size=8)
                   for _ in range(2)])
    assert subspace_residual(Y, np.repeat([0, 1], 10)) < 1e-20
    assert subspace_residual(Y, np.zeros(20, int)) > 1e-3


@pytest.mark.parametrize("k", [4, 5])
def test_segment_beyond_the_ranked_k_keeps_the_lowest_residual(k):
    pts, _ = make_rigid_motions(k, 30 * k, 12, noise=0.002, random_state=0)
    cand, scores = rank_candidates(pts, k, model=_NoRanker())
    Y = velocity_matrix(normalise_points(pts)).T
    res = np.array([subspace_residual(Y, lab) for lab in cand])
    np.testing.assert_allclose(scores, -res)
    labels = segment(pts, k, model=_NoRanker())
    assert labels.max() == k - 1 and np.array_equal(labels, cand[np.argmin(res)])


def test_residuals_fall_with_k():
    pts, _ = make_rigid_motions(4, 160, 20, noise=0.002, random_state=0)
    r = k_residuals(normalise_points(pts), range(2, 6))
    assert sorted(r) == [1, 2, 3, 4, 5]
    assert r[1] > r[2] > r[3] > r[4] >= r[5]


def test_k_residuals_are_the_best_of_k_labellings():
    pts = normalise_points(make_rigid_motions(3, 60, 10, noise=0.002, random_state=1)[0])
    labs = k_labellings(pts, range(2, 5))
    r, q = k_residuals(pts, range(2, 5), return_planar=True)
    assert sorted(labs) == [2, 3, 4] and all(lab.shape[1] == 60 for lab in labs.values())
    Y = velocity_matrix(pts).T
    for k, lab in labs.items():
        res = np.array([subspace_residual(Y, row, (3, 2)) for row in lab])
        best = int(np.argmin(res[:, 0]))
        assert r[k] == pytest.approx(res[best, 0]) and q[k] == pytest.approx(res[best, 1])
    assert sorted(k_labellings(pts[:11], range(2, 5))) == [2]  # 4 points per motion


def test_k_chosen_returns_the_chosen_k_and_residuals():
    pts, _ = make_rigid_motions(4, 160, 20, noise=0.002, random_state=0)
    labels, k, res = _segment_tracks(pts, None, model=_NoRanker(), candidates_k=range(4, 6),
                                     return_scores=True)
    _, planar = k_residuals(normalise_points(pts), range(4, 6), return_planar=True)
    assert sorted(res) == [4, 5] and k == choose_k_penalised(res, 160, planar=planar)
    assert labels.shape == (160,) and labels.max() == k - 1


def test_bad_input_errors():
    pts, _ = make_rigid_motions(2, 40, 8, random_state=0)
    bad = pts.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"1 trajectories are NaN in every frame \(indices \[3\]"):
        segment(bad, 2, model=_NoRanker())
    with pytest.raises(ValueError, match="NaN in every frame"):
        segment(bad, None, model=_NoRanker())
    with pytest.raises(ValueError, match="n_motions=11 needs at least 44 trajectories"):
        segment(pts, 11, model=_NoRanker())
    with pytest.raises(ValueError, match="too few for any K"):
        segment(pts[:7], model=_NoRanker())
    with pytest.raises(ValueError, match=r"shape \(P, F, 2\)"):
        segment(pts[..., 0], model=_NoRanker())
