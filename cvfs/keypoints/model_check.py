"""Checks of a keypoint-detector model file before any array reaches the scan kernels."""

import math

import numpy as np

from cvfs.datasets.landmarks import KEYPOINTS
from cvfs.vision import FeaturePool

__all__ = ["check_saved"]

_CLF_ARRAYS = ("features", "lo", "scale", "table", "intercept", "step")
_CLF_OPTIONAL = ("cascade_ends", "cascade_thresholds")
_BOUND = 1e100  # |lo| and scale of a stored classifier: (x - lo) * scale stays finite


def _real(value, lo, hi, *, strict_lo=False):
    """True if ``value`` is a real number (not bool) in [lo, hi] ((lo, hi] with strict_lo)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and (value > lo if strict_lo else value >= lo)
            and value <= hi)


def check_saved(model):
    """Check a keypoint-detector model's settings and arrays; returns (settings, pool params).

    Raises
    ------
    ValueError
        Naming the file and the failed check.
    """
    where = model.path or "keypoint model"

    def fail(msg):
        raise ValueError(f"{where}: {msg}")

    s = model.settings
    for key in ("keypoints", "pool", "thresholds"):
        if key not in s:
            fail(f"the keypoint model file lacks the setting {key!r}")
    names = s["keypoints"]
    if not isinstance(names, list) or not names or len(set(map(str, names))) != len(names) \
            or any(not isinstance(n, str) or n not in KEYPOINTS for n in names):
        fail(f"setting 'keypoints' must list distinct names from {list(KEYPOINTS)}; got "
             f"{names!r}")
    pool = s["pool"]
    if not isinstance(pool, dict) or not set(pool) <= {"haar_per_channel", "hog_border"}:
        fail(f"setting 'pool' must hold haar_per_channel and hog_border; got {pool!r}")
    try:
        n_features = FeaturePool(**pool).n_features
    except (TypeError, ValueError) as exc:
        fail(f"setting 'pool' is not a valid feature pool ({exc})")
    thr = s["thresholds"]
    if not isinstance(thr, dict) or not set(thr) <= set(names) or not all(
            _real(v, -_BOUND, _BOUND) for v in thr.values()):
        fail(f"setting 'thresholds' must map the file's keypoints to finite numbers; got {thr!r}")
    checks = {"scales_per_octave": (1, 32, False), "max_scale": (0.0, 8.0, True),
              "nms_radius": (0.0, 1e3, True), "merge_radius": (0.0, 1e3, False)}
    for key, (lo, hi, strict) in checks.items():
        if key in s and not (_real(s[key], lo, hi, strict_lo=strict) and (
                key != "scales_per_octave" or isinstance(s[key], int))):
            fail(f"setting {key!r} must be a number in {'(' if strict else '['}{lo:g}, {hi:g}]"
                 f"{' (an int)' if key == 'scales_per_octave' else ''}; got {s[key]!r}")
    if "window" in s and s["window"] != FeaturePool.window:
        fail(f"setting 'window' is {s['window']!r}; this cvfs scans {FeaturePool.window}-pixel "
             "windows")
    allowed = {f"clf{i}/{f}" for i in range(len(names)) for f in _CLF_ARRAYS + _CLF_OPTIONAL}
    extra = sorted(set(model.arrays) - allowed)
    if extra:
        fail(f"unexpected arrays {extra[:5]}; a detector of {len(names)} keypoints holds "
             f"clf0..clf{len(names) - 1}/{{{', '.join(_CLF_ARRAYS + _CLF_OPTIONAL)}}}")
    for i, name in enumerate(names):
        a = {f: model.arrays.get(f"clf{i}/{f}") for f in _CLF_ARRAYS + _CLF_OPTIONAL}
        miss = [f"clf{i}/{f}" for f in _CLF_ARRAYS if a[f] is None]
        if miss:
            fail(f"the classifier of {name} lacks the arrays {miss}")
        feats, table = a["features"], a["table"]
        if feats.ndim != 1 or feats.dtype.kind not in "iu" or feats.size == 0:
            fail(f"clf{i}/features must be a non-empty 1-D integer array; got {feats.dtype} "
                 f"{feats.shape}")
        if feats.min() < 0 or feats.max() >= n_features:
            fail(f"clf{i}/features holds indices outside the feature pool [0, {n_features})")
        k = feats.size
        for f in ("lo", "scale"):
            if a[f].shape != (k,) or a[f].dtype.kind != "f":
                fail(f"clf{i}/{f} must be float of shape ({k},); got {a[f].dtype} {a[f].shape}")
        if np.abs(a["lo"]).max() > _BOUND or a["scale"].min() < 0 or a["scale"].max() > _BOUND:
            fail(f"clf{i}: lo must lie in [-{_BOUND:g}, {_BOUND:g}] and scale in "
                 f"[0, {_BOUND:g}]")
        if table.ndim != 2 or table.dtype.kind != "f" or table.shape[0] != k \
                or not 1 <= table.shape[1] <= 4096:
            fail(f"clf{i}/table must be float of shape ({k}, T), 1 <= T <= 4096; got "
                 f"{table.dtype} {table.shape}")
        for f in ("intercept", "step"):
            if a[f].shape != (1,):
                fail(f"clf{i}/{f} must have shape (1,); got {a[f].shape}")
        if a["step"].dtype.kind not in "biu" or a["step"][0] not in (0, 1):
            fail(f"clf{i}/step must be a bool; got {a['step']!r}")
        ends, cthr = a["cascade_ends"], a["cascade_thresholds"]
        if (ends is None) != (cthr is None):
            fail(f"clf{i} needs both cascade_ends and cascade_thresholds, or neither")
        if ends is not None and (ends.ndim != 1 or ends.dtype.kind not in "iu"
                                 or cthr.shape != ends.shape or cthr.dtype.kind != "f"):
            fail(f"clf{i}/cascade_ends must be 1-D integers and cascade_thresholds floats of "
                 f"the same shape; got {ends.dtype} {ends.shape} and {cthr.dtype} {cthr.shape}")
    return s, pool
