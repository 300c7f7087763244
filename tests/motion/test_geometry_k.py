"""K chosen for perspective footage (cvfs.motion.geometry_k) on synthetic driving scenes."""

import numpy as np
import pytest

from cvfs.motion import segment
from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import segment_perspective
from cvfs.motion.geometry_k import CUT_RISE, choose_k_by_cuts, segment_perspective_k
from tests.motion.test_geometry import perspective_scene


def test_k_is_chosen_on_perspective_scenes():
    pts, vis, truth = perspective_scene(seed=0)
    labels, k, scores = segment_perspective_k(pts, vis, return_scores=True)
    assert k == 2 and sorted(scores) == list(range(2, 9))
    assert misclassification(labels, truth) == 0.0
    assert scores[2] < 0.02 < 0.1 < scores[3]  # a third cluster splits a motion
    # the labelling of the K chosen is segment_perspective's with that K
    np.testing.assert_array_equal(labels, segment_perspective(pts, 2, vis))

    pts, vis, truth = perspective_scene(seed=0, n_cars=2)
    labels = segment(pts, None, visible=vis, camera="perspective")
    assert labels.dtype == np.int64 and labels.max() == 2
    assert misclassification(labels, truth) == 0.0


def test_candidates_k_limits_the_k_tried():
    pts, vis, truth = perspective_scene(seed=2, n_cars=2)
    _, k, scores = segment_perspective_k(pts, vis, candidates_k=(2, 3, 4), return_scores=True)
    assert k == 3 and sorted(scores) == [2, 3, 4]
    # only K = 2 allowed: it is returned without a comparison
    labels = segment(pts, None, visible=vis, camera="perspective", candidates_k=[2])
    assert labels.max() == 1
    # K that leave fewer than 4 tracks per motion are not tried
    few = pts[:30], vis[:30]
    _, _, scores = segment_perspective_k(*few, candidates_k=(2, 7, 8), return_scores=True)
    assert sorted(scores) == [2, 7]


def test_choose_k_by_cuts():
    # mean cut per cluster: 0.005, 0.0067, 0.05 -> rises by 0.043 after K = 3
    assert choose_k_by_cuts({2: 0.01, 3: 0.02, 4: 0.2}) == 3
    assert choose_k_by_cuts({2: 0.01, 3: 0.2, 4: 0.4}) == 2
    assert choose_k_by_cuts({4: 0.1}) == 4
    assert choose_k_by_cuts({2: 0.01, 3: 0.02, 4: 0.03}) == 4  # never rises: the largest K
    assert choose_k_by_cuts({2: 0.01, 3: 0.02, 4: 0.2}, rise=0.1) == 4
    assert CUT_RISE == 0.0055


def test_bad_input_is_rejected():
    pts, vis, _ = perspective_scene(n_frames=4, seed=4)
    with pytest.raises(ValueError, match="scores must hold"):
        choose_k_by_cuts({})
    with pytest.raises(ValueError, match="rise must be a finite number"):
        choose_k_by_cuts({2: 0.1}, rise=np.nan)
    with pytest.raises(ValueError, match="rise must be a finite number"):
        segment_perspective_k(pts, vis, rise=np.inf)
    with pytest.raises(ValueError, match="candidates_k must hold at least one K"):
        segment(pts, None, visible=vis, camera="perspective", candidates_k=())
    with pytest.raises(ValueError, match="candidates_k must hold ints >= 2; got 1"):
        segment(pts, None, visible=vis, camera="perspective", candidates_k=(1, 2))
    with pytest.raises(TypeError, match="candidates_k must hold ints; got 2.5"):
        segment_perspective_k(pts, vis, candidates_k=(2.5,))
    with pytest.raises(TypeError, match="candidates_k must be a sequence of ints"):
        segment_perspective_k(pts, vis, candidates_k=3)
    with pytest.raises(ValueError, match="too few for any K in"):
        segment_perspective_k(pts[:10], vis[:10], candidates_k=(3, 4))
    with pytest.raises(ValueError, match=r"\(P, F, 2\)"):
        segment(pts[..., 0], None, camera="perspective")
    with pytest.raises(ValueError, match="visible"):
        segment(pts, None, visible=vis[:, :2], camera="perspective")
    with pytest.raises(TypeError, match="unknown options"):
        segment_perspective_k(pts, vis, n_hypothesis=10)


@pytest.mark.slow
def test_kitti_clips_k_chosen(real_data):
    from cvfs.datasets import kt3dmoseg as kt

    root = real_data / "motion_kt3dmoseg"
    if not root.is_dir():
        pytest.skip("KT3DMoSeg not in the data home")
    clips = kt.load_kt3dmoseg(root, names=["Seq070_Clip01", "Seq005_Clip02"])
    got = {c.name: segment_perspective_k(c.points, c.visible, return_scores=True)[:2]
           for c in clips}
    assert {n: k for n, (_, k) in got.items()} == {"Seq070_Clip01": 2, "Seq005_Clip02": 3}
    errors = [misclassification(got[c.name][0], c.labels) for c in clips]
    assert errors[0] == 0.0 and errors[1] < 0.01


@pytest.mark.slow  # K = 2..8 each over-clustered and merged: ~10 s
def test_segment_tracked_perspective_k_chosen_reports_the_scores():
    from cvfs.motion.video import segment_tracked

    pts, vis, truth = perspective_scene(seed=0, n_cars=2)
    res = segment_tracked(pts, vis, None, camera="perspective")
    assert res.k_chosen and res.n_motions == 3
    assert sorted(res.k_residuals) == list(range(2, 9))
    np.testing.assert_array_equal(res.labels, segment(pts, None, visible=vis, camera="perspective"))
