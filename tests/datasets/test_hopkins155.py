"""Hopkins155 loader, candidates, features and evaluation helpers."""

import numpy as np
import pytest
from scipy.io import savemat

from cvfs.datasets import hopkins155 as h155
from cvfs.motion.candidates import (
    canonical_labels,
    check_points,
    generate_candidates,
    refine_subspaces,
    velocity_matrix,
)
from cvfs.motion.evaluate import format_table, misclassification, summarise, video_folds
from cvfs.motion.features import candidate_features, cut_fractions, feature_names, n_features
from cvfs.motion.synthetic import make_rigid_motions
from tests import naive
from tests.scripts import load_script

REAL = ["1R2RC_g12", "cars1", "two_cranes"]


def _write_mat(folder, name, **override):
    rng = np.random.default_rng(0)
    P, F = 12, 5
    y = np.concatenate([rng.uniform(0, 480, (2, P, F)), np.ones((1, P, F))])
    K = np.array([[320.0, 0, 320], [0, 240, 240], [0, 0, 1]])
    x = np.einsum("ij,jpf->ipf", np.linalg.inv(K), y)
    mat = dict(x=x, y=y, s=np.repeat([1, 2], P // 2)[:, None], K=K, width=640, height=480,
               points=P, frames=F)
    mat.update(override)
    mat = {k: v for k, v in mat.items() if v is not None}
    (folder / name).mkdir(parents=True)
    savemat(folder / name / f"{name}_truth.mat", mat)
    return folder / name / f"{name}_truth.mat"


# ---- loader -----------------------------------------------------------------------------------


def test_loader_reads_a_fixture_and_names(tmp_path):
    _write_mat(tmp_path, "foo_g12")
    _write_mat(tmp_path, "cars9")
    seqs = h155.load_hopkins155(tmp_path)
    assert [s.name for s in seqs] == ["cars9", "foo_g12"]
    s = seqs[1]
    assert s.points.shape == (12, 5, 2) and s.pixels.shape == (12, 5, 2)
    assert s.video == "foo" and s.category == "checkerboard" and s.n_motions == 2
    assert seqs[0].category == "traffic"
    np.testing.assert_array_equal(s.labels, np.repeat([0, 1], 6))
    assert np.all(np.abs(s.points) <= 1.0)


def test_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        h155.load_hopkins155(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no <SEQ>/<SEQ>_truth.mat"):
        h155.list_sequences(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        h155.load_sequence(tmp_path / "a_truth.mat")
    path = _write_mat(tmp_path, "nos", s=None)
    with pytest.raises(ValueError, match="variable 's' is missing"):
        h155.load_sequence(path)
    path = _write_mat(tmp_path, "bad", x=np.zeros((2, 12, 5)))
    with pytest.raises(ValueError, match=r"shape \(3, P, F\)"):
        h155.load_sequence(path)
    path = _write_mat(tmp_path, "one", s=np.ones((12, 1)))
    with pytest.raises(ValueError, match="expected at least 2"):
        h155.load_sequence(path)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "junk_truth.mat").write_bytes(b"not a mat file at all")
    with pytest.raises(ValueError, match="not a readable MATLAB file"):
        h155.load_sequence(tmp_path / "junk")
    path = _write_mat(tmp_path, "nan", y=np.full((3, 12, 5), np.nan))
    with pytest.raises(ValueError, match="NaN"):
        h155.load_sequence(path)


def test_loader_real_sequences(real_data):
    seqs = h155.load_hopkins155(names=REAL)
    assert [s.n_motions for s in seqs] == [2, 2, 3]
    assert [s.category for s in seqs] == ["checkerboard", "traffic", "articulated"]
    assert seqs[0].video == "1R2RC" and seqs[0].points.shape == (210, 29, 2)
    assert len(h155.list_sequences()) == 155


# ---- candidates -------------------------------------------------------------------------------


def test_velocity_matrix_layout():
    pts = np.arange(12, dtype=float).reshape(2, 3, 2)  # P=2, F=3
    W = velocity_matrix(pts)
    np.testing.assert_array_equal(W[:, 0], [-2, -2, -2, -2, 4, 5])


def test_canonical_labels():
    np.testing.assert_array_equal(canonical_labels([2, 2, 0, 1, 0]), [[0, 0, 1, 2, 1]])


def test_candidates_find_synthetic_rigid_motions():
    for k, seed in ((2, 1), (3, 2)):
        pts, truth = make_rigid_motions(k, 150, 20, random_state=seed)
        cand = generate_candidates(pts, k, random_state=0)
        err = misclassification(cand.labels, truth)
        assert err.min() == 0.0
        # unique, canonical rows
        assert len({row.tobytes() for row in cand.labels}) == len(cand)
        np.testing.assert_array_equal(canonical_labels(cand.labels), cand.labels)
        assert set(cand.params[:, 0]) <= {1.0, 2.0, 4.0, 8.0}
        assert cand.params[:, 1].min() >= 2 * k and cand.params[:, 1].max() <= 4 * k
    # deterministic for a fixed seed
    again = generate_candidates(pts, 3, random_state=0)
    np.testing.assert_array_equal(again.labels, cand.labels)


def test_candidates_pool_is_a_parameter():
    pts, _ = make_rigid_motions(2, 80, 10, random_state=0)
    small = generate_candidates(pts, 2, alphas=(2,), dims=(4,), refine=())
    assert len(small) == 1 and tuple(small.params[0]) == (2.0, 4, 0)
    pool = generate_candidates(pts, 3, refine=("velocity", "whitened"))
    assert set(pool.params[:, 2]) <= {0, 1, 2} and 0 in pool.params[:, 2]
    spectral = generate_candidates(pts, 3, refine=())
    np.testing.assert_array_equal(pool.labels[:len(spectral)], spectral.labels)
    with pytest.raises(ValueError, match="alphas must be"):
        generate_candidates(pts, 2, alphas=())
    with pytest.raises(ValueError, match="dims must be"):
        generate_candidates(pts, 2, dims=(0,))
    with pytest.raises(ValueError, match="refine must hold spaces among"):
        generate_candidates(pts, 2, refine=("pixels",))


def test_refine_subspaces_repairs_a_corrupted_segmentation():
    pts, truth = make_rigid_motions(3, 150, 20, random_state=4)
    Y = velocity_matrix(pts).T
    rng = np.random.default_rng(0)
    noisy = truth.copy()
    flip = rng.choice(truth.size, 3, replace=False)
    noisy[flip] = (noisy[flip] + 1) % 3
    fixed = refine_subspaces(Y, noisy, 3)
    assert fixed.dtype == np.int64 and misclassification(fixed, truth) == 0.0
    # a step that would leave a label with <= dim points is not taken
    tiny = truth.copy()
    tiny[np.flatnonzero(truth == 2)[4:]] = 0
    assert np.bincount(refine_subspaces(Y, tiny, 3), minlength=3).min() >= 4


def test_check_points_errors():
    good = np.zeros((20, 5, 2))
    with pytest.raises(ValueError, match=r"shape \(P, F, 2\).*got shape \(20, 5\)"):
        check_points(good[..., 0], 2)
    with pytest.raises(ValueError, match="at least 2 frames"):
        check_points(good[:, :1], 2)
    bad = good.copy()
    bad[3, 2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_points(bad, 2)
    with pytest.raises(ValueError, match="n_motions must be >= 2"):
        check_points(good, 1)
    with pytest.raises(ValueError, match="needs at least 24 trajectories"):
        check_points(good, 6)
    with pytest.raises(TypeError, match="n_motions must be an int"):
        check_points(good, 2.0)
    with pytest.raises(ValueError, match="must be numeric"):
        check_points(np.full((20, 5, 2), "a"), 2)


# ---- features ---------------------------------------------------------------------------------


def test_features_shape_and_meaning():
    pts, truth = make_rigid_motions(2, 120, 15, random_state=1)
    cand = generate_candidates(pts, 2)
    X = candidate_features(pts, cand)
    assert X.shape == (len(cand), n_features()) and len(feature_names()) == X.shape[1]
    assert np.all(np.isfinite(X))
    names = feature_names()
    assert n_features() > 800
    # the ground-truth-like candidate fits 3-D affine subspaces best and cuts fewest kNN edges
    err = misclassification(cand.labels, truth)
    best = np.argmin(err)
    assert np.argmin(X[:, names.index("lik/traj/m3/mean")]) == best
    assert np.argmin(X[:, names.index("prior/traj/euclid/k5")]) == best
    with pytest.raises(TypeError, match="candidates must be a Candidates"):
        candidate_features(pts, cand.labels)


def test_cut_fractions_matches_naive():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(4, 30)).astype(np.int64)
    nb = np.stack([rng.permutation(30)[:8] for _ in range(30)]).astype(np.int64)
    ks = np.array([1, 2, 5, 8], dtype=np.int64)
    np.testing.assert_allclose(cut_fractions(labels, nb, ks), naive.cut_fractions(labels, nb, ks))


# ---- evaluation helpers -----------------------------------------------------------------------


def test_misclassification_is_permutation_invariant():
    truth = np.array([0, 0, 1, 1, 2, 2])
    assert misclassification([5, 5, 3, 3, 1, 1], truth) == 0.0
    assert misclassification([1, 1, 0, 0, 2, 0], truth) == pytest.approx(1 / 6)
    np.testing.assert_allclose(misclassification(np.array([[0, 0, 1, 1, 2, 2],
                                                           [0, 1, 0, 1, 0, 1]]), truth),
                               [0.0, 4 / 6])
    with pytest.raises(ValueError, match="labels have 2 points, truth has 6"):
        misclassification([0, 1], truth)


def test_video_folds_keep_footage_together():


    videos = [f"v{i}" for i in range(50) for _ in range(2)]
    raw = [v if v != "v1" else "v0" for v in videos]
    folds = video_folds(videos, raw, n_folds=10, random_state=3)
    per_fold = [len({v for v, f in zip(videos, folds, strict=True) if f == k}) for k in range(10)]
    assert per_fold == [5] * 10
    assert len({f for v, f in zip(videos, folds, strict=True) if v in ("v0", "v1")}) == 1
    assert len({f for v, f in zip(videos, folds, strict=True) if v == "v7"}) == 1
    with pytest.raises(ValueError, match="n_folds must be in"):
        video_folds(["a", "b"], ["a", "b"], n_folds=3)
    with pytest.raises(ValueError, match="differ"):
        video_folds(["a"], ["a", "b"])


def test_summarise_and_table():
    rows = summarise([0.0, 0.01, 0.02, 0.04], ["checkerboard", "traffic", "checkerboard",
                                               "articulated"], [2, 2, 3, 3])
    assert rows["two"]["mean"] == pytest.approx(0.5)
    assert rows["three"]["median"] == pytest.approx(3.0)
    assert rows["all"]["n"] == 4 and rows["traffic_three"]["n"] == 0
    text = format_table({"A": rows, "B": rows})
    assert "All sequences combined [n=4]" in text and "Checkerboard (2 motion)" in text


def test_feature_cache_script(real_data, tmp_path):

    from cvfs.motion.cache import cache_matches, load_cache

    root = tmp_path / "h155"
    root.mkdir()
    for n in ("1R2RC_g12", "cars1"):
        (root / n).symlink_to(real_data / "hopkins155" / n)
    mod = load_script("data_prep/motion_features.py")
    out = tmp_path / "cache.h5"
    assert mod.main(["--data", str(root), "--out", str(out), "--quiet"]) == 0
    assert cache_matches(out, names=["1R2RC_g12", "cars1"])
    data, seconds = load_cache(out)
    assert data.names == ["1R2RC_g12", "cars1"] and seconds.shape == (2,)
    assert data.X.shape == (data.groups.size, n_features())
    assert np.all((data.errors >= 0) & (data.errors <= 1)) and data.oracle().max() < 0.02
    with pytest.raises(ValueError, match="not in the cache"):
        load_cache(out, names=["nope"])
