"""Data layouts of the FSA solver: one protocol (:mod:`~cvfs.core.layouts.base`), one registry
(:mod:`~cvfs.core.layouts.registry`) and one module per layout.

- :mod:`~cvfs.core.layouts.dense` -- an in-memory array (the fallback)
- :mod:`~cvfs.core.layouts.memmap` -- ``np.memmap`` / ``h5py.Dataset`` read in row blocks
- :mod:`~cvfs.core.layouts.sparse` -- scipy.sparse CSR/CSC, never densified whole
- :mod:`~cvfs.core.layouts.dask` -- the row chunks of a ``dask.array.Array`` (tasks in
  :mod:`~cvfs.core.layouts._dask_tasks`)

The fit pipeline, :func:`cvfs.core.fsa.fsa_fit`, opens ``layout_for(X)`` on X and runs every
stage through it; ``docs/layouts.md`` shows how to add a layout.
"""

from cvfs.core.layouts.base import FirstPass, FitData, Layout, Passes
from cvfs.core.layouts.registry import (
    layout_for,
    register_layout,
    registered_layouts,
    unregister_layout,
)

__all__ = ["FirstPass", "FitData", "Layout", "Passes", "layout_for", "register_layout",
           "registered_layouts", "unregister_layout"]
