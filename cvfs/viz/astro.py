"""Figures of the astronomy application: detections, residuals, lambda sensitivity, completeness.

Plot functions take ``ax=None`` (a new figure when None) and return the axes; image panels have
axes in pixels (x = column, y = row) and a colour bar with the image's unit. :func:`source_figure`
and :func:`denoise_figure` assemble the three-panel figures the command line writes (save them
with :func:`cvfs.viz.save_figure`). Colour limits come from the finite pixels only: NaN pixels
(bad or unobserved) are drawn blank and do not blank the rest.
"""

import numpy as np

__all__ = ["denoise_figure", "plot_completeness", "plot_detections", "plot_lambda_sensitivity",
           "plot_residual", "source_figure"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 5))
    return ax


def _pixel_axes(ax, title):
    ax.set_title(title)
    ax.set_xlabel("x (pixel column)")
    ax.set_ylabel("y (pixel row)")


def _colorbar(ax, im, unit):
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=unit)


def _limits(values, q=(1, 99.5)):
    """Percentiles ``q`` of the finite values (NaN and inf ignored); (0, 1) when there are none,
    and an interval around the value when they are all equal."""
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return 0.0, 1.0
    lo, hi = (float(v) for v in np.percentile(vals, q))
    if not hi > lo:
        pad = max(abs(lo) * 1e-6, 1e-12)
        lo, hi = lo - pad, hi + pad
    return lo, hi


def _show(ax, image, title, unit="pixel value", colorbar=True, limits=None):
    lo, hi = _limits(image) if limits is None else limits
    im = ax.imshow(image, origin="upper", cmap="gray", vmin=lo, vmax=hi, interpolation="nearest")
    _pixel_axes(ax, title)
    if colorbar:
        _colorbar(ax, im, unit)
    return im


def plot_detections(image, catalogue, truth=None, ax=None, title="detections", *,
                    unit="pixel value", colorbar=True):
    """The image with point sources (red circles, radius 2 sigma), extended objects (cyan
    squares, side 4 sigma, from the ``extended`` field when present) and the truth (green +).

    Parameters
    ----------
    image : ndarray of shape (height, width)
    catalogue : structured ndarray with fields x, y, sigma
    truth : structured ndarray with fields x, y, optional
    ax : matplotlib Axes, optional
    title : str
    unit : str
        Label of the colour bar.
    colorbar : bool

    Returns
    -------
    ax
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle, Rectangle

    ax = _axes(ax)
    _show(ax, image, title, unit, colorbar)
    cat = np.asarray(catalogue)
    ext = cat["extended"] if "extended" in (cat.dtype.names or ()) else np.zeros(len(cat), bool)
    for s, e in zip(cat, ext, strict=True):
        if e:
            side = 4 * s["sigma"]
            ax.add_patch(Rectangle((s["x"] - side / 2, s["y"] - side / 2), side, side,
                                   fill=False, color="cyan", lw=0.8))
        else:
            ax.add_patch(Circle((s["x"], s["y"]), 2 * s["sigma"], fill=False, color="red",
                                lw=0.8))
    handles = [Line2D([], [], ls="", marker="o", mfc="none", mec="red",
                      label=f"point sources ({int(np.sum(~ext))}; circle radius 2 sigma)")]
    if ext.any():
        handles.append(Line2D([], [], ls="", marker="s", mfc="none", mec="cyan",
                              label=f"extended objects ({int(ext.sum())}; square side "
                              "4 sigma)"))
    if truth is not None and len(truth):
        ax.plot(truth["x"], truth["y"], "+", color="lime", ms=6, mew=1)
        handles.append(Line2D([], [], ls="", marker="+", color="lime",
                              label=f"true sources ({len(truth)})"))
    ax.legend(handles=handles, loc="upper right", fontsize=7, framealpha=0.8)
    return ax


def plot_residual(image, model, ax=None, title="residual (image - model)", *, unit="pixel value",
                  colorbar=True):
    """The residual image - model, symmetric colour scale, axes in pixels.

    Parameters
    ----------
    image, model : ndarray of shape (height, width)
    ax : matplotlib Axes, optional
    title : str
    unit : str
        Label of the colour bar.
    colorbar : bool

    Returns
    -------
    ax
    """
    ax = _axes(ax)
    res = np.asarray(image, float) - np.asarray(model, float)
    v = _limits(np.abs(res), (0, 99.5))[1]
    im = ax.imshow(res, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
    _pixel_axes(ax, title)
    if colorbar:
        _colorbar(ax, im, unit)
    return ax


def plot_lambda_sensitivity(factors, scores, ax=None, chosen=None, ylabel="F1 within 1 px"):
    """A score (e.g. F1) against lambda / sigma^2, log x-axis.

    Parameters
    ----------
    factors : array-like of shape (n,)
    scores : dict of str -> array-like of shape (n,)
        One curve per label.
    chosen : float, optional
        Marks the default factor.
    """
    ax = _axes(ax)
    for label, ys in scores.items():
        ax.plot(factors, ys, "o-", label=label)
    if chosen is not None:
        ax.axvline(chosen, color="gray", ls="--", lw=1, label=f"default {chosen:g}")
    ax.set_xscale("log")
    ax.set_xlabel(r"$\lambda / \sigma^2$")
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.grid(alpha=0.3)
    return ax


def plot_completeness(edges, curves, ax=None, xlabel="source flux (noise sigma = 1)",
                      ylabel="completeness", title=None):
    """Completeness (fraction of true sources found) against flux, one curve per method.

    Parameters
    ----------
    edges : array-like of shape (n_bins + 1,)
        Flux bin edges (positive, increasing); drawn on a log axis at the bins' geometric
        centres.
    curves : dict of str -> array-like of shape (n_bins,)
        Completeness per bin (NaN = empty bin, not drawn) for each label.

    Returns
    -------
    ax
    """
    ax = _axes(ax)
    edges = np.asarray(edges, float)
    centres = np.sqrt(edges[:-1] * edges[1:])
    for label, ys in curves.items():
        ax.plot(centres, np.asarray(ys, float), "o-", label=label)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return ax


def source_figure(image, catalogue, model, truth=None, *, title=None, unit="pixel value"):
    """Three panels: image, detections, residual (axes in pixels, colour bars). Returns the figure.

    Parameters
    ----------
    image, model : ndarray of shape (height, width)
    catalogue : structured ndarray with fields x, y, sigma
        Parent rows of blends whose sources are in the catalogue (``levels="all"``) are not
        drawn: one marker per source.
    truth : structured ndarray with fields x, y, optional
    title : str, optional
        Figure title (default: image size and number of sources).
    unit : str
        Unit of the pixel values (colour bars).
    """
    import matplotlib.pyplot as plt

    catalogue = np.asarray(catalogue)
    names = catalogue.dtype.names or ()
    if {"id", "parent", "n_children"} <= set(names):
        # parents repeat their children
        parents = catalogue["parent"][catalogue["parent"] > 0]
        catalogue = catalogue[~np.isin(catalogue["id"], parents)]
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.8))
    _show(axs[0], image, "image", unit)
    plot_detections(image, catalogue, truth, ax=axs[1], title=f"{len(catalogue)} sources",
                    unit=unit)
    plot_residual(image, model, ax=axs[2], unit=unit)
    h, w = np.shape(image)
    fig.suptitle(title or f"screened SBL: {len(catalogue)} point sources in a {w} x {h} image")
    fig.tight_layout()
    return fig


def denoise_figure(image, denoised, *, title=None, unit="pixel value"):
    """Three panels: image, denoised image (same grey scale), residual. Returns the figure.

    Parameters
    ----------
    image, denoised : ndarray of shape (height, width)
    title : str, optional
        Figure title (default: image size).
    unit : str
        Unit of the pixel values (colour bars).
    """
    import matplotlib.pyplot as plt

    fig, axs = plt.subplots(1, 3, figsize=(15, 4.8))
    limits = _limits(image)
    _show(axs[0], image, "image", unit, limits=limits)
    _show(axs[1], denoised, "denoised (sources + background)", unit, limits=limits)
    plot_residual(image, denoised, ax=axs[2], unit=unit)
    h, w = np.shape(image)
    fig.suptitle(title or f"screened SBL denoising of a {w} x {h} image")
    fig.tight_layout()
    return fig
