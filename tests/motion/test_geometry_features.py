"""Ranking features from two-view fits (cvfs.motion.geometry_features) on synthetic perspective
scenes."""

import numpy as np
import pytest

from cvfs.motion.geometry import geometric_affinities
from cvfs.motion.geometry_features import (
    geometry_feature_names,
    geometry_features,
    n_geometry_features,
)
from tests.motion.test_geometry import perspective_scene


@pytest.fixture(scope="module")
def scene():
    """Two cars and the background (400 tracks, 12 frames, 30 % missing) and its affinities."""
    pts, vis, truth = perspective_scene(n_cars=2, seed=1)
    aff = geometric_affinities(pts, vis, n_hypotheses=100, random_state=0)
    return pts, vis, truth, aff


def _column(name):
    return geometry_feature_names().index(name)


def test_names_match_columns(scene):
    pts, vis, truth, aff = scene
    names = geometry_feature_names()
    assert len(names) == len(set(names)) == n_geometry_features()
    X = geometry_features(pts, truth, vis, affinities=aff)
    assert X.shape == (1, n_geometry_features())
    assert np.isfinite(X).all()


def test_fixed_length_for_every_k(scene):
    pts, vis, truth, aff = scene
    rng = np.random.default_rng(0)
    labels = [rng.integers(0, k, truth.size) for k in (2, 3, 4, 5)]
    X = geometry_features(pts, np.vstack(labels), vis, affinities=aff)
    assert X.shape == (4, n_geometry_features())
    assert np.isfinite(X).all()
    # one labelling at a time gives the same base block (the relative blocks need the pool)
    base = n_geometry_features() // 3
    for lab, row in zip(labels, X, strict=True):
        one = geometry_features(pts, lab, vis, affinities=aff)
        np.testing.assert_allclose(one[0, :base], row[:base], rtol=1e-10, atol=1e-12)


def _relabelled(truth, share, rng):
    """``truth`` with about ``share`` of the tracks given a random label of 0-2."""
    out = truth.copy()
    pick = rng.random(truth.size) < share
    out[pick] = rng.integers(0, 3, pick.sum())
    return out


def test_invariant_to_label_permutation(scene):
    pts, vis, truth, aff = scene
    noisy = _relabelled(truth, 0.1, np.random.default_rng(1))
    perm = np.array([2, 0, 1])
    X = geometry_features(pts, np.vstack([truth, noisy]), vis, affinities=aff)
    Xp = geometry_features(pts, np.vstack([perm[truth], perm[noisy] + 5]), vis, affinities=aff)
    np.testing.assert_allclose(Xp, X, rtol=1e-9, atol=1e-9)


def test_invariant_to_coordinate_scaling(scene):
    pts, vis, truth, aff = scene
    rng = np.random.default_rng(2)
    labels = np.vstack([truth, rng.integers(0, 3, truth.size)])
    X = geometry_features(pts, labels, vis, affinities=aff)
    Xs = geometry_features(3.7 * pts + np.array([100.0, -40.0]), labels, vis, affinities=aff)
    np.testing.assert_allclose(Xs, X, rtol=1e-6, atol=1e-6)


def test_true_labelling_scores_better_than_random(scene):
    pts, vis, truth, aff = scene
    rng = np.random.default_rng(3)
    wrong = _relabelled(truth, 0.3, rng)
    X = geometry_features(pts, np.vstack([truth, wrong, rng.integers(0, 3, truth.size)]), vis,
                          affinities=aff)
    for name in ("res/fundamental/q50", "res/fundamental/q90", "res/fundamental/mean",
                 "res/fundamental/frac_other_better", "res/fundamental/cluster_max",
                 "cut/log_score", "cut/fused/per_k"):
        col = X[:, _column(name)]
        assert col[0] < col[1] and col[0] < col[2], name


def test_merge_cost_separates_a_moving_car_from_a_split_background():
    # one car crossing in front: merging it into the background costs much more than merging
    # two halves of the background (the car in one of them)
    pts, vis, truth = perspective_scene(n_cars=1, seed=1)
    aff = geometric_affinities(pts, vis, n_hypotheses=100, random_state=0)
    bg = np.flatnonzero(truth == 0)
    split = truth.copy()
    split[bg[np.nanmedian(pts[bg, :, 0], axis=1) > np.nanmedian(pts[bg, :, 0])]] = 1
    X = geometry_features(pts, np.vstack([truth, split]), vis, affinities=aff)
    col = _column("res/fundamental/merge_min")
    assert X[0, col] > X[1, col] + 3.0


def test_relative_blocks(scene):
    pts, vis, truth, aff = scene
    rng = np.random.default_rng(4)
    X = geometry_features(pts, np.vstack([truth, rng.integers(0, 3, truth.size)]), vis,
                          affinities=aff)
    base = n_geometry_features() // 3
    np.testing.assert_allclose(X[:, base:2 * base], X[:, :base] - X[:, :base].min(axis=0))
    np.testing.assert_allclose(X[:, 2 * base:].sum(axis=0), 0.0, atol=1e-6)


def test_bad_input(scene):
    pts, vis, truth, aff = scene
    with pytest.raises(ValueError, match="labels must have shape"):
        geometry_features(pts, truth[:-1], vis, affinities=aff)
    with pytest.raises(ValueError, match="non-negative ints"):
        geometry_features(pts, truth - 1, vis, affinities=aff)
    with pytest.raises(ValueError, match="non-negative ints"):
        geometry_features(pts, truth.astype(float), vis, affinities=aff)
    with pytest.raises(ValueError, match="affinities must hold"):
        geometry_features(pts, truth, vis, affinities={"fused": aff["fused"]})
    small = {n: A[:10, :10] for n, A in aff.items()}
    with pytest.raises(ValueError, match=r"affinities\['affine'\] must have shape"):
        geometry_features(pts, truth, vis, affinities=small)
