"""Validation of images at the public boundary of :mod:`cvfs.vision`.

Every public function of the package passes user images through :func:`as_float_rgb`, so the rest
of the package can assume a C-contiguous ``float32`` array of shape ``(H, W, 3)`` in ``[0, 1]``.
:func:`to_rgb` turns the other kinds of photo (grey, grey or colour with alpha, a Pillow image of
any mode) into three channels first, for callers that accept them.
"""

import numpy as np

__all__ = ["as_float_rgb", "to_rgb"]

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


def to_rgb(image, *, name="image"):
    """Three channels of any photo: grey replicated, alpha dropped, Pillow images converted.

    Parameters
    ----------
    image : ndarray or PIL.Image.Image
        An ndarray of shape (H, W) or (H, W, 1) (grey), (H, W, 2) (grey and alpha), (H, W, 3)
        (RGB) or (H, W, 4) (RGBA), any dtype :func:`as_float_rgb` accepts; or a Pillow image
        (palette, 1-bit, grey, 16-bit grey, CMYK, with or without alpha).

    Returns
    -------
    rgb : ndarray of shape (H, W, 3)
        The same dtype (a Pillow image: uint8, or uint16 for 16-bit grey); the input itself
        when it already has three channels. Alpha is dropped, not composited: the colour of
        transparent pixels is kept as stored.

    Raises
    ------
    TypeError
        If ``image`` is neither an ndarray nor a Pillow image.
    ValueError
        If the array has another number of dimensions or channels.
    """
    if not isinstance(image, np.ndarray) and hasattr(image, "mode") and hasattr(image, "convert"):
        mode = image.mode
        if mode.startswith("I;16"):
            image = np.asarray(image).astype(np.uint16)
        elif mode in ("I", "F"):
            raise ValueError(f"{name} is a Pillow image of mode {mode!r} (32-bit values): "
                             "scale it to uint8, uint16 or float in [0, 1] first")
        else:
            image = np.asarray(image.convert("RGB"))
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{name} must be a numpy ndarray or a PIL image; received "
                        f"{type(image).__name__}")
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"{name} must have shape (H, W), (H, W, 1), (H, W, 2), (H, W, 3) or "
                         f"(H, W, 4); received shape {image.shape}")
    if image.shape[2] in (1, 2):
        return np.repeat(image[:, :, :1], 3, axis=2)
    return image[:, :, :3] if image.shape[2] == 4 else image
