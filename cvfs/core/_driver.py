"""The iteration driver of FSA: one iteration body over every data layout.

:func:`_iterations` is the body of Algorithm 1 (gradient, power-iteration update, step,
selection of the kept groups, compaction) written once, in the subset of Python that numba
compiles. It reaches the data only through the layout functions below, so the same source runs

- compiled (``njit(cache=True)``) on the in-memory layout :class:`InMemory` (a named tuple of
  arrays), whose gradient and compaction are numba kernels: no Python per iteration;
- as plain Python on the layouts that read X in passes from Python
  (:class:`cvfs.core.layouts.base.Passes`): the out-of-core row blocks of an ``np.memmap`` /
  HDF5 X (:class:`cvfs.core.layouts.memmap.RowBlocks`), the row chunks of a Dask array
  (:class:`cvfs.core.layouts.dask.DaskLayout`) and the stored entries of a sparse X
  (:class:`cvfs.core.layouts.sparse.SparseColumns`). Once their kept columns are better held in
  memory, :func:`fsa_iterate` loads them and continues on :class:`InMemory`.

A Python layout provides:

- ``fits(state)``: True once the kept columns are better held in memory (the driver hands over);
- ``stop_tracking``: True to stop the power iteration once the curvature estimate is stable
  (resumed after every drop), as the in-memory layout does; False to keep it running;
- ``begin(state, e)``: before iteration e; returns the state (the layout may renumber
  ``state.cols``); ``end(e)``: after it (bookkeeping);
- ``gradient(loss, model, track)``: one pass at ``model`` = (cols, fp, bins, beta, v,
  intercept) of the state, as the kernels take it; returns (mean loss, gradient (m, G),
  d loss / d intercept, H v (m, G), columns read);
- ``dropped(state, e)``: after a drop at iteration e to the kept ``state`` (the layout may
  compact the kept columns); returns the state, ``state.cols`` renumbered if so;
- ``load(state, bins)``: the kept columns in memory, (Xw, transposed) as :class:`InMemory`
  holds them.
"""

import time
from collections import namedtuple

import numpy as np
from numba.core import types
from numba.extending import overload

from cvfs._jit import njit
from cvfs.core import _compact_kernels as CK
from cvfs.core import _kernels as K

__all__ = ["FitState", "InMemory", "Steps", "fsa_iterate", "in_memory"]

Steps = namedtuple("Steps", "schedule bins curv lr_fixed boost fit_intercept")
Steps.__doc__ = """Constants of the iterations: the kept count per iteration, the response bins,
the loss's curvature bound, the fixed step (0: automatic), the annealing boost and whether the
intercept is fitted."""

FitState = namedtuple("FitState", "cols fp beta v support intercept lam")
FitState.__doc__ = """The iterate: positions ``cols`` of the kept features in the working data,
their response table ``fp``, coefficients ``beta`` and power-iteration vector ``v`` (m, G), their
original indices ``support``, the intercept and the curvature estimate ``lam``."""

InMemory = namedtuple("InMemory", "X Xw transposed owned waste y pairs")
InMemory.__doc__ = """The in-memory layout: the caller's matrix ``X`` (only read), the solver's
own working matrix ``Xw`` (empty until the first compaction, or the kept columns a Python layout
loaded; feature-major if ``transposed``), whether it is in use (``owned``), ``waste`` (1,) the
columns read with zero weight since the last compaction, the targets ``y`` ((N,) or (N, 2)
weighted rows) and the ranking ``pairs`` (pi, pj, pr, pw)."""


def in_memory(X, y, pairs, Xw=None, transposed=False):
    """The :class:`InMemory` layout of the caller's ``X`` (``Xw``: kept columns already loaded,
    then also ``X``)."""
    owned = Xw is not None
    if not owned:
        Xw = np.empty((0, 0), dtype=X.dtype)
    return InMemory(X, Xw, bool(transposed), owned, np.zeros(1), y, pairs)


def _is_in_memory(layout):
    return isinstance(layout, types.NamedTuple) and layout.instance_class is InMemory


# ---- the layout functions: Python layouts' methods, or the in-memory kernels under numba ----

def layout_fits(layout, state):
    return layout.fits(state)


def layout_stop_tracking(layout):
    return layout.stop_tracking


def layout_begin(layout, state, e):
    return layout.begin(state, e)


def layout_end(layout, e):
    layout.end(e)


def layout_gradient(layout, loss, model, track):
    return layout.gradient(loss, model, track)


def layout_dropped(layout, state, keep, final, loss, bins, e):
    """The state restricted to the positions ``keep`` (v renormalised) and the layout after
    the drop; ``final``: the kept count has its final size."""
    state = _keep(state, keep)
    return layout, layout.dropped(state, e)


def _keep(state, keep):
    v = state.v[keep]
    nv = np.linalg.norm(v)
    v = v / nv if nv > 0 else np.full_like(v, 1.0 / np.sqrt(v.size))
    return FitState(state.cols[keep], state.fp[keep], state.beta[keep], v, state.support[keep],
                    state.intercept, state.lam)


@overload(layout_fits)
def _fits_impl(layout, state):
    if _is_in_memory(layout):
        return lambda layout, state: False


@overload(layout_stop_tracking)
def _stop_tracking_impl(layout):
    if _is_in_memory(layout):
        return lambda layout: True


@overload(layout_begin)
def _begin_impl(layout, state, e):
    if _is_in_memory(layout):
        return lambda layout, state, e: state


@overload(layout_end)
def _end_impl(layout, e):
    if _is_in_memory(layout):
        return lambda layout, e: None


# inlined into the driver's loop: a call passing the layout's arrays costs ~1 us per iteration,
# which small in-memory fits (N = M = 1000, k = 10) feel
@overload(layout_gradient, inline="always")
def _gradient_impl(layout, loss, model, track):
    if _is_in_memory(layout):
        return _memory_gradient


@overload(layout_dropped)
def _dropped_impl(layout, state, keep, final, loss, bins, e):
    if _is_in_memory(layout):
        return _memory_dropped


@njit(cache=True)
def _width(layout):
    """Columns the next pass of the in-memory layout reads."""
    if not layout.owned:
        return layout.X.shape[1]
    return layout.Xw.shape[0] if layout.transposed else layout.Xw.shape[1]


def _memory_gradient(layout, loss, model, track):
    """One pass of the in-memory layout: (mean loss, g, d loss / d intercept, H v, columns
    read: the working matrix's width for the row-major passes of linear responses, whose
    dropped columns are read with zero weight until the next compaction; the kept count
    otherwise)."""
    if layout.owned:
        value, g, gi, h = K.compute_gradient(layout.Xw, layout.y, layout.pairs, loss, model,
                                             track, layout.transposed)
    else:
        value, g, gi, h = K.compute_gradient(layout.X, layout.y, layout.pairs, loss, model,
                                             track, False)
    width = _width(layout)
    m = model[0].size
    layout.waste[0] += width - m
    return value, g, gi, h, (width if model[2] == 0 and not layout.transposed else m)


def _memory_dropped(layout, state, keep, final, loss, bins, e):
    """:func:`layout_dropped` of the in-memory layout: the kept rows of the state, then the
    compaction of :func:`cvfs.core._compact_kernels.compact` (``final``: the kept count has its
    final size)."""
    v = state.v[keep]
    nv = np.sqrt(np.sum(v * v))
    if nv > 0.0:
        v /= nv
    else:
        v[:, :] = 1.0 / np.sqrt(v.size)
    fp = state.fp[keep]
    cols = state.cols[keep]
    Xw, transposed, owned, cols, waste = CK.compact(
        (layout.X, layout.Xw, layout.transposed, layout.owned), cols, fp, bins,
        (_width(layout), layout.waste[0], final, loss.pairwise, layout.y.shape[0]))
    layout.waste[0] = waste
    layout = InMemory(layout.X, Xw, transposed, owned, layout.waste, layout.y, layout.pairs)
    return layout, FitState(cols, fp, state.beta[keep], v, state.support[keep],
                            state.intercept, state.lam)


@njit(cache=True)
def _record_path(path, e, support, beta):
    """path[e] by original feature: the coefficient (G = 1) or the group norm."""
    G = beta.shape[1]
    for j in range(support.size):
        if G == 1:
            path[e, support[j]] = beta[j, 0]
        else:
            path[e, support[j]] = np.sqrt(np.sum(beta[j] * beta[j]))


def _iterations(layout, loss, prior, steps, state, start, record, span, track):
    """Iterations span = (e0, e1) of FSA on ``layout``, stopping early once the layout's kept
    columns are better held in memory. Returns (iterations done, layout, state, track).

    ``start`` = (g_first, (mean loss, d loss / d intercept)): if g_first (M, G) is not empty,
    iteration 0 takes its gradient from it instead of reading X (with beta = 0 every score is
    the intercept, so the statistics pass computed it); it leaves the curvature estimate as it
    is and records width 0. ``record`` = (hist, path): ``hist`` (n_iter, 5) receives per
    iteration the objective (mean loss + prior) before the step, the kept count after it, the
    step size, the columns read and the curvature estimate lam; ``path`` (n_iter, M) the
    coefficients by original feature (signed for G = 1, group norm otherwise) unless it has
    zero rows. ``track``: the power iteration is running (it stops once the kept set and the
    estimate are stable, if the layout says so).
    """
    g_first, first = start
    hist, path = record
    schedule = steps.schedule
    lam0 = lam_prev = state.lam
    e = span[0]
    while e < span[1] and not layout_fits(layout, state):
        state = layout_begin(layout, state, e)
        m = state.cols.size
        if e == 0 and g_first.shape[0] > 0:
            g = g_first.copy()
            h = np.zeros_like(g)
            value, gi = first
            width = 0
        else:
            model = (state.cols, state.fp, steps.bins, state.beta, state.v, state.intercept)
            value, g, gi, h, width = layout_gradient(layout, loss, model, track)
        b = steps.boost if steps.lr_fixed <= 0.0 and m > schedule[-1] else 1.0
        keep, lam, lr, pval = K.update(state.beta, g, h, state.v, state.lam,
                                       lam0 if e == 0 else 0.0, track and width > 0, prior,
                                       (steps.curv, steps.lr_fixed, b), schedule[e])
        intercept = state.intercept
        if steps.fit_intercept:
            intercept -= min(lr, 1.0 / steps.curv) * gi
        state = FitState(state.cols, state.fp, state.beta, state.v, state.support, intercept,
                         lam)
        hist[e, 0] = value + pval
        hist[e, 1] = keep.size
        hist[e, 2] = lr
        hist[e, 3] = width
        hist[e, 4] = lam
        if keep.size < m:
            layout, state = layout_dropped(layout, state, keep, schedule[e] == schedule[-1],
                                           loss, steps.bins, e)
            track = True
        elif layout_stop_tracking(layout) and track and abs(lam - lam_prev) <= 1e-4 * lam:
            track = False
        lam_prev = lam
        if path.shape[0] > 0:
            _record_path(path, e, state.support, state.beta)
        layout_end(layout, e)
        e += 1
    return e, layout, state, track


_compiled_iterations = njit(cache=True)(_iterations)


def fsa_iterate(layout, loss, prior, steps, state, start, record, data, bar=None):
    """Every iteration of FSA from ``state``: on ``layout`` (:class:`InMemory`, compiled), or
    on a Python layout until its kept columns are better held in memory, then on those columns
    loaded (:class:`InMemory` of ``data`` = (y, pairs) as the kernels take them).

    ``start``, ``record``: see :func:`_iterations`; ``bar``: a progress bar or None. Returns
    (state, iterations done on the Python layout). A Python layout's ``in_memory`` is set to
    the (wall, CPU) seconds of the iterations after the hand-over.
    """
    n_iter = steps.schedule.size
    e = 0
    track = True
    n_layout = 0
    outer = None
    if not isinstance(layout, InMemory):
        while e < n_iter:
            e1 = n_iter if bar is None else e + 1
            e_done, layout, state, track = _iterations(layout, loss, prior, steps, state, start,
                                                      record, (e, e1), track)
            if bar is not None:
                bar.update(e_done - e)
            e = e_done
            if e < e1:
                break
        n_layout = e
        if e == n_iter:
            return state, n_layout
        outer = layout
        Xw, transposed = outer.load(state, steps.bins)
        state = state._replace(cols=np.arange(state.cols.size, dtype=np.int64))
        layout = in_memory(Xw, data[0], data[1], Xw, transposed)
    t_mem = time.perf_counter(), time.process_time()
    chunk = n_iter if bar is None else max(1, n_iter // 50)
    while e < n_iter:
        e1 = min(n_iter, e + chunk)
        _, layout, state, track = _compiled_iterations(layout, loss, prior, steps, state, start,
                                                       record, (e, e1), track)
        if bar is not None:
            bar.update(e1 - e)
        e = e1
    if outer is not None:
        outer.in_memory = (time.perf_counter() - t_mem[0], time.process_time() - t_mem[1])
    return state, n_layout
