"""The iteration driver of FSA over a data layout that is read in passes.

:func:`fsa_iterate` runs the iterations of Algorithm 1 (gradient, power-iteration update, step,
selection of the kept groups) on a layout that provides the passes: the out-of-core row blocks
of an ``np.memmap`` / HDF5 X (:class:`cvfs.core.fsa.RowBlocks`) and the row chunks of a Dask
array (:class:`cvfs.core._dask_layout.DaskLayout`). It stops once the kept columns fit in
memory, where the layout loads them for the in-memory loop (:func:`cvfs.core._kernels.fsa_loop`,
which fuses the same iteration with the in-memory layouts' compaction in numba).

A layout provides:

- ``fits(state)``: True once the kept columns are better held in memory (the driver stops);
- ``stop_tracking``: True to stop the power iteration once the curvature estimate is stable
  (resumed after every drop), as the in-memory loop does; False to keep it running;
- ``gradient(loss, bins, state, track)``: one pass, (mean loss, gradient (m, G), d loss /
  d intercept, H v (m, G), columns read);
- ``dropped(state, e)``: after a drop at iteration e (the layout may compact the kept columns
  and renumber ``state.cols``);
- ``begin(e)`` / ``end(e)``: around iteration e (bookkeeping);
- ``load(state, bins)``: the kept columns in memory, (Xw, transposed) as :func:`fsa_loop`
  takes them.
"""

from dataclasses import dataclass

import numpy as np

from cvfs.core import _kernels as K

__all__ = ["FitState", "Steps", "fsa_iterate"]


@dataclass
class Steps:
    """Constants of the iterations: the kept count per iteration, the response bins, the
    loss's curvature bound, the fixed step (0: automatic), the annealing boost and whether
    the intercept is fitted."""

    schedule: np.ndarray
    bins: int
    curv: float
    lr_fixed: float
    boost: float
    fit_intercept: bool

    def as_tuple(self):
        """The constants as :func:`cvfs.core._kernels.fsa_loop` takes them."""
        return (self.schedule, self.bins, self.curv, self.lr_fixed, self.boost,
                self.fit_intercept)


@dataclass
class FitState:
    """The iterate: positions ``cols`` of the kept features in the working data, their response
    table ``fp``, coefficients ``beta`` and power-iteration vector ``v`` (m, G), their original
    indices ``support``, the intercept and the curvature estimate ``lam``."""

    cols: np.ndarray
    fp: np.ndarray
    beta: np.ndarray
    v: np.ndarray
    support: np.ndarray
    intercept: float
    lam: float

    @property
    def model(self):
        """(cols, fp, beta, v, intercept): what a gradient pass reads."""
        return self.cols, self.fp, self.beta, self.v, self.intercept

    def keep(self, keep):
        """Restrict to the kept positions ``keep``; v renormalised."""
        self.beta, self.v, self.fp = self.beta[keep], self.v[keep], self.fp[keep]
        self.support, self.cols = self.support[keep], self.cols[keep]
        nv = np.linalg.norm(self.v)
        self.v = self.v / nv if nv > 0 else np.full_like(self.v, 1.0 / np.sqrt(self.v.size))


def fsa_iterate(layout, loss, prior, steps, state, start, record):
    """Iterations of FSA on ``layout`` until the kept columns are better held in memory.

    ``start`` = (g_first, first): iteration 0's gradient and (mean loss, d loss / d intercept)
    from the statistics pass, or an empty g_first; ``record`` = (hist, path, bar): the
    per-iteration rows (objective, kept count, step, columns read, lam), the coefficient path
    (zero rows: not recorded) and a progress bar or None. ``state`` (:class:`FitState`) is
    updated in place. Returns (iterations done, Xw, transposed, track) with Xw the kept
    columns loaded by the layout (None if every iteration ran here), ``state.cols`` their
    positions in it, and whether the power iteration is still running.
    """
    g_first, first = start
    hist, path, bar = record
    schedule = steps.schedule
    G = state.beta.shape[1]
    lam0 = lam_prev = state.lam
    track = True
    e = 0
    while e < schedule.size and not layout.fits(state):
        layout.begin(e)
        m = state.cols.size
        if e == 0 and g_first.shape[0] > 0:  # from the statistics pass
            g = g_first.copy()
            h = np.zeros((m, G))
            value, gi = first
            width = 0
        else:
            value, g, gi, h, width = layout.gradient(loss, steps.bins, state, track)
        b = steps.boost if steps.lr_fixed <= 0.0 and m > schedule[-1] else 1.0
        keep, state.lam, lr, pval = K.update(
            state.beta, g, h, state.v, state.lam, lam0 if e == 0 else 0.0, track and width > 0,
            prior,
            (steps.curv, steps.lr_fixed, b), schedule[e])
        if steps.fit_intercept:
            state.intercept -= min(lr, 1.0 / steps.curv) * gi
        hist[e] = (value + pval, keep.size, lr, width, state.lam)
        if keep.size < m:
            state.keep(keep)
            layout.dropped(state, e)
            track = True
        elif layout.stop_tracking and track and abs(state.lam - lam_prev) <= 1e-4 * state.lam:
            track = False
        lam_prev = state.lam
        if path.shape[0]:
            beta = state.beta
            path[e, state.support] = beta[:, 0] if G == 1 else np.linalg.norm(beta, axis=1)
        layout.end(e)
        e += 1
        if bar is not None:
            bar.update(1)
    if e == schedule.size:
        return e, None, False, track
    Xw, transposed = layout.load(state, steps.bins)
    state.cols = np.arange(state.cols.size, dtype=np.int64)
    return e, Xw, transposed, track
