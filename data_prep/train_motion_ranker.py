"""Train the shipped motion rankers: the affine pipeline's (FSA-Rank) on all 155 Hopkins155
sequences, and with ``--combined`` the combined pool's on Hopkins155 and KT3DMoSeg together.

Usage::

    python data_prep/train_motion_ranker.py [--data DIR] [--cache FILE]
        [--out cvfs/models/motion_ranker.h5]
    python data_prep/train_motion_ranker.py --combined [--data DIR] [--kt3dmoseg DIR]
        [--cache DIR] [--out cvfs/models/motion_ranker_combined.h5]

Candidates and features come from the feature cache (built when missing or stale); the ranker is
trained with the paper's settings (B=4, k=40, N_iter=300, mu=300, lambda=0.01, all pairs of
candidates of a sequence with r = 1, 1/2, 0; see ``benchmarks/motion/motion_fold_seeds.py``), learns
the cluster floor (``cluster_floor=True``) and is written with
:func:`cvfs.motion.ranking.save_ranker` together with the candidate pool it expects.

``--combined``: the pools of :mod:`cvfs.motion.combined` (two-view and affine candidates, K
given, seed 0) of every Hopkins155 sequence (pixel tracks) and every KT3DMoSeg clip (with its
visibility mask), built and cached by ``benchmarks/motion/motion_cross_ranker.py``'s pool
builder (``--cache``, default ``$CVFS_CACHE`` or ``~/.cache/cvfs``, about 25 min CPU when
empty), and a :class:`~cvfs.motion.ranking.MotionRanker` with default settings and no cluster
floor trained on all of them: the ranker that script cross-validates as "+ affine, both".
"""

import argparse
import hashlib
import logging
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.datasets.hopkins155 import hopkins155_home, list_sequences, load_hopkins155  # noqa: E402
from cvfs.motion.cache import build_cache, cache_matches, load_cache, pool_settings  # noqa: E402
from cvfs.motion.evaluate import default_cache_path  # noqa: E402
from cvfs.motion.ranking import MotionRanker, save_ranker  # noqa: E402

log = logging.getLogger("train_motion_ranker")


def main(argv=None):
    """Train and save the ranker; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="Hopkins155 folder (default: data home)")
    parser.add_argument("--cache", default=None, help="feature cache (default: ~/.cache/cvfs)")
    parser.add_argument("--out", default=str(REPO / "cvfs" / "models" / "motion_ranker.h5"))
    parser.add_argument("--seed", type=int, default=0, help="random_state of the ranker")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--combined", action="store_true",
                        help="train the combined pool's ranker (Hopkins155 and KT3DMoSeg)")
    parser.add_argument("--kt3dmoseg", default=None,
                        help="KT3DMoSeg folder (--combined; default: data home)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.combined:
        return train_combined(args)

    root = hopkins155_home(args.data)
    names = list_sequences(root)
    cache = Path(args.cache) if args.cache else default_cache_path()
    if not cache_matches(cache, names=names):
        build_cache(load_hopkins155(root, names=names), cache, verbose=not args.quiet)
    data, _ = load_cache(cache, names=names)
    t0 = time.perf_counter()
    ranker = MotionRanker(random_state=args.seed).fit(data.X, data.errors, data.groups)
    elapsed = time.perf_counter() - t0
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode())
    digest.update(np.ascontiguousarray(data.X).tobytes())
    digest.update(np.ascontiguousarray(data.errors).tobytes())
    chosen = data.errors_of(ranker.select(data.X, data.groups))
    training = {
        "data": "Hopkins155 (Tron & Vidal 2007), all 155 sequences",
        "n_sequences": len(names), "n_candidates": int(data.X.shape[0]),
        "features_sha256": digest.hexdigest(),
        "command": "python data_prep/train_motion_ranker.py",
        "train_error_percent": float(100 * chosen.mean()), "fit_seconds": elapsed,
    }
    save_ranker(args.out, ranker, settings=pool_settings(), training=training)
    print(f"motion ranker: {len(names)} sequences, {data.X.shape[0]} candidates, "
          f"{data.X.shape[1]} features; fit {elapsed:.1f} s; training error "
          f"{100 * chosen.mean():.2f}%; selected {ranker.estimator_.support_.sum()} features; "
          f"cluster floor {ranker.cluster_floor_:.3f}")
    print(f"written {args.out}")
    return 0


def train_combined(args):
    """Train and save the combined pool's ranker; returns the exit code."""
    from benchmarks.motion.motion_cross_ranker import (
        _stack,
        default_cache,
        hopkins_pools,
        kt3dmoseg_pools,
    )
    from cvfs.motion.combined import POOL, affine_settings
    from cvfs.motion.geometry_features import n_geometry_features
    from cvfs.motion.ranking import select_best

    out = Path(args.out)
    if out.name == "motion_ranker.h5":
        out = out.with_name("motion_ranker_combined.h5")
    cache = Path(args.cache) if args.cache else default_cache()
    rows = (hopkins_pools(args.data, cache, affine_pool=True, seed=0)
            + kt3dmoseg_pools(args.kt3dmoseg, cache, affine_pool=True, seed=0))
    X, E, G = _stack(rows)
    t0 = time.perf_counter()
    ranker = MotionRanker(cluster_floor=False, random_state=args.seed).fit(X, E, G)
    elapsed = time.perf_counter() - t0
    digest = hashlib.sha256()
    for r in rows:
        digest.update(r["name"].encode())
    digest.update(np.ascontiguousarray(X).tobytes())
    digest.update(np.ascontiguousarray(E).tobytes())
    chosen = E[select_best(ranker.decision_function(X), G)]
    sets = np.array([r["set"] for r in rows])
    train_err = {s: float(100 * chosen[sets == s].mean()) for s in ("hopkins155", "kt3dmoseg")}
    training = {
        "data": "Hopkins155 (Tron & Vidal 2007), all 155 sequences; KT3DMoSeg (Xu et al. "
                "2018), all 22 clips",
        "n_sequences": len(rows), "n_candidates": int(X.shape[0]),
        "features_sha256": digest.hexdigest(),
        "command": "python data_prep/train_motion_ranker.py --combined",
        "train_error_percent": train_err, "fit_seconds": elapsed,
    }
    affine = affine_settings()  # stored as lists: the model file's settings are JSON
    settings = dict(affine, alphas=list(affine["alphas"]), refine=list(affine["refine"]),
                    pool=POOL, feature_version=1, n_features=n_geometry_features(),
                    geometry_seed=0)
    save_ranker(out, ranker, settings=settings, training=training)
    print(f"combined motion ranker: {len(rows)} sequences, {X.shape[0]} candidates, "
          f"{X.shape[1]} features; fit {elapsed:.1f} s; training error Hopkins155 "
          f"{train_err['hopkins155']:.2f} %, KT3DMoSeg {train_err['kt3dmoseg']:.2f} %; selected "
          f"{ranker.estimator_.support_.sum()} features")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
