"""Noise learning of SBL when atoms outnumber samples (the evidence-guarded fast marginal
likelihood) and the safety of screening at the learned noise."""

import numpy as np
import pytest

from cvfs import SBLRegressor
from cvfs.core.sbl import sbl_fit
from cvfs.core.sbl_evidence import evidence_noise


def _problem(n, m, sigma, seed, k=10):
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n, m))
    theta = np.zeros(m)
    theta[rng.choice(m, k, replace=False)] = 3.0 * rng.standard_normal(k)
    return Phi, Phi @ theta + sigma * rng.standard_normal(n), theta


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_learned_when_atoms_outnumber_samples(seed):
    Phi, y, theta = _problem(200, 400, 0.5, seed)
    m = SBLRegressor(lam="auto").fit(Phi, y)
    assert 0.8 <= m.noise_variance_ / 0.25 <= 1.2
    # the true atoms carry the fit; the others stay small
    assert np.max(np.abs(m.coef_ - theta)) < 0.3
    assert np.max(np.abs(m.coef_[theta == 0])) < 0.3


def test_evidence_noise_keeps_only_signal_atoms():
    Phi, y, theta = _problem(100, 400, 0.5, 3)
    ev = evidence_noise(Phi, y)
    assert ev.converged
    true = set(np.flatnonzero(theta))
    assert set(np.flatnonzero(np.abs(theta) > 0.5)) <= set(ev.active)
    assert len(set(ev.active) - true) <= 1  # at most one pure-noise atom of 390
    assert 0.7 <= ev.lam / 0.25 <= 1.3


def test_unguarded_evidence_runs_to_small_noise():
    # tau = 1 is Tipping & Faul without the guard: pure-noise atoms keep entering
    Phi, y, _ = _problem(200, 400, 0.5, 0)
    ev = evidence_noise(Phi, y, tau=1.0, max_iter=120)
    guarded = evidence_noise(Phi, y)
    assert ev.active.size > 5 * guarded.active.size
    assert ev.lam < 0.5 * guarded.lam


def test_pure_noise_gives_the_noise_variance():
    rng = np.random.default_rng(4)
    Phi = rng.standard_normal((150, 300))
    y = 0.7 * rng.standard_normal(150)
    ev = evidence_noise(Phi, y)
    assert ev.active.size <= 2
    assert 0.8 <= ev.lam / 0.49 <= 1.2


@pytest.mark.parametrize("rule", ["wtht", "dome", "sphere", "gap"])
def test_screening_safe_at_the_learned_noise(rule):
    Phi, y, _ = _problem(100, 300, 0.5, 5)
    Phi /= np.linalg.norm(Phi, axis=0)
    ref = sbl_fit(Phi, y, 1.0, screening=None, update_noise=True, max_iter=10)
    res = sbl_fit(Phi, y, 1.0, screening=rule, update_noise=True, max_iter=10)
    assert res.lam == ref.lam
    np.testing.assert_allclose(res.coef, ref.coef, atol=1e-6 * np.abs(ref.coef).max())


def test_evidence_noise_does_not_depend_on_units():
    Phi, y, _ = _problem(60, 120, 0.5, 6)
    ref = evidence_noise(Phi, y)
    for a, b in ((1e-150, 1.0), (1e100, 1e-100), (3.0, 1e120)):
        ev = evidence_noise(b * Phi, a * y)
        np.testing.assert_array_equal(ev.active, ref.active)
        assert ev.lam == pytest.approx(a * a * ref.lam, rel=1e-8)
        np.testing.assert_allclose(ev.coef, ref.coef * a / b, rtol=1e-8)
