"""The coarse-to-fine scan of the upsampled levels finds the full scan's peaks on fewer windows."""

import cv2
import numpy as np
import pytest
from skimage import data

from cvfs.keypoints import level_scan, load_detector
from cvfs.keypoints._coarse import COARSE_MARGIN, coarse_to_fine_scores, lattice_neighbours
from cvfs.keypoints._scan import ScanPlan
from cvfs.keypoints.faces import FACE_KEYPOINTS
from cvfs.vision import HALF, LevelCache, gaussian_pyramid
from tests import naive
from tests.keypoints.test_scan import _count_bands


def _photo(seed=0, size=(160, 120)):
    """scikit-image's astronaut at ``size`` with fixed-seed noise (5 grey levels)."""
    rng = np.random.default_rng(seed)
    img = cv2.resize(data.astronaut(), size, interpolation=cv2.INTER_AREA).astype(float)
    return np.clip(img + rng.normal(0.0, 5.0, img.shape), 0, 255).astype(np.uint8)


def _rows(gh):
    return type("Rows", (), {"s": 0, "e": gh, "k0": 0, "k1": gh})()


@pytest.mark.parametrize("stride, row0", [(2, 0), (2, 1), (3, 2)])
def test_lattice_neighbours_match_naive(stride, row0):
    rng = np.random.default_rng(3)
    n_rows, n_cols = 23, 17
    seed = rng.random(((n_rows - row0 + stride - 1) // stride, (n_cols + stride - 1) // stride))
    seed = seed < 0.1
    cand, tl = lattice_neighbours(seed, row0, stride, n_rows, n_cols)
    cand0, tl0 = naive.keypoints_lattice_neighbours(seed, row0, stride, n_rows, n_cols)
    np.testing.assert_array_equal(cand, cand0)
    np.testing.assert_array_equal(tl, tl0)
    assert cand.any() and not cand.all()


@pytest.mark.slow
def test_coarse_to_fine_finds_the_full_scan_peaks():
    """On an upsampled level of a fixed photo the coarse-to-fine scan (stride 2) finds peaks of
    the scan of every window, bitwise (positions, sub-pixel offsets, scores): with a margin of
    4 all of them on 3/4 of the windows; with the default margin most of them, each keypoint's
    best peak included, on a third of the windows; with no margin at all (every lattice window
    a seed) it is the full scan. The lattice alone finds fewer."""
    det = load_detector()
    names = [k for k in det.keypoints if k in FACE_KEYPOINTS]
    models = [det.classifiers[k] for k in names]
    plan = ScanPlan(det.pool, models)
    up = next(lv for lv in gaussian_pyramid(_photo(), max_scale=2.0, min_size=det.pool.window)
              if lv.index > 0)
    gh, gw = up.shape[0] - 2 * HALF + 1, up.shape[1] - 2 * HALF + 1
    thr = [-np.inf] * len(names)

    def peaks(upsampled):
        found = level_scan.band_peaks(det.pool, plan, models, LevelCache(up), _rows(gh), thr,
                                      True, upsampled=upsampled)
        return [np.zeros((0, 3)) if p is None else p for p in found]

    def windows(margin):
        return coarse_to_fine_scores(plan, LevelCache(up), gh, gw, 0, 2, margin)[2]

    full = peaks(level_scan.UpsampledScan(1))
    assert sum(len(p) for p in full) >= 30
    for margin in (4.0, np.inf):
        for f, c in zip(full, peaks(level_scan.UpsampledScan(2, margin)), strict=True):
            np.testing.assert_array_equal(c, f)
    assert windows(4.0) < 0.75 * gh * gw
    assert windows(np.inf) == gh * gw + ((gh + 1) // 2) * ((gw + 1) // 2)
    coarse = peaks(level_scan.UpsampledScan(2, COARSE_MARGIN))
    for f, c in zip(full, coarse, strict=True):
        assert len(f) == 0 or (c[np.argmax(c[:, 2])] == f[np.argmax(f[:, 2])]).all()
        rows = {tuple(r) for r in f}
        assert all(tuple(r) in rows for r in c)  # bitwise rows of the full scan
    assert sum(len(p) for p in coarse) >= 0.7 * sum(len(p) for p in full)
    assert windows(COARSE_MARGIN) < 0.35 * gh * gw
    lattice = peaks(level_scan.UpsampledScan(2))
    assert sum(len(p) for p in lattice) < sum(len(p) for p in full)


def test_coarse_to_fine_in_bands_matches_whole_levels(monkeypatch):
    """Bands of an upsampled level scanned coarse-to-fine give the whole level's peaks."""
    det = load_detector()
    seen = _count_bands(monkeypatch)
    kw = dict(threshold=-np.inf, max_scale=2.0, min_scale=0.0, nms_radius=None, refine=True,
              cascade=True, n_jobs=1, merge_radius=None, pairs=None,
              upsampled=level_scan.UpsampledScan(2, COARSE_MARGIN))
    img = _photo()
    whole = det._detect(img, max_memory=None, **kw)[0]
    assert seen == []
    banded = det._detect(img, max_memory=12e6, **kw)[0]
    assert seen and max(seen) >= 3
    for k in whole:
        np.testing.assert_array_equal(banded[k], whole[k])
    assert all(len(v) > 0 for v in whole.values())


def test_detect_faces_checks_coarse_margin():
    det = load_detector()
    for bad in (-1.0, True, "1", np.nan):
        with pytest.raises(ValueError, match="coarse_margin must be None or a number >= 0"):
            det.detect_faces(_photo(size=(64, 48)), coarse_margin=bad)
