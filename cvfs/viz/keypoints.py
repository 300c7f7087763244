"""Keypoint figures: precision-recall curves like the FSA paper's Fig. 7, and image overlays.

:func:`plot_pr_curves` draws one panel per keypoint with one curve per method (matplotlib; save
with :func:`cvfs.viz.save_figure`); :func:`draw_keypoints` draws detections, their labels and a
legend on a copy of an RGB image (OpenCV), enlarged when the image is small; :func:`draw_faces`
draws faces (box, keypoints, score), one colour per face.

References
----------
Barbu, She, Ding, Gramajo, TPAMI 2017, Fig. 7 (precision-recall curves per keypoint).
"""

import numpy as np

__all__ = ["FACE_COLORS", "KEYPOINT_COLORS", "draw_faces", "draw_keypoints", "plot_pr_curves"]

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
        for j, (label, per_kp) in enumerate(curves.items()):  # one colour per method
            c = per_kp.get(name)
            if c is None or c.recall.size == 0:
                continue
            ax.plot(c.recall, c.precision, color=f"C{j}",
                    label=f"{label} (AP {c.average_precision:.2f})")
        for i, (label, pts) in enumerate((baselines or {}).items()):
            if name in pts:
                p, r = pts[name]
                ax.plot([r], [p], markers[i % len(markers)], color=f"C{len(curves) + i}",
                        label=f"{label}")
        ax.set_title(name.replace("_", " "))
        ax.set_xlabel("recall")
        ax.set_ylabel("precision")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    return axes


#: RGB colours of :func:`draw_faces`, cycled by face index or track id (distinct hues).
FACE_COLORS = (
    (255, 64, 64), (64, 160, 255), (64, 220, 64), (255, 200, 0), (220, 0, 220),
    (0, 220, 220), (255, 128, 0), (160, 100, 255), (255, 255, 255), (128, 200, 128),
)


def _short(name):
    """``left_eye_center`` -> ``left eye``: the label drawn beside a detection."""
    return name.replace("_center", "").replace("_corner", "").replace("_", " ")


def _text(img, text, org, scale, color, thickness):
    """Text with a dark outline, readable on any background."""
    import cv2

    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(img, text, org, font, scale, (0, 0, 0), thickness + 2, cv2.LINE_AA)
    cv2.putText(img, text, org, font, scale, color, thickness, cv2.LINE_AA)


def draw_keypoints(image, detections, *, radius=None, thickness=None, labels=True, legend=True,
                   min_side=480):
    """Draw detections, their labels and a legend on a copy of an RGB image.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB uint8 (float in [0, 1] is converted).
    detections : dict of str -> ndarray of shape (n, 3)
        As returned by ``KeypointDetector.detect``: x, y, score per row.
    radius, thickness : int, optional
        Circle radius and line width in output pixels (default: from the output's diagonal).
    labels : bool, default True
        Write the keypoint's short name and the score beside each detection.
    legend : bool, default True
        A box in the top-left corner: colour, keypoint name and number of detections drawn.
    min_side : int or None, default 480
        Images whose shorter side is smaller are enlarged by the integer factor
        ``s = ceil(min_side / min(H, W))`` (nearest neighbour) before drawing, so labels stay
        readable; None draws at the image's size.

    Returns
    -------
    drawn : ndarray of shape (s H, s W, 3), uint8
        A new image (s = 1 unless enlarged); the input is not modified.

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
    h, w = img.shape[:2]
    s = max(1, int(np.ceil(min_side / min(h, w)))) if min_side else 1
    if s > 1:
        out = cv2.resize(img, (w * s, h * s), interpolation=cv2.INTER_NEAREST)
    else:
        out = np.ascontiguousarray(img.copy())
    diag = float(np.hypot(h * s, w * s))
    r = radius or max(4, int(round(0.012 * diag)))
    t = thickness or max(1, int(round(diag / 500)))
    font_scale = max(0.4, diag / 1600)
    font_t = max(1, int(round(diag / 1000)))
    line = int(round(28 * font_scale)) + 4
    placed = []  # label origins so far: a label is moved down until it overlaps none
    for name, det in detections.items():
        color = KEYPOINT_COLORS.get(name, (255, 255, 255))
        for x, y, score in np.asarray(det).reshape(-1, 3):
            # pixel centre x of the input is at s x + (s - 1) / 2 in the enlarged image
            c = (int(round(x * s + (s - 1) / 2)), int(round(y * s + (s - 1) / 2)))
            cv2.circle(out, c, r, color, t, cv2.LINE_AA)
            if labels:
                org = [c[0] + r + 2, c[1] + r // 2]
                while any(abs(org[0] - px) < 8 * line and abs(org[1] - py) < line
                          for px, py in placed):
                    org[1] += line
                placed.append(tuple(org))
                _text(out, f"{_short(name)} {score:.1f}", tuple(org), font_scale, color, font_t)
    if legend and detections:
        width = int(max(len(f"{_short(n)} ({len(d)})") for n, d in detections.items())
                    * 19 * font_scale) + line + 12
        box = out[4:4 + line * len(detections) + 8, 4:4 + width]
        box[:] = (0.45 * box).astype(np.uint8)  # darken behind the legend
        for i, (name, det) in enumerate(detections.items()):
            color = KEYPOINT_COLORS.get(name, (255, 255, 255))
            y0 = 8 + i * line
            cv2.circle(out, (8 + line // 2, y0 + line // 2), max(3, line // 3), color, t,
                       cv2.LINE_AA)
            _text(out, f"{_short(name)} ({len(np.asarray(det).reshape(-1, 3))})",
                  (10 + line, y0 + int(0.75 * line)), font_scale, color, font_t)
    return out


def _enlarged(image, min_side):
    """uint8 copy of an RGB image, enlarged by the integer factor ``s`` (nearest neighbour) when
    its shorter side is below ``min_side``; returns (copy, s)."""
    import cv2

    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must have shape (H, W, 3); got {img.shape}")
    if img.dtype != np.uint8:
        img = (np.clip(img, 0, 1) * 255).round().astype(np.uint8)
    h, w = img.shape[:2]
    s = max(1, int(np.ceil(min_side / min(h, w)))) if min_side else 1
    if s > 1:
        return cv2.resize(img, (w * s, h * s), interpolation=cv2.INTER_NEAREST), s
    return np.ascontiguousarray(img.copy()), s


def draw_faces(image, faces, *, ids=None, labels=True, min_side=480):
    """Draw faces on a copy of an RGB image: box, keypoints and score, one colour per face.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB uint8 (float in [0, 1] is converted).
    faces : list of cvfs.keypoints.faces.Face
    ids : list of int, optional
        A number per face (e.g. a track id) that picks its colour and is written in its label
        (default: the face's index, from 1).
    labels : bool, default True
        Write ``#id score`` above each box and the keypoints' short names beside them.
    min_side : int or None, default 480
        Images whose shorter side is smaller are enlarged by the integer factor
        ``s = ceil(min_side / min(H, W))`` (nearest neighbour) before drawing, so labels stay
        readable at any image size; None draws at the image's size.

    Returns
    -------
    drawn : ndarray of shape (s H, s W, 3), uint8
        A new image; the input is not modified.

    Raises
    ------
    ValueError
        If ``image`` is not (H, W, 3) or ``ids`` does not have one entry per face.
    """
    import cv2

    out, s = _enlarged(image, min_side)
    ids = list(range(1, len(faces) + 1)) if ids is None else list(ids)
    if len(ids) != len(faces):
        raise ValueError(f"ids must have one entry per face ({len(faces)}); got {len(ids)}")
    h, w = out.shape[:2]
    diag = float(np.hypot(h, w))
    t = max(1, int(round(diag / 500)))
    font_scale = max(0.6, diag / 1600)
    name_scale = max(0.4, 0.7 * font_scale)
    font_t = max(1, int(round(diag / 1000)))

    def px(x, y):  # pixel centre x of the input is at s x + (s - 1) / 2 in the enlarged image
        return int(round(x * s + (s - 1) / 2)), int(round(y * s + (s - 1) / 2))

    for face, i in zip(faces, ids, strict=True):
        color = FACE_COLORS[(int(i) - 1) % len(FACE_COLORS)]
        x0, y0, x1, y1 = face.box
        p0, p1 = px(x0, y0), px(x1, y1)
        cv2.rectangle(out, p0, p1, color, t, cv2.LINE_AA)
        r = max(2, int(round(0.06 * face.ied * s))) if np.isfinite(face.ied) else 3
        for name, (x, y, _) in face.keypoints.items():
            if not (np.isfinite(x) and np.isfinite(y)):
                continue
            c = px(x, y)
            cv2.circle(out, c, r, color, t, cv2.LINE_AA)
            cv2.circle(out, c, max(1, t), color, -1, cv2.LINE_AA)
            if labels and (p1[0] - p0[0]) > 300 * name_scale:  # names only where they fit
                _text(out, _short(name), (c[0] + r + 2, c[1] + r // 2), name_scale, color,
                      font_t)
        if labels:
            org = (max(2, p0[0]), max(int(22 * font_scale) + 2, p0[1] - 4))
            _text(out, f"#{i} {face.score:.2f}", org, font_scale, color, font_t)
    return out
