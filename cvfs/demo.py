"""``cvfs demo``: every application on data that needs no download.

Each part takes the output folder and returns a few summary lines; :func:`run` calls the parts,
writes ``summary.txt`` (atomically) and returns the summary text.
"""

import logging
import time
from pathlib import Path

from cvfs.io import atomic_write_text

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
    ax = plot_coefficient_paths(res.path)
    save_figure(ax.figure, out / "fsa_coefficient_paths.png")
    ax = plot_schedules(1000, 10, 500)
    save_figure(ax.figure, out / "fsa_schedules.png")
    return [
        "FSA (logistic, N=M=1000, k=10, AR(1) rho=0.9):",
        f"  selected features: {res.support.tolist()}",
        f"  true features found: {found}/10; fit {elapsed * 1e3:.0f} ms (incl. JIT on first run)",
        "  figures: fsa_coefficient_paths.png, fsa_schedules.png",
    ]


def _keypoints_part(out, verbose):
    """The shipped keypoint detectors on scikit-image's astronaut photo: detect, draw, summary."""
    import cv2
    from skimage import data

    from cvfs.io import atomic_path
    from cvfs.keypoints import load_detector
    from cvfs.viz.keypoints import draw_keypoints

    det = load_detector()
    img = data.astronaut()
    t0 = time.perf_counter()
    found = det.detect(img, max_scale=1.0)  # the face is large: no upsampled levels
    elapsed = time.perf_counter() - t0
    best = {k: v[:1] for k, v in found.items()}
    drawn = draw_keypoints(img, best)
    with atomic_path(out / "keypoints_astronaut.png") as tmp:
        cv2.imwrite(str(tmp), cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR))
    lines = [f"Keypoints (shipped detectors {', '.join(det.keypoints)}) on skimage astronaut "
             f"{img.shape[1]}x{img.shape[0]}: {elapsed:.1f} s"]
    for k, v in found.items():
        top = (f"best at x={v[0, 0]:.0f}, y={v[0, 1]:.0f} (score {v[0, 2]:.2f})" if len(v)
               else "none above threshold")
        lines.append(f"  {k}: {len(v)} detections, {top}")
    lines.append("  figure: keypoints_astronaut.png (best detection per keypoint)")
    return lines


PARTS = {"fsa": _fsa_part, "keypoints": _keypoints_part}


def run(out, parts=None, verbose=True):
    """Run the demo parts, write ``out/summary.txt`` and return the summary text.

    Parameters
    ----------
    out : str or Path
        Output folder (created).
    parts : list of str, optional
        Names from :data:`PARTS`; default all.
    verbose : bool
        Show progress bars.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for name in parts or list(PARTS):
        log.info("demo part %s", name)
        lines += PARTS[name](out, verbose)
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n"
    atomic_write_text(out / "summary.txt", text)
    return text
