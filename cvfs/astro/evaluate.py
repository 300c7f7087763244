"""Scores of a source catalogue against the truth, and of a denoised image against the clean one.

Group-IoU follows Def. 5.1 of the SBL paper; precision / recall / F1 count a detection as true when
it is matched one-to-one (Hungarian assignment, :func:`scipy.optimize.linear_sum_assignment`) to a
true source within ``max_dist`` pixels.
"""

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["detection_scores", "group_iou", "match_levels", "match_sources", "position_crlb",
           "psnr"]


def _xy(cat):
    cat = np.asarray(cat)
    if cat.dtype.names:
        return np.column_stack([cat["x"], cat["y"]]).astype(np.float64).reshape(-1, 2)
    return np.asarray(cat, dtype=np.float64).reshape(-1, 2)


def match_sources(pred, truth, max_dist=1.0):
    """One-to-one matching of detections to true sources within ``max_dist`` pixels.

    Parameters
    ----------
    pred, truth : structured ndarray with fields x, y (or ndarray of shape (n, 2))
    max_dist : float

    Returns
    -------
    pairs : ndarray of shape (n_matched, 2)
        Indices (pred, truth) of the matched pairs, minimising the total distance.
    """
    p, t = _xy(pred), _xy(truth)
    if len(p) == 0 or len(t) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    d = np.hypot(p[:, None, 0] - t[None, :, 0], p[:, None, 1] - t[None, :, 1])
    cost = np.where(d <= max_dist, d, 1e6)
    rows, cols = linear_sum_assignment(cost)
    ok = d[rows, cols] <= max_dist
    return np.column_stack([rows[ok], cols[ok]]).astype(np.int64)


def match_levels(catalogue, truth, max_dist=1.0):
    """Rows of a hierarchical catalogue at the level that matches a reference catalogue.

    Every family (a parent row and its children, see :mod:`cvfs.astro.catalogue`) is compared
    with the reference at one level: its children, unless the parent alone matches more
    reference objects within ``max_dist`` than the children do (one-to-one, each level
    matched on its own against the whole reference); rows outside families are always kept.
    The selected rows form one deblending level per object, so each object is counted once.

    Parameters
    ----------
    catalogue : structured ndarray with fields x, y (and parent, n_children, id)
    truth : structured ndarray with fields x, y (or ndarray of shape (n, 2))
    max_dist : float

    Returns
    -------
    ndarray of bool of shape (len(catalogue),)
        True for the rows to score (all rows when the catalogue has no hierarchy fields).
    """
    cat = np.asarray(catalogue)
    names = cat.dtype.names or ()
    if not {"id", "parent", "n_children"} <= set(names):
        return np.ones(len(cat), bool)
    keep = cat["n_children"] == 0
    for i in np.flatnonzero(cat["n_children"] > 0):
        kids = np.flatnonzero(cat["parent"] == cat["id"][i])
        if len(match_sources(cat[i:i + 1], truth, max_dist)) > \
                len(match_sources(cat[kids], truth, max_dist)):
            keep[kids] = False
            keep[i] = True
    return keep


def detection_scores(pred, truth, max_dist=1.0):
    """Precision, recall, F1, position RMSE and flux error of a catalogue.

    Parameters
    ----------
    pred, truth : structured ndarray with fields x, y and (for the flux error) flux
    max_dist : float
        Match radius in pixels.

    Returns
    -------
    dict
        ``precision``, ``recall``, ``f1``, ``rmse`` (px, over matched pairs), ``flux_error``
        (median |flux - true| / true over matched pairs with a positive true flux, else NaN),
        ``tp``, ``n_pred``, ``n_true``.
    """
    pairs = match_sources(pred, truth, max_dist)
    tp, n_p, n_t = len(pairs), len(_xy(pred)), len(_xy(truth))
    precision = tp / n_p if n_p else 1.0
    recall = tp / n_t if n_t else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    rmse = flux_err = float("nan")
    if tp:
        p, t = _xy(pred)[pairs[:, 0]], _xy(truth)[pairs[:, 1]]
        rmse = float(np.sqrt(np.mean(np.sum((p - t) ** 2, axis=1))))
        pred, truth = np.asarray(pred), np.asarray(truth)
        if pred.dtype.names and truth.dtype.names and "flux" in pred.dtype.names \
                and "flux" in truth.dtype.names:
            fp, ft = pred["flux"][pairs[:, 0]], truth["flux"][pairs[:, 1]]
            ok = ft > 0
            if ok.any():
                flux_err = float(np.median(np.abs(fp[ok] - ft[ok]) / ft[ok]))
    return {"precision": precision, "recall": recall, "f1": f1, "rmse": rmse,
            "flux_error": flux_err, "tp": tp, "n_pred": n_p, "n_true": n_t}


def group_iou(pred, truth, box=3.0):
    """Group-IoU of Def. 5.1: mean best IoU of equal square boxes around each source.

    With m detections and n true sources: if m > n, average over detections of the best IoU with
    any true source; otherwise average over true sources of the best IoU with any detection.

    Parameters
    ----------
    pred, truth : structured ndarray with fields x, y (or ndarray of shape (n, 2))
    box : float
        Side of the square box centred on each source (the paper uses equal-size rectangles).

    Returns
    -------
    float in [0, 1]
    """
    p, t = _xy(pred), _xy(truth)
    if len(p) == 0 or len(t) == 0:
        return 1.0 if len(p) == len(t) else 0.0
    ox = np.clip(box - np.abs(p[:, None, 0] - t[None, :, 0]), 0, None)
    oy = np.clip(box - np.abs(p[:, None, 1] - t[None, :, 1]), 0, None)
    inter = ox * oy
    iou = inter / (2 * box * box - inter)
    return float(iou.max(axis=1).mean() if len(p) > len(t) else iou.max(axis=0).mean())


def psnr(clean, estimate):
    """Peak signal-to-noise ratio 20 log10(max(clean) / RMSE) in dB (Def. 5.2).

    Parameters
    ----------
    clean, estimate : ndarray of the same shape

    Raises
    ------
    ValueError
        If the shapes differ.
    """
    clean = np.asarray(clean, dtype=np.float64)
    estimate = np.asarray(estimate, dtype=np.float64)
    if clean.shape != estimate.shape:
        raise ValueError(f"clean and estimate must have the same shape; got {clean.shape} "
                         f"and {estimate.shape}")
    mse = float(np.mean((clean - estimate) ** 2))
    return float("inf") if mse == 0 else float(20 * np.log10(np.max(clean) / np.sqrt(mse)))


def position_crlb(truth, shape, noise_sigma):
    """Cramer-Rao lower bound on the position error of each source of a scene.

    The Fisher information J^T J / noise_sigma^2 of the pixel-integrated Gaussian PSF model
    (eq. 66) is taken jointly over every source's (x, y, sigma, flux) and the background, at the
    true parameters; its inverse bounds the covariance of any unbiased estimator.

    Parameters
    ----------
    truth : structured ndarray with fields x, y, sigma, flux
        The true sources.
    shape : tuple of int
        Image shape (rows, columns).
    noise_sigma : float
        Standard deviation of the additive Gaussian noise.

    Returns
    -------
    bound : ndarray of shape (n_sources,)
        sqrt(var_x + var_y) of each source, in pixels; pool several scenes with
        ``sqrt(mean(bound ** 2))`` to compare with a position RMSE.

    Raises
    ------
    ValueError
        If ``noise_sigma`` is not positive.
    """
    from cvfs.astro._lm import normal_equations

    if not noise_sigma > 0:
        raise ValueError(f"noise_sigma must be > 0, got {noise_sigma!r}")
    truth = np.asarray(truth)
    if truth.size == 0:
        return np.zeros(0)
    p = np.r_[np.column_stack([truth["x"], truth["y"], truth["sigma"], truth["flux"]]).ravel(),
              0.0]
    # J^T J accumulated over each source's reach, never the dense (pixels x parameters) J
    _, info, _ = normal_equations(np.zeros(tuple(shape)), np.ones(tuple(shape)),
                                  p.astype(np.float64), np.ones(1), np.ones(1))
    cov = np.linalg.pinv(info) * noise_sigma**2
    var = np.diag(cov)[:-1].reshape(-1, 4)
    return np.sqrt(var[:, 0] + var[:, 1])

