"""Read astronomical images: FITS (astropy, optional extra ``astro``) and PNG/JPEG/TIFF.

FITS data keep their physical units (float64); 8/16-bit PNG/JPEG/TIFF are read by
:func:`cvfs.io.images.read_image` and become float luminance in [0, 1], as everywhere at cvfs' I/O
boundary.
"""

from pathlib import Path

import numpy as np

from cvfs.io.images import IMAGE_SUFFIXES

__all__ = ["FITS_SUFFIXES", "IMAGE_SUFFIXES", "read_catalogue", "read_image", "write_catalogue",
           "write_fits"]

FITS_SUFFIXES = (".fits", ".fit", ".fts", ".fits.gz", ".fit.gz")


def _astropy_fits():
    try:
        from astropy.io import fits
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "reading FITS files needs astropy: pip install 'cvfs[astro]' (or pip install astropy)"
        ) from exc
    return fits


def _is_fits(path):
    name = path.name.lower()
    return any(name.endswith(s) for s in FITS_SUFFIXES)


def read_image(path, hdu=None):
    """Read a 2-D image from a FITS, PNG, JPEG or TIFF file.

    Parameters
    ----------
    path : str or Path
    hdu : int, optional
        FITS extension to read; by default the first one holding data.

    Returns
    -------
    ndarray of shape (height, width), float64

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the suffix is unknown, the file cannot be decoded, holds no image data, or holds a
        cube (3-D data) rather than one 2-D plane.
    ImportError
        For FITS files when astropy is not installed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    if _is_fits(path):
        fits = _astropy_fits()
        try:
            with fits.open(path, memmap=False) as hdul:
                if hdu is None:
                    datas = [h.data for h in hdul if getattr(h, "data", None) is not None]
                    data = datas[0] if datas else None
                else:
                    data = hdul[hdu].data
                data = None if data is None else np.array(data, dtype=np.float64)
        except (OSError, TypeError, IndexError) as exc:
            raise ValueError(f"{path}: not a readable FITS file ({exc})") from exc
        if data is None or data.size == 0:
            raise ValueError(f"{path}: the FITS file holds no image data")
        data = np.squeeze(data)
        if data.ndim != 2:
            raise ValueError(f"{path}: expected a 2-D image, got data of shape {data.shape} "
                             "(a cube: extract one plane first)")
        return data
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ValueError(f"{path}: unknown image type {path.suffix!r}; expected one of "
                         f"{FITS_SUFFIXES + IMAGE_SUFFIXES}")
    from cvfs.io.images import read_image as read_raster

    return read_raster(path, mode="grey")


def write_fits(path, data, header=None):
    """Write a 2-D array as a FITS primary HDU, atomically.

    Parameters
    ----------
    path : str or Path
    data : ndarray of shape (height, width)
    header : dict, optional
        Keywords to set.
    """
    from cvfs.io import atomic_path

    fits = _astropy_fits()
    hdu = fits.PrimaryHDU(np.asarray(data, dtype=np.float64))
    for k, v in (header or {}).items():
        hdu.header[k] = v
    with atomic_path(path, suffix=".fits") as tmp:
        hdu.writeto(tmp, overwrite=True)


def write_catalogue(path, catalogue):
    """Write a source catalogue as CSV (header ``x,y,sigma,flux``), atomically.

    Parameters
    ----------
    path : str or Path
    catalogue : structured ndarray with fields x, y, sigma, flux
    """
    from cvfs.io import atomic_write_text

    lines = ["x,y,sigma,flux"]
    lines += [f"{s['x']:.4f},{s['y']:.4f},{s['sigma']:.4f},{s['flux']:.6g}" for s in catalogue]
    atomic_write_text(path, "\n".join(lines) + "\n")


def read_catalogue(path):
    """Read a catalogue written by :func:`write_catalogue`.

    Returns
    -------
    structured ndarray with fields x, y, sigma, flux
    """
    from cvfs.astro.simulate import CATALOGUE_DTYPE

    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    out = np.zeros(len(data), CATALOGUE_DTYPE)
    for i, name in enumerate(CATALOGUE_DTYPE.names):
        out[name] = data[:, i] if len(data) else []
    return out
