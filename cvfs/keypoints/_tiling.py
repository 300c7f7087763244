"""Memory model of a keypoint scan and the split of large pyramid levels into bands of rows.

:meth:`cvfs.keypoints.KeypointDetector.detect` holds, besides the caller's image:

- the float32 RGB copy of the image and its octave bases: ``16 H W`` bytes (12 + 12 / 3);
- one level image at a time, float32 RGB: ``12 h w`` bytes (plus, while a downsampled level is
  built, the blurred copy of its octave base: ``12`` bytes per base pixel);
- per band of rows being scanned, ``band_bytes`` per band pixel::

      8 n_models                    scores (float64 per classifier and window)
    + 40                            window top-left (row, col) int64 and their temporaries
    + 24       if Haar columns      integral images, 3 channels float64
    + 135      if HOG columns       cells 3 x 8 float32 (96), bins int8 (3), magnitude and
                                    |g_row|, |g_col| float32 (36)
    + 64       without the cascade  centres int64 (16), HOG block factors 2 x 3 float64 (48)

  plus a fixed part (scan kernel buffers; the float32 feature chunk of the full scan).

A level is scanned whole when it fits the budget left after the image, the octave bases and
the level image (divided by the number of threads); otherwise it is cut into overlapping bands
of rows. Every band of a level also holds one row of integral images (``24 (w + 1)`` bytes) for
as long as the level is scanned. When the image and the level leave less than
:func:`band_floor` (an upsampled level of a large photo: 4000 x 3000 at scale 2 is a 576 MB level
image), the bands get the floor and the call exceeds ``max_memory`` by about the floor and the
part of the level image beyond the budget, and says so in a warning. A band of ``step`` window rows
holds ``step + 2`` rows of window scores (the peaks of
its ``step`` own rows need the scores of their neighbour rows) and ``step + 25`` level rows;
bands start ``step`` window rows apart. The integral images and HOG maps of a band equal the
same rows of the whole level's (:func:`cvfs.vision.level_bands`), so the detections do not
depend on the split.
"""

import numpy as np

from cvfs.vision import HALF, WINDOW

__all__ = ["BAND_FLOOR", "MAX_MEMORY", "BandPlan", "band_budget", "band_bytes",
           "band_floor", "check_max_memory", "image_bytes", "level_bytes", "split_rows"]

#: Default memory budget of one ``detect`` call in bytes (the image, the pyramid and the scan):
#: 640 MiB, so that with the interpreter, numba and the shipped models (~250 MB resident) a
#: detecting process stays within 1 GB.
MAX_MEMORY = 640 << 20

#: Largest floor of the memory of the bands in flight (:func:`band_floor`). Smaller bands
#: cost more integral-image rows (one per band: bands of one window row on the 8000 x 6000 level
#: of a 4000 x 3000 photo at scale 2 held 1.2 GB of them) and more per-band overhead; 80 MiB
#: gives such a level bands of 10 window rows (``benchmarks/keypoints/keypoints_memory.py``).
BAND_FLOOR = 80 << 20

_LEVEL_PIXEL = 12  # float32 RGB
_BAND_FIXED = 16 << 20  # scan kernel group buffers and HOG block store (a few MB)
_FULL_CHUNK = 16384  # windows per feature chunk of the full scan (level_scan.CHUNK)


def check_max_memory(max_memory):
    """``max_memory`` as a positive int of bytes (``None``: :data:`MAX_MEMORY`)."""
    if max_memory is None:
        return MAX_MEMORY
    if (isinstance(max_memory, (int, np.integer, float, np.floating))
            and not isinstance(max_memory, bool) and np.isfinite(max_memory) and max_memory > 0):
        return int(max_memory)
    raise ValueError(f"max_memory must be a positive number of bytes or None; got {max_memory!r}")


def image_bytes(shape):
    """Bytes of the float32 RGB image of ``shape`` (H, W) and its octave bases."""
    return 16 * int(shape[0]) * int(shape[1])


def level_bytes(shape, scale, blurred):
    """Bytes of a level of nominal ``scale`` built from an image of ``shape`` (H, W), with the
    blurred copy of its octave base while it is built (``blurred``: a downsampled level that is
    not an octave base itself)."""
    px = int(shape[0]) * int(shape[1])
    base = px / 4 ** np.floor(-np.log2(scale) + 1e-9) if blurred else 0.0
    return int(_LEVEL_PIXEL * (px * scale * scale + base))


def band_floor(max_memory):
    """Bytes the bands in flight get at least: ``min(BAND_FLOOR, max_memory / 8)``."""
    return min(BAND_FLOOR, max_memory / 8)


def band_budget(avail, lv_bytes, n_jobs, max_memory):
    """Bytes each of ``n_jobs`` bands in flight may use on a level of ``lv_bytes``.

    Parameters
    ----------
    avail : float
        ``max_memory`` less the image copy and octave bases (:func:`image_bytes`).
    lv_bytes : float
        The level image (:func:`level_bytes`).
    n_jobs : int
        Bands scanned at once.
    max_memory : int
        The budget of the call.

    Returns
    -------
    budget : float
        ``(avail - lv_bytes) / n_jobs``, but at least ``band_floor(max_memory)``: the floor is
        not shared by the threads, since a level beyond the budget is scanned one band at a
        time (:func:`cvfs.keypoints.level_scan.pyramid_peaks` starts a band only when the
        memory in flight leaves room for it, or when nothing else runs).
    """
    return max((avail - lv_bytes) / n_jobs, band_floor(max_memory))


def band_bytes(models, haar, hog, cascade):
    """Bytes of a band being scanned: per level pixel (module docstring) and fixed.

    Parameters
    ----------
    models : list of AdditiveModel
    haar, hog : bool
        Whether the models read Haar / HOG columns.
    cascade : bool
        The soft-cascade scan (else the full scan, feature chunks of ``_FULL_CHUNK`` windows).

    Returns
    -------
    per_pixel, fixed : int
    """
    b = 8 * len(models) + 40
    b += 24 if haar else 0
    b += 135 if hog else 0
    b += 0 if cascade else 16 + (48 if hog else 0)
    chunk = 0 if cascade else _FULL_CHUNK * 4 * max(m.n_features for m in models)
    return b, _BAND_FIXED + chunk


class BandPlan:
    """Window rows of one band: scores of rows ``s .. e - 1``, peaks kept in ``k0 .. k1 - 1``
    (rows of window top-left corners on the level); level rows ``s .. e + 22``."""

    __slots__ = ("s", "e", "k0", "k1")

    def __init__(self, s, e, k0, k1):
        self.s, self.e, self.k0, self.k1 = s, e, k0, k1

    @property
    def pixel_rows(self):
        """``(r0, r1)``: the level rows the band's windows cover."""
        return self.s, self.e + WINDOW - 1

    def __repr__(self):
        return f"BandPlan(s={self.s}, e={self.e}, k0={self.k0}, k1={self.k1})"


def split_rows(shape, budget, per_pixel, fixed):
    """Bands of rows of a level of ``shape`` (h, w) that each fit ``budget`` bytes.

    Parameters
    ----------
    shape : tuple of int
        ``(h, w)`` of the level, both at least the window.
    budget : float
        Bytes one band may use.
    per_pixel, fixed : int
        From :func:`band_bytes`.

    Returns
    -------
    bands : list of BandPlan
        One band covering the level when it fits (or when ``step`` would not be smaller), else
        bands of ``step`` own window rows, ``step`` the largest that fits (a multiple of 64 from
        64 on, where the HOG maps start without extra rows; at least 1).
    fits : bool
        Whether the bands fit ``budget`` (False when even one window row does not).
    """
    h, w = int(shape[0]), int(shape[1])
    gh = h - 2 * HALF + 1
    rows = (budget - fixed) / (per_pixel * w)
    if rows >= h:
        return [BandPlan(0, gh, 0, gh)], True
    step = int(rows) - (WINDOW + 1)
    fits = step >= 1
    step = max(step, 1)
    if step >= 64:
        step -= step % 64
    if step + 1 >= gh:
        return [BandPlan(0, gh, 0, gh)], fits
    bands, s = [], 0
    while True:
        k1 = min(s + step + 1, gh)
        bands.append(BandPlan(s, min(s + step + 2, gh), s + (1 if s else 0), k1))
        if k1 >= gh:
            return bands, fits
        s += step
