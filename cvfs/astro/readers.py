"""Read astronomical images: FITS (astropy, optional extra ``astro``) and PNG/JPEG/TIFF.

FITS data keep their physical units (float64); 8/16-bit PNG/JPEG/TIFF are read by
:func:`cvfs.io.images.read_image` and become float luminance in [0, 1], as everywhere at cvfs' I/O
boundary.
"""

import contextlib
import logging
import warnings
from pathlib import Path

import numpy as np

from cvfs.io.images import IMAGE_SUFFIXES

__all__ = ["CATALOGUE_FORMATS", "CATALOGUE_UNITS", "FITS_SUFFIXES", "IMAGE_SUFFIXES",
           "PIXEL_CONVENTION", "header_warnings_once", "read_catalogue",
           "read_fits_header", "read_image", "write_catalogue", "write_catalogue_fits",
           "write_fits"]

FITS_SUFFIXES = (".fits", ".fit", ".fts", ".fits.gz", ".fit.gz")

log = logging.getLogger(__name__)


@contextlib.contextmanager
def header_warnings_once():
    """Collect astropy's warnings inside the block and log them as one line at its end.

    Ordinary headers carry keywords astropy warns about one by one (ESO HIERARCH keywords,
    non-standard cards, WCS fixes: ``VerifyWarning``, ``AstropyUserWarning``,
    ``FITSFixedWarning``); the keywords are kept as they are. Other warnings are passed on.
    """
    try:
        from astropy.utils.exceptions import AstropyWarning
    except ImportError:  # pragma: no cover - depends on the environment
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    ours = [w for w in caught if issubclass(w.category, AstropyWarning)]
    for w in caught:
        if not issubclass(w.category, AstropyWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if ours:
        kinds = sorted({w.category.__name__ for w in ours})
        first = str(ours[0].message).strip().splitlines()[0]
        log.warning("%d astropy warnings (%s) about non-standard FITS header keywords, kept as "
                    "they are; the first: %s", len(ours), ", ".join(kinds), first)


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


#: channels a colour PNG/JPEG/TIFF can be reduced to (``luminance``: ITU-R BT.709 weights)
CHANNELS = ("r", "g", "b", "luminance")


def _fits_hdu(hdul, hdu, path):
    """The HDU to read: ``hdul[hdu]``, or the first whose header declares data."""
    if hdu is None:
        with_data = [h for h in hdul if _header_shape(h.header, path)]
        return with_data[0] if with_data else hdul[0]
    try:
        return hdul[hdu]
    except (IndexError, KeyError) as exc:
        raise ValueError(f"hdu={hdu!r} is not an HDU of {path} (it has {len(hdul)})") from exc


def _header_shape(header, path):
    """The data shape a FITS header declares (NAXISn, slowest axis first); () for none."""
    try:
        naxis = int(header.get("NAXIS", 0))
        shape = tuple(int(header[f"NAXIS{i}"]) for i in range(naxis, 0, -1))
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a readable FITS file (bad NAXIS keywords: {exc})") from exc
    if any(d < 0 for d in shape):
        raise ValueError(f"{path}: not a readable FITS file (negative NAXISn {shape})")
    return shape if shape and all(shape) else ()


def _fits_error(path, exc):
    """A one-line ValueError for an exception astropy raised reading ``path``."""
    if isinstance(exc, KeyError) and isinstance(exc.args[0], int):
        why = f"unsupported BITPIX {exc.args[0]} (FITS allows 8, 16, 32, 64, -32, -64)"
    elif isinstance(exc, KeyError):
        why = f"missing header keyword {exc.args[0]}"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return ValueError(f"{path}: not a readable FITS file ({why})")


@contextlib.contextmanager
def _fits_open(path):
    """``fits.open`` of ``path`` headers first (data read on access), its errors one line."""
    import warnings

    fits = _astropy_fits()
    try:
        with warnings.catch_warnings():
            # "file may have been truncated": the size check or the data read reports it
            warnings.simplefilter("ignore")
            with fits.open(path, memmap=False, lazy_load_hdus=True) as hdul:
                yield hdul
    except (OSError, TypeError, KeyError, IndexError, EOFError) as exc:
        raise _fits_error(path, exc) from exc


def _check_fits_length(path, hdu, shape):
    """Refuse an uncompressed FITS file shorter than the data its header declares."""
    if path.name.lower().endswith(".gz"):
        return
    try:
        info = hdu.fileinfo()
        bitpix = abs(int(hdu.header["BITPIX"]))
    except (AttributeError, KeyError, TypeError, ValueError):
        return
    if bitpix not in (8, 16, 32, 64):
        raise ValueError(f"{path}: not a readable FITS file (unsupported BITPIX "
                         f"{hdu.header['BITPIX']}; FITS allows 8, 16, 32, 64, -32, -64)")
    if info is None:
        return
    need = int(info["datLoc"]) + int(np.prod(shape, dtype=object)) * bitpix // 8
    if path.stat().st_size < need:
        raise ValueError(f"{path}: truncated FITS file (the header declares data of shape "
                         f"{shape}, {need:,} bytes with the header; the file has "
                         f"{path.stat().st_size:,})")


def _read_fits_data(path, hdu, max_pixels):
    """The data of one FITS HDU as float64, its declared size checked before reading."""
    from cvfs.io.images import check_pixels

    with _fits_open(path) as hdul:
        h = _fits_hdu(hdul, hdu, path)
        shape = _header_shape(h.header, path)
        if not shape:
            return None
        check_pixels(path, shape, max_pixels)  # before any data is read
        _check_fits_length(path, h, shape)
        try:
            data = h.data
            return None if data is None else np.array(data, dtype=np.float64)
        except MemoryError as exc:
            raise ValueError(f"{path}: not enough memory to read FITS data of shape {shape} "
                             "as float64") from exc
        except (ValueError, OSError, TypeError, KeyError, IndexError, EOFError) as exc:
            if isinstance(exc, ValueError) and "reshape" in str(exc):
                raise ValueError(f"{path}: truncated FITS file (the header declares data of "
                                 f"shape {shape}; the file ends before it)") from exc
            raise _fits_error(path, exc) from exc


def read_image(path, hdu=None, channel=None, *, max_pixels=None):
    """Read a 2-D image from a FITS, PNG, JPEG or TIFF file.

    Parameters
    ----------
    path : str or Path
    hdu : int, optional
        FITS extension to read; by default the first one holding data.
    channel : {"r", "g", "b", "luminance"}, optional
        The plane of a colour PNG/JPEG/TIFF to measure. Required for colour files (a colour
        picture is not a calibrated intensity; say which plane to use); ignored for grey ones.
    max_pixels : int, optional
        Largest image (width x height) read, checked from the header (FITS: NAXIS1 x NAXIS2)
        before any data is decoded; 0 = no limit. Default
        :func:`cvfs.io.images.current_pixel_limit` (150 million unless raised).

    Returns
    -------
    ndarray of shape (height, width), float64

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the suffix is unknown, the header claims more pixels than the limit, the file
        cannot be decoded, holds no image data, or holds a
        cube (3-D data) rather than one 2-D plane, or is a colour image and ``channel`` is not
        given.
    ImportError
        For FITS files when astropy is not installed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    if _is_fits(path):
        data = _read_fits_data(path, hdu, max_pixels)
        if data is None or data.size == 0:
            raise ValueError(f"{path}: the FITS file holds no image data")
        data = np.squeeze(data)
        if data.ndim == 3 and 3 in (data.shape[0], data.shape[-1]):
            raise ValueError(f"{path}: expected a 2-D image, got data of shape {data.shape} "
                             "(a colour image or a cube: pick one channel, e.g. write "
                             "data[0] to its own FITS file, or pass the HDU of one plane "
                             "with --hdu)")
        if data.ndim != 2:
            raise ValueError(f"{path}: expected a 2-D image, got data of shape {data.shape} "
                             "(a cube: extract one plane first, or pass the HDU of one plane "
                             "with --hdu)")
        return data
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ValueError(f"{path}: unknown image type {path.suffix!r}; expected one of "
                         f"{FITS_SUFFIXES + IMAGE_SUFFIXES}")
    from cvfs.io.images import read_image as read_raster

    if channel is not None and channel not in CHANNELS:
        raise ValueError(f"channel must be one of {CHANNELS}; got {channel!r}")
    data = read_raster(path, mode="float", max_pixels=max_pixels)
    if data.ndim == 3 and (np.array_equal(data[..., 0], data[..., 1])
                           and np.array_equal(data[..., 1], data[..., 2])):
        data = data[..., 0]  # a grey picture stored as RGB
    if data.ndim == 2:
        return data
    if channel is None:
        raise ValueError(f"{path}: a colour image; pick the plane to measure with "
                         f"channel= one of {CHANNELS} (CLI: --channel r|g|b|luminance)")
    if channel == "luminance":
        from skimage.color import rgb2gray

        return rgb2gray(data)
    return np.ascontiguousarray(data[..., "rgb".index(channel)])


def write_fits(path, data, header=None):
    """Write a 2-D array as a FITS primary HDU, atomically.

    Parameters
    ----------
    path : str or Path
    data : ndarray of shape (height, width)
    header : dict or astropy.io.fits.Header, optional
        Keywords to set (an input image's header keeps its WCS; the data keywords BITPIX,
        NAXIS*, BSCALE, BZERO follow ``data``).
    """
    from cvfs.io import atomic_path

    fits = _astropy_fits()
    hdu = fits.PrimaryHDU(np.asarray(data, dtype=np.float64))
    skip = {"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "NAXIS1", "NAXIS2", "EXTEND", "PCOUNT",
            "GCOUNT", "BSCALE", "BZERO", "BLANK", "END"}
    cards = header.cards if hasattr(header, "cards") else (header or {}).items()
    for card in cards:
        k, v = (card.keyword, card.value) if hasattr(card, "keyword") else card
        if k in skip or k.startswith("NAXIS") or k in ("COMMENT", "HISTORY", ""):
            continue
        try:
            hdu.header[k] = v
        except (ValueError, KeyError):  # a non-standard card: left out
            continue
    with atomic_path(path, suffix=".fits") as tmp:
        hdu.writeto(tmp, overwrite=True)


#: unit of each catalogue field (flux fields in the image's data unit)
CATALOGUE_UNITS = {"x": "pix", "y": "pix", "sigma": "pix", "flux": "data", "x_err": "pix",
                   "y_err": "pix", "flux_err": "data", "snr": "", "extended": "", "flags": "",
                   "id": "", "parent": "", "n_children": "", "ra": "deg", "dec": "deg"}

#: the pixel convention of catalogue positions, as written into ECSV and FITS metadata
PIXEL_CONVENTION = ("0-based pixel coordinates, pixel centres at integers: the centre of the "
                    "first pixel is (0, 0), x = column, y = row (add 1 for FITS/DS9 1-based "
                    "coordinates)")

#: catalogue file formats by suffix
CATALOGUE_FORMATS = {".ecsv": "ecsv", ".fits": "fits", ".fit": "fits", ".csv": "csv"}


def _unit(name, flux_unit):
    u = CATALOGUE_UNITS.get(name, "")
    return flux_unit if u == "data" else u


def _catalogue_format(path, format):
    if format is None:
        suffix = Path(path).suffix.lower()
        if suffix not in CATALOGUE_FORMATS:
            raise ValueError(f"{path}: unknown catalogue format {suffix!r}; use one of "
                             f"{', '.join(CATALOGUE_FORMATS)} or pass format=")
        return CATALOGUE_FORMATS[suffix]
    if format not in ("ecsv", "fits", "csv"):
        raise ValueError(f"format must be 'ecsv', 'fits' or 'csv'; got {format!r}")
    return format


def write_catalogue(path, catalogue, *, flux_unit="data value", format=None):
    """Write a source catalogue atomically as ECSV, a FITS table or plain CSV.

    The format follows the suffix (``.ecsv``, ``.fits``, ``.csv``) unless ``format`` is given.
    ECSV and FITS carry the unit of every column and, in their metadata, the pixel convention
    (:data:`PIXEL_CONVENTION`: 0-based, pixel centres at integers, x = column) and the flag bits;
    ``astropy.table.Table.read`` reads them with their units. CSV is one header line of column
    names and one row per source (no comment lines), so ``pandas.read_csv`` and
    ``astropy.table.Table.read`` read it without options; its units are those of
    :data:`CATALOGUE_UNITS`.

    Parameters
    ----------
    path : str or Path
    catalogue : structured ndarray with fields x, y, sigma, flux (and any of x_err, y_err,
        flux_err, snr, extended, flags, id, parent, n_children, ra, dec)
    flux_unit : str
        Unit of flux and flux_err (the image's data unit); in the FITS table's column units
        when astropy understands it (e.g. a BUNIT), else in its metadata.
    format : {"ecsv", "fits", "csv"}, optional

    Raises
    ------
    ValueError
        If the suffix or ``format`` is not a catalogue format.
    ImportError
        For ECSV and FITS when astropy is not installed.
    """
    fmt = _catalogue_format(path, format)
    if fmt == "csv":
        return _write_csv(path, catalogue)
    if fmt == "fits":
        return write_catalogue_fits(path, catalogue, flux_unit=flux_unit)
    from cvfs.io import atomic_path

    tab = _catalogue_table(catalogue, flux_unit, fits=False)
    with atomic_path(path, suffix=".ecsv") as tmp:
        tab.write(tmp, format="ascii.ecsv", overwrite=True)


def _write_csv(path, catalogue):
    from cvfs.io import atomic_write_text

    names = list(catalogue.dtype.names)
    fmt = {"x": ".4f", "y": ".4f", "sigma": ".4f", "x_err": ".4g", "y_err": ".4g",
           "ra": ".8f", "dec": ".8f"}

    def cell(n, v):
        if catalogue.dtype[n].kind in "biu":
            return str(int(v))
        return format(float(v), fmt.get(n, ".6g"))

    lines = [",".join(names)]
    lines += [",".join(cell(n, s[n]) for n in names) for s in catalogue]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _catalogue_table(catalogue, flux_unit, fits):
    """An astropy Table of a catalogue: column units and the metadata of the file formats."""
    try:
        from astropy import units as u
        from astropy.table import Table
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("writing ECSV or FITS catalogues needs astropy: pip install "
                          "'cvfs[astro]' (or pip install astropy)") from exc
    from cvfs.astro.catalogue import FLAGS

    try:
        fu = u.Unit(flux_unit) if flux_unit else None
    except ValueError:
        fu = None
    tab = Table(np.asarray(catalogue))
    for n in tab.colnames:
        unit = CATALOGUE_UNITS.get(n, "")
        if unit == "data":
            tab[n].unit = fu
        elif unit:
            tab[n].unit = u.Unit(unit)
    flags = ", ".join(f"{k}={v}" for k, v in FLAGS.items())
    if fits:
        # FITS keywords: 8 characters, values on one card
        tab.meta["PIXORIG"] = (0, "pixel coordinates are 0-based")
        tab.meta["PIXCENT"] = ("integer", "pixel centres at integer coordinates")
        tab.meta["XAXIS"] = ("column", "x is the column, y the row")
        tab.meta["FLUXUNIT"] = (str(flux_unit or ""), "unit of flux and flux_err")
        tab.meta["COMMENT"] = [PIXEL_CONVENTION, f"flag bits: {flags}"]
    else:
        tab.meta["pixel_convention"] = PIXEL_CONVENTION
        tab.meta["pixel_origin"] = 0
        tab.meta["flux_unit"] = str(flux_unit or "")
        tab.meta["flags"] = dict(FLAGS)
    return tab


def write_catalogue_fits(path, catalogue, *, flux_unit=None):
    """Write a source catalogue as a FITS binary table, atomically (astropy Table).

    Column units as :data:`CATALOGUE_UNITS`; the header states the pixel convention (PIXORIG = 0,
    PIXCENT, XAXIS and a COMMENT with :data:`PIXEL_CONVENTION`), FLUXUNIT and the flag bits.

    Parameters
    ----------
    path : str or Path
    catalogue : structured ndarray
    flux_unit : str, optional
        Unit of flux and flux_err understood by astropy (e.g. the image's BUNIT); no column unit
        when None or not understood (FLUXUNIT holds it as given).
    """
    import warnings

    from cvfs.io import atomic_path

    tab = _catalogue_table(catalogue, flux_unit, fits=True)
    with atomic_path(path, suffix=".fits") as tmp, warnings.catch_warnings():
        # units astropy writes in their generic form (``pix``) are read back as they are
        warnings.simplefilter("ignore", category=_astropy_unit_warning())
        tab.write(tmp, format="fits", overwrite=True)


def _astropy_unit_warning():
    from astropy.units import UnitsWarning

    return UnitsWarning


def read_fits_header(path, hdu=None):
    """The header of the FITS HDU :func:`read_image` reads (the first with data by default)."""
    with _fits_open(path) as hdul:
        return _fits_hdu(hdul, hdu, path).header.copy()


def read_catalogue(path):
    """Read a catalogue written by :func:`write_catalogue` (ECSV, FITS or CSV, by suffix).

    Returns
    -------
    structured ndarray
        The columns of the file (:func:`cvfs.astro.catalogue.catalogue_dtype` fields; x, y,
        sigma, flux at least).
    """
    from cvfs.astro.catalogue import catalogue_dtype

    full = catalogue_dtype(sky=True)
    fmt = CATALOGUE_FORMATS.get(Path(path).suffix.lower(), "csv")
    if fmt != "csv":
        from astropy.table import Table

        tab = Table.read(path, format="ascii.ecsv" if fmt == "ecsv" else "fits")
        names = tab.colnames
        dtype = np.dtype([(n, full[n] if n in full.names else "f8") for n in names])
        out = np.zeros(len(tab), dtype)
        for n in names:
            out[n] = np.asarray(tab[n])
        return out
    with open(path) as fh:
        lines = [ln for ln in fh.read().splitlines() if ln and not ln.startswith("#")]
    names = lines[0].split(",")
    dtype = np.dtype([(n, full[n] if n in full.names else "f8") for n in names])
    out = np.zeros(len(lines) - 1, dtype)
    for i, ln in enumerate(lines[1:]):
        for n, v in zip(names, ln.split(","), strict=True):
            out[i][n] = bool(int(v)) if dtype[n].kind == "b" else v
    return out
