"""Partial tracks on long sequences: Hopkins155's eight longest videos with tracks that start and
stop, segmented with the visibility mask.

Usage::

    python benchmarks/motion/motion_partial_tracks.py [--data DIR] [--missing 0.25 0.5 0.69]
                                                      [--seeds 0 1 2] [--methods ...]

The eight longest Hopkins155 sequences that are whole videos (37-100 frames: kanatani3, cars9,
head, cars4, people1, 1R2TCRT, 2T3RCRTP, cars5; K = 2 or 3, the truth's K given). Each track is
kept over one interval of frames (:func:`cvfs.motion.synthetic.partial_track_mask`, drawn with
each seed) so that the given share of the entries is missing; the hidden entries are set to
NaN. Methods (misclassification % per sequence, the mean over the seeds):

* ``windows``: :func:`cvfs.motion.segment` with K and ``visible`` (overlapping time windows,
  :func:`cvfs.motion.windows.segment_windows`);
* ``completion``: the trajectories completed at rank 4K
  (:func:`cvfs.motion.missing.complete_trajectories`) and the shipped ranker's pick among their
  candidates;
* ``perspective``: ``segment(..., camera="perspective")`` (two-view geometry on the observed
  entries, seed 0);
* ``auto``: ``segment(..., camera="auto")`` (the combined pool: the two-view candidates, the
  time-window labelling and the completed tracks' candidates, ranked by the shipped combined
  ranker, which was trained on all of Hopkins155 with complete tracks).

Writes ``benchmarks/results/motion/motion_partial_tracks.json``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.motion import rank_candidates, segment
from cvfs.motion.evaluate import misclassification
from cvfs.motion.missing import complete_trajectories
from cvfs.motion.synthetic import partial_track_mask

SEQUENCES = ("kanatani3", "cars9", "head", "cars4", "people1", "1R2TCRT", "2T3RCRTP", "cars5")
METHODS = ("windows", "completion", "perspective", "auto")


def run_method(method, points, visible, k):
    """Labels of one method with K given."""
    if method == "windows":
        return segment(points, k, visible=visible)
    if method == "completion":
        labels, scores = rank_candidates(complete_trajectories(points, visible, n_motions=k), k)
        return labels[int(np.argmax(scores))]
    if method == "auto":
        return segment(points, k, visible=visible, camera="auto")
    return segment(points, k, visible=visible, camera="perspective")


def sequence_rows(seq, missing, seeds, methods):
    """Per seed: the missing share and each method's error (%) and CPU seconds."""
    out = []
    for seed in seeds:
        vis = partial_track_mask(seq.n_points, seq.n_frames, missing, random_state=seed)
        pts = np.where(vis[..., None], seq.points, np.nan)
        row = {"seed": int(seed), "missing_%": 100.0 * (1.0 - vis.mean())}
        for m in methods:
            t = time.process_time()
            row[m] = 100.0 * float(misclassification(run_method(m, pts, vis, seq.n_motions),
                                                     seq.labels))
            row[f"{m}_cpu_s"] = time.process_time() - t
        out.append(row)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="Hopkins155 folder (default: $CVFS_DATA)")
    ap.add_argument("--missing", type=float, nargs="+", default=[0.25, 0.5, 0.69])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--sequences", nargs="+", default=list(SEQUENCES))
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    from cvfs.datasets.hopkins155 import load_hopkins155

    seqs = load_hopkins155(args.data, names=args.sequences)
    result = {"missing": args.missing, "seeds": args.seeds, "methods": args.methods,
              "sequences": {}}
    rows = []
    for missing in args.missing:
        per = {}
        for seq in tqdm(seqs, desc=f"missing {missing:.2f}"):
            per[seq.name] = sequence_rows(seq, missing, args.seeds, args.methods)
        result["sequences"][str(missing)] = per
        runs = [r for v in per.values() for r in v]
        means = {m: float(np.mean([r[m] for r in runs])) for m in args.methods}
        worst = {m: max(float(np.mean([r[m] for r in v])) for v in per.values())
                 for m in args.methods}
        cpu = {m: float(np.mean([r[f"{m}_cpu_s"] for r in runs])) for m in args.methods}
        rows.append([f"{np.mean([r['missing_%'] for r in runs]):.1f}"]
                    + [f"{means[m]:.2f} ({worst[m]:.1f})" for m in args.methods]
                    + ["/".join(f"{cpu[m]:.1f}" for m in args.methods)])
    print(format_table(["missing %"] + [f"{m} % (worst)" for m in args.methods]
                       + ["CPU s per sequence"], rows,
                       title=f"Partial tracks, {len(seqs)} long Hopkins155 sequences, K given, "
                       f"mean over seeds {args.seeds}"))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
