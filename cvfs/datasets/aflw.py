"""Loader of AFLW's original ``aflw.sqlite`` annotation database.

Schema read (AFLW's own; other tables and columns are ignored)::

    FaceImages(image_id, db_id, file_id, filepath, bw, width, height)
    Faces(face_id, file_id, db_id)
    FeatureCoordTypes(feature_id, descr, code, x, y, z)     # 21 rows, e.g. 8 'LeftEyeCenter'
    FeatureCoords(face_id, feature_id, x, y, annot_type_id)
    FaceRect(face_id, x, y, w, h, annot_type_id)
    FacePose(face_id, roll, pitch, yaw, annot_type_id)

Images live under ``<image_root>/<FaceImages.filepath>`` (AFLW ships them in ``flickr/0``,
``flickr/2``, ``flickr/3``, and ``filepath`` is e.g. ``3/image00035.jpg``). Point names are mapped
by ``FeatureCoordTypes.descr`` (``LeftEyeCenter`` -> ``left_eye_center``), not by id, so a
database with renumbered ids still loads correctly.

References
----------
Koestinger, Wohlhart, Roth, Bischof, "Annotated Facial Landmarks in the Wild: A Large-scale,
Real-world Database for Facial Landmark Localization", ICCV Workshops 2011.
"""

import re
import sqlite3
from pathlib import Path

import numpy as np

from cvfs.datasets.faces import AnnotatedImage
from cvfs.datasets.landmarks import KEYPOINTS

__all__ = ["load_aflw", "snake_case"]

_REQUIRED = {
    "FaceImages": ("file_id", "filepath"),
    "Faces": ("face_id", "file_id"),
    "FeatureCoordTypes": ("feature_id", "descr"),
    "FeatureCoords": ("face_id", "feature_id", "x", "y"),
}


def snake_case(descr):
    """``'LeftEyeCenter'`` -> ``'left_eye_center'`` (AFLW's ``descr`` to our vocabulary)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", descr.strip()).lower()


def _check_schema(con, path):
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, cols in _REQUIRED.items():
        if table not in tables:
            raise ValueError(
                f"{path} is not an AFLW database: table {table!r} is missing "
                f"(expected tables {sorted(_REQUIRED)}, found {sorted(tables)})"
            )
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        miss = [c for c in cols if c not in have]
        if miss:
            raise ValueError(f"{path}: table {table!r} lacks columns {miss}")
    return tables


def load_aflw(sqlite_path, image_root=None, *, require_images=False):
    """Load every face of an AFLW database, grouped by image.

    Parameters
    ----------
    sqlite_path : str or Path
        The ``aflw.sqlite`` file.
    image_root : str or Path, optional
        Folder that ``FaceImages.filepath`` is relative to; default ``flickr/`` beside the
        database.
    require_images : bool
        If True, skip images whose file is missing under ``image_root``.

    Returns
    -------
    images : list of AnnotatedImage
        Sorted by ``file_id``; ``points`` of shape (n_faces, 21, 2) in AFLW's order, NaN where a
        point is not annotated (AFLW annotates visible points only). ``attrs`` holds
        ``face_id`` (list), ``file_id``, ``width``/``height`` when present, ``rect`` (n_faces, 4)
        of x, y, w, h (NaN if absent) and ``pose`` (n_faces, 3) of roll, pitch, yaw in radians
        (NaN if absent).

    Raises
    ------
    FileNotFoundError
        If ``sqlite_path`` does not exist.
    ValueError
        If the file is not an SQLite database with AFLW's tables, or a point type is not one of
        the 21 AFLW points.
    """
    path = Path(sqlite_path)
    if not path.is_file():
        raise FileNotFoundError(
            f"AFLW database not found: {path}. AFLW is distributed on registration "
            "(www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/aflw)."
        )
    image_root = Path(image_root) if image_root is not None else path.parent / "flickr"
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not an SQLite database ({exc})") from exc
    try:
        tables = _check_schema(con, path)
        id_to_col = {}
        for fid, descr in con.execute("SELECT feature_id, descr FROM FeatureCoordTypes"):
            name = snake_case(descr)
            if name not in KEYPOINTS:
                raise ValueError(
                    f"{path}: FeatureCoordTypes {fid} {descr!r} is not one of AFLW's 21 points"
                )
            id_to_col[int(fid)] = KEYPOINTS.index(name)
        img_cols = {r[1] for r in con.execute("PRAGMA table_info(FaceImages)")}
        extra = [c for c in ("width", "height") if c in img_cols]
        files = {}
        for row in con.execute(
            f"SELECT file_id, filepath{''.join(', ' + c for c in extra)} FROM FaceImages"
        ):
            files[row[0]] = (row[1], dict(zip(extra, row[2:], strict=True)))
        faces_by_file = {}
        for face_id, file_id in con.execute(
            "SELECT face_id, file_id FROM Faces ORDER BY face_id"
        ):
            faces_by_file.setdefault(file_id, []).append(int(face_id))
        coords = {}
        for face_id, fid, x, y in con.execute(
            "SELECT face_id, feature_id, x, y FROM FeatureCoords"
        ):
            coords.setdefault(int(face_id), []).append((id_to_col[int(fid)], x, y))
        rects = {}
        if "FaceRect" in tables:
            for face_id, x, y, w, h in con.execute("SELECT face_id, x, y, w, h FROM FaceRect"):
                rects.setdefault(int(face_id), (x, y, w, h))
        poses = {}
        if "FacePose" in tables:
            for face_id, roll, pitch, yaw in con.execute(
                "SELECT face_id, roll, pitch, yaw FROM FacePose"
            ):
                poses.setdefault(int(face_id), (roll, pitch, yaw))
    finally:
        con.close()

    images = []
    for file_id in sorted(faces_by_file):
        if file_id not in files:
            continue
        rel, meta = files[file_id]
        img_path = image_root / rel
        if require_images and not img_path.is_file():
            continue
        ids = faces_by_file[file_id]
        pts = np.full((len(ids), len(KEYPOINTS), 2), np.nan)
        for i, face_id in enumerate(ids):
            for col, x, y in coords.get(face_id, ()):
                pts[i, col] = (x, y)
        rect = np.array([rects.get(f, (np.nan,) * 4) for f in ids], dtype=np.float64)
        pose = np.array([poses.get(f, (np.nan,) * 3) for f in ids], dtype=np.float64)
        attrs = {"face_id": ids, "file_id": file_id, "rect": rect, "pose": pose, **meta}
        images.append(AnnotatedImage(img_path, pts, "aflw", attrs))
    return images
