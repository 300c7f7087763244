"""Figures of motion segmentation: error CDFs (paper Fig. 9) and trajectories coloured by motion.

matplotlib functions take ``ax=None`` and return the axes; :func:`draw_tracks` draws on a copy of a
BGR frame with OpenCV.
"""

import numpy as np

__all__ = ["MOTION_COLORS", "draw_tracks", "plot_error_cdf", "plot_trajectories", "save_error_cdfs"]

# BGR for OpenCV; the matplotlib figures use the same colours (reversed to RGB)
MOTION_COLORS = [(40, 40, 230), (230, 120, 30), (40, 180, 40), (200, 40, 200), (20, 200, 230),
                 (120, 120, 120)]


def _rgb(i):
    b, g, r = MOTION_COLORS[i % len(MOTION_COLORS)]
    return (r / 255.0, g / 255.0, b / 255.0)


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 4))
    return ax


def plot_error_cdf(errors, *, ax=None, title=None, max_error=None):
    """Cumulative distribution of the misclassification rate (paper Fig. 9).

    Parameters
    ----------
    errors : dict of str -> array_like of shape (n_sequences,)
        Method name -> per-sequence misclassification in percent.
    ax : matplotlib Axes, optional
    title : str, optional
    max_error : float, optional
        Right end of the x axis (percent); default the largest error.

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _axes(ax)
    top = 0.0
    for name, e in errors.items():
        e = np.sort(np.asarray(e, dtype=float))
        frac = np.arange(1, e.size + 1) / e.size
        ax.step(np.concatenate([[0.0], e]), np.concatenate([[0.0], frac]), where="post",
                label=name)
        top = max(top, float(e.max()) if e.size else 0.0)
    ax.set_xlim(0, max_error if max_error is not None else max(top, 1e-3))
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("misclassification rate (%)")
    ax.set_ylabel("fraction of sequences")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def plot_trajectories(points, labels, *, ax=None, image=None, title=None):
    """Trajectories drawn as polylines coloured by motion label.

    Parameters
    ----------
    points : ndarray of shape (P, F, 2)
        Image coordinates (x, y).
    labels : ndarray of shape (P,)
        Motion label of each trajectory.
    ax : matplotlib Axes, optional
    image : ndarray, optional
        Background (BGR uint8 as OpenCV reads it, or RGB float); drawn under the tracks.
    title : str, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    from matplotlib.collections import LineCollection

    ax = _axes(ax)
    points = np.asarray(points, dtype=float)
    labels = np.asarray(labels)
    if image is not None:
        img = np.asarray(image)
        if img.ndim == 3 and img.dtype == np.uint8:
            img = img[..., ::-1]
        ax.imshow(img, cmap="gray" if img.ndim == 2 else None)
    for k in np.unique(labels):
        sel = points[labels == k]
        ax.add_collection(LineCollection(sel, colors=[_rgb(int(k))], linewidths=0.8))
        ax.plot(sel[:, -1, 0], sel[:, -1, 1], ".", ms=3, color=_rgb(int(k)),
                label=f"motion {int(k)} ({sel.shape[0]})")
    if image is None:
        ax.autoscale()
        ax.invert_yaxis()
        ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=7)
    if title:
        ax.set_title(title)
    return ax


def draw_tracks(frame, points, labels, frame_index, *, tail=10):
    """Draw tracks up to ``frame_index`` on a copy of a BGR frame.

    Parameters
    ----------
    frame : ndarray of shape (H, W, 3), uint8
    points : ndarray of shape (P, F, 2)
    labels : ndarray of shape (P,)
    frame_index : int
    tail : int, default 10
        Frames of history drawn behind each point.

    Returns
    -------
    out : ndarray of shape (H, W, 3), uint8
    """
    import cv2

    out = np.array(frame, copy=True)
    lo = max(0, frame_index - tail)
    for p, lab in zip(points, labels, strict=True):
        color = MOTION_COLORS[int(lab) % len(MOTION_COLORS)]
        seg = np.round(p[lo: frame_index + 1]).astype(np.int32)
        if seg.shape[0] > 1:
            cv2.polylines(out, [seg.reshape(-1, 1, 2)], False, color, 1, cv2.LINE_AA)
        cv2.circle(out, (int(seg[-1, 0]), int(seg[-1, 1])), 2, color, -1, cv2.LINE_AA)
    return out


def save_error_cdfs(path, errors, n_motions):
    """Two-panel figure (2 and 3 motions) of error CDFs, written atomically as PNG.

    Parameters
    ----------
    path : str or Path
    errors : dict of str -> ndarray of shape (n_sequences,)
        Percent errors per method.
    n_motions : ndarray of shape (n_sequences,)

    Returns
    -------
    path : Path
    """
    from pathlib import Path

    import matplotlib.pyplot as plt

    from cvfs.io import atomic_path

    n_motions = np.asarray(n_motions)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, k in zip(axes, (2, 3), strict=True):
        sel = {name: np.asarray(e)[n_motions == k] for name, e in errors.items()}
        plot_error_cdf(sel, ax=ax, title=f"{k} motions", max_error=10.0)
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return Path(path)
