"""Validation of images at the public boundary of :mod:`cvfs.vision`.

Every public function of the package passes user images through :func:`as_float_rgb`, so the rest
of the package can assume a C-contiguous ``float32`` array of shape ``(H, W, 3)`` in ``[0, 1]``.
"""

import numpy as np

__all__ = ["as_float_rgb"]

_INT_SCALE = {np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}


def as_float_rgb(image, *, name="image", min_size=1):
    """Return ``image`` as a C-contiguous float32 RGB array in ``[0, 1]``.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB image, ``uint8`` (divided by 255), ``uint16`` (divided by 65535) or floating point
        already in ``[0, 1]``.
    name : str, default="image"
        Parameter name used in error messages.
    min_size : int, default=1
        Smallest accepted height and width.

    Returns
    -------
    rgb : ndarray of shape (H, W, 3), dtype float32
        C-contiguous; the input itself when it already is a C-contiguous float32 array in
        ``[0, 1]`` (it is never modified), else a new array.

    Raises
    ------
    TypeError
        If ``image`` is not an ndarray or has an unsupported dtype (bool, signed integers, complex,
        object, ...).
    ValueError
        If ``image`` is empty, grayscale (2-D or one channel), not three-channel, smaller than
        ``min_size``, contains NaN/inf, or is floating point outside ``[0, 1]``.
    """
    if not isinstance(image, np.ndarray):
        raise TypeError(
            f"{name} must be a numpy ndarray of shape (H, W, 3); received {type(image).__name__}"
        )
    if image.size == 0:
        raise ValueError(f"{name} is empty: expected shape (H, W, 3), received {image.shape}")
    if image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 1):
        raise ValueError(
            f"{name} is grayscale with shape {image.shape}: expected an RGB image of shape "
            "(H, W, 3); convert with np.repeat(gray[..., None], 3, axis=2) or "
            "cv2.cvtColor(gray, cv2.COLOR_GRAY2RGB)"
        )
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{name} must have shape (H, W, 3); received shape {image.shape}")
    dtype = image.dtype
    if dtype in _INT_SCALE:
        rgb = image.astype(np.float32) / np.float32(_INT_SCALE[dtype])
    elif dtype.kind == "f":
        rgb = np.ascontiguousarray(image, dtype=np.float32)
        if not np.isfinite(rgb).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        lo, hi = float(rgb.min()), float(rgb.max())
        if lo < 0.0 or hi > 1.0:
            raise ValueError(
                f"{name} is floating point with values in [{lo:.4g}, {hi:.4g}]: expected values "
                "in [0, 1] (pass uint8 images unscaled)"
            )
    else:
        raise TypeError(
            f"{name} has dtype {dtype}: expected uint8, uint16 or floating point in [0, 1]"
        )
    if min(rgb.shape[:2]) < min_size:
        raise ValueError(
            f"{name} is too small: expected height and width >= {min_size}, received shape "
            f"{image.shape}"
        )
    return np.ascontiguousarray(rgb)
