"""Figures of frames with NaN pixels: the finite pixels set the colour limits."""

import numpy as np
import pytest

from cvfs import astro

pytest.importorskip("matplotlib")


def _panel_pixels(fig, ax):
    """RGB pixels of one axes' area in the drawn figure."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    x0, y0, x1, y1 = ax.get_window_extent().extents.astype(int)
    h = rgba.shape[0]
    return rgba[h - y1:h - y0, x0:x1, :3].astype(float)


def test_figures_of_a_frame_with_nan_pixels_are_not_blank():
    import matplotlib.pyplot as plt

    from cvfs.viz.astro import denoise_figure, source_figure

    img, _, truth = astro.make_scene((40, 44), n_sources=5, random_state=7)
    img[5:9, :] = np.nan  # a band of unobserved rows
    img[20, 30] = np.inf
    res = astro.localise_and_denoise(img, n_atoms=4000)
    assert len(res.catalogue) == 5
    for fig in (source_figure(img, res.catalogue, res.model, truth),
                denoise_figure(img, res.model)):
        panels = [a for a in fig.axes if a.get_images() and a.get_label() != "<colorbar>"]
        for ax in panels:
            norm = ax.get_images()[0].norm
            assert np.isfinite([norm.vmin, norm.vmax]).all() and norm.vmin < norm.vmax
        # the image panel shows the sky and the stars: many grey levels, not one white sheet
        pix = _panel_pixels(fig, panels[0])
        assert len(np.unique(pix[..., 0])) > 50 and pix.std() > 10
        plt.close(fig)
    # a frame without any finite pixel still draws
    fig = denoise_figure(np.full((8, 8), np.nan), np.zeros((8, 8)))
    assert fig.axes[0].get_images()[0].norm.vmin == 0.0
    plt.close(fig)
