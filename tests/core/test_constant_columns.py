"""Constant-column detection: only equal values make a column constant, whatever its offset and
scale; near-constant columns are used with a warning; dense, sparse, out-of-core and Dask
layouts agree."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.metrics import r2_score

from cvfs import FSAClassifier, FSARegressor
from cvfs.core.fsa import fsa_fit
from cvfs.core.responses import NearConstantWarning


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(400, 12, n_informative=4, n_redundant=0, random_state=3)
    return X, y


def _fit_quiet(est, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NearConstantWarning)
        return est.fit(X, y, **kw)


# atol: the data keep ~450 (1e-13), ~5e4 (1e-6 on 1e6) and ~90 (1e-14 on 3) levels per column
@pytest.mark.parametrize("offset, scale, atol", [(1.0, 1e-13, 5e-3), (1e6, 1e-6, 1e-3),
                                                 (-3.0, 1e-14, 0.05)])
def test_tiny_spread_on_a_large_offset_is_not_constant(clf_data, offset, scale, atol):
    X, y = clf_data
    Xo = offset + X * scale
    assert min(np.unique(c).size for c in Xo.T) > 50  # the values do differ
    ref = FSAClassifier(k=5).fit(X, y)
    with pytest.warns(NearConstantWarning, match="vary by less than 1e-12 of their magnitude"):
        est = FSAClassifier(k=5).fit(Xo, y)
    assert np.count_nonzero(est.coef_) == 5
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_allclose(est.predict_proba(Xo), ref.predict_proba(X), atol=atol)


def test_regressor_on_offset_data_matches_the_fit_on_the_data():
    X, y = make_regression(300, 30, n_informative=5, noise=1.0, random_state=0)
    ref = FSARegressor(k=5).fit(X, y)
    Xo = 1 + X * 1e-12
    est = _fit_quiet(FSARegressor(k=5), Xo, y)
    np.testing.assert_array_equal(est.support_, ref.support_)
    assert r2_score(y, est.predict(Xo)) == pytest.approx(r2_score(y, ref.predict(X)), abs=1e-5)
    assert r2_score(y, est.predict(Xo)) > 0.99


def test_equal_values_are_constant_at_any_magnitude(clf_data):
    X, y = clf_data
    for c in (0.0, 1e-300, 7.0, 3e300):
        Xc = X.copy()
        Xc[:, [1, 4]] = c  # two equal-valued columns, never selected
        with warnings.catch_warnings():
            warnings.simplefilter("error", NearConstantWarning)  # equal values: no warning
            est = FSAClassifier(k=10).fit(Xc, y)
        assert not est.support_[1] and not est.support_[4], c
        assert np.all(est.coef_ != 0), c


def test_piecewise_linear_response_uses_tiny_spread(clf_data):
    X, y = clf_data
    ref = FSAClassifier(k=4, bins=3).fit(X, y)
    with pytest.warns(NearConstantWarning):
        est = FSAClassifier(k=4, bins=3).fit(5.0 + X * 1e-13, y)
    np.testing.assert_array_equal(est.support_, ref.support_)


def test_weighted_equal_columns_are_constant():
    """Weighted statistics are deviations from the weighted mean, which keeps its rounding:
    a column of equal values is still constant (multiclass, binary dense and sparse)."""
    X, y = make_classification(300, 10, n_informative=5, n_classes=3, random_state=1)
    X[:, 2] = 0.1  # not exactly representable
    w = np.random.default_rng(0).uniform(0.3, 3.0, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NearConstantWarning)
        assert not FSAClassifier(k=9).fit(X, y, sample_weight=w).support_[2]
        yb = (y > 0).astype(int)
        for Xb in (X[:, [2, 0]], sp.csr_matrix(X[:, [2, 0]])):
            clf = FSAClassifier(k=1).fit(Xb, yb, sample_weight=w)
            assert clf.get_support(indices=True).tolist() == [1]


def test_layouts_agree_on_offset_data(tmp_path):
    """Dense, CSR, out-of-core (HDF5 row blocks) and Dask give the same support on data whose
    columns vary by 1e-13 of their magnitude, with one equal-valued column."""
    import h5py

    da = pytest.importorskip("dask.array")
    X, y = make_classification(600, 16, n_informative=4, n_redundant=0, random_state=5)
    X = 1 + X * 1e-13
    X[:, 7] = 1.0
    y = np.where(y > 0, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NearConstantWarning)
        ref = fsa_fit(X, y, 5)
        fits = {"csr": fsa_fit(sp.csr_matrix(X), y, 5),
                "csc": fsa_fit(sp.csc_matrix(X), y, 5),
                "dask": fsa_fit(da.from_array(X, chunks=(150, 16)), y, 5)}
        with h5py.File(tmp_path / "x.h5", "w") as f:
            f["X"] = X
        with h5py.File(tmp_path / "x.h5", "r") as f:
            fits["out-of-core"] = fsa_fit(f["X"], y, 5, max_memory=X.nbytes // 4,
                                          block_bytes=100 * 16 * 8)
    assert 7 not in ref.support and np.all(ref.coef != 0)
    for name, r in fits.items():
        np.testing.assert_array_equal(r.support, ref.support, err_msg=name)
        # the column means round at 1.1e-16 = 1e-3 of the 1e-13 spread: layouts summing in
        # another order agree to that
        np.testing.assert_allclose(r.coef, ref.coef, rtol=5e-3, err_msg=name)


def test_ordinary_fits_are_unchanged():
    """Stored coefficients of fits on ordinary data (no equal or near-constant column)."""
    X, y = make_classification(300, 40, n_informative=6, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NearConstantWarning)
        est = FSAClassifier(k=5).fit(X, y)
    assert est.coef_.shape == (5,) and np.all(est.coef_ != 0)
