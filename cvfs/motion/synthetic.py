"""Synthetic rigid-motion trajectories under an affine camera (deterministic problem factory).

Each motion is a random 3-D point cloud moving rigidly (rotation about a random axis plus a
translation, both drifting smoothly); the points are projected by an affine (scaled orthographic)
camera, so the trajectories of one motion span a 3-D affine subspace of R^(2F), the model the
ranking features test.
"""

import numpy as np

from cvfs.base import check_random_state

__all__ = ["make_rigid_motions", "partial_track_mask"]


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


def partial_track_mask(n_points, n_frames, missing=0.5, *, random_state=None):
    """Visibility of tracks that start and stop, as a tracker's: each track observed over one
    interval of frames.

    Parameters
    ----------
    n_points, n_frames : int
    missing : float in [0, 1), default 0.5
        Target share of missing entries: track ``i`` lasts ``F (1 - missing) u_i`` frames,
        ``u_i`` uniform on [0.5, 1.5], clipped to [2, F]; its first frame is uniform over the
        starts that fit.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    visible : ndarray of shape (n_points, n_frames), bool
    """
    if not 0.0 <= float(missing) < 1.0:
        raise ValueError(f"missing must be in [0, 1); got {missing}")
    if n_frames < 2:
        raise ValueError(f"n_frames must be at least 2; got {n_frames}")
    rng = check_random_state(random_state)
    length = np.clip(np.round(n_frames * (1.0 - missing) * rng.uniform(0.5, 1.5, n_points)),
                     2, n_frames).astype(np.int64)
    start = (rng.random(n_points) * (n_frames - length + 1)).astype(np.int64)
    frames = np.arange(n_frames)
    return (frames >= start[:, None]) & (frames < (start + length)[:, None])
