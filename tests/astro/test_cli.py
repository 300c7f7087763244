"""Readers (FITS, PNG) and the ``cvfs astro localise`` command."""

import numpy as np
import pytest

from cvfs import astro
from cvfs.astro.readers import read_catalogue, read_image, write_catalogue, write_fits
from cvfs.cli import main

fits = pytest.importorskip("astropy.io.fits")


@pytest.fixture
def scene():
    img, clean, truth = astro.make_scene((40, 44), n_sources=5, random_state=7)
    return img, truth


def test_fits_roundtrip_and_cube_error(tmp_path, scene):
    img, _ = scene
    p = tmp_path / "field.fits"
    write_fits(p, img, header={"OBJECT": "test"})
    np.testing.assert_array_equal(read_image(p), img)
    cube = tmp_path / "cube.fits"
    fits.PrimaryHDU(np.zeros((3, 8, 8))).writeto(cube)
    with pytest.raises(ValueError, match=r"got data of shape \(3, 8, 8\) \(a colour image"):
        read_image(cube)
    empty = tmp_path / "empty.fits"
    fits.PrimaryHDU().writeto(empty)
    with pytest.raises(ValueError, match="holds no image data"):
        read_image(empty)


def test_png_and_bad_files(tmp_path):
    import skimage.io

    rgb = np.zeros((10, 12, 3), np.uint8)
    rgb[4, 5] = 255
    skimage.io.imsave(tmp_path / "a.png", rgb, check_contrast=False)
    img = read_image(tmp_path / "a.png")
    assert img.shape == (10, 12) and img.max() == pytest.approx(1.0) and img.min() == 0.0
    colour = rgb.copy()
    colour[2, 3] = (200, 100, 50)
    skimage.io.imsave(tmp_path / "c.png", colour, check_contrast=False)
    with pytest.raises(ValueError, match="a colour image; pick the plane.*--channel"):
        read_image(tmp_path / "c.png")
    assert read_image(tmp_path / "c.png", channel="g")[2, 3] == pytest.approx(100 / 255)
    assert read_image(tmp_path / "c.png", channel="luminance")[2, 3] == pytest.approx(
        (0.2125 * 200 + 0.7154 * 100 + 0.0721 * 50) / 255)
    with pytest.raises(ValueError, match="channel must be one of"):
        read_image(tmp_path / "c.png", channel="red")
    out = tmp_path / "out_c"
    assert main(["astro", "denoise", str(tmp_path / "c.png"), "--out", str(out)]) == 2
    assert not out.exists()
    g16 = (np.arange(80, dtype=np.uint16).reshape(8, 10) * 500)
    skimage.io.imsave(tmp_path / "b.tif", g16, check_contrast=False)
    assert read_image(tmp_path / "b.tif").max() == pytest.approx(79 * 500 / 65535)
    with pytest.raises(FileNotFoundError, match="image file not found"):
        read_image(tmp_path / "none.fits")
    (tmp_path / "junk.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="not a readable image"):
        read_image(tmp_path / "junk.png")
    (tmp_path / "junk.fits").write_bytes(b"not a fits file at all")
    with pytest.raises(ValueError, match="not a readable FITS file|holds no image data"):
        read_image(tmp_path / "junk.fits")
    (tmp_path / "x.txt").write_text("1 2")
    with pytest.raises(ValueError, match="unknown image type '.txt'"):
        read_image(tmp_path / "x.txt")


def test_catalogue_csv_roundtrip(tmp_path, scene):
    _, truth = scene
    write_catalogue(tmp_path / "c.csv", truth)
    back = read_catalogue(tmp_path / "c.csv")
    for name in ("x", "y", "sigma"):
        np.testing.assert_allclose(back[name], truth[name], atol=1e-4)
    np.testing.assert_allclose(back["flux"], truth["flux"], rtol=1e-5)


def test_cli_denoise(tmp_path, scene, capsys):
    img, _ = scene
    p = tmp_path / "field.fits"
    write_fits(p, img)
    out = tmp_path / "den"
    assert main(["astro", "denoise", str(p), "--out", str(out), "--quiet", "--n-atoms",
                 "4000"]) == 0
    assert {"denoised.npy", "denoised.fits", "figure.png"} <= {f.name for f in out.iterdir()}
    clean = np.load(out / "denoised.npy")
    assert clean.shape == img.shape
    np.testing.assert_allclose(read_image(out / "denoised.fits"), clean)
    assert np.std(img - clean) < np.std(img)
    assert "denoised field.fits" in capsys.readouterr().out


def test_cli_localise_fits(tmp_path, scene, capsys):
    img, truth = scene
    p = tmp_path / "field.fits"
    write_fits(p, img)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet", "--n-atoms",
                 "4000"]) == 0
    assert {"catalogue.csv", "denoised.npy", "denoised.fits", "figure.png"} <= {
        f.name for f in out.iterdir()}
    cat = astro.leaves(read_catalogue(out / "catalogue.csv"))
    s = astro.detection_scores(cat, truth)
    assert s["f1"] == 1.0
    assert np.load(out / "denoised.npy").shape == img.shape
    assert "5 sources in field.fits" in capsys.readouterr().out


def test_cli_localise_hdu_mask_wcs_and_tables(tmp_path, scene, capsys):
    from astropy.table import Table
    from astropy.wcs import WCS

    img, truth = scene
    wcs = WCS(naxis=2)
    wcs.wcs.ctype = ["RA---TAN", "DEC--TAN"]
    wcs.wcs.crval = [150.0, 2.0]
    wcs.wcs.crpix = [1.0, 1.0]
    wcs.wcs.cdelt = [-1e-4, 1e-4]
    header = wcs.to_header()
    header["BUNIT"] = "adu"
    p = tmp_path / "field.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(img, header=header)]).writeto(p)
    m = np.zeros(img.shape)
    m[:, :3] = 1.0  # a masked border column strip
    mp = tmp_path / "mask.fits"
    fits.PrimaryHDU(m).writeto(mp)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(p), "--hdu", "1", "--mask", str(mp), "--jobs", "1",
                 "--out", str(out), "--quiet", "--n-atoms", "4000"]) == 0
    lines = (out / "catalogue.csv").read_text().splitlines()
    assert lines[0].split(",") == ["x", "y", "sigma", "flux", "x_err", "y_err", "flux_err",
                                   "snr", "extended", "flags", "id", "parent", "n_children",
                                   "ra", "dec"]
    cat = astro.leaves(read_catalogue(out / "catalogue.csv"))
    assert astro.detection_scores(cat, truth)["f1"] == 1.0
    ra, dec = wcs.pixel_to_world_values(cat["x"], cat["y"])
    np.testing.assert_allclose(cat["ra"], ra, atol=1e-7)
    np.testing.assert_allclose(cat["dec"], dec, atol=1e-7)
    tab = Table.read(out / "catalogue.fits")
    assert len(tab) == len(cat) and str(tab["x"].unit) == "pix" and str(tab["flux"].unit) == "adu"
    assert str(tab["ra"].unit) == "deg"
    den = fits.getheader(out / "denoised.fits")
    assert den["CTYPE1"] == "RA---TAN" and den["BUNIT"] == "adu"
    assert (out / "figure.png").is_file()
    capsys.readouterr()
    # a wrong HDU and a colour cube name what to do
    assert main(["astro", "localise", str(p), "--hdu", "5", "--out", str(out), "--quiet"]) == 2
    assert "hdu=5 is not an HDU" in capsys.readouterr().err
    rgb = tmp_path / "rgb.fits"
    fits.PrimaryHDU(np.zeros((3, 8, 8))).writeto(rgb)
    assert main(["astro", "localise", str(rgb), "--out", str(out), "--quiet"]) == 2
    assert "pick one channel" in capsys.readouterr().err


def test_cli_errors_keep_existing_outputs(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "catalogue.csv").write_text("old")  # the user's file: never replaced
    assert main(["astro", "localise", str(tmp_path / "none.png"), "--out", str(out)]) == 2
    assert "image file not found" in capsys.readouterr().err
    # NaN pixels are masked; an image with no finite pixel is an error
    bad = tmp_path / "nan.fits"
    write_fits(bad, np.full((16, 16), np.nan))
    assert main(["astro", "localise", str(bad), "--out", str(out), "--quiet"]) == 2
    assert "only NaN or infinite pixels" in capsys.readouterr().err
    assert (out / "catalogue.csv").read_text() == "old"
    assert main(["astro", "localise", str(tmp_path / "none.png"), "--out", str(out)]) == 2
    assert "image file not found" in capsys.readouterr().err
    cube = tmp_path / "cube.fits"
    fits.PrimaryHDU(np.zeros((2, 8, 8))).writeto(cube)
    assert main(["astro", "localise", str(cube), "--out", str(out)]) == 2
    assert "a cube" in capsys.readouterr().err
    const = tmp_path / "const.fits"
    write_fits(const, np.zeros((16, 16)))
    assert main(["astro", "localise", str(const), "--out", str(out)]) == 2
    assert "image is constant" in capsys.readouterr().err
    assert sorted(f.name for f in out.iterdir()) == ["catalogue.csv"]


@pytest.mark.slow
def test_cli_hubble_deep_field_256(tmp_path):
    """The acceptance run: ``cvfs astro localise`` on a 256 x 256 crop of the HDF (PNG)."""
    import skimage.io
    from skimage import data

    png = tmp_path / "hdf.png"
    skimage.io.imsave(png, data.hubble_deep_field()[:256, :256], check_contrast=False)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(png), "--channel", "luminance", "--out", str(out),
                 "--quiet"]) == 0
    cat = astro.leaves(read_catalogue(out / "catalogue.csv"))
    assert 150 <= len(cat) <= 900
    assert np.all((cat["x"] >= -0.5) & (cat["x"] < 255.5))
    # no duplicates across tile borders
    d = np.hypot(cat["x"][:, None] - cat["x"][None], cat["y"][:, None] - cat["y"][None])
    np.fill_diagonal(d, np.inf)
    assert d.min() > 0.3


def test_viz_functions_return_axes(tmp_path, scene):
    from cvfs.viz import save_figure
    from cvfs.viz.astro import (
        denoise_figure,
        plot_completeness,
        plot_detections,
        plot_lambda_sensitivity,
        plot_residual,
        source_figure,
    )

    img, truth = scene
    ax = plot_lambda_sensitivity([1, 4, 16], {"a": [0.5, 0.9, 1.0], "b": [0.4, 0.8, 0.9]},
                                 chosen=16)
    assert len(ax.get_lines()) == 3 and ax.get_xscale() == "log"
    axc = plot_completeness([10, 20, 40, 80], {"a": [0.2, 0.9, 1.0], "b": [np.nan, 0.5, 1.0]})
    assert len(axc.get_lines()) == 2 and axc.get_xscale() == "log"
    assert axc.get_legend() is not None and axc.get_xlabel() and axc.get_ylabel()
    ax2 = plot_detections(img, truth, truth, ax=None)
    assert len(ax2.patches) == len(truth)
    assert ax2.get_legend() is not None
    assert plot_residual(img, img, ax=ax2) is ax2
    save_figure(ax.figure, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 1000
    # the command line's figures: axes in pixels, a colour bar with the unit, a title
    for fig in (source_figure(img, truth, img, unit="counts"),
                denoise_figure(img, img, unit="counts")):
        image_axes = [a for a in fig.axes if a.get_images() and a.get_label() != "<colorbar>"]
        assert len(image_axes) == 3
        assert all(a.get_xlabel() == "x (pixel column)" for a in image_axes)
        colorbars = [a for a in fig.axes if a.get_label() == "<colorbar>"]
        assert len(colorbars) == 3 and colorbars[0].get_ylabel() == "counts"
        assert fig._suptitle is not None and fig._suptitle.get_text()
        save_figure(fig, tmp_path / "g.png")


@pytest.mark.slow
def test_demo_astro_part(tmp_path):
    from cvfs import demo

    text = demo.run(tmp_path, parts=["astro"], verbose=False)
    assert "Hubble Deep Field" in text
    assert (tmp_path / "astro_hdf.png").is_file() and (tmp_path / "astro_catalogue.csv").is_file()


def test_cli_levels_one_row_per_source_by_default(tmp_path, capsys):
    xs, ys, fl = np.array([20.0, 23.2]), np.array([20.0, 20.6]), np.array([3000.0, 1500.0])
    img = astro.render_psf((40, 44), xs, ys, 1.3, fl, background=10.0)
    img = img + np.random.default_rng(4).standard_normal(img.shape)
    p = tmp_path / "blend.fits"
    write_fits(p, img)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet"]) == 0
    cat = read_catalogue(out / "catalogue.csv")
    assert len(cat) == 2 and np.all(cat["n_children"] == 0)
    assert capsys.readouterr().out.startswith("2 sources in blend.fits")
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet", "--levels",
                 "all"]) == 0
    cat = read_catalogue(out / "catalogue.csv")
    assert len(cat) == 3 and cat["n_children"].max() == 2
    assert "2 sources (1 parent rows of blends)" in capsys.readouterr().out
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet", "--levels",
                 "objects"]) == 0
    assert len(read_catalogue(out / "catalogue.csv")) == 1
    assert "1 objects (1 blends of point sources)" in capsys.readouterr().out


def test_cli_saturation_from_the_header_and_the_option(tmp_path, capsys):
    from tests.astro.test_localise import _saturated_scene

    img, truth = _saturated_scene()
    p = tmp_path / "sat.fits"
    hdr = fits.Header()
    hdr["SATURATE"] = 65535.0
    fits.PrimaryHDU(img, header=hdr).writeto(p)
    out = tmp_path / "out"
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet"]) == 0
    cat = read_catalogue(out / "catalogue.csv")
    assert len(cat) == 8 and astro.detection_scores(cat, truth)["f1"] == 1.0
    assert np.any(cat["flags"] & astro.FLAGS["saturated"])
    assert capsys.readouterr().out.startswith("8 sources in sat.fits")
    # the option overrides the header: a level above every pixel masks nothing
    assert main(["astro", "localise", str(p), "--out", str(out), "--quiet", "--saturation",
                 "1e9"]) == 0
    assert not np.any(read_catalogue(out / "catalogue.csv")["flags"]
                      & astro.FLAGS["saturated"])


def test_catalogue_formats_read_without_options(tmp_path, scene):
    """ECSV, FITS and CSV catalogues: astropy reads all three, pandas the CSV, without options;
    ECSV and FITS carry the units and the pixel convention."""
    pd = pytest.importorskip("pandas")
    from astropy.table import Table

    img, _ = scene
    cat = astro.localise(img, n_atoms=4000, levels="all")
    paths = {}
    for suffix in ("ecsv", "fits", "csv"):
        paths[suffix] = tmp_path / f"c.{suffix}"
        write_catalogue(paths[suffix], cat, flux_unit="adu")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "c.ecsv", "c.fits"]
    for suffix, p in paths.items():
        tab = Table.read(p)
        assert tab.colnames == list(cat.dtype.names) and len(tab) == len(cat)
        for name in ("x", "y", "flux", "flags", "id", "parent", "n_children"):
            np.testing.assert_allclose(np.asarray(tab[name], float), cat[name], rtol=1e-5,
                                       atol=1e-4)
        np.testing.assert_array_equal(np.asarray(tab["extended"], bool), cat["extended"])
        back = read_catalogue(p)
        np.testing.assert_allclose(back["x"], cat["x"], atol=1e-4)
        np.testing.assert_array_equal(back["id"], cat["id"])
        if suffix != "csv":
            assert str(tab["x"].unit) == "pix" and str(tab["flux"].unit) == "adu"
    ecsv = Table.read(paths["ecsv"])
    assert ecsv.meta["pixel_origin"] == 0 and "0-based" in ecsv.meta["pixel_convention"]
    assert ecsv.meta["flags"]["saturated"] == astro.FLAGS["saturated"]
    hdr = fits.getheader(paths["fits"], 1)
    assert hdr["PIXORIG"] == 0 and hdr["XAXIS"] == "column" and hdr["FLUXUNIT"] == "adu"
    frame = pd.read_csv(paths["csv"])
    assert list(frame.columns) == list(cat.dtype.names) and len(frame) == len(cat)
    np.testing.assert_allclose(frame["flux"], cat["flux"], rtol=1e-5)
    assert not paths["csv"].read_text().startswith("#")
    with pytest.raises(ValueError, match="unknown catalogue format '.txt'"):
        write_catalogue(tmp_path / "c.txt", cat)
    with pytest.raises(ValueError, match="format must be"):
        write_catalogue(tmp_path / "c.dat", cat, format="votable")


def test_cli_header_warnings_are_shown_once(tmp_path, scene, capsys, caplog):
    """A FITS header with ESO HIERARCH keywords (astropy warns once per keyword when it is
    copied into denoised.fits): the command reports them in one line."""
    import logging

    img, _ = scene
    hdr = fits.Header()
    for i in range(12):
        hdr[f"HIERARCH ESO DET CHIP{i} ID"] = f"chip {i}"
    hdr["DATE-OBS"] = "2001-02-03"
    p = tmp_path / "eso.fits"
    fits.PrimaryHDU(img, header=hdr).writeto(p)
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        assert main(["astro", "localise", str(p), "--out", str(out), "--quiet", "--n-atoms",
                     "4000"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in (err + "\n" + caplog.text).splitlines()
             if "WARNING" in ln or "Warning:" in ln]
    assert len(lines) == 1 and "12 astropy warnings" in lines[0], lines
    assert fits.getheader(out / "denoised.fits")["ESO DET CHIP3 ID"] == "chip 3"


def test_cli_psf_option_reaches_the_settings():
    from cvfs.cli import handlers
    from cvfs.cli.parser import build_parser

    args = build_parser().parse_args(["astro", "localise", "x.fits", "--psf", "fitted"])
    assert handlers._astro_options(args)["settings"].psf == "fitted"
    args = build_parser().parse_args(["astro", "localise", "x.fits"])
    assert handlers._astro_options(args)["settings"].psf == "gaussian"
