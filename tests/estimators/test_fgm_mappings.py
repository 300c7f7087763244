"""FGM's feature spaces (cvfs.core.fgm_spaces, FGMClassifier(mapping=..., groups=[...])): the
implicit top-pair search against brute force, predictions through the maps, overlapping groups
as duplicated columns, errors."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import AdditiveChi2Sampler

from cvfs import FGMClassifier
from cvfs.core.fgm import fgm_fit
from cvfs.core.fgm_spaces import Poly2Space, poly2_top
from tests import naive


def _interaction(n=300, m=30, seed=0):
    """Labels driven by one product x_3 x_7 and a weak linear term x_1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    y = np.where(X[:, 3] * X[:, 7] + 0.3 * X[:, 1] > 0, 1, -1)
    return X, y


@pytest.mark.parametrize("B", [1, 5, 40])
@pytest.mark.parametrize("block_cells", [1, 37, 1 << 22])
def test_poly2_top_equals_brute_force(B, block_cells):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((25, 12))
    r = rng.standard_normal(25)
    pairs, omega = poly2_top(X, r, B, block_cells=block_cells)
    ref_pairs, ref_omega = naive.poly2_top(X, r, B)
    np.testing.assert_array_equal(pairs, ref_pairs)
    np.testing.assert_allclose(omega, ref_omega, rtol=1e-12, atol=1e-12)
    sp_pairs, sp_omega = poly2_top(sp.csr_matrix(np.where(np.abs(X) < 0.5, 0, X)), r, B,
                                   block_cells=block_cells)
    ref_pairs, ref_omega = naive.poly2_top(np.where(np.abs(X) < 0.5, 0, X), r, B)
    np.testing.assert_array_equal(sp_pairs, ref_pairs)
    np.testing.assert_allclose(sp_omega, ref_omega, rtol=1e-12, atol=1e-12)


def test_poly2_space_columns_and_codes():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 5))
    space = Poly2Space(X)
    assert space.n_features == 5 + 15
    pairs = np.array([[0, -1], [1, 1], [2, 4], [4, -1]])
    codes = space.encode(pairs)
    np.testing.assert_array_equal(space.decode(codes), pairs)
    expected = np.column_stack([X[:, 0], X[:, 1] ** 2, X[:, 2] * X[:, 4], X[:, 4]])
    np.testing.assert_allclose(space.columns(codes), expected)
    np.testing.assert_allclose(Poly2Space(sp.csc_matrix(X)).columns(codes), expected)
    chosen, score = space.worst_case(np.ones(6), 3)
    _, omega = naive.poly2_top(X, np.ones(6), 3)
    np.testing.assert_array_equal(space.decode(chosen), naive.poly2_top(X, np.ones(6), 3)[0])
    assert score == pytest.approx(float(omega @ omega))


def test_poly2_fit_equals_explicit_expansion():
    """FGM over the implicit space = FGM over the materialised expansion (same constraints)."""
    X, y = _interaction(n=120, m=8, seed=3)
    yy = np.where(y > 0, 1.0, -1.0)
    space = Poly2Space(X)
    res = fgm_fit(space, yy, B=4, C=1.0, max_iter=4)
    m = X.shape[1]
    pairs = [(j, -1) for j in range(m)] + [(j, k) for j in range(m) for k in range(j, m)]
    Phi = space.columns(space.encode(pairs))
    ref = fgm_fit(Phi, yy, B=4, C=1.0, max_iter=4)
    assert len(res.blocks) == len(ref.blocks)
    codes = space.encode(pairs)  # column c of Phi is the feature with code codes[c]
    for blk, ref_blk in zip(res.blocks, ref.blocks):
        np.testing.assert_array_equal(blk, np.sort(codes[ref_blk]))
    order = np.argsort(codes[ref.features])
    np.testing.assert_array_equal(res.features, codes[ref.features][order])
    np.testing.assert_allclose(res.feature_coef, ref.coef[ref.features][order], atol=1e-10)
    assert res.intercept == pytest.approx(ref.intercept, abs=1e-10)


def test_poly2_classifier_finds_the_product_and_predicts_consistently():
    X, y = _interaction()
    lin = FGMClassifier(B=2, C=1.0, max_iter=5).fit(X[:200], y[:200])
    clf = FGMClassifier(B=2, C=1.0, max_iter=5, mapping="poly2").fit(X[:200], y[:200])
    assert [3, 7] in clf.terms_.tolist()
    assert clf.terms_.shape == (clf.coef_.size, 2)
    assert np.all(clf.coef_ != 0)
    best = clf.terms_[np.argmax(np.abs(clf.coef_))]
    np.testing.assert_array_equal(best, [3, 7])
    assert clf.support_[[3, 7]].all()
    assert clf.score(X[200:], y[200:]) > 0.9 > lin.score(X[200:], y[200:])
    # scores by hand from the reported terms
    Xt = X[200:]
    phi = np.column_stack([Xt[:, j] * (Xt[:, k] if k >= 0 else 1.0) for j, k in clf.terms_])
    np.testing.assert_allclose(clf.decision_function(Xt), phi @ clf.coef_ + clf.intercept_)
    np.testing.assert_allclose(clf.decision_function(sp.csr_matrix(Xt)),
                               clf.decision_function(Xt), atol=1e-12)
    np.testing.assert_array_equal(clf.predict(Xt),
                                  clf.classes_[(clf.decision_function(Xt) > 0).astype(int)])
    assert np.all((clf.feature_scaling_ >= 0) & (clf.feature_scaling_ <= 1 + 1e-12))
    assert clf.feature_scaling_.shape == clf.coef_.shape


def test_additive_map_groups_input_features():
    rng = np.random.default_rng(4)
    n, m = 300, 20
    X = rng.uniform(0, 1, (n, m))
    # a non-monotone effect of feature 5 (x in the middle band) that no linear model captures
    y = np.where(np.abs(X[:, 5] - 0.5) < 0.25, 1, -1)
    clf = FGMClassifier(B=1, C=10.0, max_iter=3, mapping="additive",
                        loss="logistic").fit(X[:200], y[:200])
    assert clf.coef_.shape == (3 * m,)
    # every constraint takes the 3 components of one input feature; feature 5 is among them
    assert all(np.array_equal(blk, blk[0] + m * np.arange(3)) for blk in clf.blocks_)
    assert [5, 5 + m, 5 + 2 * m] in [blk.tolist() for blk in clf.blocks_]
    assert clf.support_[5]
    Z = AdditiveChi2Sampler(sample_steps=2).fit_transform(X[200:])
    np.testing.assert_allclose(clf.decision_function(X[200:]), Z @ clf.coef_ + clf.intercept_)
    lin = FGMClassifier(B=1, C=10.0, max_iter=3, loss="logistic").fit(X[:200], y[:200])
    assert clf.score(X[200:], y[200:]) > lin.score(X[200:], y[200:]) + 0.1
    np.testing.assert_allclose(clf.decision_function(sp.csr_matrix(X[200:])),
                               clf.decision_function(X[200:]), atol=1e-12)
    # input groups become groups of all their components
    g = np.arange(m) // 4
    grp = FGMClassifier(B=1, C=10.0, max_iter=1, mapping="additive", groups=g).fit(X, y)
    assert sorted(grp.blocks_[0] % m) == sorted(np.repeat(np.arange(4, 8), 3))


def test_mapping_errors():
    X, y = _interaction(n=20, m=8)
    X = X[:, :5]
    with pytest.raises(ValueError, match=r"mapping must be one of \[None, 'poly2', 'additive'\], "
                                         r"got 'cubic'"):
        FGMClassifier(mapping="cubic").fit(X, y)
    with pytest.raises(ValueError, match="mapping='additive' needs non-negative X"):
        FGMClassifier(B=1, mapping="additive").fit(X, y)
    with pytest.raises(ValueError, match="groups must be None with mapping='poly2'"):
        FGMClassifier(B=1, mapping="poly2", groups=np.arange(5)).fit(X, y)
    with pytest.raises(ValueError, match="sample_steps must be 1, 2 or 3"):
        FGMClassifier(B=1, mapping="additive", sample_steps=5).fit(np.abs(X), y)
    clf = FGMClassifier(B=1, mapping="poly2", max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="5 features"):
        clf.predict(X[:, :4])


def test_overlapping_groups_equal_duplicated_columns():
    """Overlapping groups = the fit on explicitly duplicated columns with disjoint labels."""
    rng = np.random.default_rng(5)
    n, m = 150, 30
    X = rng.standard_normal((n, m))
    y = np.where(X[:, 4] - X[:, 5] + 0.5 * X[:, 20] > 0, 1, -1)
    # a chain of overlapping windows plus a tree (root {0..9} over leaves {0..4}, {5..9})
    groups = [np.arange(s, s + 6) for s in range(0, 25, 4)] + [np.arange(10), np.arange(5),
                                                              np.arange(5, 10)]
    clf = FGMClassifier(B=2, C=1.0, max_iter=4, groups=groups).fit(X, y)
    members = np.concatenate(groups)
    labels = np.repeat(np.arange(len(groups)), [g.size for g in groups])
    ref = FGMClassifier(B=2, C=1.0, max_iter=4, groups=labels).fit(X[:, members], y)
    np.testing.assert_allclose(clf.latent_coef_, ref.coef_, atol=1e-10)
    np.testing.assert_allclose(clf.coef_, np.bincount(members, ref.coef_, minlength=m),
                               atol=1e-10)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(X[:, members]),
                               atol=1e-10)
    assert clf.support_[[4, 5]].all()
    assert [sorted(b) for b in clf.blocks_] == [sorted(members[b]) for b in ref.blocks_]
    np.testing.assert_allclose(clf.feature_scaling_[members],
                               np.maximum(clf.feature_scaling_[members], ref.feature_scaling_))
    clf_sp = FGMClassifier(B=2, C=1.0, max_iter=4, groups=groups).fit(sp.csc_matrix(X), y)
    np.testing.assert_allclose(clf_sp.coef_, clf.coef_, atol=1e-10)


def test_overlapping_group_errors():
    X, y = _interaction(n=20, m=8)
    with pytest.raises(ValueError, match=r"groups\[1\] must be a non-empty array of feature "
                                         r"indices"):
        FGMClassifier(B=1, groups=[[0, 1], []]).fit(X, y)
    with pytest.raises(ValueError, match=r"groups\[0\] must hold distinct feature indices in "
                                         r"\[0, 8\), got \[0, 8\]"):
        FGMClassifier(B=1, groups=[[0, 8], [1]]).fit(X, y)
    with pytest.raises(ValueError, match="overlapping groups .* need mapping=None"):
        FGMClassifier(B=1, groups=[[0, 1], [1, 2]], mapping="additive").fit(np.abs(X), y)
    with pytest.raises(ValueError, match=r"B must be <= the number of groups \(2\)"):
        FGMClassifier(B=3, groups=[[0, 1], [1, 2]]).fit(X, y)
