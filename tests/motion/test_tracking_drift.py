"""The tracker's appearance check: each track's first patch, affinely aligned to every frame,
must keep a normalised cross-correlation of at least ``min_ncc`` (rendered scenes, fast)."""

import cv2
import numpy as np
import pytest

from cvfs.motion.tracking import PatchTemplates, TrackerSettings, patch_ncc, track_points
from tests.motion.test_tracking import _blobs


def _occluder_scene(n_frames=12, pan=(0.0, 0.0), occluder=True, seed=0, speed=3.0):
    """A textured background (moving by ``pan`` px per frame) and, with ``occluder``, a textured
    40 px square sliding right by ``speed`` px per frame over it (anti-aliased edges); frames
    and the square's box per frame."""
    rng = np.random.default_rng(seed)
    h, w, pad = 120, 200, 40
    bg = _blobs(rng, h + 2 * pad, w + 2 * pad, 60, 190, 1200)
    obj = _blobs(rng, 40, 40, 128, 120, 60)
    frames, boxes = [], []
    for f in range(n_frames):
        M = np.float32([[1, 0, -pad + pan[0] * f], [0, 1, -pad + pan[1] * f]])
        frame = cv2.warpAffine(bg, M, (w, h), flags=cv2.INTER_LINEAR)
        x0, y0 = 20 + speed * f, 40.0
        if occluder:
            M = np.float32([[1, 0, x0], [0, 1, y0]])
            warped = cv2.warpAffine(obj, M, (w, h), flags=cv2.INTER_LINEAR)
            alpha = cv2.warpAffine(np.full(obj.shape, 1.0, np.float32), M, (w, h),
                                   flags=cv2.INTER_LINEAR)
            frame = np.rint(frame * (1 - alpha) + warped * alpha).astype(np.uint8)
        frames.append(frame)
        boxes.append((x0, y0, x0 + 40, y0 + 40))
    return frames, boxes


def _starts_outside(tracks, box, margin=2.0):
    x0, y0, x1, y1 = box
    x, y = tracks[:, 0, 0], tracks[:, 0, 1]
    return (x < x0 - margin) | (x > x1 + margin) | (y < y0 - margin) | (y > y1 + margin)


def _dragged(tracks, box, tol=2.0):
    """Tracks starting on the (still) background that end more than ``tol`` px away."""
    last = np.array([t[np.flatnonzero(np.isfinite(t[:, 0]))[-1]] for t in tracks])
    return _starts_outside(tracks, box) & (np.linalg.norm(last - tracks[:, 0], axis=1) > tol)


def _on_square(tracks, boxes):
    moved = np.subtract(boxes[-1][:2], boxes[0][:2])
    return ~_starts_outside(tracks, boxes[0], margin=0.0) & (
        np.linalg.norm(tracks[:, -1] - tracks[:, 0] - moved, axis=1) <= 1.0)


def test_drift_check_drops_the_tracks_an_occluder_drags():
    frames, boxes = _occluder_scene(seed=0)
    off = track_points(frames, min_ncc=-1, moving_density=1)
    on = track_points(frames, moving_density=1)  # default min_ncc 0.5
    # without the check the sliding square carries background corners off with it (the
    # forward-backward check passes them); with it none is left
    assert _dragged(off, boxes[0]).sum() == 3 and _dragged(on, boxes[0]).sum() == 0
    # the tracks it keeps are those of the check-free run minus the dragged ones and a few
    # that the square covers; the square's own tracks are all kept
    d = np.linalg.norm(on[:, None, 0] - off[None, :, 0], axis=2).min(axis=1)
    assert np.all(d < 1e-9) and len(on) >= len(off) - 10
    assert _on_square(on, boxes).sum() == _on_square(off, boxes).sum() == 7


def test_drift_check_over_several_scenes():
    """Tracks that keep part of their patch (straddling the square's edge) or that the square
    drags onto a look-alike can pass; those carried more than 5 px are mostly dropped."""
    carried = np.zeros(2, dtype=int)
    for seed in range(8):
        frames, boxes = _occluder_scene(seed=seed)
        for i, min_ncc in enumerate((-1, 0.5)):
            tracks = track_points(frames, min_ncc=min_ncc, moving_density=1)
            carried[i] += _dragged(tracks, boxes[0], tol=5.0).sum()
    assert carried[0] >= 15 and carried[1] <= carried[0] // 4


def test_drift_check_keeps_every_track_of_a_translated_frame():
    frames, _ = _occluder_scene(pan=(-2.0, 1.0), occluder=False)
    off = track_points(frames, min_ncc=-1, moving_density=1)
    on = track_points(frames, moving_density=1)
    assert len(off) >= 80 and np.array_equal(on, off)


def test_partial_tracks_end_where_the_drift_check_fails():
    frames, boxes = _occluder_scene()
    kw = dict(partial=True, min_frames=2, moving_density=1)
    off, vis_off = track_points(frames, min_ncc=-1, **kw)
    on, vis_on = track_points(frames, **kw)
    assert _dragged(off, boxes[0]).sum() >= 2 and _dragged(on, boxes[0]).sum() == 0
    # a dragged track keeps the frames before the drift: every track of the check-free run
    # that starts in the first frame is there, as long or shorter
    first_off, first_on = off[vis_off[:, 0]], on[vis_on[:, 0]]
    assert len(first_on) == len(first_off)
    assert np.array_equal(first_on[:, 0], first_off[:, 0])
    assert np.all(vis_on[vis_on[:, 0]].sum(axis=1) <= vis_off[vis_off[:, 0]].sum(axis=1))


def test_patch_ncc_is_invariant_to_an_affine_warp_and_gain():
    rng = np.random.default_rng(3)
    img = cv2.GaussianBlur(_blobs(rng, 160, 160, 100, 120, 900), (3, 3), 0)
    pts = np.array([[60.0, 70.0], [80.5, 90.25], [100.0, 60.0], [70.0, 100.0]])
    # rotate by 8 degrees and scale by 1.1 about the centre, then gain 0.8 and bias 30
    M = cv2.getRotationMatrix2D((80, 80), 8, 1.1)
    warped = np.clip(cv2.warpAffine(img.astype(np.float32), M, (160, 160),
                                    flags=cv2.INTER_LINEAR) * 0.8 + 30, 0, 255)
    moved = pts @ M[:, :2].T + M[:, 2]
    assert np.all(patch_ncc(img, warped, pts, moved) > 0.95)
    # compared without the warp (the patches only translated) the same points score lower
    t = PatchTemplates(img, pts, 15)
    plain = np.array([np.corrcoef(a, b)[0, 1] for a, b in zip(
        t._T, PatchTemplates(warped.astype(np.float32), moved, 15)._T)])
    assert np.all(plain < patch_ncc(img, warped, pts, moved))
    # a patch against another one of the image: lower (the warp's six parameters let a patch
    # of flat rectangles fit part of another one)
    other = pts[::-1] + 7.0
    assert np.all(patch_ncc(img, img, pts, other) < 0.8)
    # identical frames: 1
    assert np.allclose(patch_ncc(img, img, pts, pts), 1.0, atol=1e-4)


def test_patch_ncc_errors():
    img = np.zeros((20, 20), np.uint8)
    with pytest.raises(ValueError, match="ref_points and points must both be of shape"):
        patch_ncc(img, img, np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="size must be an int >= 3; got 2"):
        patch_ncc(img, img, np.zeros((3, 2)), np.zeros((3, 2)), size=2)


@pytest.mark.parametrize("value", [1, 1.5, -1.01, float("nan"), "0.5", True])
def test_min_ncc_setting_errors(value):
    with pytest.raises(ValueError, match=r"min_ncc must be a number in \[-1, 1\)"):
        TrackerSettings(min_ncc=value)


def test_min_ncc_setting():
    assert TrackerSettings().min_ncc == 0.5
    assert TrackerSettings(min_ncc=-1).min_ncc == -1
