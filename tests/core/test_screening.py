"""Safety of the static and dynamic screening tests (SBL paper Sec. 3-B)."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import erf

from cvfs.core import screening as sc
from cvfs.core.sbl import weighted_lasso

RULES = ("sphere", "dome", "wtht")


def random_dictionary(seed, N=60, n=400):
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((N, n))
    Phi /= np.linalg.norm(Phi, axis=0)
    theta = np.zeros(n)
    theta[rng.choice(n, 8, replace=False)] = rng.uniform(1, 3, 8) * rng.choice([-1, 1], 8)
    y = Phi @ theta + 0.05 * rng.standard_normal(N)
    return Phi, y


def psf_dictionary(seed, size=12, n=600):
    """Unit-norm pixel-integrated Gaussian PSFs (eq. 66) at random (x0, y0, sigma)."""
    rng = np.random.default_rng(seed)
    x0, y0 = rng.uniform(0, size - 1, (2, n))
    s = rng.uniform(1.0, 2.0, n)
    u = np.arange(size)[None, :]

    def de(c):
        return 0.5 * (erf((u - c[:, None] + 0.5) / (np.sqrt(2) * s[:, None]))
                      - erf((u - c[:, None] - 0.5) / (np.sqrt(2) * s[:, None])))

    Phi = (de(y0)[:, :, None] * de(x0)[:, None, :]).reshape(n, -1).T
    Phi /= np.linalg.norm(Phi, axis=0)
    flux = np.zeros(n)
    flux[rng.choice(n, 4, replace=False)] = rng.uniform(2, 6, 4)
    y = Phi @ flux + 0.05 * rng.standard_normal(size * size)
    return Phi, y



@pytest.mark.parametrize("make", [random_dictionary, psf_dictionary])
@pytest.mark.parametrize("positive", [False, True])
@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.8])
def test_static_and_dynamic_rules_are_safe(make, positive, ratio):
    Phi, y = make(1)
    rng = np.random.default_rng(2)
    w = rng.uniform(0.5, 2.0, Phi.shape[1])
    rho = Phi.T @ y
    c = rho if positive else np.abs(rho)
    pen = ratio * np.max(c / w) * w
    ref = weighted_lasso(Phi, y, pen, positive=positive, tol=1e-8, gap_safe=False)
    assert ref.converged and ref.gap <= 1e-8 * 0.5 * (y @ y)
    active = ref.coef != 0
    assert active.any()
    if positive:
        assert np.all(ref.coef >= 0)
    norms = np.linalg.norm(Phi, axis=0)
    op = sc.as_operator(Phi)
    for rule in RULES:
        keep = sc.static_test(rule, op, rho, norms, pen, y, positive)
        assert not np.any(active & ~keep), rule  # never screens an active atom
        got = weighted_lasso(Phi, y, pen, positive=positive, tol=1e-8, keep=keep, gap_safe=False)
        assert np.max(np.abs(got.coef - ref.coef)) <= 1e-6, rule
    dyn = weighted_lasso(Phi, y, pen, positive=positive, tol=1e-8, gap_safe=True)
    assert np.max(np.abs(dyn.coef - ref.coef)) <= 1e-6


def test_regions_nest_and_screen_on_coherent_problem():
    # at a large lambda the tighter regions screen at least as much as the looser ones
    Phi, y = random_dictionary(3, N=40, n=300)
    rho = Phi.T @ y
    pen = 0.7 * np.max(np.abs(rho)) * np.ones(300)
    norms = np.ones(300)
    op = sc.as_operator(Phi)
    ks = {r: sc.static_test(r, op, rho, norms, pen, y) for r in RULES}
    assert ks["sphere"].sum() >= ks["dome"].sum() >= ks["wtht"].sum()
    assert (~ks["wtht"]).mean() > 0.5
    assert not np.any(ks["dome"] & ~ks["sphere"])


@pytest.mark.parametrize("seed", range(4))
def test_wtht_support_function_matches_constrained_maximum(seed):
    """M2 of Lemma 3.3 equals max phi^T x over the sphere cut by two half-spaces."""
    rng = np.random.default_rng(seed)
    d = 4
    n1, n2 = rng.standard_normal((2, d))
    n1 /= np.linalg.norm(n1)
    n2 /= np.linalg.norm(n2)
    tau = n1 @ n2
    r = 1.3
    psi1, psi2 = rng.uniform(-0.3, 0.6, 2)
    cons = [{"type": "ineq", "fun": lambda x: r**2 - x @ x},
            {"type": "ineq", "fun": lambda x: -psi1 * r - n1 @ x},
            {"type": "ineq", "fun": lambda x: -psi2 * r - n2 @ x}]
    for _ in range(6):
        phi = rng.standard_normal(d)
        best = -np.inf
        for _ in range(5):
            x0 = rng.standard_normal(d) * 0.1 - r * (n1 + n2) / 2
            out = minimize(lambda x, phi=phi: -phi @ x, x0, constraints=cons, method="SLSQP",
                           options={"ftol": 1e-12, "maxiter": 500})
            if out.success:
                best = max(best, -out.fun)
        got = sc._m2(np.array([n1 @ phi]), np.array([n2 @ phi]),
                     np.array([np.linalg.norm(phi)]), psi1, psi2, tau, r)[0]
        assert got >= best - 1e-6  # safe: never below the true maximum
        assert got == pytest.approx(best, abs=1e-5)
        dome = sc._m1(np.array([n1 @ phi]), np.array([np.linalg.norm(phi)]), psi1, r)[0]
        out = minimize(lambda x, phi=phi: -phi @ x, -r * n1 * 0.9, constraints=cons[:2],
                       method="SLSQP", options={"ftol": 1e-12, "maxiter": 500})
        assert dome == pytest.approx(-out.fun, abs=1e-5)


def test_feasible_y_screens_everything():
    Phi, y = random_dictionary(0)
    rho = Phi.T @ y
    pen = 2 * np.abs(rho).max() * np.ones(Phi.shape[1])
    op = sc.as_operator(Phi)
    for rule in RULES:
        assert not sc.static_test(rule, op, rho, np.ones(Phi.shape[1]), pen, y).any()


def test_gap_safe_test_radius_zero_is_kkt():
    corr = np.array([1.0, 0.5, -1.0, -0.2])
    pen = np.ones(4)
    keep = sc.gap_safe_test(corr, np.ones(4), pen, 1.0, 0.0)
    np.testing.assert_array_equal(keep, [True, False, True, False])
    keep = sc.gap_safe_test(corr, np.ones(4), pen, 1.0, 0.0, positive=True)
    np.testing.assert_array_equal(keep, [True, False, False, False])


def test_screening_errors():
    with pytest.raises(ValueError, match="rule must be 'sphere', 'dome' or 'wtht'; got 'ball'"):
        sc.static_test("ball", None, np.zeros(2), np.ones(2), np.ones(2), np.zeros(3))
    with pytest.raises(TypeError, match="Phi must be a 2-D numeric array.*ndim=1"):
        sc.as_operator(np.zeros(3))
