"""Where data and shipped models live.

The data home is ``$CVFS_DATA`` when set, else ``../shared/data`` beside the checkout when that
folder exists. Shipped models are package data in ``cvfs/models/`` (``$CVFS_MODELS`` overrides
the folder).
"""

import os
from importlib import resources
from pathlib import Path

__all__ = ["data_home", "dataset_folder", "models_dir", "require_path"]

_REPO_ROOT = Path(__file__).resolve().parents[2]


def data_home():
    """The data home, or None when neither ``$CVFS_DATA`` nor ``../shared/data`` exists.

    Returns
    -------
    path : Path or None
    """
    env = os.environ.get("CVFS_DATA")
    if env:
        return Path(env).expanduser()
    default = _REPO_ROOT.parent / "shared" / "data"
    return default if default.is_dir() else None


def require_path(relative, what, how_to_get):
    """Resolve ``relative`` inside the data home or fail with a message naming it.

    Parameters
    ----------
    relative : str
        Path inside the data home, e.g. ``"hopkins155"``.
    what : str
        Human name of the dataset, for the error.
    how_to_get : str
        How a user obtains it, for the error.

    Raises
    ------
    FileNotFoundError
        If there is no data home or the path is missing in it.
    """
    home = data_home()
    if home is None:
        raise FileNotFoundError(
            f"{what}: no data home. Set CVFS_DATA to the folder holding {relative!r}. "
            f"{how_to_get}"
        )
    path = home / relative
    if not path.exists():
        raise FileNotFoundError(f"{what}: {path} does not exist. {how_to_get}")
    return path


def dataset_folder(root, relative, what, how_to_get):
    """A dataset's folder: ``root`` if given (it must exist), else ``relative`` inside the data
    home (:func:`require_path`); FileNotFoundError naming the dataset otherwise."""
    if root is None:
        return require_path(relative, what, how_to_get)
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{what}: data folder {root} does not exist. {how_to_get}")
    return root


def models_dir():
    """Folder of the shipped model files: ``$CVFS_MODELS`` when set, else the package's
    ``cvfs/models`` (installed with cvfs, from a checkout or a wheel).

    Returns
    -------
    path : Path
    """
    env = os.environ.get("CVFS_MODELS")
    if env:
        return Path(env).expanduser()
    return Path(str(resources.files("cvfs") / "models"))
