"""matplotlib figures (functions take ``ax=None`` and return the axes) and figure saving.

Application-specific figures live in their own modules (``cvfs.viz.astro``,
``cvfs.viz.motion``, ``cvfs.viz.keypoints``); this module holds the core's figures.
"""

from cvfs.viz.core import (
    plot_coefficient_paths,
    plot_response_functions,
    plot_schedules,
    save_figure,
)

__all__ = ["plot_coefficient_paths", "plot_response_functions", "plot_schedules", "save_figure"]
