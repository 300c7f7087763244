"""HDF5 cache of candidates, features and candidate errors for a set of labelled sequences.

Layout::

    /                       attrs: feature_version, n_features, alphas (JSON), refine (JSON), seed
    /seq/<name>/labels      (C, P) int8 candidate labels
    /seq/<name>/params      (C, 3) (alpha, d, refined)
    /seq/<name>/features    (C, M) float64
    /seq/<name>/errors      (C,) misclassification of each candidate
    /seq/<name>/truth       (P,) ground truth
                attrs: n_motions, category, video, raw_footage, seconds (candidates + features)

A cache built with another feature version or pool is rebuilt, never silently reused.
"""

import json
import logging
import time
from pathlib import Path

import h5py
import numpy as np

from cvfs.io import atomic_path
from cvfs.motion.candidates import DEFAULT_ALPHAS, DEFAULT_REFINE, generate_candidates
from cvfs.motion.evaluate import misclassification
from cvfs.motion.features import FEATURE_VERSION, candidate_features, n_features
from cvfs.motion.ranking import RankingData

__all__ = ["build_cache", "load_cache", "cache_matches", "pool_settings"]

log = logging.getLogger(__name__)


def pool_settings(alphas=DEFAULT_ALPHAS, refine=DEFAULT_REFINE, seed=0):
    """Candidate pool and feature layout of a cache, as a ranker trained on it records them.

    The ``settings`` of :func:`cvfs.motion.ranking.save_ranker`; :func:`cvfs.motion.segment`
    regenerates candidates with them.
    """
    return {"alphas": [float(a) for a in alphas], "refine": list(refine),
            "feature_version": FEATURE_VERSION, "n_features": n_features(), "seed": int(seed)}


def _config(alphas, refine, seed):
    """:func:`pool_settings` as HDF5 attributes (lists as JSON)."""
    return {key: json.dumps(value) if isinstance(value, list) else value
            for key, value in pool_settings(alphas, refine, seed).items()}


def is_feature_cache(path):
    """True if ``path`` is a feature cache cvfs wrote (any feature version or pool): an HDF5
    file with a ``feature_version`` attribute. Only such a file is ever replaced."""
    try:
        with h5py.File(path, "r") as f:
            return "feature_version" in f.attrs
    except (OSError, ValueError):
        return False


def cache_matches(path, alphas=DEFAULT_ALPHAS, refine=DEFAULT_REFINE, seed=0, names=None):
    """True if ``path`` is a cache of this feature version, pool and (optionally) sequences."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r") as f:
            for key, value in _config(alphas, refine, seed).items():
                if key not in f.attrs or f.attrs[key] != value:
                    return False
            if names is not None and set(names) != set(f["seq"].keys()):
                return False
    except OSError:
        return False
    return True


def build_cache(sequences, path, *, alphas=DEFAULT_ALPHAS, refine=DEFAULT_REFINE, seed=0,
                verbose=False):
    """Generate candidates and features of every sequence and write the cache atomically.

    Parameters
    ----------
    sequences : list of cvfs.datasets.hopkins155.Sequence
    path : str or Path
        Destination ``.h5``.
    alphas : sequence of float
        Candidate pool (affinity exponents); dimensions are ``[2K, 4K]``.
    refine : sequence of str
        K-subspace refinement spaces of the pool (see
        :func:`cvfs.motion.candidates.generate_candidates`).
    seed : int
        k-means seed of the candidate generation.
    verbose : bool
        tqdm bar.

    Returns
    -------
    seconds : ndarray of shape (n_sequences,)
        Wall time of candidates + features per sequence.

    Raises
    ------
    FileExistsError
        If ``path`` exists and is not a feature cache (:func:`is_feature_cache`), or cannot be
        written (:func:`cvfs.io.check_output_file`).
    """
    from tqdm.auto import tqdm

    from cvfs.io import check_output_file

    check_output_file(path, replace=is_feature_cache, what="feature cache", label="cache")
    seconds = []
    with atomic_path(path, suffix=".h5") as tmp:
        with h5py.File(tmp, "w") as f:
            for key, value in _config(alphas, refine, seed).items():
                f.attrs[key] = value
            root = f.create_group("seq")
            for seq in tqdm(sequences, desc="candidates+features", disable=not verbose):
                t0 = time.perf_counter()
                cand = generate_candidates(seq.points, seq.n_motions, alphas=alphas,
                                           refine=refine, random_state=seed)
                X = candidate_features(seq.points, cand)
                dt = time.perf_counter() - t0
                seconds.append(dt)
                g = root.create_group(seq.name)
                g.create_dataset("labels", data=cand.labels.astype(np.int8))
                g.create_dataset("params", data=cand.params)
                g.create_dataset("features", data=X)
                g.create_dataset("errors", data=misclassification(cand.labels, seq.labels))
                g.create_dataset("truth", data=seq.labels.astype(np.int8))
                g.attrs.update(n_motions=seq.n_motions, category=seq.category, video=seq.video,
                               raw_footage=seq.raw_footage, seconds=dt)
    log.info("feature cache %s: %d sequences, median %.0f ms", path, len(seconds),
             1e3 * np.median(seconds) if seconds else 0.0)
    return np.asarray(seconds)


def load_cache(path, names=None):
    """Read a cache into a :class:`~cvfs.motion.ranking.RankingData`.

    Parameters
    ----------
    path : str or Path
    names : list of str, optional
        Only these sequences, in this order; default all (sorted).

    Returns
    -------
    data : RankingData
    seconds : ndarray of shape (n_sequences,)
        Candidates + features time recorded when the cache was built.

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ValueError
        If it is not a cache of this feature version or lacks a requested sequence.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"feature cache not found: {path}")
    X, errors, groups, params, labels = [], [], [], [], []
    meta = {k: [] for k in ("names", "categories", "videos", "raw_footage", "n_motions")}
    seconds = []
    with h5py.File(path, "r") as f:
        if f.attrs.get("feature_version") != FEATURE_VERSION:
            raise ValueError(f"{path}: feature version {f.attrs.get('feature_version')}, this "
                             f"cvfs computes version {FEATURE_VERSION}: rebuild the cache")
        root = f["seq"]
        names = sorted(root.keys()) if names is None else list(names)
        for i, name in enumerate(names):
            if name not in root:
                raise ValueError(f"{path}: sequence {name!r} is not in the cache")
            g = root[name]
            feats = g["features"][()]
            X.append(feats)
            errors.append(g["errors"][()])
            params.append(g["params"][()])
            labels.append(g["labels"][()].astype(np.int64))
            groups.append(np.full(feats.shape[0], i, dtype=np.int64))
            meta["names"].append(name)
            meta["categories"].append(str(g.attrs["category"]))
            meta["videos"].append(str(g.attrs["video"]))
            meta["raw_footage"].append(str(g.attrs["raw_footage"]))
            meta["n_motions"].append(int(g.attrs["n_motions"]))
            seconds.append(float(g.attrs["seconds"]))
    data = RankingData(
        X=np.concatenate(X), errors=np.concatenate(errors), groups=np.concatenate(groups),
        labels=labels, params=np.concatenate(params), names=meta["names"],
        categories=meta["categories"], videos=meta["videos"], raw_footage=meta["raw_footage"],
        n_motions=np.asarray(meta["n_motions"], dtype=np.int64))
    return data, np.asarray(seconds)
