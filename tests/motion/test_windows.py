"""Partial tracks segmented window by window (cvfs.motion.windows) and through segment()."""

import numpy as np
import pytest

from cvfs.motion import segment
from cvfs.motion.evaluate import misclassification
from cvfs.motion.synthetic import make_rigid_motions, partial_track_mask
from cvfs.motion.windows import (
    MIN_WINDOW,
    align_labellings,
    assign_by_residual,
    contiguous_share,
    segment_windows,
    time_windows,
    window_length,
)


def test_partial_track_mask_hides_the_asked_share_in_one_interval_per_track():
    vis = partial_track_mask(400, 40, 0.5, random_state=0)
    assert vis.shape == (400, 40) and vis.dtype == bool
    assert 0.45 < 1 - vis.mean() < 0.55
    assert vis.sum(axis=1).min() >= 2
    assert contiguous_share(vis) == 1.0  # one run per track
    np.testing.assert_array_equal(vis, partial_track_mask(400, 40, 0.5, random_state=0))
    with pytest.raises(ValueError, match="missing must be in"):
        partial_track_mask(10, 10, 1.0)


def test_windows_cover_the_sequence_at_half_overlap():
    assert time_windows(20, 10) == [0, 5, 10]
    assert time_windows(23, 10) == [0, 5, 10, 13]
    assert time_windows(4, 10) == [0]
    vis = np.zeros((6, 40), dtype=bool)
    vis[:, :30] = True  # longest runs 30 -> windows of 15
    assert window_length(vis) == 15
    vis[:, 6:] = False  # runs of 6 -> at least MIN_WINDOW
    assert window_length(vis) == MIN_WINDOW


def test_aligning_permuted_window_labellings_recovers_one_labelling():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 60)
    windows = []
    for start in range(0, 50, 10):
        idx = np.arange(start, min(60, start + 20))
        perm = rng.permutation(3)
        windows.append((idx, perm[truth[idx]]))
    windows.append((np.array([0, 1, 2]), np.array([0, 0, 0])))  # one small, wrong window
    labels = align_labellings(windows, 62, 3)
    assert labels[60] == labels[61] == -1  # in no window
    assert misclassification(labels[:60], truth) < 0.02


def test_a_track_in_no_window_gets_the_motion_whose_subspace_explains_it():
    pts, truth = make_rigid_motions(2, 60, 12, noise=0.001, random_state=3)
    vis = np.ones(pts.shape[:2], dtype=bool)
    vis[[0, 35], 5:] = False  # two short tracks
    labels = np.where(vis.all(axis=1), truth, -1)
    out = assign_by_residual(pts, vis, labels, 2)
    np.testing.assert_array_equal(out, truth)


def test_segment_windows_declines_scattered_missing_entries():
    pts, _ = make_rigid_motions(2, 80, 12, random_state=1)
    vis = np.random.default_rng(2).random(pts.shape[:2]) > 0.3
    vis[:, :2] = True
    assert contiguous_share(vis) < 0.9
    assert segment_windows(pts, 2, vis, lambda p, k: np.zeros(len(p), int)) is None


def test_segment_with_partial_tracks_uses_the_windows():
    import cvfs.motion.windows as windows

    pts, truth = make_rigid_motions(3, 150, 40, noise=0.002, speed=3.0, random_state=7)
    vis = partial_track_mask(150, 40, 0.6, random_state=1)
    holed = np.where(vis[..., None], 300.0 * pts + 200.0, np.nan)
    calls = []
    real = windows.segment_windows
    try:
        windows.segment_windows = lambda *a, **k: calls.append(1) or real(*a, **k)
        labels = segment(holed, 3, visible=vis)
    finally:
        windows.segment_windows = real
    assert calls and labels.shape == (150,) and labels.dtype == np.int64
    assert set(np.unique(labels)) <= {0, 1, 2}
    assert misclassification(labels, truth) < 0.05
