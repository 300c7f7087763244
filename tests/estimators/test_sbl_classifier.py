"""SBLClassifier (SBL paper §4), SBLRegressor's learned noise / intercept / predictive std, and
the MNIST loader."""

import functools
import warnings

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import SBLClassifier, SBLRegressor
from cvfs.core.sbl import sbl_fit
from cvfs.core.sbl_classify import balanced_subsample
from cvfs.datasets import load_mnist


@functools.lru_cache(maxsize=1)
def _mnist():
    try:
        return load_mnist("train", flatten=True) + load_mnist("test", flatten=True)
    except FileNotFoundError:
        return None


def _mnist_subset(n_train=500, n_test=60, seed=0):
    """A small MNIST subset, or None when the data home has no MNIST."""
    if _mnist() is None:
        return None
    Xtr, ytr, Xte, yte = _mnist()
    rng = np.random.default_rng(seed)
    i = rng.choice(Xtr.shape[0], n_train, replace=False)
    j = rng.choice(Xte.shape[0], n_test, replace=False)
    return Xtr[i], ytr[i], Xte[j], yte[j]


def _synthetic_classes(seed=0, n_classes=4, per_class=40, dim=60, n_test=40):
    """Samples near one random subspace per class (the model behind SRC)."""
    rng = np.random.default_rng(seed)
    bases = [np.linalg.qr(rng.standard_normal((dim, 3)))[0] for _ in range(n_classes)]

    def draw(n):
        y = rng.integers(n_classes, size=n)
        X = np.array([bases[k] @ rng.standard_normal(3) for k in y])
        return X + 0.05 * rng.standard_normal(X.shape), y

    Xtr, ytr = draw(n_classes * per_class)
    Xte, yte = draw(n_test)
    return Xtr, ytr, Xte, yte


def test_load_mnist_shapes_and_range():
    try:
        X, y = load_mnist("test")
    except FileNotFoundError:
        pytest.skip("MNIST not in the data home")
    assert X.shape == (10_000, 28, 28) and X.dtype == np.float32
    assert 0.0 <= X.min() and X.max() == 1.0
    assert y.dtype == np.int64 and np.bincount(y).tolist()[:2] == [980, 1135]
    with pytest.raises(ValueError, match="subset must be 'train' or 'test'; got 'val'"):
        load_mnist("val")


@pytest.mark.parametrize("rule", ["wtht", "dome", "sphere", "gap"])
def test_screening_is_safe_on_mnist_atoms(rule):
    data = _mnist_subset(n_train=400, n_test=3, seed=1)
    if data is None:
        Xtr, _, Xte, _ = _synthetic_classes(1, n_test=3)
    else:
        Xtr, _, Xte, _ = data
    Phi = (Xtr / np.linalg.norm(Xtr, axis=1, keepdims=True)).T.astype(np.float64)
    screened = 0.0
    for y in Xte.astype(np.float64):
        y = y / np.linalg.norm(y)
        lam = (0.5 * np.abs(Phi.T @ y).max()) ** 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = sbl_fit(Phi, y, lam, screening=None, max_iter=4, lasso_tol=1e-8)
            got = sbl_fit(Phi, y, lam, screening=rule, max_iter=4, lasso_tol=1e-8)
        assert np.max(np.abs(got.coef - ref.coef)) <= 1e-6
        assert max(got.gaps) <= 1e-8
        screened = max(screened, max(got.screening))
    if rule != "sphere":  # the sphere alone is too loose to remove atoms here
        assert screened > 0.2


def test_classifier_beats_knn_on_the_same_atoms():
    data = _mnist_subset()
    if data is None:
        pytest.skip("MNIST not in the data home")
    Xtr, ytr, Xte, yte = data
    clf = SBLClassifier(lam=0.1, n_atoms=400, random_state=0).fit(Xtr, ytr)
    assert clf.dictionary_.shape == (784, 400)
    np.testing.assert_allclose(np.linalg.norm(clf.dictionary_, axis=0), 1.0)
    assert np.bincount(clf.atom_labels_).min() == 40  # class-balanced: 40 per digit
    acc = clf.score(Xte, yte)
    atoms = clf.atom_index_
    knn = max(KNeighborsClassifier(k).fit(Xtr[atoms], ytr[atoms]).score(Xte, yte)
              for k in (1, 3, 5))
    assert acc >= knn and acc >= 0.85
    res = clf.set_params(rule="residual").score(Xte, yte)
    assert res >= 0.8


@pytest.mark.parametrize("rule", ["abs", "residual"])
def test_classifier_scores_on_subspaces(rule):
    Xtr, ytr, Xte, yte = _synthetic_classes(2)
    clf = SBLClassifier(lam=0.1, rule=rule, n_atoms=None).fit(Xtr, ytr + 10)
    P = clf.predict_proba(Xte)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    pred = clf.predict(Xte)
    np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], pred)
    np.testing.assert_array_equal(clf.classes_[clf.decision_function(Xte).argmax(axis=1)], pred)
    assert np.mean(pred == yte + 10) >= 0.95
    if rule == "abs":  # eq. (61): prob_k = ABS_k / ||ABS||_2
        np.testing.assert_allclose(np.linalg.norm(clf.decision_function(Xte), axis=1), 1.0)
    # lam >= 1 codes nothing: uniform probabilities
    np.testing.assert_allclose(clf.set_params(lam=1.5).predict_proba(Xte[:3]), 0.25)


def test_classifier_batches_agree():
    Xtr, ytr, Xte, _ = _synthetic_classes(3, n_test=8)
    clf = SBLClassifier(lam=0.2, n_atoms=100, random_state=1).fit(Xtr, ytr)
    whole = clf.predict_proba(Xte)
    np.testing.assert_allclose(np.vstack([clf.predict_proba(Xte[i:i + 1]) for i in range(8)]),
                               whole, atol=1e-12)
    np.testing.assert_allclose(clf.set_params(n_jobs=2).predict_proba(Xte), whole, atol=1e-12)


def test_balanced_subsample_water_fills():
    labels = np.repeat([0, 1, 2], [5, 100, 100])
    idx = balanced_subsample(labels, 60, np.random.default_rng(0))
    assert idx.size == 60 and np.unique(idx).size == 60
    assert np.bincount(labels[idx]).tolist() in ([5, 28, 27], [5, 27, 28])
    np.testing.assert_array_equal(balanced_subsample(labels, None, None), np.arange(205))


@pytest.mark.parametrize("kw, msg", [
    ({"lam": 0.0}, r"lam must be a positive float \(lambda / lambda_max\); got 0.0"),
    ({"lam": np.nan}, "lam must be a positive float"),
    ({"screening": "ball"}, "screening must be one of"),
    ({"n_atoms": 0}, "n_atoms must be an integer >= 1, got 0"),
    ({"rule": "max"}, "rule must be 'abs' or 'residual'; got 'max'"),
    ({"max_reweight": 0}, "max_reweight must be an integer >= 1, got 0"),
    ({"lasso_tol": -1.0}, "lasso_tol must be a positive float; got -1.0"),
    ({"n_jobs": 0}, "n_jobs must be None or a nonzero int; got 0"),
])
def test_classifier_parameter_errors(kw, msg):
    Xtr, ytr, _, _ = _synthetic_classes(4)
    with pytest.raises(ValueError, match=msg):
        SBLClassifier(**kw).fit(Xtr, ytr)


def test_classifier_input_errors():
    Xtr, ytr, Xte, _ = _synthetic_classes(5)
    bad = Xtr.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SBLClassifier().fit(bad, ytr)
    with pytest.raises(ValueError, match="at least 2 classes; got 1 class"):
        SBLClassifier().fit(Xtr, np.zeros(len(Xtr)))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        SBLClassifier().fit(Xtr, ytr[:-1])
    with pytest.raises(ValueError, match="only all-zero samples"):
        SBLClassifier().fit(np.zeros_like(Xtr), ytr)
    with pytest.raises(ValueError, match="Unknown label type"):
        SBLClassifier().fit(Xtr, ytr + 0.5)
    clf = SBLClassifier().fit(Xtr, ytr)
    with pytest.raises(ValueError, match="features"):
        clf.predict(Xte[:, :10])
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(np.full_like(Xte[:2], np.nan))


def test_regressor_learns_noise_variance():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((400, 60))
    coef = np.zeros(60)
    coef[[3, 10, 22, 41, 55]] = [2.0, -1.5, 1.0, 3.0, -2.5]
    for sigma in (0.1, 0.5):
        y = X @ coef + sigma * rng.standard_normal(400)
        m = SBLRegressor(lam="auto", max_iter=50).fit(X, y)
        assert abs(m.noise_variance_ / sigma**2 - 1.0) <= 0.2
        assert set(np.flatnonzero(np.abs(m.coef_) > 0.1)) == {3, 10, 22, 41, 55}


def test_regressor_intercept():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((200, 30)) + 5.0
    y = 1.5 * X[:, 4] - 2.0 * X[:, 9] + 7.0 + 0.01 * rng.standard_normal(200)
    m = SBLRegressor(lam="auto", fit_intercept=True).fit(X, y)
    assert abs(m.intercept_ - 7.0) < 0.1
    np.testing.assert_allclose(m.coef_[[4, 9]], [1.5, -2.0], atol=0.01)
    assert SBLRegressor().fit(X, y).intercept_ == 0.0  # the dictionary model by default


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_return_std_matches_dense_posterior(fit_intercept):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((40, 25))
    y = X[:, 2] - 0.5 * X[:, 7] + 0.3 * X[:, 11] + 0.1 * rng.standard_normal(40) + 2.0
    m = SBLRegressor(lam=0.01, fit_intercept=fit_intercept).fit(X, y)
    Xn = rng.standard_normal((6, 25))
    mean, std = m.predict(Xn, return_std=True)
    # eq. (9) with every atom: Sigma = Gamma - Gamma Phi^T (lam I + Phi Gamma Phi^T)^-1 Phi Gamma
    off = X.mean(axis=0) if fit_intercept else np.zeros(25)
    Phi = X - off
    G = np.diag(m.gamma_)
    Sy = m.noise_variance_ * np.eye(40) + Phi @ G @ Phi.T
    Sigma = G - G @ Phi.T @ np.linalg.solve(Sy, Phi @ G)
    Z = Xn - off
    want = np.sqrt(np.einsum("ij,jk,ik->i", Z, Sigma, Z) + m.noise_variance_)
    np.testing.assert_allclose(std, want, rtol=1e-8)
    np.testing.assert_allclose(mean, m.predict(Xn))
    mu = G @ Phi.T @ np.linalg.solve(Sy, y - (y.mean() if fit_intercept else 0.0))
    np.testing.assert_allclose(m.coef_, mu, atol=1e-8)
    assert m.active_.size == np.count_nonzero(m.gamma_) >= 3


def test_regressor_auto_parameter_error():
    with pytest.raises(ValueError, match="lam must be a positive float or 'auto'; got 'Auto'"):
        SBLRegressor(lam="Auto").fit(np.eye(3), np.ones(3))


# near-collinear atoms (the checks shift data by large offsets) make tight lasso gaps slow;
# the checks test the API, not the accuracy of the codes
@parametrize_with_checks([SBLClassifier(max_reweight=1, lasso_tol=1e-4),
                          SBLRegressor(lam="auto", fit_intercept=True)])
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        check(estimator)


def test_model_file_roundtrip(tmp_path):
    from cvfs.io import load_estimator, save_estimator

    Xtr, ytr, Xte, _ = _synthetic_classes(6, n_test=10)
    clf = SBLClassifier(lam=0.2, n_atoms=60, random_state=0).fit(Xtr, ytr)
    reg = SBLRegressor(lam="auto", fit_intercept=True).fit(Xtr, Xtr[:, 0] + 0.1 * ytr)
    for est in (clf, reg):
        save_estimator(tmp_path / "m.h5", est)
        back, _ = load_estimator(tmp_path / "m.h5", kind=type(est).__name__)
        if est is clf:
            np.testing.assert_array_equal(back.predict_proba(Xte), clf.predict_proba(Xte))
        else:
            np.testing.assert_array_equal(back.predict(Xte, return_std=True)[1],
                                          reg.predict(Xte, return_std=True)[1])
