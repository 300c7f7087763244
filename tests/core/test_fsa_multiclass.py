import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

from cvfs import FSAClassifier
from cvfs.core.fsa_multiclass import (
    BinaryMargin,
    Multinomial,
    OneVsRest,
    fsa_multiclass_fit,
    get_multiclass_loss,
)
from cvfs.core.losses import Squared
from cvfs.core.priors import SecondOrder, Shrinkage
from cvfs.model_selection import FSAClassifierCV


def make_classes(n=600, m=200, n_classes=5, k_true=10, sep=1.0, random_state=0):
    """Gaussian features; the class means differ only on ``k_true`` columns."""
    rng = np.random.default_rng(random_state)
    true = np.sort(rng.choice(m, k_true, replace=False))
    means = sep * rng.standard_normal((n_classes, k_true))
    y = rng.integers(0, n_classes, n)
    X = rng.standard_normal((n, m))
    X[:, true] += means[y]
    return X, y, true


@pytest.mark.parametrize("loss", ["logistic", "lorenz", "svm"])
def test_shared_support_recovers_the_true_features(loss):
    X, y, true = make_classes(random_state=1)
    clf = FSAClassifier(k=10, loss=loss, random_state=0).fit(X, y)
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    assert clf.coef_.shape == (5, 10) and clf.intercept_.shape == (5,)
    assert clf.decision_function(X).shape == (600, 5)
    Xt, yt, _ = make_classes(n=2000, random_state=1)  # same design, new rows
    assert clf.score(Xt, yt) > 0.75
    assert clf.history_["n_kept"][-1] == 10


def test_classifier_api_with_string_labels():
    X, y, true = make_classes(n=400, m=60, n_classes=3, k_true=4, sep=2.0, random_state=2)
    labels = np.array(["cat", "dog", "owl"])[y]
    clf = FSAClassifier(k=4, n_iter=200).fit(X, labels)
    np.testing.assert_array_equal(clf.classes_, ["cat", "dog", "owl"])
    p = clf.predict_proba(X)
    assert p.shape == (400, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[p.argmax(axis=1)])
    np.testing.assert_array_equal(clf.predict(X),
                                  clf.classes_[clf.decision_function(X).argmax(axis=1)])
    assert clf.transform(X).shape == (400, 4)
    np.testing.assert_array_equal(clf.get_support(indices=True), true)
    assert clf.score(X, labels) > 0.8
    assert not hasattr(FSAClassifier(loss="svm", n_iter=50).fit(X, labels), "predict_proba")


def test_full_support_reaches_the_optimum_of_the_penalised_loss():
    """No annealing (schedule = M throughout): the iterates reach the minimiser that L-BFGS
    finds for mean softmax loss + s ||B||^2 on standardised columns."""
    X, y, _ = make_classes(n=300, m=6, n_classes=4, k_true=3, random_state=3)
    s, C, M = 0.02, 4, 6
    res = fsa_multiclass_fit(X, y, C, M, prior=Shrinkage(s), schedule=np.full(3000, M))
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)

    def objective(theta):
        B, b = theta[:M * C].reshape(M, C), theta[M * C:]
        logp = log_softmax(Xs @ B + b, axis=1)
        R = np.exp(logp)
        R[np.arange(y.size), y] -= 1.0
        R /= y.size
        val = -logp[np.arange(y.size), y].mean() + s * np.sum(B * B)
        return val, np.r_[(Xs.T @ R + 2 * s * B).ravel(), R.sum(axis=0)]

    opt = minimize(objective, np.zeros(M * C + C), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 5000})
    B_ref = opt.x[:M * C].reshape(M, C) / X.std(axis=0)[:, None]
    np.testing.assert_allclose(res.coef, B_ref, atol=1e-5)
    z_ref = X @ B_ref + opt.x[M * C:] - X.mean(axis=0) @ B_ref
    np.testing.assert_allclose(log_softmax(res.decision_function(X), axis=1),
                               log_softmax(z_ref, axis=1), atol=1e-5)
    assert res.history["loss"][-1] == pytest.approx(opt.fun, abs=1e-9)


@pytest.mark.parametrize("loss, n_classes", [
    (Multinomial(), 3), (OneVsRest("lorenz"), 3), (OneVsRest("svm"), 3),
    (OneVsRest("logistic"), 3), (BinaryMargin("lorenz"), 2), (BinaryMargin("logistic"), 2)])
def test_loss_gradients_match_finite_differences(loss, n_classes):
    rng = np.random.default_rng(4)
    S = loss.n_scores(n_classes)
    Z = 2.0 * rng.standard_normal((7, S))
    codes = rng.integers(0, n_classes, 7)
    w = rng.random(7)
    _, grad = loss.value_gradient(Z, codes, w)
    eps = 1e-6
    num = np.zeros_like(Z)
    for i in range(7):
        for c in range(S):
            dz = np.zeros_like(Z)
            dz[i, c] = eps
            num[i, c] = (loss.value_gradient(Z + dz, codes, w)[0]
                         - loss.value_gradient(Z - dz, codes, w)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, num, atol=1e-6)


def test_float32_matches_float64_and_fits_are_deterministic():
    X, y, true = make_classes(n=400, m=100, random_state=5)
    a = fsa_multiclass_fit(X, y, 5, 10)
    b = fsa_multiclass_fit(X.astype(np.float32), y, 5, 10)
    c = fsa_multiclass_fit(X, y, 5, 10)
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(a.coef, c.coef)
    assert a.history["lr"].shape == (500,) and np.all(np.diff(a.history["n_kept"]) <= 0)


def test_integer_weights_equal_repeated_rows():
    X, y, _ = make_classes(n=200, m=40, n_classes=3, k_true=5, random_state=6)
    wt = np.random.default_rng(0).integers(0, 4, 200)
    wt[:3] = 1
    a = fsa_multiclass_fit(X, y, 3, 5, sample_weight=wt, n_iter=200)
    rep = np.repeat(np.arange(200), wt)
    b = fsa_multiclass_fit(X[rep], y[rep], 3, 5, n_iter=200)
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.intercept, b.intercept, rtol=1e-6, atol=1e-9)


def test_digits_accuracy():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    clf = FSAClassifier(k=20, random_state=0).fit(Xtr, ytr)
    assert clf.get_support(indices=True).size == 20 and clf.coef_.shape == (10, 20)
    assert clf.score(Xte, yte) > 0.93


def test_cv_chooses_k_for_multiclass():
    X, y, true = make_classes(n=400, m=60, n_classes=4, k_true=5, sep=1.5, random_state=7)
    cv = FSAClassifierCV(ks=(2, 5, 10), cv=3, n_iter=200, random_state=0).fit(X, y)
    assert cv.k_ in (5, 10) and set(true) <= set(cv.get_support(indices=True))
    assert cv.predict_proba(X).shape == (400, 4)
    assert cv.decision_function(X).shape == (400, 4)


def test_multiclass_errors(tmp_path):
    import h5py

    X, y, _ = make_classes(n=60, m=10, n_classes=3, k_true=2, random_state=8)
    with pytest.raises(ValueError, match="Only binary classification is supported with piece"):
        FSAClassifier(bins=3).fit(X, y)
    with h5py.File(tmp_path / "m.h5", "w") as f:
        f["X"] = X
    with h5py.File(tmp_path / "m.h5", "r") as f:
        with pytest.raises(ValueError, match="multiclass FSA needs X in memory"):
            FSAClassifier().fit(f["X"], y)
    with pytest.raises(ValueError, match="Unknown label type"):
        FSAClassifier().fit(X, np.linspace(0, 1, 60))
    with pytest.raises(ValueError, match=r"codes must be of shape \(60,\) with values in"):
        fsa_multiclass_fit(X, y + 1, 3, 2)
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        fsa_multiclass_fit(X, y * 0, 1, 2)
    with pytest.raises(ValueError, match="sample_weight must be finite, >= 0"):
        fsa_multiclass_fit(X, y, 3, 2, sample_weight=-np.ones(60))
    with pytest.raises(ValueError, match="X must be 2-D with at least one row"):
        fsa_multiclass_fit(np.zeros((0, 3)), np.zeros(0, int), 3, 2)
    Xn = X.copy()
    Xn[4, 2] = np.inf
    with pytest.raises(ValueError, match=r"X contains NaN or infinity \(first in row 4"):
        fsa_multiclass_fit(Xn, y, 3, 2)
    with pytest.raises(ValueError, match="smoothness must be 0"):
        fsa_multiclass_fit(X, y, 3, 2, prior=SecondOrder(1e-3, 1.0))
    with pytest.raises(ValueError, match="annealing_boost must be a positive number"):
        fsa_multiclass_fit(X, y, 3, 2, annealing_boost=0.0)
    with pytest.raises(ValueError, match=r"loss must be one of \[.logistic., .lorenz."):
        get_multiclass_loss("squared")
    with pytest.raises(ValueError, match=r"loss must be one of \[.logistic."):
        OneVsRest("squared")
    with pytest.raises(ValueError, match="a classifier needs a margin loss"):
        OneVsRest(Squared())
    with pytest.raises(ValueError, match="a binary loss needs n_classes=2, got 3"):
        fsa_multiclass_fit(X, y, 3, 2, loss=BinaryMargin("svm"))
    with pytest.raises(ValueError, match="schedule must end at k=2"):
        fsa_multiclass_fit(X, y, 3, 2, schedule=[5, 3])


def test_class_weight_equals_repeated_rows_and_balanced():
    X, y, _ = make_classes(n=300, m=40, n_classes=3, k_true=5, random_state=9)
    cw = {0: 2, 1: 1, 2: 3}
    a = FSAClassifier(k=5, n_iter=200, class_weight=cw).fit(X, y)
    rep = np.repeat(np.arange(300), [cw[c] for c in y])
    b = FSAClassifier(k=5, n_iter=200).fit(X[rep], y[rep])
    np.testing.assert_array_equal(a.get_support(indices=True), b.get_support(indices=True))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)
    keep = np.r_[np.flatnonzero(y == 0)[:20], np.flatnonzero(y > 0)]  # class 0 rare
    counts = np.bincount(y[keep])
    bal = FSAClassifier(k=5, n_iter=200, class_weight="balanced").fit(X[keep], y[keep])
    manual = {c: keep.size / (3 * counts[c]) for c in range(3)}
    ref = FSAClassifier(k=5, n_iter=200, class_weight=manual).fit(X[keep], y[keep])
    np.testing.assert_allclose(bal.coef_, ref.coef_)
    plain = FSAClassifier(k=5, n_iter=200).fit(X[keep], y[keep])
    assert np.mean(bal.predict(X) == 0) > np.mean(plain.predict(X) == 0)


def test_binary_class_weight_uses_one_score_column():
    X, y, true = make_classes(n=400, m=50, n_classes=2, k_true=3, sep=1.5, random_state=10)
    plain = FSAClassifier(k=3, n_iter=200).fit(X, y)
    even = FSAClassifier(k=3, n_iter=200, class_weight={0: 1, 1: 1}).fit(X, y)
    assert even.coef_.shape == (3,) and isinstance(even.intercept_, float)
    np.testing.assert_array_equal(even.get_support(indices=True), plain.get_support(indices=True))
    assert np.mean(even.predict(X) == plain.predict(X)) > 0.97
    heavy = FSAClassifier(k=3, n_iter=200, class_weight={0: 100, 1: 1}).fit(X, y)
    assert np.mean(heavy.predict(X) == 0) > 0.8 > np.mean(plain.predict(X) == 0)
    assert heavy.predict_proba(X).shape == (400, 2)
    pl = FSAClassifier(k=3, n_iter=200, bins=3, class_weight="balanced").fit(X, y)
    assert pl.coef_.shape == (3, 4)


def test_sparse_input_is_densified_within_max_memory():
    import scipy.sparse as sp

    from cvfs import FSAClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 40)) * (rng.random((300, 40)) < 0.3)
    y = np.argmax(X[:, :3], axis=1)
    dense = FSAClassifier(k=3).fit(X, y)
    sparse = FSAClassifier(k=3).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(sparse.get_support(indices=True), dense.get_support(indices=True))
    np.testing.assert_allclose(sparse.coef_, dense.coef_)
    with pytest.raises(ValueError, match="makes a sparse X dense"):
        FSAClassifier(k=3, max_memory=1000).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.decision_function(sp.csc_matrix(X)),
                               dense.decision_function(X))
