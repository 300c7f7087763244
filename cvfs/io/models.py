"""Model files: HDF5 with metadata, written atomically, never pickled.

Layout of a model file::

    /                      attrs: format_version, cvfs_version, kind, params (JSON),
                                  training (JSON), git_commit, random_state (JSON), created
    /arrays/<name>         named datasets (a name may contain '/' to nest)
    /settings              attrs: JSON-serialisable application settings (window size,
                                  feature spec, keypoint names, ...)

Only :func:`save_model` writes these files; :func:`load_model` checks the format version and,
when asked, the kind and the array shapes.
"""

import datetime
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from cvfs.io._atomic import atomic_path

__all__ = ["FORMAT_VERSION", "SavedModel", "load_model", "save_model"]

FORMAT_VERSION = 1


@dataclass
class SavedModel:
    """The content of a model file.

    Attributes
    ----------
    kind : str
        What the file holds, e.g. ``"FSAClassifier"`` or ``"keypoint-detector"``.
    arrays : dict of str -> ndarray
        Named arrays.
    params : dict
        Parameters of the estimator or pipeline (JSON).
    settings : dict
        Application settings (JSON).
    training : dict
        Description of the training data (name, size, hash, command).
    meta : dict
        format_version, cvfs_version, git_commit, random_state, created.
    """

    kind: str
    arrays: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


def _git_commit():
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _dumps(obj):
    return json.dumps(obj, default=_json_default, sort_keys=True)


def save_model(path, kind, arrays, *, params=None, settings=None, training=None,
               random_state=None):
    """Write a model file atomically.

    Parameters
    ----------
    path : str or Path
        Destination (``.h5``). An existing file is replaced only when the new one is complete.
    kind : str
        What the file holds; :func:`load_model` can require it.
    arrays : dict of str -> array_like
        Named arrays; names may contain ``'/'`` to nest groups.
    params, settings, training : dict, optional
        JSON-serialisable dictionaries (see :class:`SavedModel`).
    random_state : int or None, optional
        The seed the model was trained with, for the record.

    Returns
    -------
    path : Path
    """
    from cvfs import __version__

    path = Path(path)
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or name.startswith("/"):
            raise ValueError(f"array names must be non-empty relative strings; got {name!r}")
        if np.asarray(value).dtype == object:
            raise TypeError(f"array {name!r} has dtype object; model files hold numeric arrays")
    with atomic_path(path, suffix=".h5") as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["cvfs_version"] = __version__
            f.attrs["kind"] = kind
            f.attrs["params"] = _dumps(params or {})
            f.attrs["training"] = _dumps(training or {})
            f.attrs["git_commit"] = _git_commit()
            f.attrs["random_state"] = _dumps(random_state)
            f.attrs["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
            grp = f.create_group("arrays")
            for name, value in arrays.items():
                grp.create_dataset(name, data=np.asarray(value))
            sgrp = f.create_group("settings")
            for key, value in (settings or {}).items():
                sgrp.attrs[key] = _dumps(value)
    return path


def load_model(path, *, kind=None, shapes=None):
    """Read a model file written by :func:`save_model`.

    Parameters
    ----------
    path : str or Path
    kind : str, optional
        If given, the file's kind must equal it.
    shapes : dict of str -> tuple, optional
        Expected array shapes; ``None`` in a tuple matches any length.

    Returns
    -------
    model : SavedModel

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a cvfs model file, has another format version or kind, or an array
        has the wrong shape.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise ValueError(f"{path} is not a readable HDF5 model file ({exc})") from exc
    with f:
        if "format_version" not in f.attrs or "arrays" not in f:
            raise ValueError(f"{path} is not a cvfs model file (no format_version / arrays)")
        version = int(f.attrs["format_version"])
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{path} has model format version {version}; this cvfs reads version "
                f"{FORMAT_VERSION}: retrain or convert the model"
            )
        file_kind = str(f.attrs["kind"])
        if kind is not None and file_kind != kind:
            raise ValueError(f"{path} holds a {file_kind!r} model, expected {kind!r}")
        arrays = {}
        f["arrays"].visititems(
            lambda name, obj: arrays.__setitem__(name, obj[()])
            if isinstance(obj, h5py.Dataset) else None
        )
        settings = {k: json.loads(v) for k, v in f["settings"].attrs.items()}
        meta = {
            "format_version": version,
            "cvfs_version": str(f.attrs["cvfs_version"]),
            "git_commit": str(f.attrs["git_commit"]),
            "random_state": json.loads(f.attrs["random_state"]),
            "created": str(f.attrs["created"]),
        }
        model = SavedModel(
            kind=file_kind,
            arrays=arrays,
            params=json.loads(f.attrs["params"]),
            settings=settings,
            training=json.loads(f.attrs["training"]),
            meta=meta,
        )
    for name, shape in (shapes or {}).items():
        if name not in model.arrays:
            raise ValueError(f"{path}: array {name!r} is missing")
        got = model.arrays[name].shape
        if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
            raise ValueError(f"{path}: array {name!r} has shape {got}, expected {shape}")
    return model
