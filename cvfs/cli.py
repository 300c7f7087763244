"""The ``cvfs`` console script: ``demo | motion | keypoints | astro`` subcommands.

The CLI only parses arguments, opens sources, calls the library and draws; every subcommand is a
``_cmd_*`` function taking the parsed arguments. ``main(argv=None)`` is what tests call.
"""

import argparse
import logging
import sys
from pathlib import Path

__all__ = ["main"]

log = logging.getLogger(__name__)


def _cmd_demo(args):
    from cvfs import demo

    out = Path(args.out)
    summary = demo.run(out, parts=args.parts, verbose=not args.quiet)
    print(summary)
    print(f"\ncvfs demo: figures and summary written to {out.resolve()}")
    return 0


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
    import numpy as np

    from cvfs.io.video import read_frames
    from cvfs.motion import segment
    from cvfs.motion.tracking import track_points

    frames = read_frames(args.video, max_frames=args.max_frames)
    points = track_points(frames)
    labels = segment(points, args.motions, model=args.model)
    counts = np.bincount(labels, minlength=args.motions)
    print(f"{points.shape[0]} trajectories over {points.shape[1]} frames; points per motion: "
          f"{counts.tolist()}")
    return 0


def _cmd_astro_localise(args):
    import numpy as np

    from cvfs import astro
    from cvfs.astro.readers import _is_fits, read_image, write_catalogue, write_fits
    from cvfs.io import atomic_path
    from cvfs.viz.astro import save_figure_atomic, source_figure

    path = Path(args.image)
    image = read_image(path)
    out = Path(args.out)
    res = astro.localise_and_denoise(
        image, psf_sigma=tuple(args.psf_sigma), n_atoms=args.n_atoms,
        noise_sigma=args.noise_sigma, random_state=args.seed, tile=args.tile,
        verbose=not args.quiet)
    # everything is computed before anything is written; each file is replaced atomically
    out.mkdir(parents=True, exist_ok=True)
    write_catalogue(out / "catalogue.csv", res.catalogue)
    with atomic_path(out / "denoised.npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, res.model)
    written = ["catalogue.csv", "denoised.npy"]
    if _is_fits(path):
        write_fits(out / "denoised.fits", res.model)
        written.append("denoised.fits")
    save_figure_atomic(source_figure(image, res.catalogue, res.model), out / "figure.png")
    written.append("figure.png")
    print(f"{len(res.catalogue)} sources in {path.name} ({image.shape[0]}x{image.shape[1]}); "
          f"noise sigma {res.noise_sigma:.4g}, lambda {res.lam:.4g}")
    print(f"written to {out.resolve()}: {', '.join(written)}")
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

    from cvfs.keypoints.train import train_detector

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
    if "ied_range" in given:
        given["ied_range"] = tuple(given["ied_range"])
    det = train_detector(images, args.keypoints, method=args.method,
                         checkpoint_dir=args.checkpoint_dir, random_state=args.seed,
                         verbose=not args.quiet, **given)
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
        from cvfs.viz.keypoints import plot_pr_curves, save_pr_figure

        save_pr_figure(plot_pr_curves({args.method_label: curves}), args.figure)
    return 0


def _cmd_keypoints_detect(args):
    from pathlib import Path

    import cv2

    from cvfs.datasets.faces import load_image
    from cvfs.keypoints import load_detector
    from cvfs.viz.keypoints import draw_keypoints

    det = load_detector(args.model)
    out = Path(args.out) if args.out else None
    for path in args.images:
        img = load_image(path)
        d = det.detect(img, threshold=args.threshold, max_scale=args.max_scale)
        for name, arr in d.items():
            for x, y, s in arr[: args.top]:
                print(f"{Path(path).name}\t{name}\t{x:.1f}\t{y:.1f}\t{s:.3f}")
        if out is not None:
            from cvfs.io import atomic_path

            drawn = draw_keypoints(img, {k: v[: args.top] for k, v in d.items()})
            with atomic_path(out / (Path(path).stem + "_keypoints.png")) as tmp:
                cv2.imwrite(str(tmp), cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR))
    return 0


# `cvfs keypoints train` options passed to train_detector when given (its defaults otherwise)
_TRAIN_OPTIONS = ("k", "bins", "n_iter", "mu", "annealing_boost", "clip_quantile",
                  "haar_per_channel", "hog_border", "n_rounds", "n_hard", "neg_per_image",
                  "max_positives", "ied_range", "pos_radius", "neg_radius", "negative_levels",
                  "mirror", "max_scale", "scan_stride", "cascade_miss_rate",
                  "cascade_front_load")


def _add_keypoints_parser(sub):
    kp = sub.add_parser("keypoints", help="face keypoint detectors: train | evaluate | detect")
    ksub = kp.add_subparsers(dest="keypoints_command", required=True)

    p = ksub.add_parser("train", help="train detectors with hard-negative mining",
                        description="Settings not given take the defaults of "
                        "cvfs.keypoints.train.train_detector: the shipped models' recipe.")
    p.add_argument("--dataset", choices=_KP_DATASETS, default="mtfl-train")
    p.add_argument("--data", default=None, help="dataset folder (default: in $CVFS_DATA)")
    p.add_argument("--aflw-sqlite", default=None, help="train on AFLW single-face images")
    p.add_argument("--aflw-images", default=None, help="AFLW image folder (default flickr/)")
    p.add_argument("--n-images", type=int, default=None)
    p.add_argument("--keypoints", nargs="+", default=["left_eye_center", "right_eye_center"])
    p.add_argument("--method", default="fsa-lorenz",
                   choices=["fsa-lorenz", "fsa-logistic", "fsa-svm", "logitboost"])
    # training settings default to None: train_detector's signature holds the defaults (the
    # shipped models' recipe), and only the options given are passed on
    p.add_argument("--k", type=int, help="selected features (paper: 1500)")
    p.add_argument("--bins", type=int)
    p.add_argument("--n-iter", type=int)
    p.add_argument("--mu", type=float)
    p.add_argument("--annealing-boost", type=float,
                   help="FSA step factor while features are removed (default: the loss's, "
                   "Lorenz 10; 1: the plain 1/L step)")
    p.add_argument("--clip-quantile", type=float,
                   help="clip each feature to its [q, 1-q] quantiles before fitting")
    p.add_argument("--haar-per-channel", type=int)
    p.add_argument("--hog-border", choices=["image", "window"],
                   help="HOG gradients on the window border from the level or the crop")
    p.add_argument("--rounds", type=int, dest="n_rounds")
    p.add_argument("--n-hard", type=int)
    p.add_argument("--neg-per-image", type=int)
    p.add_argument("--max-positives", type=int)
    p.add_argument("--ied-range", type=float, nargs=2,
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
    p.add_argument("--max-scale", type=float)
    p.add_argument("--scan-stride", type=int)
    p.add_argument("--checkpoint-dir", default=None, help="resume mining from here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="model file (.h5)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_keypoints_train)

    p = ksub.add_parser("evaluate", help="PR curves and AP with the paper's criteria")
    p.add_argument("--model", default=None, help="model file (default: shipped models)")
    p.add_argument("--dataset", choices=_KP_DATASETS, default="mtfl-test")
    p.add_argument("--data", default=None)
    p.add_argument("--n-images", type=int, default=None)
    p.add_argument("--keypoints", nargs="+", default=None)
    p.add_argument("--max-scale", type=float, default=None)
    p.add_argument("--at-precision", type=float, nargs="*", default=[0.67, 0.51, 0.57])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--figure", default=None, help="write PR curves here (.png)")
    p.add_argument("--method-label", default="FSA-Lorenz")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_keypoints_evaluate)

    p = ksub.add_parser("detect", help="detect keypoints on images")
    p.add_argument("images", nargs="+")
    p.add_argument("--model", default=None)
    p.add_argument("--threshold", type=float, default=None)
    p.add_argument("--max-scale", type=float, default=None)
    p.add_argument("--top", type=int, default=5, help="detections per keypoint to report")
    p.add_argument("--out", default=None, help="folder for drawn images")
    p.set_defaults(func=_cmd_keypoints_detect)


def _build_parser():
    parser = argparse.ArgumentParser(prog="cvfs", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    from cvfs import demo

    p = sub.add_parser("demo", help="run every application on embedded data; write figures")
    p.add_argument("--out", default="cvfs-out", help="output folder (default: ./cvfs-out)")
    p.add_argument("--parts", nargs="+", choices=list(demo.PARTS), default=list(demo.PARTS),
                   help="which parts to run (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("motion", help="motion segmentation (Hopkins155, FSA-Rank)")
    msub = p.add_subparsers(dest="motion_command", required=True)
    q = msub.add_parser("evaluate", help="Table VII: 10-fold cross-validation on Hopkins155")
    q.add_argument("--data", default=None, help="Hopkins155 folder (default: data home)")
    q.add_argument("--json", default=None, help="write the results here (JSON)")
    q.add_argument("--figures", default=None, help="folder for motion_cdf.png "
                   "(default: beside --json)")
    q.add_argument("--cache", default=None, help="feature cache (default: ~/.cache/cvfs)")
    q.add_argument("--folds", type=int, default=10)
    q.add_argument("--seed", type=int, default=0, help="seed of the video-to-fold split")
    q.add_argument("--rankers", nargs="+", default=["rankboost", "fsa"],
                   choices=["rankboost", "fsa"])
    q.add_argument("--quiet", action="store_true", help="no progress bars")
    q.set_defaults(func=_cmd_motion_evaluate)
    q = msub.add_parser("segment", help="track a video and segment its trajectories")
    q.add_argument("video", help="video file, camera index or 'synth:motions=3'")
    q.add_argument("--motions", type=int, default=2, help="number of motions K")
    q.add_argument("--model", default=None, help="ranker file (default: the shipped one)")
    q.add_argument("--max-frames", type=int, default=None)
    q.set_defaults(func=_cmd_motion_segment)

    pa = sub.add_parser("astro", help="astronomy: point sources and denoising by screened SBL")
    asub = pa.add_subparsers(dest="astro_command", required=True)
    p = asub.add_parser("localise", help="catalogue, denoised image and figure of one image")
    p.add_argument("image", help="FITS, PNG, JPEG or TIFF image (2-D)")
    p.add_argument("--out", default="cvfs-out/astro", help="output folder")
    p.add_argument("--psf-sigma", nargs=2, type=float, default=[1.0, 2.0], metavar=("MIN", "MAX"),
                   help="range of PSF widths in pixels (default: 1 2)")
    p.add_argument("--n-atoms", type=int, default=10_000, help="dictionary size per tile")
    p.add_argument("--noise-sigma", type=float, default=None,
                   help="noise standard deviation (default: estimated)")
    p.add_argument("--tile", type=int, default=28, help="tile size in pixels (default: 28)")
    p.add_argument("--seed", type=int, default=0, help="dictionary sampling seed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_astro_localise)
    _add_keypoints_parser(sub)
    return parser


def main(argv=None):
    """Run the ``cvfs`` command line. Returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)[2:]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, TypeError, ImportError) as exc:
        print(f"cvfs {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
