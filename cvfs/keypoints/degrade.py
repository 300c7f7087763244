"""Training faces degraded like small web faces: shrunk, blurred and JPEG-compressed.

Faces in web photos (Caltech WebFaces) are often small (inter-eye distance, IED, below 14 px)
and blurred or compressed; a detector trained on sharp faces of IED 20-40 px misses most of
their eyes once the pyramid upsamples them to its window scale. A *degraded* training image is
the annotated image shrunk so that its face has an IED drawn from ``ied_range`` (Gaussian blur
then bilinear resampling, as the pyramid downsamples), blurred by a further Gaussian of a random
width, and JPEG-encoded at a random quality; its annotations are scaled with it. The training
levels of its face (IED 20-40 px) are then upsampled levels, built by the pyramid exactly as a
scan builds them, so positives and negatives come from the pixels a detector meets on such faces.

Recipe (:data:`DEGRADE_RECIPE`): IED uniform in [8, 16] px, extra blur sigma uniform in
[0, 1] px of the shrunk image, JPEG quality uniform in [30, 80] (``cv2.imencode``), per image
from a seeded generator; :func:`with_degraded` replaces a random share of the training images by
their degraded versions and keeps the others sharp.
"""

import math

import numpy as np

from cvfs.base import check_random_state
from cvfs.datasets.faces import AnnotatedImage

__all__ = ["DEGRADE_RECIPE", "degrade_pixels", "degraded", "with_degraded"]

#: Ranges the degradation parameters are drawn from, uniformly and independently per image.
DEGRADE_RECIPE = {"ied_range": (8.0, 16.0), "blur_sigma": (0.0, 1.0),
                  "jpeg_quality": (30, 80)}


def degrade_pixels(rgb, factor, blur_sigma=0.0, jpeg_quality=None):
    """Shrink an RGB image by ``factor``, blur it and JPEG-compress it.

    Parameters
    ----------
    rgb : ndarray of shape (H, W, 3), uint8
    factor : float >= 1
        Size reduction: the result is ``round(H / factor) x round(W / factor)`` (at least 1),
        anti-aliased with a Gaussian of sigma ``sqrt(factor^2 - 1) / 2`` before bilinear
        resampling (as :mod:`cvfs.vision.pyramid` downsamples).
    blur_sigma : float >= 0
        Extra Gaussian blur on the shrunk image (its pixels).
    jpeg_quality : int in [1, 100], optional
        JPEG quality of an encode/decode round trip (None: none).

    Returns
    -------
    small : ndarray, uint8 RGB

    Raises
    ------
    ValueError
        For a non-RGB image, ``factor < 1``, a negative blur or a quality outside [1, 100].
    """
    import cv2

    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"rgb must have shape (H, W, 3); got {rgb.shape}")
    if not (np.isfinite(factor) and factor >= 1.0):
        raise ValueError(f"factor must be >= 1; got {factor!r}")
    if not (np.isfinite(blur_sigma) and blur_sigma >= 0.0):
        raise ValueError(f"blur_sigma must be >= 0; got {blur_sigma!r}")
    if jpeg_quality is not None and not 1 <= int(jpeg_quality) <= 100:
        raise ValueError(f"jpeg_quality must be in [1, 100]; got {jpeg_quality!r}")
    img = rgb.astype(np.float32)
    H, W = img.shape[:2]
    if factor > 1.0:
        s = math.sqrt(factor * factor - 1.0) / 2.0
        img = cv2.GaussianBlur(img, (0, 0), s, s)
        img = cv2.resize(img, (max(1, round(W / factor)), max(1, round(H / factor))),
                         interpolation=cv2.INTER_LINEAR)
    if blur_sigma > 0:
        img = cv2.GaussianBlur(img, (0, 0), blur_sigma, blur_sigma)
    out = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if jpeg_quality is not None:
        ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(out[:, :, ::-1]),
                               [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
        if not ok:
            raise ValueError("JPEG encoding failed")
        out = np.ascontiguousarray(cv2.imdecode(buf, cv2.IMREAD_COLOR)[:, :, ::-1])
    return out


def degraded(image, shape, *, ied=12.0, blur_sigma=0.0, jpeg_quality=None):
    """The annotations of ``image`` for its degraded pixels (:func:`degrade_pixels`).

    Parameters
    ----------
    image : AnnotatedImage
    shape : (int, int)
        ``(H, W)`` of the image file.
    ied : float
        Target IED of the image's face (the median over its annotated faces) in px; a face
        already smaller is not shrunk.
    blur_sigma, jpeg_quality
        See :func:`degrade_pixels`.

    Returns
    -------
    degraded : AnnotatedImage
        Same path; points in the shrunk image's coordinates (centre-aligned, as the pyramid
        maps them); ``attrs["degrade"]`` holds the parameters readers apply to the pixels
        (``factor``, ``blur_sigma``, ``jpeg_quality``) and ``attrs["shape"]`` the shrunk shape.

    Raises
    ------
    ValueError
        If ``image`` has no face with both eye centres annotated or ``ied`` is not positive.
    """
    if not (np.isfinite(ied) and ied > 0):
        raise ValueError(f"ied must be positive; got {ied!r}")
    ieds = image.ied()
    if not np.isfinite(ieds).any():
        raise ValueError(f"{image.path}: no face with both eye centres annotated")
    factor = max(1.0, float(np.nanmedian(ieds)) / float(ied))
    H, W = int(shape[0]), int(shape[1])
    h, w = max(1, round(H / factor)), max(1, round(W / factor))
    pts = np.array(image.points, dtype=np.float64)
    pts[..., 0] = (pts[..., 0] + 0.5) * (w / W) - 0.5
    pts[..., 1] = (pts[..., 1] + 0.5) * (h / H) - 0.5
    params = {"factor": factor, "blur_sigma": float(blur_sigma),
              "jpeg_quality": None if jpeg_quality is None else int(jpeg_quality)}
    return AnnotatedImage(image.path, pts, image.dataset,
                          dict(image.attrs, degrade=params, shape=(h, w)))


def with_degraded(images, shapes, share, *, recipe=None, random_state=None):
    """``images`` with a random ``share`` of them replaced by degraded versions.

    Parameters
    ----------
    images : list of AnnotatedImage
    shapes : list of (int, int)
        Image file shapes ``(H, W)``.
    share : float in [0, 1]
        Share of the images degraded (rounded to a count; images without an eye pair stay).
    recipe : dict, optional
        Parameter ranges (keys of :data:`DEGRADE_RECIPE`; missing keys take its values).
    random_state : None, int or Generator

    Returns
    -------
    images : list of AnnotatedImage
        Same length and order.

    Raises
    ------
    ValueError
        If ``share`` is outside [0, 1], ``shapes`` does not match ``images`` or a recipe range
        is invalid.
    """
    if not (np.isfinite(share) and 0.0 <= share <= 1.0):
        raise ValueError(f"share must be in [0, 1]; got {share!r}")
    if len(shapes) != len(images):
        raise ValueError(f"shapes must have one entry per image ({len(images)}); got "
                         f"{len(shapes)}")
    r = {**DEGRADE_RECIPE, **(recipe or {})}
    unknown = set(r) - set(DEGRADE_RECIPE)
    if unknown:
        raise ValueError(f"unknown recipe keys {sorted(unknown)}; known: "
                         f"{sorted(DEGRADE_RECIPE)}")
    (i0, i1), (b0, b1), (q0, q1) = r["ied_range"], r["blur_sigma"], r["jpeg_quality"]
    if not (0 < i0 <= i1 and 0 <= b0 <= b1 and 1 <= q0 <= q1 <= 100):
        raise ValueError(f"invalid recipe {r}: need 0 < IED low <= high, 0 <= blur low <= high, "
                         f"1 <= quality low <= high <= 100")
    rng = check_random_state(random_state)
    out = list(images)
    pick = np.sort(rng.choice(len(out), size=round(share * len(out)), replace=False))
    for i in pick:
        ied, blur = rng.uniform(i0, i1), rng.uniform(b0, b1)
        quality = int(rng.integers(q0, q1 + 1))
        if np.isfinite(out[i].ied()).any():
            out[i] = degraded(out[i], shapes[i], ied=ied, blur_sigma=blur, jpeg_quality=quality)
    return out
