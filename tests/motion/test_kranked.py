"""The ranked-labelling quantities and the union-pool K choice of
benchmarks/motion/motion_k_ranked.py."""


import numpy as np
import pytest

from cvfs.motion import normalise_points
from cvfs.motion.candidates import generate_candidates, velocity_matrix
from cvfs.motion.evaluate import misclassification
from cvfs.motion.features import candidate_features
from cvfs.motion.kselect import capped_cost, noise_variance, subspace_residual
from cvfs.motion.synthetic import make_rigid_motions
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/motion/motion_k_ranked.py", "bench_motion_k_ranked")


def test_labelling_quantities_are_the_capped_cost_on_the_grid(bench):
    pts, truth = make_rigid_motions(3, 90, 12, noise=0.002, random_state=0)
    g, q = bench.labelling_quantities(pts, truth)
    Y = velocity_matrix(normalise_points(pts)).T
    sigma2 = noise_variance(Y)
    assert g.shape == (len(bench.mk.CAP_GRID), len(bench.mk.DIM_COST_GRID))
    for a, cap in enumerate(bench.mk.CAP_GRID):
        for b, dim_cost in enumerate(bench.mk.DIM_COST_GRID):
            assert g[a, b] == pytest.approx(capped_cost(Y, truth, sigma2, cap=cap,
                                                        dim_cost=dim_cost), rel=1e-10)
    assert q == pytest.approx(subspace_residual(Y, truth, 2), rel=1e-12)


class _LowestError:
    """A perfect ranker: scores are minus the errors it is given at construction."""

    def __init__(self, errors):
        self.errors = errors

    def decision_function(self, X):
        return -self.errors


def test_union_choice_takes_the_k_of_the_top_candidate(bench):
    pools = []
    for seed, k in ((0, 2), (1, 3)):
        pts, truth = make_rigid_motions(k, 30 * k, 10, noise=0.002, random_state=seed)
        p = {}
        for kk in (2, 3):
            cand = generate_candidates(pts, kk, alphas=(2.0,), refine=(), random_state=0)
            p[f"X{kk}"] = candidate_features(pts, cand)
            p[f"err{kk}"] = misclassification(cand.labels, truth)
        pools.append(p)
    X, err, groups, kk = bench.union_data(pools, [0, 1], (2, 3))
    assert X.shape[0] == err.size == groups.size == kk.size
    assert set(np.unique(groups)) == {0, 1}
    chosen, chosen_err = bench.union_choose(_LowestError(err), pools, [0, 1], (2, 3))
    assert chosen.tolist() == [2, 3]
    # a perfect ranker's pick is the lowest error of each sequence's union pool
    np.testing.assert_array_equal(chosen_err, [err[groups == g].min() for g in (0, 1)])
    assert chosen_err[0] == 0.0
