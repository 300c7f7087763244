import warnings

import numpy as np
import pytest
from scipy.optimize import linprog, minimize
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvfs import InfinitePushRanker
from cvfs.base import ConvergenceWarning
from cvfs.core._ipush_kernels import (
    blocks_loss,
    fista_wstep,
    pair_margins,
    pair_sums,
    prox_blocks,
)
from cvfs.core.infinite_push import (
    _pair_factor,
    infinite_push_admm,
    infinite_push_lam_max,
    infinite_push_loss,
    infinite_push_objective,
    pair_gram,
    project_l1inf_nonneg,
    prox_infinite_push,
    query_blocks,
)
from tests.naive import (
    ipush_blocks_loss,
    ipush_pair_margins,
    ipush_pair_sums,
    ipush_pairs,
    ipush_project,
    ipush_prox_blocks,
    ipush_wstep,
)


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
    for i in range(40):
        # large entries against the radius make most columns inactive (caps at zero)
        B = rng.normal(size=(rng.integers(1, 6), rng.integers(1, 6))) * (1.0 if i < 20 else 30.0)
        r = rng.uniform(0.05, 2.0)
        Y = project_l1inf_nonneg(B, r)
        np.testing.assert_allclose(Y, _bisect_projection(B, r), atol=1e-9)
        np.testing.assert_allclose(Y, ipush_project(B, r), atol=1e-10)
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
    pb, nb = np.array([0, 5]), np.array([0, 7])
    for use_gram in (True, False):
        got = fista_wstep(P, N, pb, nb, G, use_gram, b, w0, 2.0, 0.3, 1.0 / (2.0 * L), order,
                          bounds, 40, 0.0)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    # three queries: the pairs of each query only
    pb, nb = np.array([0, 1, 3, 5]), np.array([0, 4, 5, 7])
    A = ipush_pairs(P, N, pb, nb)
    L = np.linalg.norm(A, 2) ** 2
    ref = ipush_wstep(P, N, b, w0, 2.0, 0.3, groups, 40, pb, nb)
    np.testing.assert_allclose(pair_gram(P, N, pb, nb), A.T @ A, atol=1e-12)
    for use_gram in (True, False):
        got = fista_wstep(P, N, pb, nb, A.T @ A, use_gram, b, w0, 2.0, 0.3, 1.0 / (2.0 * L),
                          order, bounds, 40, 0.0)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


def test_pair_kernels_match_naive_twins():
    rng = np.random.default_rng(11)
    pb, nb = np.array([0, 3, 4, 8]), np.array([0, 2, 7, 9])
    ab = np.concatenate([[0], np.cumsum(np.diff(pb) * np.diff(nb))])
    sp, sn = rng.normal(size=8), rng.normal(size=9)
    a = np.empty(ab[-1])
    pair_margins(sp, sn, pb, nb, ab, a)
    np.testing.assert_array_equal(a, ipush_pair_margins(sp, sn, pb, nb))
    c = rng.normal(size=ab[-1])
    rp, rn = np.empty(8), np.empty(9)
    pair_sums(c, pb, nb, ab, rp, rn)
    want = ipush_pair_sums(c, pb, nb)
    np.testing.assert_allclose(rp, want[0], atol=1e-14)
    np.testing.assert_allclose(rn, want[1], atol=1e-14)
    loss = np.empty(3)
    blocks_loss(1.5 * c, pb, nb, ab, loss)
    np.testing.assert_allclose(loss, ipush_blocks_loss(1.5 * c, pb, nb), atol=1e-14)
    t = np.array([0.3, 1.0, 0.05])
    out = np.empty(ab[-1])
    prox_blocks(c, t, pb, nb, ab, out)
    np.testing.assert_allclose(out, ipush_prox_blocks(c, t, pb, nb), atol=1e-10)


def test_pair_factor_both_routes():
    rng = np.random.default_rng(12)
    pb, nb = np.array([0, 2, 5]), np.array([0, 3, 4])
    for d in (3, 20):  # fewer features than items: eigh of the Gram; more: SVD of M^(1/2) Z
        P, N = rng.normal(size=(5, d)), rng.normal(size=(4, d))
        V, s2 = _pair_factor(P, N, pb, nb)
        A = ipush_pairs(P, N, pb, nb)
        np.testing.assert_allclose((V * s2) @ V.T, A.T @ A, atol=1e-10)
        assert np.max(s2) == pytest.approx(np.linalg.norm(A, 2) ** 2)


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
    assert np.all(infinite_push_admm(P, N, 2.0 * lam_g, feature_groups=groups,
                                     max_iter=1000).coef == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert np.any(infinite_push_admm(P, N, 0.8 * lam_g, feature_groups=groups,
                                         max_iter=300).coef)


def test_group_penalty_singletons_equal_l1_and_match_generic_solver():
    P, N = _problem(m=8, n=9, d=4, seed=4)
    lam = 0.05
    r1 = infinite_push_admm(P, N, lam, max_iter=300)
    r2 = infinite_push_admm(P, N, lam, feature_groups=[np.array([j]) for j in range(4)],
                            max_iter=300)
    np.testing.assert_allclose(r1.coef, r2.coef, atol=1e-12)

    groups = [np.array([0, 1]), np.array([2, 3])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = infinite_push_admm(P, N, lam, feature_groups=groups, max_iter=1500, tol=1e-7)
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
    est = InfinitePushRanker(lam=0.18).fit(X, y)  # lam_max = 0.356 on these data
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
    est = InfinitePushRanker(lam=0.1, penalty="l1_l2", feature_groups=labels).fit(X, y)
    kept = np.unique(labels[est.get_support(indices=True)])
    assert 0 in kept
    np.testing.assert_array_equal(np.sort(est.get_support(indices=True)),
                                  np.flatnonzero(np.isin(labels, kept)))
    # groups= is the deprecated alias of feature_groups=
    with pytest.warns(FutureWarning, match="use feature_groups"):
        old = InfinitePushRanker(lam=0.1, penalty="l1_l2", groups=labels).fit(X, y)
    np.testing.assert_array_equal(old.coef_, est.coef_)


@pytest.mark.parametrize("params, msg", [
    ({"lam": -1.0}, "lam must be"),
    ({"rho": 0.0}, "rho must be"),
    ({"tol": 0.0}, "tol must be"),
    ({"max_iter": 0}, "max_iter must be"),
    ({"penalty": "l3"}, "penalty must be"),
    ({"feature_groups": [0, 1, 1]}, "feature_groups is only used"),
    ({"penalty": "l1_l2", "feature_groups": [0, 1]}, "one label per feature"),
    ({"penalty": "l1_l2", "feature_groups": [0, 1, 1], "groups": [0, 1, 1]},
     "feature_groups= only"),
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
    with pytest.raises(ValueError, match="groups must be 1-D"):
        InfinitePushRanker().fit(X, np.arange(10) % 2, groups=np.zeros(9))
    # every query holds a single relevance level: no pair at all
    with pytest.raises(ValueError, match="no query of groups"):
        InfinitePushRanker().fit(X, np.arange(10) % 2, groups=np.arange(10) % 2)


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


def _l2_reference(P, N, lam, p_bounds, n_bounds):
    """lam/2 ||w||^2 + mean_q max_j mean_i [1 - w.(p_i - q_j)]_+ by SLSQP on its epigraph form
    over (w, s, tau_q): s >= 1 - A w, s >= 0, tau_q >= mean_i s_ij for each j of query q."""
    d = P.shape[1]
    A = ipush_pairs(P, N, p_bounds, n_bounds)
    k, n_q = A.shape[0], len(p_bounds) - 1
    rows = []  # (pair indices of column j of query q, q)
    start = 0
    for q in range(n_q):
        m, n = p_bounds[q + 1] - p_bounds[q], n_bounds[q + 1] - n_bounds[q]
        rows += [(start + np.arange(m) * n + j, q) for j in range(n)]
        start += m * n

    def obj(x):
        return 0.5 * lam * x[:d] @ x[:d] + x[d + k:].mean()

    def grad(x):
        g = np.zeros_like(x)
        g[:d] = lam * x[:d]
        g[d + k:] = 1.0 / n_q
        return g

    cons = [{"type": "ineq", "fun": lambda x: x[d:d + k] - 1.0 + A @ x[:d]},
            {"type": "ineq", "fun": lambda x: x[d:d + k]},
            {"type": "ineq",
             "fun": lambda x: np.array([x[d + k + q] - x[d + idx].mean() for idx, q in rows])}]
    x0 = np.r_[np.zeros(d), 2.0 * np.ones(k), 3.0 * np.ones(n_q)]  # strictly feasible
    # ftol 1e-12: at 1e-14 SLSQP reaches the same point but, on some BLAS builds, reports a
    # failed line search below the precision it can resolve
    res = minimize(obj, x0, jac=grad, constraints=cons, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 3000})
    assert res.success, res.message
    return res.fun, res.x[:d]


@pytest.mark.parametrize("layout", ["one query", "three queries"])
def test_l2_matches_generic_solver(layout):
    P, N = _problem(m=9, n=10, d=4, seed=13)
    pb, nb = ((np.array([0, 9]), np.array([0, 10])) if layout == "one query"
              else (np.array([0, 2, 6, 9]), np.array([0, 5, 6, 10])))
    lam = 0.1
    f_ref, w_ref = _l2_reference(P, N, lam, pb, nb)
    res = infinite_push_admm(P, N, lam, penalty="l2", p_bounds=pb, n_bounds=nb, max_iter=5000,
                             tol=1e-9)
    f = infinite_push_objective(res.coef, P, N, lam, penalty="l2", p_bounds=pb, n_bounds=nb)
    assert f == pytest.approx(res.objective[-1])
    assert abs(f - f_ref) <= 1e-4
    np.testing.assert_allclose(res.coef, w_ref, atol=1e-4)


def test_l2_ranker_keeps_every_feature_and_ranks():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(120, 8))
    y = (X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=120) > 1.0).astype(int)
    est = InfinitePushRanker(lam=0.05, penalty="l2").fit(X, y)
    assert est.support_.all()
    assert set(np.argsort(-np.abs(est.coef_))[:2]) == {0, 1}
    assert y[np.argmax(est.decision_function(X))] == 1
    # a larger lam shrinks the weights (C = 1 / lam)
    small = InfinitePushRanker(lam=5.0, penalty="l2").fit(X, y)
    assert np.linalg.norm(small.coef_) < np.linalg.norm(est.coef_)


def _queries(seed=15, n_q=6, size=12, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * size, d))
    y = (X[:, 0] - X[:, 2] + 0.5 * rng.normal(size=len(X)) > 0.5).astype(int)
    q = np.repeat(np.arange(n_q), size)
    return X, y, q


def test_no_pair_crosses_a_query():
    X, y, q = _queries()
    P, N, pb, nb, skipped = query_blocks(X, y, q)
    assert skipped == 0 and pb.size == 7
    rng = np.random.default_rng(16)
    # shift every item of query 2 by one vector and permute its items: its own pairs are
    # unchanged, and no other query sees it
    X2, y2 = X.copy(), y.copy()
    rows = np.flatnonzero(q == 2)
    perm = rng.permutation(rows)
    X2[rows], y2[rows] = X[perm] + 10.0 * rng.normal(size=5), y[perm]
    for w in rng.normal(size=(5, 5)):
        f1 = infinite_push_objective(w, *query_blocks(X, y, q)[:2], 0.1,
                                     p_bounds=pb, n_bounds=nb)
        P2, N2, pb2, nb2, _ = query_blocks(X2, y2, q)
        f2 = infinite_push_objective(w, P2, N2, 0.1, p_bounds=pb2, n_bounds=nb2)
        assert f1 == pytest.approx(f2, abs=1e-12)
        # the loss is the mean of the queries' own losses
        per_q = [infinite_push_loss(ipush_pair_margins(P[pb[i]:pb[i + 1]] @ w,
                                                       N[nb[i]:nb[i + 1]] @ w,
                                                       [0, pb[i + 1] - pb[i]],
                                                       [0, nb[i + 1] - nb[i]]).reshape(
                                                           pb[i + 1] - pb[i], -1))
                 for i in range(6)]
        assert f1 == pytest.approx(0.1 * np.abs(w).sum() + np.mean(per_q), abs=1e-12)
    for penalty in ("l1", "l2"):
        a = InfinitePushRanker(lam=0.05, penalty=penalty).fit(X, y, groups=q)
        b = InfinitePushRanker(lam=0.05, penalty=penalty).fit(X2, y2, groups=q)
        np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-6)
        # without queries the shifted items are compared with every other item
        c = InfinitePushRanker(lam=0.05, penalty=penalty).fit(X2, y2)
        assert np.max(np.abs(c.coef_ - a.coef_)) > 1e-2


def test_query_without_positive_or_negative_contributes_nothing():
    X, y, q = _queries(seed=17)
    rng = np.random.default_rng(18)
    extra = rng.normal(size=(10, 5))
    Xe = np.vstack([X, extra, extra + 1.0])
    ye = np.r_[y, np.zeros(10, int), np.ones(10, int)]  # all negative, all positive
    qe = np.r_[q, np.full(10, 100), np.full(10, 101)]
    a = InfinitePushRanker(lam=0.05).fit(X, y, groups=q)
    b = InfinitePushRanker(lam=0.05).fit(Xe, ye, groups=qe)
    assert a.n_queries_ == b.n_queries_ == 6
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # graded relevance: each query's own top grade is its positives
    yg = y + 2 * (q % 2)
    g = InfinitePushRanker(lam=0.05).fit(X, yg, groups=q)
    np.testing.assert_allclose(g.coef_, a.coef_, atol=1e-12)


def test_lam_max_with_queries():
    X, y, q = _queries(seed=19)
    P, N, pb, nb, _ = query_blocks(X, y, q)
    lam_max = infinite_push_lam_max(P, N, p_bounds=pb, n_bounds=nb)
    est = InfinitePushRanker(lam=1.5 * lam_max).fit(X, y, groups=q)
    assert not est.support_.any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert InfinitePushRanker(lam=0.7 * lam_max).fit(X, y, groups=q).support_.any()
