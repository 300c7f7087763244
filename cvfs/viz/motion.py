"""Figures of motion segmentation: error CDFs (paper Fig. 9) and trajectories coloured by motion.

matplotlib functions take ``ax=None`` and return the axes; :func:`draw_tracks` draws on a copy of an
RGB frame with OpenCV. Both use :data:`MOTION_COLORS`.
"""

import numpy as np

__all__ = ["MOTION_COLORS", "draw_tracks", "plot_error_cdf", "plot_trajectories", "save_error_cdfs"]

#: RGB colour of motion i (cycled), in the video overlays and the matplotlib figures.
MOTION_COLORS = [(230, 40, 40), (30, 120, 230), (40, 180, 40), (200, 40, 200), (230, 200, 20),
                 (120, 120, 120)]


def _rgb(i):
    return tuple(c / 255.0 for c in MOTION_COLORS[i % len(MOTION_COLORS)])


def _axes(ax, figsize=(5, 4)):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
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
        Image coordinates (x, y); NaN where a track is not visible.
    labels : ndarray of shape (P,)
        Motion label of each trajectory.
    ax : matplotlib Axes, optional
        Default: a new figure 10 inches wide (height from the image's aspect ratio).
    image : ndarray, optional
        Background (RGB uint8 as :func:`cvfs.io.video.read_frames` returns it, RGB float, or
        grey); drawn under the tracks, slightly faded so the tracks stand out.
    title : str, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    from matplotlib.collections import LineCollection

    points = np.asarray(points, dtype=float)
    labels = np.asarray(labels)
    aspect = 0.75
    if image is not None:
        aspect = np.shape(image)[0] / max(np.shape(image)[1], 1)
    ax = _axes(ax, figsize=(10, max(3.0, 10 * aspect) + 0.6))
    if image is not None:
        img = np.asarray(image)
        ax.imshow(img, cmap="gray" if img.ndim == 2 else None, alpha=0.85)
    for k in np.unique(labels):
        sel = points[labels == k]
        color = _rgb(int(k))
        ax.add_collection(LineCollection(sel, colors=[color], linewidths=0.6, alpha=0.55))
        # last observed position of each track (NaN gaps break the polylines)
        last = np.where(np.isfinite(sel[..., 0]), np.arange(sel.shape[1]), -1).max(axis=1)
        end = sel[np.arange(sel.shape[0]), np.maximum(last, 0)]
        ax.plot(end[:, 0], end[:, 1], "o", ms=2.5, color=color, alpha=0.9,
                label=f"motion {int(k)}: {sel.shape[0]} tracks")
    if image is None:
        ax.autoscale()
        ax.invert_yaxis()
        ax.set_aspect("equal")
    ax.set_xlabel("x (pixels)")
    ax.set_ylabel("y (pixels)")
    ax.legend(loc="upper right", fontsize=8, framealpha=0.85,
              title="tracks (dot: last position)", title_fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def draw_tracks(frame, points, labels, frame_index, *, tail=10, legend=True):
    """Draw tracks up to ``frame_index`` on a copy of an RGB frame.

    Parameters
    ----------
    frame : ndarray of shape (H, W, 3), uint8
        RGB.
    points : ndarray of shape (P, F, 2)
        NaN where a track is not visible (it is drawn only in frames where it is).
    labels : ndarray of shape (P,)
    frame_index : int
    tail : int, default 10
        Frames of history drawn behind each point.
    legend : bool, default True
        A box in the top-left corner: colour and number of tracks of each motion.

    Returns
    -------
    out : ndarray of shape (H, W, 3), uint8
    """
    import cv2

    out = np.array(frame, copy=True)
    labels = np.asarray(labels)
    lo = max(0, frame_index - tail)
    for p, lab in zip(points, labels, strict=True):
        color = MOTION_COLORS[int(lab) % len(MOTION_COLORS)]
        seg = p[lo: frame_index + 1]
        seg = np.round(seg[np.isfinite(seg).all(axis=1)]).astype(np.int32)
        if not np.isfinite(p[frame_index]).all():  # not visible in this frame
            continue
        if seg.shape[0] > 1:
            cv2.polylines(out, [seg.reshape(-1, 1, 2)], False, color, 1, cv2.LINE_AA)
        cv2.circle(out, (int(seg[-1, 0]), int(seg[-1, 1])), 2, color, -1, cv2.LINE_AA)
    if legend and labels.size:
        ks = np.unique(labels)
        scale = max(0.35, out.shape[0] / 900)
        line = int(round(26 * scale)) + 4
        box = out[2:6 + line * len(ks), 2:2 + int(230 * scale) + line]
        box[:] = (0.45 * box).astype(np.uint8)  # darken behind the legend
        for i, k in enumerate(ks):
            color = MOTION_COLORS[int(k) % len(MOTION_COLORS)]
            y = 4 + i * line
            cv2.rectangle(out, (6, y + 3), (6 + line - 6, y + line - 3), color, -1)
            cv2.putText(out, f"motion {int(k)}: {int(np.sum(labels == k))} tracks",
                        (8 + line, y + int(0.75 * line)), cv2.FONT_HERSHEY_SIMPLEX, scale,
                        (255, 255, 255), 1, cv2.LINE_AA)
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
    import matplotlib.pyplot as plt

    from cvfs.viz.core import save_figure

    n_motions = np.asarray(n_motions)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, k in zip(axes, (2, 3), strict=True):
        sel = {name: np.asarray(e)[n_motions == k] for name, e in errors.items()}
        plot_error_cdf(sel, ax=ax, title=f"{k} motions", max_error=10.0)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)
