import numpy as np
import pytest

from cvfs.core import _compact_kernels as CK
from cvfs.core import _kernels as K
from cvfs.core import _loss_kernels as LK
from cvfs.core import _pl_kernels as PL
from cvfs.core.fsa import fsa_fit
from cvfs.core.layouts.dense import _column_table
from cvfs.core.losses import LOSSES, HuberSVM, get_loss
from cvfs.core.priors import SecondOrder, Shrinkage, get_prior
from cvfs.core.responses import PiecewiseLinear, get_response
from cvfs.core.schedules import annealing_schedule, check_schedule
from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression
from tests import naive


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["squared", "logistic", "lorenz", "svm", "squared_hinge"])
def test_loss_gradient_matches_finite_differences(name):
    rng = np.random.default_rng(0)
    loss = get_loss(name)
    z = rng.normal(0, 2, 200)
    y = rng.normal(size=200) if name == "squared" else rng.choice([-1.0, 1.0], 200)
    if loss.margin:  # keep away from the kinks of Lorenz / hinge
        u = y * z
        z = np.where(np.abs(u - 1) < 1e-3, z + 0.01, z)
    fd = np.array([_fd(lambda t, i=i: loss.value(t, y[i:i + 1]).sum(), z[i:i + 1])[0]
                   for i in range(z.size)])
    np.testing.assert_allclose(loss.gradient(z, y), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["squared", "logistic", "lorenz", "svm", "squared_hinge"])
def test_kernel_loss_matches_numpy(name):
    rng = np.random.default_rng(1)
    loss = get_loss(name)
    z = rng.normal(0, 3, 100)
    y = rng.normal(size=100) if name == "squared" else rng.choice([-1.0, 1.0], 100)
    out = np.array([LK.loss_value_grad(loss, zi, yi) for zi, yi in zip(z, y)])
    val, d = naive.loss_value_grad(loss, z, y)
    np.testing.assert_allclose(out[:, 0], val, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out[:, 1], d, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(loss.value(z, y), val, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(loss.gradient(z, y), d, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["squared", "logistic", "lorenz", "svm", "squared_hinge"])
def test_kernel_row_losses_match_numpy(name):
    rng = np.random.default_rng(16)
    loss = get_loss(name)
    z = rng.normal(0, 5, 2000)
    y = rng.normal(size=2000) if name == "squared" else rng.choice([-1.0, 1.0], 2000)
    d = np.empty(2000)
    total = LK.loss_rows(loss, z, y, d)
    # the logistic rows take exp(-|u|) from the float32 polynomial of _exp_neg_abs (< 2e-7)
    tol = 2e-7 if name == "logistic" else 1e-12
    val, dref = naive.loss_value_grad(loss, z, y)
    np.testing.assert_allclose(total, val.sum(), rtol=tol)
    np.testing.assert_allclose(d, dref, rtol=tol, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compactions_match_fancy_indexing(dtype):
    rng = np.random.default_rng(17)
    X = rng.normal(size=(37, 23)).astype(dtype)
    cols = np.array([0, 3, 4, 9, 22])
    ref = X[:, cols].copy()
    np.testing.assert_array_equal(CK.compact_columns(X, cols), ref)
    np.testing.assert_array_equal(CK.compact_features(X, cols, False), ref.T)
    np.testing.assert_array_equal(CK.compact_features(np.ascontiguousarray(X.T), cols, True),
                                  ref.T)
    buf = X.copy()
    out = CK.compact_columns_inplace(buf, cols)
    np.testing.assert_array_equal(out, ref)
    assert out.flags.c_contiguous and np.shares_memory(out, buf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bin_coordinates_match_the_piecewise_linear_encoding(dtype):
    # compact_bins / take_bins store s = j + alpha of PiecewiseLinear.bin_offset, feature-major,
    # clipped outside the training range (fp from other rows), in X's dtype
    rng = np.random.default_rng(19)
    resp = PiecewiseLinear(5)
    fp, _, _ = _column_table(rng.normal(size=(50, 23)), resp, 1 << 20)
    X = (2.0 * rng.normal(size=(71, 23))).astype(dtype)
    cols = np.array([0, 3, 4, 9, 22])
    j, a = resp.bin_offset(X[:, cols], fp[cols])
    ref = (j + a).T
    S = PL.compact_bins(X, cols, fp[cols], 5)
    assert S.dtype == dtype and S.shape == (5, 71) and S.flags.c_contiguous
    np.testing.assert_allclose(S, ref, rtol=1e-6 if dtype == np.float32 else 1e-15, atol=0)
    assert S.min() == 0.0 and S.max() == 5.0  # clipped
    out = np.full((5, 100), np.nan, dtype=dtype)
    PL.take_bins(X[40:], cols, fp[cols], 5, out, 10)  # a row block written at its offset
    np.testing.assert_array_equal(out[:, 10:41], S[:, 40:])
    assert np.isnan(out[:, :10]).all() and np.isnan(out[:, 41:]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 6, 1031])
def test_basis_sums_and_first_gradient_sums_match_the_basis(dtype, n):
    # basis_sums adds the hat functions of the bin coordinates four rows at a time, over
    # column chunks (600 columns: a partial second chunk), flushing every 256 rows; with
    # weights d it also gives sum_i d_i u_ij (FSA's first gradient sums)
    rng = np.random.default_rng(29)
    resp = PiecewiseLinear(5)
    fp, _, _ = _column_table(rng.normal(size=(40, 600)), resp, 1 << 20)
    X = (1.5 * rng.normal(size=(n, 600))).astype(dtype)  # values outside the edges: clipped
    d = rng.normal(size=n)
    U = resp.basis(X, fp).reshape(n, 600, resp.G)
    sums = np.zeros((600, resp.G))
    gsums = np.zeros((600, resp.G))
    PL.basis_sums(X, fp, 5, sums, d, gsums)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(sums, U.sum(0), rtol=tol, atol=tol * n)
    np.testing.assert_allclose(gsums, np.einsum("i,ijb->jb", d, U), rtol=tol,
                               atol=tol * np.abs(d).sum())
    only = np.zeros((600, resp.G))
    PL.basis_sums(X, fp, 5, only, np.zeros(0), only)  # unweighted: gsums untouched
    np.testing.assert_array_equal(only, sums)


def test_vectorised_exp_matches_numpy():
    u = np.concatenate([np.linspace(-45, 45, 20001), [0.0, -0.0, 1e-300, 700.0, -700.0]])
    out = np.empty_like(u)
    LK._exp_neg_abs(u, out)
    ref = np.exp(-np.minimum(np.abs(u), 40.0))
    np.testing.assert_allclose(out, ref, rtol=2e-7, atol=0)
    exact = np.exp(-np.abs(u))
    assert np.all(np.abs(out - exact) <= 2e-7 * exact + 5e-18)  # the clip costs < exp(-40)
    # a float32 rounding of |u| alone would be off by |u| * 6e-8 (2.4e-6 at 40): the float64
    # remainder is applied
    big = np.linspace(30.0, 40.0, 1001) + 1e-7
    LK._exp_neg_abs(big, out[:big.size])
    np.testing.assert_allclose(out[:big.size], np.exp(-big), rtol=2e-7, atol=0)


def test_loss_curvature_bounds_second_derivative():
    z = np.linspace(-10, 10, 20001)
    for name in ["squared", "logistic", "lorenz", "svm"]:
        loss = get_loss(name)
        y = np.ones_like(z)
        d2 = np.diff(loss.gradient(z, y)) / np.diff(z)
        assert d2.max() <= loss.curvature * (1 + 1e-3), name


def test_rank_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    loss = get_loss("rank")
    z = rng.normal(size=12)
    pairs = (rng.integers(0, 12, 30), rng.integers(0, 12, 30), rng.choice([0, 0.5, 1], 30))
    fd = _fd(lambda t: loss.value(t, pairs), z)
    np.testing.assert_allclose(loss.gradient(z, pairs), fd, rtol=1e-5, atol=1e-8)
    val, g = naive.rank_value_grad(z, pairs)
    np.testing.assert_allclose(loss.value(z, pairs), val, rtol=1e-12)
    np.testing.assert_allclose(loss.gradient(z, pairs), g, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("prior", [Shrinkage(0.1), SecondOrder(0.05, 0.3)])
def test_prior_gradient_matches_finite_differences_and_kernel(prior):
    rng = np.random.default_rng(3)
    beta = rng.normal(size=(4, 5))
    fd = _fd(prior.value, beta)
    np.testing.assert_allclose(prior.gradient(beta), fd, rtol=1e-6, atol=1e-8)
    g = np.zeros_like(beta)
    val = prior.value_grad(beta, g, prior.shrinkage, prior.smoothness)
    np.testing.assert_allclose(val, prior.value(beta), rtol=1e-12)
    np.testing.assert_allclose(g, prior.gradient(beta), rtol=1e-12)
    # the Lipschitz bound holds
    H = np.array([prior.gradient(e.reshape(1, 5))[0] for e in np.eye(5)])
    assert np.linalg.eigvalsh(H).max() <= prior.lipschitz(5) + 1e-12


def test_schedule_matches_eq3():
    s = annealing_schedule(1000, 10, 500, 300)
    e = np.arange(1, 501)
    ref = 10 + np.floor(990 * np.maximum(0, (500 - 2 * e) / (2 * e * 300 + 500)) + 1e-9)
    np.testing.assert_array_equal(s, ref)
    assert s[0] == 10 + int(990 * 498 / 1100) and s[249] == 10 and np.all(np.diff(s) <= 0)
    assert np.all(annealing_schedule(50, 50, 10, 300) == 50)


def test_schedule_errors():
    with pytest.raises(ValueError, match="k must be in"):
        annealing_schedule(10, 11)
    with pytest.raises(ValueError, match="n_iter must be"):
        annealing_schedule(10, 2, 0)
    with pytest.raises(ValueError, match="mu must be"):
        annealing_schedule(10, 2, 5, -1)
    with pytest.raises(ValueError, match="non-increasing"):
        check_schedule([5, 6, 2], 10, 2)
    with pytest.raises(ValueError, match="end at k"):
        check_schedule([5, 4, 3], 10, 2)
    with pytest.raises(ValueError, match="lie in"):
        check_schedule([11, 2], 10, 2)
    with pytest.raises(ValueError, match="integers"):
        check_schedule([5.5, 2], 10, 2)
    with pytest.raises(ValueError, match="non-empty"):
        check_schedule([], 10, 2)


def test_piecewise_linear_encoding_matches_naive_reference():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3))
    resp = PiecewiseLinear(4)
    fp, _, _ = _column_table(X, resp, 1 << 20)
    U = resp.basis(X, fp).reshape(50, 3, 5)
    for i in range(50):
        for j in range(3):
            lo, hi = X[:, j].min(), X[:, j].max()
            s = (X[i, j] - lo) / (hi - lo) * 4
            b = min(int(np.floor(s)), 3)
            ref = np.zeros(5)
            ref[b], ref[b + 1] = 1 - (s - b), s - b
            np.testing.assert_allclose(U[i, j], ref, atol=1e-12)
    # partition of unity, clipping outside the training range, basis means in the table
    np.testing.assert_allclose(U.sum(axis=2), 1.0)
    Xo = np.array([[-1e3, 1e3, 0.0]])
    Uo = resp.basis(Xo, fp).reshape(3, 5)
    assert Uo[0, 0] == 1.0 and Uo[1, 4] == 1.0
    np.testing.assert_allclose(fp[:, 2:], U.mean(axis=0))


@pytest.mark.parametrize("bins", [0, 3])
@pytest.mark.parametrize("name", ["squared", "logistic", "lorenz", "svm", "rank"])
def test_kernel_gradient_matches_naive(bins, name):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 6))
    loss = get_loss(name)
    y = rng.normal(size=40) if name == "squared" else rng.choice([-1.0, 1.0], 40)
    fp, _, _ = _column_table(X, get_response(None if bins == 0 else bins), 1 << 20)
    G = 1 if bins == 0 else bins + 1
    beta = rng.normal(0, 0.3, (6, G))
    v = rng.normal(size=(6, G))
    pairs = (rng.integers(0, 40, 60), rng.integers(0, 40, 60), rng.choice([0, .5, 1], 60),
             rng.uniform(0.5, 2.0, 60))
    pi, pj, pr, pw = (np.asarray(p) for p in pairs)
    pw = pw / pw.sum()
    if name != "rank":
        pi = pj = np.zeros(0, np.int64)
        pr = pw = np.zeros(0)
    cols = np.arange(6)
    val, g, gi, h = K.compute_gradient(X, y, (pi, pj, pr, pw), loss,
                                       (cols, fp, bins, beta, v, 0.2), True)
    rval, rg, rgi = naive.fsa_gradient(X, y, fp, bins, beta, 0.2, name,
                                       pairs if name == "rank" else None)
    tol = 2e-7 if name == "logistic" else 1e-9  # logistic rows: float32 exp polynomial
    np.testing.assert_allclose(val, rval, rtol=tol / 10)
    # (sums of derivatives times centred columns cancel: the error is relative to their scale)
    np.testing.assert_allclose(g, rg, rtol=tol, atol=max(1e-12, tol * np.abs(rg).max()))
    np.testing.assert_allclose(gi, rgi, rtol=tol, atol=1e-12)
    H = naive.curvature_operator(X, fp, bins, pairs if name == "rank" else None)
    np.testing.assert_allclose(h.ravel(), H @ v.ravel(), rtol=1e-9, atol=1e-12)
    # and the FSA gradient is the finite-difference gradient of the objective
    fd = _fd(lambda b: naive.fsa_gradient(X, y, fp, bins, b, 0.2, name,
                                          pairs if name == "rank" else None)[0], beta)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-7)
    if bins > 0 or name != "rank":
        # the feature-major working matrix gives the same pass: the kept linear columns, or the
        # bin coordinates of all features of which rows ``sub`` are kept (piecewise linear)
        sub = np.array([5, 1, 3])
        if bins == 0:
            XT, cols_t = np.ascontiguousarray(X.T), sub
        else:
            XT, cols_t = PL.compact_bins(X, cols, fp, bins), sub
        for track in (True, False):
            ref = K.compute_gradient(X, y, (pi, pj, pr, pw), loss,
                                     (sub, fp[sub], bins, beta[sub], v[sub], 0.2), track)
            got = K.compute_gradient(XT, y, (pi, pj, pr, pw), loss,
                                     (cols_t, fp[sub], bins, beta[sub], v[sub], 0.2), track,
                                     True)
            # (the two layouts sum the scores in different orders: last-bit differences, which
            # the float32 exp of the logistic rows can turn into ~1e-7 relative ones)
            for a, b in zip(got, ref):
                np.testing.assert_allclose(a, b, rtol=tol / 10 if name == "logistic" else 1e-12,
                                           atol=max(1e-14, tol / 10 * np.abs(b).max())
                                           if name == "logistic" else 1e-14)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 9, 10])
def test_feature_major_pass_matches_row_pass_for_every_remainder(m):
    # the axpy/dot sweeps take four columns at a time and the last one to three in one more
    # sweep: every remainder gives the row-major pass's loss, sums and gradients
    rng = np.random.default_rng(23)
    X = rng.normal(size=(1537, 12))
    y = rng.choice([-1.0, 1.0], 1537)
    fp, _, _ = _column_table(X, get_response(None), 1 << 20)
    cols = np.sort(rng.choice(12, m, replace=False))
    beta = rng.normal(0, 0.2, (m, 1))
    v = rng.normal(size=(m, 1))
    XT = CK.compact_features(X, cols, False)
    for loss in (get_loss("squared"), get_loss("lorenz")):
        for track in (True, False):
            none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
            ref = K.compute_gradient(X, y, none, loss, (cols, fp[cols], 0, beta, v, 0.1), track)
            got = K.compute_gradient(XT, y, none, loss, (np.arange(m), fp[cols], 0, beta, v,
                                                         0.1), track, True)
            for a, b in zip(got, ref):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
            if not track:
                assert np.all(got[3] == 0.0)


@pytest.mark.parametrize("width", [203, K.ROW_SWEEP_WIDTH + 7])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["squared", "logistic", "lorenz", "svm"])
def test_row_kernels_match_numpy(width, dtype, name):
    # the linear row pass (one row per sweep up to ROW_SWEEP_WIDTH columns, four above) against
    # numpy: same loss, derivative sums and raw gradient sums, over several row blocks with a
    # short last block and a row count not divisible by four; zero-weight columns are still read
    rng = np.random.default_rng(11)
    W = width
    N = 3001 if W < 1000 else 203
    X = rng.normal(size=(N, W)).astype(dtype)
    loss = get_loss(name)
    y = rng.normal(size=N) if name == "squared" else rng.choice([-1.0, 1.0], N)
    cols = np.sort(rng.choice(W, (3 * W) // 4, replace=False))
    fp, _, _ = _column_table(X, get_response(None), 1 << 20)
    beta = rng.normal(0, 0.1, (cols.size, 1))
    v = rng.normal(size=(cols.size, 1))
    assert K._block_rows(X) < N
    X64 = X.astype(np.float64)
    for track in (True, False):
        W2, z0, t0 = K._linear_weights(X, cols, fp[cols], beta, v, track)
        acc = np.zeros((W, 2))
        lsum, dsum, tsum = K._linear_row_pass(X, y, W2, z0 + 0.2, t0, loss,
                                              track, acc)
        z = X64 @ W2[:, 0].astype(np.float64) + z0 + 0.2
        t = X64 @ W2[:, 1].astype(np.float64) + t0 if track else np.zeros(N)
        val, d = naive.loss_value_grad(loss, z, y)
        tol = 1e-4 if dtype == np.float32 else 2e-7 if name == "logistic" else 1e-10
        np.testing.assert_allclose([lsum, dsum, tsum], [np.sum(val), d.sum(), t.sum()],
                                   rtol=tol, atol=tol * N)
        ref = np.column_stack([X64.T @ d, X64.T @ t])
        np.testing.assert_allclose(acc, ref, rtol=tol, atol=tol * np.abs(ref).max())
        assert np.all(acc[np.setdiff1d(np.arange(W), cols), 0] != 0)


@pytest.mark.parametrize("bins", [0, 4])
def test_solver_matches_naive_algorithm_with_fixed_step(bins):
    X, y, _ = make_ar1_classification(120, 30, k_true=2, random_state=6)
    y = np.where(y > 0, 1.0, -1.0)
    # 120 iterations: the last ones run on the final, feature-major working matrix (linear)
    sched = annealing_schedule(30, 4, 120, 10)
    res = fsa_fit(X, y, 4, loss="logistic", bins=None if bins == 0 else bins, n_iter=120,
                  mu=10, learning_rate=0.5, prior=Shrinkage(1e-3))
    fp, _, _ = _column_table(X, get_response(None if bins == 0 else bins), 1 << 20)
    loss = get_loss("logistic")
    kept, beta, icpt = naive.fsa_reference(X, y, 4, sched, fp, bins, "logistic", 0.5, 1e-3,
                                           intercept=loss.init_intercept(y),
                                           curv=loss.curvature)
    np.testing.assert_array_equal(res.support, kept)
    np.testing.assert_allclose(res.decision_function(X),
                               naive.centred_basis(X[:, kept], fp[kept], bins) @ beta.ravel()
                               + icpt, rtol=1e-6, atol=1e-8)  # float32 exp: 2e-7 per row


def test_fsa_recovers_support_and_history():
    X, y, true = make_ar1_classification(1000, 300, k_true=10, random_state=7)
    res = fsa_fit(X, np.where(y > 0, 1.0, -1.0), 10, loss="logistic")
    np.testing.assert_array_equal(res.support, true)
    h = res.history
    assert h["n_kept"][-1] == 10 and h["n_kept"][0] == annealing_schedule(300, 10)[0]
    # iteration 0 reads nothing of its own: its gradient comes from the statistics pass
    assert h["width"][0] == 0 and np.all(np.diff(h["width"][1:]) <= 0)
    # once the set is fixed, the objective decreases monotonically (step 1/L)
    tail = h["loss"][260:]
    assert np.all(np.diff(tail) <= 1e-12)
    sched = annealing_schedule(300, 10)
    # the columns read are the kept ones (before each step) up to the halving compaction rule
    before = sched[:-1]
    assert np.all(h["width"][1:] >= before) and np.all(h["width"][1:] < 2 * before + 1)
    assert h["width"][-1] == 10  # compacted to the final set (feature-major)
    assert h["data_passes"] == pytest.approx(h["width"].sum() / 300)
    annealing = (300 + (sched[:-1] - 10).sum()) / 300 - 10 / 300
    assert annealing < 6  # the annealing itself costs under 6 passes at mu=300


def test_first_compaction_into_a_large_new_matrix_waits_for_its_page_faults():
    # a first compaction into more than FRESH_BYTES pays the page faults of the new matrix:
    # the solver reads X at full width until the zero-weight reads cover that cost (ski
    # rental), then compacts once into the kept columns
    n, m = 10000, 2000
    X, y, true = make_ar1_classification(n, m, k_true=10, random_state=3)
    res = fsa_fit(X, np.where(y > 0, 1.0, -1.0), 10, loss="logistic")
    kept, width = res.history["n_kept"], res.history["width"]
    assert n * kept[0] * X.itemsize > CK.FRESH_BYTES  # the rule applies from iteration 0 on
    waste, e = 0.0, 0
    while n * kept[e] * X.itemsize > CK.FRESH_BYTES and (
            waste + m - kept[e] < m + (1 + CK.FRESH_COST) * kept[e]):
        e += 1
        waste += m - kept[e - 1]
    assert e >= 2  # the old rule (compact once halved) compacted after iteration 0
    np.testing.assert_array_equal(width[1:e + 1], m)
    assert width[e + 1] == kept[e]
    np.testing.assert_array_equal(np.sort(res.support), true)


@pytest.mark.parametrize("name", ["logistic", "lorenz", "svm", "squared"])
def test_annealing_boost_lengthens_the_step_only_while_features_are_removed(name):
    X, y, true = make_ar1_classification(600, 200, k_true=8, random_state=16)
    y = np.where(y > 0, 1.0, -1.0)
    loss = get_loss(name)
    res = fsa_fit(X, y, 8, loss=name, prior=Shrinkage(0.0), n_iter=200, mu=100)
    h = res.history
    # lr = 1 / (c lam / kappa) while the kept count (before the step) exceeds k, 1 / (c lam) after
    before = np.concatenate([[200], h["n_kept"][:-1]])
    annealing = before > 8
    assert annealing.any() and (~annealing).any()
    kappa = np.where(annealing, loss.annealing_boost, 1.0)
    np.testing.assert_allclose(h["lr"], kappa / (loss.curvature * h["lam"]), rtol=1e-12)
    assert h["lr"][-1] * h["lipschitz"] == pytest.approx(1.0, rel=1e-12)  # 1/L at the end
    if name != "squared":  # the boosted fit still finds the support on this easy problem
        np.testing.assert_array_equal(res.support, true)
    # annealing_boost=1 is the plain 1/L step throughout; a bad value is refused up front
    plain = fsa_fit(X, y, 8, loss=name, prior=Shrinkage(0.0), n_iter=200, mu=100,
                    annealing_boost=1.0)
    np.testing.assert_allclose(plain.history["lr"], 1.0 / (loss.curvature * plain.history["lam"]),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="annealing_boost must be a positive number"):
        fsa_fit(X, y, 8, loss=name, annealing_boost=-1.0)


def test_squared_loss_default_step_is_stable_where_paper_step_diverges():
    X, y, true = make_ar1_regression(1000, 1000, k_true=30, random_state=8)
    res = fsa_fit(X, y, 30, loss="squared")
    np.testing.assert_array_equal(res.support, true)
    rmse = np.sqrt(np.mean((res.decision_function(X) - y) ** 2))
    assert rmse < 1.05
    bad = fsa_fit(X, y, 30, loss="squared", learning_rate=1.0)
    assert not np.isfinite(bad.history["loss"][-1]) or bad.history["loss"][-1] > 1e6


def test_power_iteration_estimate_tracks_largest_eigenvalue():
    X, y, true = make_ar1_regression(500, 60, k_true=6, random_state=9)
    res = fsa_fit(X, y, 6, loss="squared")
    fp, _, _ = _column_table(X[:, res.support], get_response(None), 1 << 20)
    lam = np.linalg.eigvalsh(naive.curvature_operator(X[:, res.support], fp, 0)).max()
    np.testing.assert_allclose(res.history["lipschitz"], lam, rtol=1e-3)


def test_fit_is_deterministic_and_seeded():
    X, y, _ = make_ar1_classification(300, 200, k_true=5, random_state=10)
    y = np.where(y > 0, 1.0, -1.0)
    a = fsa_fit(X, y, 5, loss="lorenz", bins=3, random_state=3)
    b = fsa_fit(X, y, 5, loss="lorenz", bins=3, random_state=3)
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.intercept == b.intercept


def test_progress_bar_does_not_change_the_fit():
    X, y, _ = make_ar1_classification(300, 200, k_true=5, random_state=15)
    y = np.where(y > 0, 1.0, -1.0)
    a = fsa_fit(X, y, 5, loss="logistic", verbose=False)
    b = fsa_fit(X, y, 5, loss="logistic", verbose=True)
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.history["lr"], b.history["lr"])
    np.testing.assert_array_equal(a.history["width"], b.history["width"])


def test_progress_bar_does_not_change_an_out_of_core_fit(tmp_path):
    X, y, _ = make_ar1_classification(300, 200, k_true=5, random_state=15)
    y = np.where(y > 0, 1.0, -1.0)
    mm = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    kw = dict(loss="logistic", n_iter=80, max_memory=X.nbytes // 8, block_bytes=X.nbytes // 5)
    a = fsa_fit(mm, y, 5, verbose=False, **kw)
    b = fsa_fit(mm, y, 5, verbose=True, **kw)
    assert a.history["out_of_core_iterations"] > 0
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.history["lr"], b.history["lr"])
    np.testing.assert_array_equal(a.history["width"], b.history["width"])


def test_float32_input_is_kept_and_gives_the_same_support():
    X, y, true = make_ar1_classification(600, 200, k_true=5, random_state=11)
    y = np.where(y > 0, 1.0, -1.0)
    a = fsa_fit(X, y, 5, loss="logistic")
    b = fsa_fit(X.astype(np.float32), y, 5, loss="logistic")
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-3)


def test_piecewise_linear_learns_nonlinear_response():
    rng = np.random.default_rng(12)
    X = rng.uniform(-2, 2, size=(3000, 20))
    y = np.where(np.abs(X[:, 3]) + 0.3 * X[:, 7] > 1.0, 1.0, -1.0)  # |x| is not linear
    res = fsa_fit(X, y, 2, loss="logistic", bins=8, prior=SecondOrder(1e-3, 1e-2))
    np.testing.assert_array_equal(res.support, [3, 7])
    f3 = res.coef[0]  # response of x3 at its 9 knots: V-shaped
    assert f3[0] > f3[4] and f3[-1] > f3[4]
    acc = np.mean(np.sign(res.decision_function(X)) == y)
    assert acc > 0.95


def test_ranking_recovers_relevant_features():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(600, 50))
    score = 2 * X[:, 4] - X[:, 17]
    groups = np.repeat(np.arange(60), 10)
    from cvfs.estimators import ranking_pairs

    pairs = ranking_pairs(score, groups)
    res = fsa_fit(X, score, 2, loss="rank", pairs=pairs, n_iter=300)
    np.testing.assert_array_equal(res.support, [4, 17])
    assert res.coef[0, 0] > 0 > res.coef[1, 0]


@pytest.mark.parametrize("bins", [None, 4])
def test_out_of_core_inputs_match_in_memory(tmp_path, bins):
    import h5py

    X, y, true = make_ar1_classification(2000, 400, k_true=8, random_state=14)
    X = X.astype(np.float32)
    y = np.where(y > 0, 1.0, -1.0)
    ref = fsa_fit(X, y, 8, loss="lorenz", bins=bins)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    mm = np.memmap(tmp_path / "x.dat", dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    with h5py.File(tmp_path / "x.h5", "r") as f:
        # the kept columns may use 1/4 of X's size: the first iterations read row blocks
        a = fsa_fit(f["X"], y, 8, loss="lorenz", bins=bins, max_memory=X.nbytes // 4,
                    block_bytes=300 * 400 * 4)
    b = fsa_fit(np.memmap(tmp_path / "x.dat", dtype=np.float32, mode="r", shape=X.shape), y,
                8, loss="lorenz", bins=bins, max_memory=X.nbytes // 4)
    for r in (a, b):
        np.testing.assert_array_equal(r.support, ref.support)
        np.testing.assert_allclose(r.coef, ref.coef, rtol=1e-6, atol=1e-9)
        assert r.history["n_kept"][0] == ref.history["n_kept"][0]
        assert r.history["data_passes"] >= ref.history["data_passes"]
    np.testing.assert_array_equal(ref.support, true)


def test_core_errors():
    X = np.zeros((5, 3))
    with pytest.raises(ValueError, match="loss must be one of"):
        get_loss("hinge")
    with pytest.raises(TypeError, match="loss must be a name"):
        get_loss(3)
    with pytest.raises(ValueError, match="prior must be one of"):
        get_prior("l1")
    with pytest.raises(ValueError, match="needs prior='second_order'"):
        get_prior("shrinkage", smoothness=1.0)
    with pytest.raises(TypeError, match="prior must be a name"):
        get_prior(1)
    with pytest.raises(ValueError, match="shrinkage must be"):
        Shrinkage(-1)
    with pytest.raises(ValueError, match="smoothness must be"):
        SecondOrder(0.1, -1)
    with pytest.raises(ValueError, match="h must be > 0"):
        HuberSVM(0)
    with pytest.raises(ValueError, match="bins must be"):
        get_response(0)
    with pytest.raises(ValueError, match="at least one row"):
        fsa_fit(np.zeros((0, 3)), np.zeros(0), 1)
    with pytest.raises(ValueError, match="at least one pair"):
        fsa_fit(X, np.zeros(5), 1, loss="rank")
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity .first in row 2"):
        fsa_fit(Xn, np.ones(5), 1, loss="squared")
    assert set(LOSSES) == {"squared", "logistic", "lorenz", "svm", "squared_hinge", "rank"}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_statistics_pass_gives_the_first_gradient_sums(dtype):
    """The raw sums sum_i d_i x_ij of FSA's first iteration come from the statistics pass."""
    rng = np.random.default_rng(3)
    X = rng.normal(50.0, 3.0, size=(700, 9)).astype(dtype)
    d = rng.standard_normal(700)
    fp, graw, rows = _column_table(X, get_response(None), 4000)  # several row blocks
    assert graw is None and rows is None
    sub = np.array([0, 5, 6, 350, 699])  # the power-iteration rows, copied in the same pass
    fp2, graw, rows = _column_table(X, get_response(None), 4000, d, sub)
    np.testing.assert_array_equal(fp, fp2)
    np.testing.assert_allclose(graw[:, 0], X.astype(np.float64).T @ d, rtol=1e-10)
    np.testing.assert_array_equal(rows, X[sub])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_start_on_rows_in_place_matches_the_gathered_rows(dtype):
    """The linear power start reads the sampled rows in place; same estimate and vector as
    the generic kernel on a gathered copy, and close to the top eigenvalue of those rows."""
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((300, 40)) @ rng.standard_normal((40, 40))).astype(dtype)
    fp, _, _ = _column_table(X, get_response(None), 1 << 20)
    rows = np.unique(np.linspace(0, 299, 103).astype(np.int64))  # not a multiple of 4
    v1 = rng.standard_normal((40, 1))
    v1 /= np.linalg.norm(v1)
    v2 = v1.copy()
    lam1 = K.power_estimate(np.ascontiguousarray(X[rows]), np.arange(40), fp, 0, v1, 50)
    lam2 = K.power_estimate_rows(X, rows, fp, v2, 50)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    assert lam2 == pytest.approx(lam1, rel=tol)
    np.testing.assert_allclose(v2, v1, atol=tol)
    U = (X[rows].astype(np.float64) * fp[:, 1]) - fp[:, 2]
    top = np.linalg.eigvalsh(U.T @ U / rows.size)[-1]
    assert lam2 == pytest.approx(top, rel=1e-3)


def test_column_statistics_match_numpy_across_blocks():
    from cvfs.core.responses import _ColumnStats

    rng = np.random.default_rng(17)
    X = rng.normal(1e4, 2.0, size=(1000, 7))  # a large mean: no cancellation allowed
    st = _ColumnStats(7)
    for r0 in range(0, 1000, 300):
        assert st.update(np.ascontiguousarray(X[r0:r0 + 300]))
    np.testing.assert_allclose(st.mean, X.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(st.m2 / 1000, X.var(axis=0), rtol=1e-9)
    np.testing.assert_array_equal(st.lo, X.min(axis=0))
    np.testing.assert_array_equal(st.hi, X.max(axis=0))
    X[5, 3] = np.inf
    assert not _ColumnStats(7).update(X)
    # without min/max (linear responses): same sums, bounds untouched, NaN still caught
    st2 = _ColumnStats(7, minmax=False)
    assert st2.update(np.ascontiguousarray(X[6:]))
    np.testing.assert_allclose(st2.mean, X[6:].mean(axis=0), rtol=1e-13)
    assert np.all(st2.lo == np.inf) and np.all(st2.hi == -np.inf)
    X[7, 2] = np.nan
    assert not _ColumnStats(7, minmax=False).update(X)


@pytest.mark.parametrize("bins", [None, 4])
def test_out_of_core_peak_memory_stays_within_the_bound(tmp_path, bins):
    """Peak traced allocations of an HDF5 fit stay under max_memory + 3 blocks + O(M)."""
    import tracemalloc

    import h5py

    X, y, true = make_ar1_classification(4000, 500, k_true=5, random_state=18)
    X = X.astype(np.float32)  # 8 MB
    y = np.where(y > 0, 1.0, -1.0)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("X", data=X, chunks=(256, 500))
    del X
    max_memory, block = 2 << 20, 1 << 20
    with h5py.File(tmp_path / "x.h5", "r") as f:
        fsa_fit(f["X"], y, 5, loss="lorenz", bins=bins, max_memory=max_memory,
                block_bytes=block)  # JIT
        tracemalloc.start()
        res = fsa_fit(f["X"], y, 5, loss="lorenz", bins=bins, max_memory=max_memory,
                      block_bytes=block)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    np.testing.assert_array_equal(res.support, true)
    assert peak <= max_memory + 3 * block + 200 * 500 * 8 + 4000 * 8 * 8
    # the kept columns were loaded as soon as max_memory could hold them
    n_ooc = res.history["out_of_core_iterations"]
    # (iteration 0's gradient comes from a statistics pass, it reads nothing of its own)
    assert n_ooc >= 2 and res.history["width"][0] == 0
    assert np.all(res.history["width"][1:n_ooc] == 500)
    loaded = res.history["n_kept"][n_ooc - 1]
    assert 4000 * loaded * 4 <= max_memory < 4000 * res.history["n_kept"][n_ooc - 2] * 4


def test_user_prior_is_one_class_that_reaches_the_kernels():
    # a prior written by the user as one Prior subclass: the shrinkage prior under another
    # name gives the built-in one's fit exactly; a larger constant changes it
    from numba import njit

    from cvfs.core.priors import Prior

    @njit
    def ridge(beta, grad, s, c):
        val = 0.0
        for j in range(beta.shape[0]):
            for b in range(beta.shape[1]):
                val += s * beta[j, b] * beta[j, b]
                grad[j, b] += 2.0 * s * beta[j, b]
        return val

    @njit
    def ridge_lipschitz(G, s, c):
        return 2.0 * s

    class Ridge(Prior):
        value_grad = staticmethod(ridge)
        lipschitz_bound = staticmethod(ridge_lipschitz)

        def __init__(self, s):
            self.shrinkage = s

    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 30))
    y = np.where(X[:, :3].sum(axis=1) + 0.3 * rng.normal(size=200) > 0, 1.0, -1.0)
    ref = fsa_fit(X, y, 3, n_iter=40, prior=Shrinkage(0.05))
    got = fsa_fit(X, y, 3, n_iter=40, prior=Ridge(0.05))
    np.testing.assert_array_equal(got.support, ref.support)
    np.testing.assert_array_equal(got.coef, ref.coef)
    np.testing.assert_array_equal(got.history["loss"], ref.history["loss"])
    other = fsa_fit(X, y, 3, n_iter=40, prior=Ridge(0.5))
    assert not np.array_equal(other.coef, ref.coef)
    assert Ridge(0.05).lipschitz(4) == Shrinkage(0.05).lipschitz(4)
    # an object with the two constants is taken as the second-order prior of them
    duck = type("Duck", (), {"shrinkage": 0.1, "smoothness": 0.2})()
    prior = get_prior(duck)
    assert isinstance(prior, SecondOrder) and (prior.shrinkage, prior.smoothness) == (0.1, 0.2)


def test_fit_spec_as_argument_equals_keywords():
    """A FitSpec passed to fsa_fit gives the fit of the same keywords; keywords replace its
    fields; an unknown setting or a spec of another type is refused, naming it."""
    from cvfs.core.fsa import FitSpec, fsa_fit_sparse

    X, y, _ = make_ar1_classification(120, 30, k_true=3, random_state=2)
    y = np.where(y > 0, 1.0, -1.0)
    spec = FitSpec(loss="lorenz", bins=3, n_iter=40)
    a = fsa_fit(X, y, 3, spec)
    b = fsa_fit(X, y, 3, loss="lorenz", bins=3, n_iter=40)
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_array_equal(a.coef, b.coef)
    c = fsa_fit(X, y, 3, spec, n_iter=20)
    assert len(c.history["n_kept"]) == 20 and spec.n_iter == 40
    import scipy.sparse as sp

    d = fsa_fit_sparse(sp.csr_matrix(X), y, 3, spec)
    np.testing.assert_array_equal(d.support, a.support)
    with pytest.raises(TypeError, match=r"unknown FSA setting\(s\) \['n_iters'\]"):
        fsa_fit(X, y, 3, n_iters=10)
    with pytest.raises(TypeError, match="spec must be a FitSpec, got dict"):
        fsa_fit(X, y, 3, {"n_iter": 10})
