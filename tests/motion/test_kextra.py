"""The perspective (epipolar) residual and the capped fraction of benchmarks/motion/motion_k.py."""


import numpy as np
import pytest

from cvfs.motion import normalise_points
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/motion/motion_k.py", "bench_motion_k")


def _perspective_scene(rng, n_frames=12):
    """Two rigid bodies (60 points each, depth 4-8) seen by a pinhole camera; each body turns and
    moves on its own."""
    bodies = [rng.uniform([-1, -1, 4], [1, 1, 8], size=(60, 3)) for _ in range(2)]
    out = []
    for b, body in enumerate(bodies):
        centre = body.mean(axis=0)
        track = []
        for f in range(n_frames):
            t = f / (n_frames - 1)
            ang = 0.3 * t * (1 if b else -1)
            c, s = np.cos(ang), np.sin(ang)
            R = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]) if b else \
                np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
            X = (body - centre) @ R.T + centre + t * np.array([0.5, -0.3, 0.8]) * (1 - 2 * b)
            track.append(X[:, :2] / X[:, 2:3])
        out.append(np.stack(track, axis=1))
    return np.concatenate(out), np.repeat([0, 1], 60)


def test_epipolar_residual_is_zero_for_one_rigid_body_under_perspective(bench):
    pts, truth = _perspective_scene(np.random.default_rng(0))
    pts = normalise_points(pts)
    own = bench.epipolar_residual(pts, truth)
    mixed = bench.epipolar_residual(pts, np.zeros(len(pts), int))
    assert own.shape == (120,) and np.all(own < 1e-12)
    assert np.median(mixed) > 1e-6
    # clusters too small for the 8-point fit are NaN
    small = truth.copy()
    small[:5] = 2
    assert np.isnan(bench.epipolar_residual(pts, small)[:5]).all()
    assert np.isfinite(bench.epipolar_residual(pts, small)[5:]).all()


def test_capped_fraction_counts_the_points_no_cluster_explains(bench):
    rng = np.random.default_rng(1)
    # three independent affine 3-D subspaces in 30 dimensions, 40 points each, noise 0.01
    Y = np.vstack([rng.normal(size=(40, 3)) @ rng.normal(size=(3, 30)) + rng.normal(size=30)
                   for _ in range(3)]) + 0.01 * rng.normal(size=(120, 30))
    truth = np.repeat([0, 1, 2], 40)
    assert bench.capped_fraction(Y, truth, 1e-4) < 0.05
    # two subspaces in one cluster: at most 4-D, so a large part of it is beyond the cap
    merged = np.where(truth == 2, 1, truth)
    assert bench.capped_fraction(Y, merged, 1e-4) > 0.3
