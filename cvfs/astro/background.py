"""Background and noise maps of sky images.

The image is cut into boxes of ``box`` x ``box`` pixels (the last row and column of boxes may be
smaller). In each box the unmasked pixels are sigma-clipped around their median until no pixel
moves; the box background is the mode estimate 2.5 median - 1.5 mean (the median when mean and
median differ by more than 0.3 clipped standard deviations, i.e. a crowded box) and the box noise
is the clipped standard deviation (Bertin & Arnouts 1996, Sec. 3.1) less the variance of the sky's
slope across the box. Boxes with too few unmasked pixels take the values of the nearest valid box;
a median filter over the mesh (around its fitted plane, so that a sky gradient is kept) removes
boxes biased by bright objects; a cubic spline through the box centres (not-a-knot, one axis
after the other: the tensor-product spline) gives the value at every pixel; the noise map is
clipped to the range of the box values (no overshoot to near-zero noise at the edges).
:func:`estimate_background_noise` gives one global level and noise sigma (wavelet MAD).
"""

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import make_interp_spline
from scipy.ndimage import distance_transform_edt, median_filter

__all__ = ["NOISE_FLOOR", "Background", "default_box_size", "estimate_background",
           "estimate_background_noise"]


#: smallest noise sigma relative to max |pixel| (float64 resolves 2.2e-16 of it): an estimate
#: below is raised to it, and a given ``noise_sigma`` or ``error`` below it is refused
NOISE_FLOOR = 1e-12


def estimate_background_noise(image):
    """Background level (sigma-clipped median) and noise sigma (wavelet MAD) of an image.

    Parameters
    ----------
    image : ndarray of shape (height, width)

    Returns
    -------
    background, noise_sigma : float

    References
    ----------
    Donoho & Johnstone, "Ideal spatial adaptation by wavelet shrinkage", 1994 (MAD estimator).
    """
    from skimage.restoration import estimate_sigma

    img = np.asarray(image, dtype=np.float64)
    peak = float(np.max(np.abs(img))) if img.size else 0.0
    if not np.isfinite(peak):
        raise ValueError("image has NaN or infinite pixels; mask or fill them first")
    if peak == 0.0:
        return 0.0, 0.0
    # estimates on the image scaled by a power of two (exact) to max |pixel| in [0.5, 1), then
    # mapped back: every step is relative to the image's own scale, and nothing overflows
    e = math.frexp(peak)[1]
    bg, sigma = _background_noise(np.ldexp(img, -e), estimate_sigma)
    return math.ldexp(bg, e), math.ldexp(sigma, e)


def _background_noise(img, estimate_sigma):
    """:func:`estimate_background_noise` of an image with max |pixel| in [0.5, 1)."""
    with warnings.catch_warnings():
        # a grey image 3 or 4 pixels wide is not a colour image
        warnings.filterwarnings("ignore", message=".*channel_axis is None")
        sigma = float(estimate_sigma(img))
    vals = img.ravel()
    med = float(np.median(vals))
    for _ in range(10):
        s = sigma if sigma > 0 else float(np.std(vals))
        keep = np.abs(vals - med) < 3.0 * s
        if keep.sum() < 10:
            break
        new = float(np.median(vals[keep]))
        if new == med:
            break
        med = new
        vals = vals[keep] if keep.sum() > 0.2 * img.size else vals
    if not sigma > 0:
        # no noise measurable: the MAD, else the float64 resolution of the image
        sigma = float(1.4826 * np.median(np.abs(img - med))) or NOISE_FLOOR
    return med, max(sigma, NOISE_FLOOR)


@dataclass
class Background:
    """Result of :func:`estimate_background`.

    Attributes
    ----------
    background : ndarray of shape (height, width)
        Sky level at every pixel.
    rms : ndarray of shape (height, width)
        Noise standard deviation at every pixel.
    global_background, global_rms : float
        Medians of the box values.
    mesh_background, mesh_rms : ndarray of shape (n_box_rows, n_box_cols)
        Box values after filling and median filtering.
    box : int
        Box size used.
    """

    background: np.ndarray
    rms: np.ndarray
    global_background: float
    global_rms: float
    mesh_background: np.ndarray
    mesh_rms: np.ndarray
    box: int


def default_box_size(shape):
    """64 pixels, or a quarter of the shorter side (at least 16) for images under 256 pixels.

    A box must be several times larger than the objects and small enough to follow the sky.
    """
    return int(min(64, max(16, min(shape) // 4)))


def _clipped_stats(boxes, nsigma, max_iter):
    """Sigma-clipped median, mean, std along the last axis of ``boxes`` (NaN = ignored)."""
    vals = boxes.copy()
    n_prev = np.sum(np.isfinite(vals), axis=-1)
    for _ in range(max_iter):
        med = np.nanmedian(vals, axis=-1, keepdims=True)
        std = np.nanstd(vals, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore"):
            vals[np.abs(vals - med) > nsigma * std] = np.nan
        n = np.sum(np.isfinite(vals), axis=-1)
        if np.array_equal(n, n_prev):
            break
        n_prev = n
    med = np.nanmedian(vals, axis=-1)
    mean = np.nanmean(vals, axis=-1)
    std = np.nanstd(vals, axis=-1)
    return med, mean, std, n_prev


def _box_centres(box, m, n):
    """Pixel coordinates of the centres of ``m`` boxes along an axis of ``n`` pixels."""
    # a partial last box is centred on its own pixels
    return np.minimum(box * np.arange(m) + (box - 1) / 2.0, (box * np.arange(m) + n - 1) / 2.0)


def _median_filter_detrended(mesh, size, yc, xc):
    """Median filter of a mesh (box centres ``yc``, ``xc``) around its least-squares plane: boxes
    biased by bright objects are replaced, and a linear sky gradient passes unchanged (a median
    filter of the mesh itself pulls the edge boxes of a gradient by one box step)."""
    rr, cc = np.meshgrid(yc, xc, indexing="ij")
    design = np.column_stack([np.ones(mesh.size), rr.ravel(), cc.ravel()])
    coef = np.linalg.lstsq(design, mesh.ravel(), rcond=None)[0]
    plane = (design @ coef).reshape(mesh.shape)
    return plane + median_filter(mesh - plane, size=size, mode="nearest")


def _spline_to_pixels(mesh, box, shape):
    """Cubic (or lower-order, for short axes) interpolating spline from box centres to pixels."""
    out = mesh
    for axis, n in enumerate(shape):
        m = out.shape[axis]
        if m == 1:
            out = np.repeat(out, n, axis=axis)
            continue
        centres = _box_centres(box, m, n)
        spline = make_interp_spline(centres, out, k=min(3, m - 1), axis=axis)
        out = spline(np.arange(n, dtype=np.float64))
    return out


def estimate_background(image, *, mask=None, box=None, filter_size=3, nsigma=3.0, max_iter=20,
                        min_fraction=0.5):
    """Background and noise maps from sigma-clipped statistics in boxes.

    Parameters
    ----------
    image : ndarray of shape (height, width)
        Float image; NaN and infinite pixels are ignored.
    mask : ndarray of bool of shape (height, width), optional
        True where a pixel must be ignored.
    box : int, optional
        Box side in pixels; :func:`default_box_size` when None.
    filter_size : int
        Size of the median filter over the mesh of boxes (1 = none).
    nsigma : float
        Clipping threshold in standard deviations.
    max_iter : int
        Clipping iterations per box.
    min_fraction : float
        Boxes with fewer unmasked pixels than this fraction of a box are filled from the nearest
        valid box.

    Returns
    -------
    Background

    Raises
    ------
    ValueError
        If no pixel is usable or ``box`` is not a positive int.

    References
    ----------
    Bertin & Arnouts, "SExtractor: software for source extraction", A&AS 117, 393 (1996), Sec. 3.1.
    """
    img = np.asarray(image, dtype=np.float64)
    h, w = img.shape
    if box is None:
        box = default_box_size(img.shape)
    if not isinstance(box, numbers.Integral) or box < 2:
        raise ValueError(f"box must be an int >= 2; got {box!r}")
    box = int(min(box, max(h, w)))
    bad = ~np.isfinite(img) if mask is None else (np.asarray(mask, bool) | ~np.isfinite(img))
    if bad.all():
        raise ValueError("no usable pixel: every pixel is masked, NaN or infinite")
    ny, nx = -(-h // box), -(-w // box)
    padded = np.full((ny * box, nx * box), np.nan)
    padded[:h, :w] = np.where(bad, np.nan, img)
    boxes = padded.reshape(ny, box, nx, box).transpose(0, 2, 1, 3).reshape(ny, nx, box * box)
    n_pix = np.sum(np.isfinite(boxes), axis=-1)
    size = (np.minimum(box, h - box * np.arange(ny))[:, None]
            * np.minimum(box, w - box * np.arange(nx))[None, :])
    valid = n_pix >= min_fraction * size
    if not valid.any():  # everything is partly masked: use every box with any pixel
        valid = n_pix > 0
    with np.errstate(invalid="ignore"):
        boxes[~valid] = 0.0  # skipped below; keeps nan-reductions quiet
        med, mean, std, _ = _clipped_stats(boxes, nsigma, max_iter)
        crowded = np.abs(mean - med) > 0.3 * std
    back = np.where(crowded, med, 2.5 * med - 1.5 * mean)
    rms = std
    if not valid.all():
        idx = distance_transform_edt(~valid, return_distances=False, return_indices=True)
        back, rms = back[tuple(idx)], rms[tuple(idx)]
    if filter_size > 1 and (ny > 1 or nx > 1):
        back = _median_filter_detrended(back, filter_size, _box_centres(box, ny, h),
                                        _box_centres(box, nx, w))
        rms = median_filter(rms, size=filter_size, mode="nearest")
    if min(ny, nx) < 3:
        # two boxes along an axis cannot tell a gradient from a crowded box: a flat sky
        back = np.full_like(back, np.median(back))
    else:
        # a box's clipped std holds the sky's slope across the box (a ramp of width
        # b * slope has variance (b * slope)^2 / 12) besides the noise: removed
        gy, gx = np.gradient(back, _box_centres(box, ny, h), _box_centres(box, nx, w))
        hy = np.minimum(box, h - box * np.arange(ny))[:, None]
        wx = np.minimum(box, w - box * np.arange(nx))[None, :]
        ramp = ((hy * gy) ** 2 + (wx * gx) ** 2) / 12.0
        rms = np.sqrt(np.maximum(rms * rms - ramp, 0.25 * rms * rms))
    back_map = _spline_to_pixels(back, box, (h, w))
    rms_map = np.clip(_spline_to_pixels(rms, box, (h, w)), rms.min(), rms.max())
    floor = max(float(np.median(rms)) * 1e-3, 1e-300)
    rms_map = np.maximum(rms_map, floor)
    return Background(back_map, rms_map, float(np.median(back)), float(np.median(rms)), back,
                      rms, box)
