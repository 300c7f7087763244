"""Face keypoints fused with the face shape.

A window classifier localises a keypoint well across an edge and poorly along it: the chin
detector fires along the jaw, the nose-tip detector over the blob of the nose. After the
refinement, :func:`fuse_keypoints` moves each keypoint of a face part of the way toward the
position the face's other keypoints give it through the shape model, with per-keypoint gains
along and across the eye line (``FaceModel.fusion_gain``) learned on held-out faces by
:func:`fit_fusion_gains`.
"""

import math

import numpy as np

from cvfs.keypoints.faces import _fit_similarity_modes

__all__ = ["fit_fusion_gains", "fuse_keypoints"]


def _fusion_offsets(face, model):
    """Per keypoint of ``model``: the face's keypoint (complex; NaN where missing) and the
    offset from it to the position the face's other keypoints predict, in the face frame
    (real part along the eye line, in IED; NaN where fewer than three others are found)."""
    names = model.shape.names
    n = len(names)
    z = np.array([complex(*face.keypoints[k][:2]) if k in face.keypoints else complex(
        math.nan, math.nan) for k in names])
    ok = np.isfinite(z)
    off = np.full(n, complex(math.nan, math.nan))
    u = np.exp(1j * math.radians(face.roll)) * face.ied  # face frame -> image pixels
    w_all = 1.0 / model.loc_sigma ** 2
    for k in np.flatnonzero(ok):
        idx = np.flatnonzero(ok & (np.arange(n) != k))
        if len(idx) < 3 or not (face.ied > 0):
            continue
        c, t, b = _fit_similarity_modes(model, idx, np.column_stack([z[idx].real,
                                                                     z[idx].imag]), w_all[idx])
        m = model.shape.mean[k] + ((b @ model.shape.modes).reshape(-1, 2)[k] if len(b) else 0)
        pred = c * (m[0] + 1j * m[1]) + t
        off[k] = (pred - z[k]) / u
    return z, off


def fuse_keypoints(faces, model):
    """Faces with each keypoint moved toward the position its face's other keypoints predict.

    For keypoint k of a face, the shape model (similarity plus principal modes) is fitted to
    the face's other keypoints, weighted by their precision ``1 / loc_sigma^2``; the keypoint
    moves ``model.fusion_gain[k, 0]`` of the way to that prediction along the eye line and
    ``fusion_gain[k, 1]`` across it. Probabilities are unchanged; missing keypoints stay
    missing; a keypoint with fewer than three found neighbours is not moved.

    Parameters
    ----------
    faces : list of Face
    model : FaceModel

    Returns
    -------
    faces : list of Face
        New faces, in the same order (the input when every gain is zero).
    """
    from dataclasses import replace

    gain = model.fusion_gain
    if not gain.any():
        return list(faces)
    names = model.shape.names
    out = []
    for f in faces:
        z, off = _fusion_offsets(f, model)
        u = np.exp(1j * math.radians(f.roll)) * f.ied
        kps = dict(f.keypoints)
        for k, name in enumerate(names):
            if np.isfinite(off[k]):
                zk = z[k] + (gain[k, 0] * off[k].real + 1j * gain[k, 1] * off[k].imag) * u
                kps[name] = (float(zk.real), float(zk.imag), kps[name][2])
        out.append(replace(f, keypoints=kps))
    return out


def _mirror_groups(names):
    """Keypoint indices grouped with their mirror images (``left`` <-> ``right`` in the name)."""
    swap = {k: k.replace("left", "\0").replace("right", "left").replace("\0", "right")
            for k in names}
    groups, seen = [], set()
    for i, k in enumerate(names):
        if i in seen:
            continue
        g = [i] + [j for j, m in enumerate(names) if j != i and m == swap[k]]
        seen.update(g)
        groups.append(g)
    return groups


def fit_fusion_gains(faces, targets, ieds, model, *, tol=0.05,
                     grid=(0.0, 0.25, 0.5, 0.75, 1.0), alpha=0.05):
    """Per-keypoint gains of :func:`fuse_keypoints` learned on annotated faces.

    For each keypoint and its mirror image (``left`` <-> ``right``: one pair of gains, as the
    face is symmetric), the pair of gains (along, across the eye line) from ``grid`` that puts
    the most fused keypoints within ``tol`` IED of their annotation (the smallest gains among
    ties, so a keypoint the rest of the face does not help keeps its detection). The gains
    are kept only where they help significantly: a one-sided sign test on the keypoints they
    bring within ``tol`` against those they take out (level ``alpha``); else zero.

    Parameters
    ----------
    faces : list of Face
        Found faces (refined), each matched to one annotated face.
    targets : ndarray of shape (len(faces), n, 2)
        The matched annotated face's keypoints in ``model.shape.names`` order (NaN where not
        annotated).
    ieds : ndarray of shape (len(faces),)
        Inter-eye distance of each annotated face.
    model : FaceModel
    tol : float
        Distance (IED) within which a keypoint counts as right (the AP rule's 5%).
    grid : sequence of float
        Gains tried, in [0, 1], 0 among them.
    alpha : float
        Level of the sign test (1: keep the best gains whatever their support).

    Returns
    -------
    gain : ndarray of shape (n, 2)
    counts : ndarray of shape (n, 2)
        Keypoints within ``tol`` with no fusion and with the chosen gains (per keypoint).

    Raises
    ------
    ValueError
        If the shapes disagree or the grid lacks 0 or leaves [0, 1].
    """
    from scipy.stats import binomtest

    names = model.shape.names
    n = len(names)
    targets = np.asarray(targets, np.float64)
    ieds = np.asarray(ieds, np.float64).reshape(-1)
    if targets.shape != (len(faces), n, 2) or ieds.shape != (len(faces),):
        raise ValueError(f"targets must be ({len(faces)}, {n}, 2) and ieds ({len(faces)},); got "
                         f"{targets.shape} and {ieds.shape}")
    grid = np.asarray(grid, np.float64)
    if not (((grid >= 0) & (grid <= 1)).all() and (grid == 0).any()):
        raise ValueError(f"grid must hold gains in [0, 1], 0 among them; got {grid.tolist()}")
    z = np.full((len(faces), n), complex(math.nan, math.nan))
    off = np.full((len(faces), n), complex(math.nan, math.nan))
    u = np.ones(len(faces), complex)
    for i, f in enumerate(faces):
        z[i], off[i] = _fusion_offsets(f, model)
        u[i] = np.exp(1j * math.radians(f.roll)) * f.ied
    t = targets[..., 0] + 1j * targets[..., 1]
    gain, counts = np.zeros((n, 2)), np.zeros((n, 2), np.int64)
    order = sorted(((a, b) for a in grid for b in grid), key=lambda g: (g[0] + g[1], g))
    ok = np.isfinite(z) & np.isfinite(t) & np.isfinite(off) & (ieds > 0)[:, None]
    for group in _mirror_groups(names):
        right = np.zeros((len(order), len(faces), n), bool)
        for h, (a, b) in enumerate(order):
            for k in group:
                m = ok[:, k]
                zf = z[m, k] + (a * off[m, k].real + 1j * b * off[m, k].imag) * u[m]
                right[h, m, k] = np.abs(zf - t[m, k]) < tol * ieds[m]
        hits = right.sum(axis=1)
        best = int(np.argmax(hits[:, group].sum(axis=1)))  # the first maximum: smallest gains
        won = int((right[best][:, group] & ~right[0][:, group]).sum())
        lost = int((right[0][:, group] & ~right[best][:, group]).sum())
        if won + lost and binomtest(won, won + lost, 0.5, alternative="greater").pvalue > alpha:
            best = 0
        gain[group] = order[best]
        counts[group, 0] = hits[0, group]  # order[0] = (0, 0): no fusion
        counts[group, 1] = hits[best, group]
    return gain, counts
