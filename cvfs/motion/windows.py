"""Segmentation of partial trajectories by overlapping time windows, without completion.

Long sequences lose and gain tracks: with 25-70 % of the entries missing, few tracks overlap in
time and a low-rank completion of the whole trajectory matrix has little to hold on to. Here
the sequence is cut into overlapping windows of ``W`` frames instead (stride ``W // 2``). In each
window the tracks observed in every one of its frames form a complete, short sequence, which is
segmented with K given by the complete-data pipeline (the caller's ``segment_complete``). The
windows' labellings are then made into one (a cluster ensemble by relabelling and voting,
Dudoit & Fridlyand): windows are aligned one by one to the labels voted so far, each by the
permutation that agrees best on the tracks they share (Hungarian matching of the K x K
contingency table), most-shared window first; then a few passes realign every window to the
current vote. A track observed in no window of ``W`` frames is given the motion whose tracks
explain its observed frames best (residual to each motion's 3-D affine subspace over those
frames).

Windows suit tracks that start and stop (each observed over one interval of frames, as a
tracker's); missing entries scattered inside tracks leave few complete tracks in any window, and
those trajectories are completed at rank 4K instead (:mod:`cvfs.motion.missing`).

The window length follows the tracks: half the median length of the tracks' longest observed
run, at least :data:`MIN_WINDOW` frames (a 3-D affine subspace needs a few frames to be told
from a neighbouring one) and at most the sequence.

References
----------
S. Dudoit, J. Fridlyand, "Bagging to improve the accuracy of a clustering procedure",
Bioinformatics 2003 (relabelling and voting). R. Vidal, R. Tron, R. Hartley, "Multiframe motion
segmentation with missing data using PowerFactorization and GPCA", IJCV 2008.
"""

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["MIN_CONTIGUOUS", "MIN_WINDOW", "align_labellings", "assign_by_residual",
           "contiguous_share", "segment_windows", "time_windows", "window_length"]

MIN_WINDOW = 5
# windows are used when at least this share of the observed entries lie in their track's longest
# run (tracks that start and stop, as a tracker's); scattered missing entries are completed instead
MIN_CONTIGUOUS = 0.9
# realignment passes of every window to the current vote
_PASSES = 3


def _longest_runs(visible):
    """Length of each track's longest run of consecutive observed frames."""
    vis = np.asarray(visible, dtype=bool)
    best = np.zeros(vis.shape[0], dtype=np.int64)
    run = np.zeros(vis.shape[0], dtype=np.int64)
    for f in range(vis.shape[1]):
        run = np.where(vis[:, f], run + 1, 0)
        np.maximum(best, run, out=best)
    return best


def contiguous_share(visible):
    """Share of the observed entries that lie in their track's longest observed run (1 when
    every track is observed over one interval of frames)."""
    vis = np.asarray(visible, dtype=bool)
    return float(_longest_runs(vis).sum() / max(1, int(vis.sum())))


def window_length(visible, min_window=MIN_WINDOW):
    """Frames per window: half the median longest observed run, within [min_window, F]."""
    vis = np.asarray(visible, dtype=bool)
    n_frames = vis.shape[1]
    half = int(np.median(_longest_runs(vis))) // 2
    return int(min(n_frames, max(min_window, half)))


def time_windows(n_frames, window):
    """First frames of the windows of ``window`` frames at stride ``window // 2``, the last
    window ending at the last frame."""
    window = min(int(window), int(n_frames))
    last = n_frames - window
    starts = set(range(0, last + 1, max(1, window // 2)))
    starts.add(last)
    return sorted(starts)


def _permutation(lab, current, n_motions):
    """The map of a window's labels onto ``current`` labels agreeing on most tracks."""
    table = np.zeros((n_motions, n_motions))
    np.add.at(table, (lab, current), 1)
    rows, cols = linear_sum_assignment(-table)
    perm = np.empty(n_motions, dtype=np.int64)
    perm[rows] = cols
    return perm


def align_labellings(labellings, n_points, n_motions, passes=_PASSES):
    """One labelling from window labellings of overlapping subsets of the tracks.

    Parameters
    ----------
    labellings : list of (indices, labels)
        ``labels[j]`` in 0..K-1 is the motion of track ``indices[j]`` in that window.
    n_points : int
        P.
    n_motions : int
        K.
    passes : int, default 3
        Realignments of every window to the current vote.

    Returns
    -------
    labels : ndarray of shape (P,), int64
        -1 for the tracks in no window.
    """
    labels = np.full(n_points, -1, dtype=np.int64)
    if not labellings:
        return labels
    votes = np.zeros((n_points, n_motions))
    first = max(range(len(labellings)), key=lambda i: labellings[i][0].size)
    idx, lab = labellings[first]
    votes[idx, lab] += 1
    todo = set(range(len(labellings))) - {first}
    while todo:
        seen = votes.sum(axis=1) > 0
        i = max(todo, key=lambda j: int(seen[labellings[j][0]].sum()))
        idx, lab = labellings[i]
        shared = seen[idx]
        perm = _permutation(lab[shared], votes[idx[shared]].argmax(axis=1), n_motions)
        votes[idx, perm[lab]] += 1
        todo.remove(i)
    for _ in range(passes):
        current = votes.argmax(axis=1)
        votes[:] = 0
        for idx, lab in labellings:
            votes[idx, _permutation(lab, current[idx], n_motions)[lab]] += 1
    covered = votes.sum(axis=1) > 0
    labels[covered] = votes[covered].argmax(axis=1)
    return labels


def assign_by_residual(points, visible, labels, n_motions):
    """Labels for the tracks labelled -1: the motion whose labelled tracks, observed in every
    frame the track is observed in, span the 3-D affine subspace closest to it over those
    frames (a motion needs 4 such tracks); the label of the nearest co-observed track when no
    motion has them.

    Returns
    -------
    labels : ndarray of shape (P,), int64
        A copy with every track labelled.
    """
    pts = np.asarray(points, dtype=np.float64)
    vis = np.asarray(visible, dtype=bool)
    out = np.asarray(labels, dtype=np.int64).copy()
    known = out >= 0
    for i in np.flatnonzero(~known):
        frames = vis[i]
        support = known & vis[:, frames].all(axis=1)
        x = pts[i, frames].ravel()
        best, best_res = -1, np.inf
        for k in range(n_motions):
            members = np.flatnonzero(support & (out == k))
            if members.size < 4:
                continue
            X = pts[members][:, frames].reshape(members.size, -1)
            mean = X.mean(axis=0)
            _, s, vt = np.linalg.svd(X - mean, full_matrices=False)
            basis = vt[:min(3, members.size - 1, X.shape[1] - 1)]
            d = x - mean
            res = float(d @ d - np.sum((basis @ d) ** 2))
            if res < best_res:
                best, best_res = k, res
        if best < 0:
            both = known & (vis & frames).any(axis=1)
            cand = np.flatnonzero(both) if both.any() else np.flatnonzero(known)
            dist = [np.nanmean(np.linalg.norm(pts[j, frames & vis[j]] - pts[i, frames & vis[j]],
                                              axis=-1)) if (frames & vis[j]).any() else np.inf
                    for j in cand]
            best = int(out[cand[int(np.argmin(dist))]])
        out[i] = best
    return out


def segment_windows(points, n_motions, visible, segment_complete, *, window=None):
    """Segment partial trajectories window by window and merge the windows' labellings.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Validated coordinates (any value where not visible).
    n_motions : int
        K.
    visible : ndarray of shape (P, F), bool
        Validated mask (every track observed in at least 2 frames).
    segment_complete : callable
        ``segment_complete(points_window, K)`` -> labels in 0..K-1 for complete trajectories
        ``(P_w, W, 2)``.
    window : int, optional
        Frames per window; default :func:`window_length`.

    Returns
    -------
    labels : ndarray of shape (P,), int64 or None
        In 0..K-1; None when the missing entries are scattered (:func:`contiguous_share` below
        :data:`MIN_CONTIGUOUS`) or no window holds 4 complete tracks per motion: the caller
        completes the trajectories instead.
    """
    pts = np.asarray(points, dtype=np.float64)
    vis = np.asarray(visible, dtype=bool)
    if contiguous_share(vis) < MIN_CONTIGUOUS:
        return None
    n_points, n_frames = vis.shape
    width = window_length(vis) if window is None else int(window)
    labellings = []
    for start in time_windows(n_frames, width):
        idx = np.flatnonzero(vis[:, start:start + width].all(axis=1))
        if idx.size < 4 * n_motions:
            continue
        lab = np.asarray(segment_complete(pts[idx, start:start + width], n_motions))
        labellings.append((idx, lab.astype(np.int64)))
    if not labellings:
        return None
    labels = align_labellings(labellings, n_points, n_motions)
    if (labels < 0).any():
        labels = assign_by_residual(pts, vis, labels, n_motions)
    return labels
