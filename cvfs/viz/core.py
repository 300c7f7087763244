"""Figures of the FSA core: coefficient paths (paper Fig. 2), annealing schedules (Fig. 3) and
learned piecewise-linear response functions (Fig. 5); :func:`save_figure`, the one way cvfs writes
a figure."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from cvfs.io import atomic_path

__all__ = ["plot_coefficient_paths", "plot_response_functions", "plot_schedules", "save_figure"]


def _axes(ax, figsize=(6, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def save_figure(fig, path, dpi=120):
    """Save a figure atomically (never a half-written file) and close it.

    Parameters
    ----------
    fig : matplotlib Figure
        Also accepted: an Axes or a sequence/array of Axes (their figure is saved).
    path : str or Path
        Destination; the format follows the suffix (``.png``, ``.pdf``, ``.svg``, ...).
    dpi : float, default 120

    Returns
    -------
    path : Path
    """
    from pathlib import Path

    if not hasattr(fig, "savefig"):
        first = fig if hasattr(fig, "figure") else np.ravel(fig)[0]
        fig = first.figure
    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=path.suffix.lstrip(".") or None)
    finally:
        plt.close(fig)
    return path


def plot_coefficient_paths(path, ax=None, highlight=None):
    """Coefficient value (or group norm) of every feature against the iteration (paper Fig. 2).

    Parameters
    ----------
    path : ndarray of shape (n_iter, M)
        ``FSAResult.path`` (``fsa_fit(..., record_path=True)``); dropped features are 0.
    ax : matplotlib Axes, optional
    highlight : array-like of int, optional
        Features drawn in colour (e.g. the true ones); the others grey.

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _axes(ax)
    path = np.asarray(path)
    it = np.arange(1, path.shape[0] + 1)
    hl = set(np.asarray(highlight).tolist()) if highlight is not None else set()
    final = set(np.flatnonzero(path[-1] != 0).tolist())
    main = hl if hl else final
    counts = {"main": 0, "other": 0, "dropped": 0}
    for j in range(path.shape[1]):
        alive = np.flatnonzero(path[:, j] != 0)
        if alive.size == 0:
            continue
        last = alive[-1] + 1
        if j in main:
            ax.plot(it[:last], path[:last, j], lw=1.4, zorder=3)
            counts["main"] += 1
        elif j in final:  # selected but not highlighted
            ax.plot(it[:last], path[:last, j], color="k", lw=1.0, ls="--", zorder=2)
            counts["other"] += 1
        else:
            ax.plot(it[:last], path[:last, j], color="0.7", lw=0.5, zorder=1)
            counts["dropped"] += 1
    handles = [Line2D([], [], color="C0", lw=1.4, label=(
        f"true features ({counts['main']})" if hl else f"selected features ({counts['main']})"))]
    if counts["other"]:
        handles.append(Line2D([], [], color="k", lw=1.0, ls="--",
                              label=f"selected, not true ({counts['other']})"))
    handles.append(Line2D([], [], color="0.7", lw=0.5,
                          label=f"dropped during annealing ({counts['dropped']})"))
    ax.legend(handles=handles, loc="best", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("iteration e (log scale)")
    ax.set_ylabel("coefficient value")
    ax.set_title("FSA coefficient paths")
    return ax


def plot_schedules(n_features, k, n_iter=500, mus=(0, 10, 30, 100, 300, 1000), ax=None):
    """Kept count M_e against the iteration for several mu (paper Fig. 3)."""
    from cvfs.core.schedules import annealing_schedule

    ax = _axes(ax)
    e = np.arange(1, n_iter + 1)
    for mu in mus:
        ax.plot(e, annealing_schedule(n_features, k, n_iter, mu), label=f"{mu}")
    ax.set_xlabel("iteration e")
    ax.set_ylabel("kept features $M_e$")
    ax.set_title(f"annealing schedules (M={n_features}, k={k})")
    ax.legend(title=r"annealing $\mu$", fontsize=8)
    return ax


def plot_response_functions(estimator, names=None, max_plots=12, ax=None):
    """Learned piecewise-linear responses f_j(x) of a fitted FSA estimator (paper Fig. 5).

    Parameters
    ----------
    estimator : fitted FSAClassifier / FSARegressor / FSARanker with ``bins`` set
    names : list of str, optional
        Names of the input features (indexed by column of X).
    max_plots : int
        Draw the first ``max_plots`` selected features (largest response range first).
    ax : matplotlib Axes, optional
        One axes holding every curve over a normalised x in [0, 1] when given; otherwise a
        grid of small axes is created.

    Returns
    -------
    ax : matplotlib Axes or ndarray of Axes

    Raises
    ------
    ValueError
        If the estimator has linear responses.
    """
    coef = np.asarray(estimator.coef_)
    if coef.ndim != 2:
        raise ValueError("plot_response_functions needs piecewise-linear responses (bins set)")
    table = estimator.response_table_
    B = coef.shape[1] - 1
    order = np.argsort(-np.ptp(coef, axis=1))[:max_plots]
    lo = table[:, 0]
    hi = lo + np.where(table[:, 1] > 0, B / np.where(table[:, 1] > 0, table[:, 1], 1), 0)
    support = estimator.get_support(indices=True)
    if ax is not None:
        for i in order:
            ax.plot(np.linspace(0, 1, B + 1), coef[i], marker="o", ms=3,
                    label=_name(names, support[i]))
        ax.set_xlabel("feature value (normalised to its training range)")
        ax.set_ylabel("response")
        ax.legend(fontsize=6)
        return ax
    n = len(order)
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.4 * rows), squeeze=False)
    for a, i in zip(axes.ravel(), order):
        a.plot(np.linspace(lo[i], hi[i], B + 1), coef[i], marker="o", ms=3)
        a.set_title(_name(names, support[i]), fontsize=8)
        a.tick_params(labelsize=6)
    for a in axes.ravel()[n:]:
        a.axis("off")
    fig.suptitle("learned response functions")
    fig.tight_layout()
    return axes


def _name(names, j):
    return names[j] if names is not None else f"x{j}"
