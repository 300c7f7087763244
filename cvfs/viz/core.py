"""Figures of the FSA core: coefficient paths (paper Fig. 2), annealing schedules (Fig. 3) and
learned piecewise-linear response functions (Fig. 5)."""

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cvfs.io import atomic_path  # noqa: E402

__all__ = ["plot_coefficient_paths", "plot_response_functions", "plot_schedules", "save_figure"]


def _axes(ax, figsize=(6, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def save_figure(fig, path, dpi=120):
    """Save ``fig`` to ``path`` atomically (format from the suffix) and close it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=str(path).rsplit(".", 1)[-1])
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
    final = np.flatnonzero(path[-1] != 0)
    for j in range(path.shape[1]):
        alive = np.flatnonzero(path[:, j] != 0)
        if alive.size == 0:
            continue
        last = alive[-1] + 1
        if j in hl or (not hl and j in final):
            ax.plot(it[:last], path[:last, j], lw=1.2)
        else:
            ax.plot(it[:last], path[:last, j], color="0.7", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("coefficient")
    ax.set_title("FSA coefficient paths")
    return ax


def plot_schedules(n_features, k, n_iter=500, mus=(0, 10, 30, 100, 300, 1000), ax=None):
    """Kept count M_e against the iteration for several mu (paper Fig. 3)."""
    from cvfs.core.schedules import annealing_schedule

    ax = _axes(ax)
    e = np.arange(1, n_iter + 1)
    for mu in mus:
        ax.plot(e, annealing_schedule(n_features, k, n_iter, mu), label=f"mu={mu}")
    ax.set_xlabel("iteration e")
    ax.set_ylabel("kept features M_e")
    ax.set_title(f"annealing schedules (M={n_features}, k={k})")
    ax.legend()
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
    if ax is not None:
        for i in order:
            ax.plot(np.linspace(0, 1, B + 1), coef[i], marker="o", ms=3,
                    label=_name(names, estimator.support_[i]))
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
        a.set_title(_name(names, estimator.support_[i]), fontsize=8)
        a.tick_params(labelsize=6)
    for a in axes.ravel()[n:]:
        a.axis("off")
    fig.suptitle("learned response functions")
    fig.tight_layout()
    return axes


def _name(names, j):
    return names[j] if names is not None else f"x{j}"
