"""Trajectories with missing entries: completion, segment(visible=...), the KT3DMoSeg loader."""

import numpy as np
import pytest
from scipy.io import savemat

from cvfs.datasets import kt3dmoseg as kt
from cvfs.motion import _segment_tracks, segment
from cvfs.motion.evaluate import misclassification
from cvfs.motion.missing import check_visible, complete_trajectories, trajectory_matrix
from cvfs.motion.synthetic import make_rigid_motions


def _hide(points, fraction, seed):
    """Mask ``fraction`` of the entries at random, keeping >= 2 observed frames per track."""
    rng = np.random.default_rng(seed)
    vis = rng.random(points.shape[:2]) >= fraction
    vis[:, :2] |= vis.sum(axis=1, keepdims=True) < 2
    return np.where(vis[..., None], points, np.nan), vis


def test_completion_recovers_a_low_rank_trajectory_matrix():
    pts, _ = make_rigid_motions(3, 150, 20, noise=0.0, random_state=0)
    assert np.linalg.matrix_rank(trajectory_matrix(pts), tol=1e-8) <= 12
    holed, vis = _hide(pts, 0.3, seed=1)
    assert 0.25 < 1 - vis.mean() < 0.35
    done, info = complete_trajectories(holed, vis, n_motions=3, return_info=True)
    assert info["rank"] == 12
    np.testing.assert_array_equal(done[vis], pts[vis])  # observed entries kept
    missing_err = np.abs(done - pts)[~vis]
    scale = np.abs(pts).max()
    assert missing_err.max() < 0.01 * scale
    assert np.sqrt(np.mean(missing_err ** 2)) < 1e-3 * scale


def test_completion_of_complete_tracks_is_the_identity():
    pts, _ = make_rigid_motions(2, 40, 8, random_state=3)
    vis = np.ones(pts.shape[:2], dtype=bool)
    np.testing.assert_array_equal(complete_trajectories(pts, vis), pts)


def test_segment_with_missing_entries_synthetic():
    errs = []
    for seed in (1, 4):
        pts, truth = make_rigid_motions(2, 100, 12, noise=0.002, random_state=seed)
        holed, vis = _hide(300.0 * pts + 200.0, 0.3, seed=seed)
        labels = segment(holed, 2, visible=vis)
        assert labels.shape == (100,) and labels.dtype == np.int64
        errs.append(misclassification(labels, truth))
    assert np.mean(errs) < 0.03


def test_segment_with_missing_entries_and_k_given():
    pts, truth = make_rigid_motions(2, 80, 12, noise=0.002, random_state=1)
    holed, vis = _hide(pts, 0.2, seed=2)
    labels, k = _segment_tracks(holed, 2, visible=vis)
    assert k == 2 and misclassification(labels, truth) < 0.1
    np.testing.assert_array_equal(labels, segment(holed, 2, visible=vis))


def test_k_is_chosen_on_the_complete_tracks_when_there_are_enough(monkeypatch):
    import cvfs.motion as motion

    pts, truth = make_rigid_motions(2, 120, 12, noise=0.002, random_state=5)
    holed, vis = _hide(pts, 0.15, seed=3)
    vis[:50] = True  # 50 complete trajectories, the others partial
    holed[:50] = pts[:50]
    whole = vis.all(axis=1)
    assert whole.sum() >= motion.MIN_COMPLETE_FOR_K
    seen = []
    real = motion._choose_k
    monkeypatch.setattr(motion, "_choose_k", lambda p, *a: seen.append(np.array(p)) or real(p, *a))
    labels = segment(holed, None, visible=vis)
    k = labels.max() + 1
    assert k == 2 and misclassification(labels, truth) < 0.05
    np.testing.assert_array_equal(seen[0], pts[whole])  # only the complete ones
    # the same partial tracks with too few complete ones: K chosen on all, completed
    few = vis.copy()
    few[::2, 4] = False  # every other trajectory loses frame 4: 25 complete ones left
    assert few.all(axis=1).sum() < motion.MIN_COMPLETE_FOR_K
    labels = segment(np.where(few[..., None], pts, np.nan), visible=few)
    k = labels.max() + 1
    assert seen[1].shape == pts.shape and not np.isnan(seen[1]).any()
    assert k == 2 and misclassification(labels, truth) < 0.05


def test_bad_visible_and_tracks():
    pts, _ = make_rigid_motions(2, 40, 8, random_state=0)
    vis = np.ones(pts.shape[:2], dtype=bool)
    with pytest.raises(ValueError, match=r"visible must have shape \(P, F\) = \(40, 8\)"):
        segment(pts, 2, visible=vis[:, :-1])
    with pytest.raises(ValueError, match="visible must have shape"):
        segment(pts, 2, visible=vis.ravel())
    with pytest.raises(ValueError, match="visible must be a boolean mask"):
        segment(pts, 2, visible=np.full(vis.shape, 2))
    with pytest.raises(ValueError, match="visible must be a boolean mask"):
        segment(pts, 2, visible=np.full(vis.shape, "yes"))
    dead = pts.copy()
    dead[5] = np.nan
    vis_dead = vis.copy()
    vis_dead[5] = False
    with pytest.raises(ValueError, match=r"1 trajectories are observed in fewer than 2 frames "
                                         r"\(indices \[5\]\)"):
        segment(dead, 2, visible=vis_dead)
    with pytest.raises(ValueError, match="NaN in every frame"):
        segment(dead, 2)  # no mask: all-NaN track named too
    one = vis.copy()
    one[7, 1:] = False
    with pytest.raises(ValueError, match=r"indices \[7\]"):
        segment(pts, 2, visible=one)
    with pytest.raises(ValueError, match="NaN or infinite values at 8 observed entries"):
        segment(dead, 2, visible=vis)
    with pytest.raises(ValueError, match="n_motions=11 needs at least 44 trajectories"):
        segment(pts, 11, visible=vis)
    with pytest.raises(ValueError, match="n_motions=11 needs at least 44 trajectories"):
        _segment_tracks(pts, 11, visible=vis)
    with pytest.raises(TypeError, match="n_motions must be an int"):
        check_visible(pts, vis, 2.5)
    with pytest.raises(ValueError, match="rank must be a positive int"):
        complete_trajectories(pts, vis, rank=0)
    with pytest.raises(ValueError, match=r"points must have shape \(P, F, 2\)"):
        check_visible(pts[..., 0], vis)


def _write_clip(folder, name, points, visible, labels):
    """A clip in the public KT3DMoSeg layout (MATLAB struct ``Data``)."""
    P, F, _ = points.shape
    y = np.zeros((3, P, F))
    y[:2] = np.where(visible[..., None], points, 0.0).transpose(2, 0, 1)
    y[2] = visible
    d = folder / f"{name}_Tracks"
    d.mkdir(parents=True)
    data = {"ySparse": y, "visibleSparse": visible.astype(np.uint8),
            "GtLabel": (labels + 1).reshape(-1, 1).astype(np.uint8),
            "nSparsePoints": P, "nFrames": F}
    savemat(d / f"{name}_Tracks.mat", {"Data": data})


def test_kt3dmoseg_loader_on_a_fixture(tmp_path):
    pts, truth = make_rigid_motions(2, 30, 6, random_state=0)
    pix = 400.0 * pts + 600.0
    _, vis = _hide(pix, 0.3, seed=0)
    _write_clip(tmp_path, "Seq001_Clip01", pix, vis, truth)
    savemat(tmp_path / "SeqList.mat",
            {"SeqList": np.array([["Seq001_Clip01"]], dtype=object)})
    assert kt.list_clips(tmp_path) == ["Seq001_Clip01"]
    (clip,) = kt.load_kt3dmoseg(tmp_path)
    assert clip.name == "Seq001_Clip01" and clip.n_motions == 2
    assert clip.points.shape == (30, 6, 2) and clip.visible.dtype == bool
    np.testing.assert_array_equal(clip.visible, vis)
    np.testing.assert_allclose(clip.points[vis], pix[vis])
    assert np.isnan(clip.points[~vis]).all()
    np.testing.assert_array_equal(clip.labels, truth)
    assert clip.missing_fraction == pytest.approx(1 - vis.mean())


def test_kt3dmoseg_loader_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="KT3DMoSeg: data folder .* does not exist"):
        kt.load_kt3dmoseg(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no <CLIP>_Tracks"):
        kt.list_clips(tmp_path)
    with pytest.raises(FileNotFoundError, match="Seq9_Tracks.mat does not exist"):
        kt.load_kt3dmoseg(tmp_path, names=["Seq9"])
    monkeypatch.setenv("CVFS_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="motion_kt3dmoseg does not exist"):
        kt.load_kt3dmoseg()
    d = tmp_path / "Bad_Tracks"
    d.mkdir()
    (d / "Bad_Tracks.mat").write_bytes(b"not a mat file")
    with pytest.raises(ValueError, match="not a readable MATLAB file"):
        kt.load_clip(d)
    savemat(d / "Bad_Tracks.mat", {"Data": {"ySparse": np.zeros((3, 4, 5))}})
    with pytest.raises(ValueError, match="Data.visibleSparse is missing"):
        kt.load_clip(d)
    savemat(d / "Bad_Tracks.mat", {"Data": {"ySparse": np.zeros((3, 4, 5)),
                                            "visibleSparse": np.ones((4, 6)),
                                            "GtLabel": np.ones((4, 1))}})
    with pytest.raises(ValueError, match=r"visibleSparse must have shape \(4, 5\)"):
        kt.load_clip(d)


def test_kt3dmoseg_real_clips(real_data):
    root = real_data / "motion_kt3dmoseg"
    if not root.is_dir():
        pytest.skip("KT3DMoSeg not in the data home")
    names = kt.list_clips(root)
    assert len(names) == 22 and names[0] == "Seq005_Clip01"
    (clip,) = kt.load_kt3dmoseg(root, names=["Seq028_clip03"])
    assert (clip.n_points, clip.n_frames, clip.n_motions) == (186, 10, 2)
    assert 0.2 < clip.missing_fraction < 0.23
    assert clip.visible.sum(axis=1).min() >= 2
    assert np.all(np.isfinite(clip.points[clip.visible]))


def test_partial_tracks_with_redetection():
    from cvfs.io.video import SyntheticRigidVideo
    from cvfs.motion.tracking import track_points

    src = SyntheticRigidVideo(n_motions=2, n_frames=12, seed=0)
    frames = [src.render(f) for f in range(12)]
    full = track_points(frames, cell=80)
    pts, vis = track_points(frames, cell=80, partial=True)
    assert pts.shape[1:] == (12, 2) and vis.shape == pts.shape[:2] and vis.dtype == bool
    assert np.array_equal(np.isnan(pts[..., 0]), ~vis) and vis.sum(axis=1).min() >= 2
    assert pts.shape[0] >= full.shape[0]
    # every observed span is contiguous: a lost track is not picked up again
    starts = np.diff(vis.astype(np.int8), axis=1)
    assert np.all((starts == 1).sum(axis=1) + vis[:, 0] <= 1)
    # re-detection: some tracks start after the first frame
    assert np.any(~vis[:, 0])
    with pytest.raises(ValueError, match="min_frames must be an int >= 2"):
        track_points(frames[:2], partial=True, min_frames=1)
