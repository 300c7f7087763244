"""Slow, obviously-correct NumPy references of the numba kernels (one section per part)."""

import numpy as np

# ---- keypoints ----


def keypoints_additive_scores(X, lo, scale, table, step, intercept):
    """Additive piecewise model scores, one row and one feature at a time."""
    X = np.asarray(X, dtype=np.float64)
    B = table.shape[1] if step else table.shape[1] - 1
    out = np.full(X.shape[0], float(intercept))
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            s = min(max((X[i, j] - lo[j]) * scale[j], 0.0), B)
            b = min(int(np.floor(s)), B - 1)
            if step:
                out[i] += table[j, b]
            else:
                a = s - b
                out[i] += (1 - a) * table[j, b] + a * table[j, b + 1]
    return out


def keypoints_logitboost(X, y01, n_rounds, bins):
    """LogitBoost with every feature tried at each round (sample_fraction=1): the chosen
    features and the final scores F."""
    X = np.asarray(X, dtype=np.float64)
    n, m = X.shape
    lo, hi = X.min(axis=0), X.max(axis=0)
    scale = np.where(hi > lo, bins / np.where(hi > lo, hi - lo, 1.0), 0.0)
    codes = np.clip(np.floor(np.maximum((X - lo) * scale, 0.0)), 0, bins - 1).astype(int)
    F = np.zeros(n)
    chosen = []
    for _ in range(n_rounds):
        p = 1 / (1 + np.exp(-2 * F))
        w = np.maximum(p * (1 - p), 1e-12)
        z = np.clip((y01 - p) / w, -4, 4)
        best = (-1.0, None, None)
        for j in range(m):
            sw = np.bincount(codes[:, j], weights=w, minlength=bins)
            swz = np.bincount(codes[:, j], weights=w * z, minlength=bins)
            nz = sw > 0
            gain = np.sum(swz[nz] ** 2 / sw[nz])
            if gain > best[0]:
                vals = np.where(nz, swz / np.where(nz, sw, 1), 0.0)
                best = (gain, j, vals)
        chosen.append(best[1])
        F += 0.5 * best[2][codes[:, best[1]]]
    return np.array(chosen), F
