"""LogitBoost baseline and the additive model against the NumPy references."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints.boosting import LogitBoostClassifier
from tests import naive


def _problem(n=600, m=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    y = (X[:, 3] + np.abs(X[:, 7]) - 0.8 + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("step", [False, True])
def test_additive_matches_naive(step):
    rng = np.random.default_rng(1)
    k, B = 5, 6
    X = rng.standard_normal((50, k)) * 2
    lo, scale = -np.ones(k), np.full(k, B / 2.0)
    table = rng.standard_normal((k, B if step else B + 1))
    m = AdditiveModel(np.arange(k) * 3, lo, scale, table, 0.25, "step" if step else "linear")
    np.testing.assert_allclose(m.decision_function(X),
                               naive.keypoints_additive_scores(X, lo, scale, table, step, 0.25))
    back = AdditiveModel.from_arrays(m.to_arrays("clf"), "clf")
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))


def test_additive_errors():
    with pytest.raises(ValueError, match="kind must be 'linear' or 'step'"):
        AdditiveModel([0], [0], [1], [[0, 1]], 0.0, kind="cubic")
    with pytest.raises(ValueError, match="must have the same length k"):
        AdditiveModel([0, 1], [0], [1], [[0, 1]], 0.0)
    m = AdditiveModel([0], [0], [1], [[0, 1]], 0.0)
    with pytest.raises(ValueError, match=r"X must have shape \(n_samples, 1\)"):
        m.decision_function(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="model arrays lack"):
        AdditiveModel.from_arrays({}, "clf")


def test_logitboost_matches_naive():
    X, y = _problem(200, 12)
    clf = LogitBoostClassifier(n_estimators=15, bins=16, sample_fraction=1.0,
                               random_state=0).fit(X, y)
    chosen, F = naive.keypoints_logitboost(X, y.astype(float), 15, 16)
    assert set(clf.get_support(indices=True).tolist()) == set(chosen.tolist())
    np.testing.assert_allclose(clf.decision_function(X), F, atol=1e-10)


def test_logitboost_learns():
    X, y = _problem(2000)
    Xt, yt = _problem(2000, seed=1)
    clf = LogitBoostClassifier(n_estimators=100, bins=16, random_state=0).fit(X, y)
    assert roc_auc_score(yt, clf.decision_function(Xt)) > 0.94
    assert {3, 7} <= set(clf.get_support(indices=True).tolist())
    assert clf.model_.kind == "step" and clf.fit_time_ > 0
    p = clf.predict_proba(Xt)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert (clf.predict(Xt) == yt).mean() > 0.85
    again = LogitBoostClassifier(n_estimators=100, bins=16, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.decision_function(Xt), clf.decision_function(Xt))
    mm = LogitBoostClassifier(n_estimators=20, bins=16, random_state=0).fit(
        np.asarray(X, dtype=np.float32), y)
    assert mm.get_support(indices=True).size > 0


def test_logitboost_errors():
    X, y = _problem(50, 10)
    with pytest.raises(ValueError, match="n_estimators must be a positive int"):
        LogitBoostClassifier(n_estimators=0).fit(X, y)
    with pytest.raises(ValueError, match=r"bins must be an int in \[2, 256\]"):
        LogitBoostClassifier(bins=300).fit(X, y)
    with pytest.raises(ValueError, match=r"sample_fraction must be in \(0, 1\]"):
        LogitBoostClassifier(sample_fraction=0).fit(X, y)
    with pytest.raises(ValueError, match="exactly two classes"):
        LogitBoostClassifier().fit(X, np.zeros(50))
    with pytest.raises(ValueError, match="X must have shape"):
        LogitBoostClassifier().fit(X, y[:10])
    clf = LogitBoostClassifier(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match=r"X must have shape \(n_samples, 10\)"):
        clf.decision_function(X[:, :2])


def test_cascade_format_and_reorder():
    rng = np.random.default_rng(3)
    k, B = 12, 4
    m = AdditiveModel(np.arange(k), np.zeros(k), np.full(k, B), rng.standard_normal((k, B + 1)),
                      0.1)
    X = rng.random((400, k))
    order = np.argsort(-m.influence())
    r = m.reordered(order)
    np.testing.assert_allclose(r.decision_function(X[:, order]), m.decision_function(X))
    # partial scores after 3 and 7 features: the subsets plus the intercept
    p1 = 0.1 + r.subset(0, 3).decision_function(X[:, order[:3]])
    p2 = p1 + r.subset(3, 7).decision_function(X[:, order[3:7]])
    z = 0.1 + np.cumsum(r.contributions(X[:, order]), axis=1)
    np.testing.assert_allclose(np.column_stack([p1, p2]), z[:, [2, 6]], atol=1e-12)
    c = AdditiveModel(r.features, r.lo, r.scale, r.table, r.intercept, cascade_ends=[3, 7],
                      cascade_thresholds=np.quantile(z[:, [2, 6]], 0.05, axis=0))
    assert c.cascade_ends.tolist() == [3, 7] and c.cascade_thresholds.size == 2
    back = AdditiveModel.from_arrays(c.to_arrays("m"), "m")
    np.testing.assert_array_equal(back.cascade_thresholds, c.cascade_thresholds)
    with pytest.raises(ValueError, match="order must be a permutation"):
        m.reordered([0, 0])
    with pytest.raises(ValueError, match="cascade_ends must increase"):
        AdditiveModel([0, 1], [0, 0], [1, 1], [[0, 1], [0, 1]], 0.0, cascade_ends=[1, 1],
                      cascade_thresholds=[0, 0])


def test_clip_ranges_and_clipped_fit():
    from cvfs.keypoints.train import clip_ranges, fit_classifier

    X, y = _problem()
    X[:5, 3] = 1e6  # outliers would stretch the equal bins of feature 3
    lo, hi = clip_ranges(X, 0.01, block=7)
    np.testing.assert_allclose(lo, np.quantile(X, 0.01, axis=0))
    np.testing.assert_allclose(hi, np.quantile(X, 0.99, axis=0))
    lo2, _ = clip_ranges(X, 0.01, max_rows=100, random_state=0)
    assert lo2.shape == lo.shape
    def auc(m):
        return roc_auc_score(y, m.decision_function(X[:, m.features]))

    kw = dict(k=4, bins=6, n_iter=60, random_state=0)
    # FSA: without clipping the outliers squeeze feature 3 into one bin and it is lost
    assert auc(fit_classifier(X, y, "fsa-lorenz", **kw)) < 0.85
    m = fit_classifier(X, y, "fsa-lorenz", clip_quantile=0.01, **kw)
    assert auc(m) > 0.95 and 3 in m.features
    j = list(m.features).index(3)
    np.testing.assert_allclose([m.lo[j], m.lo[j] + 6 / m.scale[j]], [lo[3], hi[3]], rtol=0.05)
    m = fit_classifier(X, y, "logitboost", n_estimators=40, clip_quantile=0.01, **kw)
    assert auc(m) > 0.9 and 3 in m.features
    with pytest.raises(ValueError, match="quantile must be in"):
        clip_ranges(X, 0.5)


def test_fit_classifier_annealing_boost():
    from cvfs.core.losses import Lorenz
    from cvfs.keypoints.train import fit_classifier

    X, y = _problem()
    kw = dict(k=4, bins=6, n_iter=60, random_state=0)
    default = fit_classifier(X, y, "fsa-lorenz", **kw)  # the loss's default boost
    same = fit_classifier(X, y, "fsa-lorenz", annealing_boost=Lorenz.annealing_boost, **kw)
    np.testing.assert_array_equal(same.features, default.features)
    np.testing.assert_allclose(same.decision_function(X[:, same.features]),
                               default.decision_function(X[:, default.features]))
    plain = fit_classifier(X, y, "fsa-lorenz", annealing_boost=1.0, **kw)
    assert roc_auc_score(y, plain.decision_function(X[:, plain.features])) > 0.9
    with pytest.raises(ValueError, match="annealing_boost must be a finite number > 0"):
        fit_classifier(X, y, "fsa-lorenz", annealing_boost=0.0, **kw)
