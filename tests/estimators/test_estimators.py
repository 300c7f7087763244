import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import FGMClassifier, FSAClassifier, FSARanker, FSARegressor, InfinitePushRanker
from cvfs.core.priors import Shrinkage
from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression
from cvfs.estimators import ranking_pairs


@parametrize_with_checks([
    FSAClassifier(k=3, n_iter=60),
    FSAClassifier(k=3, n_iter=60, loss="lorenz", bins=3),
    FSARegressor(k=3, n_iter=60),
    FSARanker(k=3, n_iter=60, bins=None),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_classifier_recovers_support_with_string_labels():
    X, y, true = make_ar1_classification(1000, 500, k_true=10, random_state=0)
    labels = np.array(["face", "not"])[1 - y]
    clf = FSAClassifier(k=10).fit(X, labels)
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    assert clf.score(X, labels) > 0.95
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    assert clf.transform(X).shape == (1000, 10)
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert set(clf.predict(X)) == {"face", "not"}
    assert not hasattr(FSAClassifier(loss="lorenz").fit(X, labels), "predict_proba")


@pytest.mark.parametrize("make", [
    lambda: FSAClassifier(k=4, n_iter=40),
    lambda: FSAClassifier(k=4, n_iter=40, bins=3),
    lambda: FSARegressor(k=4, n_iter=40),
    lambda: FGMClassifier(B=2),
    lambda: InfinitePushRanker(lam=0.05, max_iter=200),
])
def test_support_is_a_mask_for_every_selector(make):
    """support_ is the boolean mask over X's columns (scikit-learn's RFE), get_support(
    indices=True) its sorted indices, transform keeps those columns; n_iter_ counts the fit's
    iterations."""
    X, y, _ = make_ar1_classification(200, 30, k_true=3, random_state=0)
    est = make().fit(X, y)
    assert est.support_.dtype == bool and est.support_.shape == (30,)
    idx = est.get_support(indices=True)
    np.testing.assert_array_equal(idx, np.flatnonzero(est.support_))
    np.testing.assert_array_equal(est.transform(X), X[:, idx])
    assert isinstance(est.n_iter_, int) and est.n_iter_ >= 1


def test_schedule_parameter_replaces_the_annealing_schedule():
    """schedule= is the kept count per iteration: the fit equals fsa_fit with that schedule,
    runs len(schedule) iterations, and a schedule that does not end at k is refused."""
    from cvfs.core.fsa import fsa_fit

    X, y, _ = make_ar1_classification(200, 30, k_true=3, random_state=0)
    schedule = np.r_[np.full(5, 30), [20, 12, 8, 5, 4, 4, 4]]
    clf = FSAClassifier(k=4, schedule=schedule).fit(X, y)
    res = fsa_fit(X, np.where(y == 1, 1.0, -1.0), 4, schedule=schedule)
    np.testing.assert_array_equal(clf.get_support(indices=True), res.support)
    np.testing.assert_array_equal(clf.coef_, res.coef[:, 0])
    assert clf.n_iter_ == schedule.size and clf.history_["n_kept"].tolist() == schedule.tolist()
    with pytest.raises(ValueError, match="schedule values must lie in"):
        FSAClassifier(k=4, schedule=[30, 20, 3]).fit(X, y)


def test_multiclass_support_is_a_mask():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    X = rng.standard_normal((300, 20)) + y[:, None] * (np.arange(20) < 3)
    clf = FSAClassifier(k=3, n_iter=60).fit(X, y)
    assert clf.support_.dtype == bool and clf.support_.sum() == 3 and clf.n_iter_ == 60
    np.testing.assert_array_equal(clf.get_support(indices=True), [0, 1, 2])


def test_regressor_and_history():
    X, y, true = make_ar1_regression(1000, 1000, k_true=30, random_state=1)
    reg = FSARegressor(k=30).fit(X, y)
    np.testing.assert_array_equal(reg.get_support(indices=True), true)
    assert reg.score(X, y) > 0.95
    assert reg.history_["n_kept"][-1] == 30 and reg.history_["loss"].shape == (500,)


def test_ranker_pairs_only_within_groups():
    y = np.array([3, 1, 1, 2, 0])
    g = np.array([0, 0, 1, 1, 0])
    i, j, r, w = ranking_pairs(y, g)
    pairs = {(a, b): c for a, b, c in zip(i, j, r)}
    assert pairs == {(0, 1): 1.0, (0, 4): 1.0, (1, 4): 1.0, (2, 3): 0.0}
    np.testing.assert_allclose(w, 0.25)
    _, _, _, w = ranking_pairs(y, g, weights="group")
    np.testing.assert_allclose(w, [1 / 6, 1 / 6, 1 / 6, 1 / 2])  # both groups weigh 1/2
    i, j, r, w = ranking_pairs([1, 1], None)
    assert r.tolist() == [0.5]
    with pytest.raises(ValueError, match="pair weights must be"):
        ranking_pairs(y, g, weights="size")


def test_ranker_pairs_min_gap_drops_ties_and_near_ties():
    y = np.array([0.0, 0.004, 0.02, 0.02, 1.0])
    i, j, r, w = ranking_pairs(y, None, min_gap=0.005)
    assert {(a, b) for a, b in zip(i, j)} == {(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4),
                                              (2, 4), (3, 4)}
    assert np.all(r == 0.0) and np.isclose(w.sum(), 1.0)
    i, _, r, _ = ranking_pairs(y, None, min_gap=0.0)  # ties only
    assert i.size == 9 and 0.5 not in r
    with pytest.raises(ValueError, match=r"min_gap must be None or a number >= 0, got -1"):
        ranking_pairs(y, None, min_gap=-1)
    with pytest.raises(ValueError, match="whose targets differ by more than min_gap=2"):
        FSARanker(min_gap=2).fit(np.eye(5), y, np.zeros(5))
    rk = FSARanker(k=1, bins=None, n_iter=20, min_gap=0.005).fit(np.column_stack([y, -y]), y)
    assert rk.score(np.column_stack([y, -y]), y) == 1.0


def test_ranker_group_weights_match_weighted_naive_gradient():
    from cvfs.core.fsa import fsa_fit

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 8))
    q = X[:, 2] + 0.1 * rng.normal(size=60)
    groups = np.repeat([0, 1, 2], [30, 20, 10])
    pairs = ranking_pairs(q, groups, "group")
    a = FSARanker(k=2, bins=None, pair_weights="group", n_iter=50).fit(X, q, groups)
    b = fsa_fit(X, q, 2, loss="rank", pairs=pairs, n_iter=50, mu=300, prior=Shrinkage(0.01))
    np.testing.assert_allclose(a.coef_, b.coef[:, 0])
    assert 2 in a.get_support(indices=True)


def test_ranker_recovers_features_and_orders_groups():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(800, 60))
    quality = X[:, 5] - 0.5 * X[:, 40] + 0.1 * rng.normal(size=800)
    groups = np.repeat(np.arange(80), 10)
    rk = FSARanker(k=2).fit(X, quality, groups=groups)
    np.testing.assert_array_equal(rk.get_support(indices=True), [5, 40])
    assert rk.coef_.shape == (2, 5)
    assert rk.score(X, quality, groups) > 0.9
    # the response of x5 increases, that of x40 decreases
    assert rk.coef_[0, -1] > rk.coef_[0, 0] and rk.coef_[1, -1] < rk.coef_[1, 0]


def test_same_random_state_same_model():
    X, y, _ = make_ar1_classification(400, 100, k_true=4, random_state=3)
    a = FSAClassifier(k=4, bins=4, random_state=5).fit(X, y)
    b = FSAClassifier(k=4, bins=4, random_state=5).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_out_of_core_estimator(tmp_path):
    import h5py

    X, y, true = make_ar1_classification(1500, 300, k_true=6, random_state=4)
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"] = X.astype(np.float32)
    with h5py.File(tmp_path / "d.h5", "r") as f:
        clf = FSAClassifier(k=6, loss="lorenz", max_memory=X.nbytes // 8).fit(f["X"], y)
        with pytest.raises(ValueError, match="y must be 1-D with X.shape"):
            FSAClassifier().fit(f["X"], y[:-1])
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    assert clf.n_features_in_ == 300


@pytest.mark.parametrize("params, match", [
    ({"k": 0}, "k must be an integer >= 1"),
    ({"k": 2.5}, "k must be an integer >= 1"),
    ({"n_iter": 0}, "n_iter must be an integer >= 1"),
    ({"mu": -1}, "mu must be a finite number >= 0"),
    ({"learning_rate": 0.0}, "learning_rate must be a finite number > 0"),
    ({"annealing_boost": 0.0}, "annealing_boost must be a finite number > 0"),
    ({"annealing_boost": np.inf}, "annealing_boost must be a finite number > 0"),
    ({"bins": 0}, "bins must be an integer >= 1"),
    ({"shrinkage": -1.0}, "shrinkage must be a finite number >= 0"),
    ({"smoothness": np.nan}, "smoothness must be a finite number >= 0"),
    ({"max_memory": 0}, "max_memory must be an integer >= 1"),
    ({"loss": "squared"}, "loss must be one of"),
    ({"prior": "l1"}, "prior must be one of"),
    ({"smoothness": 1.0}, "needs prior='second_order'"),
])
def test_classifier_parameter_errors(params, match):
    X, y, _ = make_ar1_classification(50, 20, k_true=1, random_state=0)
    with pytest.raises(ValueError, match=match):
        FSAClassifier(**params).fit(X, y)


def test_data_errors():
    X, y, _ = make_ar1_classification(50, 20, k_true=1, random_state=0)
    with pytest.raises(ValueError, match="Only binary classification is supported with piece"):
        FSAClassifier(bins=2).fit(X, np.arange(50) % 3)
    with pytest.raises(ValueError, match="exactly 2 classes, got 1"):
        FSAClassifier().fit(X, np.zeros(50))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FSAClassifier().fit(Xn, y)
    with pytest.raises(ValueError, match="groups must be 1-D"):
        FSARanker().fit(X, y, groups=np.zeros(10))
    with pytest.raises(ValueError, match="at least one group with two or more"):
        FSARanker().fit(X, y, groups=np.arange(50))
    with pytest.raises(ValueError, match="loss must be one of"):
        FSARegressor(loss="logistic").fit(X, y)
    clf = FSAClassifier(k=2, n_iter=20).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :5])


def test_out_of_core_validation_errors(tmp_path):
    import h5py

    from cvfs.base import check_random_state

    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["X3"] = np.zeros((4, 3, 2))
        f["X"] = np.zeros((4, 3))
    with h5py.File(tmp_path / "e.h5", "r") as f:
        with pytest.raises(ValueError, match="X must be 2-D, got shape"):
            FSARegressor().fit(f["X3"], np.zeros(4))
        with pytest.raises(ValueError, match="y contains NaN"):
            FSARegressor().fit(f["X"], np.array([0, 1, np.nan, 2]))
    with pytest.raises(TypeError, match="random_state must be None, an int or a numpy Gen"):
        check_random_state("seed")
    assert isinstance(check_random_state(np.random.RandomState(0)), np.random.Generator)


def test_synthetic_generator_errors():
    from cvfs.datasets.synthetic import true_features

    with pytest.raises(ValueError, match="need n_features >= 100"):
        true_features(10, 50)
