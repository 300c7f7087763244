"""Gaussian image pyramid with several scales per octave, including upsampled levels.

A pyramid level ``k`` has the nominal scale ``s_k = 2 ** (k / scales_per_octave)``: one level pixel
covers ``1 / s_k`` original pixels. ``k > 0`` are upsampled levels (small faces: Caltech faces have
an inter-eye distance of ~14 px while the keypoint detectors want 20-40 px), ``k = 0`` is the
original resolution and ``k < 0`` are downsampled levels.

Coordinates. Pixel centres sit at integer coordinates starting at 0; ``x`` is the column and ``y``
the row. A level of shape ``(h, w)`` made from an original of shape ``(H, W)`` has the actual
per-axis scales ``scale_y = h / H`` and ``scale_x = w / W`` (sizes are rounded, so they differ
slightly from the nominal ``scale``), and the resampling is centre-aligned (OpenCV's convention)::

    x_original = (x_level + 0.5) / scale_x - 0.5
    y_original = (y_level + 0.5) / scale_y - 0.5

Construction. Octave bases ``O_0 = original`` and ``O_{q+1}`` = ``O_q`` blurred (Gaussian,
``sigma = sqrt(3) / 2``) and resized by one half. The level ``k = -(4 q + r)`` is ``O_q`` blurred
with ``sigma = sqrt(f**2 - 1) / 2`` (``f = 2 ** (r / 4)``, the remaining downscale factor) and
resized with bilinear interpolation; upsampled levels are bilinear resizes of the original.
A level is therefore identical whether built alone (:func:`pyramid_level`) or inside
:func:`gaussian_pyramid`.

References
----------
Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning", IEEE TPAMI 2017, section 3.3 (Gaussian pyramid with 4 scales per octave).
"""

import math
from dataclasses import dataclass

import cv2
import numpy as np

from cvfs.vision._checks import as_float_rgb

__all__ = [
    "PyramidLevel",
    "gaussian_pyramid",
    "iter_pyramid",
    "pyramid_level",
    "pyramid_scales",
]


@dataclass(frozen=True, eq=False)
class PyramidLevel:
    """One level of a :func:`gaussian_pyramid`.

    Attributes
    ----------
    image : ndarray of shape (h, w, 3), dtype float32
        The level image, RGB in ``[0, 1]``.
    index : int
        Level exponent ``k``: nominal scale ``2 ** (k / scales_per_octave)`` (0 = original size,
        positive = upsampled).
    scale : float
        Nominal scale ``2 ** (index / scales_per_octave)``.
    scale_y, scale_x : float
        Actual scales ``h / H`` and ``w / W`` used for coordinate mapping.
    """

    image: np.ndarray
    index: int
    scale: float
    scale_y: float
    scale_x: float

    @property
    def shape(self):
        """tuple of int: ``(h, w)`` of the level image."""
        return self.image.shape[:2]

    def to_original(self, xy):
        """Map level coordinates to original-image coordinates.

        Parameters
        ----------
        xy : array_like of shape (n, 2) or (2,)
            Level coordinates, column ``x`` first then row ``y``.

        Returns
        -------
        ndarray of shape like ``xy``, dtype float64
            ``(x + 0.5) / scale_x - 0.5`` and ``(y + 0.5) / scale_y - 0.5``.
        """
        xy = np.asarray(xy, dtype=np.float64)
        s = np.array([self.scale_x, self.scale_y])
        return (xy + 0.5) / s - 0.5

    def from_original(self, xy):
        """Map original-image coordinates to this level (inverse of :meth:`to_original`).

        Parameters
        ----------
        xy : array_like of shape (n, 2) or (2,)
            Original coordinates, column ``x`` first then row ``y``.

        Returns
        -------
        ndarray of shape like ``xy``, dtype float64
        """
        xy = np.asarray(xy, dtype=np.float64)
        s = np.array([self.scale_x, self.scale_y])
        return (xy + 0.5) * s - 0.5


def _check_spo(scales_per_octave):
    if not isinstance(scales_per_octave, (int, np.integer)) or scales_per_octave < 1:
        raise ValueError(
            f"scales_per_octave must be a positive int; received {scales_per_octave!r}"
        )
    return int(scales_per_octave)


def _level_size(shape, index, spo):
    s = 2.0 ** (index / spo)
    return max(1, int(round(shape[0] * s))), max(1, int(round(shape[1] * s)))


def pyramid_scales(shape, *, scales_per_octave=4, max_scale=1.0, min_size=24, max_levels=None):
    """Level exponents and nominal scales of the pyramid of an image of a given shape.

    Parameters
    ----------
    shape : tuple of int
        ``(H, W)`` or ``(H, W, 3)`` of the original image.
    scales_per_octave : int, default=4
        Levels per factor of two.
    max_scale : float, default=1.0
        Largest nominal scale (e.g. ``2.0`` adds one upsampled octave). The first level is
        ``k = floor(scales_per_octave * log2(max_scale))`` (with a small tolerance).
    min_size : int, default=24
        Stop before a level whose height or width would fall below ``min_size`` (the window).
    max_levels : int or None, default=None
        At most this many levels.

    Returns
    -------
    indices : ndarray of shape (n_levels,), dtype int64
        Exponents ``k``, decreasing.
    scales : ndarray of shape (n_levels,), dtype float64
        ``2 ** (k / scales_per_octave)``.

    Raises
    ------
    ValueError
        If a parameter is out of range or the image is smaller than ``min_size``.
    """
    spo = _check_spo(scales_per_octave)
    if len(shape) < 2 or min(shape[:2]) < 1:
        raise ValueError(f"shape must be (H, W[, C]) with positive sizes; received {shape}")
    if not (np.isfinite(max_scale) and max_scale > 0):
        raise ValueError(f"max_scale must be a positive finite float; received {max_scale!r}")
    if not isinstance(min_size, (int, np.integer)) or min_size < 1:
        raise ValueError(f"min_size must be a positive int; received {min_size!r}")
    if max_levels is not None and (not isinstance(max_levels, (int, np.integer)) or max_levels < 1):
        raise ValueError(f"max_levels must be None or a positive int; received {max_levels!r}")
    k = int(math.floor(spo * math.log2(max_scale) + 1e-9))
    indices = []
    while True:
        h, w = _level_size(shape, k, spo)
        if min(h, w) < min_size or (max_levels is not None and len(indices) >= max_levels):
            break
        indices.append(k)
        k -= 1
    if not indices:
        raise ValueError(
            f"image of shape {tuple(shape)} has no pyramid level of at least {min_size} px at "
            f"max_scale={max_scale}"
        )
    indices = np.array(indices, dtype=np.int64)
    return indices, 2.0 ** (indices / spo)


def _resize(img, size_hw, sigma):
    if sigma > 0:
        img = cv2.GaussianBlur(img, (0, 0), sigmaX=sigma, sigmaY=sigma,
                               borderType=cv2.BORDER_REFLECT_101)
    out = cv2.resize(img, (size_hw[1], size_hw[0]), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(out.reshape(size_hw[0], size_hw[1], 3), dtype=np.float32)


def _octave_sizes(shape, q):
    return max(1, int(round(shape[0] / 2.0**q))), max(1, int(round(shape[1] / 2.0**q)))


class _OctaveBases:
    """Lazily built octave bases ``O_q`` (each from the previous one)."""

    def __init__(self, rgb):
        self.shape = rgb.shape[:2]
        self.bases = [rgb]

    def get(self, q):
        while len(self.bases) <= q:
            nq = len(self.bases)
            self.bases.append(_resize(self.bases[-1], _octave_sizes(self.shape, nq),
                                      math.sqrt(3.0) / 2.0))
        return self.bases[q]


def _make_level(bases, index, spo):
    index = int(index)
    shape = bases.shape
    size = _level_size(shape, index, spo)
    if index >= 0:
        img = bases.get(0) if index == 0 else _resize(bases.get(0), size, 0.0)
    else:
        q, r = divmod(-index, spo)
        base = bases.get(q)
        if r == 0:
            img = base
        else:
            f = 2.0 ** (r / spo)
            img = _resize(base, size, math.sqrt(f * f - 1.0) / 2.0)
    return PyramidLevel(image=img, index=int(index), scale=2.0 ** (index / spo),
                        scale_y=img.shape[0] / shape[0], scale_x=img.shape[1] / shape[1])


def gaussian_pyramid(image, *, scales_per_octave=4, max_scale=1.0, min_size=24, max_levels=None):
    """Gaussian pyramid with ``scales_per_octave`` levels per octave.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB image, uint8/uint16 or float in ``[0, 1]``.
    scales_per_octave : int, default=4
        Levels per factor of two (factor ``2 ** (1 / 4)`` between levels by default).
    max_scale : float, default=1.0
        Largest nominal scale; ``2.0`` adds four upsampled levels (faces twice as large).
    min_size : int, default=24
        Smallest level height/width (a level must hold one 24x24 window).
    max_levels : int or None, default=None
        At most this many levels (e.g. 18 for the benchmark of a 640x480 frame).

    Returns
    -------
    levels : list of PyramidLevel
        From the largest scale to the smallest; ``levels[i].image`` is float32 ``(h, w, 3)``.

    Raises
    ------
    TypeError, ValueError
        For an invalid image (see :func:`cvfs.vision.as_float_rgb`) or parameters.

    References
    ----------
    Barbu et al., TPAMI 2017, section 3.3.
    """
    return list(iter_pyramid(image, scales_per_octave=scales_per_octave, max_scale=max_scale,
                             min_size=min_size, max_levels=max_levels))


def iter_pyramid(image, *, scales_per_octave=4, max_scale=1.0, min_size=24, max_levels=None):
    """The levels of :func:`gaussian_pyramid` one at a time, each built when it is requested.

    Only the octave bases (a third of the image's memory) are kept between levels, so a caller
    that drops each level before requesting the next holds one level at a time. The image and
    parameters are checked on the first request.

    Parameters
    ----------
    image, scales_per_octave, max_scale, min_size, max_levels
        As for :func:`gaussian_pyramid`.

    Yields
    ------
    level : PyramidLevel
        From the largest scale to the smallest, identical to the levels of
        :func:`gaussian_pyramid`.

    Raises
    ------
    TypeError, ValueError
        For an invalid image (see :func:`cvfs.vision.as_float_rgb`) or parameters.
    """
    rgb = as_float_rgb(image)
    indices, _ = pyramid_scales(rgb.shape, scales_per_octave=scales_per_octave,
                                max_scale=max_scale, min_size=min_size, max_levels=max_levels)
    bases = _OctaveBases(rgb)
    del rgb
    for k in indices:
        yield _make_level(bases, k, int(scales_per_octave))


def pyramid_level(image, index, *, scales_per_octave=4):
    """Build one pyramid level (identical to the same level of :func:`gaussian_pyramid`).

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB image, uint8/uint16 or float in ``[0, 1]``.
    index : int
        Level exponent ``k`` (nominal scale ``2 ** (k / scales_per_octave)``).
    scales_per_octave : int, default=4

    Returns
    -------
    PyramidLevel

    Raises
    ------
    TypeError, ValueError
        For an invalid image or a non-integer ``index``.
    """
    rgb = as_float_rgb(image)
    spo = _check_spo(scales_per_octave)
    if not isinstance(index, (int, np.integer)):
        raise ValueError(f"index must be an int; received {index!r}")
    return _make_level(_OctaveBases(rgb), int(index), spo)
