"""The robust (GRIC-form) cost of a labelling and the noise level it is measured in."""

import numpy as np
import pytest

from cvfs.motion import normalise_points
from cvfs.motion.candidates import velocity_matrix
from cvfs.motion.kselect import capped_cost, k_capped_costs, k_labellings, noise_variance
from cvfs.motion.synthetic import make_rigid_motions


def test_noise_variance_recovers_the_noise_beyond_the_rank():
    rng = np.random.default_rng(0)
    low = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 40))
    noisy = low + 0.01 * rng.normal(size=low.shape)
    assert 0.8e-4 < noise_variance(noisy, rank=12) < 1.2e-4
    assert noise_variance(low, rank=12) < 1e-20


def test_capped_cost_of_exact_planes_is_the_dimension_cost():
    rng = np.random.default_rng(1)
    planes = [rng.normal(size=(2, 10)) for _ in range(2)]
    Y = np.vstack([rng.normal(size=(30, 2)) @ b + 5 * i for i, b in enumerate(planes)])
    labels = np.repeat([0, 1], 30)
    # every cluster lies on an affine plane: d = 2, zero residual, cost dim_cost * 2 per point
    assert np.isclose(capped_cost(Y, labels, 1e-4, dim_cost=1.0), 2.0)
    # one cluster for both planes: residuals capped at cap (D - d) per point
    one = capped_cost(Y, np.zeros(60, int), 1e-4, cap=5.0, dim_cost=0.0)
    assert 0.0 < one <= 5.0 * (10 - 2)
    both = capped_cost(Y, np.vstack([labels, np.zeros(60, int)]), 1e-4, dim_cost=1.0)
    assert both.shape == (2,) and both[0] < both[1]


def test_k_capped_costs_drop_until_the_true_k():
    pts, _ = make_rigid_motions(3, 120, 20, noise=0.002, random_state=0)
    pts = normalise_points(pts)
    labs = k_labellings(pts, range(2, 5))
    g = k_capped_costs(pts, labellings=labs)
    assert sorted(g) == [2, 3, 4]
    # at the true K each point costs about its noise, D - 3 = 37 (sigma^2 units) + its dimension
    assert 35 < g[3] < 45
    assert g[2] - g[3] > 2 * (g[3] - g[4]) > 0
    Y = velocity_matrix(pts).T
    assert noise_variance(Y) > 0


def test_choose_k_capped_trades_cost_for_the_penalty():
    g = {2: 50.0, 3: 30.0, 4: 29.5}
    q = {2: 1.0, 3: 0.5, 4: 0.49}
    from cvfs.motion.kselect import choose_k_capped

    assert choose_k_capped(g, q, 300) == 3
    assert choose_k_capped(g, q, 300, lam=1000.0) == 2
    with pytest.raises(ValueError, match="planar must hold"):
        choose_k_capped(g, {2: 1.0}, 300)
