"""Seeded K-subspaces candidates (K >= 4) and the K rule on their residuals."""

import numpy as np
import pytest

from cvfs.motion import normalise_points, segment
from cvfs.motion.candidates import (
    KSUBSPACE_CODE,
    generate_candidates,
    ksubspace_candidates,
    velocity_matrix,
)
from cvfs.motion.evaluate import misclassification
from cvfs.motion.kselect import (
    choose_k,
    choose_k_penalised,
    fit_penalty,
    k_residuals,
    subspace_residual,
)
from cvfs.motion.synthetic import make_rigid_motions


class _NoRanker:
    """A model that must not be consulted (K outside the ranked K)."""

    settings_ = {}

    def decision_function(self, X):  # pragma: no cover - the test fails if called
        raise AssertionError("ranker used outside its K")


@pytest.fixture(scope="module")
def four_motions():
    pts, truth = make_rigid_motions(4, 160, 20, noise=0.002, random_state=0)
    return normalise_points(pts), truth


def test_ksubspaces_find_the_four_motions_that_spectral_clustering_misses(four_motions):
    pts, truth = four_motions
    Y = velocity_matrix(pts).T
    labels = ksubspace_candidates(Y, 4, n_restarts=20, random_state=0)
    assert labels.ndim == 2 and labels.shape[1] == 160
    assert len({row.tobytes() for row in labels}) == len(labels)
    res = [subspace_residual(Y, lab) for lab in labels]
    assert res == sorted(res)
    # the lowest-residual restart is the truth up to one point; the spectral pool is far off
    assert misclassification(labels[0], truth) <= 0.01
    assert res[0] <= subspace_residual(Y, truth) + 1e-12
    spectral = generate_candidates(pts, 4, ksubspaces=0)
    assert misclassification(spectral.labels, truth).min() > 0.1


def test_generate_candidates_adds_ksubspaces_for_k_ge_4_only(four_motions):
    pts, truth = four_motions
    cand = generate_candidates(pts, 4, alphas=(2.0,))
    mine = cand.params[:, 2] == KSUBSPACE_CODE
    assert mine.any() and np.all(cand.params[mine, :2] == [1.0, 0.0])
    assert misclassification(cand.labels[mine], truth).min() <= 0.01
    three = generate_candidates(pts[:120], 3, alphas=(2.0,))
    assert not np.any(three.params[:, 2] == KSUBSPACE_CODE)
    forced = generate_candidates(pts[:120], 3, alphas=(2.0,), ksubspaces=5)
    assert np.any(forced.params[:, 2] == KSUBSPACE_CODE)
    for bad in ("many", -1, 2.5, True):
        with pytest.raises(ValueError, match="ksubspaces must be 'auto' or an int"):
            generate_candidates(pts, 4, ksubspaces=bad)


def test_segment_four_motions(four_motions):
    pts, truth = four_motions
    labels = segment(pts, 4, model=_NoRanker())
    assert misclassification(labels, truth) <= 0.01


def test_ksubspace_candidates_bad_input():
    Y = np.random.default_rng(0).normal(size=(30, 10))
    with pytest.raises(ValueError, match="needs at least 32 points"):
        ksubspace_candidates(Y, 8)
    with pytest.raises(ValueError, match="finite 2-D array"):
        ksubspace_candidates(Y[:, :, None], 2)
    bad = Y.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite 2-D array"):
        ksubspace_candidates(bad, 2)
    with pytest.raises(ValueError, match="n_restarts must be >= 1"):
        ksubspace_candidates(Y, 2, n_restarts=0)


def test_k_rule_on_ksubspace_residuals(four_motions):
    pts, _ = four_motions
    r = k_residuals(pts, range(2, 6))
    assert sorted(r) == [1, 2, 3, 4, 5]
    assert r[1] > r[2] > r[3] > r[4] >= r[5]
    # past the true K one more subspace only fits noise
    assert r[5] / r[4] > 0.9 > max(r[k + 1] / r[k] for k in range(1, 4))
    assert choose_k(r, 0.9) == 4
    # a penalty below the smallest gain (log r_3 - log r_2 ~ -0.4) and above the last (~ -0.03)
    assert choose_k_penalised(r, 160, 5.0) == 4


def test_penalised_rule_trades_residual_for_motions():
    r = {1: 1.0, 2: 0.3, 3: 0.05, 4: 0.045, 5: 0.04}
    # log r_3 - log r_2 = -1.79: a third motion pays off while lam log(P) / P < 1.79
    assert choose_k_penalised(r, 100, 10.0) == 3
    assert choose_k_penalised(r, 100, 50.0) == 2
    assert choose_k_penalised(r, 1000, 50.0) == 3  # the penalty per motion shrinks with P
    assert choose_k_penalised(r, 100, 0.0) == 5
    with pytest.raises(ValueError, match="no K >= 2"):
        choose_k_penalised({1: 1.0}, 100)
    with pytest.raises(ValueError, match="n_points must be >= 2"):
        choose_k_penalised(r, 1)


def test_fit_penalty_separates_training_sequences():
    res = [{1: 1.0, 2: 0.1, 3: 0.09, 4: 0.085}, {1: 1.0, 2: 0.5, 3: 0.05, 4: 0.045}]
    lam, acc = fit_penalty(res, [200, 200], [2, 3])
    assert acc == 1.0
    assert choose_k_penalised(res[0], 200, lam) == 2 and choose_k_penalised(res[1], 200, lam) == 3


def test_fit_penalty_takes_the_centre_of_a_plateau_over_an_isolated_peak():
    # K = 3 is chosen below lam = t for residuals r_2 = 1, r_3 = exp(-t log(P) / P)
    P = 100

    def seq(t):
        return {2: 1.0, 3: float(np.exp(-t * np.log(P) / P))}

    # sequences given their true K on lam = 1..9 (of 5): 2, 4, 2, 2, 2, 3, 3, 3, 3
    res = [seq(1.5), seq(1.5), seq(2.5), seq(2.5), seq(5.5)]
    true_k = [2, 2, 3, 3, 2]
    grid = np.arange(1.0, 10.0)
    assert fit_penalty(res, [P] * 5, true_k, grid=grid, smooth=1) == (2.0, 4 / 5)
    # averaged over three neighbours the plateau wins: the middle of 7-9
    assert fit_penalty(res, [P] * 5, true_k, grid=grid) == (8.0, 3 / 5)
    with pytest.raises(ValueError, match="smooth must be >= 1"):
        fit_penalty(res, [P] * 5, true_k, grid=grid, smooth=0)


def test_planar_term_of_the_penalised_rule():
    r = {1: 1.0, 2: 0.3, 3: 0.2, 4: 0.19}
    q = {1: 2.0, 2: 1.0, 3: 0.2, 4: 0.19}
    # log r_3 - log r_2 = -0.41 alone does not pay for a motion (lam log(P)/P = 0.46) ...
    assert choose_k_penalised(r, 100, 10.0) == 2
    # ... with the planar gain log q_3 - log q_2 = -1.61 weighted by mu = 0.5 it does
    assert choose_k_penalised(r, 100, 10.0, planar=q, mu=0.5) == 3
    assert choose_k_penalised(r, 100, 10.0, planar=q, mu=0.0) == 2
    with pytest.raises(ValueError, match="planar must hold every K"):
        choose_k_penalised(r, 100, planar={1: 1.0, 2: 1.0})


def test_fit_penalty_with_planar_residuals_fits_mu():
    res = [{1: 1.0, 2: 0.3, 3: 0.2, 4: 0.19}, {1: 1.0, 2: 0.3, 3: 0.2, 4: 0.19}]
    planar = [{1: 2.0, 2: 1.0, 3: 0.9, 4: 0.88}, {1: 2.0, 2: 1.0, 3: 0.2, 4: 0.19}]
    # the same r_K, told apart by q_K alone
    lam, acc, mu = fit_penalty(res, [100, 100], [2, 3], planar_list=planar)
    assert acc == 1.0 and mu > 0
    assert [choose_k_penalised(r, 100, lam, planar=q, mu=mu) for r, q in zip(res, planar)] \
        == [2, 3]


def test_k_residuals_planar_is_the_same_labelling(four_motions):
    pts, _ = four_motions
    r, q = k_residuals(pts, range(2, 5), return_planar=True)
    assert sorted(q) == sorted(r) == [1, 2, 3, 4]
    # a 2-D fit of the same clusters leaves at least the 3-D residual
    assert all(q[k] >= r[k] for k in r)
    assert r == k_residuals(pts, range(2, 5))
