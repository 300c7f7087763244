"""Batched SBL coding over the dictionary's Gram matrix against the per-sample path."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from cvfs import SBLClassifier
from cvfs.core._lasso_kernels import gram_rows_dot
from cvfs.core.sbl import weighted_lasso
from cvfs.core.sbl_batch import (
    GramDictionary,
    batch_gap_safe_keep,
    gram_weighted_lasso,
)
from cvfs.core.sbl_classify import class_scores, sbl_codes
from tests import naive


def _dictionary(n_atoms=300, seed=0):
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = rng.choice(1000, n_atoms, replace=False)
    Phi = X[idx].T / np.linalg.norm(X[idx], axis=1)
    return Phi, y[idx], X[1000:1060], y[1000:1060]


def test_gram_dictionary_is_the_gram_matrix():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 2100))  # more than one 1024 block
    gd = GramDictionary(A)
    np.testing.assert_allclose(gd.G, A.T @ A, atol=1e-10)
    assert gd.G.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(gd.gram_columns([3, 7]), A.T @ A[:, [3, 7]], atol=1e-10)


def test_gram_rows_dot_matches_naive():
    rng = np.random.default_rng(2)
    G = rng.standard_normal((40, 40))
    rows = np.array([3, 17, 5], dtype=np.int64)
    w = rng.standard_normal(3)
    np.testing.assert_allclose(gram_rows_dot(G, rows, w), naive.gram_rows_dot(G, rows, w))
    assert np.all(gram_rows_dot(G, rows[:0], w[:0]) == 0.0)


def test_gram_lasso_matches_weighted_lasso():
    Phi, _, Xte, _ = _dictionary()
    y = Xte[0] / np.linalg.norm(Xte[0])
    c = Phi.T @ y
    pen = 0.2 * np.max(np.abs(c)) * (1.0 + np.arange(c.size) % 3)
    ref = weighted_lasso(Phi, y, pen, tol=1e-10)
    th = np.zeros(c.size)
    gap = gram_weighted_lasso(GramDictionary(Phi).G, c, 1.0, pen, th, tol=1e-10)
    assert gap <= 1e-10 * 0.5
    np.testing.assert_allclose(th, ref.coef, atol=1e-5)


def test_batch_gap_safe_keep_is_safe():
    Phi, _, Xte, _ = _dictionary()
    U = Xte / np.linalg.norm(Xte, axis=1, keepdims=True)
    C = Phi.T @ U.T
    lam_max = np.max(np.abs(C), axis=0)
    keep = batch_gap_safe_keep(C, np.ones(Phi.shape[1]), 0.8 * lam_max)
    assert (~keep).mean() > 0.3  # about half the atoms go at 0.8 lambda_max
    for i in range(5):
        sol = weighted_lasso(Phi, U[i], np.full(Phi.shape[1], 0.8 * lam_max[i]), tol=1e-12)
        assert np.all(keep[np.flatnonzero(sol.coef), i])


@pytest.mark.parametrize("rule", ["abs", "residual"])
def test_batched_codes_give_the_per_sample_predictions(rule):
    Phi, labels, Xte, _ = _dictionary()
    gd = GramDictionary(Phi)
    kw = dict(max_iter=3, tol=1e-4, lasso_tol=1e-8)
    codes, lams = sbl_codes(Phi, Xte, 0.1, **kw)
    codes_b, lams_b = sbl_codes(Phi, Xte, 0.1, gram=gd, **kw)
    np.testing.assert_allclose(lams_b, lams)
    for (i, v), (j, w) in zip(codes, codes_b, strict=True):
        a, b = np.zeros(Phi.shape[1]), np.zeros(Phi.shape[1])
        a[i], b[j] = v, w
        np.testing.assert_allclose(b, a, atol=1e-4 * np.abs(a).max())
    s = class_scores(Phi, Xte, codes, lams, labels, 10, rule)[0]
    s_b = class_scores(Phi, Xte, codes_b, lams_b, labels, 10, rule)[0]
    np.testing.assert_array_equal(s_b.argmax(axis=1), s.argmax(axis=1))


def test_classifier_gram_path_equals_the_process_path():
    X, y = load_digits(return_X_y=True)
    clf = SBLClassifier(lam=0.1, n_atoms=400, random_state=0).fit(X[:1000], y[:1000])
    fast = clf.predict(X[1000:1080])
    slow = clf.set_params(n_jobs=2).predict(X[1000:1080])
    np.testing.assert_array_equal(fast, slow)
    assert np.mean(fast == y[1000:1080]) > 0.9
    import pickle

    assert "_gram_dictionary" not in pickle.loads(pickle.dumps(clf)).__dict__
