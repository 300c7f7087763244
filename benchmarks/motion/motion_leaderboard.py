"""Motion segmentation leaderboard: Hopkins155 (Table VII), KT3DMoSeg (K given and K chosen) and
the shared videos, cvfs beside the baselines run here.

Usage::

    python benchmarks/motion/motion_leaderboard.py [--data DIR] [--seeds 0 1 2]
        [--parts hopkins kt3dmoseg perspective videos auto] [--clips N] [--videos NAME ...]
        [--hopkins-ssc] [--jobs N]

One table of misclassification % (mean over the sequences of each set; two / three / all motions
for Hopkins155), each entry the mean over ``--seeds``:

* **Hopkins155, Table VII**: FSA-Rank (:class:`cvfs.motion.ranking.MotionRanker`) tested by
  10-fold cross-validation by video (:func:`cvfs.motion.evaluate.cross_validate` on the cached
  features of :func:`cvfs.motion.evaluate.evaluate_hopkins155`), one fold assignment per seed;
  the oracle of the candidate pool (the best candidate per sequence; no seed). With
  ``--hopkins-ssc``, SSC (``motion_kt3dmoseg.ssc_affinity``, spectral clustering seeded by each
  seed) on every sequence, K given.
* **KT3DMoSeg** (``motion_kt3dmoseg.clip_row``): :func:`cvfs.motion.segment` with K given and
  with K chosen (``n_motions=None``; deterministic, no seed), the ranker's pick and the oracle of
  the candidate pool of the rank-4K completion,
  and SSC on the same rank-4K completion (the spectral clustering seeded by each seed).
* **KT3DMoSeg, perspective** (``--parts perspective``): :func:`cvfs.motion.segment` with
  ``camera="perspective"`` (two-view-geometry candidates on the observed entries), K given and
  K chosen (:func:`cvfs.motion.geometry_k.best_labellings_by_k`: the affinities computed once
  per seed, each K's best candidate; K given takes the true K's, which is
  ``segment(points, K, visible=mask, camera="perspective")``'s, K chosen
  :func:`cvfs.motion.geometry_k.choose_k_by_cuts`'s, which is ``segment(points, None, ...)``'s),
  the hypothesis-sampling and k-means seed ``--seeds``; "K right" sums the clips given their
  true K over the seeds.
* **auto** (``--parts auto``): ``segment(..., camera="auto")`` on Hopkins155 and KT3DMoSeg with
  K given and K chosen, each held-out fold ranked by a ranker trained on the other folds and the
  other set (``motion_combined.evaluate_set``: pools from ``motion_cross_ranker``'s cache, seed
  0; ``--jobs`` processes), and on the videos (``motion_videos.video_row`` with
  ``camera="auto"``).
* **Videos** (``motion_videos.video_row``, default tracker): :func:`cvfs.motion.video.segment_video`
  with K chosen and with K given (the motions in the video), per-track error of the matched tracks
  (deterministic, no seed); "K right" counts the videos given the truth's K.

Writes ``benchmarks/results/motion/motion_leaderboard.json`` (every per-sequence number too).
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
from benchmarks.motion import motion_kt3dmoseg as kt
from benchmarks.motion import motion_videos as mv

PARTS = ("hopkins", "kt3dmoseg", "perspective", "videos", "auto")


def _fmt(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}"


def hopkins_part(data_dir, seeds, ssc=False):
    """Table VII test means (two / three / all) of FSA-Rank per fold seed, the pool's oracle
    and, with ``ssc``, SSC per seed; per-sequence errors (%) in ``per_sequence``."""
    from cvfs.datasets.hopkins155 import list_sequences, load_hopkins155
    from cvfs.motion import normalise_points
    from cvfs.motion.cache import build_cache, cache_matches, load_cache
    from cvfs.motion.evaluate import (
        cross_validate,
        default_cache_path,
        misclassification,
        summarise,
        video_folds,
    )
    from cvfs.motion.missing import trajectory_matrix
    from cvfs.motion.ranking import MotionRanker

    cache = default_cache_path()
    names = list_sequences(data_dir)
    if not cache_matches(cache, names=names):
        build_cache(load_hopkins155(data_dir, names=names), cache, verbose=True)
    data, _ = load_cache(cache, names=names)

    def means(err):
        s = summarise(err, data.categories, data.n_motions)
        return [s["two"]["mean"], s["three"]["mean"], s["all"]["mean"]]

    out = {"n": int(data.n_sequences), "FSA-Rank": [], "per_sequence": {}}
    for seed in seeds:
        folds = video_folds(data.videos, data.raw_footage, 10, seed)
        test, _ = cross_validate(data, MotionRanker, folds)
        out["FSA-Rank"].append(means(test))
        out["per_sequence"][f"FSA-Rank seed {seed}"] = (100 * test).tolist()
    oracle = data.oracle()
    out["oracle"] = [means(oracle)]
    out["per_sequence"]["oracle"] = (100 * oracle).tolist()
    if ssc:
        errs = np.zeros((len(seeds), len(names)))
        seqs = load_hopkins155(data_dir, names=names)
        for i, s in enumerate(tqdm(seqs, desc="Hopkins155 SSC")):
            aff = kt.ssc_affinity(trajectory_matrix(normalise_points(s.points)))
            for j, seed in enumerate(seeds):
                errs[j, i] = misclassification(kt.ssc_cluster(aff, s.n_motions,
                                                              random_state=seed), s.labels)
        out["SSC"] = [means(e) for e in errs]
        out["per_sequence"]["SSC"] = (100 * errs.mean(axis=0)).tolist()
    out["names"] = list(data.names)
    return out


def kt3dmoseg_part(data_dir, seeds, n_clips=None):
    """Per clip: ``motion_kt3dmoseg.clip_row`` with K chosen, the pool's oracle and SSC over
    ``seeds``."""
    from cvfs.datasets.kt3dmoseg import load_kt3dmoseg

    clips = load_kt3dmoseg(data_dir)[:n_clips]
    rows = []
    for clip in tqdm(clips, desc="KT3DMoSeg"):
        rows.append(kt.clip_row(clip, choose_k=True, ssc_seeds=tuple(seeds), oracle=True))
        r = rows[-1]
        tqdm.write(f"{clip.name}: K={r['K']} given {r['cvfs']:.2f} chosen {r['cvfs_auto']:.2f} "
                   f"(K={r['K_chosen']}) oracle {r['oracle']:.2f} SSC {r['ssc']:.2f}")
    return rows


def perspective_part(data_dir, seeds, n_clips=None):
    """Per clip: ``camera="perspective"`` errors (%) with K given and K chosen, and the K
    chosen, per seed (``given``, ``chosen``, ``K_chosen``)."""
    from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
    from cvfs.motion.geometry_k import best_labellings_by_k, choose_k_by_cuts
    from cvfs.motion.missing import MIN_OBSERVED

    rows = []
    for clip in tqdm(load_kt3dmoseg(data_dir)[:n_clips], desc="KT3DMoSeg, perspective"):
        ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
        pts, vis, k = clip.points[ok], clip.visible[ok], clip.n_motions
        row = {"clip": clip.name, "K": k, "given": [], "chosen": [], "K_chosen": [],
               "scores": []}
        t = time.process_time()
        for seed in seeds:
            labels, scores = best_labellings_by_k(pts, vis, random_state=int(seed))
            kc = choose_k_by_cuts(scores)
            row["given"].append(kt._error(labels[k], clip.labels, ok))
            row["chosen"].append(kt._error(labels[kc], clip.labels, ok))
            row["K_chosen"].append(int(kc))
            row["scores"].append({str(kk): v for kk, v in scores.items()})
        row["cpu_s"] = (time.process_time() - t) / len(seeds)
        rows.append(row)
        tqdm.write(f"{clip.name}: K={k} given {np.mean(row['given']):.2f} chosen "
                   f"{np.mean(row['chosen']):.2f} (K={row['K_chosen']})")
    return rows


def videos_part(data_dir, names):
    from cvfs.motion.tracking import TrackerSettings

    return [mv.video_row(data_dir, name, TrackerSettings()) for name in tqdm(names, desc="videos")]


def auto_part(data_dir, names, jobs=1, n_clips=None):
    """``camera="auto"``: per-sequence results of ``motion_combined.evaluate_set`` for both sets
    (``hopkins155``, ``kt3dmoseg``; ``n_clips``: the first N of each) and the video rows
    (``videos``)."""
    from types import SimpleNamespace

    from benchmarks.motion import motion_combined as mc
    from cvfs.motion.tracking import TrackerSettings

    opts = SimpleNamespace(hopkins=data_dir / "hopkins155", kt3dmoseg=data_dir / "motion_kt3dmoseg",
                           no_k_chosen=False, jobs=jobs)
    cache = mc.default_cache()
    sets = {"hopkins155": mc.hopkins_pools(opts.hopkins, cache, n_clips, True, 0),
            "kt3dmoseg": mc.kt3dmoseg_pools(opts.kt3dmoseg, cache, n_clips, True, 0)}
    out = {name: mc.evaluate_set(rows, [r for n, rs in sets.items() if n != name for r in rs],
                                 opts)
           for name, rows in sets.items()}
    out["videos"] = [mv.video_row(data_dir, name, TrackerSettings(), "auto")
                     for name in tqdm(names, desc="videos, auto")]
    return out


def _auto_rows(auto):
    rows = []
    for key, label in (("hopkins155", "Hopkins155"), ("kt3dmoseg", "KT3DMoSeg")):
        res = list(auto[key].values())
        name = f"{label} ({len(res)})"
        by = [[r for r in res if r["K"] == 2], [r for r in res if r["K"] == 3]]
        for method, err in (("cvfs auto, K given (CV by sequence)", "given"),
                            ("cvfs auto, K chosen (CV by sequence)", "chosen")):
            two, three = (_fmt(np.mean([r[err] for r in g])) if g else "" for g in by)
            right = (f"{sum(r['k_chosen'] == r['K'] for r in res)}/{len(res)}"
                     if err == "chosen" else "")
            rows.append([name, method, two if key == "hopkins155" else "",
                         three if key == "hopkins155" else "",
                         _fmt(np.mean([r[err] for r in res])), right])
    vids = auto["videos"]
    name = f"videos ({len(vids)})"
    rows.append([name, "cvfs auto, K given", "", "",
                 _fmt(np.mean([r["error_given"] for r in vids])), ""])
    rows.append([name, "cvfs auto, K chosen", "", "",
                 _fmt(np.mean([r["error_chosen"] for r in vids])),
                 f"{sum(r['k_chosen'] == r['k_truth'] for r in vids)}/{len(vids)}"])
    return rows


def leaderboard(result, seeds):
    """The rows ``[set, method, two %, three %, all %, K right]`` of the printed table."""
    rows = []
    hop = result.get("hopkins")
    if hop:
        for method, key in (("cvfs FSA-Rank, K given (10-fold CV)", "FSA-Rank"),
                            ("SSC, K given", "SSC"), ("oracle of the pool", "oracle")):
            if key in hop:
                m = np.mean(hop[key], axis=0)
                rows.append([f"Hopkins155 ({hop['n']})", method, _fmt(m[0]), _fmt(m[1]),
                             _fmt(m[2]), ""])
    clips = result.get("kt3dmoseg")
    if clips:
        name = f"KT3DMoSeg ({len(clips)})"
        right = sum(r["K_chosen"] == r["K"] for r in clips)
        for method, key, k_right in (("cvfs, K given", "cvfs", ""),
                                     ("cvfs, K chosen", "cvfs_auto", f"{right}/{len(clips)}"),
                                     ("cvfs, rank-4K completion, K given", "completed", ""),
                                     ("SSC, K given", "ssc", ""),
                                     ("oracle of the completed pool, K given", "oracle", "")):
            if key not in clips[0]:
                continue
            rows.append([name, method, "", "", _fmt(np.mean([r[key] for r in clips])), k_right])
    clips = result.get("perspective")
    if clips:
        name = f"KT3DMoSeg ({len(clips)})"
        n_runs = sum(len(r["K_chosen"]) for r in clips)
        right = sum(kc == r["K"] for r in clips for kc in r["K_chosen"])
        rows.append([name, "cvfs perspective, K given", "", "",
                     _fmt(np.mean([np.mean(r["given"]) for r in clips])), ""])
        rows.append([name, "cvfs perspective, K chosen", "", "",
                     _fmt(np.mean([np.mean(r["chosen"]) for r in clips])),
                     f"{right}/{n_runs}"])
    vids = result.get("videos")
    if vids:
        name = f"videos ({len(vids)})"
        right = sum(r["k_chosen"] == r["k_truth"] for r in vids)
        rows.append([name, "cvfs, K given", "", "",
                     _fmt(np.mean([r["error_given"] for r in vids])), ""])
        rows.append([name, "cvfs, K chosen", "", "",
                     _fmt(np.mean([r["error_chosen"] for r in vids])), f"{right}/{len(vids)}"])
    if result.get("auto"):
        rows += _auto_rows(result["auto"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: $CVFS_DATA)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                    help="fold seeds of Table VII and SSC's spectral-clustering seeds")
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--clips", type=int, default=None,
                    help="only the first N KT3DMoSeg clips (auto: also of Hopkins155)")
    ap.add_argument("--videos", nargs="+", default=None, help="only these videos")
    ap.add_argument("--hopkins-ssc", action="store_true",
                    help="also SSC on every Hopkins155 sequence (slow)")
    ap.add_argument("--jobs", type=int, default=1, help="processes of the auto part's K chosen")
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    from cvfs.datasets import data_home
    from cvfs.datasets.hopkins155_videos import VIDEO_TRUTH

    data = Path(args.data) if args.data else Path(data_home())
    result, seconds = {"seeds": args.seeds}, {}
    if "hopkins" in args.parts:
        t = time.process_time()
        result["hopkins"] = hopkins_part(data / "hopkins155", args.seeds, ssc=args.hopkins_ssc)
        seconds["hopkins"] = time.process_time() - t
    if "kt3dmoseg" in args.parts:
        t = time.process_time()
        result["kt3dmoseg"] = kt3dmoseg_part(data / "motion_kt3dmoseg", args.seeds, args.clips)
        seconds["kt3dmoseg"] = time.process_time() - t
    if "perspective" in args.parts:
        t = time.process_time()
        result["perspective"] = perspective_part(data / "motion_kt3dmoseg", args.seeds,
                                                 args.clips)
        seconds["perspective"] = time.process_time() - t
    if "videos" in args.parts:
        t = time.process_time()
        result["videos"] = videos_part(data, args.videos or list(VIDEO_TRUTH))
        seconds["videos"] = time.process_time() - t
    if "auto" in args.parts:
        t = time.process_time()
        result["auto"] = auto_part(data, args.videos or list(VIDEO_TRUTH), args.jobs,
                                   args.clips)
        seconds["auto"] = time.process_time() - t
    result["cpu_seconds"] = seconds
    rows = leaderboard(result, args.seeds)
    result["table"] = rows
    print(format_table(["set", "method", "2 motions %", "3 motions %", "all %", "K right"], rows,
                       title=f"Motion segmentation, misclassification % (mean over seeds "
                       f"{args.seeds} where a method has one)"))
    print("CPU seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
