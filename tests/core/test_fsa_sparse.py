"""FSA on scipy.sparse input: kernels against their NumPy twins, fits equal to the dense fits,
prediction, memory and input errors."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from cvfs import FSAClassifier, FSARanker, FSARegressor
from cvfs.core import _sparse_kernels as SK
from cvfs.core.fsa import fsa_fit
from cvfs.core.layouts import sparse as sparse_layout
from cvfs.core.layouts.sparse import _kept_columns_csc, check_sparse
from cvfs.estimators import ranking_pairs
from tests import naive


@pytest.fixture(autouse=True)
def _sparse_loop_on_small_matrices(monkeypatch):
    """The test matrices are small enough for the small-block hand-over at the first
    iteration: turn it off so the sparse loop runs as it does on large matrices."""
    monkeypatch.setattr(sparse_layout, "_DENSE_CELLS", 0)


def _problem(n=300, m=200, density=0.1, k=6, dense_true=False, seed=0):
    """Sparse X with k planted columns (denser: 50%, or dense), real and +-1 targets."""
    rng = np.random.default_rng(seed)
    A = sp.random(n, m, density=density, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal).toarray()
    true = np.sort(rng.choice(m, k, replace=False))
    mask = np.ones((n, k), bool) if dense_true else rng.random((n, k)) < 0.5
    A[:, true] = np.where(mask, rng.standard_normal((n, k)) + 1.0, 0.0)
    y = A[:, true] @ (np.linspace(1.0, 2.0, k) * np.where(np.arange(k) % 2, 1, -1))
    y = y + 0.1 * rng.standard_normal(n)
    return A, sp.csr_matrix(A), y, np.where(y > np.median(y), 1.0, -1.0), true


def _assert_same_fit(r, ref):
    np.testing.assert_array_equal(r.support, ref.support)
    np.testing.assert_allclose(r.coef, ref.coef, rtol=1e-6, atol=1e-12)
    assert r.intercept == pytest.approx(ref.intercept, rel=1e-6, abs=1e-12)


# ---- kernels ----


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_column_statistics_match_numpy(fmt, dtype, index):
    A, X, _, _, _ = _problem(60, 40, density=0.2)
    A[0, :5] = 3.0  # row-0 shifts, some of them on stored entries
    X = sp.csr_matrix(A.astype(dtype)).asformat(fmt)
    X.indices = X.indices.astype(index)
    X.indptr = X.indptr.astype(index)
    d = np.random.default_rng(1).standard_normal(60)
    out = [np.empty(40) for _ in range(4)]
    if fmt == "csc":
        ok = SK.csc_column_stats(X.indptr, X.indices, X.data, 60, d, *out)
    else:
        count = np.empty(40, dtype=np.int64)
        ok = SK.csr_column_stats(X.indptr, X.indices, X.data, d, *out, count)
        np.testing.assert_array_equal(count, np.diff(X.tocsc().indptr))
    assert ok
    for got, want in zip(out, naive.sparse_column_stats(X, d)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("track", [True, False])
def test_column_passes_match_numpy(track):
    _, X, _, _, _ = _problem(80, 50, density=0.3)
    X = X.tocsc()
    rng = np.random.default_rng(2)
    cols = np.sort(rng.choice(50, 17, replace=False))
    a, b = rng.standard_normal(17), rng.standard_normal(17)
    z, t = rng.standard_normal(80), rng.standard_normal(80)
    zw, tw = naive.sparse_scores(X, cols, a, b, z, t)
    SK.csc_scores(X.indptr, X.indices, X.data, cols, a, b, z, t, track)
    np.testing.assert_allclose(z, zw, rtol=1e-12)
    if track:
        np.testing.assert_allclose(t, tw, rtol=1e-12)
    g, h = np.zeros((17, 1)), np.zeros((17, 1))
    SK.csc_dots(X.indptr, X.indices, X.data, cols, z, t, g, h, track)
    gw, hw = naive.sparse_dots(X, cols, z, t)
    np.testing.assert_allclose(g, gw, rtol=1e-12)
    np.testing.assert_allclose(h, hw if track else 0.0, rtol=1e-12)


def test_layout_changes_match_scipy():
    A, X, _, _, _ = _problem(70, 45, density=0.2)
    cols = np.array([0, 3, 4, 20, 44])
    ptr, idx, data = _kept_columns_csc(X, cols)
    want = X[:, cols].tocsc()
    want.sort_indices()
    np.testing.assert_array_equal(ptr, want.indptr)
    np.testing.assert_array_equal(idx, want.indices)
    np.testing.assert_array_equal(data, want.data)
    out = np.zeros((70, 5))
    SK.csc_take_dense(ptr, idx, data, np.arange(5), out)
    np.testing.assert_array_equal(out, A[:, cols])
    pos = np.full(45, -1)
    pos[cols] = np.arange(5)
    out[:] = 0.0
    SK.csr_take_dense(X.indptr, X.indices, X.data, pos, out)
    np.testing.assert_array_equal(out, A[:, cols])


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_piecewise_linear_kernels_match_numpy(fmt):
    from cvfs.core.responses import PiecewiseLinear, _ColumnStats

    A, X, _, _, _ = _problem(60, 25, density=0.3, seed=13)
    A[:, 3] = np.abs(A[:, 3])  # a column whose zeros are its minimum
    A[:, 4] = 0.0  # an empty column
    X = sp.csr_matrix(A).asformat(fmt)
    csc = fmt == "csc"
    lo, hi = np.full(25, np.inf), np.full(25, -np.inf)
    SK.column_min_max(X.indptr, X.indices, X.data, csc, 60, lo, hi)
    np.testing.assert_array_equal(lo, A.min(axis=0))
    np.testing.assert_array_equal(hi, A.max(axis=0))
    bins = 3
    stats = _ColumnStats(25)
    stats.lo, stats.hi = lo, hi
    fp = PiecewiseLinear(bins).bin_table(stats)
    U = naive.sparse_pl_basis(X, fp, bins)  # (N, M, G)
    d = np.random.default_rng(3).standard_normal(60)
    sums, gsums = np.zeros((25, bins + 1)), np.zeros((25, bins + 1))
    SK.pl_basis_sums(X.indptr, X.indices, X.data, csc, 60, fp, bins, d, sums, gsums)
    np.testing.assert_allclose(sums, U.sum(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gsums, np.einsum("i,ijb->jb", d, U), rtol=1e-12, atol=1e-12)
    # passes over the kept columns of the CSC layout
    Xc = X.tocsc()
    cols = np.array([0, 3, 4, 9, 24])
    rng = np.random.default_rng(4)
    beta, v = rng.standard_normal((5, bins + 1)), rng.standard_normal((5, bins + 1))
    Uk = U[:, cols]
    U0 = naive.sparse_pl_basis(sp.csr_matrix((1, 25)), fp, bins)[0, cols]  # basis of a zero
    for track in (True, False):
        z, t = np.zeros(60), np.zeros(60)
        csc = (Xc.indptr, Xc.indices, Xc.data)
        z0, t0 = SK.pl_csc_scores(csc, cols, fp[cols], bins, (beta, v), (z, t), track)
        np.testing.assert_allclose(z + z0, np.einsum("ijb,jb->i", Uk, beta), rtol=1e-12)
        assert z0 == pytest.approx(np.sum(U0 * beta), rel=1e-12)
        if track:
            np.testing.assert_allclose(t + t0, np.einsum("ijb,jb->i", Uk, v), rtol=1e-12)
        g, h = np.zeros((5, bins + 1)), np.zeros((5, bins + 1))
        SK.pl_csc_dots(csc, cols, fp[cols], bins, (d, z), (d.sum(), z.sum()), (g, h), track)
        np.testing.assert_allclose(g, np.einsum("i,ijb->jb", d, Uk), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(h, np.einsum("i,ijb->jb", z, Uk) if track else 0.0,
                                   rtol=1e-12, atol=1e-12)


# ---- fits ----


@pytest.mark.parametrize("loss", ["logistic", "squared", "lorenz"])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_fit_equals_dense_fit(loss, fmt):
    A, X, yr, yc, true = _problem()
    y = yr if loss == "squared" else yc
    ref = fsa_fit(A, y, 6, loss=loss, n_iter=150)
    res = fsa_fit(X.asformat(fmt), y, 6, loss=loss, n_iter=150)
    _assert_same_fit(res, ref)
    np.testing.assert_array_equal(res.support, true)
    # the whole fit ran on the sparse layout (the kept columns stay sparser than dense)
    assert res.history["sparse_iterations"] == 150
    np.testing.assert_array_equal(res.history["n_kept"], ref.history["n_kept"])
    np.testing.assert_allclose(res.history["loss"], ref.history["loss"], rtol=1e-9)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_dense_kept_columns_are_handed_to_the_in_memory_loop(loss):
    """Dense planted columns: once the kept set is mostly those, the kept columns are made
    dense and the in-memory loop finishes; the fit still equals the dense one."""
    A, X, yr, yc, true = _problem(dense_true=True, seed=3)
    y = yr if loss == "squared" else yc
    ref = fsa_fit(A, y, 6, loss=loss, n_iter=150)
    res = fsa_fit(X, y, 6, loss=loss, n_iter=150)
    assert 0 < res.history["sparse_iterations"] < 150
    _assert_same_fit(res, ref)
    # max_memory below the dense block keeps every iteration sparse, with the same result
    low = fsa_fit(X.tocsc(), y, 6, loss=loss, n_iter=150, max_memory=300 * 5 * 8)
    assert low.history["sparse_iterations"] == 150
    _assert_same_fit(low, ref)


@pytest.mark.parametrize("bins", [None, 4])
def test_small_kept_blocks_are_handed_over_with_the_same_fit(monkeypatch, bins):
    """Kept blocks of at most _DENSE_CELLS cells go to the in-memory loop even when denser
    than their sparse form; the fit is unchanged."""
    A, X, yr, yc, true = _problem(seed=6)
    kw = dict(loss="logistic", n_iter=60, bins=bins)
    ref = fsa_fit(A, yc, 6, **kw)
    monkeypatch.setattr(sparse_layout, "_DENSE_CELLS", 300 * 50)
    res = fsa_fit(X, yc, 6, **kw)
    n_kept = res.history["n_kept"]
    first_small = int(np.argmax(n_kept <= 50)) + 1  # the iteration after the kept set fits
    assert res.history["sparse_iterations"] == first_small
    _assert_same_fit(res, ref)


def test_ranking_loss_and_options_equal_dense():
    A, X, yr, _, true = _problem(200, 120, seed=4)
    groups = np.repeat(np.arange(20), 10)
    pairs = ranking_pairs(yr, groups)
    ref = fsa_fit(A, yr, 6, loss="rank", pairs=pairs, n_iter=120, record_path=True)
    res = fsa_fit(X, yr, 6, loss="rank", pairs=pairs, n_iter=120, record_path=True)
    _assert_same_fit(res, ref)
    np.testing.assert_allclose(res.path, ref.path, rtol=1e-6, atol=1e-12)
    kw = dict(loss="logistic", n_iter=80, learning_rate=0.5, fit_intercept=False,
              random_state=5)
    _assert_same_fit(fsa_fit(X.tocsc(), np.sign(yr), 6, **kw), fsa_fit(A, np.sign(yr), 6, **kw))


@pytest.mark.parametrize("loss", ["logistic", "squared", "lorenz", "rank"])
@pytest.mark.parametrize("dense_true", [False, True])
def test_piecewise_linear_sparse_fit_equals_dense_fit(loss, dense_true):
    A, X, yr, yc, true = _problem(dense_true=dense_true, seed=14)
    A[:, true[0]] = np.abs(A[:, true[0]])  # zeros at the bottom of the range
    X = sp.csr_matrix(A)
    y = yr if loss in ("squared", "rank") else yc
    kw = dict(loss=loss, bins=4, n_iter=100)
    if loss == "rank":
        kw["pairs"] = ranking_pairs(yr, np.repeat(np.arange(30), 10))
    ref = fsa_fit(A, y, 6, **kw)
    for Xs in (X, X.tocsc()):
        res = fsa_fit(Xs, y, 6, **kw)
        _assert_same_fit(res, ref)
        np.testing.assert_allclose(res.table, ref.table, rtol=1e-12, atol=1e-15)
        # dense planted columns: the kept ones are handed over as bin coordinates
        assert (res.history["sparse_iterations"] < 100) == dense_true


def test_float32_and_integer_data():
    A, X, _, yc, true = _problem(seed=5)
    X32 = X.astype(np.float32)
    res = fsa_fit(X32, yc, 6, n_iter=150)
    ref = fsa_fit(A.astype(np.float32), yc, 6, n_iter=150)
    np.testing.assert_array_equal(res.support, ref.support)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-4)
    Ai = np.round(A * 3)
    _assert_same_fit(fsa_fit(sp.csr_matrix(Ai.astype(np.int64)), yc, 6, n_iter=100),
                     fsa_fit(Ai, yc, 6, n_iter=100))


def test_duplicate_entries_and_other_formats_are_summed_like_scipy():
    A, X, _, yc, _ = _problem(seed=6)
    coo = X.tocoo()
    dup = sp.coo_matrix((np.r_[coo.data, coo.data], (np.r_[coo.row, coo.row],
                         np.r_[coo.col, coo.col])), shape=X.shape)
    assert check_sparse(dup).format == "csr"
    _assert_same_fit(fsa_fit(dup.tocsr(), yc, 6, n_iter=100), fsa_fit(2 * A, yc, 6, n_iter=100))


def test_fit_memory_stays_below_the_matrix_size():
    """Traced allocations of a CSR fit: the CSC copy of the kept columns (under half of X after
    the first drop) plus O(N + M) vectors; never an N x M dense array."""
    rng = np.random.default_rng(7)
    n, m = 2000, 20000
    X = sp.random(n, m, density=0.01, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = np.sign(X[:, :5].toarray().sum(axis=1) + 0.01)
    fsa_fit(X, y, 5, n_iter=30)  # compile outside the trace
    nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    tracemalloc.start()
    fsa_fit(X, y, 5, n_iter=30)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= 0.6 * nbytes + 20 * m * 8 + 20 * n * 8 < n * m * 8 / 10


# ---- estimators ----


def test_estimators_on_sparse_input_equal_dense_and_predict_sparse():
    A, X, yr, yc, true = _problem(seed=8)
    for est, y in ((FSAClassifier(k=6, n_iter=100), yc), (FSARegressor(k=6, n_iter=100), yr)):
        score = getattr(est, "decision_function", est.predict)
        est.fit(A, y)
        dense, coef, labels = score(A), est.coef_.copy(), est.predict(A)
        for fmt in ("csr", "csc"):
            est.fit(X.asformat(fmt), y)
            np.testing.assert_allclose(est.coef_, coef, rtol=1e-6)
            np.testing.assert_allclose(score(X.asformat(fmt)), dense, rtol=1e-9, atol=1e-9)
            if isinstance(est, FSAClassifier):
                np.testing.assert_array_equal(est.predict(X.asformat(fmt)), labels)
    clf = FSAClassifier(k=6, n_iter=100).fit(X, yc)
    np.testing.assert_allclose(clf.predict_proba(X), clf.predict_proba(A), rtol=1e-12)
    np.testing.assert_array_equal(clf.transform(X).toarray(), A[:, clf.get_support(indices=True)])
    groups = np.repeat(np.arange(30), 10)
    rk = FSARanker(k=6, bins=None, n_iter=100)
    s_dense = rk.fit(A, yr, groups).predict(A)
    np.testing.assert_allclose(rk.fit(X, yr, groups).predict(X), s_dense, rtol=1e-6)
    # piecewise-linear responses (the ranker's default): sparse fit and prediction
    rk = FSARanker(k=6, n_iter=60)
    s_dense = rk.fit(A, yr, groups).predict(A)
    coef = rk.coef_.copy()
    rk.fit(X, yr, groups)
    np.testing.assert_allclose(rk.coef_, coef, rtol=1e-6, atol=1e-12)
    for Xp in (X, X.tocsc()):
        np.testing.assert_allclose(rk.predict(Xp), s_dense, rtol=1e-9, atol=1e-12)


def test_prediction_reads_only_the_selected_columns():
    rng = np.random.default_rng(9)
    n, m = 40, 400_000  # dense: 128 MB
    X = sp.random(n, m, density=1e-4, format="csr", random_state=rng)
    X = sp.hstack([sp.csr_matrix(rng.standard_normal((n, 3))), X], format="csr")
    y = np.sign(X[:, 0].toarray().ravel() + 0.1)
    clf = FSAClassifier(k=3, n_iter=20).fit(X, y)
    for Xp in (X, X.tocsc()):
        tracemalloc.start()
        clf.decision_function(Xp)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 8 * (m + 3) + (1 << 20)


# ---- errors ----


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_non_finite_entries_are_named(bad, fmt):
    A, _, _, yc, _ = _problem(50, 30, seed=10)
    A[7, 11] = bad
    X = sp.csr_matrix(A).asformat(fmt)
    with pytest.raises(ValueError, match=r"NaN or infinity \(first in row 7, column 11\)"):
        fsa_fit(X, yc, 3, n_iter=10)
    with pytest.raises(ValueError, match="NaN or infinity"):
        FSAClassifier(k=3, n_iter=10).fit(X, yc)
    clf = FSAClassifier(k=3, n_iter=10).fit(np.nan_to_num(A, posinf=0, neginf=0), yc)
    with pytest.raises(ValueError, match="NaN|infinity"):
        clf.predict(X)


def test_empty_and_unsupported_inputs_raise():
    with pytest.raises(ValueError, match="at least one row and one column"):
        fsa_fit(sp.csr_matrix((0, 5)), np.zeros(0), 2)
    with pytest.raises(ValueError, match="at least one row and one column"):
        fsa_fit(sp.csc_matrix((4, 0)), np.ones(4), 2)
    with pytest.raises(ValueError, match="0 sample"):
        FSARegressor(k=2).fit(sp.csr_matrix((0, 5)), np.zeros(0))
    A, X, yr, yc, _ = _problem(50, 30, seed=11)
    with pytest.raises(ValueError, match="at least one pair"):
        fsa_fit(X, yr, 3, loss="rank")
    with pytest.raises(ValueError, match="annealing_boost must be a positive number"):
        fsa_fit(X, yc, 3, annealing_boost=0.0)
    big = sp.csr_matrix(np.where(A != 0, 1e300, 0.0))
    with pytest.raises(ValueError, match="too large for float64"):
        fsa_fit(big, yc, 3, n_iter=5)


def test_top_groups_keeps_the_largest_norms_lowest_index_first_on_ties():
    from cvfs.core import _kernels as K

    rng = np.random.default_rng(12)
    beta = rng.standard_normal((5000, 2))
    beta[::7] = 0.5  # many ties at the threshold
    norms = (beta * beta).sum(axis=1)
    for n_keep in (1, 700, 2500, 4999, 5000):
        want = np.sort(np.lexsort((np.arange(5000), -norms))[:n_keep])
        np.testing.assert_array_equal(K.top_groups(beta, n_keep), want)
