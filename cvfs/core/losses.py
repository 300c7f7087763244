"""Losses on scores z = f(x): each one class holding its numba-compiled value and derivative.

Classification losses are functions of the margin u = y z with y in {-1, +1}; the FSA paper's
eqs. (6)-(8). The squared loss is 1/2 (z - y)^2 (eq. 4 up to the factor 1/2). The pairwise ranking
loss (eq. 9) works on pairs (i, j) with target r_ij in {0, 1/2, 1} (1: i ranks above j):
ln(1 + exp(d)) - r_ij d with d = z_i - z_j, minimised where sigmoid(d) = r_ij, so that a higher
score means better (the paper's r is 1 - ours; its scores rank "worse" higher).

A loss is a :class:`~cvfs.core._loss_kernels.Loss` subclass (of :class:`MarginLoss` for
classification): ``value_grad(z, y, param)`` (and
optionally a vectorised ``rows(z, y, d, param)``) compiled by numba, which the FSA kernels
receive with the loss object itself; ``curvature``, an upper bound of its second derivative
with respect to the score, from which the solver derives a stable step size; and
``annealing_boost``, the factor by which the solver lengthens that step while features are
still being removed (see :mod:`cvfs.core.fsa`); and its capabilities, from which every estimator
and solver reads what the loss can do: ``margin`` (a classification loss of y z: binary FSA, a
one-vs-rest multiclass fit through :meth:`MarginLoss.multiclass`, FGM through
:meth:`MarginLoss.margin_sum` / :meth:`MarginLoss.margin_dual`), ``probabilistic`` (scores are
log-odds, ``proba`` gives probabilities: the estimators' ``predict_proba``) and ``pairwise``
(ranking). :func:`get_loss` turns a name of :data:`LOSSES` or a loss object into a loss checked
for the estimator's role. A user-defined loss is one such class (``docs/losses.md``);
``tests/naive.py`` holds NumPy twins of the built-in ones.
"""

import math

import numpy as np
from scipy.special import expit

from cvfs._jit import njit
from cvfs.core._loss_kernels import Loss, _exp_neg_abs, rank_pairs

__all__ = [
    "LOSSES",
    "ROLES",
    "HuberSVM",
    "Logistic",
    "Loss",
    "Lorenz",
    "MarginLoss",
    "PairwiseRank",
    "Squared",
    "SquaredHinge",
    "get_loss",
    "is_probabilistic",
    "loss_names",
]

ROLES = ("classifier", "regressor", "ranker")


class MarginLoss(Loss):
    """Base class of the classification losses phi(u) of the margin u = y z, y in {-1, +1}.

    A subclass sets ``value_grad`` (and the attributes of :class:`Loss`) as any loss; from
    being a margin loss it gets the rest of what the classifiers use: :meth:`multiclass` (the
    one-vs-rest sum over classes with a shared support), and :meth:`margin_sum` /
    :meth:`margin_dual` (FGM's objective and dual variables). A probabilistic subclass sets
    ``probabilistic = True`` and gives :meth:`proba`.
    """

    margin = True

    def multiclass(self):
        """One-vs-rest: the sum over classes of this loss
        (:class:`cvfs.core.multiclass_losses.OneVsRest`)."""
        from cvfs.core.multiclass_losses import OneVsRest

        return OneVsRest(self)

    def margin_sum(self, m):
        """sum_i phi(m_i) over the margins ``m`` (N,), a float."""
        return float(np.sum(self.value(m, 1.0)))

    def margin_dual(self, m):
        """-phi'(m_i) >= 0, ndarray of shape (N,) (FGM's dual variables per unit of C)."""
        return -self.gradient(m, 1.0)


@njit(cache=True)
def _squared(z, y, param):
    d = z - y
    return 0.5 * d * d, d


class Squared(Loss):
    """Squared error 1/2 (z - y)^2 for regression (paper eq. 4).

    Curvature 1; annealing boost 1 (the convex quadratic needs no boost, and a longer step
    diverges on correlated designs).
    """

    name = "squared"
    curvature = 1.0
    annealing_boost = 1.0
    value_grad = staticmethod(_squared)

    def init_intercept(self, y, sample_weight=None):
        """The minimiser of the (weighted) mean loss over constant scores."""
        if sample_weight is None:
            return float(np.mean(y))
        return float(np.average(y, weights=sample_weight))


@njit(cache=True)
def _logistic(z, y, param):
    u = y * z
    if u > 0:
        e = math.exp(-u)
        return math.log1p(e), -y * e / (1.0 + e)
    e = math.exp(u)
    return -u + math.log1p(e), -y / (1.0 + e)


@njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _logistic_rows(z, y, d, param):
    """The logistic rows, branch-free so that their loops vectorise (numpy's error model:
    Python's zero-division check on 1 / (1 + e) would keep the division loop scalar; 1 + e >= 1).

    One exp per row (e_i = exp(-|u_i|) by :func:`cvfs.core._loss_kernels._exp_neg_abs`):
    sum_i log1p(e_i) is accumulated as the log of the running product of (1 + e_i) in (1, 2],
    taken every 512 rows (relative error of the sum ~1e-13; derivatives to ~1e-14)."""
    n = z.size
    total = 0.0
    u = np.empty(n)
    for i in range(n):
        u[i] = y[i] * z[i]
        total += max(-u[i], 0.0)
    _exp_neg_abs(u, d)  # e_i = exp(-|u_i|) (separate arrays: in place would not vectorise)
    # sum_i log1p(e_i) as the log of products of (1 + e_i) in (1, 2], eight running products
    # per chunk of 512 rows (one vector register; a single running product is a serial chain)
    p = np.empty(8)
    for c0 in range(0, n, 512):
        c1 = min(n, c0 + 512)
        p[:] = 1.0
        i = c0
        while i + 8 <= c1:
            for k in range(8):
                p[k] *= 1.0 + d[i + k]
            i += 8
        prod = 1.0
        for k in range(8):
            prod *= p[k]
        while i < c1:
            prod *= 1.0 + d[i]
            i += 1
        total += math.log(prod)
    for i in range(n):
        e = d[i]
        d[i] = -y[i] * (e if u[i] > 0.0 else 1.0) / (1.0 + e)
    return total


class Logistic(MarginLoss):
    """Logistic loss ln(1 + exp(-u)), u = y z (paper eq. 6). Curvature 1/4. Probabilistic:
    scores are log-odds; for more than two classes, the softmax cross-entropy."""

    name = "logistic"
    curvature = 0.25
    annealing_boost = 4.0
    probabilistic = True
    value_grad = staticmethod(_logistic)
    rows = staticmethod(_logistic_rows)

    def init_intercept(self, y, sample_weight=None):
        """The log-odds of the (weighted) positive frequency."""
        pos = y > 0
        p = np.clip(np.mean(pos) if sample_weight is None
                    else np.average(pos, weights=sample_weight), 1e-6, 1 - 1e-6)
        return float(np.log(p / (1 - p)))

    def init_intercepts(self, Y, w):
        """The log-odds of each column's weighted positive frequency."""
        p = np.clip((w @ (Y > 0)) / w.sum(), 1e-6, 1 - 1e-6)
        return np.log(p / (1 - p))

    def proba(self, z):
        """sigmoid(z), the probability of the positive class."""
        return expit(z)

    def multiclass(self):
        """The softmax cross-entropy (:class:`cvfs.core.multiclass_losses.Multinomial`)."""
        from cvfs.core.multiclass_losses import Multinomial

        return Multinomial()

    def margin_sum(self, m):
        """sum_i ln(1 + exp(-m_i)) (numpy's ``logaddexp``)."""
        return float(np.sum(np.logaddexp(0.0, -m)))

    def margin_dual(self, m):
        """sigmoid(-m)."""
        return expit(-m)


@njit(cache=True)
def _lorenz(z, y, param):
    u = y * z
    if u >= 1.0:
        return 0.0, 0.0
    t = u - 1.0
    return math.log1p(t * t), y * 2.0 * t / (1.0 + t * t)


@njit(cache=True)
def _lorenz_rows(z, y, d, param):
    """The Lorenz rows: sum_i log1p(t_i^2) as the log of the running product of (1 + t_i^2),
    flushed to a log before it could overflow (relative error ~1e-13)."""
    total = 0.0
    prod = 1.0
    for i in range(z.size):
        u = y[i] * z[i]
        if u >= 1.0:
            d[i] = 0.0
            continue
        t = u - 1.0
        q = 1.0 + t * t
        d[i] = y[i] * 2.0 * t / q
        prod *= q
        if prod > 1e250:
            total += math.log(prod)
            prod = 1.0
    return total + math.log(prod)


class Lorenz(MarginLoss):
    """Lorenz loss: 0 if u > 1, ln(1 + (u - 1)^2) otherwise (paper eq. 8); robust to label
    noise, non-convex. Its second derivative is at most 2."""

    name = "lorenz"
    curvature = 2.0
    annealing_boost = 10.0
    value_grad = staticmethod(_lorenz)
    rows = staticmethod(_lorenz_rows)


@njit(cache=True)
def _huber_svm(z, y, h):
    u = y * z
    if u > 1.0 + h:
        return 0.0, 0.0
    if u < 1.0 - h:
        return 1.0 - u, -y
    q = 1.0 + h - u
    return q * q / (4.0 * h), -y * q / (2.0 * h)


class HuberSVM(MarginLoss):
    """Huberised hinge (paper eq. 7) with parameter ``h``: 0 if u > 1 + h,
    (1 + h - u)^2 / (4h) if |1 - u| <= h, 1 - u if u < 1 - h. Curvature 1 / (2h).

    Parameters
    ----------
    h : float, default=0.5
        Half-width of the quadratic zone, > 0.
    """

    name = "svm"
    annealing_boost = 10.0
    value_grad = staticmethod(_huber_svm)

    def __init__(self, h=0.5):
        if not h > 0:
            raise ValueError(f"HuberSVM h must be > 0, got {h!r}")
        self.h = float(h)

    @property
    def param(self):
        return self.h

    @property
    def curvature(self):
        return 1.0 / (2.0 * self.h)


@njit(cache=True)
def _squared_hinge(z, y, param):
    u = y * z
    if u >= 1.0:
        return 0.0, 0.0
    t = 1.0 - u
    return 0.5 * t * t, -y * t


class SquaredHinge(MarginLoss):
    """Squared hinge 1/2 max(0, 1 - u)^2, u = y z: FGM's default loss, and an FSA loss.
    Curvature 1; annealing boost 1."""

    name = "squared_hinge"
    curvature = 1.0
    annealing_boost = 1.0
    value_grad = staticmethod(_squared_hinge)

    def margin_sum(self, m):
        """1/2 sum_i max(0, 1 - m_i)^2."""
        xi = np.maximum(0.0, 1.0 - m)
        return 0.5 * float(xi @ xi)

    def margin_dual(self, m):
        """max(0, 1 - m)."""
        return np.maximum(0.0, 1.0 - m)


class PairwiseRank(Loss):
    """Pairwise ranking loss (paper eq. 9), averaged over pairs.

    For a pair (i, j) with target r_ij = 1 if i should rank above j, 1/2 if tied, 0 if below,
    and d = z_i - z_j, the loss is ln(1 + exp(d)) - r_ij d, whose minimiser satisfies
    sigmoid(d) = r_ij: a higher score means better.
    Pair gradients are scattered back onto the samples (the kernels' ``rank_pairs``).
    Curvature: 1/4 per pair.
    """

    name = "rank"
    curvature = 0.25
    annealing_boost = 1.0
    pairwise = True
    value_grad = staticmethod(_squared)  # not used: the kernels take the pairs

    @staticmethod
    def _pairs(z, pairs):
        from cvfs.core.fsa import ranking_arrays

        return ranking_arrays(pairs, True)

    def _evaluate_pairs(self, z, pairs):
        z = np.ascontiguousarray(z, dtype=np.float64)
        r = np.empty(z.size)
        w = np.empty(z.size)
        value = rank_pairs(z, z, *self._pairs(z, pairs), r, w, False)
        return value, r

    def value(self, z, pairs):
        """Weighted mean pair loss; ``pairs`` = (i, j, r) or (i, j, r, weight) arrays."""
        return self._evaluate_pairs(z, pairs)[0]

    def gradient(self, z, pairs):
        """d loss / dz, ndarray of shape (n_samples,)."""
        return self._evaluate_pairs(z, pairs)[1]


LOSSES = {
    "squared": Squared,
    "logistic": Logistic,
    "lorenz": Lorenz,
    "svm": HuberSVM,
    "squared_hinge": SquaredHinge,
    "rank": PairwiseRank,
}
"""The losses by name: the names the estimators, FGM and keypoint training accept. A user loss
added here (``LOSSES["poisson"] = Poisson``) becomes a name too."""


def loss_names(role=None):
    """The names of :data:`LOSSES` (whose default objects serve ``role``), sorted."""
    return sorted(n for n, cls in LOSSES.items() if role is None or cls().role == role)


def get_loss(loss, role=None):
    """A loss object from a name in :data:`LOSSES` or a :class:`Loss` instance, checked for
    ``role``.

    Parameters
    ----------
    loss : str or Loss
    role : {"classifier", "regressor", "ranker"} or None
        The estimator the loss serves: a classifier needs a margin loss, a ranker a pairwise
        loss, a regressor neither. None: any loss.

    Raises
    ------
    ValueError
        If the name is unknown or the loss does not serve ``role``.
    TypeError
        If ``loss`` is neither a name nor a :class:`Loss`.
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {list(ROLES)}, got {role!r}")
    if isinstance(loss, str):
        names = loss_names(role)
        if loss not in names:
            raise ValueError(f"loss must be one of {names}, got {loss!r}")
        return LOSSES[loss]()
    if not isinstance(loss, Loss):
        raise TypeError(f"loss must be a name or a cvfs.core.losses.Loss object, got {loss!r}")
    if role is not None and loss.role != role:
        need = {"classifier": "a margin loss (MarginLoss)", "ranker": "a pairwise loss",
                "regressor": "a loss that is neither margin nor pairwise"}[role]
        raise ValueError(f"a {role} needs {need}, got the {loss.role} loss {loss.name!r}")
    return loss


def is_probabilistic(loss, role="classifier"):
    """True if ``loss`` (a name or a loss object) is a valid probabilistic loss for ``role``
    (the condition of the estimators' ``predict_proba``); False for any invalid ``loss``."""
    try:
        return bool(get_loss(loss, role).probabilistic)
    except (ValueError, TypeError):
        return False
