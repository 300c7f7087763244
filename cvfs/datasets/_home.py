"""Where data and shipped models live.

The data home is ``$CVFS_DATA`` when set, else ``~/cvfs_data`` (the per-user folder, as
scikit-learn's ``~/scikit_learn_data``). Shipped models are package data in ``cvfs/models/``
(``$CVFS_MODELS`` overrides the folder).
"""

import os
from importlib import resources
from pathlib import Path

__all__ = ["DEFAULT_DATA_HOME", "data_home", "models_dir"]

#: The data home when ``$CVFS_DATA`` is not set.
DEFAULT_DATA_HOME = "~/cvfs_data"


def data_home(create=False):
    """The folder holding the datasets: ``$CVFS_DATA`` when set, else ``~/cvfs_data``.

    Parameters
    ----------
    create : bool, default=False
        Create the folder (and its parents) if it does not exist.

    Returns
    -------
    path : Path
        Absolute, with ``~`` expanded; it may not exist unless ``create`` is True.

    Raises
    ------
    OSError
        If ``create`` is True and the folder cannot be created.
    """
    home = Path(os.environ.get("CVFS_DATA") or DEFAULT_DATA_HOME).expanduser().absolute()
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


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
