"""FGM (cvfs.core.fgm, FGMClassifier): worst-case analysis, Moreau projection, APG subproblem,
sparse input, support recovery, input validation and the scikit-learn checks."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import FGMClassifier
from cvfs.core.fgm import _loss_value, apg_l1sq, moreau_l1sq, worst_case
from cvfs.core.losses import get_loss


def _problem(n=80, m=400, k=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    w = np.zeros(m)
    w[:k] = rng.choice([-1.0, 1.0], k) * rng.uniform(1.0, 2.0, k)
    y = np.where(X @ w + 0.1 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("B", [1, 3, 7])
def test_worst_case_picks_b_largest_violations(B):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((15, 30))
    r = rng.standard_normal(15)
    scores = np.array([(X[:, j] @ r) ** 2 for j in range(30)])
    chosen, top = worst_case(X, r, B)
    np.testing.assert_array_equal(chosen, np.sort(np.argsort(-scores)[:B]))
    assert top == pytest.approx(np.sort(scores)[-B:].sum())
    groups = np.arange(30) % 6
    gscore = np.array([scores[groups == g].sum() for g in range(6)])
    chosen, top = worst_case(sp.csc_matrix(X), r, 2, groups)
    best = np.argsort(-gscore)[:2]
    np.testing.assert_array_equal(chosen, np.flatnonzero(np.isin(groups, best)))
    assert top == pytest.approx(gscore[best].sum())


def test_moreau_projection_matches_scipy():
    rng = np.random.default_rng(2)
    for s in (0.05, 0.5, 3.0):
        u = rng.uniform(0, 2, 6)
        ref = minimize(lambda o, u=u, s=s: 0.5 * np.sum((o - u) ** 2) + 0.5 * s * o.sum() ** 2,
                       np.zeros(6), jac=lambda o, u=u, s=s: o - u + s * o.sum(),
                       bounds=[(0, None)] * 6,
                       method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
        np.testing.assert_allclose(moreau_l1sq(u, s), ref.x, atol=1e-6)


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_apg_matches_scipy_reference(loss):
    rng = np.random.default_rng(3)
    n, C = 25, 2.0
    Xc = rng.standard_normal((n, 5))
    y = np.where(Xc[:, 0] - Xc[:, 3] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    starts = np.array([0, 2])  # blocks {0, 1} and {2, 3, 4}

    def F(z):
        w, b = z[:5], z[5]
        reg = 0.5 * (np.linalg.norm(w[:2]) + np.linalg.norm(w[2:])) ** 2
        return reg + _loss_value(get_loss(loss), Xc @ w + b, y, C)

    w, b, _, _, f_apg = apg_l1sq(Xc, starts, y, C, loss, np.zeros(5), 0.0, 0.1 * n * C,
                                 max_iter=5000, tol=1e-13)
    assert np.all(w != 0)  # both blocks active: F is smooth at the optimum
    ref = minimize(F, np.r_[w, b] + 0.05, method="BFGS", options={"gtol": 1e-10})
    assert f_apg == pytest.approx(F(np.r_[w, b]))
    assert f_apg <= ref.fun + 1e-7
    np.testing.assert_allclose(np.r_[w, b], ref.x, atol=1e-4)


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_equals_dense(loss, fmt):
    X, y = _problem(seed=4)
    X[np.abs(X) < 1.0] = 0.0
    X[:3] = 0.0  # samples without any non-zero feature are valid input
    dense = FGMClassifier(B=4, C=1.0, loss=loss, max_iter=6).fit(X, y)
    sparse = FGMClassifier(B=4, C=1.0, loss=loss, max_iter=6).fit(sp.csr_matrix(X).asformat(fmt), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-10)
    assert sparse.intercept_ == pytest.approx(dense.intercept_, abs=1e-10)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(X)),
                               dense.decision_function(X), atol=1e-9)


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_recovers_true_features_m_much_larger_than_n(loss):
    X, y = _problem(n=200, m=3000, k=5, seed=5)
    clf = FGMClassifier(B=5, C=0.2, loss=loss, max_iter=10).fit(X, y)
    top = np.argsort(-np.abs(clf.coef_))[:5]
    np.testing.assert_array_equal(np.sort(top), np.arange(5))
    assert clf.support_[:5].all()
    assert clf.support_.sum() <= 10 * 5
    assert clf.score(X, y) > 0.95
    assert np.all((clf.feature_scaling_ >= 0) & (clf.feature_scaling_ <= 1 + 1e-12))
    objective = np.array(clf.history_["objective"])
    assert np.all(np.diff(objective) <= 1e-8 * objective[:-1])  # cutting planes only add


def test_group_variant_selects_true_groups():
    rng = np.random.default_rng(6)
    n, m, gsize = 120, 600, 5
    X = rng.standard_normal((n, m))
    groups = np.arange(m) // gsize
    w = np.zeros(m)
    w[groups == 3] = 1.0
    w[groups == 50] = -1.0
    y = np.where(X @ w > 0, 1.0, -1.0)
    clf = FGMClassifier(B=2, C=0.1, groups=groups, max_iter=3).fit(X, y)
    np.testing.assert_array_equal(clf.blocks_[0], np.flatnonzero((groups == 3) | (groups == 50)))
    assert clf.support_[groups == 3].all() and clf.support_[groups == 50].all()


def test_predict_proba_only_for_logistic():
    X, y = _problem(seed=7)
    p = FGMClassifier(B=3, loss="logistic", max_iter=3).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(p.sum(1), 1.0)
    assert not hasattr(FGMClassifier(loss="squared_hinge"), "predict_proba")


def test_bad_input_errors():
    X, y = _problem(n=20, m=10, seed=8)
    Xs = sp.csr_matrix(X)
    Xs.data[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FGMClassifier(B=2).fit(Xs, y)
    Xs.data[3] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        FGMClassifier(B=2).fit(Xs, y)
    with pytest.raises(ValueError, match="0 sample"):
        FGMClassifier(B=2).fit(sp.csr_matrix((0, 10)), np.zeros(0))
    with pytest.raises(ValueError, match="0 feature"):
        FGMClassifier(B=1).fit(np.zeros((20, 0)), y)
    with pytest.raises(ValueError, match=r"B must be <= the number of features \(10\)"):
        FGMClassifier(B=11).fit(X, y)
    with pytest.raises(ValueError, match=r"B must be <= the number of groups \(2\)"):
        FGMClassifier(B=3, groups=np.arange(10) // 5).fit(X, y)
    with pytest.raises(ValueError, match="groups must have shape"):
        FGMClassifier(B=1, groups=np.arange(9)).fit(X, y)
    with pytest.raises(ValueError, match="loss must be one of"):
        FGMClassifier(loss="hinge").fit(X, y)
    with pytest.raises(ValueError, match="C must be"):
        FGMClassifier(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        FGMClassifier(B=2).fit(X, np.arange(20) % 3)


@parametrize_with_checks([FGMClassifier(B=1, max_iter=5),
                          FGMClassifier(B=1, loss="logistic", max_iter=5)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
