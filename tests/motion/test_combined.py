"""segment(..., camera="auto"): the affine and two-view candidates in one pool, one ranker."""

import numpy as np
import pytest

from cvfs.motion import load_default_ranker, segment
from cvfs.motion.combined import (
    MERGE_EXTRAS,
    POOL,
    affine_candidates,
    affine_settings,
    load_combined_ranker,
    rank_combined,
    segment_combined,
    two_view_candidates,
)
from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import _tracks, candidate_pool, geometric_affinities
from cvfs.motion.geometry_features import n_geometry_features
from cvfs.motion.synthetic import make_rigid_motions, partial_track_mask
from tests.motion.test_geometry import perspective_scene


def test_the_shipped_ranker_is_the_combined_pools():
    ranker = load_combined_ranker()
    assert ranker.settings_["pool"] == POOL
    assert ranker.settings_["n_features"] == n_geometry_features()
    # the affine candidates are made as the shipped affine ranker's
    aff = load_default_ranker().settings_
    assert affine_settings(ranker) == {"alphas": tuple(aff["alphas"]),
                                       "refine": tuple(aff["refine"]), "seed": aff["seed"]}


def test_a_perspective_scene_is_segmented_by_its_two_view_candidates():
    # trained on real footage, the ranker picks a near-perfect candidate on these synthetic
    # scenes (5 %, 5 %, 8.4 %, 0 % wrong on seeds 0-3; the pool's best is 0 % on each)
    pts, vis, truth = perspective_scene(seed=0)
    assert misclassification(segment_combined(pts, 2, vis), truth) < 0.1
    pts, vis, truth = perspective_scene(seed=3)
    assert misclassification(segment_combined(pts, 2, vis), truth) == 0.0
    pts, vis, truth = perspective_scene(seed=1)
    labels, k, affine = segment_combined(pts, 2, vis, return_k=True)
    assert k == 2 and labels.dtype == np.int64
    assert misclassification(labels, truth) < 0.1
    np.testing.assert_array_equal(labels, segment(pts, 2, visible=vis, camera="auto"))
    # the pool: the two-view candidates first (those of camera="perspective", then the ones
    # merged from finer over-segmentations), then the affine ones; the pick has the top score
    p, v = _tracks(pts, vis, 2)
    cand, scores, n_persp = rank_combined(pts, 2, vis)
    aff = geometric_affinities(p, v, random_state=0)
    two_view = two_view_candidates(p, v, aff, 2, 0)
    np.testing.assert_array_equal(cand[:n_persp], two_view)
    pool = candidate_pool(p, v, aff, 2, 0)
    np.testing.assert_array_equal(two_view[:len(pool)], pool)
    assert len(cand) > n_persp == len(pool) + 4 * len(MERGE_EXTRAS)  # one per affinity
    best = cand[int(np.argmax(scores))]
    assert misclassification(best, labels) == 0.0
    # K chosen by the affine rule: 2
    assert segment(pts, None, visible=vis, camera="auto").max() == 1
    pts, vis, truth = perspective_scene(seed=0, n_cars=2)
    assert misclassification(segment_combined(pts, 3, vis), truth) < 0.06  # measured 4.75 %


def test_an_affine_scene_is_segmented_and_k_chosen_by_the_affine_rule():
    from cvfs.motion import _affine_k

    pts, truth = make_rigid_motions(2, n_points=120, n_frames=12, noise=0.002, random_state=1)
    labels, k, _ = segment_combined(pts, None, return_k=True)
    assert k == _affine_k(pts, None, range(2, 9)) == 2
    assert misclassification(labels, truth) < 0.04  # measured 2.5 % (the pool's best: 0 %)
    pts, truth = make_rigid_motions(3, n_points=150, n_frames=12, noise=0.002, random_state=1)
    assert misclassification(segment(pts, 3, camera="auto"), truth) < 0.03  # measured 2.0 %


def test_partial_tracks_add_the_time_window_labelling():
    pts, truth = make_rigid_motions(2, n_points=120, n_frames=30, noise=0.002, random_state=2)
    vis = partial_track_mask(120, 30, missing=0.5, random_state=0)
    p, v = _tracks(np.where(vis[..., None], pts, np.nan), vis, 2)
    settings = affine_settings()
    cand = affine_candidates(p, v, 2, settings)
    windows = segment(p, 2, visible=v)  # the affine pipeline's labelling, from time windows
    assert any(misclassification(c, windows) == 0.0 for c in cand)
    labels = segment(p, 2, visible=v, camera="auto")
    assert misclassification(labels, truth) < 0.05


def test_bad_models_are_rejected(tmp_path):
    pts, vis, _ = perspective_scene(seed=1)
    with pytest.raises(TypeError, match="combined motion-ranker"):
        segment_combined(pts, 2, vis, model=3)
    # the affine pipeline's ranker does not rank the combined pool
    from cvfs.datasets import models_dir

    with pytest.raises(ValueError, match="not trained on this cvfs's combined pool"):
        segment(pts, 2, visible=vis, camera="auto", model=models_dir() / "motion_ranker.h5")
    with pytest.raises(FileNotFoundError):
        segment(pts, 2, visible=vis, camera="auto", model=tmp_path / "missing.h5")


def test_cli_motion_segment_auto(capsys):
    from cvfs import cli

    src = "synth:motions=2,frames=8,seed=3,width=200,height=150"
    assert cli.main(["motion", "segment", src, "--motions", "2", "--camera", "auto"]) == 0
    assert "points per motion" in capsys.readouterr().out


@pytest.mark.slow
def test_kitti_and_hopkins155_with_the_shipped_ranker(real_data):
    from cvfs.datasets import hopkins155 as h155
    from cvfs.datasets import kt3dmoseg as kt
    from cvfs.motion.missing import MIN_OBSERVED

    root = real_data / "motion_kt3dmoseg"
    if not root.is_dir():
        pytest.skip("KT3DMoSeg not in the data home")
    # a three-motion driving clip: the ranker picks a two-view candidate 0.4 % wrong
    (clip,) = kt.load_kt3dmoseg(root, names=["Seq005_Clip02"])
    ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
    labels, k, affine = segment_combined(clip.points[ok], 3, clip.visible[ok], return_k=True)
    assert misclassification(labels, clip.labels[ok]) < 0.01 and not affine
    s = h155.load_hopkins155(names=["cars1"])[0]
    labels, k, _ = segment_combined(s.pixels, None, return_k=True)
    assert k == 2 and misclassification(labels, s.labels) < 0.01
