import warnings

import numpy as np
import pytest
from scipy.optimize import linprog, minimize
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import InfinitePushRanker
from cvfs.base import ConvergenceWarning
from cvfs.core._ipush_kernels import fista_wstep
from cvfs.core.infinite_push import (
    infinite_push_admm,
    infinite_push_lam_max,
    infinite_push_loss,
    project_l1inf_nonneg,
    prox_infinite_push,
)
from tests.naive import ipush_wstep


def _problem(m=12, n=15, d=6, seed=0):
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(m, d))
    P[:, :2] += 0.8
    return P, rng.normal(size=(n, d))


def _lp_l1(P, N, lam):
    """The l1 problem as a linear program: w = w+ - w-, s >= 1 - A w, s >= 0, tau >= mean_i s."""
    m, d = P.shape
    n = N.shape[0]
    nv = 2 * d + m * n + 1
    c = np.zeros(nv)
    c[:2 * d] = lam
    c[-1] = 1.0
    D = (P[:, None, :] - N[None, :, :]).reshape(m * n, d)
    A1 = np.zeros((m * n, nv))
    A1[:, :d], A1[:, d:2 * d], A1[:, 2 * d:-1] = -D, D, -np.eye(m * n)
    A2 = np.zeros((n, nv))
    for j in range(n):
        A2[j, 2 * d + np.arange(m) * n + j] = 1.0 / m
    A2[:, -1] = -1.0
    res = linprog(c, A_ub=np.vstack([A1, A2]), b_ub=np.r_[-np.ones(m * n), np.zeros(n)],
                  bounds=[(0, None)] * nv, method="highs")
    return res.fun, res.x[:d] - res.x[d:2 * d]


def _objective(P, N, w, lam, groups=None):
    A = (P @ w)[:, None] - (N @ w)[None, :]
    pen = np.abs(w).sum() if groups is None else sum(np.linalg.norm(w[g]) for g in groups)
    return lam * pen + infinite_push_loss(A)


def _bisect_projection(B, r):
    """Nested bisection on the common slack theta and each column cap."""
    Bp = np.maximum(B, 0.0)
    if Bp.max(axis=0).sum() <= r:
        return Bp

    def caps(th):
        out = []
        for col in Bp.T:
            lo, hi = 0.0, col.max()
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if np.maximum(col - mid, 0).sum() > th else (lo, mid)
            out.append(0.0 if col.sum() <= th else 0.5 * (lo + hi))
        return np.array(out)

    lo, hi = 0.0, Bp.sum(axis=0).max()
    for _ in range(100):
        th = 0.5 * (lo + hi)
        lo, hi = (th, hi) if caps(th).sum() > r else (lo, th)
    return np.minimum(Bp, caps(0.5 * (lo + hi))[None, :])


def test_projection_matches_bisection():
    rng = np.random.default_rng(1)
    for _ in range(20):
        B = rng.normal(size=(rng.integers(1, 6), rng.integers(1, 6)))
        r = rng.uniform(0.05, 2.0)
        Y = project_l1inf_nonneg(B, r)
        np.testing.assert_allclose(Y, _bisect_projection(B, r), atol=1e-9)
        assert Y.min() >= 0 and Y.max(axis=0).sum() <= r + 1e-12


def test_projection_inside_ball_is_clipping():
    B = np.array([[0.1, -1.0], [0.05, 0.2]])
    np.testing.assert_array_equal(project_l1inf_nonneg(B, 1.0), np.maximum(B, 0))


@pytest.mark.parametrize("t", [0.05, 0.7, 5.0])
def test_prox_matches_generic_solver(t):
    rng = np.random.default_rng(2)
    m, n = 3, 4
    v = 1.5 * rng.normal(size=(m, n)) + 0.5
    k = m * n

    # epigraph form over (a, s, tau): s >= 1 - a, s >= 0, tau >= mean_i s_ij
    def obj(x):
        return t * x[-1] + 0.5 * np.sum((x[:k] - v.ravel()) ** 2)

    cons = [{"type": "ineq", "fun": lambda x: x[k:2 * k] - (1.0 - x[:k])},
            {"type": "ineq", "fun": lambda x: x[k:2 * k]},
            {"type": "ineq", "fun": lambda x: x[-1] - x[k:2 * k].reshape(m, n).mean(axis=0)}]
    x0 = np.r_[v.ravel(), np.full(k, 3.0), 3.0]
    res = minimize(obj, x0, constraints=cons, method="SLSQP",
                   options={"ftol": 1e-14, "maxiter": 1000})
    a = prox_infinite_push(v, t)
    np.testing.assert_allclose(a, res.x[:k].reshape(m, n), atol=1e-5)
    f = t * infinite_push_loss(a) + 0.5 * np.sum((a - v) ** 2)
    assert f <= obj(res.x) + 1e-9


def test_fista_kernel_matches_naive_twin():
    P, N = _problem(m=5, n=7, d=4)
    rng = np.random.default_rng(3)
    b, w0 = rng.normal(size=4), rng.normal(size=4)
    A = (P[:, None, :] - N[None, :, :]).reshape(-1, 4)
    L = np.linalg.norm(A, 2) ** 2
    G = A.T @ A
    groups = [np.array([0, 2]), np.array([1]), np.array([3])]
    order, bounds = np.array([0, 2, 1, 3]), np.array([0, 2, 3, 4])
    ref = ipush_wstep(P, N, b, w0, 2.0, 0.3, groups, 40)
    for use_gram in (True, False):
        got = fista_wstep(P, N, G, use_gram, b, w0, 2.0, 0.3, 1.0 / (2.0 * L), order, bounds,
                          40, 0.0)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lam", [0.02, 0.2])
def test_admm_l1_matches_linear_program(lam):
    P, N = _problem()
    f_lp, w_lp = _lp_l1(P, N, lam)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = infinite_push_admm(P, N, lam, max_iter=1500, tol=1e-7)
    obj = np.asarray(res.objective)
    assert obj[-1] < obj[0]
    assert obj[-1] == pytest.approx(_objective(P, N, res.coef, lam))
    assert obj[-1] <= f_lp * (1 + 1e-3)
    np.testing.assert_allclose(res.coef, w_lp, atol=0.02)


def test_lam_max_is_the_zero_solution_threshold():
    P, N = _problem(seed=8)
    lam_max = infinite_push_lam_max(P, N)
    assert np.all(infinite_push_admm(P, N, 2.0 * lam_max, max_iter=1000).coef == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert np.any(infinite_push_admm(P, N, 0.8 * lam_max, max_iter=300).coef != 0)
    groups = [np.array([0, 1]), np.array([2, 3, 4, 5])]
    lam_g = infinite_push_lam_max(P, N, groups)
    assert np.all(infinite_push_admm(P, N, 2.0 * lam_g, groups=groups, max_iter=1000).coef == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert np.any(infinite_push_admm(P, N, 0.8 * lam_g, groups=groups, max_iter=300).coef)


def test_group_penalty_singletons_equal_l1_and_match_generic_solver():
    P, N = _problem(m=8, n=9, d=4, seed=4)
    lam = 0.05
    r1 = infinite_push_admm(P, N, lam, max_iter=300)
    r2 = infinite_push_admm(P, N, lam, groups=[np.array([j]) for j in range(4)], max_iter=300)
    np.testing.assert_allclose(r1.coef, r2.coef, atol=1e-12)

    groups = [np.array([0, 1]), np.array([2, 3])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = infinite_push_admm(P, N, lam, groups=groups, max_iter=1500, tol=1e-7)
    m, n, d = 8, 9, 4
    k = m * n
    D = (P[:, None, :] - N[None, :, :]).reshape(k, d)

    # epigraph over (w, s, tau, t_g)
    def obj(x):
        return lam * x[-2:].sum() + x[d + k]

    cons = [{"type": "ineq", "fun": lambda x: x[d:d + k] - (1.0 - D @ x[:d])},
            {"type": "ineq", "fun": lambda x: x[d:d + k]},
            {"type": "ineq", "fun": lambda x: x[d + k] - x[d:d + k].reshape(m, n).mean(axis=0)},
            {"type": "ineq",
             "fun": lambda x: x[-2:] ** 2 - np.array([x[g] @ x[g] for g in groups])},
            {"type": "ineq", "fun": lambda x: x[-2:]}]
    # a strictly feasible start: from the boundary (s = 1 - D w) SLSQP's line search can stall
    x0 = np.r_[np.zeros(d), 2.0 * np.ones(k), 2.0, 1.0, 1.0]
    ref = minimize(obj, x0, constraints=cons, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 2000})
    assert ref.success, ref.message
    assert res.objective[-1] <= ref.fun * (1 + 1e-3)
    assert res.objective[-1] >= ref.fun * (1 - 1e-3)


def test_ranker_selects_useful_features_and_ranks_positives_on_top():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 20))
    y = (X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=120) > 1.0).astype(int)
    est = InfinitePushRanker(lam=0.4).fit(X, y)
    assert est.coef_.shape == (20,)
    assert set(np.argsort(-np.abs(est.coef_))[:2]) == {0, 1}
    assert est.get_support(indices=True).size <= 12
    np.testing.assert_array_equal(est.get_support(indices=True), est.get_support(indices=True))
    s = est.decision_function(X)
    # the highest-scoring sample is relevant
    assert y[np.argmax(s)] == 1
    dense = InfinitePushRanker(lam=0.0, max_iter=100).fit(X, y)
    assert dense.get_support(indices=True).size > est.get_support(indices=True).size


def test_group_ranker_keeps_whole_groups():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 12))
    y = (X[:, 0] - X[:, 1] > 0.5).astype(int)
    labels = np.repeat(np.arange(6), 2)
    est = InfinitePushRanker(lam=0.1, penalty="l1_l2", groups=labels).fit(X, y)
    kept = np.unique(labels[est.get_support(indices=True)])
    assert 0 in kept
    np.testing.assert_array_equal(np.sort(est.get_support(indices=True)),
                                  np.flatnonzero(np.isin(labels, kept)))


@pytest.mark.parametrize("params, msg", [
    ({"lam": -1.0}, "lam must be"),
    ({"rho": 0.0}, "rho must be"),
    ({"tol": 0.0}, "tol must be"),
    ({"max_iter": 0}, "max_iter must be"),
    ({"penalty": "l2"}, "penalty must be"),
    ({"groups": [0, 1, 1]}, "groups is only used"),
    ({"penalty": "l1_l2", "groups": [0, 1]}, "one label per feature"),
])
def test_bad_parameters(params, msg):
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match=msg):
        InfinitePushRanker(**params).fit(X, np.arange(10) % 2)


def test_bad_targets_and_data():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match="at least two distinct values"):
        InfinitePushRanker().fit(X, np.ones(10))
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        InfinitePushRanker().fit(X_nan, np.arange(10) % 2)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        InfinitePushRanker().fit(X, np.arange(9) % 2)


def test_graded_relevance_uses_the_top_grade_as_positives():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 3))
    y = rng.integers(0, 3, size=40)
    a = InfinitePushRanker(lam=0.1, max_iter=200).fit(X, y)
    b = InfinitePushRanker(lam=0.1, max_iter=200).fit(X, (y == 2).astype(int))
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_convergence_warning():
    P, N = _problem()
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        infinite_push_admm(P, N, 0.01, max_iter=2)


@parametrize_with_checks([InfinitePushRanker(max_iter=50)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
