"""Geometric context between keypoint detectors: rescoring a detection by its partner.

A bottom-up eye detector fires on isolated eye-like patches of the background as readily as on
eyes. A true left-eye detection found on pyramid level ``s`` has a right-eye detection about one
training inter-eye distance to its right (``spacing / s`` original pixels, with ``spacing`` in
level pixels), and vice versa. :func:`pair_rescore` lowers the score of every detection by how
much its best partner is missing:

.. math::

    m_i = \\max_j \\left(s_j - \\tfrac12 \\lVert (p_j - p_i)\\,\\sigma_i / c - d\\,e_x
          \\rVert^2 / \\sigma^2\\right), \\qquad
    s_i' = s_i - w \\min\\bigl(\\mathrm{cap}, \\max(0, \\tau - m_i)\\bigr)

over the partner detections ``j`` within ``gate`` standard deviations of the expected position
(``d = +1`` for a left eye looking right, ``-1`` for a right eye looking left; ``c`` the spacing,
``sigma_i`` the detection's level scale). A detection with a partner scoring at least ``tau`` at
the expected place keeps its score; one without any partner loses ``w * cap``. The penalty form
(rather than adding the partner's score) keeps the order among well-paired detections, and the
cap bounds what a face with one occluded eye can lose.

The default :class:`PairModel` was chosen on training data only (MTFL training images
1,000-2,499, the LFW part, which the shipped eye detector was not trained on, scanned at their
size and downscaled 2x and 3x; ``benchmarks/keypoints/keypoints_context.py``): ``spacing`` is the
median left-to-right offset of true pairs in level pixels (27.3 with the position merged over every
suppressed peak, 25.9 with ``merge_radius=3``; both give mean eye AP 0.732 there), ``sigma``
(0.17 of 0.17 / 0.25; the measured spread is 0.14 / 0.12 per axis), ``weight``, ``tau`` and
``cap`` the best mean eye AP of a 36-setting grid (0.699 without pairing -> 0.732).

References
----------
Felzenszwalb and Huttenlocher, "Pictorial structures for object recognition", IJCV 2005 (parts
scored with their best-placed partner under a Gaussian deformation cost).
"""

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["PairModel", "pair_rescore", "partner_values"]


@dataclass(frozen=True)
class PairModel:
    """Geometry and weights of a left/right keypoint pair.

    Attributes
    ----------
    left, right : str
        Keypoint names (image left and image right).
    spacing : float
        Median distance from the left to the right keypoint of one face, in pyramid-level pixels
        (multiply by 1 / level scale for original pixels).
    sigma : float
        Standard deviation of the partner's offset per axis, in units of ``spacing``.
    weight, tau, cap : float
        Penalty ``weight * min(cap, max(0, tau - m))`` for a best partner value ``m``.
    gate : float
        Partners farther than ``gate * sigma`` (in units of spacing) from the expected place are
        ignored.
    """

    left: str = "left_eye_center"
    right: str = "right_eye_center"
    spacing: float = 27.3
    sigma: float = 0.17
    weight: float = 0.5
    tau: float = 0.0
    cap: float = 2.0
    gate: float = 3.0

    def __post_init__(self):
        for name in ("spacing", "sigma", "gate"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"PairModel.{name} must be a positive finite number; got {v!r}")
        for name in ("weight", "cap"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"PairModel.{name} must be a finite number >= 0; got {v!r}")
        if not np.isfinite(self.tau):
            raise ValueError(f"PairModel.tau must be finite; got {self.tau!r}")
        if self.left == self.right:
            raise ValueError(f"PairModel.left and .right must differ; both are {self.left!r}")

    @property
    def floor(self):
        """Partner scores at or below ``tau - cap`` never change a score."""
        return self.tau - self.cap


def _check(det, name):
    det = np.asarray(det, dtype=np.float64)
    if det.size == 0:
        return np.zeros((0, 4))
    if det.ndim != 2 or det.shape[1] != 4:
        raise ValueError(f"{name} must have shape (n, 4) of x, y, score, scale; got {det.shape}")
    if not (det[:, 3] > 0).all():
        raise ValueError(f"{name}: level scales (column 3) must be positive")
    return det


def partner_values(dets, partners, direction, model):
    """Best partner value of every detection.

    Parameters
    ----------
    dets : ndarray of shape (n, 4)
        x, y, score, level scale of the detections to rescore.
    partners : ndarray of shape (m, 4)
        The partner keypoint's detections (same columns; scores used, scales not).
    direction : {1, -1}
        Where the partner is expected: ``+1`` to the right (``dets`` are left keypoints), ``-1``
        to the left.
    model : PairModel

    Returns
    -------
    m : ndarray of shape (n,)
        ``max_j (s_j - q_ij / 2)`` over partners within the gate, ``q_ij`` the squared offset
        from the expected place in units of ``sigma * spacing / scale_i``; ``-inf`` when none.

    Raises
    ------
    ValueError
        If an array has the wrong shape, a scale is not positive or ``direction`` is not +-1.
    """
    if direction not in (1, -1):
        raise ValueError(f"direction must be 1 or -1; got {direction!r}")
    a, b = _check(dets, "dets"), _check(partners, "partners")
    out = np.full(a.shape[0], -np.inf)
    if a.shape[0] == 0 or b.shape[0] == 0:
        return out
    unit = model.spacing / a[:, 3]  # original pixels per spacing, per detection
    expect = a[:, :2].copy()
    expect[:, 0] += direction * unit
    near = cKDTree(b[:, :2]).query_ball_point(expect, r=model.gate * model.sigma * unit)
    lens = np.fromiter(map(len, near), dtype=np.int64, count=len(near))
    if lens.sum() == 0:
        return out
    i = np.repeat(np.arange(a.shape[0]), lens)
    j = np.fromiter(itertools.chain.from_iterable(near), dtype=np.int64, count=int(lens.sum()))
    q = (((b[j, :2] - expect[i]) / (model.sigma * unit[i])[:, None]) ** 2).sum(axis=1)
    np.maximum.at(out, i, b[j, 2] - 0.5 * q)
    return out


def pair_rescore(left, right, model=None):
    """Rescore left and right detections by their best-placed partner.

    Parameters
    ----------
    left, right : ndarray of shape (n, 4) and (m, 4)
        x, y, score, level scale of the ``model.left`` and ``model.right`` detections of one
        image (original pixels; the scale is the pyramid level a detection was found on, or the
        score-weighted geometric mean of the levels merged into it).
    model : PairModel, optional
        Default: ``PairModel()`` (eye centres, fitted for the shipped eye detector).

    Returns
    -------
    left_scores : ndarray of shape (n,)
    right_scores : ndarray of shape (m,)
        ``s - weight * min(cap, max(0, tau - m))``: never above the input scores.

    Raises
    ------
    ValueError
        If an array has the wrong shape or a scale is not positive.
    """
    model = PairModel() if model is None else model
    left, right = _check(left, "left"), _check(right, "right")
    out = []
    for a, b, d in ((left, right, 1), (right, left, -1)):
        m = partner_values(a, b, d, model)
        out.append(a[:, 2] - model.weight * np.minimum(model.cap, np.maximum(0.0, model.tau - m)))
    return out[0], out[1]
