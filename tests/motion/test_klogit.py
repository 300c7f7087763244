"""The logit fit of the default K rule in benchmarks/motion/motion_k.py (fixed seeds)."""

import numpy as np
import pytest

from cvfs.motion import kselect
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/motion/motion_k.py", "bench_motion_k_logit")


def _tables(bench, lam, mu, n=300, seed=0):
    """Tables of ``form_tables``'s layout for n sequences whose true K minimises
    ``log g_K + mu log q_K + lam pen`` with noise added to ``log g_K``, every cell alike."""
    rng = np.random.default_rng(seed)
    ks = np.asarray(bench.K_RANGE, float)
    P = rng.integers(80, 600, n).astype(float)
    pen = ks[None] * (np.log(P) / P)[:, None]
    logq = -ks[None] * rng.uniform(0.05, 0.4, (n, 1)) + rng.normal(0, 0.05, (n, len(ks)))
    logg = np.log(200.0) - np.cumsum(rng.uniform(0.0, 0.6, (n, len(ks))), axis=1)
    y = ks[np.argmin(logg + mu * logq + lam * pen, axis=1)].astype(int)
    logg = logg + rng.normal(0, 0.01, logg.shape)
    T = {"pen": pen, "q": logq, "valid": np.ones_like(pen, bool)}
    for a in range(len(bench.CAP_GRID)):
        for b in range(len(bench.DIM_COST_GRID)):
            T[f"g:{a}:{b}"] = logg
    return T, y


def test_logit_fit_recovers_the_rule(bench):
    T, y = _tables(bench, lam=18.0, mu=0.1)
    variants = bench.logit_variants(T)
    v, theta, acc = bench.fit_form(variants, np.arange(len(y)), T["valid"], y)
    cap, dim_cost, lam, mu = bench.logit_rule(v, theta)
    assert (cap, dim_cost) == (bench.CAP_GRID[0], bench.DIM_COST_GRID[0])  # first of the ties
    assert acc > 0.95
    assert lam == pytest.approx(18.0, rel=0.15)
    assert mu == pytest.approx(0.1, abs=0.05)


def test_shipped_constants_are_a_cell_of_the_grid(bench):
    assert kselect.CAPPED_CAP in bench.CAP_GRID
    assert kselect.CAPPED_DIM_COST in bench.DIM_COST_GRID
    assert (kselect.CAPPED_CAP, kselect.CAPPED_DIM_COST) == (8.0, 50.0)
    assert (kselect.CAPPED_LAMBDA, kselect.CAPPED_MU) == (18.08, 0.081)
