"""The one image-file reader: RGB uint8 for detectors and drawings, grey float for measurements.

``read_image(path)`` returns RGB uint8 (what the keypoint detectors and the OpenCV overlays take);
``read_image(path, mode="grey")`` returns a float64 luminance image in [0, 1] with 8- and 16-bit
precision kept (what the astronomy code measures). FITS files are read by
:func:`cvfs.astro.readers.read_image`, which hands every other format to this function.
:func:`write_image` writes an RGB image atomically.

Before decoding, the pixel count is read from the file's header (Pillow) and checked against a
limit (:func:`current_pixel_limit`: 150 million pixels unless raised), so a small file claiming
a huge image (a decompression bomb) is refused before memory is allocated.
"""

import contextlib
import contextvars
import os
from pathlib import Path

import numpy as np

__all__ = ["DEFAULT_MAX_PIXELS", "IMAGE_SUFFIXES", "MAX_PIXELS_ENV", "check_pixels",
           "current_pixel_limit", "image_size", "pixel_limit", "read_image", "write_image"]

#: Default largest image (width x height) read: 150 million pixels (a 12247 x 12247 image; a
#: 12 MP photo, a 100 MP camera frame or a 10k x 10k FITS image pass). Decoded, such an image
#: takes 450 MB as RGB uint8 and 1.2 GB as float64.
DEFAULT_MAX_PIXELS = 150_000_000

#: Environment variable overriding :data:`DEFAULT_MAX_PIXELS` (an integer; 0 = no limit).
MAX_PIXELS_ENV = "CVFS_MAX_PIXELS"

# the limit set by pixel_limit() (a context variable: per thread and task, as decimal contexts)
_LIMIT = contextvars.ContextVar("cvfs_max_pixels", default=None)

#: Suffixes of the image files that folder sources and readers pick up (OpenCV decodes them).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")

_MODES = ("rgb", "grey", "float")


def _parse_limit(value, what):
    try:
        limit = int(value)
    except (TypeError, ValueError):
        limit = -1
    if limit < 0 or (isinstance(value, float) and value != limit):
        raise ValueError(f"{what} must be a non-negative integer (0 = no limit); got {value!r}")
    return limit


def current_pixel_limit(value=None):
    """The pixel limit in force: ``value`` if given, else the one set by :func:`pixel_limit`,
    else the environment variable ``CVFS_MAX_PIXELS``, else :data:`DEFAULT_MAX_PIXELS`.

    Parameters
    ----------
    value : int, optional
        An explicit limit (0 = no limit).

    Returns
    -------
    limit : int
        0 means no limit.

    Raises
    ------
    ValueError
        If the limit is not a non-negative integer.
    """
    if value is not None:
        return _parse_limit(value, "max_pixels")
    if _LIMIT.get() is not None:
        return _LIMIT.get()
    env = os.environ.get(MAX_PIXELS_ENV, "").strip()
    if env:
        return _parse_limit(env, MAX_PIXELS_ENV)
    return DEFAULT_MAX_PIXELS


@contextlib.contextmanager
def pixel_limit(value):
    """Within the block, :func:`current_pixel_limit` (and so every image and FITS reader) uses
    ``value`` (0 = no limit; None leaves the limit unchanged). The command line's
    ``--max-pixels`` sets it around a command."""
    token = _LIMIT.set(None if value is None else _parse_limit(value, "max_pixels"))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def check_pixels(path, shape, limit=None):
    """Raise if an image of ``shape`` (from a file header) exceeds the pixel limit.

    Parameters
    ----------
    path : str or Path
        Named in the error.
    shape : tuple of int
        The data axes from the header: (height, width) of an image, every axis of FITS data
        (a cube counts all its planes); their product is checked.
    limit : int, optional
        As :func:`current_pixel_limit`.

    Raises
    ------
    ValueError
        If height x width exceeds the limit.
    """
    limit = current_pixel_limit(limit)
    dims = [int(d) for d in shape]
    n = int(np.prod(dims, dtype=object))
    if limit and n > limit:
        raise ValueError(
            f"{path}: the header claims a {' x '.join(map(str, dims[::-1]))} image ({n:,} "
            f"pixels), more than the limit of {limit:,} (a decompression bomb or a very large "
            f"image); to read it raise the limit: max_pixels=, --max-pixels or "
            f"{MAX_PIXELS_ENV}")


def image_size(path):
    """(height, width) of an image file from its header, without decoding the pixels.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    shape : tuple of int, or None
        None when Pillow does not recognise the header (OpenCV may still decode the file).
    """
    from PIL import Image

    Image.init()
    with open(path, "rb") as fh:
        prefix = fh.read(16)
        if len(prefix) < 16:  # too short for any header (Pillow's checks read 4-16 bytes)
            return None
        # the format plugins directly: Image.open would apply Pillow's own decompression-bomb
        # limit (a process-wide setting) before the size can be compared with ours
        for fmt in Image.ID:
            factory, accept = Image.OPEN[fmt]
            if accept is not None and not accept(prefix):
                continue
            fh.seek(0)
            try:
                im = factory(fh, str(path))
            except (SyntaxError, IndexError, TypeError, ValueError, OSError, EOFError,
                    KeyError):
                continue
            width, height = im.size
            return int(height), int(width)
    return None


def read_image(path, mode="rgb", *, max_pixels=None):
    """Read an image file.

    Parameters
    ----------
    path : str or Path
    mode : {"rgb", "grey", "float"}, default "rgb"
        ``"rgb"``: colour image as RGB uint8 (grey files are replicated to three channels,
        palette files expanded, an alpha channel dropped; 16-bit files are reduced to 8 bits and
        float files with samples in [0, 1] scaled to 0-255). ``"grey"``: luminance as float64 in [0,
        1] (ITU-R BT.709
        weights, as :func:`skimage.color.rgb2gray`; 16-bit files keep their precision; an alpha
        channel is ignored). ``"float"``: the file's own channels as float64 in [0, 1], shape
        (height, width) for a grey file and (height, width, 3) RGB for a colour one (alpha
        ignored, 16-bit precision kept).
    max_pixels : int, optional
        Largest width x height read (0 = no limit); default as :func:`current_pixel_limit`
        (:data:`DEFAULT_MAX_PIXELS`). Checked from the file's header before decoding.

    Returns
    -------
    image : ndarray of shape (height, width, 3) uint8, or (height, width) / (height, width, 3)
        float64

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If ``mode`` is unknown, the header claims more pixels than the limit, or the file
        cannot be decoded as an image (corrupt, empty or of a format OpenCV does not read; in
        mode ``"rgb"``, float samples outside [0, 1]).
    """
    import cv2

    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}; got {mode!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    size = image_size(path)
    if size is not None:
        check_pixels(path, size, max_pixels)
    data = np.fromfile(path, dtype=np.uint8)
    flag = cv2.IMREAD_COLOR if mode == "rgb" else cv2.IMREAD_UNCHANGED
    image = cv2.imdecode(data, flag) if data.size else None
    if image is None and mode == "rgb" and data.size:  # e.g. a float TIFF: its own channels
        image = _bgr8(path, cv2.imdecode(data, cv2.IMREAD_UNCHANGED))
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


def _bgr8(path, image):
    """A decoded image OpenCV's colour reader refuses (float samples), as BGR uint8; None if
    there is none."""
    import cv2

    if image is None or image.size == 0:
        return None
    if image.ndim == 3 and image.shape[2] == 4:
        image = image[:, :, :3]
    if image.ndim == 3 and image.shape[2] != 3 or image.ndim not in (2, 3):
        raise ValueError(f"{path}: images of shape {image.shape} are not read (expected grey, "
                         "RGB or RGBA)")
    if image.dtype.kind == "f":
        if not np.isfinite(image).all() or image.min() < 0 or image.max() > 1:
            raise ValueError(f"{path}: floating-point samples outside [0, 1] (scale the file "
                             "to [0, 1] or to 8/16-bit integers)")
        image = np.rint(image * 255.0).astype(np.uint8)
    elif image.dtype == np.uint16:
        image = (image >> 8).astype(np.uint8)
    elif image.dtype != np.uint8:
        raise ValueError(f"{path}: samples of type {image.dtype} are not read (expected 8- or "
                         "16-bit integers or float in [0, 1])")
    return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else image


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
