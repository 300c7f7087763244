"""The shared solver core: arrays in, arrays out; no images, no files.

- :mod:`cvfs.core.losses` -- losses on scores (value and gradient with respect to the score)
- :mod:`cvfs.core.responses` -- linear and piecewise-linear responses (feature -> basis)
- :mod:`cvfs.core.priors` -- per-group priors (shrinkage, second-order smoothness)
- :mod:`cvfs.core.schedules` -- the annealing schedule of FSA (paper eq. 3)
- :mod:`cvfs.core.fsa` -- the FSA solver
- :mod:`cvfs.core.layouts` -- the data layouts the FSA solver reads X through (dense, memmap /
  HDF5 row blocks, scipy.sparse, Dask) and their registry
"""
