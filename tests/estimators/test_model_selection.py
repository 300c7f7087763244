import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import FSAClassifier, FSAClassifierCV, FSARegressor, FSARegressorCV
from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression
from cvfs.model_selection import staircase

KS = (4, 6, 8, 9, 10, 11, 12, 15, 20, 30)


# about 2.5 min on 2 cores: with the slow tests (the base estimators' checks run by default)
@pytest.mark.slow
@parametrize_with_checks([FSAClassifierCV(ks=(1, 2), cv=2, n_iter=30),
                          FSARegressorCV(ks=(1, 2), cv=2, n_iter=30)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_classifier_cv_picks_the_true_k_on_table_ii_data():
    """Table II design (AR(1), rho 0.9, N = 1000, M = 1000, 10 true features)."""
    X, y, true = make_ar1_classification(1000, 1000, 10, random_state=0)
    cv = FSAClassifierCV(ks=KS, cv=5, scoring="roc_auc", random_state=0).fit(X, y)
    assert abs(cv.k_ - 10) <= 2
    assert cv.k_ == 10 and np.array_equal(np.sort(cv.get_support(indices=True)), true)
    res = cv.cv_results_
    assert list(res["param_k"]) == sorted(KS, reverse=True)
    assert res["rank_test_score"][list(res["param_k"]).index(cv.k_)] == 1
    assert cv.score(X, y) > 0.95 and cv.predict_proba(X).shape == (1000, 2)


def test_staircase_scores_match_grid_search():
    """One staircase per fold gives the validation scores of independent fits per k."""
    X, y, _ = make_ar1_classification(1000, 1000, 10, random_state=0)
    folds = StratifiedKFold(5)
    cv = FSAClassifierCV(ks=KS, cv=folds, scoring="neg_log_loss", random_state=0).fit(X, y)
    gs = GridSearchCV(FSAClassifier(random_state=0), {"k": list(KS)}, cv=folds,
                      scoring="neg_log_loss").fit(X, y)
    grid = dict(zip(gs.cv_results_["param_k"], gs.cv_results_["mean_test_score"], strict=True))
    ours = dict(zip(cv.cv_results_["param_k"], cv.cv_results_["mean_test_score"], strict=True))
    for k in KS:
        assert ours[k] == pytest.approx(grid[k], abs=0.03), k
    assert abs(cv.k_ - gs.best_params_["k"]) <= 1


def test_staircase_supports_are_nested():
    X, y, _ = make_ar1_classification(400, 200, 5, random_state=1)
    fits = staircase(FSAClassifier(random_state=0), X, y, (40, 20, 10, 5))
    supports = [set(cols[est.get_support(indices=True)]) for _, est, cols in fits]
    assert [len(s) for s in supports] == [40, 20, 10, 5]
    assert all(b <= a for a, b in zip(supports, supports[1:]))


def test_regressor_cv():
    X, y, true = make_ar1_regression(600, 300, 5, random_state=2)
    cv = FSARegressorCV(ks=(2, 3, 5, 8, 12), cv=KFold(4), random_state=0).fit(X, y)
    assert cv.k_ in (5, 8) and set(true) <= set(cv.get_support(indices=True))
    assert isinstance(cv.best_estimator_, FSARegressor) and cv.score(X, y) > 0.8


@pytest.mark.parametrize("ks, msg", [((), "non-empty sequence of ints"),
                                     ((2.5, 3), "non-empty sequence of ints"),
                                     ((0, 3), ">= 1"),
                                     ((60, 70), "exceeds n_features=50")])
def test_bad_grid(ks, msg):
    X, y, _ = make_ar1_classification(100, 50, 3, random_state=0)
    with pytest.raises(ValueError, match=msg):
        FSAClassifierCV(ks=ks, cv=3).fit(X, y)
