"""Table VII test averages over several video-to-fold assignments (fold seeds).

Usage::

    python benchmarks/motion_fold_seeds.py [--data DIR] [--seeds 0 1 2 3 4]

One fold seed is one random split of the 50 videos into 10 folds; a single split flatters or
penalises a ranker by a few sequences (cars10 alone moves the three-motion average by 0.6), so
settings are compared on the mean over seeds. Cross-validates RankBoost, FSA-Rank with the default
``MotionRanker`` and FSA-Rank with the paper's pairs (``min_gap=None``: ties kept, r = 1/2) on the
cached features, prints test averages (percent; two / three / all) per seed and their mean, and
writes ``benchmarks/results/motion_fold_seeds.json``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from cvfs.datasets.hopkins155 import list_sequences, load_hopkins155  # noqa: E402
from cvfs.io import atomic_write_text  # noqa: E402
from cvfs.motion.cache import build_cache, cache_matches, load_cache  # noqa: E402
from cvfs.motion.evaluate import (  # noqa: E402
    cross_validate,
    default_cache_path,
    summarise,
    video_folds,
)
from cvfs.motion.ranking import MotionRanker, RankBoost  # noqa: E402

RANKERS = {
    "RankBoost": RankBoost,
    "FSA-Rank": MotionRanker,
    "FSA-Rank (paper pairs, min_gap=None)": lambda: MotionRanker(min_gap=None),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" /
                                             "motion_fold_seeds.json"))
    args = parser.parse_args(argv)
    names = list_sequences(args.data)
    cache = Path(args.cache) if args.cache else default_cache_path()
    if not cache_matches(cache, names=names):
        build_cache(load_hopkins155(args.data, names=names), cache)
    data, _ = load_cache(cache, names=names)
    result = {"seeds": args.seeds, "rankers": {}}
    t0 = time.perf_counter()
    for title, make in RANKERS.items():
        rows = []
        for seed in args.seeds:
            folds = video_folds(data.videos, data.raw_footage, 10, seed)
            test, _ = cross_validate(data, make, folds)
            s = summarise(test, data.categories, data.n_motions)
            rows.append([s["two"]["mean"], s["three"]["mean"], s["all"]["mean"]])
        rows = np.array(rows)
        result["rankers"][title] = {"per_seed": rows.tolist(), "mean": rows.mean(axis=0).tolist()}
        per_seed = "  ".join(f"{a:.2f}/{b:.2f}/{c:.2f}" for a, b, c in rows)
        m = rows.mean(axis=0)
        print(f"{title:38s} {per_seed}   mean {m[0]:.2f}/{m[1]:.2f}/{m[2]:.2f}")
    result["seconds"] = time.perf_counter() - t0
    print(f"(test averages %, two / three / all motions; seeds {args.seeds}; "
          f"{result['seconds']:.0f} s)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(result, indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
