"""Candidates that over-segment and merge by two-view fit (cvfs.motion.geometry_merge)."""

import numpy as np

from cvfs.motion._geometry_kernels import (
    AFFINE,
    FUNDAMENTAL,
    HOMOGRAPHY,
    fit_model,
    pair_fits,
    residual,
    track_medians,
)
from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import (
    _tracks,
    candidate_pool,
    fit_affine,
    fit_fundamental,
    fit_homography,
    geometric_affinities,
    sampson_residuals,
    selection_scores,
    transfer_residuals,
)
from cvfs.motion.geometry_merge import _sampson, merge_clusters, merged_candidates
from tests.motion.test_geometry import perspective_scene


def test_weighted_pair_fits_match_the_eight_point_fit():
    pts, vis, _ = perspective_scene(missing=0.0, seed=1)
    x1, x2 = np.ascontiguousarray(pts[:, 0]), np.ascontiguousarray(pts[:, 3])
    F = fit_model(FUNDAMENTAL, x1, x2, np.ones(len(x1)))
    F = F / (np.linalg.norm(F) * np.sign(F[2, 2]))
    ref = fit_fundamental(x1[None], x2[None])[0]
    ref /= np.sign(ref[2, 2])
    np.testing.assert_allclose(F, ref, atol=1e-6)
    r = [residual(FUNDAMENTAL, ref, *x1[i], *x2[i]) for i in range(len(x1))]
    np.testing.assert_allclose(r, sampson_residuals(ref[None], x1, x2)[:, 0], rtol=1e-10)
    np.testing.assert_allclose(_sampson(ref[None], x1[None], x2[None])[0], r, rtol=1e-10)
    # a zero weight drops a point from the fit
    w = np.ones(len(x1))
    w[:5] = 0.0
    F5 = fit_model(FUNDAMENTAL, x1, x2, w)
    ref5 = fit_fundamental(x1[None, 5:], x2[None, 5:])[0]
    np.testing.assert_allclose(F5 / np.linalg.norm(F5) * np.sign(F5[2, 2] * ref5[2, 2]), ref5,
                               atol=1e-6)


def test_homography_and_affine_fits_recover_exact_maps():
    rng = np.random.default_rng(0)
    x1 = rng.uniform(-1, 1, (40, 2))
    H = np.array([[1.1, 0.05, 0.2], [-0.03, 0.95, -0.1], [0.02, -0.01, 1.0]])
    p = np.c_[x1, np.ones(40)] @ H.T
    x2 = p[:, :2] / p[:, 2:]
    Hf = fit_model(HOMOGRAPHY, x1, x2, np.ones(40))
    np.testing.assert_allclose(Hf / Hf[2, 2], H, atol=1e-9)
    ref = fit_homography(x1[None, :4], x2[None, :4])[0]  # the minimal fit: the same map
    np.testing.assert_allclose(ref / ref[2, 2], H, atol=1e-9)
    A = np.array([[0.9, 0.1, 0.3], [-0.2, 1.05, 0.0], [0.0, 0.0, 1.0]])
    xa = x1 @ A[:2, :2].T + A[:2, 2]
    np.testing.assert_allclose(fit_model(AFFINE, x1, xa, np.ones(40)), A, atol=1e-7)
    np.testing.assert_allclose(fit_affine(x1[None, :3], xa[None, :3])[0], A, atol=1e-9)
    # transfer residuals as the vectorised form's
    noisy = x2 + rng.normal(0, 0.01, x2.shape)
    r = [residual(HOMOGRAPHY, H, *x1[i], *noisy[i]) for i in range(40)]
    np.testing.assert_allclose(r, transfer_residuals(H[None], x1, noisy)[:, 0], rtol=1e-10)


def test_pair_fits_refit_without_outliers_and_give_per_track_medians():
    rng = np.random.default_rng(1)
    T, P = 3, 60
    x1 = rng.uniform(-1, 1, (T, P, 2))
    x2 = x1 + np.array([0.1, -0.05])  # a translation in every pair
    x2[:, :6] += rng.uniform(0.5, 1.0, (T, 6, 2))  # 10 % outliers
    both = np.ones((T, P), dtype=bool)
    both[2, :55] = False  # too few tracks in the last pair
    fits, fitted = pair_fits(AFFINE, x1, x2, both, np.arange(P), 6, 6, 0.8)
    assert fitted.tolist() == [True, True, False]
    for t in range(2):  # the refit on the 80 % best drops the outliers: the exact translation
        np.testing.assert_allclose(fits[t][:2, 2], [0.1, -0.05], atol=1e-8)
    med = track_medians(AFFINE, x1, x2, both, fits, fitted, np.arange(P))
    assert np.all(med[6:] < 1e-14) and np.all(med[:6] > 0.1)
    part = track_medians(AFFINE, x1, x2, both, fits, fitted, np.arange(10))
    np.testing.assert_array_equal(part[:10], med[:10])
    assert np.isnan(part[10:]).all()


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
