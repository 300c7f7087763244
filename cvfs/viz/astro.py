"""Figures of the astronomy application: detections, residuals, lambda sensitivity.

Every function takes ``ax=None`` (a new figure when None) and returns the axes.
"""

import numpy as np

__all__ = ["plot_detections", "plot_lambda_sensitivity", "plot_residual", "save_figure_atomic",
           "source_figure"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 5))
    return ax


def _show(ax, image, title):
    lo, hi = np.percentile(image, [1, 99.5])
    ax.imshow(image, origin="upper", cmap="gray", vmin=lo, vmax=hi, interpolation="nearest")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_detections(image, catalogue, truth=None, ax=None, title="detections"):
    """The image with detected sources (red circles, radius 2 sigma) and the truth (green +).

    Parameters
    ----------
    image : ndarray of shape (height, width)
    catalogue : structured ndarray with fields x, y, sigma
    truth : structured ndarray with fields x, y, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    ax
    """
    from matplotlib.patches import Circle

    ax = _axes(ax)
    _show(ax, image, title)
    for s in np.asarray(catalogue):
        ax.add_patch(Circle((s["x"], s["y"]), 2 * s["sigma"], fill=False, color="red", lw=0.8))
    if truth is not None and len(truth):
        ax.plot(truth["x"], truth["y"], "+", color="lime", ms=6, mew=1)
    return ax


def plot_residual(image, model, ax=None, title="residual (image - model)"):
    """The residual image - model, symmetric colour scale."""
    ax = _axes(ax)
    res = np.asarray(image, float) - np.asarray(model, float)
    v = np.percentile(np.abs(res), 99.5) or 1.0
    ax.imshow(res, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
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


def source_figure(image, catalogue, model, truth=None):
    """Three panels: image, detections, residual. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axs = plt.subplots(1, 3, figsize=(13, 4.6))
    _show(axs[0], image, "image")
    plot_detections(image, catalogue, truth, ax=axs[1], title=f"{len(catalogue)} sources")
    plot_residual(image, model, ax=axs[2])
    fig.tight_layout()
    return fig


def save_figure_atomic(fig, path, dpi=110):
    """Save a figure atomically (never a half-written PNG) and close it."""
    import matplotlib.pyplot as plt

    from cvfs.io import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=str(path).rsplit(".", 1)[-1])
    plt.close(fig)
    return path
