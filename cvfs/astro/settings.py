"""Settings of the localisation: one object for the functions, the command line and benchmarks.

:class:`LocalisationSettings` holds every tuning knob of :func:`cvfs.astro.localise_and_denoise`
with its default; the functions take one (``settings=``) and any of its fields as keyword
overrides. :class:`FitSettings` is the validated, hashable subset every object's fit reads (and
the key of the per-process dictionary cache).
"""

import dataclasses
import numbers
import os
from dataclasses import dataclass

import numpy as np

from cvfs.astro.psf import GAUSSIAN, PSFProfile

__all__ = ["LAMBDA_FACTOR", "LEVELS", "PSF_MODELS", "FitSettings", "LocalisationSettings",
           "resolve_settings"]

#: lambda = LAMBDA_FACTOR * sigma^2. The Bayesian choice lambda = sigma^2 fits noise peaks (F1 of
#: the raw SBL atoms 0.45 on held-out scenes); with our gamma = 0 start the first penalty is
#: sqrt(lambda) per unit-norm atom, i.e. a matched-filter detection threshold of
#: sqrt(LAMBDA_FACTOR) sigma. Chosen on 20 held-out synthetic scenes
#: (benchmarks/astro/astro_lambda.py, seeds 3000-3019): the full pipeline's F1 is flat (0.989-0.990)
#: for factors 4-256 and its RMSE is lowest (0.109 px) for factors <= 16; 16 is the largest such
#: factor (fewest atoms).
LAMBDA_FACTOR = 16.0

#: catalogue levels: one row per source (the deblended catalogue), one per deblended object
#: (blend parents instead of their sources), or both with their links
LEVELS = ("sources", "objects", "all")

#: named PSF models: the integrated Gaussian, or a profile fitted to the frame's stars
PSF_MODELS = ("gaussian", "fitted")
#: PSF width range (pixels) of the default settings
DEFAULT_PSF_SIGMA = (1.0, 2.0)


@dataclass(frozen=True)
class LocalisationSettings:
    """Settings of :func:`cvfs.astro.localise_and_denoise` (validated when a run starts).

    Attributes
    ----------
    psf_sigma : float, (float, float) or "auto", default (1.0, 2.0)
        PSF width in pixels, or the range of widths to sample. ``"auto"`` measures the frame's
        Gaussian PSF width s on the stellar locus of its bright isolated sources (at least 5 of
        matched-filter SNR 30; :func:`cvfs.astro.psfmodel.measure_width`) and uses the range
        s / 1.25 to 1.25 s for detection and fitting; with fewer stars the default range, with a
        warning.
    n_atoms : int, default 10000
        Atoms per ``tile`` x ``tile`` patch of the dictionary (the same density for other sizes;
        the SBL paper: 10,000 atoms for 28 x 28 images).
    random_state : None, int or numpy.random.Generator, default 0
        Seeds the dictionary sampling (grid jitter): the fixed default makes every run of the
        same image give the same catalogue; None draws fresh entropy.
    n_jobs : int, default 1
        Processes fitting objects in parallel (-1 = one per CPU).
    tile, overlap : int, default 28, 8
        Tile size and overlap in pixels of the fits inside large objects.
    lam_factor : float, default :data:`LAMBDA_FACTOR`
        lambda = lam_factor * noise_sigma^2.
    detect_snr : float, default 5
        Matched-filter SNR below which a fitted source is dropped and smallest peak SNR of a
        detected object.
    detect_thresh : float, default 3
        Detection threshold of the footprints, in noise units of the detection image.
    min_area : int, default 5
        Smallest footprint in pixels.
    box : int, optional
        Box size of the background mesh (:func:`cvfs.astro.background.default_box_size`).
    max_sources : int, default 30
        Most point sources per fitted tile of an object; an object needing more is reported as
        extended.
    extended_factor : float, default 4
        Widest component of the extent test, in units of the largest PSF width (> 1.5).
    sbl_iter : int, default 5
        Reweighting steps of SBL per tile.
    refine : bool, default True
        Continuous refinement. False reports the grouped SBL atoms on the footprints as they are
        (the sampled-dictionary estimate of the thesis; for ablations), without extent test.
    fast_path : bool, default True
        Fit an object with one to four detection peaks as one PSF per peak
        (:mod:`cvfs.astro.fastfit`) and keep that fit when it explains the object, and seed the
        tiled fit of an object of several tiles (a crowded footprint) from its detection peaks
        (:mod:`cvfs.astro.pointfit`); False fits every object with the screened SBL.
    model_tolerance : float, default 0
        Fraction of a source's signal the fast path accepts in its residuals as the error of the
        Gaussian PSF model (e.g. 0.1 on frames whose PSF is not Gaussian); 0 accepts noise only.
    psf : {"gaussian", "fitted"} or PSFProfile, default "gaussian"
        The PSF model of every fit: ``"gaussian"`` the pixel-integrated Gaussian of width in
        ``psf_sigma``; ``"fitted"`` a mixture of integrated Gaussians fitted to the frame's
        bright isolated stars after detection (:mod:`cvfs.astro.psfmodel`; the Gaussian when
        fewer than five qualify), whose width parameter then ranges over 0.8-1.25 times the
        stars' median; a :class:`cvfs.astro.psf.PSFProfile` (e.g. ``result.psf`` of an earlier
        run) with ``psf_sigma`` as its width range.
    levels : {"sources", "objects", "all"}, default "sources"
        Rows of the catalogue: ``"sources"`` one row per source (point sources and extended
        objects, as the deblended catalogues of SExtractor, sep and photutils);
        ``"objects"`` one row per deblended object (a blend of point sources is its parent
        row); ``"all"`` both, parents with ``n_children`` > 0 and their sources linked by
        ``parent`` (:mod:`cvfs.astro.catalogue`).
    """

    psf_sigma: object = DEFAULT_PSF_SIGMA
    n_atoms: int = 10_000
    random_state: object = 0
    n_jobs: int = 1
    tile: int = 28
    overlap: int = 8
    lam_factor: float = LAMBDA_FACTOR
    detect_snr: float = 5.0
    detect_thresh: float = 3.0
    min_area: int = 5
    box: object = None
    max_sources: int = 30
    extended_factor: float = 4.0
    sbl_iter: int = 5
    refine: bool = True
    fast_path: bool = True
    model_tolerance: float = 0.0
    levels: str = "sources"
    psf: object = "gaussian"

    @classmethod
    def field_names(cls):
        """Names of the settings, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes):
        """A copy with some settings changed.

        Raises
        ------
        TypeError
            If a name is not a setting.
        """
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise TypeError(f"unknown localisation setting(s) {', '.join(map(repr, unknown))}; "
                            f"the settings are {', '.join(self.field_names())}")
        return dataclasses.replace(self, **changes) if changes else self


@dataclass(frozen=True)
class FitSettings:
    """Fit settings shared by every object (validated by :func:`resolve_settings`)."""

    s_lo: float
    s_hi: float
    n_atoms: int
    tile: int
    overlap: int
    lam_factor: float
    detect_snr: float
    sbl_iter: int
    refine: bool
    max_sources: int
    extended_factor: float
    seed: int
    margin: float = 1.0
    fast_path: bool = True
    model_tolerance: float = 0.0
    psf: object = GAUSSIAN


def _check_positive(name, value):
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number; got {value!r}")
    return float(value)


def resolve_settings(settings=None, **overrides):
    """Checked settings of a run: ``settings`` (default :class:`LocalisationSettings`) with
    ``overrides``.

    Returns
    -------
    settings : LocalisationSettings
        With the overrides applied.
    fit : FitSettings
        Validated fit settings; ``seed`` drawn from ``random_state``.
    n_jobs : int
        Processes (-1 resolved to the CPU count).

    Raises
    ------
    TypeError
        If ``settings`` is not a :class:`LocalisationSettings` or an override is not a setting.
    ValueError
        If a setting is out of range.
    """
    from cvfs.astro.dictionary import _sigma_range
    from cvfs.base import check_random_state

    if settings is None:
        settings = LocalisationSettings()
    elif not isinstance(settings, LocalisationSettings):
        raise TypeError(f"settings must be a LocalisationSettings; got {type(settings).__name__}")
    st = settings.replace(**overrides)
    if isinstance(st.psf_sigma, str):
        if st.psf_sigma != "auto":
            raise ValueError(f"psf_sigma must be a positive float, a (min, max) pair or 'auto'; "
                             f"got {st.psf_sigma!r}")
        # the default range until the frame's stars are measured (localise)
        s_lo, s_hi = _sigma_range(DEFAULT_PSF_SIGMA)
    else:
        s_lo, s_hi = _sigma_range(st.psf_sigma)
    for name, val, least in (("n_atoms", st.n_atoms, 1), ("tile", st.tile, 8),
                             ("min_area", st.min_area, 1), ("max_sources", st.max_sources, 1),
                             ("sbl_iter", st.sbl_iter, 1)):
        if not isinstance(val, numbers.Integral) or val < least:
            raise ValueError(f"{name} must be " + ("a positive int" if least == 1 else
                                                   f"an int >= {least}") + f"; got {val!r}")
    if not isinstance(st.overlap, numbers.Integral) or not 0 <= st.overlap < st.tile // 2:
        raise ValueError(f"overlap must be an int in [0, tile // 2); got {st.overlap!r}")
    n_jobs = st.n_jobs
    if not isinstance(n_jobs, numbers.Integral) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be a positive int or -1; got {n_jobs!r}")
    lam_factor = _check_positive("lam_factor", st.lam_factor)
    detect_snr = _check_positive("detect_snr", st.detect_snr)
    _check_positive("detect_thresh", st.detect_thresh)
    extended_factor = _check_positive("extended_factor", st.extended_factor)
    tol = st.model_tolerance
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 <= tol < 1:
        raise ValueError(f"model_tolerance must be a number in [0, 1); got {tol!r}")
    if extended_factor <= 1.5:
        raise ValueError(f"extended_factor must be > 1.5; got {extended_factor!r}")
    if not isinstance(st.levels, str) or st.levels not in LEVELS:
        raise ValueError(f"levels must be one of {', '.join(map(repr, LEVELS))}; got "
                         f"{st.levels!r}")
    if isinstance(st.psf, PSFProfile):
        profile = st.psf
    elif isinstance(st.psf, str) and st.psf in PSF_MODELS:
        profile = GAUSSIAN
    else:
        raise ValueError(f"psf must be one of {', '.join(map(repr, PSF_MODELS))} or a "
                         f"PSFProfile; got {st.psf!r}")
    rng = check_random_state(st.random_state)
    fit = FitSettings(s_lo, s_hi, int(st.n_atoms), int(st.tile), int(st.overlap), lam_factor,
                      detect_snr, int(st.sbl_iter), bool(st.refine), int(st.max_sources),
                      extended_factor, int(rng.integers(2**31)), fast_path=bool(st.fast_path),
                      model_tolerance=float(tol), psf=profile)
    n_jobs = (os.cpu_count() or 1) if n_jobs == -1 else int(n_jobs)
    return st, fit, n_jobs
