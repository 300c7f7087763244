"""Keypoint figures: precision-recall curves like the FSA paper's Fig. 7, and image overlays.

:func:`plot_pr_curves` draws one panel per keypoint with one curve per method (matplotlib);
:func:`draw_keypoints` draws detections on a copy of an RGB image (OpenCV).

References
----------
Barbu, She, Ding, Gramajo, TPAMI 2017, Fig. 7 (precision-recall curves per keypoint).
"""

import numpy as np

from cvfs.io import atomic_path

__all__ = ["KEYPOINT_COLORS", "draw_keypoints", "plot_pr_curves", "save_pr_figure"]

#: RGB colour per keypoint name used by :func:`draw_keypoints` (others are white).
KEYPOINT_COLORS = {
    "left_eye_center": (255, 64, 64),
    "right_eye_center": (64, 160, 255),
    "nose_center": (64, 220, 64),
    "mouth_left_corner": (255, 200, 0),
    "mouth_right_corner": (220, 0, 220),
    "mouth_center": (255, 128, 0),
    "nose_left": (0, 200, 200),
    "nose_right": (0, 120, 120),
    "left_ear": (160, 80, 0),
    "right_ear": (80, 40, 0),
    "chin_center": (200, 200, 200),
}


def plot_pr_curves(curves, axes=None, *, baselines=None):
    """Precision-recall panels, one per keypoint, one curve per method.

    Parameters
    ----------
    curves : dict of str -> dict of str -> PRCurve
        ``{method label: {keypoint name: curve}}``.
    axes : sequence of matplotlib Axes, optional
        One per keypoint (in the order of first appearance); default: a new figure with a grid.
    baselines : dict of str -> dict of str -> (precision, recall), optional
        Single operating points of other detectors, drawn as markers
        (``{label: {keypoint: (p, r)}}``).

    Returns
    -------
    axes : list of matplotlib Axes
    """
    import matplotlib.pyplot as plt

    names = []
    for per_kp in curves.values():
        names += [k for k in per_kp if k not in names]
    if axes is None:
        ncol = min(3, max(1, len(names)))
        nrow = int(np.ceil(len(names) / ncol)) or 1
        fig, grid = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.6 * nrow), squeeze=False)
        axes = list(grid.ravel())
        for ax in axes[len(names):]:
            ax.set_visible(False)
    axes = list(axes)
    markers = "os^Dv"
    for ax, name in zip(axes, names, strict=False):
        for label, per_kp in curves.items():
            c = per_kp.get(name)
            if c is None or c.recall.size == 0:
                continue
            ax.plot(c.recall, c.precision, label=f"{label} (AP {c.average_precision:.2f})")
        for i, (label, pts) in enumerate((baselines or {}).items()):
            if name in pts:
                p, r = pts[name]
                ax.plot([r], [p], markers[i % len(markers)], label=f"{label}")
        ax.set_title(name.replace("_", " "))
        ax.set_xlabel("recall")
        ax.set_ylabel("precision")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    return axes


def save_pr_figure(axes, path, dpi=120):
    """Save the figure of ``axes`` (from :func:`plot_pr_curves`) atomically and close it.

    Returns
    -------
    path : Path
    """
    import matplotlib.pyplot as plt

    fig = axes[0].figure
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=str(path).rsplit(".", 1)[-1])
    plt.close(fig)
    return path


def draw_keypoints(image, detections, *, radius=None, thickness=2, labels=True):
    """Draw detections on a copy of an RGB image.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB uint8 (float in [0, 1] is converted).
    detections : dict of str -> ndarray of shape (n, 3)
        As returned by ``KeypointDetector.detect``.
    radius : int, optional
        Circle radius (default: ~1% of the image diagonal, at least 3).
    thickness : int
    labels : bool
        Write the score beside each detection.

    Returns
    -------
    drawn : ndarray of shape (H, W, 3), uint8
        A new image; the input is not modified.

    Raises
    ------
    ValueError
        If ``image`` is not (H, W, 3).
    """
    import cv2

    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must have shape (H, W, 3); got {img.shape}")
    if img.dtype != np.uint8:
        img = (np.clip(img, 0, 1) * 255).round().astype(np.uint8)
    out = np.ascontiguousarray(img.copy())
    r = radius or max(3, int(round(0.01 * np.hypot(*img.shape[:2]))))
    for name, det in detections.items():
        color = KEYPOINT_COLORS.get(name, (255, 255, 255))
        for x, y, s in np.asarray(det).reshape(-1, 3):
            c = (int(round(x)), int(round(y)))
            cv2.circle(out, c, r, color, thickness, cv2.LINE_AA)
            if labels:
                cv2.putText(out, f"{s:.1f}", (c[0] + r + 1, c[1]), cv2.FONT_HERSHEY_SIMPLEX,
                            0.35, color, 1, cv2.LINE_AA)
    return out
