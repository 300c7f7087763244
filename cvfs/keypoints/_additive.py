"""Additive models on a few pool features: the common form of every trained keypoint classifier.

score(x) = intercept + sum_j g_j(x[features[j]]), where g_j is defined on B equal bins of
[lo_j, hi_j] (s = clip((x - lo_j) * scale_j, 0, B), scale_j = B / (hi_j - lo_j)):

- ``kind="linear"`` (FSA's piecewise-linear response, paper section 2.5.1): ``table`` has B + 1
  knot values and g_j interpolates linearly between knots;
- ``kind="step"`` (LogitBoost's piecewise-constant regressors): ``table`` has B values and
  g_j(x) = table[j, min(floor(s), B - 1)].

Both FSA-PL and LogitBoost classifiers are stored as this model in the detector's model file,
so detection needs only the selected feature columns.

Soft cascade. A model may carry ``cascade_ends`` (increasing feature counts e_1 < e_2 < ... < k)
and ``cascade_thresholds`` r_t: a window whose partial score intercept + sum_{j < e_t} g_j is
below r_t is rejected without computing the remaining features (Bourdev and Brandt, "Robust
object detection via soft cascade", CVPR 2005). :meth:`AdditiveModel.soft_cascade` sets a
threshold after every feature from the training positives, so a known fraction of them is lost,
with the features reordered so that negatives are rejected early.
"""

import numpy as np

from cvfs._jit import njit

__all__ = ["AdditiveModel"]


@njit(cache=True, inline="always")
def _term(x, lo, scale, row, B, step):
    """g(x) of one learner: its bin of [lo, lo + B / scale] (clipped), then the step value or
    the linear interpolation between the bin's knots."""
    s = (x - lo) * scale
    if not s > 0.0:  # NaN -> 0, never a bin out of range
        s = 0.0
    elif s >= B:
        s = B
    b = int(s)
    if b >= B:
        b = B - 1
    if step:
        return row[b]
    a = s - b
    return row[b] * (1.0 - a) + row[b + 1] * a


@njit(cache=True)
def _contributions(X, lo, scale, table, step):
    """g_j(X[i, j]) for every row and feature (the terms :func:`_scores` adds, bitwise)."""
    n, k = X.shape
    B = table.shape[1] if step else table.shape[1] - 1
    out = np.empty((n, k))
    for i in range(n):
        for j in range(k):
            out[i, j] = _term(X[i, j], lo[j], scale[j], table[j], B, step)
    return out


@njit(cache=True)
def _scores(X, lo, scale, table, step, intercept):
    n, k = X.shape
    B = table.shape[1] if step else table.shape[1] - 1
    out = np.empty(n)
    for i in range(n):
        z = intercept
        for j in range(k):
            z += _term(X[i, j], lo[j], scale[j], table[j], B, step)
        out[i] = z
    return out


@njit(cache=True)
def _greedy_pick(pp, CpT, alive, pn, CnT, alive_n, remaining, allow, cost):
    """One greedy step of :meth:`AdditiveModel.soft_cascade`: the position in ``remaining`` of
    the feature whose threshold (the ``allow``-th smallest partial score of the alive
    positives) rejects the most alive negatives per unit cost (ties: the first), that threshold
    and the number it rejects. ``CpT``, ``CnT``: contributions transposed (feature-major)."""
    best, best_score, best_r, best_cnt = 0, -1.0, 0.0, 0
    buf = np.empty(alive.size)
    for q in range(remaining.size):
        j = remaining[q]
        cp = CpT[j]
        for a in range(alive.size):
            buf[a] = pp[alive[a]] + cp[alive[a]]
        r = np.partition(buf, allow)[allow]
        cn = CnT[j]
        cnt = 0
        for a in range(alive_n.size):
            if pn[alive_n[a]] + cn[alive_n[a]] < r:
                cnt += 1
        score = cnt / cost[j]
        if score > best_score:
            best, best_score, best_r, best_cnt = q, score, r, cnt
    return best, best_r, best_cnt


def _rejection_distribution(m, a):
    """Cumulative share of the miss budget spent after each of ``m`` thresholds: ``t / m``, or
    ``(1 - exp(-a t / m)) / (1 - exp(-a))`` for ``a > 0``; the last entry is exactly 1."""
    t = np.arange(1, m + 1) / max(m, 1)
    v = t if a == 0 else -np.expm1(-a * t) / -np.expm1(-a)
    v[-1:] = 1.0
    return v


def best_of_bags(score, bags):
    """Indices (increasing) of the highest-scoring element of each bag (ties: the first)."""
    order = np.lexsort((-score, bags))
    return np.sort(order[np.r_[True, bags[order][1:] != bags[order][:-1]]])


class AdditiveModel:
    """A trained additive classifier on selected feature-pool columns.

    Parameters
    ----------
    features : array_like of int, shape (k,)
        Feature-pool columns the model reads, in the order of ``table`` rows (FSA order or
        boosting order; a soft cascade evaluates them in this order).
    lo, scale : array_like of shape (k,)
        Bin origin and bins per unit of each feature.
    table : array_like of shape (k, B + 1) or (k, B)
        Knot values (``"linear"``) or bin values (``"step"``).
    intercept : float
    kind : {"linear", "step"}

    Raises
    ------
    ValueError
        If shapes disagree or ``kind`` is unknown.
    """

    def __init__(self, features, lo, scale, table, intercept, kind="linear", *,
                 cascade_ends=(), cascade_thresholds=()):
        if kind not in ("linear", "step"):
            raise ValueError(f"kind must be 'linear' or 'step'; got {kind!r}")
        self.features = np.asarray(features, dtype=np.int64).reshape(-1)
        self.lo = np.asarray(lo, dtype=np.float64).reshape(-1)
        self.scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        self.table = np.ascontiguousarray(table, dtype=np.float64)
        self.intercept = float(intercept)
        self.kind = kind
        k = self.features.size
        if self.lo.size != k or self.scale.size != k or self.table.ndim != 2 \
                or self.table.shape[0] != k or self.table.shape[1] < (2 if kind == "linear" else 1):
            raise ValueError(
                f"features, lo, scale must have the same length k and table shape (k, T); got "
                f"k={k}, lo {self.lo.shape}, scale {self.scale.shape}, table {self.table.shape}"
            )
        self.cascade_ends = np.asarray(cascade_ends, dtype=np.int64).reshape(-1)
        self.cascade_thresholds = np.asarray(cascade_thresholds, dtype=np.float64).reshape(-1)
        e = self.cascade_ends
        if e.size != self.cascade_thresholds.size or (e.size and (
                (np.diff(e) <= 0).any() or e[0] < 1 or e[-1] >= k)):
            raise ValueError(
                f"cascade_ends must increase within [1, k={k}) and match cascade_thresholds; got "
                f"ends {e.tolist()} and {self.cascade_thresholds.size} thresholds"
            )

    def subset(self, start, stop, with_intercept=False):
        """The model restricted to features ``start:stop`` (intercept 0 unless asked)."""
        return AdditiveModel(self.features[start:stop], self.lo[start:stop],
                             self.scale[start:stop], self.table[start:stop],
                             self.intercept if with_intercept else 0.0, self.kind)

    def influence(self):
        """Range (max - min) of each g_j over its bins, ndarray of shape (k,)."""
        return self.table.max(axis=1) - self.table.min(axis=1)

    def reordered(self, order):
        """The same function with its features evaluated in ``order`` (no cascade)."""
        order = np.asarray(order, dtype=np.int64)
        if np.sort(order).tolist() != list(range(self.n_features)):
            raise ValueError(f"order must be a permutation of range({self.n_features})")
        return AdditiveModel(self.features[order], self.lo[order], self.scale[order],
                             self.table[order], self.intercept, self.kind)

    def soft_cascade(self, X_pos, X_neg=None, *, bags=None, miss_rate=0.005, cost=None,
                     front_load=0.0):
        """A copy with a rejection threshold after every feature, in a rejection-first order.

        Thresholds (Bourdev and Brandt's rejection distribution vector): after the first t
        features, at most ``floor(miss_rate * v_t * n)`` of the ``n`` calibration positives
        have been rejected, with ``v_t = t / (k - 1)`` (uniform, ``front_load=0``) or
        ``v_t = (1 - exp(-a t / (k - 1))) / (1 - exp(-a))`` (``front_load=a > 0``: the budget
        is spent early, where a rejection saves the most features); the threshold is the
        partial score of the first positive still allowed to be lost (ties survive), so every
        other one survives.

        Order: with negatives, features are taken greedily: each step takes the remaining
        feature that, with the threshold it would get, rejects the most negatives still alive
        per unit ``cost`` (ties: the earlier feature), until every negative is rejected or a
        step's best feature rejects none (the negatives left look like positives to every
        remaining feature; searching on would cost O(k) per step for nothing); then, and
        without negatives, the remaining features keep their current order.

        Multiple-instance positives: with ``bags`` (e.g. one bag per annotated face, holding its
        positive windows of every pyramid level), only the best-scoring window of each bag is a
        calibration positive: a bag then keeps its best detection unless it is among the
        ``miss_rate`` lost (Zhang and Viola's multiple-instance pruning).

        Parameters
        ----------
        X_pos : ndarray of shape (n_pos, k)
            Selected features of the positive windows (columns in model order).
        X_neg : ndarray of shape (n_neg, k), optional
            Selected features of negative windows, used to choose the order.
        bags : array_like of int, shape (n_pos,), optional
            Bag label of each positive.
        miss_rate : float
            Fraction of the calibration positives (bags) the whole cascade may reject.
        cost : array_like of shape (k,), optional
            Relative cost of computing each feature (default: all 1).
        front_load : float, default=0.0
            Exponent ``a >= 0`` of the rejection distribution (0: uniform).

        Returns
        -------
        model : AdditiveModel
            Features reordered; ``cascade_ends = 1, ..., k - 1`` with one threshold each.

        Raises
        ------
        ValueError
            If shapes disagree, ``miss_rate`` is outside [0, 1), ``front_load`` is negative or
            there are no positives.

        References
        ----------
        Bourdev and Brandt, "Robust object detection via soft cascade", CVPR 2005. Zhang and
        Viola, "Multiple-instance pruning for learning efficient cascade detectors", NIPS 2007.
        """
        k = self.n_features
        X_pos = self._check_X(X_pos, "X_pos")
        if X_pos.shape[0] == 0:
            raise ValueError("X_pos must hold at least one positive")
        if not 0.0 <= miss_rate < 1.0:
            raise ValueError(f"miss_rate must lie in [0, 1); got {miss_rate!r}")
        if not (np.isfinite(front_load) and front_load >= 0.0):
            raise ValueError(f"front_load must be a finite float >= 0; got {front_load!r}")
        cost = np.ones(k) if cost is None else np.asarray(cost, dtype=np.float64).reshape(-1)
        if cost.size != k or not (cost > 0).all():
            raise ValueError(f"cost must hold {k} positive values; got shape {cost.shape}")
        Cp = self.contributions(X_pos)
        if bags is not None:
            bags = np.asarray(bags).reshape(-1)
            if bags.size != Cp.shape[0]:
                raise ValueError(f"bags must have one label per positive ({Cp.shape[0]}); got "
                                 f"{bags.size}")
            Cp = Cp[best_of_bags(Cp.sum(axis=1), bags)]
        Cn = np.zeros((0, k)) if X_neg is None else self.contributions(
            self._check_X(X_neg, "X_neg"))
        CpT, CnT = np.ascontiguousarray(Cp.T), np.ascontiguousarray(Cn.T)
        n = Cp.shape[0]
        pp = np.full(n, self.intercept)
        pn = np.full(Cn.shape[0], self.intercept)
        alive, alive_n = np.ones(n, dtype=bool), np.ones(Cn.shape[0], dtype=bool)
        remaining = list(range(k))
        order, thresholds = [], []
        budget = _rejection_distribution(k - 1, front_load)
        greedy = X_neg is not None
        for t in range(1, k):
            allow = int(np.floor(miss_rate * budget[t - 1] * n + 1e-9)) - int(n - alive.sum())
            if greedy and alive_n.any():
                i, r_i, n_rej = _greedy_pick(pp, CpT, np.flatnonzero(alive), pn, CnT,
                                             np.flatnonzero(alive_n), np.asarray(remaining),
                                             allow, cost)
                greedy = n_rej > 0
            else:  # the order stays: only the next feature's threshold is needed
                i = 0
                r_i = np.partition(pp[alive] + Cp[alive, remaining[0]], allow)[allow]
            j = remaining.pop(i)
            order.append(j)
            thresholds.append(float(r_i))
            pp += Cp[:, j]
            pn += Cn[:, j]
            alive &= pp >= r_i
            alive_n &= pn >= r_i
        order += remaining
        m = self.reordered(order)
        return AdditiveModel(m.features, m.lo, m.scale, m.table, m.intercept, m.kind,
                             cascade_ends=np.arange(1, k), cascade_thresholds=thresholds)

    def contributions(self, X):
        """Terms g_j(x_j) of the score, ndarray of shape (n_samples, k).

        ``intercept`` plus the row sums taken left to right is :meth:`decision_function`,
        bitwise.

        Raises
        ------
        ValueError
            If ``X`` does not have k columns.
        """
        X = self._check_X(X, "X")
        return _contributions(X, self.lo, self.scale, self.table, self.kind == "step")

    def _check_X(self, X, name):
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"{name} must have shape (n_samples, {self.n_features}); got {X.shape}"
            )
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        return np.ascontiguousarray(X)

    @property
    def n_features(self):
        """Number of selected pool features k."""
        return self.features.size

    def decision_function(self, X):
        """Scores of rows of the selected features.

        Parameters
        ----------
        X : array_like of shape (n_samples, k)
            Column j holds pool feature ``features[j]``.

        Returns
        -------
        scores : ndarray of shape (n_samples,)

        Raises
        ------
        ValueError
            If ``X`` does not have k columns.
        """
        X = self._check_X(X, "X")
        return _scores(X, self.lo, self.scale, self.table, self.kind == "step", self.intercept)

    def to_arrays(self, prefix):
        """Named arrays for :func:`cvfs.io.save_model` (``prefix/features`` etc.)."""
        return {
            f"{prefix}/features": self.features,
            f"{prefix}/lo": self.lo,
            f"{prefix}/scale": self.scale,
            f"{prefix}/table": self.table,
            f"{prefix}/intercept": np.array([self.intercept]),
            f"{prefix}/step": np.array([self.kind == "step"]),
            f"{prefix}/cascade_ends": self.cascade_ends,
            f"{prefix}/cascade_thresholds": self.cascade_thresholds,
        }

    @classmethod
    def from_arrays(cls, arrays, prefix):
        """Inverse of :meth:`to_arrays`.

        Raises
        ------
        ValueError
            If an array is missing.
        """
        names = ("features", "lo", "scale", "table", "intercept", "step")
        miss = [n for n in names if f"{prefix}/{n}" not in arrays]
        if miss:
            raise ValueError(f"model arrays lack {[f'{prefix}/{n}' for n in miss]}")
        a = {n: arrays[f"{prefix}/{n}"] for n in names}
        return cls(a["features"], a["lo"], a["scale"], a["table"], float(a["intercept"][0]),
                   "step" if bool(a["step"][0]) else "linear",
                   cascade_ends=arrays.get(f"{prefix}/cascade_ends", ()),
                   cascade_thresholds=arrays.get(f"{prefix}/cascade_thresholds", ()))
