"""``cvfs demo``: every application on data that needs no download.

Each part takes the output folder and returns a few summary lines; :func:`run` calls the parts
with a temporary folder, writes ``summary.txt``, moves the files into the output folder
(:func:`cvfs.io.atomic_dir`: the user's own files there are kept), and returns the summary text.
"""

import logging
import time
from pathlib import Path

from cvfs.io import atomic_dir, atomic_write_text

__all__ = ["PARTS", "run"]

log = logging.getLogger(__name__)


def _fsa_part(out, verbose):
    """FSA on the paper's AR(1) classification problem: selected features and figures."""
    import numpy as np

    from cvfs.core.fsa import fsa_fit
    from cvfs.core.losses import get_loss
    from cvfs.datasets.synthetic import make_ar1_classification
    from cvfs.viz import plot_coefficient_paths, plot_schedules, save_figure

    X, y, true = make_ar1_classification(1000, 1000, k_true=10, random_state=0)
    t0 = time.perf_counter()
    res = fsa_fit(X, np.where(y > 0, 1.0, -1.0), k=10, loss=get_loss("logistic"),
                  record_path=True)
    elapsed = time.perf_counter() - t0
    found = np.intersect1d(res.support, true).size
    ax = plot_coefficient_paths(res.path, highlight=true)
    save_figure(ax.figure, out / "fsa_coefficient_paths.png")
    ax = plot_schedules(1000, 10, 500)
    save_figure(ax.figure, out / "fsa_schedules.png")
    return [
        "FSA (logistic, N=M=1000, k=10, AR(1) rho=0.9):",
        f"  selected features: {res.support.tolist()}",
        f"  true features found: {found}/10; fit {elapsed * 1e3:.0f} ms (incl. JIT on first run)",
        "  figures: fsa_coefficient_paths.png, fsa_schedules.png",
    ]


def _motion_part(out, verbose):
    """Render a synthetic video of 3 rigid motions, track it, segment it with K chosen and the
    shipped ranker."""
    import numpy as np

    from cvfs.io.video import SyntheticRigidVideo, read_frames, write_video
    from cvfs.motion import segment
    from cvfs.motion.evaluate import misclassification
    from cvfs.motion.tracking import track_points
    from cvfs.viz import save_figure
    from cvfs.viz.motion import draw_tracks, plot_trajectories

    frames = read_frames("synth:motions=3,frames=25,seed=0")
    source = SyntheticRigidVideo(n_motions=3, n_frames=25, seed=0)  # its true motions
    t0 = time.perf_counter()
    points = track_points(frames)
    t1 = time.perf_counter()
    labels = segment(points)  # K chosen
    t2 = time.perf_counter()
    truth = source.track_labels(points)
    ok = truth >= 0
    err = 100 * misclassification(labels[ok], truth[ok])
    write_video(out / "motion_synthetic.avi",
                [draw_tracks(f, points, labels, i) for i, f in enumerate(frames)])
    ax = plot_trajectories(points, labels, image=frames[0], title="synthetic: 3 rigid motions")
    save_figure(ax.figure, out / "motion_trajectories.png")
    return [
        "Motion segmentation (synthetic video, 3 rigid motions, shipped FSA-Rank model):",
        f"  {points.shape[0]} complete tracks over {points.shape[1]} frames "
        f"(track {1e3 * (t1 - t0):.0f} ms, segment {1e3 * (t2 - t1):.0f} ms)",
        f"  K chosen: {labels.max() + 1}; points per motion: {np.bincount(labels).tolist()}; "
        "misclassification "
        f"{err:.2f}% on the {int(ok.sum())} tracks that stay on one object",
        "  figures: motion_trajectories.png, motion_synthetic.avi",
    ]


def _astro_part(out, verbose):
    """Screened SBL on a crop of the Hubble Deep Field (bundled with scikit-image)."""
    import numpy as np
    from skimage import data
    from skimage.color import rgb2gray

    from cvfs import astro
    from cvfs.astro.readers import write_catalogue
    from cvfs.viz import save_figure
    from cvfs.viz.astro import source_figure

    crop = rgb2gray(data.hubble_deep_field())[:128, :128]
    t0 = time.perf_counter()
    res = astro.localise_and_denoise(crop, random_state=0, verbose=verbose)
    elapsed = time.perf_counter() - t0
    write_catalogue(out / "astro_catalogue.csv", res.catalogue)
    n_src = len(res.catalogue)  # one row per source
    fig = source_figure(crop, res.catalogue, res.model, unit="intensity (0-1)",
                        title=f"Hubble Deep Field 128 x 128 crop: {n_src} sources")
    save_figure(fig, out / "astro_hdf.png", dpi=110)
    resid = float(np.std(crop - res.model))
    top = ", ".join(f"({s['x']:.1f}, {s['y']:.1f})" for s in res.catalogue[:3])
    return [
        "Astronomy (screened SBL, Hubble Deep Field 128x128 crop, 10,000 PSF atoms per tile):",
        f"  {n_src} sources in {elapsed:.1f} s; brightest at (x, y) {top}",
        f"  noise sigma {res.noise_sigma:.4f}, residual std {resid:.4f}, "
        f"mean atoms screened per tile {np.mean(res.screening):.0%}",
        "  files: astro_catalogue.csv, astro_hdf.png",
    ]


def _keypoints_part(out, verbose):
    """The shipped keypoint detectors on scikit-image's astronaut photo: detect, draw, summary."""
    from skimage import data

    from cvfs.io.images import write_image
    from cvfs.keypoints import load_detector
    from cvfs.viz.keypoints import draw_keypoints

    det = load_detector()
    img = data.astronaut()
    t0 = time.perf_counter()
    # the face is large: no upsampled levels; pyramid levels scanned by one thread per core
    found = det.detect(img, max_scale=1.0, n_jobs=-1)
    elapsed = time.perf_counter() - t0
    best = {k: v[:1] for k, v in found.items()}
    write_image(out / "keypoints_astronaut.png", draw_keypoints(img, best))
    lines = [f"Keypoints (shipped detectors {', '.join(det.keypoints)}) on skimage astronaut "
             f"{img.shape[1]}x{img.shape[0]}: {elapsed:.1f} s"]
    for k, v in found.items():
        top = (f"best at x={v[0, 0]:.0f}, y={v[0, 1]:.0f} (score {v[0, 2]:.2f})" if len(v)
               else "none above threshold")
        lines.append(f"  {k}: {len(v)} detections, {top}")
    lines.append("  figure: keypoints_astronaut.png (best detection per keypoint)")
    return lines


PARTS = {
    "fsa": _fsa_part,
    "astro": _astro_part,
    "motion": _motion_part,
    "keypoints": _keypoints_part,
}


def run(out, parts=None, verbose=True):
    """Run the demo parts, write ``out/summary.txt`` and return the summary text.

    Parameters
    ----------
    out : str or Path
        Output folder, created if missing; a run replaces the files an earlier run wrote there
        and leaves every other file alone (:func:`cvfs.io.atomic_dir`).
    parts : list of str, optional
        Names from :data:`PARTS`; default all.
    verbose : bool
        Show progress bars.

    Raises
    ------
    FileExistsError
        If ``out`` is a file, or a new file would replace one cvfs did not write
        (:func:`cvfs.io.atomic_dir`).
    """
    lines = []
    with atomic_dir(Path(out), command="cvfs demo") as tmp:
        for name in parts or list(PARTS):
            log.info("demo part %s", name)
            lines += PARTS[name](tmp, verbose)
            lines.append("")
        text = "\n".join(lines).rstrip() + "\n"
        atomic_write_text(tmp / "summary.txt", text)
    return text
