"""The one image-file reader: RGB uint8 for detectors and drawings, grey float for measurements.

``read_image(path)`` returns RGB uint8 (what the keypoint detectors and the OpenCV overlays take);
``read_image(path, mode="grey")`` returns a float64 luminance image in [0, 1] with 8- and 16-bit
precision kept (what the astronomy code measures). FITS files are read by
:func:`cvfs.astro.readers.read_image`, which hands every other format to this function.
:func:`write_image` writes an RGB image atomically.
"""

from pathlib import Path

import numpy as np

__all__ = ["IMAGE_SUFFIXES", "read_image", "write_image"]

#: Suffixes of the image files that folder sources and readers pick up (OpenCV decodes them).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")

_MODES = ("rgb", "grey", "float")


def read_image(path, mode="rgb"):
    """Read an image file.

    Parameters
    ----------
    path : str or Path
    mode : {"rgb", "grey", "float"}, default "rgb"
        ``"rgb"``: colour image as RGB uint8 (grey files are replicated to three channels; 16-bit
        files are reduced to 8 bits). ``"grey"``: luminance as float64 in [0, 1] (ITU-R BT.709
        weights, as :func:`skimage.color.rgb2gray`; 16-bit files keep their precision; an alpha
        channel is ignored). ``"float"``: the file's own channels as float64 in [0, 1], shape
        (height, width) for a grey file and (height, width, 3) RGB for a colour one (alpha
        ignored, 16-bit precision kept).

    Returns
    -------
    image : ndarray of shape (height, width, 3) uint8, or (height, width) / (height, width, 3)
        float64

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If ``mode`` is unknown, or the file cannot be decoded as an image (corrupt, empty or of
        a format OpenCV does not read).
    """
    import cv2

    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}; got {mode!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    data = np.fromfile(path, dtype=np.uint8)
    flag = cv2.IMREAD_COLOR if mode == "rgb" else cv2.IMREAD_UNCHANGED
    image = cv2.imdecode(data, flag) if data.size else None
    if image is None or image.size == 0:
        raise ValueError(f"could not decode image file {path}: not a readable image (corrupt, "
                         "empty or of a format OpenCV does not read)")
    if mode == "rgb":
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    scale = np.iinfo(image.dtype).max if np.issubdtype(image.dtype, np.integer) else 1.0
    image = image.astype(np.float64) / scale
    if image.ndim == 3 and mode == "float":
        return image[..., 2::-1] if image.shape[-1] >= 3 else image[..., 0]
    if image.ndim == 3:
        from skimage.color import rgb2gray

        image = rgb2gray(image[..., 2::-1]) if image.shape[-1] >= 3 else image[..., 0]
    return image


def write_image(path, image):
    """Write an RGB uint8 image (or a grey one) atomically; the format follows the suffix.

    Parameters
    ----------
    path : str or Path
    image : ndarray of shape (height, width, 3) or (height, width), uint8

    Returns
    -------
    path : Path

    Raises
    ------
    ValueError
        If OpenCV cannot encode the image in the format of ``path``'s suffix.
    """
    import cv2

    from cvfs.io._atomic import atomic_path

    path = Path(path)
    image = np.asarray(image)
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, data = cv2.imencode(path.suffix or ".png", image)
    if not ok:
        raise ValueError(f"cannot encode an image of shape {image.shape} as {path}")
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.tobytes())
    return path
