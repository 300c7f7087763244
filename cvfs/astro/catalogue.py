"""The output catalogue of :func:`cvfs.astro.localise`: its fields, flag bits and sky coordinates.

:data:`cvfs.astro.CATALOGUE_DTYPE` (x, y, sigma, flux) is the minimal catalogue that scenes and the
evaluation functions use; :func:`catalogue_dtype` adds the uncertainties, the extended/point
decision, the flags, the deblending hierarchy and, with a WCS, the sky coordinates. Evaluation
functions read fields by name, so they accept both.

Deblending hierarchy (as SExtractor's deblending tree and the parent/child model of the LSST and
HSC pipelines): a deblended object (a part of a detected segment) fitted with two or more point
sources is kept as a *parent* row (isophotal centroid and flux of its pixels, ``n_children`` > 0)
and each of its point sources as a *child* row whose ``parent`` is the parent's ``id``. Every other
row has ``parent`` 0 and ``n_children`` 0. The *leaves* (``n_children == 0``, :func:`leaves`) are
the deblended catalogue, one row per source; the *top level* (``parent == 0``) is one row per
deblended object, as a catalogue without deblending of point sources would have it.
:func:`cvfs.astro.localise` returns the leaves unless asked for ``levels="objects"`` or
``"all"``; ids are those of the full catalogue at every level, so a source's ``parent`` names its
blend's row in the ``"all"`` catalogue.
"""

import numpy as np

from cvfs.astro.simulate import CATALOGUE_DTYPE

__all__ = ["FLAG_AT_BOUND", "FLAG_BLENDED", "FLAG_CAPPED", "FLAG_EDGE", "FLAG_MASKED",
           "FLAG_SATURATED", "FLAGS",
           "catalogue_dtype", "empty_catalogue", "from_rows", "add_sky_coordinates", "leaves",
           "link_families", "select_levels", "top_level"]

#: the object's footprint touches the image border, or a point source lies within 3 sigma of it
FLAG_EDGE = 1
#: the object was fitted with more than one point source (a blend of several rows); a parent row
#: carries it too
FLAG_BLENDED = 2
#: a fitted parameter (width or position) is at its bound; its uncertainty is not reliable
FLAG_AT_BOUND = 4
#: masked (or NaN) pixels lie within the object's footprint, or within 3 sigma of a point source
FLAG_MASKED = 8
#: the object needed more point sources than ``max_sources`` per tile and is reported as extended
FLAG_CAPPED = 16
#: saturated pixels (at or above ``saturation=``) lie within the object's footprint grown by
#: 2 px; they are masked (so FLAG_MASKED is set too) and the fit uses the unsaturated wings
FLAG_SATURATED = 32

#: flag name -> bit
FLAGS = {"edge": FLAG_EDGE, "blended": FLAG_BLENDED, "at_bound": FLAG_AT_BOUND,
         "masked": FLAG_MASKED, "capped": FLAG_CAPPED, "saturated": FLAG_SATURATED}

_EXTRA = [("x_err", "f8"), ("y_err", "f8"), ("flux_err", "f8"), ("snr", "f8"),
          ("extended", "?"), ("flags", "i4"), ("id", "i4"), ("parent", "i4"),
          ("n_children", "i4")]


def catalogue_dtype(sky=False):
    """The dtype of a full catalogue.

    Parameters
    ----------
    sky : bool
        Add ``ra`` and ``dec`` (degrees).

    Returns
    -------
    numpy.dtype
        Fields x, y, sigma, flux (as :data:`CATALOGUE_DTYPE`), x_err, y_err, flux_err (one standard
        deviation), snr (flux / flux_err), extended (bool), flags (int, bits of :data:`FLAGS`),
        id (row number from 1), parent (id of the parent row, 0 for none), n_children (rows
        whose parent this row is) and optionally ra, dec.
    """
    fields = CATALOGUE_DTYPE.descr + _EXTRA
    if sky:
        fields += [("ra", "f8"), ("dec", "f8")]
    return np.dtype(fields)


def empty_catalogue(n, sky=False):
    """A full catalogue of ``n`` rows, uncertainties NaN, flags 0, ids 1..n, no parents."""
    cat = np.zeros(n, catalogue_dtype(sky))
    for name in ("x_err", "y_err", "flux_err", "snr"):
        cat[name] = np.nan
    cat["id"] = np.arange(1, n + 1)
    return cat


def leaves(catalogue):
    """The deblended rows of a catalogue (``n_children == 0``): one row per source.

    A catalogue without the ``n_children`` field is returned as it is.
    """
    if catalogue.dtype.names is None or "n_children" not in catalogue.dtype.names:
        return catalogue
    return catalogue[catalogue["n_children"] == 0]


def select_levels(catalogue, levels):
    """The rows of a full catalogue at ``levels``: ``"sources"`` (:func:`leaves`), ``"objects"``
    (:func:`top_level`) or ``"all"`` (every row). Ids are kept, so a row has the same ``id`` at
    every level."""
    if levels == "sources":
        return leaves(catalogue)
    if levels == "objects":
        return top_level(catalogue)
    if levels == "all":
        return catalogue
    raise ValueError(f"levels must be 'sources', 'objects' or 'all'; got {levels!r}")


def top_level(catalogue):
    """The rows without a parent (``parent == 0``): one row per deblended object.

    A catalogue without the ``parent`` field is returned as it is.
    """
    if catalogue.dtype.names is None or "parent" not in catalogue.dtype.names:
        return catalogue
    return catalogue[catalogue["parent"] == 0]


def link_families(cat, fam):
    """Set ``id`` (1..n in row order), ``parent`` and ``n_children`` of a catalogue whose parent
    rows have ``fam`` k > 0 and their children -k (0: no family). A parent left with fewer than
    two children (the others were outside the frame) is dropped and its child becomes a plain
    row."""
    cat = cat.copy()
    cat["id"] = np.arange(1, len(cat) + 1)
    ids = np.zeros(int(np.abs(fam).max(initial=0)) + 1, np.int64)
    ids[fam[fam > 0]] = cat["id"][fam > 0]
    kid = fam < 0
    cat["parent"] = 0
    cat["parent"][kid] = ids[-fam[kid]]
    cat["n_children"] = np.bincount(cat["parent"], minlength=len(cat) + 1)[cat["id"]]
    lone = (fam > 0) & (cat["n_children"] < 2)
    if not lone.any():
        return cat
    cat["parent"][np.isin(cat["parent"], cat["id"][lone])] = 0
    cat = cat[~lone]
    remap = np.zeros(len(lone) + 1, np.int64)
    remap[cat["id"]] = np.arange(1, len(cat) + 1)
    cat["id"] = remap[cat["id"]]
    cat["parent"] = remap[cat["parent"]]
    cat["n_children"] = np.bincount(cat["parent"], minlength=len(cat) + 1)[cat["id"]]
    return cat


def from_rows(rows, shape):
    """The catalogue of fitted rows (x, y, sigma, flux, x_err, y_err, flux_err, extended, flags,
    family; family k > 0 for a parent row, -k for its children, 0 for none), rows outside the
    image of ``shape`` dropped, sorted by decreasing flux, families linked
    (:func:`link_families`)."""
    h, w = shape
    cat = empty_catalogue(len(rows))
    if not len(rows):
        return cat
    arr = np.array(rows, dtype=np.float64)
    for j, name in enumerate(("x", "y", "sigma", "flux", "x_err", "y_err", "flux_err")):
        cat[name] = arr[:, j]
    cat["extended"] = arr[:, 7] > 0
    cat["flags"] = arr[:, 8].astype(np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        cat["snr"] = cat["flux"] / cat["flux_err"]
    inside = (cat["x"] >= -0.5) & (cat["x"] < w - 0.5) & (cat["y"] >= -0.5) \
        & (cat["y"] < h - 0.5)
    fam = arr[:, 9].astype(np.int64)
    order = np.argsort(-cat["flux"][inside], kind="stable")
    return link_families(cat[inside][order], fam[inside][order])


def add_sky_coordinates(catalogue, wcs):
    """A copy of ``catalogue`` with ``ra`` and ``dec`` from a WCS.

    Parameters
    ----------
    catalogue : structured ndarray with fields x, y
        0-based pixel coordinates (x = column).
    wcs : astropy.wcs.WCS
        A celestial WCS of the image (``pixel_to_world_values`` is used).

    Returns
    -------
    structured ndarray of :func:`catalogue_dtype` (sky=True)

    Raises
    ------
    ValueError
        If ``wcs`` has no ``pixel_to_world_values`` or is not two-dimensional.
    """
    if not hasattr(wcs, "pixel_to_world_values"):
        raise ValueError(f"wcs must be an astropy.wcs.WCS (or follow its API); got "
                         f"{type(wcs).__name__}")
    if getattr(wcs, "pixel_n_dim", 2) != 2:
        raise ValueError(f"wcs must have 2 pixel axes; got {wcs.pixel_n_dim}")
    out = np.zeros(len(catalogue), catalogue_dtype(sky=True))
    for name in catalogue.dtype.names:
        out[name] = catalogue[name]
    if len(out):
        world = wcs.pixel_to_world_values(out["x"], out["y"])
        out["ra"], out["dec"] = np.asarray(world[0], float), np.asarray(world[1], float)
    return out
