"""Annotated face images: loaders of MTFL, Caltech WebFaces and AFLW2000 on one vocabulary.

Every loader returns a list of :class:`AnnotatedImage`, one per image, whose ``points`` array holds
all faces of the image on the common 21-point vocabulary of :mod:`cvfs.datasets.landmarks`
(AFLW's points in AFLW's order, snake_case; re-exported here). A point a dataset does not
annotate, or marks invisible, is NaN.
:data:`ANNOTATED` says which points each dataset annotates. Coordinates are ``(x, y)`` = (column,
row) in original-image pixels, pixel centres at integers starting at 0. MTFL and Caltech WebFaces
count pixels from 1 (MATLAB style: their eye labels sit one pixel right of the
mirror-symmetric eye position, :data:`FIRST_PIXEL`), so their loaders subtract 1. "Left" is image
left in every dataset (AFLW, MTFL and Caltech agree).

The AFLW sqlite loader is in :mod:`cvfs.datasets.aflw`, the iBUG 68-point (300-W) loader in
:mod:`cvfs.datasets.ibug68`.

References
----------
AFLW: Koestinger, Wohlhart, Roth, Bischof, "Annotated Facial Landmarks in the Wild", ICCV-W 2011.
MTFL: Zhang, Luo, Loy, Tang, "Facial Landmark Detection by Deep Multi-task Learning", ECCV 2014.
Caltech WebFaces: Angelova, Abu-Mostafa, Perona, "Pruning training sets for learning of object
categories", CVPR 2005. AFLW2000: Zhu, Lei, Liu, Shi, Li, "Face Alignment Across Large Poses: A
3D Solution", CVPR 2016.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cvfs.datasets.landmarks import KEYPOINTS, MIRROR_INDEX, inter_eye_distance, keypoint_index
from cvfs.datasets.registry import DATASETS, require_path

__all__ = [
    "ANNOTATED",
    "FIRST_PIXEL",
    "FACE_SETS",
    "KEYPOINTS",
    "MIRROR_INDEX",
    "AnnotatedImage",
    "inter_eye_distance",
    "keypoint_index",
    "load_aflw2000",
    "load_caltech_webfaces",
    "load_face_set",
    "load_mtfl",
    "mirrored",
]

log = logging.getLogger(__name__)

_MTFL = ("left_eye_center", "right_eye_center", "nose_center", "mouth_left_corner",
         "mouth_right_corner")
_CALTECH = ("left_eye_center", "right_eye_center", "nose_center", "mouth_center")
_FACES68 = ("left_eye_center", "right_eye_center", "nose_left", "nose_center", "nose_right",
            "mouth_left_corner", "mouth_right_corner", "chin_center")

#: Which vocabulary points each dataset annotates (others are NaN in its ``points``).
ANNOTATED = {
    "aflw": KEYPOINTS,
    "aflw2000": KEYPOINTS,
    "mtfl": _MTFL,
    "caltech_webfaces": _CALTECH,
    "faces_68": _FACES68,
}

#: The pixel each dataset's files number as the first; loaders subtract it so every dataset is
#: 0-based. MTFL's and Caltech's labels sit ~1 px right of the mirror-symmetric eye position
#: (``benchmarks/keypoints/keypoints_localisation.py --sections mirror``), as 1-based counting puts
#: them.
FIRST_PIXEL = {"aflw": 0.0, "aflw2000": 0.0, "mtfl": 1.0, "caltech_webfaces": 1.0,
               "faces_68": 1.0}



def _how(name):
    return DATASETS[name].how_to_get()


@dataclass
class AnnotatedImage:
    """One image and the keypoints of its faces.

    Attributes
    ----------
    path : Path
        The image file.
    points : ndarray of shape (n_faces, 21, 2)
        ``(x, y)`` of every vocabulary point of every face; NaN where not annotated or invisible.
    dataset : str
        Key of :data:`ANNOTATED`.
    attrs : dict
        Dataset-specific extras (e.g. MTFL's gender/smile/glasses/pose per face, AFLW face ids).
    """

    path: Path
    points: np.ndarray
    dataset: str
    attrs: dict = field(default_factory=dict)

    @property
    def n_faces(self):
        """Number of annotated faces."""
        return self.points.shape[0]

    def ied(self):
        """Inter-eye distance per face, ndarray of shape (n_faces,); NaN if an eye is missing."""
        return inter_eye_distance(self.points)


def mirrored(image, width):
    """The annotations of ``image`` flipped left-right (for the horizontally mirrored pixels).

    A point ``(x, y)`` moves to ``(width - 1 - x, y)`` (pixel centres at integers) and takes the
    mirrored name (:data:`MIRROR_INDEX`), so "left" stays image left.

    Parameters
    ----------
    image : AnnotatedImage
    width : int
        Image width W in pixels.

    Returns
    -------
    mirrored : AnnotatedImage
        Same path and dataset; ``attrs["mirror"] = True`` tells readers to flip the pixels
        (``image[:, ::-1]``).

    Raises
    ------
    ValueError
        If ``width`` is not a positive int.
    """
    if not (isinstance(width, (int, np.integer)) and width >= 1):
        raise ValueError(f"width must be a positive int; got {width!r}")
    pts = np.array(image.points, dtype=np.float64)[:, MIRROR_INDEX]
    pts[..., 0] = (width - 1) - pts[..., 0]
    attrs = dict(image.attrs, mirror=not image.attrs.get("mirror", False))
    return AnnotatedImage(image.path, pts, image.dataset, attrs)


def _empty_points(n_faces):
    return np.full((n_faces, len(KEYPOINTS), 2), np.nan)


def _parse_mtfl_line(line, lineno, source):
    parts = line.split()
    if len(parts) != 15:
        raise ValueError(
            f"{source}:{lineno}: expected 15 fields (path, x1..x5, y1..y5, gender, smile, "
            f"glasses, pose); got {len(parts)}"
        )
    rel = parts[0].replace("\\", "/")
    vals = np.asarray(parts[1:11], dtype=np.float64)
    return rel, vals[:5], vals[5:], [int(v) for v in parts[11:]]


def load_mtfl(split="train", root=None):
    """Load MTFL's ``training.txt`` (LFW part) or ``testing.txt`` (AFLW crops).

    Parameters
    ----------
    split : {"train", "test"}
    root : str or Path, optional
        The MTFL folder (holding ``training.txt``, ``testing.txt``, ``lfw_5590/``, ``AFLW/``);
        default ``faces/mtfl`` in the data home.

    Returns
    -------
    images : list of AnnotatedImage
        One face per image, points 0-based (the file's 1-based values minus 1); ``attrs`` has
        ``gender`` (1 male, 2 female), ``smile`` (1 yes),
        ``glasses`` (1 yes), ``pose`` (1 left profile .. 5 right profile), each a list.

    Raises
    ------
    ValueError
        If ``split`` is not "train" or "test", or a line is malformed.
    FileNotFoundError
        If the annotation file is missing.

    Notes
    -----
    Paths in the files use backslashes and lines may start with spaces or end in CRLF; all are
    normalised. Lines whose image is missing (MTFL's web part, ``net_7876``) are skipped with a
    log message.
    """
    files = {"train": "training.txt", "test": "testing.txt"}
    if split not in files:
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    root = Path(root) if root is not None else require_path("faces/mtfl")
    ann = root / files[split]
    if not ann.is_file():
        raise FileNotFoundError(f"MTFL: {ann} does not exist. {_how('faces/mtfl')}")
    cols = [KEYPOINTS.index(n) for n in _MTFL]
    images, missing = [], 0
    with open(ann, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            rel, xs, ys, extra = _parse_mtfl_line(line, lineno, ann)
            path = root / rel
            if not path.is_file():
                missing += 1
                continue
            pts = _empty_points(1)
            pts[0, cols, 0] = xs - FIRST_PIXEL["mtfl"]
            pts[0, cols, 1] = ys - FIRST_PIXEL["mtfl"]
            attrs = {k: [v] for k, v in zip(("gender", "smile", "glasses", "pose"), extra,
                                            strict=True)}
            images.append(AnnotatedImage(path, pts, "mtfl", attrs))
    if missing:
        log.info("MTFL %s: skipped %d lines whose image is missing", split, missing)
    return images


def load_caltech_webfaces(root=None):
    """Load Caltech WebFaces ground truth, grouping the faces of each image.

    Parameters
    ----------
    root : str or Path, optional
        Folder holding ``WebFaces_GroundThruth.txt`` and ``images/`` (or the images directly);
        default ``faces/caltech_webfaces_dev`` in the data home.

    Returns
    -------
    images : list of AnnotatedImage
        In file order of first appearance; points 0-based (the file's values minus 1) are left
        eye, right eye, nose tip, mouth centre (see ``ANNOTATED["caltech_webfaces"]``).

    Raises
    ------
    FileNotFoundError
        If the ground-truth file is missing.
    ValueError
        If a line does not have an image name and 8 numbers.

    Notes
    -----
    Profile and very small faces are not annotated, so some true faces have no labels.
    """
    root = (Path(root) if root is not None
            else require_path("faces/caltech_webfaces_dev"))
    ann = root / "WebFaces_GroundThruth.txt"
    if not ann.is_file():
        raise FileNotFoundError(f"Caltech WebFaces: {ann} does not exist. "
                                f"{_how('faces/caltech_webfaces_dev')}")
    img_dir = root / "images" if (root / "images").is_dir() else root
    cols = [KEYPOINTS.index(n) for n in _CALTECH]
    faces = {}
    with open(ann, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 9:
                raise ValueError(
                    f"{ann}:{lineno}: expected an image name and 8 numbers; got {len(parts)} fields"
                )
            xy = np.asarray(parts[1:], dtype=np.float64).reshape(4, 2)
            xy -= FIRST_PIXEL["caltech_webfaces"]
            faces.setdefault(parts[0], []).append(xy)
    images = []
    for name, fl in faces.items():
        pts = _empty_points(len(fl))
        pts[:, cols, :] = np.stack(fl)
        images.append(AnnotatedImage(img_dir / name, pts, "caltech_webfaces"))
    return images


def load_aflw2000(root=None):
    """Load AFLW2000-3D ``.mat`` files (``pt2d``: 2 x 21 in AFLW's point order).

    Parameters
    ----------
    root : str or Path, optional
        Folder of ``imageNNNNN.jpg`` + ``imageNNNNN.mat`` pairs; default
        ``faces/aflw2000_sample`` in the data home.

    Returns
    -------
    images : list of AnnotatedImage
        Sorted by file name, one face each; invisible points (negative coordinates in the file)
        are NaN.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist or holds no ``.mat`` files.
    ValueError
        If a file has no ``pt2d`` of shape (2, 21).
    """
    from scipy.io import loadmat

    root = (Path(root) if root is not None
            else require_path("faces/aflw2000_sample"))
    mats = sorted(root.glob("*.mat"))
    if not mats:
        raise FileNotFoundError(f"AFLW2000: no .mat files in {root}. "
                                f"{_how('faces/aflw2000_sample')}")
    images = []
    for mat in mats:
        pt = loadmat(mat).get("pt2d")
        if pt is None or pt.shape != (2, 21):
            got = None if pt is None else pt.shape
            raise ValueError(f"{mat}: expected 'pt2d' of shape (2, 21); got {got}")
        pts = pt.T.astype(np.float64)[None].copy()
        pts[(pts < 0).any(axis=-1)] = np.nan
        images.append(AnnotatedImage(mat.with_suffix(".jpg"), pts, "aflw2000"))
    return images


#: Annotated face sets by name: the ``--dataset`` choices of ``cvfs keypoints train``/``evaluate``
#: and of the training scripts. "faces68-train"/"faces68-test" are the two parts of
#: :func:`cvfs.datasets.ibug68.split_faces68`.
FACE_SETS = ("mtfl-train", "mtfl-test", "caltech", "aflw2000", "faces68-train", "faces68-test")


def load_face_set(name, root=None):
    """The annotated images of the face set ``name`` (one of :data:`FACE_SETS`).

    Parameters
    ----------
    name : str
        One of :data:`FACE_SETS`.
    root : str or Path, optional
        The set's folder; default its folder in the data home.

    Returns
    -------
    images : list of AnnotatedImage

    Raises
    ------
    ValueError
        If ``name`` is not a face set.
    """
    if name == "mtfl-train":
        return load_mtfl("train", root)
    if name == "mtfl-test":
        return load_mtfl("test", root)
    if name == "caltech":
        return load_caltech_webfaces(root)
    if name == "aflw2000":
        return load_aflw2000(root)
    if name in ("faces68-train", "faces68-test"):
        from cvfs.datasets.ibug68 import load_faces68, split_faces68  # imports this module

        train, test = split_faces68(load_faces68(root))
        return train if name == "faces68-train" else test
    raise ValueError(f"face set must be one of {list(FACE_SETS)}; got {name!r}")
