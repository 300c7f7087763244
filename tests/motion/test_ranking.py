"""Rankers (RankBoost, selectors), the ranking data container and cross-validation."""

import numpy as np
import pytest

from cvfs.motion.evaluate import cross_validate, video_folds
from cvfs.motion.features import feature_names
from cvfs.motion.ranking import (
    ColumnSelector,
    OracleSelector,
    RankBoost,
    RankingData,
    apply_cluster_floor,
    learn_cluster_floor,
    select_best,
    stump_gains,
)
from tests import naive


def make_ranking_problem(n_seq=40, n_cand=8, n_feat=30, informative=5, seed=0):
    """Candidates whose error increases with one feature (relative to its sequence minimum)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_seq * n_cand, n_feat))
    groups = np.repeat(np.arange(n_seq), n_cand)
    rel = X[:, informative] - np.repeat([X[groups == g, informative].min() for g in range(n_seq)],
                                        n_cand)
    errors = np.round(0.02 * rel, 3)
    return RankingData(
        X=X, errors=errors, groups=groups,
        labels=[np.zeros((n_cand, 4), np.int64) for _ in range(n_seq)],
        params=np.zeros((X.shape[0], 2)), names=[f"s{i}" for i in range(n_seq)],
        categories=["checkerboard"] * n_seq, videos=[f"v{i // 2}" for i in range(n_seq)],
        raw_footage=[f"v{i // 2}" for i in range(n_seq)], n_motions=np.full(n_seq, 2))


def test_stump_gains_matches_naive():
    rng = np.random.default_rng(1)
    bins = rng.integers(0, 6, size=(50, 7)).astype(np.uint8)
    v = rng.normal(size=50)
    np.testing.assert_allclose(stump_gains(bins, v, 6), naive.stump_gains(bins, v, 6))


def test_select_best_first_on_ties():
    scores = np.array([1.0, 3.0, 3.0, 0.0, 5.0, 5.0])
    groups = np.array([0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(select_best(scores, groups), [1, 4])


def test_rankboost_finds_the_informative_feature():
    data = make_ranking_problem()
    rb = RankBoost(n_rounds=20, n_thresholds=32, cluster_floor=False)
    rb.fit(data.X, data.errors, data.groups)
    assert np.bincount(rb.features_).argmax() == 5
    chosen = data.errors_of(rb.select(data.X, data.groups))
    assert chosen.mean() < 0.1 * data.errors.mean()
    with pytest.raises(ValueError, match="n_rounds must be a positive int"):
        RankBoost(n_rounds=0).fit(data.X, data.errors, data.groups)
    with pytest.raises(ValueError, match=r"n_thresholds must be an int in \[2, 255\]"):
        RankBoost(n_thresholds=1).fit(data.X, data.errors, data.groups)
    with pytest.raises(ValueError, match="cluster_floor needs the .* candidate features"):
        RankBoost().fit(data.X, data.errors, data.groups)


def test_cross_validation_by_video():
    data = make_ranking_problem(seed=2)
    folds = video_folds(data.videos, data.raw_footage, n_folds=5, random_state=0)
    test, train = cross_validate(data, lambda: RankBoost(n_rounds=20, cluster_floor=False), folds)
    assert test.shape == (40,) and np.all(np.isfinite(test)) and np.all(np.isfinite(train))
    assert test.mean() < 0.2 * data.errors.mean()
    sub = data.subset([3, 1])
    assert sub.names == ["s3", "s1"] and sub.n_sequences == 2
    np.testing.assert_array_equal(sub.groups, np.repeat([0, 1], 8))
    np.testing.assert_array_equal(sub.X[:8], data.X[data.groups == 3])
    with pytest.raises(ValueError, match=r"folds must have shape \(40,\)"):
        cross_validate(data, lambda: RankBoost(cluster_floor=False), folds[:3])


def test_selectors():
    data = make_ranking_problem(n_feat=len(feature_names()), informative=0)
    name = feature_names()[0]
    sel = ColumnSelector(name).fit(data.X, data.errors, data.groups)
    np.testing.assert_allclose(data.errors_of(sel.select(data.X, data.groups)), data.oracle())
    oracle = OracleSelector().fit(data.X, data.errors, data.groups)
    np.testing.assert_allclose(data.errors_of(oracle.select(data.X, data.groups, data.errors)),
                               data.oracle())
    with pytest.raises(ValueError, match="name must be a feature name"):
        ColumnSelector("nope").fit(data.X, data.errors, data.groups)


def test_cluster_floor_ranks_tiny_clusters_last():
    names = feature_names()
    col = names.index("size/min_frac")
    data = make_ranking_problem(n_seq=6, n_cand=4, n_feat=len(names), informative=0)
    X = data.X.copy()
    X[:, col] = 0.3
    X[data.errors == 0, col] = np.repeat([0.2, 0.25, 0.3, 0.35, 0.4, 0.45], 1)
    floor = learn_cluster_floor(X, data.errors, data.groups)
    assert floor == 0.2
    X[1, col] = 0.1  # sequence 0: a candidate below the floor...
    scores = np.zeros(X.shape[0])
    scores[1] = 5.0  # ...that the ranker scores highest
    kept = apply_cluster_floor(scores, X, floor)
    assert select_best(kept, data.groups)[0] != 1
    np.testing.assert_array_equal(np.delete(kept, 1), np.delete(scores, 1))
    # a sequence whose candidates are all below the floor keeps its order
    X[data.groups == 1, col] = 0.05
    scores[data.groups == 1] = [3.0, 1.0, 2.0, 0.0]
    kept = apply_cluster_floor(scores, X, floor)
    assert select_best(kept, data.groups)[1] == np.flatnonzero(data.groups == 1)[0]
    np.testing.assert_array_equal(apply_cluster_floor(scores, X, None), scores)
    rb = RankBoost(n_rounds=10).fit(X, data.errors, data.groups)
    assert rb.cluster_floor_ == learn_cluster_floor(X, data.errors, data.groups)
    with pytest.raises(ValueError, match="pass cluster_floor=False"):
        learn_cluster_floor(X[:, :5], data.errors, data.groups)


def test_feature_families_partition_the_likelihood_and_prior_columns():
    from cvfs.motion.evaluate import feature_columns

    names = np.array(feature_names())
    lik, prior, every = (feature_columns(f) for f in ("likelihood", "prior", "all"))
    assert every.size == names.size and not np.intersect1d(lik, prior).size
    base = [n.split("/", 1)[1] if n.startswith(("rel/", "z/")) else n for n in names]
    assert all(base[i].startswith("lik/") for i in lik)
    assert all(base[i].startswith("prior/") for i in prior)
    rest = np.setdiff1d(every, np.r_[lik, prior])
    # only the cluster-size and candidate-parameter columns belong to neither family
    assert {base[i].split("/")[0] for i in rest} == {"size", "param"}
    assert lik.size == 3 * sum(n.startswith("lik/") for n in feature_names()[:names.size // 3])
    with pytest.raises(ValueError, match="family must be one of"):
        feature_columns("shape")


def test_family_ranker_sees_only_its_columns_and_keeps_the_floor():
    from cvfs.motion.evaluate import FamilyRanker, feature_columns

    data = make_ranking_problem(n_feat=len(feature_names()), informative=0, seed=4)
    X = np.abs(data.X)  # size/min_frac must look like a fraction for the floor
    cols = feature_columns("prior")
    fam = FamilyRanker(RankBoost(n_rounds=10), cols).fit(X, data.errors, data.groups)
    direct = RankBoost(n_rounds=10, cluster_floor=False).fit(X[:, cols], data.errors, data.groups)
    np.testing.assert_array_equal(fam.ranker_.features_, direct.features_)
    assert fam.cluster_floor_ == learn_cluster_floor(X, data.errors, data.groups)
    want = apply_cluster_floor(direct.decision_function(X[:, cols]), X, fam.cluster_floor_)
    np.testing.assert_array_equal(fam.decision_function(X), want)
    np.testing.assert_array_equal(fam.select(X, data.groups), select_best(want, data.groups))
    # column 0 (informative) is a likelihood column: the prior family cannot see it
    assert 0 not in cols
