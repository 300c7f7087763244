"""Loader of iBUG 68-point ``.pts`` annotations (300-W's AFW and HELEN) on the AFLW vocabulary.

A ``.pts`` file holds one face: optionally the header lines ``version: 1``, ``n_points: 68`` and
``{``, then one ``x y`` line per point, then ``}`` when the header is there. Coordinates count
pixels from 1 (300-W's convention); :func:`load_faces68` subtracts 1 so points are 0-based like
every loader of :mod:`cvfs.datasets.faces`.

The 68 points map onto the AFLW names of :mod:`cvfs.datasets.landmarks` (1-based iBUG numbers):
eye centres = means of the eye contours 37-42 (image-left eye) and 43-48, ``nose_left`` /
``nose_right`` = 32 / 36 (the nostrils' outer lower points), ``nose_center`` = 31 (the tip),
``mouth_left_corner`` / ``mouth_right_corner`` = 49 / 55, ``chin_center`` = 9. Ears are not in
the scheme.

Folder layout read by :func:`load_faces68` (``faces_68`` in the data home)::

    afw/<photo>.jpg  afw/<photo>_<k>.pts        several faces per photo
    helen_train/<picture>_<k>.jpg + .pts        one face per file; files of one picture share
                                                its id

References
----------
Sagonas, Tzimiropoulos, Zafeiriou, Pantic, "300 Faces in-the-Wild Challenge: The first facial
landmark localization Challenge", ICCV Workshops 2013.
"""

from pathlib import Path

import numpy as np

from cvfs.datasets.faces import AnnotatedImage
from cvfs.datasets.landmarks import KEYPOINTS
from cvfs.datasets.registry import dataset_folder
from cvfs.io._atomic import atomic_write_text

__all__ = ["IBUG68_TO_AFLW", "SUBSETS", "ibug68_to_keypoints", "load_faces68", "read_pts",
           "split_faces68", "write_pts"]

#: The sub-folders of the ``faces_68`` data folder.
SUBSETS = ("afw", "helen_train")

#: AFLW name -> 1-based iBUG-68 point numbers whose mean gives it.
IBUG68_TO_AFLW = {
    "left_eye_center": tuple(range(37, 43)),
    "right_eye_center": tuple(range(43, 49)),
    "nose_left": (32,),
    "nose_center": (31,),
    "nose_right": (36,),
    "mouth_left_corner": (49,),
    "mouth_right_corner": (55,),
    "chin_center": (9,),
}

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def read_pts(path, n_points=None):
    """Read one iBUG ``.pts`` file, with or without its header lines.

    Parameters
    ----------
    path : str or Path
    n_points : int, optional
        The number of points expected (e.g. 68); default: whatever the file holds.

    Returns
    -------
    points : ndarray of shape (n_points, 2)
        ``(x, y)`` as stored in the file (1-based in 300-W's files), float64.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is empty, a line is not two numbers, the header is incomplete (``{``
        without ``}``, or ``}`` without ``{``), the header's ``n_points`` disagrees with the
        points read, or the count is not ``n_points``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: .pts file does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text .pts file") from None
    declared, opened, closed, rows = None, False, False, []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if closed:
            raise ValueError(f"{path}:{lineno}: text after the closing '}}': {line[:40]!r}")
        key = line.split(":", 1)[0].strip().lower()
        if ":" in line and key in ("version", "n_points"):
            if opened or rows:
                raise ValueError(f"{path}:{lineno}: header line {line[:40]!r} after the points")
            if key == "n_points":
                try:
                    declared = int(line.split(":", 1)[1])
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: n_points is not an integer: "
                                     f"{line[:40]!r}") from None
            continue
        if line == "{":
            if opened or rows:
                raise ValueError(f"{path}:{lineno}: unexpected '{{'")
            opened = True
            continue
        if line == "}":
            if not opened:
                raise ValueError(f"{path}:{lineno}: '}}' without an opening '{{'")
            closed = True
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            rows.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise ValueError(f"{path}:{lineno}: expected two numbers 'x y'; got "
                             f"{line[:40]!r}") from None
    if opened and not closed:
        raise ValueError(f"{path}: the points open with '{{' but the closing '}}' is missing "
                         "(truncated file?)")
    if not rows:
        raise ValueError(f"{path}: no points in the file")
    pts = np.asarray(rows, dtype=np.float64)
    if not np.isfinite(pts).all():
        raise ValueError(f"{path}: points must be finite numbers")
    if declared is not None and declared != len(pts):
        raise ValueError(f"{path}: header says n_points: {declared} but the file holds "
                         f"{len(pts)} points")
    if n_points is not None and len(pts) != n_points:
        raise ValueError(f"{path}: expected {n_points} points; got {len(pts)}")
    return pts


def write_pts(path, points, header=True):
    """Write points as an iBUG ``.pts`` file (atomically).

    Parameters
    ----------
    path : str or Path
    points : array-like of shape (n_points, 2)
        ``(x, y)`` written as given (300-W's files are 1-based).
    header : bool, default=True
        Write the ``version: 1``, ``n_points: N``, ``{`` ... ``}`` lines.

    Raises
    ------
    ValueError
        If ``points`` is not of shape (n_points, 2) with finite values.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) == 0 or not np.isfinite(pts).all():
        raise ValueError(f"points must be a finite array of shape (n_points, 2); got shape "
                         f"{pts.shape}")
    lines = [f"{x!r} {y!r}" for x, y in pts.tolist()]
    if header:
        lines = ["version: 1", f"n_points: {len(pts)}", "{", *lines, "}"]
    atomic_write_text(path, "\n".join(lines) + "\n")


def ibug68_to_keypoints(points68):
    """Map iBUG 68-point faces onto the 21 AFLW names.

    Parameters
    ----------
    points68 : array-like of shape (..., 68, 2)

    Returns
    -------
    points : ndarray of shape (..., 21, 2)
        The names of :data:`IBUG68_TO_AFLW` filled, NaN elsewhere.

    Raises
    ------
    ValueError
        If the last two axes are not (68, 2).
    """
    p = np.asarray(points68, dtype=np.float64)
    if p.ndim < 2 or p.shape[-2:] != (68, 2):
        raise ValueError(f"points68 must have shape (..., 68, 2); got {p.shape}")
    out = np.full(p.shape[:-2] + (len(KEYPOINTS), 2), np.nan)
    for name, nums in IBUG68_TO_AFLW.items():
        out[..., KEYPOINTS.index(name), :] = p[..., [n - 1 for n in nums], :].mean(axis=-2)
    return out


def _picture(stem):
    """The picture a file belongs to: its name before the first ``_``."""
    return stem.split("_", 1)[0]


def _image_for(pts_path):
    for stem in (pts_path.stem, _picture(pts_path.stem)):
        for suffix in _IMAGE_SUFFIXES:
            cand = pts_path.with_name(stem + suffix)
            if cand.is_file():
                return cand
    return None


def load_faces68(root=None, subsets=SUBSETS):
    """Load the 68-point faces of 300-W's AFW and HELEN training photos.

    Parameters
    ----------
    root : str or Path, optional
        The ``faces_68`` folder (holding ``afw/`` and ``helen_train/``); default ``faces_68`` in
        the data home.
    subsets : sequence of str, default=("afw", "helen_train")
        Which sub-folders to read.

    Returns
    -------
    images : list of AnnotatedImage
        One per photo, sorted by subset then file name, ``dataset="faces_68"``; ``points`` of
        shape (n_faces, 21, 2), 0-based (the files' values minus 1), NaN outside
        :data:`IBUG68_TO_AFLW`. ``attrs``: ``subset``, ``picture`` (the id shared by files cut
        from one picture), ``pts`` (the annotation file names) and ``points68`` (n_faces, 68, 2),
        0-based.

    Raises
    ------
    FileNotFoundError
        If the folder or a subset is missing, or a ``.pts`` file has no image beside it.
    ValueError
        If ``subsets`` names an unknown subset or a ``.pts`` file is malformed (the message names
        the file and line).
    """
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown or not subsets:
        raise ValueError(f"subsets must be a non-empty selection of {list(SUBSETS)}; got "
                         f"{list(subsets)}")
    root = dataset_folder(root, "faces_68")
    images = []
    for subset in subsets:
        folder = root / subset
        if not folder.is_dir():
            raise FileNotFoundError(f"300-W (AFW, HELEN): {folder} does not exist")
        by_image = {}
        for pts_path in sorted(folder.glob("*.pts")):
            img = _image_for(pts_path)
            if img is None:
                raise FileNotFoundError(f"{pts_path}: no image {pts_path.stem}.jpg or "
                                        f"{_picture(pts_path.stem)}.jpg beside it")
            by_image.setdefault(img, []).append(pts_path)
        for img in sorted(by_image):
            files = by_image[img]
            p68 = np.stack([read_pts(f, 68) for f in files]) - 1.0
            attrs = {"subset": subset, "picture": _picture(img.stem),
                     "pts": [f.name for f in files], "points68": p68}
            images.append(AnnotatedImage(img, ibug68_to_keypoints(p68), "faces_68", attrs))
    return images


def split_faces68(images, test_size=0.25, random_state=0):
    """A held-out split of :func:`load_faces68`'s images by picture.

    Every file cut from one picture (an AFW photo's faces, HELEN's ``<id>_1``, ``<id>_2``) falls
    in the same part, so no face of a test picture is seen in training. Each subset is split on
    its own, so both parts hold AFW and HELEN faces.

    Parameters
    ----------
    images : list of AnnotatedImage
        From :func:`load_faces68` (``attrs["picture"]`` and ``attrs["subset"]`` are used).
    test_size : float, default=0.25
        Fraction of each subset's pictures held out, in (0, 1).
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    train, test : list of AnnotatedImage
        In the order of ``images``.

    Raises
    ------
    ValueError
        If ``test_size`` is not in (0, 1) or an image lacks the ``picture`` / ``subset`` attrs.
    """
    if not (isinstance(test_size, (float, int)) and 0 < test_size < 1):
        raise ValueError(f"test_size must be a fraction in (0, 1); got {test_size!r}")
    rng = np.random.default_rng(random_state)
    groups = {}
    for im in images:
        if "picture" not in im.attrs or "subset" not in im.attrs:
            raise ValueError(f"{im.path}: attrs lack 'picture'/'subset'; split images from "
                             "load_faces68")
        groups.setdefault(im.attrs["subset"], set()).add(im.attrs["picture"])
    held = set()
    for subset in sorted(groups):
        pics = sorted(groups[subset])
        n_test = max(1, int(round(test_size * len(pics)))) if len(pics) > 1 else 0
        held.update((subset, pics[i]) for i in rng.permutation(len(pics))[:n_test])
    train = [im for im in images if (im.attrs["subset"], im.attrs["picture"]) not in held]
    test = [im for im in images if (im.attrs["subset"], im.attrs["picture"]) in held]
    return train, test
