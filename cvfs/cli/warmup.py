"""Compiled kernels: which groups a command needs, whether their cache is cold, and warming it.

numba compiles cvfs's kernels on first use and caches them (``cvfs/__pycache__``, or
``$NUMBA_CACHE_DIR``); a first run after installing or upgrading cvfs spends minutes compiling.
The kernels fall into groups (:data:`GROUPS`), one per part of the library. A group is cold when
one of its probe kernels has no fresh entry in numba's cache: its index file is missing, or its
source stamp (with the digest of every cvfs source, :mod:`cvfs._jit`) no longer matches.
:func:`cold_groups` checks this without compiling anything; :func:`compile_group` compiles a
group by running a small workload through the same calls the commands make.
"""

import importlib
import logging
from dataclasses import dataclass

__all__ = ["COMMAND_GROUPS", "GROUPS", "KernelGroup", "cold_groups", "compile_group",
           "expected_seconds", "on_first_compile", "wait_text"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelGroup:
    """Kernels of one part of the library.

    Attributes
    ----------
    name : str
    what : str
        What they compute, for messages.
    probes : tuple of str
        ``"module:function"`` kernels that every user of the group compiles;
        ``"module:function[text]"`` asks for a compiled signature whose text holds ``text``
        (e.g. the FSA driver compiled for one loss).
    seconds : int
        CPU seconds to compile the group alone from a cold cache (:func:`expected_seconds`).
    shares : str, optional
        Groups with the same ``shares`` compile kernels in common (the FSA driver and passes):
        after the first of them, the others take only ``extra`` seconds.
    extra : int
        CPU seconds of the group once the kernels it shares are compiled.
    """

    name: str
    what: str
    probes: tuple
    seconds: int
    shares: str = ""
    extra: int = 0


_DRIVER = "cvfs.core._driver:_compiled_iterations"

#: Groups by name. CPU seconds with an empty ``NUMBA_CACHE_DIR`` on a 2-core AMD EPYC VM:
#: ``extra`` as ``cvfs warmup`` prints it (in this order); ``seconds`` for the group alone, which
#: also pays numba's own start-up (the FSA groups measured, the others scaled from wall time).
GROUPS = {g.name: g for g in (
    KernelGroup("fsa", "FSA with the logistic loss", (
        f"{_DRIVER}[Loss(cvfs.core.losses.Logistic)]", "cvfs.core._kernels:grad_pass"), 63,
        "fsa", 25),
    KernelGroup("fsa-pl", "FSA with the piecewise-linear Lorenz loss", (
        f"{_DRIVER}[Loss(cvfs.core.losses.Lorenz)]", "cvfs.core._pl_kernels:pl_grad_pass"),
        70, "fsa", 30),
    KernelGroup("fsa-rank", "FSA-Rank (pairwise ranking loss)", (
        f"{_DRIVER}[Loss(cvfs.core.losses.PairwiseRank)]",), 68, "fsa", 20),
    KernelGroup("astro", "screened SBL and PSF fits", (
        "cvfs.astro._lm:lm_fit", "cvfs.core._lasso_kernels:gram_cd_solve"), 25),
    KernelGroup("motion", "tracking checks and motion features", (
        "cvfs.motion._patch_align:residuals", "cvfs.motion._patch_align:ncc_rows",
        "cvfs.motion.features:cut_fractions", "cvfs.core._pl_kernels:pl_decision"), 30),
    KernelGroup("keypoints", "HOG, Haar and soft-cascade scans", (
        "cvfs.vision.hog:_level_kernel", "cvfs.vision.haar:_haar_kernel",
        "cvfs.keypoints._scan:_scan_kernel"), 30),
)}

#: Groups each command needs (``"demo <part>"`` for the demo's parts).
COMMAND_GROUPS = {
    "demo fsa": ("fsa",),
    "demo astro": ("astro",),
    "demo motion": ("motion",),
    "demo keypoints": ("keypoints",),
    "keypoints detect": ("keypoints",),
    "keypoints evaluate": ("keypoints",),
    "keypoints train": ("keypoints", "fsa-pl"),
    "motion segment": ("motion",),
    "motion evaluate": ("motion", "fsa-rank"),
    "astro localise": ("astro",),
    "astro denoise": ("astro",),
}


def _dispatcher(probe):
    module, name = probe.split("[")[0].split(":")
    return getattr(importlib.import_module(module), name)


def _cached(dispatcher, signature=""):
    """True when numba's cache holds a fresh compiled entry of ``dispatcher`` whose signature's
    text contains ``signature``."""
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None:  # not a cached kernel: nothing to find
        return True
    try:
        index = cache_file._load_index()  # {} when missing or stale (numba's own check)
    except Exception:  # an unreadable index is recompiled by numba: cold
        return False
    return any(signature in str(key[0]) for key in index)


def _probe_cached(probe):
    signature = probe.partition("[")[2][:-1]
    return _cached(_dispatcher(probe), signature)


def cold_groups(names):
    """The groups among ``names`` whose kernels are not all in numba's cache.

    Parameters
    ----------
    names : iterable of str
        Keys of :data:`GROUPS`.

    Returns
    -------
    cold : list of str
        In the order given, without repeats.

    Raises
    ------
    ValueError
        If a name is not a group.
    """
    cold = []
    for name in dict.fromkeys(names):
        if name not in GROUPS:
            raise ValueError(f"unknown kernel group {name!r}; known: {sorted(GROUPS)}")
        if not all(_probe_cached(p) for p in GROUPS[name].probes):
            cold.append(name)
    return cold


def expected_seconds(names):
    """CPU seconds to compile the groups ``names`` from a cold cache, kernels they share
    counted once (:attr:`KernelGroup.shares`)."""
    total, shared = 0, set()
    for g in (GROUPS[n] for n in dict.fromkeys(names)):
        total += g.extra if g.shares and g.shares in shared else g.seconds
        shared.add(g.shares)
    return total


def on_first_compile(callback):
    """Call ``callback()`` once, when numba starts compiling a kernel it did not find in its
    cache (numba's ``numba:compile`` event; loading a cached kernel does not fire it).

    Returns
    -------
    remove : callable
        Stops listening.
    """
    from numba.core import event

    class _Once(event.Listener):
        fired = False

        def on_start(self, ev):
            if not self.fired:
                self.fired = True
                callback()

        def on_end(self, ev):
            pass

    listener = _Once()
    event.register("numba:compile", listener)
    return lambda: event.unregister("numba:compile", listener)


def wait_text(seconds):
    """``"about 30 s"`` below a minute and a half, else ``"about 4 min"``."""
    if seconds < 90:
        return f"about {max(10, round(seconds, -1)):.0f} s"
    return f"about {round(seconds / 60)} min"


def _ar1(n, m, k):
    import numpy as np

    from cvfs.datasets.synthetic import make_ar1_classification

    X, y, _ = make_ar1_classification(n, m, k_true=k, random_state=0)
    return X, np.where(y > 0, 1.0, -1.0)


def _warm_fsa():
    from cvfs.core.fsa import fsa_fit
    from cvfs.core.losses import get_loss

    X, y = _ar1(200, 200, 5)
    fsa_fit(X, y, k=5, loss=get_loss("logistic"), record_path=True)  # as `cvfs demo`


def _warm_fsa_pl():
    from cvfs.estimators import FSAClassifier

    X, y = _ar1(200, 100, 5)
    FSAClassifier(k=5, loss="lorenz", bins=4, n_iter=20).fit(X, y)  # as keypoint training


def _warm_fsa_rank():
    import numpy as np

    from cvfs.estimators import FSARanker

    X, _ = _ar1(200, 50, 5)
    score = X[:, :5].sum(axis=1)
    FSARanker(k=5, bins=4, n_iter=20).fit(X, score, groups=np.arange(200) // 20)


def _warm_astro():
    from skimage import data
    from skimage.color import rgb2gray

    from cvfs import astro

    crop = rgb2gray(data.hubble_deep_field())[:64, :64]
    astro.localise_and_denoise(crop, random_state=0, verbose=False)


def _warm_motion():
    from cvfs.io.video import read_frames
    from cvfs.motion.video import segment_video

    segment_video(read_frames("synth:motions=2,frames=8,seed=0"))


def _warm_keypoints():
    import cv2
    from skimage import data

    from cvfs.keypoints import load_detector

    det = load_detector()
    img = cv2.resize(data.astronaut(), (256, 256), interpolation=cv2.INTER_AREA)
    det.detect_faces(img, max_scale=1.0)  # photos: every keypoint everywhere
    det.detect_faces(img, max_scale=1.0, top_down=True)  # video frames


_WARM = {"fsa": _warm_fsa, "fsa-pl": _warm_fsa_pl, "fsa-rank": _warm_fsa_rank,
         "astro": _warm_astro, "motion": _warm_motion, "keypoints": _warm_keypoints}


def compile_group(name):
    """Compile the kernels of group ``name`` (and cache them) by running a small workload.

    Raises
    ------
    ValueError
        If ``name`` is not a group.
    """
    if name not in GROUPS:
        raise ValueError(f"unknown kernel group {name!r}; known: {sorted(GROUPS)}")
    log.debug("compiling the %s kernels", name)
    _WARM[name]()
