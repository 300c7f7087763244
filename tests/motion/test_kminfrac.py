"""The smallest-cluster constraint of the K rule (cvfs.motion.kselect.large_clusters)."""

import numpy as np
import pytest

from cvfs.motion import normalise_points
from cvfs.motion.kselect import (
    CAPPED_CAP,
    CAPPED_DIM_COST,
    choose_k_capped,
    k_capped_costs,
    k_labellings,
    k_residuals,
    large_clusters,
)
from cvfs.motion.synthetic import make_rigid_motions


def _rotation_y(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def perspective_scene(n_background=200, n_object=60, n_frames=20, *, noise=0.002,
                      random_state=0):
    """A static 3-D background at depths 4-10 seen by a panning, translating perspective camera
    (strong parallax across the depth range) and one rigid object moving on its own in front.
    Returns points (P, F, 2) and labels (0 background, 1 object)."""
    rng = np.random.default_rng(random_state)
    bg = np.column_stack([rng.uniform(-4, 4, n_background), rng.uniform(-2.5, 2.5, n_background),
                          rng.uniform(4, 10, n_background)])
    obj0 = rng.uniform(-0.4, 0.4, (n_object, 3)) + [-0.8, 0.2, 3.0]
    pts = np.empty((n_background + n_object, n_frames, 2))
    for f in range(n_frames):
        cam_r, cam_t = _rotation_y(0.01 * f), np.array([0.04 * f, 0.0, 0.02 * f])
        obj = obj0 @ _rotation_y(-0.03 * f).T + [0.06 * f, 0.01 * f, 0.0]
        for rows, X in ((slice(0, n_background), bg), (slice(n_background, None), obj)):
            Xc = (X - cam_t) @ cam_r.T
            pts[rows, f] = Xc[:, :2] / Xc[:, 2:]
    pts += rng.normal(scale=noise, size=pts.shape)
    labels = np.repeat([0, 1], [n_background, n_object])
    return pts, labels


def chosen_k(points, min_fraction):
    pts = normalise_points(points)
    ks = range(2, 6)
    labs = k_labellings(pts, ks)
    _, planar = k_residuals(pts, ks, return_planar=True, labellings=labs,
                            min_fraction=min_fraction)
    costs = k_capped_costs(pts, ks, labellings=labs, cap=CAPPED_CAP, dim_cost=CAPPED_DIM_COST,
                           min_fraction=min_fraction)
    return choose_k_capped(costs, planar, len(points))


def test_large_clusters_keeps_labellings_whose_smallest_cluster_is_large_enough():
    labs = {2: np.array([[0] * 9 + [1], [0] * 5 + [1] * 5]), 3: np.array([[0] * 8 + [1, 2]])}
    kept = large_clusters(labs, 0.2)
    assert list(kept) == [2]
    np.testing.assert_array_equal(kept[2], labs[2][1:])
    assert set(large_clusters(labs, 0.0)) == {2, 3}
    assert len(large_clusters(labs, 0.1)[2]) == 2


@pytest.mark.parametrize("bad", [-0.1, 1.0, True])
def test_large_clusters_rejects_a_fraction_outside_0_1(bad):
    with pytest.raises(ValueError, match="min_fraction must be in"):
        large_clusters({2: np.zeros((1, 8), dtype=int)}, bad)


@pytest.mark.parametrize("min_fraction", [0.0, 0.03])
def test_rigid_background_in_perspective_is_one_motion(min_fraction):
    points, _ = perspective_scene()
    assert chosen_k(points, min_fraction) == 2


def test_a_motion_above_the_fraction_keeps_its_labelling():
    # the object holds 20 of 220 tracks (9 %): its labelling stays and K = 2 is chosen
    points, _ = perspective_scene(n_background=200, n_object=20, random_state=1)
    pts = normalise_points(points)
    labs = k_labellings(pts, range(2, 6))
    free = k_capped_costs(pts, labellings=labs, cap=CAPPED_CAP, dim_cost=CAPPED_DIM_COST)
    kept = k_capped_costs(pts, labellings=labs, cap=CAPPED_CAP, dim_cost=CAPPED_DIM_COST,
                          min_fraction=0.05)
    assert kept[2] == free[2]
    assert chosen_k(points, 0.05) == 2


def test_a_cluster_below_the_fraction_is_not_a_motion():
    points, truth = make_rigid_motions(2, 80, 20, noise=0.002, random_state=3)
    split = truth.copy()
    split[np.flatnonzero(truth == 0)[:3]] = 2  # three tracks of motion 0 as a "third motion"
    labs = {2: truth[None], 3: split[None]}
    pts = normalise_points(points)
    assert set(k_capped_costs(pts, labellings=labs, min_fraction=0.0)) == {2, 3}
    kept = k_capped_costs(pts, labellings=labs, min_fraction=0.05)
    _, planar = k_residuals(pts, return_planar=True, labellings=labs, min_fraction=0.05)
    assert set(kept) == {2} and set(planar) == {1, 2}
    assert choose_k_capped(kept, planar, len(points)) == 2


def test_benchmark_min_fraction_form_drops_labellings_with_a_small_cluster():
    from tests.scripts import load_script

    bench = load_script("benchmarks/motion/motion_k.py", "bench_motion_k")
    points, truth = make_rigid_motions(2, 80, 20, noise=0.002, random_state=3)
    split = truth.copy()
    split[np.flatnonzero(truth == 0)[:3]] = 2
    cached = {"lab2": truth[None].astype(np.int8), "lab3": split[None].astype(np.int8)}
    stats = bench.k_statistics(points, cached, ks=(2, 3), min_fraction=True)
    phi = bench.PHI_GRID.index(0.05)
    assert stats["K"][3]["phi0"] is not None and stats["K"][3][f"phi{phi}"] is None
    T = bench.form_tables([stats], ks=(2, 3))
    assert np.isinf(T[f"gphi:0:0:{phi}"][0, 1]) and np.isfinite(T["gphi:0:0:0"][0, 1])
    assert bench.MINFRAC_FORM in bench.k_forms(T)
