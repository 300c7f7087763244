"""The argument parser of ``cvfs``: subcommands, options, help texts and their defaults."""

import argparse

from cvfs.cli import handlers

__all__ = ["build_parser"]

_DESCRIPTION = """\
cvfs: computer vision on one shared sparse-learning core (feature selection with annealing, FSA;
screened sparse Bayesian learning, SBL), with three applications: face keypoint detection,
motion segmentation of video by learned ranking, and astronomical point sources and denoising.

Start with `cvfs demo` (every application on bundled data, figures in ./cvfs-out); then
`cvfs <command> --help` for each command's options and their defaults."""

_EPILOG = """\
examples:
  cvfs demo
  cvfs data
  cvfs warmup
  cvfs keypoints detect photo.jpg --out faces-out
  cvfs keypoints detect synth:scene=face --max-frames 5 --out faces-out
  cvfs motion segment video.avi --motions auto --out motion-out
  cvfs astro localise field.fits --out astro-out
  cvfs astro denoise field.fits --out denoise-out"""



def _psf_sigma(text):
    """One value of ``--psf-sigma``: a width in pixels or ``auto``."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a width in pixels or 'auto'; got {text!r}")\
            from None


def _method(value):
    """``--method``: a learner name checked by :func:`cvfs.keypoints.recipe.check_method`."""
    from cvfs.keypoints.recipe import check_method

    try:
        return check_method(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written; an option's help ends with its default where it has one.

    The default is appended unless the help text already states one (e.g. "default: the shipped
    model" where the value is None), the option is a flag, or the default is None.
    """

    def _default(self, action):
        return action.default

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text.lower() or action.default is argparse.SUPPRESS or action.required:
            return text
        flag = action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction)
        if flag or (not action.option_strings and action.nargs not in (
                argparse.OPTIONAL, argparse.ZERO_OR_MORE)):
            return text
        value = self._default(action)
        if value is None or value == []:
            return text
        if isinstance(action, argparse.BooleanOptionalAction):  # name the one in effect
            value = action.option_strings[0 if value else 1]
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        return f"{text} (default: {str(value).replace('%', '%%')})"


class _TrainHelpFormatter(_HelpFormatter):
    """Shows the :class:`TrainingRecipe` default of the training settings (their CLI default is
    None: only the options given change the recipe)."""

    def _default(self, action):
        if action.default is None and action.dest in handlers.TRAIN_OPTIONS:
            from cvfs.keypoints.recipe import TrainingRecipe

            return {**TrainingRecipe.defaults(), "max_scale": 2.0}[action.dest]
        return action.default


class _TrackerHelpFormatter(_HelpFormatter):
    """Shows ``TrackerSettings``' default for the tracker options (CLI default None)."""

    def _default(self, action):
        if action.default is None and action.dest in handlers.TRACKER_OPTIONS:
            from dataclasses import fields

            from cvfs.motion.tracking import TrackerSettings

            return {f.name: f.default for f in fields(TrackerSettings)}[
                handlers.TRACKER_OPTIONS[action.dest]]
        return action.default


class _AstroHelpFormatter(_HelpFormatter):
    """Shows the :class:`LocalisationSettings` default of the astronomy settings (their CLI
    default is None: only the options given change the settings)."""

    def _default(self, action):
        if action.default is None and action.dest in handlers.ASTRO_OPTIONS:
            from cvfs.astro.settings import LocalisationSettings

            value = getattr(LocalisationSettings(), handlers.ASTRO_OPTIONS[action.dest])
            return "fresh entropy" if value is None else value
        return action.default


def _parser(sub, name, help, description=None, formatter=_HelpFormatter):
    """A subcommand parser with the house formatter; its description defaults to ``help``."""
    return sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:]
                          + ".", formatter_class=formatter)


def _add_max_pixels(p):
    p.add_argument("--max-pixels", type=int, default=None, metavar="N",
                   help="largest image read, in pixels (width x height), checked from the "
                   "file header before decoding; 0 = no limit (default: $CVFS_MAX_PIXELS, else "
                   "150000000)")


_SOURCE_HELP = ("image, folder of images, video file, camera index (0), or a synthetic clip: "
                "'synth:motions=3,frames=30,seed=0' (rigid motions) or 'synth:scene=face' "
                "(a moving face)")


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int; got {text}")
    return value


def _min_frames(text):
    """``--min-frames``: an int (frames) or a float fraction of the clip."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int >= 2 or a fraction in (0, 1); got "
                                         f"{text!r}") from None


def _motions(text):
    """``--motions``: ``auto`` (None) or an int K >= 2."""
    if text == "auto":
        return None
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 'auto' or an int >= 2; got {text!r}") from None
    if k < 2:
        raise argparse.ArgumentTypeError(f"must be 'auto' or an int >= 2; got {text!r}")
    return k


def _add_keypoints_parser(sub):
    from cvfs.cli.commands import VIDEO_MAX_SCALE

    kp = _parser(sub, "keypoints", "face keypoint detectors: train | evaluate | detect")
    ksub = kp.add_subparsers(dest="keypoints_command", required=True, metavar="COMMAND")

    p = _parser(ksub, "train", "train detectors with hard-negative mining",
                description="Train keypoint detectors with hard-negative mining. Training "
                "settings not given take the defaults of\ncvfs.keypoints.TrainingRecipe "
                "(the shipped models' recipe), shown below.", formatter=_TrainHelpFormatter)
    p.add_argument("--dataset", choices=handlers.KP_DATASETS, default="mtfl-train",
                   help="annotated face images to train on")
    p.add_argument("--data", default=None, help="dataset folder (default: in the data home, "
                   "see cvfs data)")
    p.add_argument("--aflw-sqlite", default=None,
                   help="train on AFLW single-face images from this aflw.sqlite (default: use "
                   "--dataset)")
    p.add_argument("--aflw-images", default=None,
                   help="AFLW image folder (default: flickr/ beside the sqlite file)")
    p.add_argument("--n-images", type=int, default=None,
                   help="use the first N images (default: all)")
    p.add_argument("--keypoints", nargs="+", default=["left_eye_center", "right_eye_center"],
                   help="keypoints to train, one detector each")
    p.add_argument("--method", default="fsa-lorenz", type=_method,
                   help="learner of each detector: fsa-<loss> for a classifier loss of "
                        "cvfs.core.losses.LOSSES (e.g. fsa-lorenz, fsa-logistic) or "
                        "logitboost")
    # training settings default to None: TrainingRecipe holds the defaults (the shipped models'
    # recipe; _TrainHelpFormatter shows them), and only the options given change it
    p.add_argument("--k", type=int, help="selected features (paper: 1500)")
    p.add_argument("--bins", type=int, help="bins of each piecewise-linear response")
    p.add_argument("--n-iter", type=int, help="FSA iterations")
    p.add_argument("--mu", type=float, help="FSA annealing rate mu (paper eq. 3)")
    p.add_argument("--annealing-boost", type=float,
                   help="FSA step factor while features are removed (1: the plain 1/L step; "
                   "default: the loss's own, Lorenz 10)")
    p.add_argument("--clip-quantile", type=float,
                   help="clip each feature to its [q, 1-q] quantiles before fitting (default: "
                   "no clipping)")
    p.add_argument("--haar-per-channel", type=int,
                   help="Haar features per RGB channel in the feature pool")
    p.add_argument("--hog-border", choices=["image", "window"],
                   help="HOG gradients on the window border from the level or the crop")
    p.add_argument("--rounds", type=int, dest="n_rounds",
                   help="training rounds (hard negatives are mined between rounds)")
    p.add_argument("--n-hard", type=int, help="hard negatives added per mining round")
    p.add_argument("--neg-per-image", type=int,
                   help="random negatives per image in the first round")
    p.add_argument("--max-positives", type=int,
                   help="subsample the positives to at most this many (default: all)")
    p.add_argument("--ied-range", type=float, nargs=2, metavar=("MIN", "MAX"),
                   help="IED range (px) of the pyramid levels positives come from")
    p.add_argument("--pos-radius", type=float,
                   help="positives within this many level pixels of the keypoint")
    p.add_argument("--neg-radius", type=float,
                   help="negatives at least this many IED from the keypoint of every face")
    p.add_argument("--negative-levels", choices=["training", "all"],
                   help="negatives from every pyramid level or only the training levels")
    p.add_argument("--cascade-miss-rate", type=float,
                   help="share of the training positives the mining scans' soft cascade may "
                   "reject")
    p.add_argument("--cascade-front-load", type=float,
                   help="exponent of that cascade's rejection distribution (0: uniform)")
    p.add_argument("--mirror", action=argparse.BooleanOptionalAction,
                   help="add the mirrored images (left/right swapped) as training examples")
    p.add_argument("--degrade", type=float, metavar="SHARE",
                   help="share of the training images replaced by versions degraded like small "
                   "web faces (shrunk to an IED of 8-16 px, blurred, JPEG quality 30-80; "
                   "cvfs.keypoints.degrade); 0: none")
    p.add_argument("--max-scale", type=float, help="largest pyramid scale scanned for negatives")
    p.add_argument("--scan-stride", type=int, help="window stride (level pixels) of the scans")
    p.add_argument("--checkpoint-dir", default=None,
                   help="save mining state here and resume from it (default: no checkpoints)")
    p.add_argument("--seed", type=int, default=0, help="random seed of sampling and fitting")
    p.add_argument("--out", required=True, help="model file to write (.h5; required)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=handlers.keypoints_train)

    p = _parser(ksub, "evaluate", "PR curves and AP with the paper's criteria")
    p.add_argument("--model", default=None, help="model file (default: the shipped detectors)")
    p.add_argument("--dataset", choices=handlers.KP_DATASETS, default="mtfl-test",
                   help="annotated face images to evaluate on")
    p.add_argument("--data", default=None, help="dataset folder (default: in the data home, "
                   "see cvfs data)")
    p.add_argument("--n-images", type=int, default=None,
                   help="use the first N images (default: all)")
    p.add_argument("--keypoints", nargs="+", default=None,
                   help="keypoints to evaluate (default: every keypoint of the model)")
    p.add_argument("--max-scale", type=float, default=None,
                   help="largest pyramid scale scanned (default: the detector's)")
    p.add_argument("--at-precision", type=float, nargs="*", default=[0.67, 0.51, 0.57],
                   help="report the recall at these precisions")
    p.add_argument("--json", default=None, help="write the results here (default: print only)")
    p.add_argument("--figure", default=None,
                   help="write PR curves here (.png; default: no figure)")
    p.add_argument("--method-label", default="FSA-Lorenz", help="legend label of the curves")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=handlers.keypoints_evaluate)

    p = _parser(ksub, "detect", "detect keypoints on images, folders, videos, a camera or a "
                "synthetic clip",
                description="Detect faces and their keypoints on images, folders, video files, "
                "a camera or a synthetic clip.\n\nFaces (the default with the shipped models): "
                "stdout has one tab-separated line per face keypoint (frame, face or track id, "
                "face score, keypoint, x, y, probability); with --out, <name>_faces.png (one "
                "colour per face) and <name>_faces.json per image, <name>_faces.avi and "
                "<name>_faces.json per video (faces tracked across frames), or one faces.csv "
                "with --format csv.\nKeypoints (--what keypoints): one line per detection "
                "(frame, keypoint, x, y, score); <name>_keypoints.png / .avi.\nstderr: timing. "
                "In an output folder only the previous run's files are replaced.\nImages are "
                "scanned up to the detector's largest pyramid scale, every keypoint everywhere; "
                f"video frames up to {VIDEO_MAX_SCALE:g}, top-down, every 15th frame with the "
                "faces followed between (faster; --max-scale, --scan and --rescan override)."
                "\nGrey, palette, 16-bit and RGBA photos are read as RGB (grey as three "
                "equal channels, alpha dropped). An image file that cannot be read, or is smaller "
                "than the 24x24 window, is skipped and named in the summary; the others are "
                "processed and written, and the exit status is 3 (0: every input processed; 2: "
                "an error, nothing written).")
    p.add_argument("sources", nargs="+", metavar="SOURCE", help=_SOURCE_HELP)
    p.add_argument("--model", default=None, help="model file (default: the shipped detectors)")
    p.add_argument("--threshold", type=float, default=None,
                   help="faces: minimum face probability (default: the face model's); "
                   "keypoints: detection score threshold (default: the detector's)")
    p.add_argument("--what", choices=("auto", "faces", "keypoints"), default="auto",
                   help="faces (detect_faces), keypoints (detect), or auto: faces when the "
                   "detector has every keypoint of the face model")
    p.add_argument("--face-model", default=None,
                   help="face model file (default: the shipped faces.h5)")
    p.add_argument("--format", choices=("json", "csv"), default="json",
                   help="faces: one JSON per image/video, or one faces.csv for the run")
    p.add_argument("--max-scale", type=float, default=None,
                   help="largest pyramid scale (default: the detector's for images, "
                   f"{VIDEO_MAX_SCALE:g} for video frames)")
    p.add_argument("--top", type=int, default=1,
                   help="keypoints: detections per keypoint printed and drawn (best first)")
    p.add_argument("--scan", choices=("auto", "full", "top-down"), default="auto",
                   help="faces: every keypoint everywhere (full), or nose and mouth only around "
                   "eye candidates (top-down: about twice as fast, fewer small faces); auto: "
                   "full for images, top-down for video frames")
    p.add_argument("--rescan", type=_positive_int, default=15,
                   help="faces in video: scan every N-th frame and follow the faces found on the "
                   "frames between (new faces appear at the next scan; 1: scan every frame)")
    p.add_argument("--jobs", type=int, default=-1,
                   help="threads scanning the pyramid levels of a frame (-1: every core)")
    p.add_argument("--max-frames", type=_positive_int, default=None,
                   help="at most this many frames per source (default: all)")
    p.add_argument("--strict", action="store_true",
                   help="a video with fewer decodable frames than its container declares is an "
                   "error (not a warning)")
    p.add_argument("--out", default=None,
                   help="folder for the drawn images and videos (default: draw nothing)")
    _add_max_pixels(p)
    p.set_defaults(func=handlers.keypoints_detect)


def _add_astro_parser(sub):
    pa = _parser(sub, "astro", "astronomy: point sources and denoising by screened SBL")
    asub = pa.add_subparsers(dest="astro_command", required=True, metavar="COMMAND")
    for name, func, out, help, files in (
            ("localise", handlers.astro_localise, "cvfs-astro",
             "catalogue, denoised image and figure of one image",
             "catalogue.ecsv, catalogue.fits (units and pixel convention in the metadata), "
             "catalogue.csv (plain CSV), one row per source (--levels all adds a parent row "
             "per blend: id, parent, n_children), denoised.npy, denoised.fits (FITS input) "
             "and figure.png"),
            ("denoise", handlers.astro_denoise, "cvfs-astro-denoise",
             "denoised image and figure of one image",
             "denoised.npy, denoised.fits (FITS input) and figure.png")):
        p = _parser(asub, name, help, description=f"{help[:1].upper() + help[1:]} (screened "
                    f"SBL over sampled PSFs).\nWrites {files} into --out,\nreplacing only the "
                    "files of its previous run (other files are kept).",
                    formatter=_AstroHelpFormatter)
        # defaults (None) of the settings are LocalisationSettings' own, filled in when the
        # command runs
        p.add_argument("image", help="FITS, PNG, JPEG or TIFF image (2-D; colour is converted "
                       "to luminance)")
        p.add_argument("--out", default=out, help="output folder")
        p.add_argument("--psf-sigma", nargs="+", type=_psf_sigma, default=None,
                       metavar="WIDTH", help="PSF width in pixels, a MIN MAX range, or 'auto' "
                       "(measured on the frame's bright isolated stars; best for real frames)")
        p.add_argument("--n-atoms", type=int, default=None, help="dictionary size per tile")
        p.add_argument("--noise-sigma", type=float, default=None,
                       help="noise standard deviation (default: estimated from the image)")
        p.add_argument("--saturation", type=float, default=None, metavar="LEVEL",
                       help="saturation level in data units: pixels at or above it are masked "
                       "and the rows of their objects flagged 'saturated' (default: the FITS "
                       "header's SATURATE, else none)")
        p.add_argument("--tile", type=int, default=None, help="tile size in pixels")
        p.add_argument("--psf", choices=("gaussian", "fitted"), default=None,
                       help="PSF model: the integrated Gaussian, or a profile fitted to the "
                       "frame's bright isolated stars")
        p.add_argument("--seed", type=int, default=None, help="dictionary sampling seed")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--hdu", type=int, default=None,
                       help="FITS extension to read (default: the first with data)")
        p.add_argument("--channel", choices=("r", "g", "b", "luminance"), default=None,
                       help="plane of a colour PNG/JPEG/TIFF to measure (required for colour "
                            "files)")
        if name == "localise":
            p.add_argument("--mask", default=None, metavar="M.fits",
                           help="mask image of the same shape: nonzero pixels are ignored")
            p.add_argument("--levels", choices=("sources", "objects", "all"), default=None,
                           help="catalogue rows: one per source, one per deblended object "
                           "(a blend as its parent row), or both with their links")
            p.add_argument("--jobs", type=int, default=None,
                           help="processes fitting objects in parallel (-1 = one per CPU)")
        _add_max_pixels(p)
        p.set_defaults(func=func)


def build_parser():
    import cvfs

    parser = argparse.ArgumentParser(prog="cvfs", description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"cvfs {cvfs.__version__}",
                        help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from cvfs import demo

    p = _parser(sub, "demo", "run every application on bundled data; write figures",
                description="Run every application on data that needs no download; write "
                "figures, a video and summary.txt\ninto --out (replacing only the files of its "
                "previous run).")
    p.add_argument("--out", default="cvfs-out", help="output folder")
    p.add_argument("--parts", nargs="+", choices=list(demo.PARTS), default=list(demo.PARTS),
                   help="which parts to run")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=handlers.demo)

    p = _parser(sub, "data", "the data home and the datasets found there",
                description="Print the data home ($CVFS_DATA, else ~/cvfs_data; created if "
                "missing), the datasets found there\nwith their counts, and where to get each "
                "missing one with the folder layout its loader expects.")
    p.set_defaults(func=handlers.data)

    from cvfs.cli.warmup import GROUPS

    p = _parser(sub, "warmup", "compile every numba kernel once (minutes; then cached)",
                description="Compile the numba kernels of every command into numba's cache "
                "(cvfs/__pycache__, or $NUMBA_CACHE_DIR),\nso that no later command waits for "
                "them. Needed once after installing or upgrading cvfs; prints\nthe seconds each "
                "kernel group took.")
    p.add_argument("--groups", nargs="+", choices=list(GROUPS), default=None,
                   help="kernel groups to compile (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=handlers.warmup)

    p = _parser(sub, "motion", "motion segmentation by learned ranking (FSA-Rank): evaluate | "
                "segment")
    msub = p.add_subparsers(dest="motion_command", required=True, metavar="COMMAND")
    q = _parser(msub, "evaluate", "Table VII: 10-fold cross-validation on Hopkins155")
    q.add_argument("--data", default=None, help="Hopkins155 folder (default: in the data "
                   "home, see cvfs data)")
    q.add_argument("--json", default=None, help="write the results here (JSON; default: print "
                   "only)")
    q.add_argument("--figures", default=None, help="folder for motion_cdf.png "
                   "(default: beside --json; none without --json)")
    q.add_argument("--cache", default=None, help="feature cache (default: ~/.cache/cvfs)")
    q.add_argument("--folds", type=int, default=10, help="cross-validation folds")
    q.add_argument("--seed", type=int, default=0, help="seed of the video-to-fold split")
    q.add_argument("--rankers", nargs="+", default=["rankboost", "fsa"],
                   choices=["rankboost", "fsa"], help="rankers to train and compare")
    q.add_argument("--features", nargs="+", default=["all"],
                   choices=["all", "likelihood", "prior"],
                   help="feature sets to train each ranker on (Table VII's ablation): every "
                   "feature, the likelihood (subspace-distance) family or the prior (kNN) family")
    q.add_argument("--quiet", action="store_true", help="no progress bars")
    q.set_defaults(func=handlers.motion_evaluate)
    q = _parser(msub, "segment", "track a video and segment its trajectories by motion",
                formatter=_TrackerHelpFormatter,
                description="Track points through a video (pyramidal Lucas-Kanade; full "
                "trajectories, or with --partial\nlost tracks kept and new ones detected) and "
                "segment them by motion with the shipped ranker.\nWith --out, writes "
                "<name>_motion.avi (tracks coloured by motion), <name>_motion.png\n"
                "(trajectories on the first frame), <name>_motion.json (the summary) and\n"
                "<name>_motion_labels.csv (track, label, frame, x, y, visible), replacing the "
                "previous run's files.\nWhen one image motion explains every track (a frozen "
                "video, a camera moving over a static\nscene) the result is 'no independent "
                "motion'.")
    q.add_argument("video", help=_SOURCE_HELP)
    q.add_argument("--motions", type=_motions, default="auto", metavar="K|auto",
                   help="number of motions K (an int >= 2), or 'auto' (K chosen in 2..8: by the "
                   "subspace-cost rule, or with --camera perspective by the cuts of each K's "
                   "best labelling)")
    q.add_argument("--out", default=None,
                   help="output folder for the video, figure, JSON and labels (default: print "
                   "only)")
    q.add_argument("--model", default=None, help="ranker file (default: the shipped one)")
    q.add_argument("--camera", choices=("affine", "perspective", "auto"), default="affine",
                   help="affine (default): the shipped ranker's candidates; perspective "
                   "(driving footage): segment by two-view geometry; auto: both kinds of "
                   "candidates ranked together (either footage, slower)")
    q.add_argument("--max-frames", type=_positive_int, default=None,
                   help="at most this many frames (default: all)")
    # defaults (None) are TrackerSettings' own, filled in when the command runs
    t = q.add_argument_group("tracker", "corner detection and Lucas-Kanade tracking (defaults: "
                             "cvfs.motion.tracking.TrackerSettings)")
    t.add_argument("--cell", type=int, default=None,
                   help="corners are detected in square cells of CELL pixels, up to PER_CELL "
                   "each (0: the strongest corners of the whole frame)")
    t.add_argument("--per-cell", type=int, default=None, help="corners per cell")
    t.add_argument("--min-quality", type=float, default=None,
                   help="corner quality threshold relative to the cell's best corner")
    t.add_argument("--min-distance", type=float, default=None,
                   help="minimum distance between corners (pixels)")
    t.add_argument("--max-points", type=int, default=None,
                   help="tracks alive at any time, at most")
    t.add_argument("--fb-threshold", type=float, default=None,
                   help="forward-backward error (pixels) above which a track is lost")
    t.add_argument("--min-ncc", type=float, default=None,
                   help="appearance check: a track whose patch, affinely aligned, correlates "
                   "with its patch where it was detected by less than MIN_NCC is lost (in "
                   "[-1, 1); -1: off)")
    t.add_argument("--partial", action="store_true", default=None,
                   help="keep lost tracks (visible up to their loss) and detect new corners in "
                   "every frame; the missing entries are completed before segmenting")
    t.add_argument("--moving-density", type=int, default=None,
                   help="the first frame is also searched MOVING_DENSITY times finer; those "
                   "extra tracks are kept where they leave the dominant motion (1: off)")
    t.add_argument("--min-frames", type=_min_frames, default=None,
                   help="with --partial, drop tracks observed in fewer frames (an int >= 2, or a "
                   "fraction of the clip in (0, 1))")
    q.add_argument("--strict", action="store_true",
                   help="a video with fewer decodable frames than its container declares is an "
                   "error (not a warning)")
    _add_max_pixels(q)
    q.set_defaults(func=handlers.motion_segment)

    _add_astro_parser(sub)
    _add_keypoints_parser(sub)
    return parser
