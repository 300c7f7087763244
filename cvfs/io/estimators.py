"""Save and load fitted cvfs estimators as model files (HDF5 via :func:`save_model`, no pickle).

Parameters (``get_params``) are stored as JSON, fitted attributes (names ending in ``_``) as
named arrays (0-d ones under ``__scalar__/``); ``history_`` dictionaries are stored under
``history_/``. :func:`load_estimator` accepts only the fitted attributes of the file's class
(a name such as ``predict`` never reaches the estimator), checks the parameters with the
estimator's own validation, and checks every shape and index range against
``n_features_in_`` before the estimator can compute with them.
"""

import numbers

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
    if "random_state" in params and not isinstance(params["random_state"], (int, type(None))):
        params["random_state"] = None  # a Generator is not stored
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
    model = load_model(path, kind=kind, allow_nonfinite=lambda name: name.startswith("history_/"))
    registry = _registry()
    if model.kind not in registry:
        raise ValueError(f"{path} holds a {model.kind!r}, which is not a cvfs estimator")
    required, optional = _FITTED.get(model.kind, _FITTED["_FSA"])
    for name in model.arrays:
        if not (name in required or name in optional or name.startswith("history_/")):
            raise ValueError(f"{path}: unexpected array {name!r}; a {model.kind} file holds "
                             f"{sorted(required | optional)} and history_/*")
    missing = sorted(required - set(model.arrays))
    if missing:
        raise ValueError(f"{path}: the {model.kind} file lacks the array(s) {missing}")
    try:
        est = registry[model.kind](**model.params)
        if hasattr(est, "_check_params"):
            est._check_params()
        else:
            est._validate_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid {model.kind} parameters ({exc})") from exc
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
    _check_fitted(path, est, model.kind)
    return est, model


_S = _SCALAR
_FITTED = {  # class -> (required, optional) array names
    "_FSA": ({"support_", "coef_", "response_table_", _S + "intercept_", _S + "n_features_in_"},
             {_S + "n_iter_"}),
    "FSAClassifier": ({"support_", "coef_", "response_table_", "classes_", _S + "intercept_",
                       _S + "n_features_in_"}, {_S + "n_iter_"}),
    "SBLRegressor": ({"coef_", "gamma_", _S + "intercept_", _S + "n_features_in_",
                      _S + "n_iter_"}, {"screening_", "dual_gaps_", _S + "noise_variance_",
                                        "active_", "sigma_", "X_offset_"}),
    "SBLClassifier": ({"classes_", "dictionary_", "atom_labels_", "atom_index_",
                       _S + "n_features_in_"}, set()),
}


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_fitted(path, est, kind):
    """Shapes, dtypes, finiteness and index ranges of a loaded estimator's fitted state."""

    def fail(msg):
        raise ValueError(f"{path}: {msg}")

    n = est.n_features_in_
    if not _is_int(n) or not 1 <= n <= 2**40:
        fail(f"n_features_in_ must be a positive int; got {n!r}")
    if kind == "SBLClassifier":
        D, lab, idx = est.dictionary_, est.atom_labels_, est.atom_index_
        if D.ndim != 2 or D.shape[0] != n or D.dtype.kind != "f" or not np.isfinite(D).all():
            fail(f"dictionary_ must be finite float of shape ({n}, n_atoms); got {D.dtype} "
                 f"{D.shape}")
        m, k = D.shape[1], est.classes_.shape[0]
        for name, a, hi in (("atom_labels_", lab, k), ("atom_index_", idx, 2**62)):
            if a.shape != (m,) or a.dtype.kind not in "iu" or (m and (a.min() < 0
                                                                     or a.max() >= hi)):
                fail(f"{name} must hold {m} integers in [0, {hi}); got {a.dtype} {a.shape}")
        est.atom_labels_ = lab.astype(np.int64)
        est.atom_index_ = idx.astype(np.int64)
        return
    intercept = est.intercept_
    if isinstance(intercept, bool) or not isinstance(intercept, numbers.Real) \
            or not np.isfinite(intercept):
        fail(f"intercept_ must be a finite number; got {intercept!r}")
    if kind == "SBLRegressor":
        for name in ("coef_", "gamma_"):
            a = getattr(est, name)
            if a.shape != (n,) or a.dtype.kind != "f":
                fail(f"{name} must be float of shape ({n},); got {a.dtype} {a.shape}")
        if (est.gamma_ < 0).any():
            fail("gamma_ holds negative prior variances")
        if not _is_int(est.n_iter_) or est.n_iter_ < 0:
            fail(f"n_iter_ must be an int >= 0; got {est.n_iter_!r}")
        if hasattr(est, "active_"):
            a, sig = est.active_, getattr(est, "sigma_", None)
            if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and (a.min() < 0
                                                                      or a.max() >= n)):
                fail(f"active_ must hold indices in [0, {n}); got {a.dtype} {a.shape}")
            if sig is None or sig.shape != (a.size, a.size):
                fail(f"sigma_ must be of shape ({a.size}, {a.size})")
            est.active_ = a.astype(np.int64)
        return
    support = est.support_
    if support.dtype.kind == "b":
        if support.shape != (n,):
            fail(f"support_ must be a boolean mask of shape ({n},); got {support.shape}")
        support = np.flatnonzero(support)
    # files written by cvfs 0.1.0 hold the sorted selected indices
    elif support.ndim != 1 or support.dtype.kind not in "iu" or support.size > n:
        fail(f"support_ must be a boolean mask of shape ({n},) or a 1-D integer array of at "
             f"most {n} indices; got {support.dtype} {support.shape}")
    if support.size and (support.min() < 0 or support.max() >= n
                         or (np.diff(support) <= 0).any()):
        fail(f"support_ must hold sorted unique indices in [0, n_features_in_={n})")
    est.support_ = np.zeros(n, dtype=bool)
    est.support_[support] = True
    if hasattr(est, "n_iter_") and (not _is_int(est.n_iter_) or est.n_iter_ < 0):
        fail(f"n_iter_ must be an int >= 0; got {est.n_iter_!r}")
    k = support.size
    bins = 0 if est.bins is None else est.bins
    G = 1 if bins == 0 else bins + 1
    want = (k,) if bins == 0 else (k, G)
    if est.coef_.shape != want or est.coef_.dtype.kind != "f":
        fail(f"coef_ must be float of shape {want} (bins={est.bins}); got {est.coef_.dtype} "
             f"{est.coef_.shape}")
    table = est.response_table_
    if table.shape != (k, 2 + G) or table.dtype.kind != "f":
        fail(f"response_table_ must be float of shape {(k, 2 + G)}; got {table.dtype} "
             f"{table.shape}")
    est.coef_ = est.coef_.astype(np.float64)
    est.response_table_ = table.astype(np.float64)
    if kind == "FSAClassifier":
        classes = est.classes_
        if classes.shape != (2,) or classes[0] == classes[1]:
            fail(f"classes_ must hold two distinct labels; got {classes!r}")
