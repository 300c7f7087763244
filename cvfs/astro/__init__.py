"""Astronomy: point-source localisation and denoising by screened SBL over sampled PSFs.

>>> from cvfs import astro
>>> catalogue = astro.localise(image)          # one row per source: x (column), y (row), ...
>>> tree = astro.localise(image, levels="all")  # plus the parent rows of blends
>>> clean = astro.denoise(image)               # shaped like image
"""

from cvfs.astro.background import Background, estimate_background
from cvfs.astro.catalogue import FLAGS, add_sky_coordinates, catalogue_dtype, leaves, top_level
from cvfs.astro.denoise import denoise
from cvfs.astro.dictionary import PSFDictionary, sample_atoms
from cvfs.astro.evaluate import (
    detection_scores,
    group_iou,
    match_levels,
    match_sources,
    position_crlb,
    psnr,
)
from cvfs.astro.localise import (
    LAMBDA_FACTOR,
    Localisation,
    LocalisationSettings,
    estimate_background_noise,
    localise,
    localise_and_denoise,
)
from cvfs.astro.psf import GAUSSIAN, PSFProfile, delta_e, render_psf
from cvfs.astro.simulate import (
    CATALOGUE_DTYPE,
    inject_stars,
    make_field,
    make_moffat_field,
    make_scene,
    render_moffat,
)

__all__ = [
    "Background",
    "CATALOGUE_DTYPE",
    "FLAGS",
    "add_sky_coordinates",
    "catalogue_dtype",
    "estimate_background",
    "LAMBDA_FACTOR",
    "Localisation",
    "LocalisationSettings",
    "GAUSSIAN",
    "PSFDictionary",
    "PSFProfile",
    "delta_e",
    "denoise",
    "detection_scores",
    "estimate_background_noise",
    "group_iou",
    "inject_stars",
    "leaves",
    "localise",
    "localise_and_denoise",
    "make_field",
    "make_moffat_field",
    "make_scene",
    "match_levels",
    "match_sources",
    "position_crlb",
    "psnr",
    "render_moffat",
    "render_psf",
    "sample_atoms",
    "top_level",
]
