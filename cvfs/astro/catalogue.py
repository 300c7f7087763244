"""The output catalogue of :func:`cvfs.astro.localise`: its fields, flag bits and sky coordinates.

:data:`cvfs.astro.CATALOGUE_DTYPE` (x, y, sigma, flux) is the minimal catalogue that scenes and the
evaluation functions use; :func:`catalogue_dtype` adds the uncertainties, the extended/point
decision, the flags and, with a WCS, the sky coordinates. Evaluation functions read fields by
name, so they accept both.
"""

import numpy as np

from cvfs.astro.simulate import CATALOGUE_DTYPE

__all__ = ["FLAG_AT_BOUND", "FLAG_BLENDED", "FLAG_CAPPED", "FLAG_EDGE", "FLAG_MASKED", "FLAGS",
           "catalogue_dtype", "empty_catalogue", "add_sky_coordinates"]

#: the object's footprint touches the image border, or a point source lies within 3 sigma of it
FLAG_EDGE = 1
#: the object was fitted with more than one point source (a blend of several rows)
FLAG_BLENDED = 2
#: a fitted parameter (width or position) is at its bound; its uncertainty is not reliable
FLAG_AT_BOUND = 4
#: masked (or NaN) pixels lie within the object's footprint, or within 3 sigma of a point source
FLAG_MASKED = 8
#: the object needed more point sources than ``max_sources`` and is reported as extended
FLAG_CAPPED = 16

#: flag name -> bit
FLAGS = {"edge": FLAG_EDGE, "blended": FLAG_BLENDED, "at_bound": FLAG_AT_BOUND,
         "masked": FLAG_MASKED, "capped": FLAG_CAPPED}

_EXTRA = [("x_err", "f8"), ("y_err", "f8"), ("flux_err", "f8"), ("snr", "f8"),
          ("extended", "?"), ("flags", "i4")]


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
        deviation), snr (flux / flux_err), extended (bool), flags (int, bits of :data:`FLAGS`)
        and optionally ra, dec.
    """
    fields = CATALOGUE_DTYPE.descr + _EXTRA
    if sky:
        fields += [("ra", "f8"), ("dec", "f8")]
    return np.dtype(fields)


def empty_catalogue(n, sky=False):
    """A full catalogue of ``n`` rows, uncertainties NaN, flags 0."""
    cat = np.zeros(n, catalogue_dtype(sky))
    for name in ("x_err", "y_err", "flux_err", "snr"):
        cat[name] = np.nan
    return cat


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
