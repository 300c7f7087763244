"""Every kind of photo file read as RGB uint8, and folder sources that skip unreadable files."""

import cv2
import numpy as np
import pytest
from PIL import Image

from cvfs.io.images import read_image
from cvfs.io.video import open_source

RGB = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
GREY = RGB[..., 1]


def _write(path, kind):
    """A tiny photo of ``kind``; returns the RGB uint8 expected from reading it."""
    if kind == "grey8":
        Image.fromarray(GREY).save(path)
        return np.repeat(GREY[..., None], 3, axis=2)
    if kind == "grey16":
        Image.fromarray(GREY.astype(np.uint16) * 257).save(path)
        return np.repeat(GREY[..., None], 3, axis=2)
    if kind == "rgb16":
        cv2.imwrite(str(path), (RGB.astype(np.uint16) * 257)[..., ::-1])
        return RGB
    if kind == "rgba":
        Image.fromarray(np.dstack([RGB, np.full(GREY.shape, 90, np.uint8)])).save(path)
        return RGB
    if kind == "grey_alpha":
        Image.fromarray(np.dstack([GREY, np.full(GREY.shape, 90, np.uint8)]), "LA").save(path)
        return np.repeat(GREY[..., None], 3, axis=2)
    if kind == "palette":
        pal = Image.fromarray(RGB).convert("P", palette=Image.ADAPTIVE, colors=16)
        pal.save(path)
        return np.asarray(pal.convert("RGB"))
    if kind == "bilevel":
        Image.fromarray(GREY > 128).save(path)
        return np.repeat(np.where(GREY > 128, 255, 0).astype(np.uint8)[..., None], 3, axis=2)
    if kind == "float":
        Image.fromarray(GREY.astype(np.float32) / 255, "F").save(path)
        return np.repeat(GREY[..., None], 3, axis=2)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind, suffix", [
    ("grey8", ".png"), ("grey16", ".png"), ("rgb16", ".png"), ("rgba", ".png"),
    ("grey_alpha", ".png"), ("palette", ".png"), ("palette", ".bmp"), ("bilevel", ".png"),
    ("float", ".tif"),
])
def test_read_any_photo_as_rgb8(tmp_path, kind, suffix):
    path = tmp_path / f"{kind}{suffix}"
    expected = _write(path, kind)
    got = read_image(path)
    assert got.shape == (30, 40, 3) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, expected)


def test_float_file_outside_unit_range(tmp_path):
    path = tmp_path / "hdr.tif"
    Image.fromarray(np.full((30, 40), 3.5, np.float32), "F").save(path)
    with pytest.raises(ValueError, match=r"hdr.tif: floating-point samples outside \[0, 1\]"):
        read_image(path)


def _folder(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    _write(folder / "a_grey.png", "grey8")
    (folder / "b_corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    (folder / "c_empty.png").write_bytes(b"")
    _write(folder / "d_palette.png", "palette")
    return folder


def test_folder_source_skips_unreadable_files(tmp_path):
    folder = _folder(tmp_path)
    src = open_source(folder, on_error="skip")
    names = [name for name, frame in src]
    assert names == ["a_grey", "d_palette"]
    assert [name for name, _ in src.skipped] == ["b_corrupt.jpg", "c_empty.png"]
    assert all("could not decode" in why for _, why in src.skipped)
    # a second pass lists them again, not twice
    assert len(list(src)) == 2 and len(src.skipped) == 2
    # by default the first unreadable file raises
    strict = open_source(folder)
    assert strict.skipped is None
    with pytest.raises(ValueError, match="b_corrupt.jpg: not a readable image"):
        list(strict)
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'skip'; got 'ignore'"):
        open_source(folder, on_error="ignore")
