"""Build the Hopkins155 feature cache (candidates, features and candidate errors) in HDF5.

Usage::

    python data_prep/motion_features.py [--data DIR] [--out FILE] [--force]

``cvfs motion evaluate`` and ``data_prep/train_motion_ranker.py`` build the cache themselves when
it is missing or stale; this script does it ahead of time and prints the time per sequence. The
cache goes to ``$CVFS_CACHE`` or ``~/.cache/cvfs`` by default, never into the data home or the
repository.
"""

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from cvfs.datasets.hopkins155 import hopkins155_home, list_sequences, load_hopkins155  # noqa: E402
from cvfs.motion.cache import build_cache, cache_matches  # noqa: E402
from cvfs.motion.evaluate import default_cache_path  # noqa: E402


def main(argv=None):
    """Build the cache; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="Hopkins155 folder (default: data home)")
    parser.add_argument("--out", default=None, help="cache file (default: ~/.cache/cvfs/...)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    root = hopkins155_home(args.data)
    names = list_sequences(root)
    out = Path(args.out) if args.out else default_cache_path()
    if not args.force and cache_matches(out, names=names):
        print(f"{out} is up to date ({len(names)} sequences)")
        return 0
    seconds = build_cache(load_hopkins155(root, names=names), out, verbose=not args.quiet)
    print(f"{len(names)} sequences: candidates + features {1e3 * np.median(seconds):.0f} ms median "
          f"(wall), {seconds.sum():.0f} s total; written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
