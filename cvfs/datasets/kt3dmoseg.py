"""Loader of the KT3DMoSeg motion-segmentation benchmark (Xu, Cheong, Li, CVPR 2018).

The public layout is one folder per clip, ``<CLIP>_Tracks/<CLIP>_Tracks.mat`` (MATLAB v5, a struct
``Data``), plus ``SeqList.mat`` (cell array ``SeqList`` of the clip names). The fields used here are
the labelled ("sparse") trajectories: ``ySparse`` (3 x P x F homogeneous pixel coordinates, zero
where a track is not observed), ``visibleSparse`` (P x F, 1 = observed) and ``GtLabel`` (P x 1,
labels 1..K). The clips are 22 KITTI snippets of 10-20 frames with 2-5 motions and 15-54 % of the
P x F entries missing.

References
----------
X. Xu, L.-F. Cheong, Z. Li, "Motion segmentation by exploiting complementary geometric models",
CVPR 2018. A. Geiger, P. Lenz, R. Urtasun, "Are we ready for autonomous driving? The KITTI vision
benchmark suite", CVPR 2012.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cvfs.datasets.registry import DATASETS, dataset_folder

__all__ = ["Clip", "kt3dmoseg_home", "list_clips", "load_clip", "load_kt3dmoseg"]

_HOME = DATASETS["motion_kt3dmoseg"]


@dataclass
class Clip:
    """One KT3DMoSeg clip (its labelled trajectories).

    Attributes
    ----------
    name : str
        Clip name, e.g. ``"Seq005_Clip01"``.
    points : ndarray of shape (P, F, 2)
        Pixel coordinates (x, y), float64; NaN where the track is not observed.
    visible : ndarray of shape (P, F), bool
        True where the track is observed.
    labels : ndarray of shape (P,)
        Ground-truth motion labels in 0..K-1, int64.
    n_motions : int
        K.
    """

    name: str
    points: np.ndarray
    visible: np.ndarray
    labels: np.ndarray
    n_motions: int

    @property
    def n_points(self):
        return self.points.shape[0]

    @property
    def n_frames(self):
        return self.points.shape[1]

    @property
    def missing_fraction(self):
        """Fraction of the P x F entries not observed."""
        return float(1.0 - self.visible.mean())


def kt3dmoseg_home(root=None):
    """The KT3DMoSeg folder: ``root`` if given, else ``<data home>/motion_kt3dmoseg``.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist.
    """
    return dataset_folder(root, "motion_kt3dmoseg")


def _clip_file(root, name):
    return root / f"{name}_Tracks" / f"{name}_Tracks.mat"


def list_clips(root=None):
    """Names of the clips, in the order of ``SeqList.mat`` (else the sorted folder names).

    Parameters
    ----------
    root : str or Path, optional
        Dataset folder; default ``<data home>/motion_kt3dmoseg``.

    Returns
    -------
    names : list of str

    Raises
    ------
    FileNotFoundError
        If the folder is missing or holds no clip.
    ValueError
        If ``SeqList.mat`` is unreadable.
    """
    from scipy.io import loadmat

    root = kt3dmoseg_home(root)
    seqlist = root / "SeqList.mat"
    if seqlist.is_file():
        try:
            cell = loadmat(seqlist)["SeqList"]
        except Exception as exc:  # scipy raises several types for corrupt files
            raise ValueError(f"{seqlist}: not a readable MATLAB file with a 'SeqList' "
                             f"variable ({exc})") from exc
        names = [str(np.asarray(c).ravel()[0]) for c in np.asarray(cell, dtype=object).ravel()]
    else:
        names = sorted(p.name[: -len("_Tracks")] for p in root.iterdir()
                       if p.is_dir() and p.name.endswith("_Tracks"))
    if not names:
        raise FileNotFoundError(f"KT3DMoSeg: no <CLIP>_Tracks/<CLIP>_Tracks.mat under {root}. "
                                f"{_HOME.how_to_get()}")
    return names


def load_clip(path):
    """Read one ``<CLIP>_Tracks.mat`` file.

    Parameters
    ----------
    path : str or Path
        The ``.mat`` file or its ``<CLIP>_Tracks`` folder.

    Returns
    -------
    clip : Clip

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a readable MATLAB file, ``Data`` or one of its fields is missing or malformed.
    """
    from scipy.io import loadmat

    path = Path(path)
    if path.is_dir():
        path = path / f"{path.name}.mat"
    if not path.is_file():
        raise FileNotFoundError(f"KT3DMoSeg: {path} does not exist. {_HOME.how_to_get()}")
    stem = path.stem
    name = stem[: -len("_Tracks")] if stem.endswith("_Tracks") else stem
    try:
        mat = loadmat(path)
    except Exception as exc:  # scipy raises several types for corrupt files
        raise ValueError(f"{path}: not a readable MATLAB file ({exc})") from exc
    if "Data" not in mat:
        raise ValueError(f"{path}: variable 'Data' is missing")
    data = mat["Data"]
    fields = data.dtype.names or ()
    for key in ("ySparse", "visibleSparse", "GtLabel"):
        if key not in fields:
            raise ValueError(f"{path}: Data.{key} is missing (expected ySparse, visibleSparse, "
                             "GtLabel)")
    data = data[0, 0]
    y = np.asarray(data["ySparse"], dtype=np.float64)
    vis = np.asarray(data["visibleSparse"])
    gt = np.asarray(data["GtLabel"]).ravel()
    if y.ndim != 3 or y.shape[0] not in (2, 3):
        raise ValueError(f"{path}: Data.ySparse must have shape (3, P, F); got {y.shape}")
    n_points, n_frames = y.shape[1:]
    if vis.shape != (n_points, n_frames):
        raise ValueError(f"{path}: Data.visibleSparse must have shape ({n_points}, {n_frames}); "
                         f"got {vis.shape}")
    if gt.shape != (n_points,):
        raise ValueError(f"{path}: Data.GtLabel must hold {n_points} labels; got {gt.shape}")
    visible = vis.astype(bool)
    points = np.ascontiguousarray(y[:2].transpose(1, 2, 0))
    if y.shape[0] == 3:
        w = y[2]
        ok = visible & (w != 0)
        points[ok] = points[ok] / w[ok][:, None]
    points[~visible] = np.nan
    if not np.all(np.isfinite(points[visible])):
        raise ValueError(f"{path}: Data.ySparse holds NaN or infinite observed coordinates")
    uniq, labels = np.unique(gt, return_inverse=True)
    return Clip(name=name, points=points, visible=visible, labels=labels.astype(np.int64),
                n_motions=int(uniq.size))


def load_kt3dmoseg(root=None, *, names=None):
    """Load the clips of a KT3DMoSeg folder.

    Parameters
    ----------
    root : str or Path, optional
        Dataset folder; default ``<data home>/motion_kt3dmoseg``.
    names : list of str, optional
        Only these clips (in this order); default all, in ``SeqList.mat`` order.

    Returns
    -------
    clips : list of Clip

    Raises
    ------
    FileNotFoundError
        If the folder or a requested clip is missing.
    ValueError
        If a file is malformed.
    """
    root = kt3dmoseg_home(root)
    if names is None:
        names = list_clips(root)
    return [load_clip(_clip_file(root, n)) for n in names]
