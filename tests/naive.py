"""Slow, obviously-correct NumPy references of the numba kernels (tests compare against them)."""

import numpy as np

# ---- vision ----


def naive_hog_cells(channel):
    """Cell histograms of a 2-D channel at every top-left pixel, skimage's conventions.

    Returns an array of shape (H - 5, W - 5, 8): direct loops over each 6x6 cell.
    """
    img = channel.astype(np.float64)
    g_row = np.zeros_like(img)
    g_col = np.zeros_like(img)
    g_row[1:-1, :] = img[2:, :] - img[:-2, :]
    g_col[:, 1:-1] = img[:, 2:] - img[:, :-2]
    mag = np.hypot(g_col, g_row)
    orient = np.rad2deg(np.arctan2(g_row, g_col)) % 180
    h, w = img.shape
    out = np.zeros((h - 5, w - 5, 8))
    for r in range(h - 5):
        for c in range(w - 5):
            o = orient[r:r + 6, c:c + 6]
            m = mag[r:r + 6, c:c + 6]
            for b in range(8):
                sel = (o >= 22.5 * b) & (o < 22.5 * (b + 1))
                out[r, c, b] = m[sel].sum() / 36.0
    return out


def naive_haar(window, feature):
    """Value of one Haar feature (type, x, y, w, h) on a 2-D window, from explicit means."""
    t, x, y, w, h = (int(feature[k]) for k in ("type", "x", "y", "w", "h"))
    r = window[y:y + h, x:x + w].astype(np.float64)
    if t == 0:  # edge_x: left - right
        return r[:, : w // 2].mean() - r[:, w // 2:].mean()
    if t == 1:  # edge_y: top - bottom
        return r[: h // 2].mean() - r[h // 2:].mean()
    if t == 2:  # line_x: outer thirds - middle third
        a = w // 3
        return np.concatenate([r[:, :a], r[:, 2 * a:]], axis=1).mean() - r[:, a:2 * a].mean()
    if t == 3:  # line_y
        a = h // 3
        return np.concatenate([r[:a], r[2 * a:]], axis=0).mean() - r[a:2 * a].mean()
    # quad: top-left and bottom-right minus top-right and bottom-left
    hh, hw = h // 2, w // 2
    pos = np.concatenate([r[:hh, :hw].ravel(), r[hh:, hw:].ravel()])
    neg = np.concatenate([r[:hh, hw:].ravel(), r[hh:, :hw].ravel()])
    return pos.mean() - neg.mean()
