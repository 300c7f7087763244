"""The estimators take loss objects (names are shortcuts for them) and read predict_proba,
the multiclass form and the role from the object."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

from cvfs import FGMClassifier, FSAClassifier, FSARegressor
from cvfs.core.losses import HuberSVM, Logistic, Lorenz, Squared, SquaredHinge
from cvfs.model_selection import FSAClassifierCV


@pytest.fixture(scope="module")
def data():
    return make_classification(n_samples=200, n_features=30, n_informative=3, n_redundant=0,
                               n_clusters_per_class=1, random_state=0)


def test_an_object_fits_as_its_name(data):
    X, y = data
    a = FSAClassifier(k=3, loss="svm", n_iter=60).fit(X, y)
    b = FSAClassifier(k=3, loss=HuberSVM(), n_iter=60).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = clone(FSAClassifier(k=3, loss=HuberSVM(0.25)))
    assert c.loss.h == 0.25


def test_predict_proba_only_for_probabilistic_losses(data):
    X, y = data
    assert hasattr(FSAClassifier(loss=Logistic()), "predict_proba")
    assert not hasattr(FSAClassifier(loss=Lorenz()), "predict_proba")
    assert not hasattr(FSAClassifier(loss="svm"), "predict_proba")
    assert not hasattr(FSAClassifierCV(loss="lorenz"), "predict_proba")
    clf = FSAClassifier(k=3, loss=Logistic(), n_iter=60).fit(X, y)
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p[:, 1], 1.0 / (1.0 + np.exp(-clf.decision_function(X))))


def test_roles_are_checked(data):
    X, y = data
    with pytest.raises(ValueError, match="a classifier needs a margin loss"):
        FSAClassifier(loss=Squared()).fit(X, y)
    with pytest.raises(ValueError, match=r"loss must be one of \['squared'\]"):
        FSARegressor(loss="lorenz").fit(X, y.astype(float))
    with pytest.raises(ValueError, match="a regressor needs"):
        FSARegressor(loss=Lorenz()).fit(X, y.astype(float))


def test_squared_hinge_in_fsa_multiclass_and_fgm(data):
    X, y = data
    clf = FSAClassifier(k=3, loss="squared_hinge", n_iter=60).fit(X, y)
    assert clf.score(X, y) > 0.7  # logistic: 0.715, lorenz 0.74
    X3, y3 = make_classification(n_samples=240, n_features=20, n_informative=4, n_redundant=0,
                                 n_classes=3, n_clusters_per_class=1, random_state=1)
    m = FSAClassifier(k=4, loss=SquaredHinge(), n_iter=60).fit(X3, y3)
    assert m.coef_.shape == (3, 4) and m.score(X3, y3) > 0.7
    # FGM's default loss is the shared SquaredHinge: a name or the object give one fit
    a = FGMClassifier(B=3, max_iter=5).fit(X, y)
    b = FGMClassifier(B=3, max_iter=5, loss=SquaredHinge()).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not hasattr(a, "predict_proba")
    assert hasattr(FGMClassifier(loss="logistic"), "predict_proba")
    with pytest.raises(ValueError, match="a classifier needs a margin loss"):
        FGMClassifier(loss=Squared()).fit(X, y)
