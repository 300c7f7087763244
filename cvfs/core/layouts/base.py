"""The protocol of an FSA data layout: what the fit pipeline of :mod:`cvfs.core.fsa` asks of X.

A fit runs in three stages, each reaching X only through its layout (a :class:`Layout`):

1. **Statistics** (:meth:`Layout.column_table`): one pass (piecewise-linear responses: two)
   over X giving the response table ``fp`` (M, 2 + G) -- per column the offset, scale and basis
   means of the centred, scaled basis -- and, for a row-separable loss, the first iteration's
   raw gradient sums (with beta = 0 every score is the intercept, so they need no pass of
   their own).
2. **Start** (:meth:`Layout.power_start`): a few power iterations on a row subsample for the
   curvature estimate of the first step.
3. **Iterations** (:meth:`Layout.passes`): the object that the iteration driver
   (:func:`cvfs.core._driver.fsa_iterate`) runs Algorithm 1 on: either the compiled in-memory
   layout (:func:`cvfs.core._driver.in_memory`), or a :class:`Passes` object that reads X in
   passes from Python until the kept columns are better held in memory, then loads them and
   hands over to the in-memory loop.

Predictions go through :meth:`Layout.decision_function`. The registry
(:mod:`cvfs.core.layouts.registry`) picks the layout of an X by :meth:`Layout.accepts`;
``docs/layouts.md`` walks through adding one.
"""

import os
from abc import ABC, abstractmethod
from collections import namedtuple

import numpy as np

from cvfs.core import _pl_kernels as PL

__all__ = ["FirstPass", "FitData", "Layout", "Passes", "dense_decision_function",
           "physical_memory"]

FitData = namedtuple("FitData", "y yk sw pairs max_memory block_bytes worker_memory")
FitData.__doc__ = """What a layout is opened with besides X: the targets ``y`` (N,) float64, the
targets as the kernels take them ``yk`` (y, or (N, 2) rows of (y, sample weight)), the sample
weights ``sw`` (N,) or None, the ranking ``pairs`` (pi, pj, pr, pw; empty arrays for other
losses), ``max_memory`` (bytes the kept columns may take in this process's memory),
``block_bytes`` (size of a row block read from X) and ``worker_memory`` (Dask workers' budget,
or None)."""

FirstPass = namedtuple("FirstPass", "loss intercept d")
FirstPass.__doc__ = """The first iteration fused into the statistics pass: the loss object, the
starting intercept and the loss derivatives ``d`` (N,) at score = intercept. The statistics pass
returns the raw sums sum_i d_i u_ij of each basis column beside the table."""


def physical_memory():
    """Bytes of physical memory (8 GiB if the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def dense_decision_function(X, support, table, bins, coef, intercept):
    """Scores intercept + sum_j f_j(x_j) for a model on columns ``support`` of an array-like X
    (ndarray, memmap, HDF5 dataset, Dask array: the columns ``support`` are read)."""
    if bins == 0:
        return np.asarray(X[:, support], dtype=np.float64) @ coef[:, 0] + intercept
    Xa = np.asarray(X)
    if Xa.dtype not in (np.float32, np.float64):
        Xa = Xa.astype(np.float64)
    return PL.pl_decision(np.ascontiguousarray(Xa), np.ascontiguousarray(support, np.int64),
                         np.ascontiguousarray(table), bins, np.ascontiguousarray(coef),
                         float(intercept))


class Layout(ABC):
    """One kind of X for the FSA fit pipeline.

    A subclass says which inputs it takes (:meth:`accepts`), is opened on one X and the fit's
    :class:`FitData` (``__init__``), and then serves the three stages of the fit. ``self.X``
    is X as the layout reads it (its ``shape`` and ``dtype`` are the fit's N, M and
    working precision).
    """

    #: short name, used in messages and in ``history`` keys
    name = "layout"

    @classmethod
    @abstractmethod
    def accepts(cls, X):
        """True if this layout fits X (the registry asks the newest registered layout first)."""

    @classmethod
    def prepare(cls, X):
        """X converted as early as the fit starts (before its shape is checked): e.g. a sparse
        matrix in a canonical format. Default: X unchanged."""
        return X

    def __init__(self, X, data):
        self.X = X
        self.data = data

    @property
    def shape(self):
        return self.X.shape

    @property
    def dtype(self):
        return self.X.dtype

    @abstractmethod
    def column_table(self, response, first, rows):
        """The statistics pass.

        Parameters
        ----------
        response : response object (:mod:`cvfs.core.responses`)
        first : :class:`FirstPass` or None
            The first iteration to fuse into the pass (row-separable losses), or None.
        rows : ndarray of int64
            Sorted rows of the power-iteration start; a layout that reads them later itself
            (:meth:`power_start`) may ignore them.

        Returns
        -------
        fp : ndarray (M, 2 + G)
            The response table (offset, scale, basis means).
        graw : ndarray (M, G) or None
            With ``first``: the raw sums sum_i d_i u_ij of each basis column (weighted by the
            sample weights where the statistics are).
        Xs : ndarray (len(rows), M) or None
            The rows ``rows`` copied from the pass, if the layout's :meth:`power_start` wants
            them.

        Raises ValueError naming the first NaN or infinity of X, or a column whose statistics
        overflow float64.
        """

    @abstractmethod
    def power_start(self, fp, bins, v, rows, Xs, n_iter):
        """Largest eigenvalue of the centred, scaled Gram matrix of the rows ``rows`` (their
        copy ``Xs`` from :meth:`column_table`, or None) divided by their count, by ``n_iter``
        power iterations from ``v`` (M, G; updated in place). Returns it as a float."""

    @abstractmethod
    def passes(self, fused):
        """The layout the iteration driver runs on: ``cvfs.core._driver.in_memory(...)`` or a
        :class:`Passes`. ``fused``: iteration 0 takes its gradient from the statistics
        pass (it reads no data)."""

    def history(self, n_layout, n_iter):
        """Entries this layout adds to the fit's ``history``: ``n_layout`` iterations ran on
        :meth:`passes` before the in-memory loop took over, of ``n_iter``."""
        return {"out_of_core_iterations": n_layout}

    def cleanup(self):  # noqa: B027 - an optional hook: most layouts leave nothing behind
        """Release what the fit left outside this process (called once, after the fit)."""

    @staticmethod
    def decision_function(X, support, table, bins, coef, intercept):
        """Scores of the rows of X for a model on its columns ``support``, ndarray (N,)."""
        return dense_decision_function(X, support, table, bins, coef, intercept)


class Passes(ABC):
    """A layout that the iteration driver runs from Python, one pass over X per iteration,
    until the kept columns are better held in memory (see :mod:`cvfs.core._driver`).

    ``stop_tracking``: True to stop the power iteration once the curvature estimate is stable
    (resumed after every drop), as the in-memory loop does; False to keep it running.
    """

    stop_tracking = False

    @abstractmethod
    def fits(self, state):
        """True once the kept columns of ``state`` are better held in memory."""

    def begin(self, state, e):
        """Before iteration e; returns the state (``state.cols`` may be renumbered)."""
        return state

    def end(self, e):  # noqa: B027 - an optional hook: most passes keep no bookkeeping
        """After iteration e (bookkeeping)."""

    @abstractmethod
    def gradient(self, loss, model, track):
        """One pass at ``model`` = (cols, fp, bins, beta, v, intercept): (mean loss, gradient
        (m, G), d loss / d intercept, H v (m, G), columns read). ``track``: also the
        power-iteration product H v."""

    def dropped(self, state, e):
        """After a drop at iteration e to the kept ``state``; returns the state (the layout may
        compact its kept columns and renumber ``state.cols``)."""
        return state

    @abstractmethod
    def load(self, state, bins):
        """The kept columns in memory: (Xw, transposed), Xw (N, m) row-major, or for
        piecewise-linear responses (``bins`` > 0) the (m, N) feature-major bin coordinates."""
