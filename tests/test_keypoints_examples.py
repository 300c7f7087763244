"""Example sampling: levels, positives within 1 px, negatives >= 0.5 IED away."""

import numpy as np
import pytest

from cvfs.keypoints.examples import (
    EXAMPLE_DTYPE,
    LevelGeometry,
    negative_mask,
    positive_examples,
    random_negatives,
    training_levels,
)


def test_training_levels():
    # IED 40 at k=0; 4 levels per octave: IED 40 * 2^(k/4) in [20, 40] -> k = 0..-4
    np.testing.assert_array_equal(training_levels(40.0), [0, -1, -2, -3, -4])
    # IED 14 (Caltech) needs upsampling: 14 * 2^(k/4) in [20, 40] -> k = 6..3
    np.testing.assert_array_equal(training_levels(14.0), [6, 5, 4, 3])
    assert training_levels(np.nan).size == 0
    with pytest.raises(ValueError, match="ied_range must be"):
        training_levels(30.0, ied_range=(40, 20))


def test_level_geometry_round_trip():
    g = LevelGeometry((250, 250), -2)
    assert g.shape == (177, 177)
    xy = np.array([[10.0, 20.0], [100.5, 3.25]])
    np.testing.assert_allclose(g.to_original(g.from_original(xy)), xy)


def test_positives_within_one_pixel():
    pts = np.array([[100.3, 120.0]])
    ex = positive_examples(pts, [40.0], (250, 250), image_index=7)
    assert ex.dtype == EXAMPLE_DTYPE and (ex["image"] == 7).all()
    assert set(ex["level"].tolist()) == {0, -1, -2, -3, -4}
    for k in range(-4, 1):
        g = LevelGeometry((250, 250), k)
        q = g.from_original(pts[0])
        e = ex[ex["level"] == k]
        d = np.hypot(e["x"] - q[0], e["y"] - q[1])
        assert (d <= 1.0).all() and len(e) >= 2
        # every grid point within 1 px is there
        xs, ys = np.meshgrid(np.arange(int(q[0]) - 2, int(q[0]) + 3),
                             np.arange(int(q[1]) - 2, int(q[1]) + 3))
        n_expected = int((np.hypot(xs - q[0], ys - q[1]) <= 1.0).sum())
        assert len(e) == n_expected
    # at (0, 0) the window does not fit: no positives; NaN points are skipped
    assert positive_examples([[0.0, 0.0]], [40.0], (250, 250)).size == 0
    assert positive_examples([[np.nan, np.nan]], [40.0], (250, 250)).size == 0


def test_negative_mask():
    g = LevelGeometry((100, 120), 0)
    m = negative_mask(g, [[60.0, 50.0], [np.nan, np.nan]], [40.0, 30.0], margin=12)
    assert m.shape == (100, 120)
    yy, xx = np.mgrid[0:100, 0:120]
    inside = (xx >= 12) & (xx <= 108) & (yy >= 12) & (yy <= 88)
    far = np.hypot(xx - 60, yy - 50) >= 20.0
    np.testing.assert_array_equal(m, inside & far)


def test_random_negatives():
    pts = np.array([[125.0, 125.0]])
    ex = random_negatives(pts, [40.0], (250, 250), 500, image_index=3, random_state=0)
    assert ex.size == 500 and np.unique(ex).size == 500 and (ex["image"] == 3).all()
    assert set(np.unique(ex["level"])) <= {0, -1, -2, -3, -4}
    for k in np.unique(ex["level"]):
        g = LevelGeometry((250, 250), k)
        q = g.from_original(pts[0])
        e = ex[ex["level"] == k]
        assert (np.hypot(e["x"] - q[0], e["y"] - q[1]) >= 20.0 * g.scale_x - 1e-9).all()
    again = random_negatives(pts, [40.0], (250, 250), 500, image_index=3, random_state=0)
    np.testing.assert_array_equal(ex, again)
    assert random_negatives(pts, [np.nan], (250, 250), 10).size == 0
