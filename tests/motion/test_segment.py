"""End to end: MotionRanker training, model files, segment(), the CLI, the video app, the demo."""

import json
import os

import numpy as np
import pytest

from cvfs import cli
from cvfs.datasets import hopkins155 as h155
from cvfs.datasets import models_dir
from cvfs.motion import _segment_tracks, normalise_points, segment
from cvfs.motion.candidates import generate_candidates
from cvfs.motion.evaluate import misclassification
from cvfs.motion.features import FEATURE_VERSION, candidate_features, n_features
from cvfs.motion.ranking import MotionRanker, load_ranker, save_ranker
from cvfs.motion.synthetic import make_rigid_motions
from tests.scripts import load_script

SETTINGS = {"alphas": [1.0, 2.0, 4.0, 8.0], "refine": ["velocity"],
            "feature_version": FEATURE_VERSION, "n_features": n_features(), "seed": 0}


@pytest.fixture(scope="module")
def synthetic_ranker():
    """A small FSA-Rank model trained on synthetic rigid-motion sequences."""
    X, err, groups = [], [], []
    for i in range(10):
        k = 2 + i % 2
        pts, truth = make_rigid_motions(k, 80, 10, noise=0.004, random_state=100 + i)
        cand = generate_candidates(pts, k)
        X.append(candidate_features(pts, cand))
        err.append(misclassification(cand.labels, truth))
        groups.append(np.full(len(cand), i))
    ranker = MotionRanker(k=15, n_iter=100, random_state=0)
    ranker.fit(np.concatenate(X), np.concatenate(err), np.concatenate(groups))
    ranker.settings_ = dict(SETTINGS)
    return ranker


def test_segment_synthetic_with_a_trained_ranker(synthetic_ranker):
    errs = []
    for seed, k in ((1, 2), (3, 3), (4, 2), (8, 3)):  # pools that hold the true segmentation
        pts, truth = make_rigid_motions(k, 120, 15, random_state=seed)
        labels = segment(300.0 * pts + 200.0, k, model=synthetic_ranker)  # pixel-like scale
        assert labels.shape == (120,) and labels.dtype == np.int64
        assert set(np.unique(labels)) <= set(range(k))
        errs.append(misclassification(labels, truth))
    assert np.mean(errs) < 0.02


def test_ranker_file_roundtrip(tmp_path, synthetic_ranker):
    path = save_ranker(tmp_path / "r.h5", synthetic_ranker, settings=SETTINGS,
                       training={"data": "synthetic"})
    back = load_ranker(path)
    pts, _ = make_rigid_motions(2, 60, 10, random_state=7)
    X = candidate_features(pts, generate_candidates(pts, 2))
    np.testing.assert_allclose(back.decision_function(X), synthetic_ranker.decision_function(X))
    assert back.settings_["feature_version"] == FEATURE_VERSION
    assert back.min_gap is None and synthetic_ranker.min_gap is None
    assert back.estimator_.min_gap is None and back.pair_weights == "uniform"
    assert back.cluster_floor and back.cluster_floor_ == synthetic_ranker.cluster_floor_ > 0
    np.testing.assert_array_equal(segment(pts, 2, model=path),
                                  segment(pts, 2, model=synthetic_ranker))


def test_segment_errors(tmp_path, synthetic_ranker):
    pts, _ = make_rigid_motions(2, 40, 8, random_state=0)
    with pytest.raises(ValueError, match=r"shape \(P, F, 2\)"):
        segment(pts[:, :, 0], 2, model=synthetic_ranker)
    bad = pts.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        segment(bad, 2, model=synthetic_ranker)
    with pytest.raises(ValueError, match="needs at least 44 trajectories"):
        segment(pts, 11, model=synthetic_ranker)
    with pytest.raises(TypeError, match="n_motions must be an int"):
        segment(pts, "2", model=synthetic_ranker)
    with pytest.raises(TypeError, match="model must be None, a path"):
        segment(pts, 2, model=42)
    with pytest.raises(FileNotFoundError, match="model file not found"):
        segment(pts, 2, model=tmp_path / "nope.h5")
    old = MotionRanker()
    old.estimator_ = synthetic_ranker.estimator_
    old.settings_ = dict(SETTINGS, feature_version=-1)
    with pytest.raises(ValueError, match="retrain the ranker"):
        segment(pts, 2, model=old)
    with pytest.raises(ValueError, match="too few for any K"):
        segment(pts[:7], None, model=synthetic_ranker)


def test_segment_chooses_k(synthetic_ranker):
    pts, truth = make_rigid_motions(3, 120, 15, random_state=2)
    labels = segment(pts, model=synthetic_ranker)
    assert labels.max() + 1 in (2, 3, 4)
    np.testing.assert_array_equal(labels, _segment_tracks(pts, None, model=synthetic_ranker)[0])
    labels, k = _segment_tracks(pts, 3, model=synthetic_ranker)
    assert k == 3 and misclassification(labels, truth) < 0.1


def test_normalise_points():
    pts = np.array([[[0.0, 0.0], [10.0, 4.0]], [[4.0, 2.0], [6.0, 2.0]]])
    out = normalise_points(pts)
    assert out.min() == -1.0 and out.max() == 1.0
    np.testing.assert_allclose(out[0, 0], [-1.0, -0.4])


def test_normalise_points_per_axis():
    pts = np.random.default_rng(0).uniform(-3.0, 7.0, (6, 4, 2))
    out = normalise_points(pts, per_axis=True)
    np.testing.assert_allclose(out.reshape(-1, 2).min(axis=0), [-1.0, -1.0])
    np.testing.assert_allclose(out.reshape(-1, 2).max(axis=0), [1.0, 1.0])
    # the same for any units of x and y
    np.testing.assert_allclose(normalise_points(pts * [320.0, 0.5] + [9.0, -2.0], per_axis=True),
                               out, atol=1e-12)
    # an axis without spread takes the other axis' scale
    flat = pts.copy()
    flat[..., 1] = 2.0
    np.testing.assert_array_equal(normalise_points(flat, per_axis=True),
                                  normalise_points(flat))


# ---- the shipped model on real data -----------------------------------------------------------


def test_shipped_model_on_real_sequences(real_data):
    assert (models_dir() / "motion_ranker.h5").is_file()
    seqs = h155.load_hopkins155(names=["1R2RC_g12", "cars1", "three-cars", "kanatani3"])
    errs = [misclassification(segment(s.pixels, s.n_motions), s.labels) for s in seqs]
    # these sequences were in the shipped model's training set; its mean training error is < 1%
    assert np.mean(errs) < 0.02, errs


def test_cli_motion_evaluate_on_a_subset(real_data, tmp_path):
    root = tmp_path / "h155"
    root.mkdir()
    names = ["1R2RC_g12", "1R2RC_g13", "cars1", "cars2_06_g12", "kanatani3", "three-cars",
             "arm", "2T3RCR_g12"]
    for n in names:
        os.symlink(real_data / "hopkins155" / n, root / n)
    out = tmp_path / "res.json"
    code = cli.main(["motion", "evaluate", "--data", str(root), "--json", str(out),
                     "--cache", str(tmp_path / "cache.h5"), "--folds", "2", "--quiet",
                     "--features", "all", "likelihood", "prior"])
    assert code == 0
    res = json.loads(out.read_text())
    for side in ("test", "train"):
        for key in ("all", "two", "three", "checkerboard_two", "traffic_two",
                    "articulated_two"):
            assert 0.0 <= res[side][key]["mean"] <= 100.0 or res[side][key]["n"] == 0
    assert res["test"]["all"]["n"] == len(names)
    assert set(res["methods"]) >= {"Oracle", "Residual", "RankBoost test", "FSA-Rank test",
                                   "FSA-Rank likelihood test", "RankBoost prior train"}
    assert res["feature_sets"]["likelihood"] + res["feature_sets"]["prior"] < res["n_features"]
    assert res["methods"]["Oracle"]["all"]["mean"] <= res["test"]["all"]["mean"]
    assert (tmp_path / "motion_cdf.png").is_file()
    assert cli.main(["motion", "evaluate", "--data", str(tmp_path / "none")]) == 2


def test_cli_motion_segment_synthetic(capsys):
    assert cli.main(["motion", "segment", "synth:motions=2,frames=8,seed=3,width=200,height=150",
                     "--motions", "2"]) == 0
    assert "points per motion" in capsys.readouterr().out


def test_video_app_on_a_real_video(real_data, tmp_path):
    app = load_script("apps/motion_video.py")
    video = real_data / "hopkins155_videos" / "three-cars.avi"
    assert app.main([str(video), "--motions", "3", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "three-cars_motion.json").read_text())
    assert summary["n_motions"] == 3 and summary["frames"] == 15
    assert sum(summary["points_per_motion"]) == summary["tracks"]
    for suffix in ("avi", "png"):
        assert (tmp_path / f"three-cars_motion.{suffix}").stat().st_size > 1000
    assert app.main([str(tmp_path / "missing.avi"), "--out", str(tmp_path)]) == 2
    bad = tmp_path / "bad.avi"
    bad.write_bytes(b"garbage")
    assert app.main([str(bad), "--out", str(tmp_path)]) == 2
    assert app.main(["synth:motions=2,frames=8,width=200,height=150", "--motions", "auto", "--out",
                     str(tmp_path)]) == 0


def test_demo_motion_part(tmp_path):
    from cvfs import demo

    lines = demo.PARTS["motion"](tmp_path, False)
    assert any("misclassification 0.00%" in line for line in lines)
    assert any("K chosen: 3;" in line for line in lines)
    assert (tmp_path / "motion_trajectories.png").is_file()
    assert (tmp_path / "motion_synthetic.avi").is_file()


@pytest.mark.slow
def test_table_vii_full_cross_validation(real_data, tmp_path):
    """The whole 10-fold CV (builds the feature cache on first use: ~1 min)."""
    from cvfs.motion.evaluate import evaluate_hopkins155

    res = evaluate_hopkins155(figures=tmp_path)
    m = res["methods"]
    assert res["test"]["all"]["n"] == 155
    assert m["Oracle"]["all"]["mean"] < 0.25  # 0.19: alpha in {1, 2, 4, 8} + refined
    assert m["FSA-Rank test"]["all"]["mean"] < m["Residual"]["all"]["mean"]
    assert m["FSA-Rank test"]["all"]["mean"] < 0.45  # 0.36 measured (fold seed 0)
    assert m["FSA-Rank test"]["two"]["mean"] < 0.4  # 0.31
    assert m["FSA-Rank test"]["three"]["mean"] < 0.8  # 0.53


@pytest.mark.slow
def test_table_vii_feature_family_ablation(real_data, tmp_path):
    """Table VII's likelihood-only and prior-only columns (10-fold CV, fold seed 0)."""
    from cvfs.motion.evaluate import evaluate_hopkins155

    res = evaluate_hopkins155(rankers=("fsa",), features=("all", "likelihood", "prior"))
    m = res["methods"]
    lik, prior = m["FSA-Rank likelihood test"]["all"], m["FSA-Rank prior test"]["all"]
    assert lik["n"] == prior["n"] == 155
    # measured: all 0.36, likelihood 0.68, prior 2.46 (paper: 0.44, 1.54, 0.90)
    assert m["FSA-Rank test"]["all"]["mean"] < lik["mean"] < 1.0
    assert m["FSA-Rank test"]["all"]["mean"] < prior["mean"] < 3.0
