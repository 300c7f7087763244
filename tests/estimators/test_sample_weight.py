"""Sample weights of the FSA solvers and estimators: a weighted fit is the fit on rows repeated
by integer weights, zero weights drop rows, and bad weights are refused."""

import numpy as np
import pytest
import scipy.sparse as sp

from cvfs import FSAClassifier, FSARanker, FSARegressor
from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core.fsa import fsa_fit
from cvfs.core.layouts.dense import _column_table
from cvfs.core.losses import get_loss
from cvfs.core.responses import get_response
from tests import naive

N, M = 200, 40


def _data(loss, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M))
    X[:, 7] = 3.0 + 0.5 * X[:, 7]  # a column with a mean
    beta = np.zeros(M)
    beta[[1, 4, 7, 20, 33]] = [2.0, -1.5, 1.0, 1.2, -2.0]
    z = X @ beta - 3.0
    if loss == "squared":
        y = z + 0.5 * rng.standard_normal(N)
    else:
        y = np.where(z + rng.standard_normal(N) > 0, 1.0, -1.0)
    w = rng.integers(0, 4, N)
    return X, y, w


def _assert_same_fit(a, b, rtol=1e-7):
    np.testing.assert_array_equal(a.support, b.support)
    scale = np.abs(b.coef).max()
    np.testing.assert_allclose(a.coef, b.coef, rtol=rtol, atol=rtol * scale)
    assert abs(a.intercept - b.intercept) <= rtol * max(1.0, scale)


@pytest.mark.parametrize("loss, bins, layout", [
    ("logistic", None, "float64"),
    ("squared", 4, "float64"),
    # each (loss, dtype) compiles its own weighted loop (~40 s on a cold cache)
    pytest.param("lorenz", None, "float32", marks=pytest.mark.slow),
    ("logistic", 3, "float32"),
    ("squared", None, "memmap"),
    ("logistic", None, "csr"),
    ("squared", 4, "csc"),
])
def test_weighted_fit_equals_repeated_rows(loss, bins, layout, tmp_path):
    X, y, w = _data(loss)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    kw = {}
    if layout == "float32":
        X, Xr = X.astype(np.float32), Xr.astype(np.float32)
    elif layout == "memmap":  # read in row blocks until 10 columns fit max_memory
        def mm(A, name):
            f = np.memmap(tmp_path / name, dtype=np.float64, mode="w+", shape=A.shape)
            f[:] = A
            return f
        X, Xr = mm(X, "x.dat"), mm(Xr, "xr.dat")
        kw = dict(max_memory=Xr.shape[0] * 10 * 8, block_bytes=4096)
    elif layout in ("csr", "csc"):
        X[np.abs(X) < 0.7] = 0.0
        Xr = np.repeat(X, w, axis=0)
        X, Xr = sp.csr_matrix(X).asformat(layout), sp.csr_matrix(Xr).asformat(layout)
    a = fsa_fit(X, y, 5, loss=loss, bins=bins, n_iter=100, sample_weight=w, **kw)
    b = fsa_fit(Xr, yr, 5, loss=loss, bins=bins, n_iter=100, **kw)
    _assert_same_fit(a, b, rtol=1e-5 if layout == "float32" else 1e-7)
    if layout == "memmap":
        assert a.history["out_of_core_iterations"] > 0


@pytest.mark.parametrize("bins", [None, 3])
def test_zero_weights_drop_rows(bins):
    X, y, _ = _data("logistic", seed=1)
    w = np.ones(N)
    w[::3] = 0.0
    X[0, 5] = 1e3  # an outlier in a dropped row: must not move the bin edges or statistics
    a = fsa_fit(X, y, 5, bins=bins, n_iter=100, sample_weight=w)
    b = fsa_fit(X[w > 0], y[w > 0], 5, bins=bins, n_iter=100)
    _assert_same_fit(a, b)
    np.testing.assert_allclose(a.table, b.table, rtol=1e-12, atol=1e-12)


def test_ranking_zero_weights_drop_rows_and_their_pairs():
    X, y, _ = _data("squared", seed=2)
    i, j = np.triu_indices(60, 1)
    pairs = (i, j, (y[i] > y[j]).astype(float))
    w = np.ones(N)
    w[[3, 10, 11]] = 0.0
    a = fsa_fit(X, y, 5, loss="rank", n_iter=80, pairs=pairs, sample_weight=w)
    kept = np.flatnonzero(w > 0)
    new = np.full(N, -1)
    new[kept] = np.arange(kept.size)
    ok = (w[i] > 0) & (w[j] > 0)
    b = fsa_fit(X[kept], y[kept], 5, loss="rank", n_iter=80,
                pairs=(new[i[ok]], new[j[ok]], pairs[2][ok]))
    _assert_same_fit(a, b)


@pytest.mark.parametrize("bins", [0, 3])
@pytest.mark.parametrize("name", ["squared", "logistic"])
def test_weighted_kernel_gradient_matches_naive(bins, name):
    # the (target, weight) rows of the kernels against the weighted NumPy twin, row-major and
    # feature-major
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 6))
    y = rng.normal(size=40) if name == "squared" else rng.choice([-1.0, 1.0], 40)
    w = rng.uniform(0.0, 3.0, 40)
    yw = np.ascontiguousarray(np.column_stack([y, w]))
    fp, _, _ = _column_table(X, get_response(None if bins == 0 else bins), 1 << 20, sw=w)
    G = 1 if bins == 0 else bins + 1
    beta = rng.normal(0, 0.3, (6, G))
    v = rng.normal(size=(6, G))
    none_i, none_f = np.zeros(0, np.int64), np.zeros(0)
    cols = np.arange(6)
    rval, rg, rgi = naive.fsa_gradient(X, y, fp, bins, beta, 0.2, name, sample_weight=w)
    H = naive.curvature_operator(X, fp, bins, sample_weight=w)
    XT = np.ascontiguousarray(X.T) if bins == 0 else PL.compact_bins(X, cols, fp, bins)
    tol = 2e-7 if name == "logistic" else 1e-9
    for Xk, transposed in ((X, False), (XT, True)):
        val, g, gi, h = K.compute_gradient(Xk, yw, (none_i, none_i, none_f, none_f),
                                           get_loss(name), (cols, fp, bins, beta, v, 0.2), True,
                                           transposed)
        np.testing.assert_allclose(val, rval, rtol=tol)
        np.testing.assert_allclose(g, rg, rtol=tol, atol=tol * np.abs(rg).max())
        np.testing.assert_allclose(gi, rgi, rtol=tol, atol=1e-12)
        np.testing.assert_allclose(h.ravel(), H @ v.ravel(), rtol=1e-9, atol=1e-12)
    # the weighted basis means
    U = get_response(None if bins == 0 else bins).basis(X, fp)
    np.testing.assert_allclose(fp[:, 2:].ravel(), (w @ U) / w.sum(), rtol=1e-12, atol=1e-12)


def test_estimators_take_sample_weight_and_class_weight():
    X, y, w = _data("squared", seed=3)
    rep = np.repeat(np.arange(N), w)
    a = FSARegressor(k=5, n_iter=100).fit(X, y, sample_weight=w)
    b = FSARegressor(k=5, n_iter=100).fit(X[rep], y[rep])
    np.testing.assert_array_equal(a.get_support(indices=True), b.get_support(indices=True))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)
    # class_weight times sample_weight, binary (piecewise linear too) and multiclass
    Xc, yc, _ = _data("logistic", seed=3)
    labels = np.where(yc > 0, "b", "a")
    cw = {"a": 2, "b": 1}
    for bins in (None, 3):
        a = FSAClassifier(k=5, n_iter=100, bins=bins, class_weight=cw).fit(Xc, labels,
                                                                            sample_weight=w)
        full = w * np.where(labels == "a", 2, 1)
        rep = np.repeat(np.arange(N), full)
        b = FSAClassifier(k=5, n_iter=100, bins=bins).fit(Xc[rep], labels[rep])
        np.testing.assert_array_equal(a.get_support(indices=True), b.get_support(indices=True))
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)
    y3 = np.digitize(Xc[:, 1] - Xc[:, 4], [-0.5, 0.5])
    a = FSAClassifier(k=5, n_iter=100).fit(Xc, y3, sample_weight=w)
    rep = np.repeat(np.arange(N), w)
    b = FSAClassifier(k=5, n_iter=100).fit(Xc[rep], y3[rep])
    np.testing.assert_array_equal(a.get_support(indices=True), b.get_support(indices=True))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)
    # the ranker: pairs weighted by w_i w_j, ties among the copies of a row in the normalisation
    groups = np.repeat(np.arange(10), N // 10)
    yi = np.round(y)
    for pair_weights in ("uniform", "group"):
        a = FSARanker(k=5, n_iter=60, bins=None, pair_weights=pair_weights).fit(
            X, yi, groups=groups, sample_weight=w)
        rep = np.repeat(np.arange(N), w)
        b = FSARanker(k=5, n_iter=60, bins=None, pair_weights=pair_weights).fit(
            X[rep], yi[rep], groups=groups[rep])
        np.testing.assert_array_equal(a.get_support(indices=True), b.get_support(indices=True))
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("weights, message", [
    (-np.ones(N), "must be >= 0"),
    (np.r_[np.nan, np.ones(N - 1)], "NaN or infinity"),
    (np.ones(N - 1), "1-D with X.shape\\[0\\]=200"),
    (np.ones((N, 2)), "1-D with X.shape\\[0\\]=200"),
    (np.zeros(N), "sums to zero"),
])
def test_bad_weights_raise(weights, message):
    X, y, _ = _data("squared")
    with pytest.raises(ValueError, match=message):
        FSARegressor(k=3, n_iter=10).fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match=message):
        fsa_fit(sp.csr_matrix(X), y, 3, loss="squared", n_iter=10, sample_weight=weights)


def test_dask_weights_not_implemented():
    da = pytest.importorskip("dask.array")
    X, y, w = _data("squared")
    with pytest.raises(NotImplementedError, match="sample_weight is not supported for a Dask"):
        fsa_fit(da.from_array(X, chunks=(50, M)), y, 3, loss="squared", n_iter=10,
                sample_weight=w)
