"""The registry of FSA data layouts: which :class:`~cvfs.core.layouts.base.Layout` reads an X.

:func:`layout_for` asks the registered layouts, newest first, whether they accept X; the
built-in ones are, in that order, sparse (scipy.sparse), Dask (``dask.array.Array``), memmap
(``np.memmap`` and ``h5py.Dataset``) and dense (anything else). A layout registered with
:func:`register_layout` is asked before them.
"""

from cvfs.core.layouts.base import Layout
from cvfs.core.layouts.dask import DaskLayout
from cvfs.core.layouts.dense import DenseLayout
from cvfs.core.layouts.memmap import MemmapLayout
from cvfs.core.layouts.sparse import SparseLayout

__all__ = ["layout_for", "register_layout", "registered_layouts", "unregister_layout"]

# newest first; DenseLayout accepts everything, so it stays last
_LAYOUTS = [SparseLayout, DaskLayout, MemmapLayout, DenseLayout]


def register_layout(cls):
    """Register the :class:`~cvfs.core.layouts.base.Layout` subclass ``cls``: :func:`layout_for`
    asks it before every layout registered earlier. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    TypeError
        If ``cls`` is not a subclass of ``Layout``.
    """
    if not (isinstance(cls, type) and issubclass(cls, Layout)):
        raise TypeError(f"register_layout takes a subclass of cvfs.core.layouts.Layout, got "
                        f"{cls!r}")
    if cls in _LAYOUTS:
        _LAYOUTS.remove(cls)
    _LAYOUTS.insert(0, cls)
    return cls


def unregister_layout(cls):
    """Remove a layout added by :func:`register_layout` (the built-in dense layout stays)."""
    if cls is DenseLayout:
        raise ValueError("the dense layout is the fallback of every X and cannot be removed")
    if cls in _LAYOUTS:
        _LAYOUTS.remove(cls)


def registered_layouts():
    """The registered layout classes, in the order :func:`layout_for` asks them."""
    return tuple(_LAYOUTS)


def layout_for(X):
    """The layout class for X: the newest registered layout whose ``accepts(X)`` is true."""
    for cls in _LAYOUTS:
        if cls.accepts(X):
            return cls
    return DenseLayout
