"""The FSA solver: Feature Selection with Annealing (Barbu et al., TPAMI 2017, Algorithm 1).

``beta = 0``; for e = 1..N_iter: one gradient step on the mean loss + prior, then keep the M_e
feature groups of largest norm (eq. 3 schedule) and drop the others from the data. The
intercept is never selected. Three layers (stumpy style): :func:`fsa_fit` (light checks and
orchestration, this module), the numba kernels in :mod:`cvfs.core._kernels` (row passes,
gradient, update), :mod:`cvfs.core._stats_kernels` (statistics pass),
:mod:`cvfs.core._compact_kernels` (compaction) and :mod:`cvfs.core._pl_kernels`, and their NumPy
twins in ``tests/naive.py``.

- Working set: the centred basis of the kept columns (linear columns also scaled to unit
  variance). Every iteration is one fused pass over the kept columns (ranking: two); the kept
  columns are compacted when the kept count halves or the zero-weight reads since the last
  compaction have cost as much as a copy (ski rental). Small working sets
  (``_compact_kernels.SMALL_WIDTH``, ``CACHED_WIDTH``/``CACHED_BYTES``) and piecewise-linear
  features after the first drop are stored feature-major. The first iteration's gradient comes
  from the statistics pass. ``history["width"]`` records the columns each iteration read.
- Step size (``learning_rate=None``): eta_e = 1 / (c_loss * lam_e / kappa + L_prior), lam_e the
  largest eigenvalue of the kept columns' centred Gram matrix by a power iteration fused into
  the gradient pass; kappa is the loss's ``annealing_boost`` while features are still removed,
  1 once the kept set has its final size. ``history["lr"]`` records the step used.
- Data layouts: X is read only through its layout (:mod:`cvfs.core.layouts`, chosen by
  :func:`cvfs.core.layouts.layout_for`): an in-memory array as it is (C-contiguous
  float32/float64; the first compaction copies the kept columns, peak ~1.5x the size of X), an
  ``np.memmap`` / ``h5py.Dataset`` in row blocks until the kept columns fit in ``max_memory``, a
  scipy.sparse matrix by its stored entries, a ``dask.array.Array`` by map-reduce over its row
  chunks. One pipeline (:func:`fit`) runs every layout: statistics pass, power-iteration
  start, iterations (:func:`cvfs.core._driver.fsa_iterate`), result.

The rationale of each choice (why the step size, the boost values, the compaction rule and the
layouts) is in ``docs/methods.md``, section "FSA solver"; ``benchmarks/fsa/synthetic_tables.py``,
``benchmarks/scale/scaling.py`` and ``benchmarks/fsa/pl_kernels.py`` measure it.
"""

import logging
import math
import time
from dataclasses import dataclass, field, fields, replace

import numpy as np

from cvfs.base import check_random_state
from cvfs.core import _kernels as K
from cvfs.core._driver import FitState, Steps, fsa_iterate
from cvfs.core.layouts import FirstPass, FitData, layout_for
from cvfs.core.layouts.base import physical_memory as _physical_memory
from cvfs.core.layouts.memmap import RowBlocks, is_out_of_core
from cvfs.core.layouts.sparse import SparseLayout
from cvfs.core.losses import get_loss
from cvfs.core.priors import Shrinkage, get_prior
from cvfs.core.responses import get_response
from cvfs.core.schedules import annealing_schedule, check_schedule

__all__ = ["FSAResult", "FitSpec", "RowBlocks", "check_sample_weight", "fit", "fit_spec",
           "fsa_fit", "fsa_fit_sparse", "is_out_of_core", "pair_degree", "power_rows"]

log = logging.getLogger(__name__)

_BLOCK_BYTES = 64 << 20
_POWER_ROWS = 256
_POWER_ITERS = 6


@dataclass
class FSAResult:
    """What :func:`fsa_fit` returns.

    Attributes
    ----------
    coef : ndarray of shape (k, G)
        Coefficients of the selected features on the *uncentred* basis: linear responses act on
        the raw feature value (G = 1); piecewise-linear ones hold the response at the B + 1 knots.
    intercept : float
    support : ndarray of shape (k,), int64
        Sorted column indices of X that were selected.
    table : ndarray of shape (k, 2 + G)
        Response table of the selected features (offset, scale, basis means).
    bins : int
        0 for linear responses, else B.
    history : dict
        ``loss`` (objective before each step), ``n_kept`` (after each step), ``lr`` (step size),
        ``width`` (columns read: the working matrix's width for linear responses, M while X
        is read in row blocks, else the kept count), ``lam`` (curvature
        estimate the step used) -- arrays of shape
        (n_iter,) -- and ``data_passes`` (sum of width / M), ``stat_passes``,
        ``out_of_core_iterations`` (iterations that read X in row blocks), ``lipschitz`` (final
        curvature estimate), ``time`` (seconds).
    path : ndarray of shape (n_iter, M) or None
        Coefficient (G = 1) or group norm per iteration and original feature, if recorded.
    """

    coef: np.ndarray
    intercept: float
    support: np.ndarray
    table: np.ndarray
    bins: int
    history: dict = field(default_factory=dict)
    path: np.ndarray | None = None

    def decision_function(self, X):
        """Scores of the rows of X, ndarray of shape (N,)."""
        return decision_function(X, self.support, self.table, self.bins, self.coef,
                                 self.intercept)


def decision_function(X, support, table, bins, coef, intercept):
    """Scores intercept + sum_j f_j(x_j) for a model on columns ``support`` of X (read through
    X's layout: a sparse X only at the columns ``support``)."""
    return layout_for(X).decision_function(X, support, table, bins, coef, intercept)


def check_sample_weight(sample_weight, N):
    """``sample_weight`` as a C-contiguous float64 array of shape (N,), or None.

    Raises
    ------
    ValueError
        If the weights have the wrong shape, are NaN or infinite, negative, or all zero.
    """
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight)
    if w.ndim != 1 or w.shape[0] != N:
        raise ValueError(f"sample_weight must be 1-D with X.shape[0]={N} entries, got shape "
                         f"{w.shape}")
    try:
        w = np.ascontiguousarray(w, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("sample_weight must be numeric") from exc
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or infinity")
    if (w < 0).any():
        raise ValueError(f"sample_weight must be >= 0, got {float(w.min())} at index "
                         f"{int(np.argmin(w))}")
    if not w.sum() > 0:
        raise ValueError("sample_weight sums to zero: at least one row needs a positive weight")
    return w


def pair_degree(pi, pj, pw, N, sw=None):
    """Weighted degree of each row in the ranking pairs; with sample weights, per copy of the
    row (divided by w_i: a pair's weight carries w_i w_j), the degree in the repeated rows."""
    degree = np.bincount(np.concatenate([pi, pj]), np.concatenate([pw, pw]), minlength=N)
    if sw is not None:
        degree = degree / np.where(sw > 0, sw, 1.0)
    return degree


def power_rows(N, M, itemsize, block_bytes, sw=None):
    """Sorted rows of the power-iteration start: evenly spaced, at most ``_POWER_ROWS`` and one
    block. With sample weights, evenly spaced in cumulative weight with duplicates kept, so
    that rows repeated by integer weights give the same rows."""
    if sw is not None:  # n "rows" of weight W / n each: the rows repeated for integer weights
        W = float(sw.sum())
        n = max(int(round(W)), int(np.count_nonzero(sw)))
    else:
        n = N
    n_sub = min(n, _POWER_ROWS, max(8, block_bytes // (M * itemsize)))
    pos = np.unique(np.linspace(0, n - 1, n_sub).astype(np.int64))
    if sw is None:
        return pos
    return np.minimum(np.searchsorted(np.cumsum(sw) * (n / W), pos + 0.5), N - 1)


def ranking_arrays(pairs, is_rank, sw=None):
    """The ranking pairs as contiguous arrays (i, j, r, weights summing to 1); empty arrays for
    a loss that is not the ranking loss. Sample weights ``sw`` weight pair (i, j) by
    sw_i sw_j (as repeating rows by integer weights repeats their pairs)."""
    if not is_rank:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    if pairs is None or len(pairs[0]) == 0:
        raise ValueError("the ranking loss needs at least one pair (i, j, r)")
    pi, pj, pr = (np.ascontiguousarray(pairs[0], np.int64),
                  np.ascontiguousarray(pairs[1], np.int64),
                  np.ascontiguousarray(pairs[2], np.float64))
    pw = (np.full(pi.size, 1.0 / pi.size) if len(pairs) < 4
          else np.asarray(pairs[3], np.float64) / np.sum(pairs[3]))
    if sw is not None:
        pw = pw * sw[pi] * sw[pj]
        if not pw.sum() > 0:
            raise ValueError("sample_weight gives every ranking pair weight zero")
        pw /= pw.sum()
    return pi, pj, pr, pw


def fsa_fit(X, y, k, spec=None, **settings):
    """Fit FSA: minimise mean loss + prior subject to at most ``k`` selected feature groups.

    The settings come as one :class:`FitSpec` (``spec``), as keyword arguments (the fields of
    :class:`FitSpec`, documented below), or both: keywords replace the fields of ``spec``.

    Parameters
    ----------
    X : ndarray, np.memmap, h5py.Dataset, scipy.sparse matrix or dask.array.Array of shape (N, M)
        Features, float32 (kept) or anything else (promoted to float64). Must be finite.
        Read through its layout (:mod:`cvfs.core.layouts`): a sparse X (CSR/CSC) is never
        densified whole.
    y : ndarray or dask.array.Array of shape (N,)
        Targets: real for the squared loss, +-1 for margin losses, ignored for ranking.
    k : int
        Number of feature groups to keep (capped at M).
    spec : FitSpec, optional
        The settings below in one object (default: ``FitSpec()``).
    loss : str or loss object, default="logistic"
        See :mod:`cvfs.core.losses`.
    bins : int or None, default=None
        None for linear responses, else B bins of piecewise-linear responses.
    prior : prior object, optional
        :class:`~cvfs.core.priors.Shrinkage` (default, s = 1e-3) or
        :class:`~cvfs.core.priors.SecondOrder`.
    n_iter : int, default=500
    mu : float, default=300
        Annealing parameter of eq. (3).
    schedule : array-like of int, optional
        Custom non-increasing schedule M_1..M_{n_iter} ending at k (overrides ``mu``).
    learning_rate : float or None, default=None
        Fixed step eta; None for the automatic step (module docstring).
    annealing_boost : float or None, default=None
        kappa of the automatic step while features are being removed (module docstring);
        None: the loss's ``annealing_boost``; 1: the plain 1/L step throughout.
    fit_intercept : bool, default=True
        Ignored for ranking (no intercept).
    pairs : tuple (i, j, r) or (i, j, r, weight) of arrays, optional
        Ranking pairs (required for ``loss="rank"``), r = 1 if i ranks above j, 1/2 tie, 0 below;
        the loss is the weighted mean over pairs (default: equal weights).
    sample_weight : array-like of shape (N,) or None, default=None
        Non-negative row weights w_i (paper eq. 5): the loss is sum_i w_i loss_i / sum_i w_i,
        and the column statistics and the curvature estimate are weighted too, so integer
        weights fit as rows repeated that many times. Ranking: pair (i, j) is weighted by
        w_i w_j. Not for a Dask X (NotImplementedError).
    max_memory : int, optional
        Bytes the working matrices of the kept columns may occupy when X is read out of core
        (default: a quarter of physical memory); see "Data that does not fit in memory".
    block_bytes : int, default=64 MiB
        Size of a row block read from an out-of-core X.
    worker_memory : int, optional
        Dask X only: bytes the kept columns persisted on the workers may occupy; larger kept
        sets are written to the workers' local disk (default: a quarter of the workers' memory
        limits, or of physical memory without a ``distributed.Client``); see "FSA on Dask" in
        ``docs/methods.md``.
    random_state : None, int or Generator
        Seeds the start vector of the power iteration (the only randomness; None means a fixed
        seed, so fits are deterministic by default).
    record_path : bool, default=False
        Record coefficients per iteration (for paper Fig. 2).
    verbose : bool, default=False
        Show a progress bar.

    Returns
    -------
    result : FSAResult

    References
    ----------
    Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big
    Data Learning", TPAMI 2017: Algorithm 1, eq. (3) schedule, eqs. (4)-(9) losses, eq. (13).
    """
    return fit(X, y, k, fit_spec(spec, settings))


def fsa_fit_sparse(X, y, k, spec=None, **settings):
    """:func:`fsa_fit` for a scipy.sparse X (CSR or CSC; other formats are converted to CSR),
    on the sparse layout (:mod:`cvfs.core.layouts.sparse`) whatever the registry holds. Same
    parameters and result; the fit equals the dense one up to rounding.

    ``max_memory`` bounds the dense block of the kept columns made at the hand-over to the
    in-memory loop (default: a quarter of physical memory); the hand-over waits until that
    block is no larger than the kept columns' sparse form. ``block_bytes`` sets the rows of the
    power-iteration start as in the dense fit.

    Raises
    ------
    ValueError
        If X has no row or column, holds NaN or infinity, or the weights are invalid.
    """
    return fit(X, y, k, fit_spec(spec, settings), SparseLayout)


@dataclass(frozen=True)
class FitSpec:
    """The settings of an FSA fit: the keyword arguments of :func:`fsa_fit`, same names,
    defaults and meaning (its docstring documents each)."""

    loss: object = "logistic"
    bins: object = None
    prior: object = None
    n_iter: int = 500
    mu: float = 300.0
    schedule: object = None
    learning_rate: object = None
    annealing_boost: object = None
    fit_intercept: bool = True
    pairs: object = None
    sample_weight: object = None
    max_memory: object = None
    block_bytes: int = _BLOCK_BYTES
    worker_memory: object = None
    random_state: object = None
    record_path: bool = False
    verbose: bool = False

    @property
    def lr_fixed(self):
        """The fixed step, 0 for the automatic one."""
        return float(self.learning_rate) if self.learning_rate is not None else 0.0


def fit_spec(spec=None, settings=None):
    """``spec`` (default: ``FitSpec()``) with the fields named in ``settings`` replaced.

    Raises
    ------
    TypeError
        If ``spec`` is not a :class:`FitSpec` or a setting is not one of its fields.
    """
    if spec is None:
        spec = FitSpec()
    elif not isinstance(spec, FitSpec):
        raise TypeError(f"spec must be a FitSpec, got {type(spec).__name__}")
    if not settings:
        return spec
    unknown = sorted(set(settings) - {f.name for f in fields(FitSpec)})
    if unknown:
        raise TypeError(f"unknown FSA setting(s) {unknown}; the settings are the fields of "
                        f"FitSpec: {[f.name for f in fields(FitSpec)]}")
    return replace(spec, **settings)


def fit(X, y, k, spec, layout=None):
    """The fit pipeline of :func:`fsa_fit` (its keyword arguments in ``spec``, a
    :class:`FitSpec`) on X read through ``layout`` (a :class:`~cvfs.core.layouts.Layout`
    subclass; default: ``layout_for(X)``): checks, the statistics pass, the power-iteration
    start, the iterations (:func:`cvfs.core._driver.fsa_iterate`) and the result."""
    t_start = time.perf_counter()
    p = _setup(X, y, k, spec, layout_for(X) if layout is None else layout)
    try:
        fp, g_first, first, Xs, sub = _statistics(p)
        v, lam = _start(p, fp, Xs, sub)
        hist = np.zeros((p.n_iter, 5))
        path = np.zeros((p.n_iter, p.M)) if spec.record_path else np.zeros((0, 0))
        state, n_layout = _iterate(p, fp, (v, lam), (g_first, first), (hist, path))
    finally:
        p.layout.cleanup()
    return _finish(p, state, n_layout, hist, path if spec.record_path else None, t_start)


@dataclass
class _Problem:
    """The checked inputs of an FSA fit (:func:`_setup`) and the layout X is read through."""

    layout: object
    yk: np.ndarray  # targets as the kernels take them: y, or (y, weight) rows
    sw: np.ndarray | None
    loss: object
    prior: object
    boost: float
    response: object
    schedule: np.ndarray
    pairs: tuple
    fit_intercept: bool
    intercept: float
    spec: FitSpec

    @property
    def X(self):
        return self.layout.X

    @property
    def n_total(self):
        """The denominator of the mean loss: N, or the sum of the sample weights."""
        return self.N if self.sw is None else float(self.sw.sum())

    @property
    def N(self):
        return self.X.shape[0]

    @property
    def M(self):
        return self.X.shape[1]

    @property
    def n_iter(self):
        return self.schedule.size


def _model_parts(loss, prior, annealing_boost, bins):
    """The loss, prior, annealing boost and response of an FSA fit, checked, with defaults."""
    loss = get_loss(loss)
    prior = Shrinkage() if prior is None else get_prior(prior)
    boost = float(getattr(loss, "annealing_boost", 1.0) if annealing_boost is None
                  else annealing_boost)
    if not (math.isfinite(boost) and boost > 0):
        raise ValueError(f"annealing_boost must be a positive number, got {annealing_boost!r}")
    response = get_response(bins)
    return loss, prior, boost, response


def _setup(X, y, k, spec, layout):
    """Checks and defaults of :func:`fsa_fit` (``spec``: its keyword arguments), and X opened
    by the layout class ``layout``."""
    loss, prior, boost, response = _model_parts(spec.loss, spec.prior, spec.annealing_boost,
                                                spec.bins)
    X = layout.prepare(X)
    N, M = X.shape
    if N == 0 or M == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    k = min(int(k), M)
    if spec.schedule is None:
        schedule = annealing_schedule(M, k, spec.n_iter, spec.mu)
    else:
        schedule = check_schedule(spec.schedule, M, k)
    y = np.ascontiguousarray(y, dtype=np.float64)
    sw = check_sample_weight(spec.sample_weight, N)
    is_rank = loss.pairwise
    pairs = ranking_arrays(spec.pairs if is_rank else None, is_rank, sw)
    fit_intercept = spec.fit_intercept and not is_rank
    max_memory = _physical_memory() // 4 if spec.max_memory is None else spec.max_memory
    yk = y if sw is None or is_rank else np.ascontiguousarray(np.column_stack([y, sw]))
    data = FitData(y, yk, sw, pairs, max_memory, spec.block_bytes, spec.worker_memory)
    opened = layout(X, data)
    if not fit_intercept:
        intercept = 0.0
    elif sw is None:
        intercept = loss.init_intercept(y)
    else:
        intercept = loss.init_intercept(y, sample_weight=sw)
    return _Problem(opened, yk, sw, loss, prior, boost, response, schedule, pairs,
                    fit_intercept, intercept, spec)


def _statistics(p):
    """The statistics pass: the response table fp, the first iteration's gradient g_first and
    (mean loss, d loss / d intercept) ``first`` when it is fused into the pass, and the rows
    ``sub`` of the power-iteration start (with their copy Xs if the layout takes one)."""
    N, M = p.X.shape
    # first iteration of a row-separable loss: beta = 0 makes every score the intercept, so its
    # gradient sums come from the statistics pass (no pass of its own; for piecewise-linear
    # responses from the pass of the basis means)
    fused = not p.loss.pairwise and p.n_iter > 0
    first = None
    if fused:
        d0 = np.empty(N)
        l0 = K.loss_rows(p.loss, np.full(N, p.intercept), p.yk, d0)
        first = FirstPass(p.loss, p.intercept, d0)
    # rows of the power-iteration start (below): evenly spaced, at most one block
    sub = power_rows(N, M, p.X.dtype.itemsize, p.spec.block_bytes, p.sw)
    fp, g_first, Xs = p.layout.column_table(p.response, first, sub)
    if not fused:
        return fp, np.zeros((0, p.response.G)), (0.0, 0.0), Xs, sub
    # iteration 0's gradient and (mean loss, d loss / d intercept), for either loop
    dsum = float(d0.sum())
    if not (np.isfinite(g_first).all() and math.isfinite(dsum) and math.isfinite(l0)):
        raise ValueError("X and y are too large for float64: the loss or its gradient "
                         "overflows at the start (rescale X or y)")
    n = p.n_total
    K.finalize(g_first, fp, p.response.bins, dsum, n)
    return fp, g_first, (l0 / n, dsum / n), Xs, sub


def _start(p, fp, Xs, sub):
    """Start vector v and initial curvature estimate lam from a few power iterations on the
    row subsample ``sub``."""
    M, G = p.M, p.response.G
    rng = check_random_state(0 if p.spec.random_state is None else p.spec.random_state)
    v = rng.standard_normal((M, G))
    v /= np.linalg.norm(v)
    lam = p.layout.power_start(fp, p.response.bins, v, sub, Xs, _POWER_ITERS)
    if p.loss.pairwise:  # ||D^T W D|| <= 2 max weighted degree (Gershgorin on the Laplacian)
        pi, pj, _, pw = p.pairs
        degree = pair_degree(pi, pj, pw, p.N, p.sw)
        lam *= 2.0 * p.n_total * degree.max()
    return v, lam


def _iterate(p, fp, power, start, record):
    """The iterations (:func:`cvfs.core._driver.fsa_iterate`) from the start ``power`` = (v,
    lam) of the power iteration, on the layout's passes until the kept columns are better held
    in memory, then in memory. Returns (FitState, iterations on the layout's passes)."""
    M, G = p.M, p.response.G
    state = FitState(np.arange(M, dtype=np.int64), fp, np.zeros((M, G)), power[0],
                     np.arange(M, dtype=np.int64), p.intercept, power[1])
    steps = Steps(p.schedule, p.response.bins, float(p.loss.curvature), p.spec.lr_fixed,
                  p.boost, p.fit_intercept)
    from tqdm.auto import tqdm

    passes = p.layout.passes(start[0].shape[0] > 0)
    bar = tqdm(total=p.n_iter, desc="FSA", leave=False) if p.spec.verbose else None
    try:
        return fsa_iterate(passes, p.loss, p.prior, steps, state, start, record,
                           (p.yk, p.pairs), bar)
    finally:
        if bar is not None:
            bar.close()


def _finish(p, state, n_layout, hist, path, t_start):
    """The :class:`FSAResult`: coefficients de-centred, f(x) = intercept + sum_j u_j(x)^T coef_j
    on the uncentred basis, and the history."""
    beta, fp, support, intercept, lam = (state.beta, state.fp, state.support, state.intercept,
                                         state.lam)
    offset = float(np.sum(beta * fp[:, 2:]))
    coef = beta * fp[:, 1:2] if p.response.bins == 0 else beta.copy()
    history = fit_history(hist, p.M, float(p.loss.curvature * lam), t_start,
                          stat_passes=p.response.n_stat_passes,
                          **p.layout.history(n_layout, p.n_iter))
    table = fp.copy()
    if p.response.bins == 0:
        table[:, 2] = 0.0
    return FSAResult(coef=coef, intercept=float(intercept - offset), support=support.copy(),
                     table=table, bins=p.response.bins, history=history, path=path)


def fit_history(hist, M, lipschitz, t_start, **counts):
    """The ``history`` dict of an FSA result from the per-iteration rows ``hist`` (n_iter, 5)
    (objective, kept count, step, columns read, curvature estimate) of a fit on M features:
    those arrays, ``data_passes``, the ``counts`` given (e.g. ``stat_passes``), ``lipschitz``
    and ``time`` (seconds since ``t_start``)."""
    return {
        "loss": hist[:, 0].copy(),
        "n_kept": hist[:, 1].astype(np.int64),
        "lr": hist[:, 2].copy(),
        "width": hist[:, 3].astype(np.int64),
        "lam": hist[:, 4].copy(),
        "data_passes": float(hist[:, 3].sum() / M),
        **counts,
        "lipschitz": lipschitz,
        "time": time.perf_counter() - t_start,
    }
