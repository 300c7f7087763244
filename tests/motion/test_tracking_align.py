"""The appearance check's kernels and template storage give the same bits as their NumPy twins
(``tests/naive.py``), and so do the tracks (rendered scenes, fast)."""

import numpy as np
import pytest

import cvfs.motion.tracking as tracking
from cvfs.motion import _patch_align as pa
from cvfs.motion.tracking import PatchTemplates, _inside, _ncc, _sample, _warp_maps, track_points
from tests import naive
from tests.motion.test_tracking import _walker_scene
from tests.motion.test_tracking_drift import _occluder_scene


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [9, 49, 128, 225, 1000])
def test_row_sums_follow_numpy_pairwise_order(dtype, m):
    rng = np.random.default_rng(m)
    x = (rng.standard_normal((50, m)) * 100).astype(dtype) ** 3
    z = dtype(-0.0)
    got = np.array([pa._row_sum(r, z) for r in x], dtype=dtype)
    assert _same(got, x.sum(axis=1))


def test_kernels_match_their_numpy_twins():
    rng = np.random.default_rng(0)
    frames, _ = _occluder_scene(n_frames=2)
    image = frames[1].astype(np.float32)
    h, w = image.shape
    n, size = 300, 15
    centres = rng.uniform([-5, -5], [w + 5, h + 5], (n, 2))  # some patches leave the frame
    t = PatchTemplates(frames[0], centres + rng.normal(0, 1, (n, 2)), size)
    A = np.eye(2) + rng.normal(0, 0.05, (n, 2, 2))
    d = rng.normal(0, 1, (n, 2))
    rows = np.sort(rng.choice(n, 200, replace=False))
    u, v = t._u[0], t._v[0]
    mx, my = np.empty((2, rows.size, u.size), np.float32)
    pa.warp_maps(centres, A, d, rows, u, v, mx, my)
    assert all(map(_same, (mx, my), _warp_maps(centres[rows], A[rows], d[rows], t._u, t._v)))
    cur = _sample(image, mx, my)
    cur[0] = 7.0  # a flat patch
    err = np.empty(cur.shape, np.float32)
    pa.residuals(cur, mx, my, rows, t._T, t._mu, t._sig, t._seen, h, w, err)
    assert _same(err, naive.patch_residuals(cur, mx, my, t._T[rows], t._mu[rows], t._sig[rows],
                                            t._seen[rows], image.shape))
    dp = rng.normal(0, 0.2, (rows.size, 6)) * rng.choice([1e-4, 1.0, 10.0], (rows.size, 1))
    dp[3, 2], dp[4, 5], dp[5] = -0.0, np.nan, 1e-4
    lin, shift, tol = 0.1, 1.0, 1e-3
    want = naive.patch_step_matrices(dp, A[rows], d[rows], lin, shift, tol)
    Wd, W = np.zeros((2, rows.size, 3, 3))
    keep = np.empty(rows.size, bool)
    pa.step_matrices(dp, A, d, rows, lin, shift, tol, Wd, W, keep)
    assert all(map(_same, (dp, Wd, W, keep), want))
    assert keep.any() and not keep.all()
    ncc = np.empty(rows.size)
    pa.ncc_rows(t._T, cur, rows, t._seen, mx, my, h, w, ncc)
    assert _same(ncc, _ncc(t._T[rows], cur, t._seen[rows] & _inside(image.shape, mx, my)))
    assert ncc[0] == 1.0


def test_templates_added_in_batches_align_as_their_numpy_twin():
    """Templates added over several frames (the storage grows several times) and aligned to
    later frames for a changing subset of tracks: the same correlations and warps, bit for bit,
    as the NumPy twin that concatenates its arrays."""
    frames, _ = _occluder_scene(n_frames=8, pan=(-1.5, 0.5))
    rng = np.random.default_rng(1)
    h, w = frames[0].shape
    pts = rng.uniform([0, 0], [w - 1, h - 1], (7, 2))
    fast, slow = PatchTemplates(frames[0], pts, 15), naive.PatchTemplatesNumPy(frames[0], pts, 15)
    for f in range(1, len(frames)):
        new = rng.uniform([0, 0], [w - 1, h - 1], (5 * f, 2))
        fast.extend(frames[f - 1], new)
        slow.extend(frames[f - 1], new)
        pts = np.vstack([pts, new])
        assert len(fast) == len(slow) == len(pts)
        idx = np.flatnonzero(rng.random(len(pts)) < 0.8)
        moved = pts[idx] + (-1.5, 0.5) + rng.normal(0, 0.3, (idx.size, 2))
        assert _same(fast.align(frames[f], moved, idx), slow.align(frames[f], moved, idx))
        assert _same(fast._A[: len(fast)], slow._A) and _same(fast._d[: len(fast)], slow._d)
    assert len(fast._T) > len(fast)  # room left for more tracks
    assert _same(fast.align(frames[-1], pts), slow.align(frames[-1], pts))


@pytest.mark.parametrize("partial", [False, True])
def test_tracks_match_the_numpy_templates(monkeypatch, partial):
    """Tracks with the kernels and the growing storage equal, bit for bit, the tracks with the
    NumPy twin of the templates; in partial mode, with tracks re-detected in later frames,
    each track is NaN and not visible exactly outside its span."""
    frames, _ = _walker_scene(n_frames=10, pan=(-2.0, 1.0))
    fast = track_points(iter(frames), partial=partial)
    monkeypatch.setattr(tracking, "PatchTemplates", naive.PatchTemplatesNumPy)
    slow = track_points(frames, partial=partial)
    for a, b in zip(fast if partial else (fast,), slow if partial else (slow,), strict=True):
        assert _same(a, b)
    if partial:
        pts, vis = fast
        assert (~vis[:, 0]).sum() > 10  # re-detected tracks
        assert np.array_equal(vis, np.isfinite(pts).all(axis=2))
        first = vis.argmax(axis=1)
        last = vis.shape[1] - 1 - vis[:, ::-1].argmax(axis=1)
        assert np.array_equal(vis.sum(axis=1), last - first + 1)  # one span per track
