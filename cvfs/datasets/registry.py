"""The public datasets cvfs reads: their folders in the data home, where to get them, what is there.

:data:`DATASETS` is the one list: the loaders resolve their folders through it
(:func:`require_path`, :func:`dataset_folder`) and ``cvfs data`` reports it (:func:`report`).
Each dataset keeps its original public file layout under ``<data home>/<name>``; the data home is
:func:`cvfs.datasets.data_home` (``$CVFS_DATA``, else ``~/cvfs_data``).
"""

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cvfs.datasets._home import data_home

__all__ = ["DATASETS", "Dataset", "dataset_folder", "report", "require_path"]


@dataclass(frozen=True)
class Dataset:
    """One dataset of the data home.

    Attributes
    ----------
    name : str
        Folder inside the data home, e.g. ``"faces/mtfl"``.
    label : str
        Short name opening error messages, e.g. ``"MTFL"``.
    title : str
        What it is, with its reference.
    source : str
        Where to get it.
    layout : str
        The files the loaders read, relative to the folder.
    counts : tuple of (str, callable)
        ``(unit, count)`` pairs: ``count(folder)`` is the number of items of that unit found.
    used_by : tuple of str
        The loaders and scripts that read it.
    """

    name: str
    label: str
    title: str
    source: str
    layout: str
    counts: tuple
    used_by: tuple = ()

    def folder(self, home=None):
        """``<home>/<name>``, ``home`` defaulting to the data home."""
        return Path(home if home is not None else data_home()) / self.name

    def count(self, home=None):
        """``[(unit, n), ...]`` of what the folder holds (all zero when it is missing)."""
        folder = self.folder(home)
        if not folder.is_dir():
            return [(unit, 0) for unit, _ in self.counts]
        return [(unit, int(fn(folder))) for unit, fn in self.counts]

    def how_to_get(self):
        """One sentence for error messages: source, expected layout and the data home."""
        return (f"Get it from {self.source} and unpack it as <data home>/{self.name}/ "
                f"({self.layout}); the data home is {data_home()} (CVFS_DATA to change it; "
                "`cvfs data` lists what is there).")


def _glob(pattern):
    return lambda folder: sum(1 for _ in folder.glob(pattern))


def _lines(*names):
    def count(folder):
        n = 0
        for name in names:
            path = folder / name
            if path.is_file():
                with open(path, "rb") as fh:
                    n += sum(1 for line in fh if line.strip())
        return n
    return count


def _npz_rows(name, *arrays):
    """Rows of arrays in an ``.npz`` file, read from the headers only (no decompression)."""
    def count(folder):
        path = folder / name
        if not path.is_file():
            return 0
        n = 0
        try:
            with zipfile.ZipFile(path) as zf:
                for a in arrays:
                    with zf.open(f"{a}.npy") as fh:
                        fmt = np.lib.format
                        read = (fmt.read_array_header_1_0 if fmt.read_magic(fh) == (1, 0)
                                else fmt.read_array_header_2_0)
                        shape = read(fh)[0]
                        n += shape[0] if shape else 0
        except (zipfile.BadZipFile, KeyError, ValueError, OSError):
            return 0
        return n
    return count


_UCI = {"dexter": "dexter_train.data", "colon": "I2000.txt", "sonar": "sonar.all-data",
        "ionosphere": "ionosphere.data", "spectf": "SPECTF.train", "wpbc": "wpbc.data"}


def _uci_sets(folder):
    return sum((folder / d / f).is_file() for d, f in _UCI.items())


_HOPKINS = "http://www.vision.jhu.edu/data/hopkins155/"

#: Every dataset of the data home, by folder name.
DATASETS = {d.name: d for d in (
    Dataset("hopkins155", "Hopkins155",
            "Hopkins155 motion segmentation (Tron & Vidal, CVPR 2007)", _HOPKINS,
            "<SEQ>/<SEQ>_truth.mat per sequence; optional videos.csv",
            (("sequences", _glob("*/*_truth.mat")),),
            ("cvfs.datasets.hopkins155", "cvfs motion evaluate")),
    Dataset("hopkins155_videos", "Hopkins155 videos",
            "videos of five Hopkins155 sequences", _HOPKINS
            + " (the sequences' original videos)",
            "cars1.avi, people2.avi, 1RT2RCR.avi, 2T3RCR.avi, three-cars.avi; their truth in "
            "hopkins155/", (("videos", _glob("*.avi")),),
            ("cvfs.datasets.hopkins155_videos", "benchmarks/motion/motion_videos.py")),
    Dataset("motion_kt3dmoseg", "KT3DMoSeg",
            "KT3DMoSeg motion segmentation with missing data (Xu, Cheong "
            "& Li, CVPR 2018; from KITTI)", "https://github.com/alex-xun-xu/MultiViewMoSeg (Data/)",
            "<CLIP>_Tracks/<CLIP>_Tracks.mat per clip; SeqList.mat",
            (("clips", _glob("*_Tracks/*_Tracks.mat")),),
            ("cvfs.datasets.kt3dmoseg", "benchmarks/motion/motion_kt3dmoseg.py")),
    Dataset("faces/mtfl", "MTFL",
            "MTFL facial landmarks v1.0 (Zhang, Luo, Loy & Tang, ECCV 2014)",
            "http://mmlab.ie.cuhk.edu.hk/projects/TCDCN.html",
            "training.txt, testing.txt, lfw_5590/ and AFLW/ images",
            (("training faces", _lines("training.txt")), ("test faces", _lines("testing.txt"))),
            ("cvfs.datasets.faces.load_mtfl", "cvfs keypoints train")),
    Dataset("faces/caltech_webfaces_dev", "Caltech WebFaces",
            "Caltech 10,000 Web Faces (Angelova, Abu-Mostafa & "
            "Perona, CVPR 2005)", "https://data.caltech.edu (Caltech 10,000 Web Faces)",
            "images/picNNNNN.jpg and WebFaces_GroundThruth.txt",
            (("images", _glob("images/*.jpg")), ("faces", _lines("WebFaces_GroundThruth.txt"))),
            ("cvfs.datasets.faces.load_caltech_webfaces", "cvfs keypoints evaluate")),
    Dataset("faces/aflw2000_sample", "AFLW2000",
            "AFLW2000-3D images with AFLW's 21 points (Zhu et al., "
            "CVPR 2016)", "http://www.cbsr.ia.ac.cn/users/xiangyuzhu/projects/3DDFA/main.htm",
            "imageNNNNN.jpg with imageNNNNN.mat (pt2d) beside it",
            (("images", _glob("*.mat")),), ("cvfs.datasets.faces.load_aflw2000",)),
    Dataset("faces_68", "300-W (AFW, HELEN)",
            "300-W 68-point landmarks of AFW and HELEN (Sagonas et al., ICCV-W "
            "2013)", "https://ibug.doc.ic.ac.uk/resources/300-W/",
            "afw/ and helen_train/: photos with one <photo>[_<k>].pts per face",
            (("faces", _glob("*/*.pts")),),
            ("cvfs.datasets.ibug68.load_faces68", "cvfs keypoints train",
             "cvfs keypoints evaluate")),
    Dataset("astro", "sky images",
            "real sky images: the SEP test image with SExtractor's output, 2MASS M17 "
            "tiles, a DSS plate of M67",
            "https://github.com/kbarbary/sep (data/), https://irsa.ipac.caltech.edu (2MASS "
            "Atlas), https://archive.stsci.edu/dss",
            "sep_image/{image,back,rms}.fits and image.cat; m17/*.fits.gz; M6707HH.fits",
            (("FITS images", _glob("**/*.fits*")),), ("benchmarks/astro/astro_real.py",)),
    Dataset("mnist", "MNIST",
            "MNIST handwritten digits (LeCun et al., Proc. IEEE 1998)",
            "http://yann.lecun.com/exdb/mnist/ (save the four arrays with numpy.savez_compressed)",
            "mnist.npz with arrays x_train, y_train, x_test, y_test",
            (("digits", _npz_rows("mnist.npz", "x_train", "x_test")),),
            ("cvfs.datasets.load_mnist", "benchmarks/sbl/sbl_mnist.py")),
    Dataset("uci", "UCI and NIPS 2003 sets",
            "feature-selection benchmarks: DEXTER (NIPS 2003 challenge), colon (Alon et "
            "al. 1999) and the UCI sonar, ionosphere, SPECTF and WPBC sets",
            "https://archive.ics.uci.edu (colon: http://genomics-pubs.princeton.edu/oncology/)",
            "dexter/dexter_train.{data,labels}, colon/{I2000,tissue}.txt, sonar/sonar.all-data, "
            "ionosphere/ionosphere.data, spectf/SPECTF.{train,test}, wpbc/wpbc.data",
            ((f"of {len(_UCI)} sets", _uci_sets),),
            ("cvfs.datasets.uci", "benchmarks/fsa/uci_tables.py",
             "benchmarks/fsa/infinite_push.py")),
)}


def _dataset(name):
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}") from None


def require_path(name, *parts):
    """A registered dataset's folder (or a path inside it) in the data home.

    Parameters
    ----------
    name : str
        Key of :data:`DATASETS`, e.g. ``"uci"``.
    *parts : str
        Path components inside the dataset's folder, e.g. ``"dexter"``.

    Returns
    -------
    path : Path

    Raises
    ------
    FileNotFoundError
        If the path does not exist; the message says where to get the dataset.
    """
    ds = _dataset(name)
    path = ds.folder().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{ds.label}: {path} does not exist. {ds.how_to_get()}")
    return path


def dataset_folder(root, name):
    """A dataset's folder: ``root`` if given (it must exist), else its folder in the data home.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist.
    """
    if root is None:
        return require_path(name)
    root = Path(root)
    if not root.is_dir():
        ds = _dataset(name)
        raise FileNotFoundError(f"{ds.label}: data folder {root} does not exist. "
                                f"{ds.how_to_get()}")
    return root


def report(home=None):
    """What ``cvfs data`` prints: the data home, the datasets found (with counts) and, for each
    missing one, where to get it and the layout its loaders expect.

    Parameters
    ----------
    home : str or Path, optional
        Default :func:`cvfs.datasets.data_home`.

    Returns
    -------
    text : str
    """
    import os

    home = Path(home) if home is not None else data_home()
    how = ("from CVFS_DATA" if os.environ.get("CVFS_DATA")
           else "the per-user default; set CVFS_DATA to use another folder")
    lines = [f"data home: {home} ({how})"]
    found, missing = [], []
    for ds in DATASETS.values():
        counts = ds.count(home)
        (found if counts[0][1] else missing).append((ds, counts))
    if found:
        lines += ["", f"found ({len(found)} of {len(DATASETS)}):"]
        width = max(len(ds.name) for ds, _ in found)
        count_width = max(len(", ".join(f"{n:,} {u}" for u, n in c)) for _, c in found)
        for ds, counts in found:
            what = ", ".join(f"{n:,} {unit}" for unit, n in counts)
            lines.append(f"  {ds.name:{width}s}  {what:{count_width}s}  {ds.label}")
    if missing:
        lines += ["", f"missing ({len(missing)}); unpack each into the data home as shown:"]
        for ds, _ in missing:
            state = " (folder present, expected files not found)" if ds.folder(home).is_dir() \
                else ""
            lines += [f"  {ds.name}: {ds.title}{state}",
                      f"    get:    {ds.source}",
                      f"    layout: {home / ds.name}/ {ds.layout}"]
            if ds.used_by:
                lines.append(f"    for:    {', '.join(ds.used_by)}")
    return "\n".join(lines) + "\n"
