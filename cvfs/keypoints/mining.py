"""Hard-negative mining with positions-only bookkeeping and a checkpoint after every round.

A mining run alternates (FSA paper, section 3.3): train the classifier on the positives and the
current negatives; scan the training images with it and add the ~``n_hard`` highest-scoring
negatives not yet in the set (the set grows); repeat for ``n_rounds`` rounds. Examples are window
positions (:data:`cvfs.keypoints.examples.EXAMPLE_DTYPE`), never feature vectors on disk: the
caller's ``features`` function computes the rows of the examples from their positions once per run
(each round adds only the rows of the newly mined negatives; a resumed run recomputes them).

After every round the state (positives, negatives, completed rounds, the round's classifier and a
history) is written atomically to a checkpoint sealed like a model file (file and content
checksums, :mod:`cvfs.io.models`); :func:`run_mining` started again with the same checkpoint
verifies it (checksums, layout, example indices within the training images, the classifier's
arrays) and resumes after the last completed round.

References
----------
Barbu, She, Ding, Gramajo, TPAMI 2017, section 3.3 ("Training examples"); Felzenszwalb,
Girshick, McAllester, Ramanan, "Object detection with discriminatively trained part-based
models", IEEE TPAMI 2010 (hard-negative mining).
"""

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints.examples import EXAMPLE_DTYPE

__all__ = [
    "CHECKPOINT_KIND",
    "MiningState",
    "config_diff",
    "load_checkpoint",
    "merge_hardest",
    "run_mining",
    "save_checkpoint",
]

log = logging.getLogger(__name__)

_CKPT_VERSION = 2

#: The ``kind`` of a mining checkpoint file (a sealed model file, :mod:`cvfs.io.models`).
CHECKPOINT_KIND = "mining-checkpoint"


@dataclass
class MiningState:
    """Everything a mining run needs to resume.

    Attributes
    ----------
    positives, negatives : ndarray of EXAMPLE_DTYPE
    round : int
        Completed rounds.
    model : AdditiveModel or None
        Classifier trained in the last completed round.
    history : list of dict
        Per round: negatives used, negatives added, fit and scan seconds.
    config : dict
        Settings the run was started with; a resume with other settings is refused.
    """

    positives: np.ndarray
    negatives: np.ndarray
    round: int = 0
    model: AdditiveModel = None
    history: list = field(default_factory=list)
    config: dict = field(default_factory=dict)


def save_checkpoint(path, state):
    """Write ``state`` to ``path`` atomically, sealed like a model file
    (:func:`cvfs.io.save_model`: file and content checksums; kind ``"mining-checkpoint"``).

    Parameters
    ----------
    path : str or Path
    state : MiningState

    Returns
    -------
    path : Path
    """
    from cvfs.io import save_model

    arrays = {}
    for which in ("positives", "negatives"):
        ex = np.asarray(getattr(state, which), dtype=EXAMPLE_DTYPE)
        arrays.update({f"{which}/{f}": np.ascontiguousarray(ex[f]) for f in EXAMPLE_DTYPE.names})
    if state.model is not None:
        arrays.update(state.model.to_arrays("model"))
    settings = {"checkpoint_version": _CKPT_VERSION, "round": int(state.round),
                "history": state.history, "config": state.config}
    return save_model(path, CHECKPOINT_KIND, arrays, settings=settings)


def _examples(ckpt, which):
    """The examples ``which`` of a loaded checkpoint as EXAMPLE_DTYPE, their arrays checked."""
    cols = [ckpt.arrays.get(f"{which}/{f}") for f in EXAMPLE_DTYPE.names]
    if any(c is None or c.ndim != 1 or c.dtype.kind not in "iu" for c in cols) or len(
            {c.size for c in cols}) != 1:
        raise ValueError(f"{ckpt.path}: {which} must be 1-D integer arrays "
                         f"{', '.join(EXAMPLE_DTYPE.names)} of one length")
    out = np.empty(cols[0].size, EXAMPLE_DTYPE)
    for f, c in zip(EXAMPLE_DTYPE.names, cols, strict=True):
        info = np.iinfo(EXAMPLE_DTYPE[f])
        lo = 0 if f == "image" else info.min  # levels below 0 are upsampled ones
        if c.size and (c.min() < lo or c.max() > info.max):
            raise ValueError(f"{ckpt.path}: {which}/{f} holds values outside [{lo}, "
                             f"{info.max}]")
        out[f] = c
    return out


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint`, verified as a model file
    (:func:`cvfs.io.load_model`: checksums, layout), then its content: example arrays,
    round, history, config and the classifier's arrays.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a sealed mining checkpoint of this version, or fails a check (a
        tampered or truncated file; the message names the file and the check).
    """
    from cvfs.io import load_model
    from cvfs.keypoints.model_check import check_classifier
    from cvfs.vision import FeaturePool

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"mining checkpoint not found: {path}")
    try:
        ckpt = load_model(path, kind=CHECKPOINT_KIND)
    except ValueError as exc:
        raise ValueError(f"{exc} (not a valid mining checkpoint: delete it to restart "
                         "mining)") from exc

    def fail(msg):
        raise ValueError(f"{path}: {msg} (delete the checkpoint to restart mining)")

    s = ckpt.settings
    if s.get("checkpoint_version") != _CKPT_VERSION:
        fail(f"not a version-{_CKPT_VERSION} mining checkpoint")
    rnd, history, config = s.get("round"), s.get("history"), s.get("config")
    if not isinstance(rnd, int) or isinstance(rnd, bool) or rnd < 0:
        fail(f"round must be a non-negative int; got {rnd!r}")
    if not isinstance(history, list) or len(history) != rnd:
        fail(f"history must list one entry per completed round ({rnd})")
    if not isinstance(config, dict):
        fail("config must be a dictionary")
    model = None
    if any(n.startswith("model/") for n in ckpt.arrays):
        pool = {k: config[k] for k in ("haar_per_channel", "hog_border") if k in config}
        try:
            n_features = FeaturePool(**pool).n_features
        except (TypeError, ValueError):
            fail(f"config holds no valid feature pool ({pool!r})")
        check_classifier(ckpt.arrays, "model", "the checkpoint", n_features, fail)
        model = AdditiveModel.from_arrays(ckpt.arrays, "model")
    elif rnd > 0:
        fail(f"{rnd} completed round(s) but no classifier")
    extra = [n for n in ckpt.arrays if n.split("/")[0] not in ("positives", "negatives",
                                                                "model")]
    if extra:
        fail(f"unexpected arrays {sorted(extra)[:5]}")
    return MiningState(positives=_examples(ckpt, "positives"),
                       negatives=_examples(ckpt, "negatives"), round=rnd, model=model,
                       history=history, config=config)


def _check_examples(state, n_images, ckpt):
    """Refuse examples of a checkpoint that point outside the training images."""
    for which in ("positives", "negatives"):
        ex = getattr(state, which)
        if ex.size and (ex["image"].max() >= n_images or ex["image"].min() < 0):
            raise ValueError(
                f"checkpoint {ckpt}: {which} refer to image {int(ex['image'].max())}; the run "
                f"has {n_images} images (0..{n_images - 1}); delete it or use another "
                "checkpoint path")


def merge_hardest(candidates, scores, n, exclude=None, *, return_scores=False):
    """The ``n`` highest-scoring candidates not in ``exclude`` (and without repeats).

    Parameters
    ----------
    candidates : ndarray of EXAMPLE_DTYPE, shape (c,)
    scores : ndarray of shape (c,)
    n : int
    exclude : ndarray of EXAMPLE_DTYPE, optional
    return_scores : bool
        Also return the scores of the picked records.

    Returns
    -------
    hardest : ndarray of EXAMPLE_DTYPE, shape (<= n,)
        In decreasing order of score (ties broken by position for determinism).
    hardest_scores : ndarray of shape (<= n,)
        Only with ``return_scores``.
    """
    candidates = np.asarray(candidates, dtype=EXAMPLE_DTYPE)
    scores = np.asarray(scores, dtype=np.float64)
    if candidates.size == 0 or n <= 0:
        empty = np.zeros(0, dtype=EXAMPLE_DTYPE)
        return (empty, np.zeros(0)) if return_scores else empty
    keep = np.ones(candidates.size, dtype=bool)
    if exclude is not None and len(exclude):
        keep &= ~np.isin(candidates, np.asarray(exclude, dtype=EXAMPLE_DTYPE))
    order = np.lexsort((candidates["x"], candidates["y"], candidates["level"],
                        candidates["image"], -scores))
    order = order[keep[order]]
    _, first = np.unique(candidates[order], return_index=True)
    order = order[np.sort(first)][:n]
    return (candidates[order], scores[order]) if return_scores else candidates[order]


_CHUNK = 4096  # examples whose features are computed at a time


_MISSING = object()


def _show(value):
    return "missing" if value is _MISSING else repr(value)


def config_diff(saved, given):
    """Settings that differ between two configs (nested dicts compared key by key).

    Parameters
    ----------
    saved, given : dict
        JSON-like configs (a checkpoint's and the current run's).

    Returns
    -------
    diff : list of (str, object, object)
        ``(key, saved value, given value)`` sorted by key, nested keys dotted
        (``"data.images_sha256"``); a key one config lacks has the value ``_MISSING`` there.
    """
    out = []
    for key in sorted(set(saved) | set(given)):
        a, b = saved.get(key, _MISSING), given.get(key, _MISSING)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [(f"{key}.{k}", x, y) for k, x, y in config_diff(a, b)]
        elif a is _MISSING or b is _MISSING or a != b:
            out.append((key, a, b))
    return out


def run_mining(positives, negatives, *, features, fit, scan, n_images, n_rounds=10,
               n_hard=20000, cascade=None, checkpoint=None, config=None, verbose=False):
    """Train with hard-negative mining, resuming from ``checkpoint`` when it exists.

    Parameters
    ----------
    positives, negatives : ndarray of EXAMPLE_DTYPE
        Initial examples (the negatives are usually random, :func:`random_negatives`).
    features : callable
        ``features(examples) -> X`` of shape (n, n_pool_features) for records of
        EXAMPLE_DTYPE (called on all examples in the first round of a run, then on the newly
        added negatives only, in chunks of at most 4,096 examples).
    fit : callable
        ``fit(X, y) -> AdditiveModel`` with y in {0, 1}.
    scan : callable
        ``scan(model, image_index) -> (candidates, scores)``: the negatives of one training
        image worth considering (e.g. its highest-scoring ones) and their scores.
    n_images : int
        Training images are numbered ``0 .. n_images - 1``.
    n_rounds : int
        Training rounds; mining happens between rounds (``n_rounds - 1`` times).
    n_hard : int
        Negatives added per mining round.
    cascade : callable, optional
        ``cascade(model, X, y) -> AdditiveModel`` applied to every fitted model before it
        scans (e.g. :func:`cvfs.keypoints.train.with_cascade`); timed apart from the fit.
    checkpoint : str or Path, optional
        Written after every round; when it exists at start, the run resumes from it.
    config : dict, optional
        JSON-serialisable settings, every one that shapes the result; a checkpoint whose
        config differs in any key, or lacks one, is refused.
    verbose : bool
        Progress bars.

    Returns
    -------
    state : MiningState
        With ``state.model`` the classifier of the last round.

    Raises
    ------
    ValueError
        If ``n_rounds`` or ``n_hard`` is not positive, there are no positives or negatives, or
        the checkpoint was made with another config (the message names each differing key with
        both values).
    """
    if not (isinstance(n_rounds, (int, np.integer)) and n_rounds >= 1):
        raise ValueError(f"n_rounds must be a positive int; got {n_rounds!r}")
    if not (isinstance(n_hard, (int, np.integer)) and n_hard >= 1):
        raise ValueError(f"n_hard must be a positive int; got {n_hard!r}")
    config = json.loads(json.dumps(config or {}, sort_keys=True))
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        state = load_checkpoint(ckpt)
        diff = config_diff(state.config, config)
        if diff:
            raise ValueError(
                f"checkpoint {ckpt} was made with other settings: "
                + "; ".join(f"{k} = {_show(a)} in the checkpoint, {_show(b)} now"
                            for k, a, b in diff)
                + "; delete it or use another checkpoint path"
            )
        _check_examples(state, n_images, ckpt)
        log.info("resuming mining from %s after round %d", ckpt, state.round)
    else:
        state = MiningState(np.asarray(positives, dtype=EXAMPLE_DTYPE),
                            np.asarray(negatives, dtype=EXAMPLE_DTYPE), config=config)
    if state.positives.size == 0 or state.negatives.size == 0:
        raise ValueError(
            f"need positives and negatives; got {state.positives.size} positives and "
            f"{state.negatives.size} negatives"
        )
    # feature rows of [positives, negatives[:n_done]] in one buffer sized for every round
    # left (filled in chunks: no concatenated copy, so the peak is about one final matrix)
    buf, n_done = None, 0
    while state.round < n_rounds:
        r = state.round
        t0 = time.perf_counter()
        todo = np.concatenate([state.positives, state.negatives])[n_done:]
        for c0 in range(0, todo.size, _CHUNK):
            rows = features(todo[c0:c0 + _CHUNK])
            if buf is None:
                cap = (state.positives.size + state.negatives.size
                       + max(0, n_rounds - 1 - r) * n_hard)
                buf = np.empty((cap, rows.shape[1]), dtype=rows.dtype)
            buf[n_done:n_done + len(rows)] = rows
            n_done += len(rows)
        X = buf[:n_done]
        y = np.r_[np.ones(state.positives.size, np.int64), np.zeros(state.negatives.size,
                                                                     np.int64)]
        t_feat = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        model = fit(X, y)
        t_fit, c_fit = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        if cascade is not None:
            model = cascade(model, X, y)
        t_casc = time.perf_counter() - t0
        added, t_scan = 0, 0.0
        if r < n_rounds - 1:
            t0 = time.perf_counter()
            cands, scores = [], []
            for i in tqdm(range(n_images), disable=not verbose, desc=f"mining round {r + 1}"):
                c, s = scan(model, i)
                if len(c):
                    best, best_s = merge_hardest(c, s, n_hard, return_scores=True)
                    cands.append(best)
                    scores.append(best_s)
            if cands:
                new = merge_hardest(np.concatenate(cands), np.concatenate(scores), n_hard,
                                    exclude=state.negatives)
                state.negatives = np.concatenate([state.negatives, new])
                added = int(new.size)
            t_scan = time.perf_counter() - t0
        state.round = r + 1
        state.model = model
        state.history.append({"round": r + 1, "n_positives": int(state.positives.size),
                              "n_negatives_trained": int(y.size - state.positives.size),
                              "n_added": added, "features_s": t_feat, "fit_s": t_fit,
                              "fit_cpu_s": c_fit, "cascade_s": t_casc,
                              "scan_s": t_scan})
        log.info("mining round %d/%d: %d negatives trained, %d added; fit %.1f s, cascade "
                 "%.1f s, scan %.1f s", r + 1, n_rounds, y.size - state.positives.size, added,
                 t_fit, t_casc, t_scan)
        if ckpt is not None:
            save_checkpoint(ckpt, state)
    return state

