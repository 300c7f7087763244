"""Synthetic rigid-motion trajectories under an affine camera (deterministic problem factory).

Each motion is a random 3-D point cloud moving rigidly (rotation about a random axis plus a
translation, both drifting smoothly); the points are projected by an affine (scaled orthographic)
camera, so the trajectories of one motion span a 3-D affine subspace of R^(2F), the model the
ranking features test.
"""

import numpy as np

from cvfs.base import check_random_state

__all__ = ["make_rigid_motions"]


def _rotation(axis, angle):
    axis = axis / np.linalg.norm(axis)
    kx = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def make_rigid_motions(n_motions=2, n_points=150, n_frames=20, *, noise=0.002, speed=1.0,
                       random_state=None):
    """Trajectories of ``n_motions`` rigid bodies seen by an affine camera.

    Parameters
    ----------
    n_motions : int, default 2
    n_points : int, default 150
        Total trajectories, split as evenly as possible between the motions.
    n_frames : int, default 20
    noise : float, default 0.002
        Standard deviation of Gaussian tracking noise (normalised units, ~[-1, 1] image).
    speed : float, default 1.0
        Scales rotation and translation per frame.
    random_state : None, int or Generator

    Returns
    -------
    points : ndarray of shape (n_points, n_frames, 2)
        Image coordinates in roughly [-1, 1].
    labels : ndarray of shape (n_points,), int64
        Motion of each trajectory, 0..n_motions-1.

    Raises
    ------
    ValueError
        If ``n_motions < 1``, ``n_frames < 2`` or fewer than 4 points per motion.
    """
    if n_motions < 1 or n_frames < 2 or n_points < 4 * n_motions:
        raise ValueError(f"need n_motions >= 1, n_frames >= 2 and n_points >= 4 * n_motions; "
                         f"got {n_motions}, {n_frames}, {n_points}")
    rng = check_random_state(random_state)
    sizes = np.full(n_motions, n_points // n_motions)
    sizes[: n_points % n_motions] += 1
    pts, labels = [], []
    for m, size in enumerate(sizes):
        cloud = rng.uniform(-0.25, 0.25, size=(size, 3))
        centre = np.append(rng.uniform(-0.5, 0.5, size=2), 0.0)
        axis = rng.normal(size=3)
        omega = speed * rng.uniform(0.03, 0.08) * rng.choice([-1, 1])
        vel = speed * np.append(rng.uniform(-0.03, 0.03, size=2), 0.0)
        traj = np.empty((size, n_frames, 2))
        for f in range(n_frames):
            R = _rotation(axis, omega * f)
            world = cloud @ R.T + centre + vel * f
            traj[:, f] = world[:, :2]  # orthographic camera
        pts.append(traj)
        labels.append(np.full(size, m))
    points = np.concatenate(pts) + rng.normal(scale=noise, size=(n_points, n_frames, 2))
    labels = np.concatenate(labels).astype(np.int64)
    perm = rng.permutation(n_points)
    return points[perm], labels[perm]
