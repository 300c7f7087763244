"""Loader of the Hopkins155 motion-segmentation benchmark (Tron & Vidal, CVPR 2007).

The original layout is one folder per sequence, ``<SEQ>/<SEQ>_truth.mat`` (MATLAB v5) holding
``x`` (3 x P x F normalised homogeneous coordinates), ``y`` (3 x P x F pixel coordinates), ``s``
(P x 1 labels 1..K), ``K`` (3 x 3 normalisation matrix), ``width``, ``height``, ``points`` and
``frames``. An optional ``videos.csv`` beside the folders maps each sequence to its video, its
category and its raw footage; without it these are derived from the names (``_g12``/``_g13``/
``_g23`` subsets belong to their parent video).

References
----------
R. Tron and R. Vidal, "A benchmark for the comparison of 3-D motion segmentation algorithms",
CVPR 2007.
"""

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cvfs.datasets.registry import DATASETS, dataset_folder

__all__ = ["Sequence", "category_of", "hopkins155_home", "list_sequences", "load_hopkins155",
           "load_sequence", "video_of"]

_HOME = DATASETS["hopkins155"]
_SUBSET = re.compile(r"_g\d\d$")
_TRAFFIC = ("cars", "truck", "kanatani1", "kanatani2")
_ARTICULATED = ("arm", "articulated", "head", "people", "two_cranes", "kanatani3", "dancing")


@dataclass
class Sequence:
    """One Hopkins155 sequence.

    Attributes
    ----------
    name : str
        Sequence name, e.g. ``"1R2RC_g12"``.
    points : ndarray of shape (P, F, 2)
        Normalised image coordinates (``x`` of the file, first two rows), float64.
    pixels : ndarray of shape (P, F, 2)
        Pixel coordinates (``y`` of the file), float64.
    labels : ndarray of shape (P,)
        Ground-truth motion labels in 0..K-1, int64.
    n_motions : int
        K.
    category : str
        ``"checkerboard"``, ``"traffic"`` or ``"articulated"``.
    video : str
        The video the sequence comes from (a ``_gNN`` subset belongs to its parent).
    raw_footage : str
        Sequences sharing raw footage (``cars2``/``cars2B``) must fall in the same fold.
    width, height : int
        Frame size in pixels.
    """

    name: str
    points: np.ndarray
    pixels: np.ndarray
    labels: np.ndarray
    n_motions: int
    category: str
    video: str
    raw_footage: str
    width: int
    height: int

    @property
    def n_points(self):
        return self.points.shape[0]

    @property
    def n_frames(self):
        return self.points.shape[1]


def hopkins155_home(root=None):
    """The Hopkins155 folder: ``root`` if given, else ``<data home>/hopkins155``.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist.
    """
    return dataset_folder(root, "hopkins155")


def video_of(name):
    """The video of a sequence name: the name without a ``_g12``/``_g13``/``_g23`` suffix."""
    return _SUBSET.sub("", name)


def category_of(name):
    """Category from the name rule (``three-cars`` is checkerboard, ``kanatani3`` articulated)."""
    video = video_of(name)
    if video == "kanatani3" or video.startswith(_ARTICULATED):
        return "articulated"
    if video.startswith(_TRAFFIC):
        return "traffic"
    return "checkerboard"


def _read_index(root):
    path = root / "videos.csv"
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"sequence", "video", "category", "raw_footage"}
    if rows and not need <= set(rows[0]):
        raise ValueError(f"{path}: expected columns {sorted(need)}, got {sorted(rows[0])}")
    return {r["sequence"]: r for r in rows}


def list_sequences(root=None):
    """Names of the sequences in a Hopkins155-like folder (those with ``<SEQ>/<SEQ>_truth.mat``).

    Parameters
    ----------
    root : str or Path, optional
        Dataset folder; default ``<data home>/hopkins155``.

    Returns
    -------
    names : list of str
        Sorted.

    Raises
    ------
    FileNotFoundError
        If the folder is missing or holds no sequence.
    """
    root = hopkins155_home(root)
    names = sorted(p.name for p in root.iterdir()
                   if p.is_dir() and (p / f"{p.name}_truth.mat").is_file())
    if not names:
        raise FileNotFoundError(f"Hopkins155: no <SEQ>/<SEQ>_truth.mat under {root}. "
                                f"{_HOME.how_to_get()}")
    return names


def _scalar(mat, key, path):
    try:
        return int(np.asarray(mat[key]).ravel()[0])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: variable {key!r} missing or not a scalar") from exc


def load_sequence(path, *, index_row=None):
    """Read one ``*_truth.mat`` file.

    Parameters
    ----------
    path : str or Path
        The ``<SEQ>_truth.mat`` file, or its sequence folder.
    index_row : dict, optional
        The sequence's row of ``videos.csv`` (video, category, raw_footage); default from the name.

    Returns
    -------
    seq : Sequence

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a readable MATLAB file or a variable is missing or malformed.
    """
    from scipy.io import loadmat

    path = Path(path)
    if path.is_dir():
        path = path / f"{path.name}_truth.mat"
    if not path.is_file():
        raise FileNotFoundError(f"Hopkins155: {path} does not exist. {_HOME.how_to_get()}")
    name = path.name[: -len("_truth.mat")] if path.name.endswith("_truth.mat") else path.stem
    try:
        mat = loadmat(path)
    except Exception as exc:  # scipy raises several types for corrupt files
        raise ValueError(f"{path}: not a readable MATLAB file ({exc})") from exc
    for key in ("x", "y", "s"):
        if key not in mat:
            raise ValueError(f"{path}: variable {key!r} is missing (expected x, y, s)")
    x = np.asarray(mat["x"], dtype=np.float64)
    y = np.asarray(mat["y"], dtype=np.float64)
    s = np.asarray(mat["s"]).ravel()
    if x.ndim != 3 or x.shape[0] != 3 or y.shape != x.shape:
        raise ValueError(f"{path}: x and y must both have shape (3, P, F); "
                         f"got {x.shape}, {y.shape}")
    n_points = x.shape[1]
    if s.shape != (n_points,):
        raise ValueError(f"{path}: s must have {n_points} labels; got shape {s.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"{path}: x or y contains NaN or infinite values")
    uniq, labels = np.unique(s, return_inverse=True)
    if uniq.size < 2:
        raise ValueError(f"{path}: s holds {uniq.size} motion(s); expected at least 2")
    points = np.ascontiguousarray((x[:2] / x[2:3]).transpose(1, 2, 0))
    pixels = np.ascontiguousarray((y[:2] / y[2:3]).transpose(1, 2, 0))
    row = index_row or {}
    video = row.get("video") or video_of(name)
    return Sequence(
        name=name, points=points, pixels=pixels, labels=labels.astype(np.int64),
        n_motions=int(uniq.size), category=row.get("category") or category_of(name),
        video=video, raw_footage=row.get("raw_footage") or video,
        width=_scalar(mat, "width", path) if "width" in mat else 0,
        height=_scalar(mat, "height", path) if "height" in mat else 0,
    )


def load_hopkins155(root=None, *, names=None):
    """Load the sequences of a Hopkins155-like folder.

    Parameters
    ----------
    root : str or Path, optional
        Dataset folder; default ``<data home>/hopkins155``.
    names : list of str, optional
        Only these sequences (in this order); default all, sorted.

    Returns
    -------
    sequences : list of Sequence

    Raises
    ------
    FileNotFoundError
        If the folder or a requested sequence is missing.
    ValueError
        If a file is malformed.
    """
    root = hopkins155_home(root)
    index = _read_index(root)
    if names is None:
        names = list_sequences(root)
    return [load_sequence(root / n / f"{n}_truth.mat", index_row=index.get(n)) for n in names]
