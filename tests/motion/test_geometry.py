"""Candidates from two-view geometry (cvfs.motion.geometry) on synthetic perspective scenes."""

import numpy as np
import pytest

from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import (
    fit_affine,
    fit_fundamental,
    fit_homography,
    frame_pairs,
    geometric_affinities,
    geometric_candidates,
    sampson_residuals,
    transfer_residuals,
)


def _project(X, focal=700.0, centre=(620.0, 190.0)):
    return focal * X[..., :2] / X[..., 2:3] + np.asarray(centre)


#: The cars of :func:`perspective_scene`: corner of a 4 x 1.5 x 2 m box (m) and velocity per frame.
CARS = ((np.array([-4.0, 0.5, 14.0]), np.array([0.6, 0.0, 0.3])),    # crossing in front
        (np.array([3.0, 0.5, 20.0]), np.array([-0.5, 0.0, 1.6])))    # overtaking on the right


def perspective_scene(n_frames=12, missing=0.3, seed=0, n_cars=1):
    """A camera driving forward through a static scene (240 tracks, depth 6-60 m, wide field of
    view) and ``n_cars`` cars of :data:`CARS` (80 tracks each; labels 1..n_cars): pinhole
    projection, pixel noise 0.3, ``missing`` of the entries hidden (every track keeps >= 2
    frames)."""
    rng = np.random.default_rng(seed)
    n_bg, n_car = 240, 80
    depth = rng.uniform(6.0, 60.0, n_bg)
    bg = np.stack([rng.uniform(-0.8, 0.8, n_bg) * depth, rng.uniform(-0.1, 0.25, n_bg) * depth,
                   depth], axis=1)
    cars = [(corner + rng.uniform(0, 1, (n_car, 3)) * [4.0, 1.5, 2.0], vel)
            for corner, vel in CARS[:n_cars]]
    pts = np.empty((n_bg + n_cars * n_car, n_frames, 2))
    for f in range(n_frames):
        yaw = 0.01 * f
        R = np.array([[np.cos(yaw), 0, -np.sin(yaw)], [0, 1, 0], [np.sin(yaw), 0, np.cos(yaw)]])
        cam = np.array([0.0, 0.0, 1.0 * f])
        pts[:n_bg, f] = _project((bg - cam) @ R.T)
        for j, (car, vel) in enumerate(cars):
            pts[n_bg + j * n_car:n_bg + (j + 1) * n_car, f] = _project((car + vel * f - cam) @ R.T)
    pts += rng.normal(scale=0.3, size=pts.shape)
    labels = np.r_[np.zeros(n_bg, np.int64), np.repeat(np.arange(1, n_cars + 1), n_car)]
    vis = rng.random(pts.shape[:2]) >= missing
    vis[:, :2] |= vis.sum(axis=1, keepdims=True) < 2
    pts[~vis] = np.nan
    perm = rng.permutation(labels.size)
    return pts[perm], vis[perm], labels[perm]


def test_two_motion_perspective_scene_is_segmented():
    pts, vis, truth = perspective_scene()
    assert 0.25 < 1 - vis.mean() < 0.35
    cand = geometric_candidates(pts, 2, vis, random_state=0)
    assert cand.names == ("affine", "homography", "fundamental", "fused")
    assert cand.labels.shape == (4, truth.size)
    err = dict(zip(cand.names, misclassification(cand.labels, truth)))
    assert err["fused"] < 0.01
    assert err["fundamental"] < 0.01
    # the same seed gives the same candidates
    again = geometric_candidates(pts, 2, vis, random_state=0)
    np.testing.assert_array_equal(again.labels, cand.labels)


def test_affinities_are_sparse_symmetric_and_mostly_within_motions():
    pts, vis, truth = perspective_scene(n_frames=8, seed=1)
    aff = geometric_affinities(pts, vis, models=("fundamental",), n_neighbors=10)
    assert set(aff) == {"fundamental"}  # no fusion of a single model
    A = aff["fundamental"]
    assert A.shape == (truth.size, truth.size)
    assert abs(A - A.T).max() == 0
    assert A.diagonal().max() == 0
    assert A.min() >= 0 and A.max() <= 1 + 1e-12
    assert A.getnnz(axis=1).max() <= 2 * 10 + 10  # k nearest, symmetrised: sparse
    r, c = A.nonzero()
    within = np.sum(A[r, c].A1 * (truth[r] == truth[c])) / A.sum()
    assert within > 0.95


def test_minimal_fits_are_exact_on_noise_free_correspondences():
    rng = np.random.default_rng(2)
    X = np.stack([rng.uniform(-5, 5, 8), rng.uniform(-2, 2, 8), rng.uniform(8, 40, 8)], axis=1)
    R = np.array([[np.cos(0.05), 0, -np.sin(0.05)], [0, 1, 0], [np.sin(0.05), 0, np.cos(0.05)]])
    x1 = _project(X)
    x2 = _project((X - [0.3, 0.0, 1.5]) @ R.T)
    F = fit_fundamental(x1[None], x2[None])
    assert sampson_residuals(F, x1, x2).max() < 1e-8
    plane = X.copy()
    plane[:, 2] = 20.0
    p1, p2 = _project(plane), _project((plane - [0.3, 0.0, 1.5]) @ R.T)
    H = fit_homography(p1[None, :4], p2[None, :4])
    assert transfer_residuals(H, p1, p2).max() < 1e-8  # all 8 coplanar points transferred
    A = np.array([[1.1, 0.1, 5.0], [-0.05, 0.9, -3.0], [0, 0, 1]])
    q2 = x1 @ A[:2, :2].T + A[:2, 2]
    assert transfer_residuals(fit_affine(x1[None, :3], q2[None, :3]), x1, q2).max() < 1e-12


def test_kept_hypotheses_are_each_tracks_best_fitting_with_ties_in_index_order():
    from cvfs.motion._geometry_kernels import SAMPSON, TRANSFER, kept_hypotheses

    rng = np.random.default_rng(0)
    x1 = rng.uniform(-1, 1, (50, 2))
    x2 = x1 + rng.normal(0, 0.05, (50, 2))
    for kind, fit, res in ((TRANSFER, fit_homography, transfer_residuals),
                           (SAMPSON, fit_fundamental, sampson_residuals)):
        size = 4 if kind == TRANSFER else 8
        idx = np.stack([rng.choice(50, size, replace=False) for _ in range(40)])
        H = np.ascontiguousarray(fit(x1[idx], x2[idx]))
        H[7] = H[3]  # a minimal set drawn twice: every track ties these two
        kept = kept_hypotheses(kind, H, x1, x2, 6)
        r = res(H, x1, x2)
        for i in range(50):
            order = np.argsort(r[i], kind="stable")
            assert set(kept[i]) == set(order[:6]), i  # stable sort: ties by index
            assert np.all(np.diff(kept[i]) > 0)


def test_frame_pairs():
    np.testing.assert_array_equal(frame_pairs(4, (1, 2, 5)),
                                  [[0, 1], [1, 2], [2, 3], [0, 2], [1, 3]])


@pytest.mark.parametrize("kwargs, message", [
    ({"models": ("trifocal",)}, "models must be among"),
    ({"models": ()}, "at least one model"),
    ({"gaps": (0,)}, "gaps must be"),
    ({"n_hypotheses": 0}, "n_hypotheses must be"),
    ({"top_fraction": 0.0}, "top_fraction must be"),
    ({"n_neighbors": 0}, "n_neighbors must be"),
])
def test_bad_options_are_rejected(kwargs, message):
    pts, vis, _ = perspective_scene(n_frames=4)
    with pytest.raises(ValueError, match=message):
        geometric_affinities(pts, vis, **kwargs)


def test_bad_input_is_rejected():
    pts, vis, _ = perspective_scene(n_frames=4)
    with pytest.raises(ValueError, match=r"visible"):
        geometric_candidates(pts, 2, vis[:, :3])
    with pytest.raises(ValueError, match=r"\(P, F, 2\)"):
        geometric_candidates(pts[..., 0], 2, vis)
    with pytest.raises(ValueError, match="n_motions"):
        geometric_candidates(pts, 1, vis)
    with pytest.raises(TypeError, match="n_motions must be an int"):
        geometric_candidates(pts, 2.0, vis)
    one = vis.copy()
    one[0] = False
    one[0, 0] = True
    with pytest.raises(ValueError, match="fewer than 2"):
        geometric_candidates(pts, 2, one)


def test_default_mask_is_the_finite_entries():
    pts, vis, _ = perspective_scene(n_frames=6, seed=3)
    a = geometric_affinities(pts, models=("homography",), n_hypotheses=50)["homography"]
    b = geometric_affinities(pts, vis, models=("homography",), n_hypotheses=50)["homography"]
    assert (a != b).nnz == 0


def test_kitti_clip_with_missing_entries(real_data):
    from cvfs.datasets import kt3dmoseg as kt

    root = real_data / "motion_kt3dmoseg"
    if not root.is_dir():
        pytest.skip("KT3DMoSeg not in the data home")
    (clip,) = kt.load_kt3dmoseg(root, names=["Seq070_Clip01"])  # a car passing, 27 % missing
    cand = geometric_candidates(clip.points, clip.n_motions, clip.visible, random_state=0)
    err = dict(zip(cand.names, misclassification(cand.labels, clip.labels)))
    assert err["fused"] == 0.0 and err["homography"] == 0.0
    assert err["affine"] > 0.2  # the affine camera model does not hold on this clip


def test_segment_perspective_picks_the_lowest_cut():
    from cvfs.motion import segment
    from cvfs.motion.geometry import (
        normalised_cut,
        segment_perspective,
        selection_scores,
    )

    pts, vis, truth = perspective_scene(seed=3)
    labels = segment(pts, 2, visible=vis, camera="perspective")
    assert labels.dtype == np.int64 and labels.shape == truth.shape
    assert misclassification(labels, truth) < 0.01
    np.testing.assert_array_equal(labels, segment_perspective(pts, 2, vis))
    # the pick is the candidate with the lowest geometric mean of normalised cuts
    cand = geometric_candidates(pts, 2, vis)
    aff = geometric_affinities(pts, vis)
    scores = selection_scores(aff, cand.labels)
    np.testing.assert_array_equal(labels, cand.labels[int(np.argmin(scores))])
    # a perfect split of disconnected blocks cuts nothing; alternating labels: 12 of 20 per cluster
    A = np.kron(np.eye(2), np.ones((5, 5))) - np.eye(10)
    assert normalised_cut(A, np.repeat([0, 1], 5)) == 0.0
    assert normalised_cut(A, np.tile([0, 1], 5)) == pytest.approx(2 * 12 / 20)


def test_segment_camera_errors():
    from cvfs.motion import segment

    pts, vis, _ = perspective_scene(n_frames=6, seed=4)
    with pytest.raises(ValueError, match="camera must be one of"):
        segment(pts, 2, visible=vis, camera="fisheye")
    with pytest.raises(ValueError, match="camera must be one of"):
        segment(pts, None, visible=vis, camera="fisheye")
    with pytest.raises(TypeError, match="unknown options"):
        from cvfs.motion.geometry import segment_perspective

        segment_perspective(pts, 2, vis, n_hypothesis=10)


def test_cli_motion_segment_perspective(capsys):
    from cvfs import cli

    src = "synth:motions=2,frames=8,seed=3,width=200,height=150"
    assert cli.main(["motion", "segment", src, "--motions", "2", "--camera", "perspective"]) == 0
    assert "points per motion" in capsys.readouterr().out
    # K chosen by the cuts of each K's best labelling
    assert cli.main(["motion", "segment", src, "--camera", "perspective"]) == 0
    assert "points per motion" in capsys.readouterr().out
