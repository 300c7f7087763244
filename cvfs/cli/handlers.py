"""The subcommands of ``cvfs``: one function per subcommand taking the parsed arguments.

Each only opens inputs, calls the library (or :mod:`cvfs.cli.commands` for the commands
that open sources and write output sets) and prints; :mod:`cvfs.cli.parser` binds them to
their subcommands."""

import logging
from pathlib import Path

log = logging.getLogger(__name__)

def _check_output_files(args, *options):
    """Check the output files given to ``options`` before the command computes anything."""
    from cvfs.io import check_output_file

    for name in options:
        if getattr(args, name, None):
            check_output_file(getattr(args, name), label=f"--{name}")


def demo(args):
    from cvfs import demo

    out = Path(args.out)
    summary = demo.run(out, parts=args.parts, verbose=not args.quiet)
    print(summary)
    print(f"\ncvfs demo: figures and summary written to {out.resolve()}")
    return 0


def data(args):
    from cvfs.datasets import data_home
    from cvfs.datasets.registry import report

    print(report(data_home(create=True)), end="")
    return 0


def warmup(args):
    import time

    from tqdm.auto import tqdm

    from cvfs.cli.warmup import GROUPS, cold_groups, compile_group

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


def motion_evaluate(args):
    import json

    from cvfs.io import atomic_write_text
    from cvfs.motion.evaluate import evaluate_hopkins155

    figures = Path(args.figures) if args.figures else (
        Path(args.json).parent if args.json else None)
    _check_output_files(args, "json")
    result = evaluate_hopkins155(args.data, cache=args.cache, n_folds=args.folds,
                                 fold_seed=args.seed, figures=figures,
                                 rankers=args.rankers, features=args.features,
                                 verbose=not args.quiet)
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


def motion_segment(args):
    from cvfs.cli.commands import motion_segment
    from cvfs.motion.tracking import TrackerSettings

    given = {field: getattr(args, dest) for dest, field in TRACKER_OPTIONS.items()}
    tracker = TrackerSettings(**{k: v for k, v in given.items() if v is not None})
    motion_segment(args.video, n_motions=args.motions, out=args.out, max_frames=args.max_frames,
                   tracker=tracker, model=args.model, strict=args.strict, camera=args.camera)
    return 0


# `cvfs motion segment` tracker options (dest -> TrackerSettings field), passed when given
TRACKER_OPTIONS = {"cell": "cell", "per_cell": "per_cell", "min_quality": "quality",
                    "min_distance": "min_distance", "max_points": "max_points",
                    "fb_threshold": "fb_threshold", "min_ncc": "min_ncc", "partial": "partial",
                    "min_frames": "min_frames", "moving_density": "moving_density"}


# `cvfs astro` settings options (dest -> LocalisationSettings field), passed when given
ASTRO_OPTIONS = {"psf_sigma": "psf_sigma", "n_atoms": "n_atoms", "tile": "tile",
                 "seed": "random_state", "jobs": "n_jobs", "levels": "levels", "psf": "psf"}


def _astro_options(args):
    from cvfs.astro.settings import LocalisationSettings

    given = {field: getattr(args, dest) for dest, field in ASTRO_OPTIONS.items()
             if getattr(args, dest, None) is not None}
    if "psf_sigma" in given:
        sig = given["psf_sigma"]
        if "auto" in sig and len(sig) > 1 or len(sig) > 2:
            raise ValueError("--psf-sigma takes one width, a MIN MAX pair or 'auto'")
        given["psf_sigma"] = sig[0] if len(sig) == 1 else tuple(sig)
    return dict(settings=LocalisationSettings().replace(**given), noise_sigma=args.noise_sigma,
                saturation=args.saturation, hdu=args.hdu, channel=args.channel,
                verbose=not args.quiet)


def astro_localise(args):
    from cvfs.cli.commands import astro_localise

    astro_localise(args.image, args.out, mask=args.mask, **_astro_options(args))
    return 0


def astro_denoise(args):
    from cvfs.cli.commands import astro_denoise

    astro_denoise(args.image, args.out, **_astro_options(args))
    return 0


# ---- keypoints ----

#: Exit status of ``cvfs keypoints detect`` when some image files were skipped (unreadable or
#: smaller than the detection window) and the others processed and written.
EXIT_SKIPPED = 3

#: The ``--dataset`` choices: :data:`cvfs.datasets.faces.FACE_SETS`, spelled out so that
#: ``--help`` does not import numpy (a test checks they agree).
KP_DATASETS = ("mtfl-train", "mtfl-test", "caltech", "aflw2000", "faces68-train",
               "faces68-test")


def _kp_images(name, n_images, root=None):
    from cvfs.datasets.faces import load_face_set

    ims = load_face_set(name, root)
    return ims[:n_images] if n_images else ims


def keypoints_train(args):
    import hashlib
    import json
    import shlex
    import time

    from cvfs.io import check_output_file
    from cvfs.io.models import is_model_file
    from cvfs.keypoints.train import TrainingRecipe, train_detector

    check_output_file(args.out, replace=is_model_file, what="model file")  # before training
    if args.aflw_sqlite:
        from cvfs.datasets.aflw import load_aflw

        images = load_aflw(args.aflw_sqlite, args.aflw_images, require_images=True)
        images = [im for im in images if im.n_faces == 1][: args.n_images or None]
        source = f"AFLW {args.aflw_sqlite}"
    else:
        images = _kp_images(args.dataset, args.n_images, args.data)
        source = args.dataset
    t0 = time.perf_counter()
    given = {k: getattr(args, k) for k in TRAIN_OPTIONS if getattr(args, k) is not None}
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


def keypoints_evaluate(args):
    import json

    from cvfs.io import atomic_write_text
    from cvfs.keypoints import load_detector
    from cvfs.keypoints.evaluate import evaluate_detector, recall_at_precision

    _check_output_files(args, "json", "figure")
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


def keypoints_detect(args):
    from cvfs.cli.commands import keypoints_detect

    _, skipped = keypoints_detect(
        args.sources, model=args.model, out=args.out, threshold=args.threshold,
        max_scale=args.max_scale, top=args.top, n_jobs=args.jobs, max_frames=args.max_frames,
        strict=args.strict, what=args.what, face_model=args.face_model, fmt=args.format,
        top_down={"auto": None, "full": False, "top-down": True}[args.scan], rescan=args.rescan)
    return EXIT_SKIPPED if skipped else 0


# `cvfs keypoints train` options set in the TrainingRecipe when given (its defaults otherwise),
# and the detector's max_scale


TRAIN_OPTIONS = ("k", "bins", "n_iter", "mu", "annealing_boost", "clip_quantile",
                  "haar_per_channel", "hog_border", "n_rounds", "n_hard", "neg_per_image",
                  "max_positives", "ied_range", "pos_radius", "neg_radius", "negative_levels",
                  "mirror", "degrade", "max_scale", "scan_stride", "cascade_miss_rate",
                  "cascade_front_load")
