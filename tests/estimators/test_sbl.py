"""Weighted lasso kernels and solver, the SBL loop and SBLRegressor."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import Lasso
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import SBLRegressor
from cvfs.base import ConvergenceWarning
from cvfs.core import _lasso_kernels as K
from cvfs.core.sbl import _gamma_h, _posterior_mean, sbl_fit, weighted_lasso
from cvfs.core.screening import as_operator
from tests import naive
from tests.core.test_screening import psf_dictionary, random_dictionary


def _gram_problem(seed, k=12):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((30, k))
    y = rng.standard_normal(30)
    return A.T @ A, A.T @ y, rng.uniform(0.5, 2.0, k), y @ y, rng.standard_normal(k)


@pytest.mark.parametrize("positive", [False, True])
def test_kernels_match_numpy_twins(positive):
    G, b, pen, yy, t = _gram_problem(0)
    t = np.maximum(t, 0) if positive else t
    t_ref, q_ref = naive.gram_cd_epoch(G, b, pen, t, G @ t, positive)
    t2, q2 = t.copy(), G @ t
    K.gram_cd_epoch(G, b, pen, t2, q2, positive)
    np.testing.assert_allclose(t2, t_ref, atol=1e-12)
    np.testing.assert_allclose(q2, q_ref, atol=1e-10)
    np.testing.assert_allclose(K.gram_gap(b, pen, t2, q2, yy, positive),
                               naive.gram_gap(b, pen, t2, q2, yy, positive), rtol=1e-10)


@pytest.mark.parametrize("positive", [False, True])
def test_gram_cd_solve_reaches_gap(positive):
    G, b, pen, yy, _ = _gram_problem(1)
    t = np.zeros(b.size)
    epochs, gap = K.gram_cd_solve(G, b, pen, t, yy, 1e-10, 10_000, positive)
    assert gap <= 1e-10 and epochs < 10_000
    assert naive.gram_gap(b, pen, t, G @ t, yy, positive)[1] <= 1e-10
    t_ref, _, gap_ref = naive.gram_cd_solve(G, b, pen, np.zeros(b.size), yy, 1e-12, 100_000,
                                            positive)
    assert gap_ref <= 1e-12
    np.testing.assert_allclose(t, t_ref, atol=1e-4)


@pytest.mark.parametrize("positive", [False, True])
def test_weighted_lasso_matches_sklearn(positive):
    Phi, y = random_dictionary(4)
    w = np.random.default_rng(0).uniform(0.5, 2.0, Phi.shape[1])
    alpha = 0.2 * np.max(np.abs(Phi.T @ y) / w)
    res = weighted_lasso(Phi, y, alpha * w, positive=positive, tol=1e-10)
    sk = Lasso(alpha=alpha / Phi.shape[0], fit_intercept=False, tol=1e-12, max_iter=100_000,
               positive=positive).fit(Phi / w, y)
    np.testing.assert_allclose(res.coef, sk.coef_ / w, atol=1e-6)
    # the certificate bounds the suboptimality
    obj = naive.weighted_lasso_objective(Phi, y, alpha * w, res.coef)
    assert obj == pytest.approx(res.primal, rel=1e-12)
    assert res.gap >= -1e-12 and res.gap <= 1e-10 * 0.5 * (y @ y)


def test_weighted_lasso_on_psf_dictionary_with_warm_start_and_keep():
    Phi, y = psf_dictionary(5)
    pen = 0.1 * np.max(Phi.T @ y) * np.ones(Phi.shape[1])
    a = weighted_lasso(Phi, y, pen, positive=True, tol=1e-13)
    b = weighted_lasso(Phi, y, pen, positive=True, tol=1e-13, coef_init=a.coef * 1.1)
    assert a.converged and b.converged
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-6)
    keep = np.zeros(Phi.shape[1], bool)
    none = weighted_lasso(Phi, y, pen, keep=keep)
    assert not none.coef.any() and none.converged


def test_weighted_lasso_warns_when_not_converged():
    Phi, y = psf_dictionary(6)
    pen = 0.01 * np.max(Phi.T @ y) * np.ones(Phi.shape[1])
    with pytest.warns(ConvergenceWarning, match="did not reach relative gap"):
        weighted_lasso(Phi, y, pen, positive=True, tol=1e-14, max_iter=1, max_epochs=2)


def test_gamma_h_and_posterior_mean_match_dense_formulas():
    rng = np.random.default_rng(7)
    Phi = rng.standard_normal((20, 50))
    y = rng.standard_normal(20)
    gamma = np.zeros(50)
    gamma[[3, 9, 20]] = [0.5, 2.0, 1.0]
    lam = 0.3
    Sy = lam * np.eye(20) + Phi @ np.diag(gamma) @ Phi.T
    op = as_operator(Phi)
    gh = _gamma_h(op, op.column_norms(), gamma, lam)
    np.testing.assert_allclose(gh, np.diag(Phi.T @ np.linalg.solve(Sy, Phi)), rtol=1e-9)
    mean = np.diag(gamma) @ Phi.T @ np.linalg.solve(Sy, y)
    np.testing.assert_allclose(_posterior_mean(op, y, gamma, lam, False), mean, atol=1e-10)
    pos = _posterior_mean(op, y, gamma, lam, True)
    assert np.all(pos >= 0) and not pos[gamma == 0].any()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("make", [random_dictionary, psf_dictionary])
@pytest.mark.parametrize("positive", [False, True])
def test_sbl_identical_under_every_screening_rule(make, positive):
    Phi, y = make(8)
    lam = 0.05**2 * 4
    ref = sbl_fit(Phi, y, lam, screening=None, positive=positive, max_iter=6, lasso_tol=1e-8)
    for rule in ("wtht", "dome", "sphere", "gap"):
        got = sbl_fit(Phi, y, lam, screening=rule, positive=positive, max_iter=6, lasso_tol=1e-8)
        assert len(got.screening) == got.n_iter
        assert np.max(np.abs(got.coef - ref.coef)) <= 1e-6, rule
        assert max(got.gaps) <= 1e-8


def test_sbl_recovers_sparse_support_and_is_scale_equivariant():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((60, 300))
    X /= np.linalg.norm(X, axis=0)
    truth = np.zeros(300)
    truth[[4, 50, 120, 250]] = [2.0, -1.5, 3.0, 1.0]
    y = X @ truth + 0.01 * rng.standard_normal(60)
    m = SBLRegressor(lam=3e-3, screening="gap").fit(X, y)
    np.testing.assert_array_equal(np.flatnonzero(m.coef_), [4, 50, 120, 250])
    np.testing.assert_allclose(m.coef_[[4, 50, 120, 250]], truth[[4, 50, 120, 250]], atol=0.02)
    assert m.predict(X).shape == (60,) and m.score(X, y) > 0.999
    m2 = SBLRegressor(lam=3e-3 * 9, screening="gap").fit(X, 3 * y)
    np.testing.assert_allclose(m2.coef_, 3 * m.coef_, atol=1e-6)
    # the lasso (first step) alone is biased; SBL's reweighting removes the bias
    first = weighted_lasso(X, y, np.sqrt(3e-3) * np.ones(300))
    assert np.abs(first.coef - truth).max() > np.abs(m.coef_ - truth).max()


def test_sbl_regressor_screening_fractions():
    Phi, y = random_dictionary(10, N=40, n=500)
    m = SBLRegressor(lam=4.0, screening="wtht").fit(Phi, y)
    assert m.screening_.shape == (m.n_iter_,)
    assert np.all((m.screening_ >= 0) & (m.screening_ <= 1)) and m.screening_.max() > 0.5
    none = SBLRegressor(lam=4.0, screening=None).fit(Phi, y)
    assert not none.screening_.any()
    np.testing.assert_allclose(m.coef_, none.coef_, atol=1e-6)


def test_sbl_convergence_warning():
    Phi, y = random_dictionary(11)
    with pytest.warns(ConvergenceWarning, match="SBL did not converge in 1 reweighting"):
        SBLRegressor(lam=1e-3, max_iter=1).fit(Phi, y)


@pytest.mark.parametrize("kw, msg", [
    ({"lam": 0.0}, "lam must be a positive float or 'auto'; got 0.0"),
    ({"lam": "a"}, "lam must be a positive float or 'auto'; got 'a'"),
    ({"screening": "ball"}, r"screening must be one of .*; got 'ball'"),
    ({"max_iter": 0}, "max_iter must be a positive int; got 0"),
    ({"tol": -1.0}, "tol must be a positive float; got -1.0"),
    ({"lasso_tol": 0}, "lasso_tol must be a positive float; got 0"),
])
def test_sbl_regressor_parameter_errors(kw, msg):
    X, y = random_dictionary(0, N=10, n=20)
    with pytest.raises(ValueError, match=msg):
        SBLRegressor(**kw).fit(X, y)


def test_sbl_regressor_input_errors():
    X, y = random_dictionary(0, N=10, n=20)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SBLRegressor().fit(bad, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        SBLRegressor().fit(X, y[:-1])
    m = SBLRegressor().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :5])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_zero_atoms_are_ignored():
    X, y = random_dictionary(12, N=30, n=60)
    X[:, 7] = 0.0
    m = SBLRegressor(lam=1e-3).fit(X, y)
    assert m.coef_[7] == 0 and np.isfinite(m.coef_).all()


@parametrize_with_checks([SBLRegressor()])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_equals_dense(fmt, fit_intercept):
    """CSR/CSC dictionaries go through a sparse operator (centring implicit), never densified:
    the same support and coefficients as the dense fit."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = sp.random(200, 500, density=0.05, random_state=1, format=fmt)
    w = np.zeros(500)
    w[rng.choice(500, 8, replace=False)] = rng.normal(0, 3, 8)
    y = X @ w + 0.05 * rng.normal(size=200)
    kw = dict(lam=1e-3, screening="gap", fit_intercept=fit_intercept, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        dense = SBLRegressor(**kw).fit(X.toarray(), y)
        sparse = SBLRegressor(**kw).fit(X, y)
    np.testing.assert_array_equal(np.flatnonzero(sparse.coef_), np.flatnonzero(dense.coef_))
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0,
                               atol=1e-6 * np.abs(dense.coef_).max())
    assert sparse.intercept_ == pytest.approx(dense.intercept_, abs=1e-6)
    np.testing.assert_allclose(sparse.predict(X, return_std=True)[1],
                               dense.predict(X.toarray(), return_std=True)[1], rtol=1e-6)


def test_sparse_operator_matches_the_centred_matrix():
    import scipy.sparse as sp

    from cvfs.core.screening import SparseOperator

    X = sp.random(30, 12, density=0.3, random_state=2, format="csr")
    m = np.asarray(X.mean(axis=0)).ravel()
    D = X.toarray() - m
    op = SparseOperator(X, m)
    R = np.random.default_rng(1).normal(size=(30, 3))
    np.testing.assert_allclose(op.rmatvec(R), D.T @ R, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(R[:, 0]), D.T @ R[:, 0], atol=1e-12)
    np.testing.assert_allclose(op.columns([1, 4]), D[:, [1, 4]], atol=1e-12)
    np.testing.assert_allclose(op.gram_columns([0, 5]), D.T @ D[:, [0, 5]], atol=1e-12)
    np.testing.assert_allclose(op.column_norms(), np.linalg.norm(D, axis=0), atol=1e-12)
    np.testing.assert_allclose(op.subset([2, 3]).columns([1]), D[:, [3]], atol=1e-12)


def test_sparse_input_errors():
    import scipy.sparse as sp

    X = sp.random(20, 10, density=0.3, random_state=0, format="csr")
    X.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SBLRegressor().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="0 sample"):
        SBLRegressor().fit(sp.csr_matrix((0, 10)), np.ones(0))
