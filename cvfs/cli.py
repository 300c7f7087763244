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
    return parser


def main(argv=None):
    """Run the ``cvfs`` command line. Returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
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
