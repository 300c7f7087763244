"""The ``cvfs`` console script: ``demo | data | warmup | motion | keypoints | astro`` subcommands.

The CLI only parses arguments and calls the library or :mod:`cvfs.cli.commands` (the
subcommands that open sources and write output sets; the scripts in ``apps/`` call :func:`main`
too). Every subcommand is a ``_cmd_*`` function taking the parsed arguments.
``main(argv=None)`` is what tests call.
"""

import argparse
import faulthandler
import logging
import sys
from pathlib import Path

__all__ = ["main"]

log = logging.getLogger(__name__)

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
        if action.default is None and action.dest in _TRAIN_OPTIONS:
            from cvfs.keypoints.recipe import TrainingRecipe

            return {**TrainingRecipe.defaults(), "max_scale": 2.0}[action.dest]
        return action.default


class _TrackerHelpFormatter(_HelpFormatter):
    """Shows ``TrackerSettings``' default for the tracker options (CLI default None)."""

    def _default(self, action):
        if action.default is None and action.dest in _TRACKER_OPTIONS:
            from dataclasses import fields

            from cvfs.motion.tracking import TrackerSettings

            return {f.name: f.default for f in fields(TrackerSettings)}[
                _TRACKER_OPTIONS[action.dest]]
        return action.default


def _parser(sub, name, help, description=None, formatter=_HelpFormatter):
    """A subcommand parser with the house formatter; its description defaults to ``help``."""
    return sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:]
                          + ".", formatter_class=formatter)


def _cmd_demo(args):
    from cvfs import demo

    out = Path(args.out)
    summary = demo.run(out, parts=args.parts, verbose=not args.quiet)
    print(summary)
    print(f"\ncvfs demo: figures and summary written to {out.resolve()}")
    return 0


def _cmd_data(args):
    from cvfs.datasets import data_home
    from cvfs.datasets.registry import report

    print(report(data_home(create=True)), end="")
    return 0


def _cmd_warmup(args):
    import time

    from tqdm.auto import tqdm

    from cvfs.warmup import GROUPS, cold_groups, compile_group

    names = args.groups or list(GROUPS)
    cold = set(cold_groups(names))
    rows = []
    bar = tqdm(names, desc="kernel groups", unit="group", disable=args.quiet)
    for name in bar:
        bar.set_postfix_str(name)
        t0, c0 = time.perf_counter(), time.process_time()
        compile_group(name)
        rows.append((name, "compiled" if name in cold else "cached",
                     time.perf_counter() - t0, time.process_time() - c0))
    print("group      state      wall s   CPU s  kernels")
    for name, state, wall, cpu in rows:
        print(f"{name:10s} {state:8s} {wall:8.1f} {cpu:7.1f}  {GROUPS[name].what}")
    return 0


def _compile_notice(args):
    """When the command's kernels are not in numba's cache yet (first run after installing or
    upgrading cvfs), print one line on stderr as numba starts compiling them: what compiles and
    about how long it takes. Returns a function that stops listening (None if nothing to say)."""
    from cvfs.warmup import COMMAND_GROUPS, GROUPS

    if args.command == "demo":
        keys = [f"demo {part}" for part in args.parts]
    else:
        keys = [f"{args.command} {getattr(args, f'{args.command}_command', '')}"]
    groups = [g for k in keys for g in COMMAND_GROUPS.get(k, ())]
    if args.command == "warmup":
        groups = args.groups or list(GROUPS)
    if not groups:
        return None
    try:
        from cvfs.warmup import cold_groups, expected_seconds, on_first_compile, wait_text

        cold = cold_groups(groups)
    except Exception as exc:  # the notice must never stop a command
        log.debug("kernel cache check failed: %s", exc)
        return None
    if not cold:
        return None
    wait = wait_text(expected_seconds(cold))
    hint = "" if args.command == "warmup" else "; `cvfs warmup` compiles them all ahead"
    text = (f"cvfs: compiling numba kernels ({', '.join(cold)}), needed once after installing "
            f"or upgrading cvfs: {wait} on an idle 2-core machine{hint}")
    return on_first_compile(lambda: print(text, file=sys.stderr, flush=True))


def _cmd_motion_evaluate(args):
    import json

    from cvfs.io import atomic_write_text
    from cvfs.motion.evaluate import evaluate_hopkins155

    figures = Path(args.figures) if args.figures else (
        Path(args.json).parent if args.json else None)
    result = evaluate_hopkins155(args.data, cache=args.cache, n_folds=args.folds,
                                 fold_seed=args.seed, figures=figures,
                                 rankers=args.rankers, verbose=not args.quiet)
    print(result["table"])
    t = result["test"]
    print(f"\n{result['ranker']} test: two {t['two']['mean']:.2f}%  three "
          f"{t['three']['mean']:.2f}%  all {t['all']['mean']:.2f}%")
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=1, sort_keys=True))
        print(f"written {args.json}")
    if figures is not None:
        print(f"figure: {figures / 'motion_cdf.png'}")
    return 0


def _cmd_motion_segment(args):
    from cvfs.cli.commands import motion_segment
    from cvfs.motion.tracking import TrackerSettings

    given = {field: getattr(args, dest) for dest, field in _TRACKER_OPTIONS.items()}
    tracker = TrackerSettings(**{k: v for k, v in given.items() if v is not None})
    motion_segment(args.video, n_motions=args.motions, out=args.out, max_frames=args.max_frames,
                   tracker=tracker, model=args.model, strict=args.strict)
    return 0


# `cvfs motion segment` tracker options (dest -> TrackerSettings field), passed when given
_TRACKER_OPTIONS = {"cell": "cell", "per_cell": "per_cell", "min_quality": "quality",
                    "min_distance": "min_distance", "max_points": "max_points",
                    "fb_threshold": "fb_threshold", "min_ncc": "min_ncc", "partial": "partial",
                    "min_frames": "min_frames", "moving_density": "moving_density"}


def _astro_options(args):
    return dict(psf_sigma=tuple(args.psf_sigma), n_atoms=args.n_atoms,
                noise_sigma=args.noise_sigma, seed=args.seed, tile=args.tile, hdu=args.hdu,
                channel=args.channel, verbose=not args.quiet)


def _cmd_astro_localise(args):
    from cvfs.cli.commands import astro_localise

    astro_localise(args.image, args.out, mask=args.mask, n_jobs=args.jobs,
                   **_astro_options(args))
    return 0


def _cmd_astro_denoise(args):
    from cvfs.cli.commands import astro_denoise

    astro_denoise(args.image, args.out, **_astro_options(args))
    return 0


# ---- keypoints ----

_KP_DATASETS = ("mtfl-train", "mtfl-test", "caltech", "aflw2000")


def _kp_images(name, n_images, root=None):
    from cvfs.datasets import faces

    if name == "mtfl-train":
        ims = faces.load_mtfl("train", root)
    elif name == "mtfl-test":
        ims = faces.load_mtfl("test", root)
    elif name == "caltech":
        ims = faces.load_caltech_webfaces(root)
    else:
        ims = faces.load_aflw2000(root)
    return ims[:n_images] if n_images else ims


def _cmd_keypoints_train(args):
    import hashlib
    import json
    import shlex
    import time

    from cvfs.keypoints.train import TrainingRecipe, train_detector

    if args.aflw_sqlite:
        from cvfs.datasets.aflw import load_aflw

        images = load_aflw(args.aflw_sqlite, args.aflw_images, require_images=True)
        images = [im for im in images if im.n_faces == 1][: args.n_images or None]
        source = f"AFLW {args.aflw_sqlite}"
    else:
        images = _kp_images(args.dataset, args.n_images, args.data)
        source = args.dataset
    t0 = time.perf_counter()
    given = {k: getattr(args, k) for k in _TRAIN_OPTIONS if getattr(args, k) is not None}
    max_scale = given.pop("max_scale", 2.0)
    recipe = TrainingRecipe(method=args.method, **given)
    det = train_detector(images, args.keypoints, recipe, max_scale=max_scale,
                         checkpoint_dir=args.checkpoint_dir, random_state=args.seed,
                         verbose=not args.quiet)
    names = "\n".join(str(im.path.name) for im in images).encode()
    det.info["training"].update({
        "data": source, "n_images": len(images), "seconds": time.perf_counter() - t0,
        "images_sha256": hashlib.sha256(names).hexdigest(),
        "command": "cvfs keypoints train " + " ".join(shlex.quote(a) for a in args.argv),
    })
    det.info["random_state"] = args.seed
    path = det.save(args.out)
    fit = {k: round(v["fit_seconds"], 1) for k, v in det.info["training"]["keypoints"].items()}
    print(json.dumps({"model": str(path), "seconds": round(det.info["training"]["seconds"], 1),
                      "fit_seconds": fit}, indent=1))
    return 0


def _cmd_keypoints_evaluate(args):
    import json

    from cvfs.io import atomic_write_text
    from cvfs.keypoints import load_detector
    from cvfs.keypoints.evaluate import evaluate_detector, recall_at_precision

    det = load_detector(args.model)
    images = _kp_images(args.dataset, args.n_images, args.data)
    curves, spi = evaluate_detector(det, images, args.keypoints, max_scale=args.max_scale,
                                    verbose=not args.quiet)
    result = {"model": str(args.model or "shipped"), "dataset": args.dataset,
              "n_images": len(images), "seconds_per_image": spi, "keypoints": {}}
    for name, c in curves.items():
        row = c.as_dict()
        for p in args.at_precision:
            row[f"recall_at_precision_{p:g}"] = recall_at_precision(c, p)
        result["keypoints"][name] = row
        print(f"{name:22s} AP {row['average_precision']:.3f}  max recall "
              f"{row['max_recall']:.3f}  " + "  ".join(
                  f"R@P{p:g} {row[f'recall_at_precision_{p:g}']:.3f}" for p in args.at_precision))
    print(f"{len(images)} images, {spi:.2f} s per image")
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=1))
    if args.figure:
        from cvfs.viz import save_figure
        from cvfs.viz.keypoints import plot_pr_curves

        save_figure(plot_pr_curves({args.method_label: curves}), args.figure)
    return 0


def _cmd_keypoints_detect(args):
    from cvfs.cli.commands import keypoints_detect

    keypoints_detect(args.sources, model=args.model, out=args.out, threshold=args.threshold,
                     max_scale=args.max_scale, top=args.top, n_jobs=args.jobs,
                     max_frames=args.max_frames, strict=args.strict, what=args.what,
                     face_model=args.face_model, fmt=args.format,
                     top_down={"auto": None, "full": False, "top-down": True}[args.scan])
    return 0


# `cvfs keypoints train` options set in the TrainingRecipe when given (its defaults otherwise),
# and the detector's max_scale
_TRAIN_OPTIONS = ("k", "bins", "n_iter", "mu", "annealing_boost", "clip_quantile",
                  "haar_per_channel", "hog_border", "n_rounds", "n_hard", "neg_per_image",
                  "max_positives", "ied_range", "pos_radius", "neg_radius", "negative_levels",
                  "mirror", "degrade", "max_scale", "scan_stride", "cascade_miss_rate",
                  "cascade_front_load")


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
    p.add_argument("--dataset", choices=_KP_DATASETS, default="mtfl-train",
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
    p.add_argument("--method", default="fsa-lorenz",
                   choices=["fsa-lorenz", "fsa-logistic", "fsa-svm", "logitboost"],
                   help="learner of each detector")
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
    p.set_defaults(func=_cmd_keypoints_train)

    p = _parser(ksub, "evaluate", "PR curves and AP with the paper's criteria")
    p.add_argument("--model", default=None, help="model file (default: the shipped detectors)")
    p.add_argument("--dataset", choices=_KP_DATASETS, default="mtfl-test",
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
    p.set_defaults(func=_cmd_keypoints_evaluate)

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
                "An output folder's previous set is replaced as a whole.\nImages are scanned "
                "up to the detector's largest pyramid scale, every keypoint everywhere; video "
                f"frames up to {VIDEO_MAX_SCALE:g}, top-down (faster; --max-scale and --scan "
                "override).")
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
    p.add_argument("--jobs", type=int, default=-1,
                   help="threads scanning the pyramid levels of a frame (-1: every core)")
    p.add_argument("--max-frames", type=_positive_int, default=None,
                   help="at most this many frames per source (default: all)")
    p.add_argument("--strict", action="store_true",
                   help="a video with fewer decodable frames than its container declares is an "
                   "error (not a warning)")
    p.add_argument("--out", default=None,
                   help="folder for the drawn images and videos (default: draw nothing)")
    p.set_defaults(func=_cmd_keypoints_detect)


def _add_astro_parser(sub):
    pa = _parser(sub, "astro", "astronomy: point sources and denoising by screened SBL")
    asub = pa.add_subparsers(dest="astro_command", required=True, metavar="COMMAND")
    for name, func, out, help, files in (
            ("localise", _cmd_astro_localise, "cvfs-astro",
             "catalogue, denoised image and figure of one image",
             "catalogue.csv, catalogue.fits (one row per source, plus a parent row per "
             "blend: id, parent, n_children), denoised.npy, denoised.fits (FITS input) and "
             "figure.png"),
            ("denoise", _cmd_astro_denoise, "cvfs-astro-denoise",
             "denoised image and figure of one image",
             "denoised.npy, denoised.fits (FITS input) and figure.png")):
        p = _parser(asub, name, help, description=f"{help[:1].upper() + help[1:]} (screened "
                    f"SBL over sampled PSFs).\nWrites {files} into --out,\nreplacing its "
                    "previous set as a whole.")
        p.add_argument("image", help="FITS, PNG, JPEG or TIFF image (2-D; colour is converted "
                       "to luminance)")
        p.add_argument("--out", default=out, help="output folder")
        p.add_argument("--psf-sigma", nargs=2, type=float, default=[1.0, 2.0],
                       metavar=("MIN", "MAX"), help="range of PSF widths in pixels")
        p.add_argument("--n-atoms", type=int, default=10_000, help="dictionary size per tile")
        p.add_argument("--noise-sigma", type=float, default=None,
                       help="noise standard deviation (default: estimated from the image)")
        p.add_argument("--tile", type=int, default=28, help="tile size in pixels")
        p.add_argument("--seed", type=int, default=0, help="dictionary sampling seed")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--hdu", type=int, default=None,
                       help="FITS extension to read (default: the first with data)")
        p.add_argument("--channel", choices=("r", "g", "b", "luminance"), default=None,
                       help="plane of a colour PNG/JPEG/TIFF to measure (required for colour "
                            "files)")
        if name == "localise":
            p.add_argument("--mask", default=None, metavar="M.fits",
                           help="mask image of the same shape: nonzero pixels are ignored")
            p.add_argument("--jobs", type=int, default=1,
                           help="processes fitting objects in parallel (-1 = one per CPU)")
        p.set_defaults(func=func)


def _build_parser():
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
                "figures, a video and summary.txt\ninto --out (replacing its previous set as a "
                "whole).")
    p.add_argument("--out", default="cvfs-out", help="output folder")
    p.add_argument("--parts", nargs="+", choices=list(demo.PARTS), default=list(demo.PARTS),
                   help="which parts to run")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)

    p = _parser(sub, "data", "the data home and the datasets found there",
                description="Print the data home ($CVFS_DATA, else ~/cvfs_data; created if "
                "missing), the datasets found there\nwith their counts, and where to get each "
                "missing one with the folder layout its loader expects.")
    p.set_defaults(func=_cmd_data)

    from cvfs.warmup import GROUPS

    p = _parser(sub, "warmup", "compile every numba kernel once (minutes; then cached)",
                description="Compile the numba kernels of every command into numba's cache "
                "(cvfs/__pycache__, or $NUMBA_CACHE_DIR),\nso that no later command waits for "
                "them. Needed once after installing or upgrading cvfs; prints\nthe seconds each "
                "kernel group took.")
    p.add_argument("--groups", nargs="+", choices=list(GROUPS), default=None,
                   help="kernel groups to compile (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_warmup)

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
    q.add_argument("--quiet", action="store_true", help="no progress bars")
    q.set_defaults(func=_cmd_motion_evaluate)
    q = _parser(msub, "segment", "track a video and segment its trajectories by motion",
                formatter=_TrackerHelpFormatter,
                description="Track points through a video (pyramidal Lucas-Kanade; full "
                "trajectories, or with --partial\nlost tracks kept and new ones detected) and "
                "segment them by motion with the shipped ranker.\nWith --out, writes "
                "<name>_motion.avi (tracks coloured by motion), <name>_motion.png\n"
                "(trajectories on the first frame), <name>_motion.json (the summary) and\n"
                "<name>_motion_labels.csv (track, label, frame, x, y, visible), replacing the "
                "folder's previous set.\nWhen one image motion explains every track (a frozen "
                "video, a camera moving over a static\nscene) the result is 'no independent "
                "motion'.")
    q.add_argument("video", help=_SOURCE_HELP)
    q.add_argument("--motions", type=_motions, default="auto", metavar="K|auto",
                   help="number of motions K (an int >= 2), or 'auto' (K chosen in 2..8 by the "
                   "subspace-residual rule)")
    q.add_argument("--out", default=None,
                   help="output folder for the video, figure, JSON and labels (default: print "
                   "only)")
    q.add_argument("--model", default=None, help="ranker file (default: the shipped one)")
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
    q.set_defaults(func=_cmd_motion_segment)

    _add_astro_parser(sub)
    _add_keypoints_parser(sub)
    return parser


def _command_name(args):
    parts = [args.command] + [getattr(args, f"{args.command}_command", None) or ""]
    return "cvfs " + " ".join(p for p in parts if p)


def _inputs(args):
    """The input paths of a command, for error messages that lack them."""
    found = [getattr(args, n, None) for n in ("image", "video", "model")]
    found += list(getattr(args, "sources", None) or [])
    return ", ".join(str(f) for f in found if f is not None)


def _errors():
    """Exceptions reported as ``cvfs <command>: error: ...`` with exit code 2."""
    errors = (FileNotFoundError, FileExistsError, ValueError, TypeError, ImportError, OSError,
              KeyError, OverflowError)
    try:
        import cv2
    except ImportError:  # pragma: no cover - opencv is a dependency
        return errors
    return errors + (cv2.error,)


def _message(exc, args):
    if isinstance(exc, (FileNotFoundError, FileExistsError, ValueError, TypeError, ImportError)):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    inputs = _inputs(args)
    what = "missing key" if isinstance(exc, KeyError) else type(exc).__name__
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
    return f"{what} {text} (inputs: {inputs or 'none'})"


def main(argv=None):
    """Run the ``cvfs`` command line. Returns the process exit code.

    Errors are printed as ``cvfs <command>: error: <message>`` with exit code 2; an interrupt
    (Ctrl-C, SIGTERM, SIGHUP) removes the temporary outputs and exits with 128 + the signal.
    """
    from cvfs.io import Interrupted, signals_raise

    if not faulthandler.is_enabled():  # a crash in native code prints the Python stack
        faulthandler.enable()
    parser = _build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)[2:]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    name = _command_name(args)
    stop_notice = _compile_notice(args)
    try:
        with signals_raise():
            return args.func(args)
    except (KeyboardInterrupt, Interrupted, SystemError) as exc:
        # a signal that arrives inside a compiled kernel surfaces as a SystemError whose context
        # is the KeyboardInterrupt / Interrupted the handler raised
        cause = exc
        while cause is not None and not isinstance(cause, (KeyboardInterrupt, Interrupted)):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        what = "interrupted" if isinstance(cause, KeyboardInterrupt) else str(cause)
        print(f"{name}: {what}; temporary outputs removed", file=sys.stderr)
        return 130 if isinstance(cause, KeyboardInterrupt) else 128 + cause.signum
    except _errors() as exc:
        print(f"{name}: error: {_message(exc, args)}", file=sys.stderr)
        return 2
    finally:
        if stop_notice is not None:
            stop_notice()


if __name__ == "__main__":
    raise SystemExit(main())
