"""Multiclass FSA: one group per feature across the C classes.

The coefficients form a matrix B of shape (M, C) on the standardised columns (centred, unit
variance, as in :mod:`cvfs.core.fsa`); row j is feature j's group. Every iteration takes one
gradient step on the mean loss + shrinkage prior s ||B||_F^2, then keeps the M_e rows of
largest Euclidean norm (paper eq. 3 schedule): a feature is kept or dropped for all classes at
once. The losses on the score matrix Z = X B + b (N, C) are in
:mod:`cvfs.core.multiclass_losses`: any margin loss becomes one through its ``multiclass()``
form (the logistic loss the softmax cross-entropy :class:`Multinomial`, the others a
one-vs-rest sum :class:`OneVsRest`); :class:`BinaryMargin` fits one score column (C = 2; the
estimators' binary fits, weighted or not, use :mod:`cvfs.core.fsa`).

The iterations are those of every FSA fit, :func:`cvfs.core._driver.fsa_iterate`, on the
layout :class:`ScoreColumns`: the groups have S score columns and share one power-iteration
vector (the curvature operator, the kept columns' weighted centred Gram matrix, is the same for
every class), and the selection is the driver's (largest group norms, ties to the lower index).
Step size (``learning_rate=None``): 1 / (c_loss lam_e / kappa + 2 s), lam_e the largest
eigenvalue of that Gram matrix, by a power iteration fused into the two matrix products of each
iteration (X_kept @ [B, v] and X_kept^T @ [R, t]); kappa the loss's ``annealing_boost`` while
features are being removed. Per-class intercepts take the step min(lr, 1 / c_loss). The kept
columns are compacted (copied) when the kept count has halved and at the final size. Dense
in-memory input only (float32 kept, the rest promoted to float64); the products run with BLAS
pinned to one thread.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from cvfs.base import check_random_state
from cvfs.core._driver import FitState, Steps, fsa_iterate
from cvfs.core.fsa import FitSpec, fit_history
from cvfs.core.multiclass_losses import (
    BinaryMargin,
    Multinomial,
    OneVsRest,
    get_multiclass_loss,
)
from cvfs.core.priors import Shrinkage, get_prior
from cvfs.core.responses import Linear, _ColumnStats
from cvfs.core.schedules import annealing_schedule, check_schedule

__all__ = ["BinaryMargin", "FSAMulticlassResult", "Multinomial", "OneVsRest",
           "fsa_multiclass_fit", "get_multiclass_loss"]

_POWER_ROWS = 256
_POWER_ITERS = 6


@dataclass
class FSAMulticlassResult:
    """What :func:`fsa_multiclass_fit` returns.

    Attributes
    ----------
    coef : ndarray of shape (k, C) (k, 1 for :class:`BinaryMargin`)
        Coefficients of the selected features on the raw feature values.
    intercept : ndarray of shape (C,) (or (1,))
    support : ndarray of shape (k,), int64
        Sorted column indices of X that were selected.
    history : dict
        ``loss`` (objective before each step), ``n_kept``, ``lr``, ``width`` (columns of the
        working matrix read), ``lam`` -- arrays of shape (n_iter,) -- and ``data_passes``,
        ``lipschitz``, ``time``.
    """

    coef: np.ndarray
    intercept: np.ndarray
    support: np.ndarray
    history: dict = field(default_factory=dict)

    def decision_function(self, X):
        """Scores, ndarray of shape (N, C)."""
        return np.asarray(X[:, self.support], dtype=np.float64) @ self.coef + self.intercept


def _column_table(X, w):
    """The linear response table (M, 3) of :class:`cvfs.core.responses.Linear` (offset 0,
    scale 1 / std, mean * scale), with weighted mean and variance if ``w`` is given."""
    stats = _ColumnStats(X.shape[1], minmax=False)
    if w is None:
        if not stats.update(X):
            bad = np.argwhere(~np.isfinite(X))
            if bad.size:
                raise ValueError(f"X contains NaN or infinity (first in row {int(bad[0, 0])}, "
                                 f"column {int(bad[0, 1])})")
            raise ValueError("X has values too large for float64 statistics: rescale X")
        return Linear().table(stats)
    if not np.isfinite(X).all():
        bad = np.argwhere(~np.isfinite(X))
        raise ValueError(f"X contains NaN or infinity (first in row {int(bad[0, 0])}, "
                         f"column {int(bad[0, 1])})")
    # weighted moments handed to the same table as the unweighted statistics (n = 1, shift =
    # the mean, s2 = the weighted variance)
    ws = w.sum()
    mean = (w @ X) / ws
    stats.n = 1
    stats.shift = mean
    stats.s1 = np.zeros(X.shape[1])
    stats.s2 = (w @ np.square(X - mean)) / ws
    # deviations from the weighted mean keep its rounding: equal values have no spread
    stats.s2[np.ptp(X[w > 0], axis=0) == 0] = 0.0
    return Linear().table(stats)


def _power_rows(w, n_rows):
    """Rows of the power-iteration start: evenly spaced in cumulative weight (rows repeated by
    integer weights give the same rows), at most ``n_rows``; duplicates kept."""
    if w is None:
        return np.unique(np.linspace(0, n_rows - 1, min(n_rows, _POWER_ROWS)).astype(np.int64))
    total = int(round(w.sum()))
    pos = np.linspace(0, max(total, 1) - 1, min(max(total, 1), _POWER_ROWS)).astype(np.int64)
    cum = np.cumsum(w)
    return np.minimum(np.searchsorted(cum, pos + 0.5), w.size - 1)


def fsa_multiclass_fit(X, codes, n_classes, k, *, loss="logistic", prior=None, n_iter=500,
                       mu=300.0, schedule=None, learning_rate=None, annealing_boost=None,
                       fit_intercept=True, sample_weight=None, random_state=None,
                       verbose=False):
    """Fit multiclass FSA: minimise mean loss + s ||B||_F^2 over B of shape (M, C) with at most
    ``k`` nonzero rows.

    Parameters
    ----------
    X : ndarray of shape (N, M)
        Features, float32 (kept) or anything else (promoted to float64). Must be finite.
    codes : ndarray of shape (N,)
        Class index of each row, integers in [0, n_classes).
    n_classes : int
        C >= 2.
    k : int
        Number of features (rows of B) to keep, capped at M.
    loss : str, MarginLoss or multiclass loss object, default="logistic"
        A margin loss (name or object) in its multiclass form (:func:`get_multiclass_loss`):
        "logistic": softmax cross-entropy (:class:`Multinomial`); any other margin loss
        ("lorenz", "svm", "squared_hinge", a user's): one-vs-rest sums of the binary loss
        (:class:`OneVsRest`); a :class:`BinaryMargin` for one score column (n_classes = 2).
    prior : :class:`~cvfs.core.priors.Shrinkage`, optional
        Default s = 1e-3.
    n_iter : int, default=500
    mu : float, default=300
        Annealing parameter of eq. (3).
    schedule : array-like of int, optional
        Custom non-increasing schedule ending at k (overrides ``mu``).
    learning_rate : float or None, default=None
        Fixed step; None for the automatic step (module docstring).
    annealing_boost : float or None, default=None
        kappa; None: the loss's ``annealing_boost``.
    fit_intercept : bool, default=True
    sample_weight : ndarray of shape (N,) or None, default=None
        Non-negative row weights; the loss is the weighted mean and the column statistics and
        curvature are weighted too (integer weights equal repeating rows).
    random_state : None, int or Generator
        Seeds the power-iteration start vector (None: a fixed seed).
    verbose : bool, default=False
        Progress bar.

    Returns
    -------
    result : FSAMulticlassResult

    Raises
    ------
    ValueError
        On an empty X, NaN/inf in X, a bad schedule, label codes out of range, bad weights, or
        a prior with a smoothness term.

    References
    ----------
    Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big
    Data Learning", TPAMI 2017: Algorithm 1 (with groups), eq. (3) schedule.
    """
    spec = FitSpec(loss=loss, prior=prior, n_iter=n_iter, mu=mu, schedule=schedule,
                   learning_rate=learning_rate, annealing_boost=annealing_boost,
                   fit_intercept=fit_intercept, sample_weight=sample_weight,
                   random_state=random_state, verbose=verbose)
    t_start = time.perf_counter()
    p = _multiclass_setup(X, codes, n_classes, k, spec)
    fp = _column_table(p.X, p.w_raw)
    S = int(p.mloss.n_scores(p.C))  # score columns: C, or 1 for a binary loss
    b = (p.mloss.init_intercept(p.codes, p.w, p.C) if fit_intercept
         else np.zeros(S)).astype(np.float64)
    hist = np.zeros((p.schedule.size, 5))
    state = _multiclass_iterations(p, fp, b, hist)
    B, b, support = state.beta, state.intercept, state.support
    if not np.all(np.isfinite(B)) or not np.all(np.isfinite(b)):
        raise ValueError("multiclass FSA diverged (non-finite coefficients): rescale X or "
                         "pass a smaller learning_rate")
    coef = state.fp[:, 1:2] * B
    intercept = b - state.fp[:, 2] @ B
    history = fit_history(hist, p.X.shape[1], float(p.mloss.curvature * state.lam), t_start)
    return FSAMulticlassResult(coef=coef, intercept=intercept, support=support.copy(),
                               history=history)


@dataclass
class _MulticlassProblem:
    """The checked inputs of a multiclass FSA fit (:func:`_multiclass_setup`)."""

    X: np.ndarray
    codes: np.ndarray
    C: int
    mloss: object
    prior: object
    boost: float
    schedule: np.ndarray
    w_raw: np.ndarray | None  # the sample weights as given
    w: np.ndarray  # the row weights of the mean loss (summing to 1)
    spec: FitSpec


def _multiclass_setup(X, codes, n_classes, k, spec):
    """Checks and defaults of :func:`fsa_multiclass_fit` (``spec``: its keyword arguments)."""
    mloss = get_multiclass_loss(spec.loss)
    prior = Shrinkage() if spec.prior is None else get_prior(spec.prior)
    if prior.smoothness:
        raise ValueError("multiclass FSA has linear responses only: the prior's smoothness "
                         f"must be 0, got {prior.smoothness!r}")
    boost = float(mloss.annealing_boost if spec.annealing_boost is None
                  else spec.annealing_boost)
    if not (np.isfinite(boost) and boost > 0):
        raise ValueError("annealing_boost must be a positive number, got "
                         f"{spec.annealing_boost!r}")
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be 2-D with at least one row and one column, got shape "
                         f"{X.shape}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = np.ascontiguousarray(X)
    N, M = X.shape
    C = int(n_classes)
    if C < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes!r}")
    codes = np.asarray(codes)
    if codes.shape != (N,) or codes.size and (codes.min() < 0 or codes.max() >= C):
        raise ValueError(f"codes must be of shape ({N},) with values in [0, {C}), got shape "
                         f"{codes.shape}")
    codes = codes.astype(np.int64)
    w_raw = None
    if spec.sample_weight is not None:
        w_raw = np.asarray(spec.sample_weight, dtype=np.float64)
        if w_raw.shape != (N,) or not np.all(np.isfinite(w_raw)) or np.any(w_raw < 0) \
                or w_raw.sum() <= 0:
            raise ValueError(f"sample_weight must be finite, >= 0, of shape ({N},) and not all "
                             "zero")
    k = min(int(k), M)
    schedule = (annealing_schedule(M, k, spec.n_iter, spec.mu) if spec.schedule is None
                else check_schedule(spec.schedule, M, k))
    w = np.full(N, 1.0 / N) if w_raw is None else w_raw / w_raw.sum()
    return _MulticlassProblem(X, codes, C, mloss, prior, boost, schedule, w_raw, w, spec)


def _multiclass_start(p, fp):
    """Start vector (M, 1) and curvature floor: power iterations on a subsample of rows."""
    rng = check_random_state(0 if p.spec.random_state is None else p.spec.random_state)
    v = rng.standard_normal(p.X.shape[1])
    v /= np.linalg.norm(v)
    sub = _power_rows(p.w_raw, p.X.shape[0])
    Xs = p.X[sub].astype(np.float64) * fp[:, 1] - fp[:, 2]  # centred with the full-data means
    lam0 = 0.0
    for _ in range(_POWER_ITERS):
        hv = Xs.T @ (Xs @ v) / sub.size
        nh = np.linalg.norm(hv)
        if nh == 0.0:
            break
        lam0, v = nh, hv / nh
    return np.ascontiguousarray(v[:, None]), lam0


class ScoreColumns:
    """The multiclass layout of :func:`cvfs.core._driver.fsa_iterate`: the dense X in memory,
    S score columns per feature group (``beta`` of shape (m, S), the intercept of shape (S,))
    and one power-iteration vector of shape (m, 1) shared by the classes (the curvature
    operator, the weighted centred Gram matrix, is the same for every class). Each pass is two
    matrix products, X_kept @ [B, v] and X_kept^T @ [R, t]; the kept columns are copied when
    their count has halved and at the final size ``k``."""

    stop_tracking = True

    def __init__(self, p, S):
        self.X, self.codes, self.w, self.mloss = p.X, p.codes, p.w, p.mloss
        self.k = int(p.schedule[-1])
        self.Xw = p.X  # the working matrix: X, then the kept columns
        self.W = np.zeros((p.X.shape[1], S + 1), dtype=p.X.dtype)

    def fits(self, state):
        return False  # X is in memory already

    def begin(self, state, e):
        return state

    def end(self, e):
        pass

    def gradient(self, loss, model, track):
        """(mean loss, g (m, S), d loss / d intercept (S,), H v (m, 1), columns read): the
        scores and the power-iteration column in one product, then the gradient sums."""
        cols, fp, _, B, v, intercept = model
        S = B.shape[1]
        scale, mscale = np.ascontiguousarray(fp[:, 1]), np.ascontiguousarray(fp[:, 2])
        W = self.W
        W[:] = 0.0
        W[cols, :S] = scale[:, None] * B
        W[cols, S] = scale * v[:, 0] if track else 0.0
        A = (self.Xw @ W).astype(np.float64, copy=False)
        Z = A[:, :S] - mscale @ B + intercept
        value, R = self.mloss.value_gradient(Z, self.codes, self.w)
        Rfull = np.empty((self.X.shape[0], S + 1), dtype=self.Xw.dtype)
        Rfull[:, :S] = R
        Rfull[:, S] = self.w * (A[:, S] - mscale @ v[:, 0]) if track else 0.0
        raw = (self.Xw.T @ Rfull).astype(np.float64, copy=False)[cols]
        tot = Rfull.sum(axis=0, dtype=np.float64)
        G = scale[:, None] * raw - mscale[:, None] * tot
        return (value, np.ascontiguousarray(G[:, :S]), R.sum(axis=0),
                np.ascontiguousarray(G[:, S:]), self.Xw.shape[1])

    def dropped(self, state, e):
        """Copy the kept columns when their count has halved or is final."""
        width = self.Xw.shape[1]
        if not (2 * state.cols.size <= width or state.cols.size == self.k):
            return state
        self.Xw = np.ascontiguousarray(self.Xw[:, state.cols])
        self.W = np.zeros((self.Xw.shape[1], self.W.shape[1]), dtype=self.Xw.dtype)
        return state._replace(cols=np.arange(state.cols.size, dtype=np.int64))


def _multiclass_iterations(p, fp, b, hist):
    """The iterations: :func:`cvfs.core._driver.fsa_iterate` on :class:`ScoreColumns` from B =
    0 and the intercepts ``b`` (BLAS pinned to one thread). Returns the final state."""
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    M, S = p.X.shape[1], b.size
    spec = p.spec
    steps = Steps(p.schedule, 0, float(p.mloss.curvature), spec.lr_fixed, p.boost,
                  bool(spec.fit_intercept))
    bar = tqdm(total=p.schedule.size, desc="FSA multiclass", leave=False) if spec.verbose \
        else None
    with threadpool_limits(limits=1):
        v, lam0 = _multiclass_start(p, fp)
        state = FitState(np.arange(M, dtype=np.int64), fp, np.zeros((M, S)), v,
                         np.arange(M, dtype=np.int64), b, lam0)
        try:
            state, _ = fsa_iterate(ScoreColumns(p, S), p.mloss, p.prior, steps, state,
                                   (np.zeros((0, S)), (0.0, 0.0)), (hist, np.zeros((0, 0))),
                                   None, bar)
        finally:
            if bar is not None:
                bar.close()
    return state
