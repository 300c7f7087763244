"""A loss written by the user as one class with a numba function fits through every FSA kernel."""

import math

import numpy as np
import pytest

from cvfs._jit import njit
from cvfs.core import _loss_kernels as LK
from cvfs.core.fsa import fsa_fit
from cvfs.core.losses import Loss, get_loss


@njit
def _poisson(z, y, param):
    # Poisson deviance up to terms free of z: exp(z) - y z
    m = math.exp(z)
    return m - y * z, m - y


class Poisson(Loss):
    name = "poisson"
    annealing_boost = 1.0

    value_grad = staticmethod(_poisson)

    def __init__(self, curvature):
        self.curvature = curvature  # bounds exp(z) over the scores the fit visits

    def init_intercept(self, y):
        return float(np.log(np.mean(y)))


def _poisson_design(seed, N=600, M=40, k=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, M))
    true = np.sort(rng.choice(M, k, replace=False))
    z = 0.5 + X[:, true] @ np.full(k, 0.35)
    return X, rng.poisson(np.exp(z)).astype(np.float64), true


def test_user_poisson_loss_value_and_gradient():
    loss = Poisson(10.0)
    z = np.linspace(-2, 2, 9)
    y = np.arange(9.0)
    np.testing.assert_allclose(loss.value(z, y), np.exp(z) - y * z, rtol=1e-14)
    np.testing.assert_allclose(loss.gradient(z, y), np.exp(z) - y, rtol=1e-14)
    d = np.empty(9)
    total = LK.loss_rows(loss, z, y, d)
    np.testing.assert_allclose(total, np.sum(np.exp(z) - y * z), rtol=1e-14)
    np.testing.assert_allclose(d, np.exp(z) - y, rtol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("bins", [None, 4])
def test_user_poisson_loss_selects_the_true_support(bins):
    X, y, true = _poisson_design(0)
    res = fsa_fit(X, y, 5, loss=Poisson(float(y.max())), bins=bins, n_iter=200)
    np.testing.assert_array_equal(res.support, true)
    assert np.all(np.isfinite(res.history["loss"]))
    assert res.history["loss"][-1] < res.history["loss"][0]
    if bins is None:  # near the generating coefficients
        np.testing.assert_allclose(res.coef[:, 0], 0.35, atol=0.1)
        assert abs(res.intercept - 0.5) < 0.15


@pytest.mark.slow
def test_user_loss_on_float32_and_out_of_core(tmp_path):
    X, y, true = _poisson_design(1)
    mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float32,
                                   shape=X.shape)
    mm[:] = X
    mm.flush()
    loss = Poisson(float(y.max()))
    a = fsa_fit(X.astype(np.float32), y, 5, loss=loss, n_iter=100)
    b = fsa_fit(np.load(tmp_path / "X.npy", mmap_mode="r"), y, 5, loss=loss, n_iter=100,
                max_memory=1000)
    np.testing.assert_array_equal(a.support, true)
    np.testing.assert_array_equal(b.support, true)
    assert b.history["out_of_core_iterations"] > 0


def test_get_loss_rejects_other_objects():
    with pytest.raises(TypeError, match="Loss object"):
        get_loss(object())
    assert get_loss(Poisson(3.0)).curvature == 3.0
