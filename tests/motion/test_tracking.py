"""The tracker's extra density on independently moving regions (rendered scenes, fast)."""

import cv2
import numpy as np
import pytest

from cvfs.motion.tracking import MOVING_TOL, TrackerSettings, off_dominant_motion, track_points


def _blobs(rng, h, w, base, spread, n):
    img = np.full((h, w), base, np.uint8)
    for _ in range(n):
        c = int(np.clip(base + rng.integers(-spread, spread + 1), 0, 255))
        x, y, r = int(rng.integers(0, w)), int(rng.integers(0, h)), int(rng.integers(2, 5))
        cv2.rectangle(img, (x - r, y - r), (x + r, y + r), c, -1)
    return img


def _walker_scene(n_frames=10, pan=(0.0, 0.0), seed=0):
    """A strongly textured background (moving by ``pan`` px per frame) and a small, faintly
    textured square walking right by 1.5 px per frame; frames and the square's box per frame."""
    rng = np.random.default_rng(seed)
    h, w, pad = 160, 200, 40
    bg = _blobs(rng, h + 2 * pad, w + 2 * pad, 60, 190, 1800)
    obj = _blobs(rng, 44, 44, 128, 30, 60)
    frames, boxes = [], []
    for f in range(n_frames):
        M = np.float32([[1, 0, -pad + pan[0] * f], [0, 1, -pad + pan[1] * f]])
        frame = cv2.warpAffine(bg, M, (w, h), flags=cv2.INTER_LINEAR)
        x0, y0 = 70 + 1.5 * f, 58.0
        M = np.float32([[1, 0, x0], [0, 1, y0]])
        warped = cv2.warpAffine(obj, M, (w, h), flags=cv2.INTER_LINEAR)
        mask = cv2.warpAffine(np.full(obj.shape, 255, np.uint8), M, (w, h),
                              flags=cv2.INTER_NEAREST)
        frame[mask > 0] = warped[mask > 0]
        frames.append(frame)
        boxes.append((x0, y0, x0 + 44, y0 + 44))
    return frames, boxes


def _follows_object(tracks, boxes):
    """Tracks starting inside the square and ending where it took them (within 1 px)."""
    x0, y0, x1, y1 = boxes[0]
    p, q = tracks[:, 0], tracks[:, -1]
    inside = (p[:, 0] >= x0) & (p[:, 0] <= x1) & (p[:, 1] >= y0) & (p[:, 1] <= y1)
    moved = np.subtract(boxes[-1][:2], boxes[0][:2])
    return inside & (np.linalg.norm(q - p - moved, axis=1) <= 1.0)


def _far_from_object(tracks, boxes, margin=8.0):
    x0, y0, x1, y1 = boxes[0]
    x, y = tracks[:, 0, 0], tracks[:, 0, 1]
    return (x < x0 - margin) | (x > x1 + margin) | (y < y0 - margin) | (y > y1 + margin)


@pytest.mark.parametrize("pan", [(0.0, 0.0), (-2.0, 1.0)])
def test_moving_region_gets_denser_tracks(pan):
    frames, boxes = _walker_scene(pan=pan)
    plain = track_points(frames, moving_density=1)
    dense = track_points(frames)  # default moving_density=3
    # the faint square holds few default-density tracks; the extra density adds its own
    n_plain, n_dense = _follows_object(plain, boxes).sum(), _follows_object(dense, boxes).sum()
    assert n_plain <= 3 and n_dense >= 12
    # away from the square the density is the ordinary one: no extra track there but (with a
    # pan) background corners that the square covers and drags along its edge
    extra_far = _far_from_object(dense, boxes).sum() - _far_from_object(plain, boxes).sum()
    assert 0 <= extra_far <= (0 if pan == (0.0, 0.0) else 2)
    # the default-density tracks are unchanged
    d = np.linalg.norm(plain[:, None, 0] - dense[None, :, 0], axis=2).min(axis=1)
    assert np.all(d < 1e-9)


def test_off_dominant_motion_measures_the_independent_motion():
    pan = (-2.0, 1.0)
    frames, boxes = _walker_scene(pan=pan)
    pts = track_points(frames)
    on, far = _follows_object(pts, boxes), _far_from_object(pts, boxes)
    assert on.sum() >= 12 and far.sum() >= 80
    dist = off_dominant_motion(pts)
    # the square moves (1.5, 0) px per frame, the background ``pan``: apart by 9 times the
    # difference at frame 9
    apart = 9 * np.hypot(1.5 - pan[0], 0.0 - pan[1])
    assert np.all(np.abs(dist[on] - apart) < 1.0)
    # the background follows the pan, but for the few corners the square covers and drags
    assert np.quantile(dist[far], 0.9) < 0.5 and np.sum(dist[far] > MOVING_TOL) <= 4
    flag = off_dominant_motion(pts, moving=True)
    assert flag[on].all() and flag[far].sum() <= 4
    # partial tracks (NaN outside their span): measured over the frames they are seen
    vis = np.ones(pts.shape[:2], bool)
    vis[::2, 6:] = False
    part = np.where(vis[..., None], pts, np.nan)
    flag_part = off_dominant_motion(part, vis, moving=True)
    assert flag_part[on].all() and flag_part[far].sum() <= 4
    # the dominant motion is that of the tracks it is fitted to
    assert off_dominant_motion(pts, fit=far, moving=True)[on].all()
    by_object = off_dominant_motion(pts, fit=on, moving=True)
    assert not by_object[on].any() and by_object[far].mean() > 0.95
    # too few tracks seen: nothing to fit, no distance
    assert np.all(off_dominant_motion(pts[:5]) == 0)


def test_moving_density_setting():
    assert TrackerSettings().moving_density == 3
    with pytest.raises(ValueError, match="moving_density must be an int >= 1"):
        TrackerSettings(moving_density=0)
    frames, boxes = _walker_scene()
    # the extra tracks stay within max_points
    n = len(track_points(frames, moving_density=1))
    capped = track_points(frames, max_points=n + 5)
    assert len(capped) == n + 5 and _follows_object(capped, boxes).sum() >= 3
    pts, vis = track_points(frames, partial=True)
    assert vis.shape == pts.shape[:2] and vis[:, 0].sum() < len(pts)  # re-detected tracks too
    seen = vis.all(axis=1)
    assert _follows_object(pts[seen], boxes).sum() >= 12


def test_partial_redetection_ignores_the_extra_candidates():
    """With partial tracks, corners re-detected later are the same with or without the extra
    density (the extra candidates, dense everywhere until the end, do not block them)."""
    frames, boxes = _walker_scene(pan=(-2.0, 1.0))
    plain, vis_plain = track_points(frames, partial=True, moving_density=1)
    dense, vis_dense = track_points(frames, partial=True)
    late_plain = plain[~vis_plain[:, 0]]
    late_dense = dense[~vis_dense[:, 0]]
    assert len(late_plain) > 10 and len(late_dense) == len(late_plain)
    assert np.allclose(np.nan_to_num(late_dense, nan=-1), np.nan_to_num(late_plain, nan=-1))
    assert _follows_object(dense[vis_dense.all(axis=1)], boxes).sum() >= 12
