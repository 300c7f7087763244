"""Candidates that over-segment and merge by two-view fit (cvfs.motion.geometry_merge)."""

import numpy as np

from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import (
    _tracks,
    candidate_pool,
    fit_fundamental,
    geometric_affinities,
    sampson_residuals,
    selection_scores,
)
from cvfs.motion.geometry_merge import _fit_pairs, _sampson, merge_clusters, merged_candidates
from tests.motion.test_geometry import perspective_scene


def test_weighted_pair_fits_match_the_eight_point_fit():
    pts, vis, _ = perspective_scene(missing=0.0, seed=1)
    x1, x2 = pts[:, 0], pts[:, 3]
    F = _fit_pairs(x1[None], x2[None], np.ones((1, len(x1))))[0]
    F /= np.linalg.norm(F) * np.sign(F[2, 2])
    ref = fit_fundamental(x1[None], x2[None])[0]
    ref /= np.sign(ref[2, 2])
    np.testing.assert_allclose(F, ref, atol=1e-6)
    np.testing.assert_allclose(_sampson(ref[None], x1[None], x2[None])[0],
                               sampson_residuals(ref[None], x1, x2)[:, 0], rtol=1e-10)
    # a zero weight drops a point from the fit
    w = np.ones((1, len(x1)))
    w[0, :5] = 0.0
    F5 = _fit_pairs(x1[None], x2[None], w)[0]
    ref5 = fit_fundamental(x1[None, 5:], x2[None, 5:])[0]
    np.testing.assert_allclose(F5 / np.linalg.norm(F5) * np.sign(F5[2, 2] * ref5[2, 2]), ref5,
                               atol=1e-6)


def test_a_background_split_by_depth_is_merged_and_the_car_kept():
    pts, vis, truth = perspective_scene(seed=0, n_cars=1)
    pts, vis = _tracks(pts, vis)
    pts0 = np.where(vis[..., None], pts, 0.0)
    # the background in three pieces by image column, the car on its own
    first = np.nanmean(np.where(vis[..., None], pts, np.nan), axis=1)[:, 0]
    pieces = np.digitize(first, np.quantile(first[truth == 0], [1 / 3, 2 / 3]))
    over = np.where(truth == 0, pieces, 3)
    merged = merge_clusters(pts0, vis, over, 2)
    assert merged.max() == 1 and misclassification(merged, truth) == 0.0
    # three clusters: the car is still not merged into the background
    three = merge_clusters(pts0, vis, over, 3)
    assert len(np.unique(three[truth == 1])) == 1
    assert np.all(three[truth == 1] != three[truth == 0][:, None])


def test_merged_candidates_join_the_pool_segment_perspective_ranks():
    pts, vis, truth = perspective_scene(seed=2, n_cars=2)
    pts, vis = _tracks(pts, vis)
    aff = geometric_affinities(pts, vis, random_state=0)
    merged = merged_candidates(pts, vis, aff, 3, 0)
    assert merged.shape == (len(aff), len(truth)) and merged.max() == 2
    pool = candidate_pool(pts, vis, aff, 3, 0)
    assert pool.shape == (2 * len(aff), len(truth))
    np.testing.assert_array_equal(pool[len(aff):], merged)
    # the direct fused candidate is exact here and still has the lowest cut
    best = int(np.argmin(selection_scores(aff, pool)))
    assert best < len(aff) and misclassification(pool[best], truth) == 0.0
    # too few tracks for K + 2 clusters of 4: no merged candidates
    assert merged_candidates(pts[:20], vis[:20], {}, 3, 0).shape == (0, 20)
