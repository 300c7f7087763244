"""The FSA solver: Feature Selection with Annealing (Barbu et al., TPAMI 2017, Algorithm 1).

``beta = 0``; for e = 1..N_iter: one gradient step on the mean loss + prior, then keep the M_e
feature groups of largest norm (eq. 3 schedule) and drop the others from the data. The
intercept is never selected. Three layers (stumpy style): :func:`fsa_fit` (light checks and
orchestration, this module), the numba kernels in :mod:`cvfs.core._kernels` and
:mod:`cvfs.core._pl_kernels`, and their NumPy twins in ``tests/naive.py``.

- Working set: the centred basis of the kept columns (linear columns also scaled to unit
  variance). Every iteration is one fused pass over the kept columns (ranking: two); the kept
  columns are compacted when the kept count halves or the zero-weight reads since the last
  compaction have cost as much as a copy (ski rental). Small working sets
  (``_kernels.SMALL_WIDTH``, ``CACHED_WIDTH``/``CACHED_BYTES``) and piecewise-linear features
  after the first drop are stored feature-major. The first iteration's gradient comes from the
  statistics pass. ``history["width"]`` records the columns each iteration read.
- Step size (``learning_rate=None``): eta_e = 1 / (c_loss * lam_e / kappa + L_prior), lam_e the
  largest eigenvalue of the kept columns' centred Gram matrix by a power iteration fused into
  the gradient pass; kappa is the loss's ``annealing_boost`` while features are still removed,
  1 once the kept set has its final size. ``history["lr"]`` records the step used.
- Out of core: ``X`` may be an ``h5py.Dataset`` or ``np.memmap``, read in row blocks until the
  kept columns fit in ``max_memory``; peak memory ``max_memory + 3 * block_bytes + O(M * G)``.
- Dask: ``X`` may be a ``dask.array.Array`` (e.g. from Zarr); each pass is a map-reduce of the
  same kernels over its row chunks (:mod:`cvfs.core._dask_layout`, on the active
  ``distributed.Client`` or Dask's local scheduler), moving O(M G + chunks) per iteration; the
  kept columns are written to the workers' local disk after the first drop, persisted in their
  memory once they fit ``worker_memory`` and gathered into the in-memory loop once they fit
  ``max_memory``.
- In memory: an ndarray is used as it is (C-contiguous float32/float64); the first compaction
  copies the kept columns (peak ~1.5x the size of X), later ones move them within that buffer.

The rationale of each choice (why the step size, the boost values, the compaction rule and the
layouts) is in ``docs/methods.md``, section "FSA solver"; ``benchmarks/fsa/synthetic_tables.py``,
``benchmarks/scale/scaling.py`` and ``benchmarks/fsa/pl_kernels.py`` measure it.
"""

import logging
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from cvfs.base import check_random_state
from cvfs.core import _kernels as K
from cvfs.core import _pl_kernels as PL
from cvfs.core._dask_layout import is_dask_array
from cvfs.core._driver import FitState, Steps, fsa_iterate, in_memory
from cvfs.core.losses import get_loss
from cvfs.core.priors import Shrinkage, get_prior
from cvfs.core.responses import _ColumnStats, get_response
from cvfs.core.schedules import annealing_schedule, check_schedule

__all__ = ["FSAResult", "RowBlocks", "check_sample_weight", "fsa_fit", "is_out_of_core",
           "pair_degree", "power_rows"]

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


def is_out_of_core(X):
    """True for inputs read in row blocks: ``np.memmap`` and ``h5py.Dataset``."""
    if isinstance(X, np.memmap):
        return True
    return type(X).__module__.startswith("h5py")


def decision_function(X, support, table, bins, coef, intercept):
    """Scores intercept + sum_j f_j(x_j) for a model on columns ``support`` of X."""
    if sp.issparse(X):  # reads only the columns ``support``
        from cvfs.core.fsa_sparse import sparse_decision_function

        return sparse_decision_function(X, support, table, bins, coef, intercept)
    if bins == 0:
        return np.asarray(X[:, support], dtype=np.float64) @ coef[:, 0] + intercept
    Xa = np.asarray(X)
    if Xa.dtype not in (np.float32, np.float64):
        Xa = Xa.astype(np.float64)
    return PL.pl_decision(np.ascontiguousarray(Xa), np.ascontiguousarray(support, np.int64),
                         np.ascontiguousarray(table), bins, np.ascontiguousarray(coef),
                         float(intercept))


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _row_blocks(n_rows, row_bytes, block_bytes):
    step = max(1, int(block_bytes // max(row_bytes, 1)))
    for r0 in range(0, n_rows, step):
        yield r0, min(n_rows, r0 + step)


def _read_block(X, r0, r1, buf=None):
    """Rows r0:r1 of X as a C-contiguous float32/float64 array; an HDF5 dataset of such a dtype
    is read straight into ``buf`` (a reused block buffer: a fresh array per block spends much of
    the read on page faults) and a view of it is returned, valid until the next read."""
    if buf is not None:
        X.read_direct(buf, np.s_[r0:r1], np.s_[0:r1 - r0])
        return buf[:r1 - r0]
    block = np.asarray(X[r0:r1])
    if block.dtype not in (np.float32, np.float64):
        block = block.astype(np.float64)
    return np.ascontiguousarray(block)


def _block_buffer(X, block_bytes):
    """A reusable row-block buffer for :func:`_read_block` if X is an HDF5 dataset of float32 or
    float64 (None otherwise: arrays and memmaps are read in place)."""
    if isinstance(X, np.ndarray) or X.dtype not in (np.float32, np.float64):
        return None
    rows = max(1, int(block_bytes // max(X.shape[1] * X.dtype.itemsize, 1)))
    return np.empty((min(rows, X.shape[0]), X.shape[1]), dtype=X.dtype)


def _raise_not_finite(block, r0, stats):
    """The ValueError of a statistics pass whose sums are not finite: a NaN or infinity in X
    (named by its first row), or finite values whose squared deviations overflow float64."""
    bad = np.argwhere(~np.isfinite(block))
    if bad.size:
        raise ValueError(f"X contains NaN or infinity (first in row {r0 + int(bad[0, 0])}, "
                         f"column {int(bad[0, 1])})")
    col = int(np.flatnonzero(~(np.isfinite(stats.s1) & np.isfinite(stats.s2)))[0])
    raise ValueError(f"X column {col} has values too large for float64 statistics (their "
                     "squared deviations overflow past 1.8e308, e.g. entries near 1e300): "
                     "rescale X")


def _column_table(X, response, block_bytes, d=None, rows=None, sw=None):
    """Statistics passes: the response table fp (M, 2 + G) for all columns of X; with per-row
    weights ``d`` (N,) also the raw sums sum_i d_i u_ij of each basis column, shape (M, G),
    from the same pass (the statistics pass for linear responses, that of the basis means for
    piecewise-linear ones; else None); with sorted row indices ``rows``, those rows of X, copied
    from the blocks as they stream by (for an out-of-core X a scattered read of them costs far
    more), else None. With sample weights ``sw`` (N,) the means, variances and basis means are
    weighted and min/max taken over the rows of positive weight. Returns (fp, raw sums,
    rows)."""
    N, M = X.shape
    row_bytes = M * X.dtype.itemsize
    stats = _ColumnStats(M, minmax=response.bins > 0)  # bin edges need min and max
    gacc = np.zeros(M) if d is not None else None
    rows_out = None
    buf = _block_buffer(X, block_bytes)
    for r0, r1 in _row_blocks(N, row_bytes, block_bytes):
        block = _read_block(X, r0, r1, buf)
        if not stats.update(block, None if d is None else d[r0:r1], gacc,
                            None if sw is None else sw[r0:r1]):
            _raise_not_finite(block, r0, stats)
        if rows is not None:
            if rows_out is None:
                rows_out = np.empty((rows.size, M), dtype=block.dtype)
            lo, hi = np.searchsorted(rows, [r0, r1])
            rows_out[lo:hi] = block[rows[lo:hi] - r0]
    if response.bins == 0:
        graw = None if d is None else (gacc + stats.shift * d.sum())[:, None]
        return response.table(stats), graw, rows_out
    fp = response.bin_table(stats)
    sums = np.zeros((M, response.G))
    graw = np.zeros((M, response.G)) if d is not None else None
    for r0, r1 in _row_blocks(N, row_bytes, block_bytes):
        block = _read_block(X, r0, r1, buf)
        if sw is None:
            PL.basis_sums(block, fp, response.bins, sums,
                          np.zeros(0) if d is None else d[r0:r1],
                          np.zeros((0, response.G)) if graw is None else graw)
            continue
        # weighted basis means: the sample weights in the place of the derivatives, then the
        # derivatives in a second call
        scratch = np.zeros((M, response.G))
        PL.basis_sums(block, fp, response.bins, scratch, sw[r0:r1], sums)
        if graw is not None:
            PL.basis_sums(block, fp, response.bins, scratch, d[r0:r1], graw)
    fp[:, 2:] = sums / (N if sw is None else stats.n)
    return fp, graw, rows_out


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


def fsa_fit(X, y, k, *, loss="logistic", bins=None, prior=None, n_iter=500, mu=300.0,
            schedule=None, learning_rate=None, annealing_boost=None, fit_intercept=True,
            pairs=None, sample_weight=None, max_memory=None, block_bytes=_BLOCK_BYTES,
            worker_memory=None, random_state=None, record_path=False, verbose=False):
    """Fit FSA: minimise mean loss + prior subject to at most ``k`` selected feature groups.

    Parameters
    ----------
    X : ndarray, np.memmap, h5py.Dataset, scipy.sparse matrix or dask.array.Array of shape (N, M)
        Features, float32 (kept) or anything else (promoted to float64). Must be finite.
        Sparse X (CSR/CSC) is fitted by :func:`cvfs.core.fsa_sparse.fsa_fit_sparse` without
        densifying it.
    y : ndarray or dask.array.Array of shape (N,)
        Targets: real for the squared loss, +-1 for margin losses, ignored for ranking.
    k : int
        Number of feature groups to keep (capped at M).
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
    spec = FitSpec(**{name: value for name, value in locals().items()
                      if name not in ("X", "y", "k")})
    if sp.issparse(X):  # scipy.sparse CSR/CSC: the sparse layout of cvfs.core.fsa_sparse
        from cvfs.core.fsa_sparse import fit_sparse

        return fit_sparse(X, y, k, spec)
    t_start = time.perf_counter()
    p = _setup(X, y, k, spec)
    fp, g_first, first, Xs, sub = _statistics(p)
    v, lam = _start(p, fp, Xs, sub)
    hist = np.zeros((p.n_iter, 5))
    path = np.zeros((p.n_iter, p.M)) if record_path else np.zeros((0, 0))
    state = _iterate(p, fp, (v, lam), (g_first, first), (hist, path))
    return _finish(p, state, hist, path if record_path else None, t_start)


@dataclass(frozen=True)
class FitSpec:
    """The keyword arguments of :func:`fsa_fit` (same names and defaults)."""

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


@dataclass
class _Problem:
    """The checked inputs of an FSA fit (:func:`_setup`), dense or sparse."""

    X: object
    y: np.ndarray
    yk: np.ndarray  # targets as the kernels take them: y, or (y, weight) rows
    sw: np.ndarray | None
    loss: object
    prior: object
    boost: float
    response: object
    schedule: np.ndarray
    pairs: tuple
    fit_intercept: bool
    max_memory: int
    intercept: float
    spec: FitSpec
    layout: object = None  # the Dask layout, or None
    out_of_core: bool = False

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

    @property
    def in_place(self):
        """True if the statistics and power passes read an in-memory X in place."""
        return self.response.bins == 0 and not self.out_of_core and self.layout is None


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


def _setup(X, y, k, spec, check_X=None):
    """Checks and defaults of :func:`fsa_fit` (``spec``: its keyword arguments); X as the layout
    reads it: ``check_X(X)`` (the sparse fit's check), else an in-memory, out-of-core or Dask
    X."""
    loss, prior, boost, response = _model_parts(spec.loss, spec.prior, spec.annealing_boost,
                                                spec.bins)
    if check_X is not None:
        X = check_X(X)
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
    layout = None
    if check_X is None:
        X, layout = _dense_source(X, y, pairs, sw, (spec.worker_memory, max_memory))
    if not fit_intercept:
        intercept = 0.0
    elif sw is None:
        intercept = loss.init_intercept(y)
    else:
        intercept = loss.init_intercept(y, sample_weight=sw)
    yk = y if sw is None or is_rank else np.ascontiguousarray(np.column_stack([y, sw]))
    return _Problem(X, y, yk, sw, loss, prior, boost, response, schedule, pairs, fit_intercept,
                    max_memory, intercept, spec, layout,
                    layout is None and check_X is None and is_out_of_core(X))


def _dense_source(X, y, pairs, sw, memory):
    """(X as the passes read it, the Dask layout or None): a Dask array's row chunks, an
    out-of-core X as it is, else a C-contiguous float32/float64 ndarray. ``memory`` =
    (worker_memory, max_memory)."""
    worker_memory, max_memory = memory
    if sw is not None and is_dask_array(X):
        raise NotImplementedError("sample_weight is not supported for a Dask X: compute X, or "
                                  "pass it as an np.memmap / HDF5 dataset")
    if is_dask_array(X):  # row chunks on a Dask scheduler: cvfs.core._dask_layout
        from cvfs.core._dask_layout import DaskLayout, default_worker_memory

        if worker_memory is None:
            worker_memory = default_worker_memory(_physical_memory())
        layout = DaskLayout(X, y, pairs, worker_memory, max_memory)
        return layout.X, layout
    if is_out_of_core(X):
        return X, None
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return np.ascontiguousarray(X), None


def _statistics(p):
    """The statistics pass: the response table fp, the first iteration's gradient g_first and
    (mean loss, d loss / d intercept) ``first`` when it is fused into the pass, and the rows
    ``sub`` of the power-iteration start (with their copy Xs unless X is read in place)."""
    N, M = p.X.shape
    # first iteration of a row-separable loss: beta = 0 makes every score the intercept, so its
    # gradient sums come from the statistics pass (no pass of its own; for piecewise-linear
    # responses from the pass of the basis means)
    fused = not p.loss.pairwise and p.n_iter > 0
    if fused:
        d0 = np.empty(N)
        l0 = K.loss_rows(p.loss, np.full(N, p.intercept), p.yk, d0)
    # rows of the power-iteration start (below): evenly spaced, at most one block
    sub = power_rows(N, M, p.X.dtype.itemsize, p.spec.block_bytes, p.sw)
    if p.layout is not None:
        fp, g_first, Xs = p.layout.column_table(
            p.response, (p.loss, p.intercept) if fused else None, sub)
    else:
        fp, g_first, Xs = _column_table(p.X, p.response, p.spec.block_bytes,
                                        d0 if fused else None, None if p.in_place else sub, p.sw)
    if not fused:
        return fp, np.zeros((0, 1)), (0.0, 0.0), Xs, sub
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
    cols = np.arange(M, dtype=np.int64)
    if p.in_place:
        lam = K.power_estimate_rows(p.X, sub, fp, v, _POWER_ITERS)
    else:
        lam = K.power_estimate(Xs, cols, fp, p.response.bins, v, _POWER_ITERS)
    if p.loss.pairwise:  # ||D^T W D|| <= 2 max weighted degree (Gershgorin on the Laplacian)
        pi, pj, _, pw = p.pairs
        degree = pair_degree(pi, pj, pw, p.N, p.sw)
        lam *= 2.0 * p.n_total * degree.max()
    return v, lam


def _iterate(p, fp, power, start, record):
    """The iterations (:func:`cvfs.core._driver.fsa_iterate`) from the start ``power`` = (v,
    lam) of the power iteration: in row blocks (out of core) or Dask chunks until the kept
    columns fit in memory, then in memory. Returns (beta, fp, support, intercept, lam,
    iterations out of core)."""
    from tqdm.auto import tqdm

    M, G = p.M, p.response.G
    state = FitState(np.arange(M, dtype=np.int64), fp, np.zeros((M, G)), power[0],
                     np.arange(M, dtype=np.int64), p.intercept, power[1])
    steps = Steps(p.schedule, p.response.bins, float(p.loss.curvature), p.spec.lr_fixed,
                  p.boost, p.fit_intercept)
    if p.out_of_core:
        layout = RowBlocks(p.X, p.yk, p.pairs, p.spec.block_bytes, p.max_memory)
    elif p.layout is not None:
        layout = p.layout
    else:
        layout = in_memory(p.X, p.yk, p.pairs)
    bar = tqdm(total=p.n_iter, desc="FSA", leave=False) if p.spec.verbose else None
    try:
        s, n_ooc = fsa_iterate(layout, p.loss, p.prior, steps, state, start, record,
                               (p.yk, p.pairs), bar)
    finally:
        if p.layout is not None:
            p.layout.cleanup()
        if bar is not None:
            bar.close()
    return s.beta, s.fp, s.support, s.intercept, s.lam, n_ooc


def _finish(p, state, hist, path, t_start):
    """The :class:`FSAResult`: coefficients de-centred, f(x) = intercept + sum_j u_j(x)^T coef_j
    on the uncentred basis, and the history."""
    beta, fp, support, intercept, lam, n_ooc = state
    offset = float(np.sum(beta * fp[:, 2:]))
    coef = beta * fp[:, 1:2] if p.response.bins == 0 else beta.copy()
    history = fit_history(hist, p.M, float(p.loss.curvature * lam), t_start,
                          stat_passes=p.response.n_stat_passes, out_of_core_iterations=n_ooc)
    if p.layout is not None:
        history["dask"] = p.layout.report(p.n_iter)
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


class RowBlocks:
    """The out-of-core layout of :func:`cvfs.core._driver.fsa_iterate`: X (``np.memmap`` or
    ``h5py.Dataset``) read in row blocks of ``block_bytes`` by every pass, until the kept
    columns fit in ``max_memory``; then they are loaded (one more pass over the rows). ``y``
    as the kernels take it ((N,) or (N, 2) weighted rows), ``pairs`` the ranking pairs."""

    def __init__(self, X, y, pairs, block_bytes, max_memory):
        self.X, self.y, self.pairs = X, y, pairs
        self.max_memory = max_memory
        self.itemsize = X.dtype.itemsize
        self.blocks = list(_row_blocks(X.shape[0], X.shape[1] * self.itemsize, block_bytes))
        self.buf = _block_buffer(X, block_bytes)

    def _read(self, r0, r1):
        return _read_block(self.X, r0, r1, self.buf)

    stop_tracking = False

    def fits(self, state):
        return self.X.shape[0] * state.cols.size * self.itemsize <= self.max_memory

    def begin(self, state, e):
        return state

    def end(self, e):
        pass

    def dropped(self, state, e):
        return state  # every pass reads the rows of X; nothing to compact

    def gradient(self, loss, model, track):
        """One pass over the row blocks: (mean loss, g, d loss / d intercept, H v, M)."""
        N, M = self.X.shape
        cols, fp, bins, beta, v, intercept = model
        g = np.zeros(beta.shape)
        h = np.zeros(beta.shape)
        if loss.pairwise:
            z = np.empty(N)
            t = np.empty(N)
            for r0, r1 in self.blocks:
                K.score_pass(self._read(r0, r1), cols, fp, bins, beta, v, intercept,
                             z[r0:r1], t[r0:r1], track)
            r = np.empty(N)
            w = np.empty(N)
            value = K.rank_pairs(z, t, *self.pairs, r, w, track)
            rsum = wsum = 0.0
            for r0, r1 in self.blocks:
                a, b = K.grad_pass(self._read(r0, r1), cols, fp, bins, r[r0:r1], w[r0:r1], g,
                                   h, track)
                rsum += a
                wsum += b
            K.finalize(g, fp, bins, rsum, 1.0)
            K.finalize(h, fp, bins, wsum, 1.0)
            return value, g, 0.0, h, M
        y = self.y
        lsum = dsum = tsum = 0.0
        for r0, r1 in self.blocks:
            a, b, c = K.row_pass(self._read(r0, r1), y[r0:r1], loss, model, (g, h), track)
            lsum += a
            dsum += b
            tsum += c
        n = N if y.ndim == 1 else float(y[:, 1].sum())
        K.finalize(g, fp, bins, dsum, n)
        K.finalize(h, fp, bins, tsum, n)
        return lsum / n, g, dsum / n, h, M

    def load(self, state, bins):
        """The kept columns in memory: (N, m) row-major, or for piecewise-linear features
        (``bins`` > 0) the (m, N) bin coordinates the in-memory loop keeps them in (same size).
        Returns (Xw, transposed)."""
        X, cols, fp = self.X, state.cols, state.fp
        N = X.shape[0]
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        transposed = bins > 0
        Xw = np.empty((cols.size, N) if transposed else (N, cols.size), dtype=dtype)
        for r0, r1 in self.blocks:
            block = self._read(r0, r1)
            if transposed:
                PL.take_bins(block, cols, fp, bins, Xw, r0)
            else:
                K.take_columns(block, cols, Xw[r0:r1])
        log.debug("FSA: %d kept columns loaded into memory", cols.size)
        return Xw, transposed
