"""Save and load fitted cvfs estimators as model files (HDF5 via :func:`save_model`, no pickle).

Parameters (``get_params``) are stored as JSON, fitted attributes (names ending in ``_``) as
named arrays; ``history_`` dictionaries are stored under ``history/``.
"""

import numpy as np

from cvfs.io.models import load_model, save_model

__all__ = ["load_estimator", "save_estimator"]

_SCALAR = "__scalar__/"


def _registry():
    from cvfs import estimators

    return {name: getattr(estimators, name) for name in estimators.__all__
            if isinstance(getattr(estimators, name), type)}


def save_estimator(path, estimator, *, settings=None, training=None):
    """Write a fitted estimator to ``path`` atomically.

    Parameters
    ----------
    path : str or Path
    estimator : fitted cvfs estimator
    settings, training : dict, optional
        Application settings and training-data description (see :func:`save_model`).

    Raises
    ------
    ValueError
        If the estimator is not fitted or not a cvfs estimator.
    """
    name = type(estimator).__name__
    if name not in _registry():
        raise ValueError(f"save_estimator saves cvfs estimators, got {name}")
    arrays = {}
    for attr, value in vars(estimator).items():
        if not attr.endswith("_") or attr.startswith("_"):
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                arrays[f"{attr}/{key}"] = np.asarray(item)
        elif isinstance(value, np.ndarray):
            arrays[attr] = value
        else:
            arrays[_SCALAR + attr] = np.asarray(value)
    if not arrays:
        raise ValueError(f"{name} is not fitted: nothing to save")
    params = estimator.get_params()
    params["random_state"] = params.get("random_state") if isinstance(
        params.get("random_state"), (int, type(None))) else None
    return save_model(path, name, arrays, params=params, settings=settings, training=training,
                      random_state=params.get("random_state"))


def load_estimator(path, *, kind=None):
    """Read an estimator written by :func:`save_estimator`.

    Parameters
    ----------
    path : str or Path
    kind : str, optional
        Required class name (e.g. ``"FSARanker"``).

    Returns
    -------
    estimator : fitted estimator
    model : SavedModel
        The file's content (settings, training description, metadata).
    """
    model = load_model(path, kind=kind)
    registry = _registry()
    if model.kind not in registry:
        raise ValueError(f"{path} holds a {model.kind!r}, which is not a cvfs estimator")
    est = registry[model.kind](**model.params)
    dicts = {}
    for name, value in model.arrays.items():
        if name.startswith(_SCALAR):
            setattr(est, name[len(_SCALAR):], value.item() if value.ndim == 0 else value)
        elif "/" in name:
            attr, key = name.split("/", 1)
            dicts.setdefault(attr, {})[key] = value.item() if value.ndim == 0 else value
        else:
            setattr(est, name, value)
    for attr, value in dicts.items():
        setattr(est, attr, value)
    return est, model
