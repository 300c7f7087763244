"""The training recipe of a keypoint detector: one settings object for the trainer, the CLI and
the model file.

:func:`cvfs.keypoints.train.train_detector` takes a :class:`TrainingRecipe`; ``cvfs keypoints
train`` builds one from its options and shows its defaults in ``--help``; the trained detector
stores it (``detector.info["params"]``) and every mining checkpoint records it, so a resume with
another recipe is refused. This module imports nothing heavy, so ``--help`` stays fast.
"""

from dataclasses import asdict, dataclass, fields, replace

__all__ = ["NEGATIVE_LEVELS", "TrainingRecipe", "check_method", "methods"]


def methods():
    """The learners of one keypoint classifier (:func:`cvfs.keypoints.train.fit_classifier`):
    "fsa-<loss>" for every classifier loss of :data:`cvfs.core.losses.LOSSES` (a user's loss
    added there included), and "logitboost"."""
    from cvfs.core.losses import loss_names

    return tuple(f"fsa-{name}" for name in loss_names("classifier")) + ("logitboost",)


def check_method(method):
    """``method`` if it names a learner of :func:`methods` (the loss checked by
    :func:`cvfs.core.losses.get_loss` for a classifier).

    Raises
    ------
    ValueError
        Naming the valid learners.
    """
    if method == "logitboost":
        return method
    if isinstance(method, str) and method.startswith("fsa-"):
        from cvfs.core.losses import get_loss

        try:
            get_loss(method[4:], "classifier")
        except ValueError:
            pass
        else:
            return method
    raise ValueError(f"method must be one of {list(methods())}; got {method!r}")

#: Where negatives come from: the levels where a face's IED is in ``ied_range`` ("training"),
#: or every level of the image at scale <= 1 ("all", the levels a detector scans).
NEGATIVE_LEVELS = ("training", "all")


@dataclass(frozen=True)
class TrainingRecipe:
    """Settings of :func:`cvfs.keypoints.train.train_detector`; the defaults are the shipped
    models' recipe.

    Parameters
    ----------
    method : str, default="fsa-lorenz"
        One of :func:`methods`: "fsa-<loss>" (FSA with a classifier loss of
        :data:`cvfs.core.losses.LOSSES`) or "logitboost".
    k, bins, n_iter, mu, annealing_boost, clip_quantile
        Classifier size, FSA settings and learner ranges (see
        :func:`cvfs.keypoints.train.fit_classifier`; ``annealing_boost=None`` is the loss's
        own, 10 for Lorenz). 1,000 iterations (the paper: 500): on the nose tip (300 faces)
        500 left FSA-Lorenz behind LogitBoost (AP 0.087 vs 0.099) and 1,000 put it ahead
        (``docs/methods.md``, "Face keypoints").
    haar_per_channel : int, default=20000
        Haar features per RGB channel in the pool (the paper's pool: 20,000 -> 60,864 columns).
    hog_border : {"image", "window"}, default="window"
        HOG gradients on the window border from the level or from the crop alone
        (:class:`cvfs.vision.FeaturePool`; "window" equals skimage on each crop).
    n_rounds : int, default=3
        Training rounds (mining happens between them; the paper uses 10).
    n_hard : int, default=3000
        Hard negatives added per mining round (the paper: ~20,000).
    neg_per_image : int, default=20
        Random negatives per image in the first round.
    max_positives : int or None, default=None
        Subsample the positives to at most this many.
    ied_range, pos_radius, neg_radius, scales_per_octave
        Example rules (:mod:`cvfs.keypoints.examples`).
    negative_levels : {"training", "all"}, default="training"
        Levels the random and mined negatives come from (:data:`NEGATIVE_LEVELS`).
    mirror : bool, default=False
        Add the horizontally mirrored copy of every image (left and right points swapped).
    degrade : float in [0, 1], default=0.0
        Share of the training images replaced by versions degraded like small web faces
        (:func:`cvfs.keypoints.degrade.with_degraded`).
    degrade_recipe : dict or None, default=None
        Parameter ranges of the degradation (:data:`cvfs.keypoints.degrade.DEGRADE_RECIPE`).
    scan_stride : int, default=2
        Grid step of the mining scan on each training level (1 = every window).
    cascade_miss_rate, cascade_front_load : float
        Soft cascade of every fitted classifier (:func:`cvfs.keypoints.train.with_cascade`):
        fraction of the training positives it may reject, and the exponent of its rejection
        distribution. ``cascade_miss_rate=None``: no cascade.

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``negative_levels``, or a setting out of its range.
    """

    method: str = "fsa-lorenz"
    k: int = 1500
    bins: int = 8
    n_iter: int = 1000
    mu: float = 300
    annealing_boost: float | None = None
    clip_quantile: float | None = None
    haar_per_channel: int = 20000
    hog_border: str = "window"
    n_rounds: int = 3
    n_hard: int = 3000
    neg_per_image: int = 20
    max_positives: int | None = None
    ied_range: tuple = (20.0, 40.0)
    pos_radius: float = 1.0
    neg_radius: float = 0.5
    negative_levels: str = "training"
    mirror: bool = False
    degrade: float = 0.0
    degrade_recipe: dict | None = None
    scales_per_octave: int = 4
    scan_stride: int = 2
    cascade_miss_rate: float | None = 0.001
    cascade_front_load: float = 10.0

    def __post_init__(self):
        check_method(self.method)
        if self.negative_levels not in NEGATIVE_LEVELS:
            raise ValueError(f"negative_levels must be one of {NEGATIVE_LEVELS}; got "
                             f"{self.negative_levels!r}")
        for name in ("k", "n_iter", "n_rounds", "scales_per_octave", "scan_stride"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")
        for name in ("n_hard", "neg_per_image"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0; got {value!r}")
        if not 0.0 <= self.degrade <= 1.0:
            raise ValueError(f"degrade must be in [0, 1]; got {self.degrade!r}")
        lo_hi = tuple(float(v) for v in self.ied_range)
        if len(lo_hi) != 2 or not 0 < lo_hi[0] < lo_hi[1]:
            raise ValueError(f"ied_range must be (min, max) with 0 < min < max; got "
                             f"{self.ied_range!r}")
        object.__setattr__(self, "ied_range", lo_hi)

    def replace(self, **changes):
        """A copy with ``changes`` applied (checked as a new recipe)."""
        return replace(self, **changes)

    def to_dict(self):
        """The settings as a JSON-ready dict (``ied_range`` as a list)."""
        out = asdict(self)
        out["ied_range"] = list(self.ied_range)
        return out

    @classmethod
    def defaults(cls):
        """``{name: default}`` of every setting (what ``cvfs keypoints train --help`` shows)."""
        return {f.name: f.default for f in fields(cls)}
