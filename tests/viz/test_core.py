import numpy as np
import pytest

from cvfs import FSAClassifier
from cvfs.core.fsa import fsa_fit
from cvfs.datasets.synthetic import make_ar1_classification
from cvfs.viz import plot_coefficient_paths, plot_response_functions, plot_schedules, save_figure


def test_figures_are_written(tmp_path):
    X, y, true = make_ar1_classification(300, 100, k_true=3, random_state=0)
    res = fsa_fit(X, np.where(y > 0, 1.0, -1.0), 3, n_iter=100, record_path=True)
    assert res.path.shape == (100, 100)
    assert np.count_nonzero(res.path[-1]) == 3
    ax = plot_coefficient_paths(res.path, highlight=true)
    assert len(ax.lines) > 3
    save_figure(ax.figure, tmp_path / "paths.png")
    ax = plot_schedules(1000, 10)
    assert len(ax.lines) == 6
    save_figure(ax.figure, tmp_path / "sched.png")
    clf = FSAClassifier(k=3, bins=5, n_iter=100).fit(X, y)
    axes = plot_response_functions(clf)
    save_figure(axes.ravel()[0].figure, tmp_path / "resp.png")
    assert {p.name for p in tmp_path.iterdir()} == {"paths.png", "sched.png", "resp.png"}
    with pytest.raises(ValueError, match="piecewise-linear"):
        plot_response_functions(FSAClassifier(k=3, n_iter=50).fit(X, y))


def test_figures_have_legends_and_titled_axes(tmp_path):
    X, y, true = make_ar1_classification(300, 60, k_true=3, random_state=0)
    res = fsa_fit(X, np.where(y > 0, 1.0, -1.0), 3, n_iter=60, record_path=True)
    for highlight in (None, true):
        ax = plot_coefficient_paths(res.path, highlight=highlight)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[0].startswith("true features" if highlight is not None
                                    else "selected features (3)")
        assert labels[-1].startswith("dropped during annealing")
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    ax = plot_schedules(1000, 10)
    assert ax.get_legend() is not None and ax.get_legend().get_title().get_text()
    p = save_figure(ax, tmp_path / "s.png")  # an Axes is accepted too; the figure is closed
    import matplotlib.pyplot as plt

    assert p.stat().st_size > 1000 and ax.figure.number not in plt.get_fignums()


def test_importing_cvfs_keeps_the_matplotlib_backend():
    import subprocess
    import sys

    code = ("import matplotlib; matplotlib.use('svg'); import cvfs.viz, cvfs.viz.astro, "
            "cvfs.viz.keypoints, cvfs.viz.motion, cvfs.cli.commands, cvfs.cli, cvfs.demo; "
            "print(matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "svg"
