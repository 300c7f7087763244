"""Coarse-to-fine scan of a level's window grid.

The windows whose top-left row and column are multiples of ``stride`` (the lattice) are scored
first, by the soft cascades with the rejection threshold after feature ``j`` of ``k`` lowered by
``margin * j / k`` (a looser cascade, :meth:`cvfs.keypoints._scan.ScanPlan.scores`); every
window within ``stride - 1`` rows and columns of a lattice window that passes it for some
classifier is a candidate, and the candidates and their 8 neighbours are then scored by the
cascades themselves. A candidate's score and its neighbours' equal those of a
scan of every window, so the candidates' peaks and sub-pixel offsets are those of the full
scan; a peak of the full scan is missed only when no lattice window next to it passes the
looser cascade, mostly low-scoring peaks (:data:`COARSE_MARGIN`). Lowering the later thresholds
more than the first ones keeps the looser cascade cheap: most windows are rejected after a few
features, where the thresholds barely move.
"""

import math

import numpy as np

from cvfs._jit import njit

__all__ = ["COARSE_MARGIN", "coarse_to_fine_scores", "lattice_neighbours"]

#: Default margin (score units of the additive classifiers) by which the lattice's last cascade
#: threshold is lowered: on HELEN training photos brought to Caltech WebFaces' face sizes
#: (``benchmarks/keypoints/keypoints_coarse_to_fine.py``) the coarse-to-fine scan of the
#: upsampled levels at stride 2 finds 90% of the full scan's peaks, 95% of those scoring > 0
#: and all of those scoring > 2, on 30% of the windows.
COARSE_MARGIN = 1.0


@njit(cache=True)
def lattice_neighbours(seed, row0, stride, n_rows, n_cols):
    """Candidate windows around the lattice windows ``seed`` and the windows to score.

    Parameters
    ----------
    seed : ndarray of bool, shape (n_lattice_rows, n_lattice_cols)
        Lattice window ``(i, j)`` has its top-left at grid row ``row0 + i * stride`` and column
        ``j * stride``.
    row0, stride : int
    n_rows, n_cols : int
        Shape of the window grid.

    Returns
    -------
    candidate : ndarray of bool, shape (n_rows, n_cols)
        Windows within ``stride - 1`` rows and columns of a seed.
    top_left : ndarray of int64, shape (n, 2)
        The candidates and their 8 neighbours inside the grid, in row-major order.
    """
    reach = stride - 1
    candidate = np.zeros((n_rows, n_cols), dtype=np.bool_)
    for i in range(seed.shape[0]):
        r = row0 + i * stride
        for j in range(seed.shape[1]):
            if seed[i, j]:
                c = j * stride
                for rr in range(max(r - reach, 0), min(r + reach + 1, n_rows)):
                    for cc in range(max(c - reach, 0), min(c + reach + 1, n_cols)):
                        candidate[rr, cc] = True
    scored = np.zeros((n_rows, n_cols), dtype=np.bool_)
    n = 0
    for r in range(n_rows):
        for c in range(n_cols):
            if candidate[r, c]:
                for rr in range(max(r - 1, 0), min(r + 2, n_rows)):
                    for cc in range(max(c - 1, 0), min(c + 2, n_cols)):
                        if not scored[rr, cc]:
                            scored[rr, cc] = True
                            n += 1
    top_left = np.empty((n, 2), dtype=np.int64)
    k = 0
    for r in range(n_rows):
        for c in range(n_cols):
            if scored[r, c]:
                top_left[k, 0] = r
                top_left[k, 1] = c
                k += 1
    return candidate, top_left


def coarse_to_fine_scores(plan, band, n_rows, n_cols, row0, stride, margin):
    """Scores of the windows of a band that the coarse-to-fine scan evaluates.

    Parameters
    ----------
    plan : cvfs.keypoints._scan.ScanPlan
    band : cvfs.vision.LevelCache or cvfs.vision.LevelBand
    n_rows, n_cols : int
        Window grid of the band (top-left rows ``0 .. n_rows - 1`` on the band).
    row0 : int
        First lattice row on the band (``0 <= row0 < stride``).
    stride : int
        Lattice step, >= 2.
    margin : float
        By how much the lattice's last cascade threshold is lowered (the others in proportion
        to their features), >= 0.

    Returns
    -------
    scores : ndarray of shape (n_models, n_rows, n_cols)
        The cascades' scores of the windows scored in full, -inf for the others and for
        rejected windows.
    candidate : ndarray of bool, shape (n_rows, n_cols)
        Windows whose 8 neighbours are scored (see :func:`lattice_neighbours`): their peaks
        and sub-pixel offsets are those of a scan of every window.
    n_windows : int
        Windows scored (lattice and fine scan).
    """
    rr = np.arange(row0, n_rows, stride, dtype=np.int64)
    cc = np.arange(0, n_cols, stride, dtype=np.int64)
    tl = np.empty((rr.size * cc.size, 2), dtype=np.int64)
    tl[:, 0] = np.repeat(rr, cc.size)
    tl[:, 1] = np.tile(cc, rr.size)
    loose = plan.scores(band, tl, margin=margin)
    seed = (loose > -math.inf).any(axis=0).reshape(rr.size, cc.size)
    candidate, fine = lattice_neighbours(seed, row0, stride, n_rows, n_cols)
    scores = np.full((plan.ptr.size - 1, n_rows, n_cols), -math.inf)
    if len(fine):
        scores[:, fine[:, 0], fine[:, 1]] = plan.scores(band, fine)
    return scores, candidate, len(tl) + len(fine)
