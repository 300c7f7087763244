"""Artificial stars added to a frame: fluxes, positions, noise and errors."""

import numpy as np
import pytest

from cvfs import astro


def test_injected_stars_add_their_flux_at_their_positions():
    rng = np.random.default_rng(3)
    frame = 100.0 + rng.standard_normal((64, 80))
    x, y = np.array([12.3, 40.0, 61.7]), np.array([15.6, 30.25, 48.9])
    flux = np.array([500.0, 1200.0, 80.0])
    out, truth = astro.inject_stars(frame, x, y, flux, 1.3)
    added = out - frame
    assert added.sum() == pytest.approx(flux.sum(), rel=1e-9)
    assert np.array_equal(truth["x"], x) and np.array_equal(truth["flux"], flux)
    assert np.all(truth["sigma"] == 1.3)
    rows, cols = np.mgrid[:64, :80]
    for xi, yi, fi in zip(x, y, flux, strict=True):
        near = np.hypot(cols - xi, rows - yi) < 10  # the stars are > 20 px apart
        assert added[near].sum() == pytest.approx(fi, rel=1e-9)
        assert (added[near] * cols[near]).sum() / fi == pytest.approx(xi, abs=1e-9)
        assert (added[near] * rows[near]).sum() / fi == pytest.approx(yi, abs=1e-9)
    assert frame.dtype == np.float64 and out is not frame  # the frame is left as it was


def test_photon_noise_with_a_gain_is_seeded():
    frame = np.zeros((40, 40))
    a, _ = astro.inject_stars(frame, [20.0], [20.0], 5000.0, 1.5, gain=2.0, random_state=1)
    b, _ = astro.inject_stars(frame, [20.0], [20.0], 5000.0, 1.5, gain=2.0, random_state=1)
    assert np.array_equal(a, b)
    assert np.all(np.round(a * 2.0) == a * 2.0)  # whole electrons
    assert a.sum() == pytest.approx(5000.0, rel=0.03)  # sd of the sum: sqrt(5000 / 2) = 50


@pytest.mark.parametrize("kw, match", [
    ({"image": np.zeros(5)}, "2-D"),
    ({"x": [1.0, 2.0]}, "one length"),
    ({"flux": -1.0}, "fluxes"),
    ({"sigma": 0.0}, "sigma"),
    ({"gain": 0.0}, "gain"),
])
def test_bad_input_is_named(kw, match):
    args = {"image": np.zeros((8, 8)), "x": [3.0], "y": [4.0], "flux": 10.0, "sigma": 1.0}
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        astro.inject_stars(args.pop("image"), args.pop("x"), args.pop("y"), args.pop("flux"),
                           args.pop("sigma"), **args)
